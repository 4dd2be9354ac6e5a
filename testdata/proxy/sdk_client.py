"""One call of an official SDK, for crates/proxy/tests/proxy.rs.

Usage: sdk_client.py '{"sdk": "anthropic"|"openai"|"openai-responses", "base_url": URL,
  "mode": "ok"|"413"|"overflow"|"reset"|"waf", "stream": bool, "size": BYTES, "raw": bool,
  "session": ID|null, "turns": N}'

Prints one JSON line: {"status", "raw_sha", "raw_len", "text", "error"}. With "raw" the SDK's raw
response bytes are hashed (the proxy must relay them unchanged); otherwise the parsed result's text.
"""
import hashlib
import json
import sys

spec = json.loads(sys.argv[1])
sdk = spec["sdk"]
size = int(spec.get("size", 2000))
turns = int(spec.get("turns", 30))
headers = {"x-test-mode": spec.get("mode", "ok")}
if spec.get("session"):
    headers["x-salvage-session"] = spec["session"]

system = "You are a careful coding agent. Follow the task."
history = []
chunk = max(1, size // max(1, turns))
for i in range(turns):
    role = "user" if i % 2 == 0 else "assistant"
    history.append({"role": role, "content": f"turn {i}: " + ("lorem ipsum dolor " * (chunk // 18 + 1))[:chunk]})
if history and history[-1]["role"] == "user":
    history.append({"role": "assistant", "content": "noted"})
history.append({"role": "user", "content": "TASK: summarise the files above in one line."})

out = {"status": None, "raw_sha": None, "raw_len": None, "text": None, "error": None}


def digest(b):
    out["raw_sha"] = hashlib.sha256(b).hexdigest()
    out["raw_len"] = len(b)


try:
    if sdk == "anthropic":
        import anthropic

        c = anthropic.Anthropic(api_key="sk-ant-test-KEY", base_url=spec["base_url"], max_retries=0,
                                default_headers=headers)
        kw = dict(model="claude-sonnet-4-5", max_tokens=256, system=system, messages=history)
        if spec.get("raw"):
            if spec.get("stream"):
                with c.messages.with_streaming_response.create(stream=True, **kw) as r:
                    out["status"] = r.http_response.status_code
                    digest(b"".join(r.iter_bytes()))
            else:
                r = c.messages.with_raw_response.create(**kw)
                out["status"] = r.http_response.status_code
                digest(r.http_response.content)
        elif spec.get("stream"):
            with c.messages.stream(**kw) as s:
                out["text"] = "".join(s.text_stream)
            out["status"] = 200
        else:
            m = c.messages.create(**kw)
            out["text"] = "".join(b.text for b in m.content if b.type == "text")
            out["status"] = 200
    else:
        import openai

        c = openai.OpenAI(api_key="sk-test-KEY", base_url=spec["base_url"], max_retries=0, default_headers=headers)
        msgs = [{"role": "system", "content": system}] + history
        if sdk == "openai":
            kw = dict(model="gpt-4o", messages=msgs)
            api = c.chat.completions
        else:
            kw = dict(model="gpt-4o", instructions=system, input=history)
            api = c.responses
        if spec.get("raw"):
            if spec.get("stream"):
                with api.with_streaming_response.create(stream=True, **kw) as r:
                    out["status"] = r.http_response.status_code
                    digest(b"".join(r.iter_bytes()))
            else:
                r = api.with_raw_response.create(**kw)
                out["status"] = r.http_response.status_code
                digest(r.http_response.content)
        elif spec.get("stream"):
            text = []
            for ev in api.create(stream=True, **kw):
                if sdk == "openai":
                    if ev.choices and ev.choices[0].delta.content:
                        text.append(ev.choices[0].delta.content)
                elif getattr(ev, "type", "") == "response.output_text.delta":
                    text.append(ev.delta)
            out["text"] = "".join(text)
            out["status"] = 200
        else:
            r = api.create(**kw)
            out["text"] = r.choices[0].message.content if sdk == "openai" else r.output_text
            out["status"] = 200
except Exception as e:  # the test compares what the client saw
    status = getattr(e, "status_code", None)
    out["status"] = status
    body = getattr(getattr(e, "response", None), "text", None) if status else None
    out["error"] = f"{type(e).__name__}: {body if body is not None else e}"
print(json.dumps(out))
