#!/usr/bin/env python3
"""Grows real request bodies and session files from testdata/samples/ into failing sessions and
imports them into the corpus BY THE IMPORTERS (`salvage import --from auto`), one failure each.

Run from the repository root with the salvage binary:

    python3 testdata/corpus/import_samples.py target/debug/salvage

1. Every sample is grown in a documented, format-preserving way (the text of one block replaced
   by a long real text, or one tool-call/tool-result turn pair repeated with new ids); every other
   field stays exactly as in the sample. The grown bodies go to testdata/requests/grown/, and
   testdata/requests/grown/README.md gets a line per body (sample, what was grown).
2. `salvage import --from auto BODY --status … --message … [gateway/model flags] -o
   testdata/corpus/imported-<name>.json` imports each one; the failure text is a real wording from
   testdata/provider-errors/*.json (looked up by file and entry name, so its source is cited there).
3. The script then sets `title` and `expect` on each capture. The expectations, `expect.events`
   included, are written by hand from the spec (the rule each comes from is in `rule`), never
   blessed from a replay's output.

The long texts are real files of this repository read at a pinned commit (PIN), so the bodies
are the same on every run. Deterministic; needs git and python3 only.
"""
import json, os, subprocess, sys

ROOT = os.getcwd()
SAMPLES = os.path.join(ROOT, "testdata/samples")
GROWN = os.path.join(ROOT, "testdata/requests/grown")
CORPUS = os.path.join(ROOT, "testdata/corpus")
ERRORS = os.path.join(ROOT, "testdata/provider-errors")
PIN = "66cae0b"  # the commit whose files provide the long texts (never changes)

if len(sys.argv) != 2:
    sys.exit("usage: python3 testdata/corpus/import_samples.py PATH/TO/salvage")
SALVAGE = os.path.abspath(sys.argv[1])


