"""Writes the large bodies of this folder from the samples beside them (run from the repository
root: `python3 testdata/imports/make.py`). Each repeats its format's sample conversations,
ids made unique per round, until the list is long enough to be converted on several threads
(`crates/wire/src/par_list.rs`), with texts that redaction must cut, escapes and multi-byte
characters in between."""
import glob
import json


def rounds(samples, count):
    out = []
    n = 0
    while len(out) < count:
        for messages in samples:
            text = json.dumps(messages)
            # Ids unique per round; the structure (pairs of calls and results) kept.
            text = text.replace('"toolu_', f'"toolu_r{n}_').replace('"tooluse_', f'"tooluse_r{n}_')
            out.extend(json.loads(text))
        extra = [
            f"round {n}: the key is sk-ant-api03-{n:0>8}AbCdEfGhIjKlMnOpQrStUv, do not share",
            f'round {n}: {{"db_password": "hunter-{n}-Secret"}} \u00e9\u2028\U0001d11e "quoted" \\ back\tslash',
            f"round {n}: plain prose about tokens, tasks and risk-free changes.\n" * 3,
        ]
        out.append({"role": "user", "content": extra[n % 3]})
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"noted {n}"}]})
        n += 1
    return out


def bedrock_rounds(samples, count):
    out = []
    n = 0
    while len(out) < count:
        for messages in samples:
            text = json.dumps(messages).replace('"toolUseId": "', f'"toolUseId": "r{n}_')
            out.extend(json.loads(text))
        out.append({"role": "user", "content": [{"text": f"round {n}: AKIAZ3MDNB2QYX7T{n % 10}PLE and \u00e9\u2028"}]})
        out.append({"role": "assistant", "content": [{"text": f"noted {n}"}]})
        n += 1
    return out


def main():
    anthropic = sorted(glob.glob("testdata/samples/anthropic/messages-*.json")) + [
        "testdata/requests/anthropic-agent-tools.json"
    ]
    bodies = [json.load(open(f)) for f in anthropic]
    top = dict(bodies[-1])
    top["messages"] = rounds([b["messages"] for b in bodies], 600)
    # Fields after the list too, in the order a client may send them.
    top["tools"] = json.load(open("testdata/samples/anthropic/messages-image-in-tool-result.json"))["tools"]
    top["metadata"] = {"user_id": "u-1", "api_key": "abcdefghij0123456789"}
    with open("testdata/imports/anthropic-many-messages.json", "w") as f:
        json.dump(top, f, indent=1, ensure_ascii=False)
        f.write("\n")

    bedrock = sorted(glob.glob("testdata/samples/bedrock/*.json"))
    bodies = [json.load(open(f)) for f in bedrock]
    top = dict(bodies[-1])
    top["messages"] = bedrock_rounds([b["messages"] for b in bodies], 400)
    with open("testdata/imports/bedrock-many-messages.json", "w") as f:
        json.dump(top, f, ensure_ascii=True)


main()