# --- long real texts -------------------------------------------------------------------------
def git_show(path):
    return subprocess.run(["git", "show", f"{PIN}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout

_SOURCES = None
def source_text(n, skip=0):
    """`n` bytes (ASCII-safe cut at a line end) of the Rust sources of the repository at PIN, as
    `cat` would print them one after another; `skip` files are skipped first so two chunks differ."""
    global _SOURCES
    if _SOURCES is None:
        files = subprocess.run(["git", "ls-tree", "-r", "--name-only", PIN, "crates/"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.split()
        _SOURCES = [f for f in sorted(files) if f.endswith(".rs")]
    out, size, i = [], 0, skip
    while size < n:
        f = _SOURCES[i % len(_SOURCES)]
        t = f"// ===== {f} =====\n" + git_show(f)
        out.append(t); size += len(t.encode()); i += 1
    text = "".join(out).encode()[:n].decode("utf-8", "ignore")
    return text[: text.rfind("\n") + 1]

def prose_text(n, doc="README.md"):
    """`n` bytes of real prose (a Markdown document of the repository at PIN), cut at a line end."""
    t = git_show(doc)
    while len(t.encode()) < n:
        t += "\n" + git_show(doc)
    t = t.encode()[:n].decode("utf-8", "ignore")
    return t[: t.rfind("\n") + 1]

def wording(file, name):
    """A real error wording from testdata/provider-errors/FILE.json (its `source` cites it)."""
    for e in json.load(open(os.path.join(ERRORS, file + ".json"))):
        if e["name"] == name:
            return e
    raise KeyError(f"{file}.json: no entry {name!r}")


# --- the expectation helpers (as in generate.py) ------------------------------------------------
def ev(kind, rule, count=None, min=None, max=None, **where):
    """An expected journal event, with the spec rule it comes from (written by hand, never blessed)."""
    e = {"kind": kind, "rule": rule}
    if count is not None: e["count"] = count
    if min is not None: e["min"] = min
    if max is not None: e["max"] = max
    if where: e["where"] = where
    return e

def E(outcome, level=None, max_attempts=None, notice=None, cap=None, events=None):
    e = {"outcome": outcome}
    if events: e["events"] = events
    if max_attempts is not None: e["max_attempts"] = max_attempts
    if level is not None: e["level"] = level
    if notice is not None: e["notice_injected"] = notice
    if cap is not None: e["cap_learned_bytes"] = cap
    return e

ASSUMED_CAP = 4 * 1024 * 1024  # behavior.md §3: size unknown and no cap → assume 4 MB


# --- growing --------------------------------------------------------------------------------
README_LINES = []

def load(sample):
    return json.load(open(os.path.join(SAMPLES, sample)))

def write_grown(name, body, sample, how):
    os.makedirs(GROWN, exist_ok=True)
    path = os.path.join(GROWN, name + ".json")
    with open(path, "w") as f:
        json.dump(body, f, ensure_ascii=False, indent=1)
        f.write("\n")
    README_LINES.append(f"| `{name}.json` | `{sample}` | {how} |")
    return path

def new_id(old, i):
    """A new id of the same shape: the last characters replaced by a counter."""
    tag = f"r{i:03d}"
    return old[: len(old) - len(tag)] + tag

def imp(name, body, args, title, expect, patch=None):
    """Imports BODY with `salvage import --from auto`, then sets title and expect (and, for the
    output limit, the scripted responses) on the written capture."""
    out = os.path.join(CORPUS, f"imported-{name}.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATCLI_")}
    cmd = [SALVAGE, "import", "--from", "auto", body, "--id", f"imported-{name}", "-o", out] + [str(a) for a in args]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        sys.exit(f"salvage import failed for {name} (exit {r.returncode})")
    c = json.load(open(out))
    c["title"] = title
    if patch:
        patch(c)
    c["expect"] = expect
    with open(out, "w") as f:
        json.dump(c, f, ensure_ascii=False, indent=1)
        f.write("\n")

def F(entry):
    """`--status/--message/--transport` of a provider-errors entry."""
    a = []
    if entry["status"] is not None: a += ["--status", entry["status"]]
    a += ["--message", entry["message"]]
    if entry.get("transport"): a += ["--transport", entry["transport"]]
    return a


# === 1. OpenAI chat: context_length_exceeded; one tool result grown to 60 KB; rung 1 ===========
s = "openai-chat/chat-tool-calls-tool-role-input-audio.json"
b = load(s)
tool = next(m for m in b["messages"] if m["role"] == "tool")
tool["content"] = source_text(60_000)
p = write_grown("openai-chat-tool-result-60k", b, s, "the `tool` message's content (`See file 4660af.`) replaced by 60 000 bytes of Rust source (the file the tool returned)")
imp("openai-chat-overflow", p,
    F(wording("openai-chat", "context_length_exceeded")) + ["--context-window", 8000, "--overflow-style", "openai"],
    "OpenAI chat body (real, tool role + input_audio) with a 60 KB tool result over an 8k-token window: context_length_exceeded, rung 1's halved tool-result budget recovers",
    E("recovered", level=1, max_attempts=1, notice=False, events=[
        ev("provider_error", "behavior.md §2: OpenAI `context_length_exceeded` / `maximum context length` is context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 rung 1: the 60 KB result is over the halved per-result limit (10 000) and becomes a preview", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: the payload notice is only for the payload path", count=0),
        ev("cap_learned", "§3.1: no cap is learned for a context overflow", count=0)]))

# === 2. OpenAI chat: nginx 413 (no size); the tool-call turn repeated 40×; rung 2 ==============
s = "openai-chat/chat-image-url-part.json"
b = load(s)
i = next(k for k, m in enumerate(b["messages"]) if m.get("tool_calls"))
call, res = b["messages"][i], b["messages"][i + 1]
pairs = []
for n in range(40):
    c2, r2 = json.loads(json.dumps(call)), json.loads(json.dumps(res))
    nid = new_id(call["tool_calls"][0]["id"], n)
    c2["tool_calls"][0]["id"] = nid; r2["tool_call_id"] = nid
    r2["content"] = source_text(6_000, skip=n)
    pairs += [c2, r2]
b["messages"][i:i] = pairs
p = write_grown("openai-chat-40-tool-turns", b, s, "the assistant `tool_calls` / `tool` turn pair repeated 40 times before the original one, with new call ids and a 6 000-byte Rust source file as each new result")
imp("openai-chat-nginx-413", p,
    F(wording("nginx-413", "nginx html 413")) + ["--gateway-max-bytes", 131072, "--gateway-rejects-with", "http_413"],
    "OpenAI chat body (real, image_url part) grown to 41 tool turns behind nginx's 128 KB client_max_body_size: HTML 413 without a size; rung 1 has nothing over its limits, rung 2's window starts at the task message",
    E("recovered", level=2, max_attempts=2, notice=True, cap=ASSUMED_CAP, events=[
        ev("provider_error", "behavior.md §2: status 413 is payload_too_large", count=1, **{"class": "payload_too_large"}),
        ev("cap_learned", "§3.1: size unknown and no cap → 4 MB assumed", count=1, cap=ASSUMED_CAP),
        ev("floor_diagnosis", "§3.2: the floor diagnosis needs the rejected size", count=0),
        ev("recovery_attempt", "§4 no-op rule: 6 KB results are under rung 1's halved limits, nothing to cut", count=1, rung=1, outcome="skipped"),
        ev("recovery_attempt", "§4 rung 2: the last 10 messages, the kept part starting at a user message (here the last one, the task: the 10 begin with tool turns)", count=1, rung=2, outcome="applied"),
        ev("notice_injected", "§3.4: the payload notice once after a successful rung on the payload path", count=1),
        ev("request_sent", "§4: the skipped rung sends nothing", count=2)]))

# === 3. Anthropic: prompt is too long; the 225 KB pasted context restored; rung 3 ==============
s = "anthropic/messages-context-management-compaction.json"
b = load(s)
fox = "The quick brown fox jumps over the lazy dog. "
b["messages"][0]["content"][0]["text"] = "Remember this context: " + fox * 5000
p = write_grown("anthropic-pasted-context-225k", b, s, "the first user text block restored to its recorded size: `Remember this context: ` + the sentence repeated 5 000 times (225 KB; the sample cut the 225 KB original)")
imp("anthropic-overflow-pasted-context", p,
    F(wording("anthropic", "prompt too long")) + ["--context-window", 40000, "--overflow-style", "anthropic"],
    "Anthropic body (real, compaction block + context_management) with its 225 KB pasted context against a 40k-token window: rungs 1 and 2 are no-ops on 3 messages, rung 3's 4 000-byte cap recovers",
    E("recovered", level=3, max_attempts=3, notice=False, events=[
        ev("provider_error", "behavior.md §2: Anthropic `prompt is too long` is context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 no-op rule: rung 1 cuts only assistants and tool results; the pasted text is a user message", count=1, rung=1, outcome="skipped"),
        ev("recovery_attempt", "§4 no-op rule: rung 2 keeps the last 10 of 3 messages, nothing dropped", count=1, rung=2, outcome="skipped"),
        ev("recovery_attempt", "§4 rung 3: every kept message capped at 4 000 bytes, the original archived", count=1, rung=3, outcome="applied"),
        ev("request_sent", "§4: skipped rungs send nothing", count=2)]))

# === 4. Anthropic: 413 request_too_large; the turn pair repeated with long answers; rung 1 ====
s = "anthropic/messages-top-level-cache-control.json"
b = load(s)
u, a, last = b["messages"]
turns = []
for n in range(40):
    a2 = json.loads(json.dumps(a))
    a2["content"][0]["text"] = prose_text(8_000 + 10 * n)
    turns += [json.loads(json.dumps(u)), a2]
b["messages"] = turns + [last]
p = write_grown("anthropic-40-long-answers", b, s, "the user/assistant turn pair repeated 40 times, each assistant text block replaced by ~8 000 bytes of real Markdown prose (the repository README at the pinned commit); the last user question kept")
imp("anthropic-413-request-too-large", p,
    F(wording("anthropic", "413 request_too_large as the live API sends it")) + ["--gateway-max-bytes", 262144, "--gateway-rejects-with", "http_413", "--reports-request-size"],
    "Anthropic body (real, top-level cache_control) grown to 40 long answers: 413 request_too_large at a 256 KB limit that reports the size; cap learned at 3/4, rung 1 cuts every answer over 5 000 bytes",
    E("recovered", level=1, max_attempts=1, notice=True, events=[
        ev("provider_error", "behavior.md §2: a 413 that speaks only of size is payload_too_large", count=1, **{"class": "payload_too_large"}),
        ev("cap_learned", "§3.1: the reported size is known: cap = rejected × 3/4", count=1),
        ev("floor_diagnosis", "§3.2: system prompt + task are far below the rejected size", count=1, verdict="ok"),
        ev("recovery_attempt", "§4 rung 1: assistants over 5 000 bytes cut preserve-end", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: once, after a successful rung on the payload path", count=1)]))

# === 5. Anthropic: output limit; scripted max_tokens stop; one escalation ======================
s = "anthropic/messages-redacted-thinking.json"
p = write_grown("anthropic-redacted-thinking", load(s), s, "not grown (the sample as is): the failure is the answer's length, not the request")
def script_output_limit(c):
    c["upstream"]["model"] = {"context_window_tokens": 200000, "overflow_style": "anthropic", "max_output_tokens": 64000}
    c["upstream"]["responses"] = [
        {"stop_reason": "max_tokens", "content": "That string is a test trigger Anthropic documents for redacted thinking: the model's reasoning for the turn was"},
        {"stop_reason": "end_turn", "content": " returned encrypted as a redacted_thinking block, which clients must pass back unchanged."}]
imp("anthropic-output-limit", p, [],
    "Anthropic body (real, redacted_thinking) whose answer stops at max_tokens: max_tokens doubles from the model default once, the partial answer and the continuation are kept",
    E("no_failure", max_attempts=0, events=[
        ev("response_received", "behavior.md §8: the answer stopped at the output limit", count=1, stop_reason="max_tokens"),
        ev("token_escalation", "§8 [better]: doubled from the provider default (8 192 > the body's 4 096), never below it", count=1, **{"from": 8192, "to": 16384, "used": 1}),
        ev("response_received", "§8: the continuation ends the turn", count=1, stop_reason="end_turn"),
        ev("provider_error", "nothing was rejected", count=0)]),
    patch=script_output_limit)

# === 5b. Gemini: the body's own output limit above the default; escalation starts from it ======
s = "gemini/generatecontent-thought-parts-signature.json"
b = load(s)
b["generationConfig"]["maxOutputTokens"] = 16384
p = write_grown("gemini-max-output-tokens", b, s, "`generationConfig.maxOutputTokens: 16384` added (above the 4 096 default; the failure is the answer's length); nothing else changed")
def script_gemini_output_limit(c):
    c["upstream"]["model"] = {"context_window_tokens": 1048576, "overflow_style": "gemini", "max_output_tokens": 65536}
    c["upstream"]["responses"] = [
        {"stop_reason": "max_tokens", "content": "Crossing the street safely is a fundamental skill that requires awareness and patience. First, find a"},
        {"stop_reason": "end_turn", "content": " marked crosswalk or an intersection with traffic lights, and wait for the walk signal."}]
imp("gemini-body-output-limit", p, [],
    "Gemini body (real, thought parts) asking for 16 384 output tokens, whose answer stops at the limit: escalation doubles from the body's own maxOutputTokens, never from the lower default",
    E("no_failure", max_attempts=0, events=[
        ev("response_received", "behavior.md §8: the answer stopped at the output limit", count=1, stop_reason="max_tokens"),
        ev("token_escalation", "§8: doubled from the limit the request asked for (the body's generationConfig.maxOutputTokens 16 384 > the 4 096 default), never lowered", count=1, **{"from": 16384, "to": 32768, "used": 1}),
        ev("response_received", "§8: the continuation ends the turn", count=1, stop_reason="end_turn"),
        ev("provider_error", "nothing was rejected", count=0)]),
    patch=script_gemini_output_limit)

# === 6. OpenAI Responses: context window exceeded; the assistant answer grown; rung 1 ==========
s = "openai-responses/responses-reasoning-summary-code-interpreter-call.json"
b = load(s)
msg = next(m for m in b["input"] if m.get("type") == "message" and m.get("role") == "assistant")
msg["content"][0]["text"] = msg["content"][0]["text"] + "\n\n" + prose_text(48_000)
p = write_grown("responses-long-answer", b, s, "the assistant `output_text` kept and followed by 48 000 bytes of real Markdown prose (the repository README at the pinned commit)")
imp("responses-overflow", p,
    F(wording("openai-responses", "context window")) + ["--context-window", 8000, "--overflow-style", "openai"],
    "OpenAI Responses body (real, reasoning items + code_interpreter_call) with a 48 KB answer over an 8k-token window: 'Your input exceeds the context window', rung 1 cuts the answer",
    E("recovered", level=1, max_attempts=1, notice=False, events=[
        ev("provider_error", "behavior.md §2: OpenAI Responses `context window` / `context_length_exceeded` is context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 rung 1: the assistant message over 5 000 bytes is cut preserve-end", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: not the payload path", count=0)]))

# === 7. OpenAI Responses: unexpected EOF on a 720 KB body; rung 1 ===============================
s = "openai-responses/responses-reasoning-encrypted-function-call-phase.json"
b = load(s)
out = next(m for m in b["input"] if m.get("type") == "function_call_output")
out["output"] = source_text(720_000, skip=3)
p = write_grown("responses-function-output-720k", b, s, "the `function_call_output` output (`Potato City`) replaced by 720 000 bytes of Rust source")
imp("responses-eof-large", p,
    F(wording("resets", "unexpected EOF")) + ["--gateway-max-bytes", 262144, "--gateway-rejects-with", "eof"],
    "OpenAI Responses body (real, encrypted reasoning + phase) with a 720 KB function output: the gateway cuts the stream (unexpected EOF); likely payload, 4 MB cap assumed, rung 1 previews the output",
    E("recovered", level=1, max_attempts=1, notice=True, cap=ASSUMED_CAP, events=[
        ev("provider_error", "behavior.md §2 EOF rule: transport failure with history weight ≥ 500 000 is likely_payload", count=1, **{"class": "likely_payload"}),
        ev("cap_learned", "§3.1: size unknown, no cap → 4 MB assumed", count=1, cap=ASSUMED_CAP),
        ev("floor_diagnosis", "§3.2: no rejected size, no floor diagnosis", count=0),
        ev("recovery_attempt", "§4 rung 1: the 720 KB output is over the halved per-result limit", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: once on the payload path", count=1)]))

# === 8. Gemini: input token count exceeds; the functionCall turn repeated 300×; rung 2 =========
s = "gemini/generatecontent-functioncall-response-toolconfig.json"
b = load(s)
call, res = b["contents"][1], b["contents"][2]
turns = []
for n in range(300):
    c2, r2 = json.loads(json.dumps(call)), json.loads(json.dumps(res))
    nid = new_id(call["parts"][0]["functionCall"]["id"], n)
    c2["parts"][0]["functionCall"]["id"] = nid; r2["parts"][0]["functionResponse"]["id"] = nid
    turns += [c2, r2]
b["contents"][1:1] = turns
p = write_grown("gemini-300-function-turns", b, s, "the `model` functionCall / `user` functionResponse turn pair repeated 300 times before the original one, with new call ids (a looping agent); parts, args and thoughtSignature unchanged")
imp("gemini-overflow", p,
    F(wording("gemini", "input token count")) + ["--context-window", 4000, "--overflow-style", "gemini"],
    "Gemini generateContent body (real, functionCall + thoughtSignature + toolConfig) looping 301 tool turns over a 4k-token window: 'input token count … exceeds', rung 1 no-op, rung 2 keeps the last 10",
    E("recovered", level=2, max_attempts=2, notice=False, events=[
        ev("provider_error", "behavior.md §2: Gemini `input token count` … `exceeds` is context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 no-op rule: nothing over rung 1's limits", count=1, rung=1, outcome="skipped"),
        ev("recovery_attempt", "§4 rung 2: the last 10 messages, the task kept before them", count=1, rung=2, outcome="applied"),
        ev("request_sent", "§4: the skipped rung sends nothing", count=2)]))

# === 9. Gemini: 429 RESOURCE_EXHAUSTED: not recoverable ==========================================
s = "gemini/generatecontent-thought-parts-signature.json"
p = write_grown("gemini-thought-parts", load(s), s, "not grown (the sample as is): a quota error does not depend on size")
imp("gemini-429-not-recoverable", p, F(wording("gemini", "resource exhausted")),
    "Gemini body (real, thought parts + signatures) rejected with 429 RESOURCE_EXHAUSTED: rate limit, back off, never compact",
    E("not_recoverable", max_attempts=0, events=[
        ev("provider_error", "behavior.md §2: 429 is rate_limit, not recoverable by compaction", count=1, **{"class": "rate_limit"}),
        ev("recovery_attempt", "§2: no rung for a class compaction cannot fix", count=0),
        ev("request_sent", "the captured request only", count=1)]))

# === 10. Bedrock: WAF HTML 403 seen as the SDK's decode error; rung 1 ============================
s = "bedrock/converse-tooluse-reasoning-signature.json"
b = load(s)
tr = b["messages"][2]["content"][0]["toolResult"]
tr["content"][0]["text"] = source_text(160_000, skip=7)
p = write_grown("bedrock-tool-result-160k", b, s, "the toolResult text (`Mexico`) replaced by 160 000 bytes of Rust source")
imp("bedrock-waf-html-403", p,
    F(wording("aws-sdk-html", "html 403 decoded as json")) + ["--gateway-max-bytes", 131072, "--gateway-rejects-with", "waf_html_403"],
    "Bedrock Converse body (real, reasoningContent with signature + toolUse) with a 160 KB tool result behind a corporate proxy's 128 KB HTML block page: the SDK's decode error is a WAF rejection, rung 1 previews the result",
    E("recovered", level=1, max_attempts=1, notice=True, cap=ASSUMED_CAP, events=[
        ev("provider_error", "behavior.md §2: 403 + `invalid character '<'` / `deserialization failed` is waf_rejection", count=1, **{"class": "waf_rejection"}),
        ev("cap_learned", "§3.1: the block page carries no size → 4 MB assumed", count=1, cap=ASSUMED_CAP),
        ev("recovery_attempt", "§4 rung 1: the result is over the halved per-result limit", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: once on the payload path", count=1)]))

# === 11. Bedrock: Input is too long; the pasted text restored; rung 3 cuts the task ==============
s = "bedrock/converse-document-cachepoint-system.json"
b = load(s)
line = "Newer response with something except single number\n"
b["messages"][0]["content"][0]["text"] = line * 2400
p = write_grown("bedrock-long-user-text", b, s, "the first user text block (the sample cut it after four lines) grown to its own repeated line × 2 400 (124 KB)")
imp("bedrock-overflow-input-too-long", p,
    F(wording("bedrock", "input is too long")) + ["--context-window", 20000, "--overflow-style", "bedrock"],
    "Bedrock Converse body (real, document + cachePoints + system cachePoint) whose only message is a 124 KB pasted text: 'Input is too long for requested model'; rungs 1-2 no-ops, rung 3 cuts the task preserve-end (archived), it survives",
    E("recovered", level=3, max_attempts=3, notice=False, events=[
        ev("provider_error", "behavior.md §2: Bedrock `input is too long` is context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 no-op rule: no assistant or tool result to cut", count=1, rung=1, outcome="skipped"),
        ev("recovery_attempt", "§4 no-op rule: one message, nothing to drop", count=1, rung=2, outcome="skipped"),
        ev("recovery_attempt", "§4 rung 3 [better]: the task may be cut preserve-end, never dropped", count=1, rung=3, outcome="applied")]))

# === 12. ChatCLI session: connection reset on a 620 KB body; rung 1 =============================
s = "../requests/chatcli-session-v2.json"
b = json.load(open(os.path.join(ROOT, "testdata/requests/chatcli-session-v2.json")))
t1 = next(m for m in b["chat_history"] if m.get("tool_call_id") == "tc_1")
t1["content"] = source_text(620_000, skip=11)
p = write_grown("chatcli-read-620k", b, "testdata/requests/chatcli-session-v2.json", "the `tc_1` read_file result replaced by 620 000 bytes of Rust source")
imp("chatcli-reset-large", p,
    F(wording("resets", "reset on a large body")) + ["--gateway-max-bytes", 300000, "--gateway-rejects-with", "connection_reset"],
    "ChatCLI session v2 (verbatim recall, ENOENT tool error) with a 620 KB read: connection reset by peer on the large body is likely payload; 4 MB assumed, rung 1 previews the read",
    E("recovered", level=1, max_attempts=1, notice=True, cap=ASSUMED_CAP, events=[
        ev("provider_error", "behavior.md §2 EOF rule: connection reset with weight ≥ 500 000 is likely_payload", count=1, **{"class": "likely_payload"}),
        ev("cap_learned", "§3.1: size unknown → 4 MB assumed", count=1, cap=ASSUMED_CAP),
        ev("recovery_attempt", "§4 rung 1: the read is over the halved per-result limit", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: once on the payload path", count=1)]))

# === 13. OpenAI chat: Azure network-rule 403 is auth (the word Firewall is no WAF signal) =======
s = "openai-chat/chat-file-part-tools-strict.json"
p = write_grown("openai-chat-file-part", load(s), s, "not grown (the sample as is): a network access rule does not depend on size")
imp("openai-chat-azure-403-auth", p, F(wording("azure", "403 naming Virtual Network/Firewall rules is auth")),
    "OpenAI chat body (real, file part + strict tools) rejected by Azure's 'Virtual Network/Firewall rules' 403: auth, not a WAF; nothing is compacted",
    E("not_recoverable", max_attempts=0, events=[
        ev("provider_error", "behavior.md §2 additions: a 403 naming a network access rule is auth", count=1, **{"class": "auth"}),
        ev("recovery_attempt", "§2: auth is not recoverable by compaction", count=0)]))

# === 14. OpenAI Responses: 500 server_error: not recoverable ======================================
s = "openai-responses/responses-input-text-input-image.json"
p = write_grown("responses-input-image", load(s), s, "not grown (the sample as is): a server error does not depend on size")
imp("responses-500-not-recoverable", p, F(wording("openai-responses", "server error")),
    "OpenAI Responses body (real, input_text + input_image) rejected with 500 server_error: not recoverable, nothing is compacted",
    E("not_recoverable", max_attempts=0, events=[
        ev("provider_error", "behavior.md §2: 500 is server, not recoverable by compaction", count=1, **{"class": "server"}),
        ev("recovery_attempt", "§2: no rung for a server error", count=0)]))


# --- session files (Claude Code, Codex, Cline): imported by their importers too ------------------
def write_grown_jsonl(name, lines, sample, how, ext="jsonl"):
    os.makedirs(GROWN, exist_ok=True)
    path = os.path.join(GROWN, f"{name}.{ext}")
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l, ensure_ascii=False, separators=(",", ":")) + "\n")
    README_LINES.append(f"| `{name}.{ext}` | `{sample}` | {how} |")
    return path

def rg_lines(n, skip=0):
    """`n` bytes of `rg -n` output (`path:line:text`) over the repository's sources at PIN."""
    out, size = [], 0
    for line in source_text(4 * n, skip=skip).splitlines():
        if line.startswith("// ===== "):
            path, no = line[9:-6], 0
            continue
        no += 1
        if line.strip():
            l = f"{path}:{no}:{line}"
            out.append(l); size += len(l) + 1
            if size >= n: break
    return "\n".join(out) + "\n"

# === 15. Claude Code transcript: Cloudflare WAF 403; the Task report grown to 120 KB; rung 1 ====
s = "claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl"
lines = [json.loads(l) for l in open(os.path.join(SAMPLES, s))]
for d in lines:
    for blk in (d.get("message") or {}).get("content") or []:
        if isinstance(blk, dict) and blk.get("tool_use_id") == "toolu_014YF9TXhDRR7BnpasNJ7gjC":
            grown = blk["content"][0]["text"] + "\n\n" + prose_text(120_000, "testdata/samples/README.md")
            blk["content"][0]["text"] = grown
            d["toolUseResult"]["content"][0]["text"] = grown  # Claude Code's UI copy of the same result
p = write_grown_jsonl("claude-code-task-report-120k", lines, s, "the `Task` tool_result text (line 22, the sub-agent's report) and its `toolUseResult.content` copy followed by 120 000 bytes of real Markdown (testdata/samples/README.md at the pinned commit)")
imp("claude-code-cloudflare-403", p,
    F(wording("cloudflare", "cloudflare block page")) + ["--gateway-max-bytes", 102400, "--gateway-rejects-with", "waf_403"],
    "Claude Code transcript (real v1.0.108: split assistant entries, inline sidechain) with a 120 KB sub-agent report behind Cloudflare's block page at 100 KB: WAF rejection, 4 MB assumed, rung 1 previews the report",
    E("recovered", level=1, max_attempts=1, notice=True, cap=ASSUMED_CAP, events=[
        ev("provider_error", "behavior.md §2: 403 + `cloudflare` / `blocked` is waf_rejection", count=1, **{"class": "waf_rejection"}),
        ev("cap_learned", "§3.1: the block page carries no size → 4 MB assumed", count=1, cap=ASSUMED_CAP),
        ev("recovery_attempt", "§4 rung 1: the report is over the halved per-result limit", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: once on the payload path", count=1)]))

# === 16. Codex rollout: context window error event in the stream; rg output grown; rung 1 ========
s = "codex/real-2026-04-excerpt-noncontiguous.jsonl"
lines = [json.loads(l) for l in open(os.path.join(SAMPLES, s))]
for d in lines:
    if d.get("type") == "response_item" and d["payload"].get("type") == "function_call_output":
        d["payload"]["output"] = d["payload"]["output"] + "\n" + rg_lines(60_000, skip=5)
p = write_grown_jsonl("codex-rg-output-60k", lines, s, "the `function_call_output` output of the `rg -n` call followed by 60 000 bytes of `rg -n`-style lines (`path:line:text`) over the repository's Rust sources at the pinned commit")
imp("codex-stream-overflow", p,
    F(wording("openai-responses", "context window error event in a stream (no status)")) + ["--context-window", 8000, "--overflow-style", "openai"],
    "Codex rollout (real, gpt-5.4 excerpt: exec_command + output) with a 60 KB rg output: the context-window error arrives as a stream event without status; rung 1 previews the output",
    E("recovered", level=1, max_attempts=1, notice=False, events=[
        ev("provider_error", "behavior.md §2: no status and no transport phrase: the phrase `context_length_exceeded` decides, context_overflow", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 rung 1: the output is over the halved per-result limit", count=1, rung=1, outcome="applied"),
        ev("notice_injected", "§3.4: not the payload path", count=0)]))

# === 17. Cline task history: OpenRouter prompt tokens limit; final_file_content grown; rung 1 =====
s = "cline/native-tools-tool-result-with-result-prefix.json"
b = load(s)
res = b[1]["content"][0]
head, rest = res["content"].split("<final_file_content path=\"new-file.ts\">\n", 1)
res["content"] = head + "<final_file_content path=\"new-file.ts\">\n" + source_text(80_000, skip=13) + rest
p = write_grown("cline-final-file-content-80k", b, s, "the file inside the tool_result's `<final_file_content>` grown by 80 000 bytes of Rust source before its original line (Cline echoes the whole saved file)")
imp("cline-openrouter-overflow", p,
    F(wording("openrouter", "prompt tokens limit exceeded (402)")) + ["--context-window", 6964, "--overflow-style", "openai"],
    "Cline api_conversation_history (Cline's own test fixture, native tool_use) echoing an 80 KB saved file to OpenRouter with a 6 964-token key limit: 402 'Prompt tokens limit exceeded' is an overflow, rung 1 previews the result",
    E("recovered", level=1, max_attempts=1, notice=False, events=[
        ev("provider_error", "behavior.md §2 additions: OpenRouter `prompt tokens limit exceeded` is context_overflow (the phrase wins over 402)", count=1, **{"class": "context_overflow"}),
        ev("recovery_attempt", "§4 rung 1: the result is over the halved per-result limit", count=1, rung=1, outcome="applied")]))


# --- the README of the grown bodies ---------------------------------------------------------------
with open(os.path.join(GROWN, "README.md"), "w") as f:
    f.write("# testdata/requests/grown — samples grown into failing sessions\n\n"
            "Written by `python3 testdata/corpus/import_samples.py SALVAGE` (do not edit by hand). Each body is a\n"
            "sample of `testdata/samples/` (provenance in its README) with one documented, format-preserving\n"
            "change; every other field is exactly as in the sample. Long texts are files of this repository\n"
            f"at commit `{PIN}`. The corpus captures `testdata/corpus/imported-*.json` are imported from them.\n\n"
            "| body | sample | what was grown |\n|---|---|---|\n")
    f.write("\n".join(README_LINES) + "\n")
print(f"{len(README_LINES)} grown bodies, imported into testdata/corpus/imported-*.json")
