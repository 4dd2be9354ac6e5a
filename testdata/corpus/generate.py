#!/usr/bin/env python3
"""Builds the regression corpus in testdata/corpus/ (deterministic; run from the repo root:
python3 testdata/corpus/generate.py). Every capture states what it is for in `title` and what it
must do in `expect`. Captures imported from real request bodies are built with `salvage import`
instead (see the README); these cover every failure class, gateway style and rung."""
import json, random, os, base64, zlib, struct

OUT = os.path.dirname(os.path.abspath(__file__))
R = random.Random(7)
WORDS = "the request gateway rejected body size limit we compact history retry smaller payload model context window tokens summary tool result file read lines function returns error database locked test fails build merge fix proxy timeout session journal archive".split()

def prose(n, seed):
    r = random.Random(seed); out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(r.choice(WORDS))
    return " ".join(out)[:n]

def code(n, seed):
    r = random.Random(seed); lines = []; size = 0
    while size < n:
        k = r.randrange(4)
        l = [f"    let v{r.randrange(999)} = store.get({r.randrange(99)})?;", f"    // {prose(40, r.random())}", f"fn f{r.randrange(999)}(x: usize) -> usize {{ x + {r.randrange(9)} }}", ""][k]
        lines.append(l); size += len(l) + 1
    return "\n".join(lines)[:n]

def png(w, h):
    raw = b"".join(b"\x00" + b"\x10\x80\xf0" * w for _ in range(h))
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")).decode()

def sysmsg(n=2000):
    return {"role": "system", "content": "You are a coding agent. " + prose(n, 1)}

def chat(turns, size, seed, task="Fix the failing build in crates/store and make the tests pass."):
    h = [sysmsg(), {"role": "user", "content": task}]
    for t in range(turns):
        h.append({"role": "assistant", "content": prose(size, seed * 100 + t)})
        h.append({"role": "user", "content": prose(200, seed * 1000 + t) if t + 1 < turns else task + " Continue."})
    return h

def agent(calls, result_size, seed, task="Find why two_openers is flaky and fix it.", giant=None):
    h = [sysmsg(), {"role": "user", "content": task}]
    for i in range(calls):
        cid = f"toolu_{seed}_{i:03d}"
        h.append({"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function", "name": "read_file", "arguments": {"path": f"src/m{i}.rs", "offset": 1, "limit": 200}}]})
        size = giant if (giant and i == calls // 2) else result_size
        h.append({"role": "tool", "tool_call_id": cid, "content": code(size, seed * 77 + i)})
    return h

def capture(id, title, history, failure, upstream, expect, provider="anthropic", model="claude-sonnet-4-5", settings=None, surface="agent", recorded=None):
    if id in EVENTS:
        expect = {**expect, "events": expect.get("events", []) + EVENTS[id]}
    c = {"format": "salvage.capture/1", "id": id, "title": title, "client": {"name": "chatcli", "surface": surface},
         "provider": provider, "model": model, "settings": settings or {}, "history": history, "failure": failure,
         "upstream": upstream, "recorded": {"summaries": recorded or []}, "expect": expect}
    with open(os.path.join(OUT, id + ".json"), "w") as f:
        json.dump(c, f, ensure_ascii=False, indent=1)

NOCOMPACT = {"CHATCLI_CONTEXT_WINDOW": "4000000"}  # the client believes the window is huge: only the provider's limit bites
def gw(max_bytes, style, report=False): return {"gateway": {"max_body_bytes": max_bytes, "rejects_with": style, "reports_request_size": report}}
def model(window, style, out=None):
    m = {"context_window_tokens": window, "overflow_style": style}
    if out: m["max_output_tokens"] = out
    return {"model": m}
def F(status=None, message="", transport=None, rejected=None):
    f = {"status": status, "message": message, "transport": transport}
    if rejected is not None: f["rejected_request_bytes"] = rejected
    return f
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

# Expected events of the captures above the guarantees section, written from the spec (merged into
# their `expect` by `capture`).
def pe(cls, **kw): return ev("provider_error", f"behavior.md §2: classified {cls}", **{"class": cls}, **kw)
def applied(rung, **kw): return ev("recovery_attempt", f"behavior.md §4: rung {rung} recovers", rung=rung, outcome="applied", **kw)
NOTICE = ev("notice_injected", "behavior.md §3.4: the payload notice once after a successful rung on the payload path", count=1)
ASSUMED = ev("cap_learned", "behavior.md §3.1: size unknown and no cap: 4 MB assumed", count=1, cap=4194304)
NO_ATTEMPT = ev("recovery_attempt", "behavior.md §2: a class compaction cannot fix consumes no attempt", count=0)
EVENTS = {
    "auth-401": [pe("auth", count=1), NO_ATTEMPT],
    "rate-limit-429": [pe("rate_limit", count=1), NO_ATTEMPT],
    "model-not-found": [pe("model_not_found", count=1), NO_ATTEMPT],
    "server-529-overloaded": [pe("server", count=1), NO_ATTEMPT],
    "plain-403-stays-auth": [pe("auth", count=1), NO_ATTEMPT],
    "gateway-eof-small-transient": [pe("transient_network", count=1), NO_ATTEMPT],
    "cap-only-tightens": [pe("payload_too_large", min=1), ev("cap_learned", "behavior.md §3.1: the cap only tightens: 3/4 of the rejected size is above the configured 64 KB", count=0)],
    "exhausted-unreported": [pe("waf_rejection", min=1), ASSUMED, ev("recovery_attempt", "behavior.md §4: CHATCLI_MAX_RECOVERY_ATTEMPTS (3) bounds the ladder", count=3), ev("response_received", "nothing is accepted", count=0)],
    "gateway-eof-large": [pe("likely_payload", min=1), ASSUMED, NOTICE],
    "gateway-reset-large": [pe("likely_payload", min=1), ASSUMED, NOTICE],
    "gateway-http413-reported": [pe("payload_too_large", min=1), ev("cap_learned", "behavior.md §3.1: learned at 3/4 of the reported size", min=1), NOTICE],
    "gateway-http413-unreported": [pe("payload_too_large", min=1), ASSUMED, NOTICE],
    "gateway-http431": [pe("payload_too_large", min=1), NOTICE],
    "gateway-waf-html-bedrock-128k": [pe("waf_rejection", min=1), NOTICE],
    "gateway-waf403": [pe("waf_rejection", min=1), NOTICE],
    "openai-style-body-413": [pe("payload_too_large", min=1), NOTICE],
    "giant-tool-result": [pe("context_overflow", count=1), applied(1, count=1)],
    "images-in-history": [pe("context_overflow", min=1), ev("recovery_attempt", "behavior.md §4", min=1, outcome="applied")],
    "max-attempts-1": [ev("recovery_attempt", "behavior.md §10: CHATCLI_MAX_RECOVERY_ATTEMPTS=1", count=1)],
    "no-failure": [ev("provider_error", "the request is accepted", count=0), ev("response_received", "the answer is appended", count=1)],
    "non-ascii-text": [pe("context_overflow", min=1), ev("recovery_attempt", "behavior.md §4", min=1, outcome="applied")],
    "orphan-and-duplicate-calls": [ev("recovery_attempt", "behavior.md §4, §6: every rung repairs pairing", min=1, outcome="applied")],
    "output-limit-escalation": [ev("token_escalation", "behavior.md §8: doubled at most CHATCLI_MAX_TOKEN_ESCALATIONS (2) times", count=2),
                                ev("response_received", "behavior.md §8: each partial answer kept", count=2, stop_reason="max_tokens")],
    "rung2-many-small-turns": [pe("context_overflow", min=1), applied(2, count=1)],
    "rung3-emergency-keep-small": [applied(3, count=1)],
    "rung3-keep-four": [applied(3, count=1)],
    "several-mb-session": [pe("context_overflow", min=1), ev("recovery_attempt", "behavior.md §4", min=1, outcome="applied")],
    "tool-chain-task-before-window": [ev("recovery_attempt", "behavior.md §4 [better]: the task before the window is kept", min=1, outcome="applied")],
    "verbatim-recall-result": [ev("recovery_attempt", "behavior.md §4, §7: verbatim kept within the quarter budget", min=1, outcome="applied")],
}
for _s in ["anthropic", "openai", "gemini", "xai", "mistral", "bedrock"]:
    EVENTS[f"overflow-{_s}-rung1"] = [pe("context_overflow", count=1), applied(1, count=1)]

# --- context overflow in every provider's wording -------------------------------------------
for style, prov, mdl in [("anthropic", "anthropic", "claude-sonnet-4-5"), ("openai", "openai", "gpt-4o"), ("gemini", "gemini", "gemini-2.5-pro"),
                         ("xai", "xai", "grok-4"), ("mistral", "mistral", "mistral-large-latest"), ("bedrock", "bedrock", "anthropic.claude-sonnet-4")]:
    h = chat(12, 9000, sum(map(ord, style)))
    wording = {"anthropic": "prompt is too long: 41200 tokens > 16000 maximum", "openai": "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}",
               "gemini": "The input token count (41200) exceeds the maximum number of tokens allowed (16000).", "xai": "This model's maximum prompt length is 16000 but the request contains 41200 tokens.",
               "mistral": "Prompt contains 41200 tokens and 0 draft tokens, too large for model with 16000 maximum context length", "bedrock": "ValidationException: Input is too long for requested model."}[style]
    capture(f"overflow-{style}-rung1", f"{style} context overflow: long assistant answers, rung 1 cuts them", h, F(400, wording),
            {**model(16000, style)}, E("recovered", level=1, max_attempts=1, notice=False), provider=prov, model=mdl, settings=NOCOMPACT, surface="chat")

# --- each rung succeeding ---------------------------------------------------------------------
capture("rung2-many-small-turns", "overflow with many small turns: rung 1 cannot help, rung 2 keeps the last 10",
        chat(60, 1500, 11), F(400, "prompt is too long"), model(12000, "anthropic"), E("recovered", level=2, max_attempts=2), settings=NOCOMPACT, surface="chat")
capture("rung3-keep-four", "only keeping the last 4 fits",
        chat(60, 1500, 12), F(400, "prompt is too long"), model(1100, "anthropic"), E("recovered", level=3, max_attempts=3), settings=NOCOMPACT, surface="chat")
capture("rung3-emergency-keep-small", "CHATCLI_EMERGENCY_KEEP_MESSAGES=20 makes rung 2 too weak; rung 3 fits",
        chat(60, 1500, 13), F(400, "prompt is too long"), model(2000, "anthropic"), E("recovered", level=3), settings={**NOCOMPACT, "CHATCLI_EMERGENCY_KEEP_MESSAGES": "20"}, surface="chat")

# --- gateway styles ---------------------------------------------------------------------------
big = agent(30, 6000, 21)
capture("gateway-http413-reported", "plain 413 that reports the request size: cap learned at 3/4", big, F(413, "413 Payload Too Large", rejected=None),
        gw(120_000, "http_413", report=True), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-http413-unreported", "413 without a size: 4 MB assumed, then the ladder", big, F(413, "413 Payload Too Large"), gw(120_000, "http_413"), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-http431", "431 from a proxy counting the whole request", big, F(431, "431 Request Header Fields Too Large"), gw(150_000, "http_431"), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-waf403", "WAF 403 with a firewall signal", big, F(403, "403 Forbidden: Request blocked by security policy (WAF)"), gw(100_000, "waf_403"), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-waf-html-bedrock-128k", "Corporate proxy returns an HTML 403 block page at ~128 KB (Bedrock SDK decode error)",
        agent(40, 5000, 22), F(403, "operation error Bedrock Runtime: InvokeModel, https response error StatusCode: 403, RequestID: , deserialization failed, failed to decode response body, invalid character '<' looking for beginning of value", rejected=None),
        gw(131_072, "waf_html_403", report=True), E("recovered", notice=True), provider="bedrock", model="anthropic.claude-sonnet-4", settings={**NOCOMPACT, "CHATCLI_MAX_PAYLOAD": "5MB"})
huge = agent(90, 7000, 23)
capture("gateway-reset-large", "silent connection reset on a 600 KB body: likely payload", huge, F(None, "read: connection reset by peer", transport="connection reset by peer"),
        gw(300_000, "connection_reset"), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-eof-large", "unexpected EOF on a large body", huge, F(None, "unexpected EOF", transport="unexpected EOF"), gw(300_000, "eof"), E("recovered", notice=True), settings=NOCOMPACT)
capture("gateway-eof-small-transient", "EOF on a small body is a network blip, not a payload problem", agent(5, 2000, 24),
        F(None, "unexpected EOF", transport="unexpected EOF"), {}, E("not_recoverable"), settings=NOCOMPACT)

# --- floor fail-fast and exhaustion -----------------------------------------------------------
hs = [{"role": "system", "content": "Persona and MCP tool docs. " + prose(140_000, 3)}] + agent(10, 3000, 25)[1:]
hf = [{"role": "system", "content": "Persona and MCP tool docs. " + prose(140_000, 3)}, {"role": "user", "content": "Summarize the design doc."}]
capture("floor-fail-fast", "the request is only the system prompt and the task, and the gateway rejects it: fail fast without an attempt", hf,
        F(413, "413 Payload Too Large"), gw(100_000, "http_413", report=True), E("failed_fast", max_attempts=0, events=[
            ev("floor_diagnosis", "behavior.md §3: floor ≥ rejected fails fast", count=1, verdict="fail_fast"),
            ev("recovery_attempt", "§3: failing fast consumes no attempt", count=0)]), settings=NOCOMPACT)
# 110 KB of system prompt in a 142 KB request rejected at 140 KB: the base is 78 % of the rejected size
# (warn, go on), and rung 2 brings the request under the gateway's real limit.
hw = [{"role": "system", "content": "Persona and MCP tool docs. " + prose(110_000, 4)}] + agent(10, 3000, 26)[1:]
capture("floor-warn-then-recover", "system prompt close to the limit: warned, the ladder still recovers", hw,
        F(413, "413 Payload Too Large"), gw(140_000, "http_413", report=True), E("recovered", events=[
            ev("floor_diagnosis", "behavior.md §3: floor ≥ rejected × 3/4 warns and goes on", count=1, verdict="warn"),
            ev("cap_learned", "§3: the cap is learned at 3/4 of the reported size", count=1)]), settings=NOCOMPACT)
capture("exhausted-unreported", "a gateway cap below any request the ladder can send, size not reported: attempts run out", hs,
        F(403, "403 Forbidden blocked by firewall"), gw(60_000, "waf_403"), E("exhausted", max_attempts=3), settings=NOCOMPACT)

# --- not recoverable classes ------------------------------------------------------------------
small = chat(4, 500, 31)
capture("auth-401", "invalid API key: refresh credentials, never compact", small, F(401, "401 Unauthorized: invalid x-api-key"), {}, E("not_recoverable", max_attempts=0))
capture("rate-limit-429", "rate limited: back off", small, F(429, "429 Too Many Requests: rate limit exceeded"), {}, E("not_recoverable", max_attempts=0))
capture("model-not-found", "unknown model", small, F(404, "model not found: claude-9"), {}, E("not_recoverable", max_attempts=0))
capture("server-529-overloaded", "provider overloaded", small, F(529, "Overloaded"), {}, E("not_recoverable", max_attempts=0))
capture("plain-403-stays-auth", "a 403 without firewall signals stays auth: credentials are not invalidated for a network problem", small, F(403, "Forbidden"), {}, E("not_recoverable"))
capture("no-failure", "the captured request is accepted as it is", small, F(), {}, E("no_failure", max_attempts=0))

# --- shapes of history ------------------------------------------------------------------------
capture("giant-tool-result", "one 900 KB tool result dominates the history", agent(8, 2000, 41, giant=900_000),
        F(400, "prompt is too long"), model(60000, "anthropic"), E("recovered", level=1), settings=NOCOMPACT)
chain = agent(40, 3000, 42, task="Migrate every module to the new error type.")
capture("tool-chain-task-before-window", "native tool-call chain: the task lies before the kept window and must survive", chain,
        F(400, "prompt is too long"), model(9000, "anthropic"), E("recovered"), settings=NOCOMPACT)
vb = agent(20, 4000, 43)
vb.insert(6, {"role": "user", "content": "[recalled src/m2.rs in full]\n" + code(6000, 9), "meta": {"preserve_verbatim": True, "agent_feedback": True}})
capture("verbatim-recall-result", "a recall result asked for in full sits in the history", vb, F(400, "prompt is too long"), model(14000, "anthropic"), E("recovered"), settings=NOCOMPACT)
img = chat(6, 4000, 44)
img[1]["images"] = [{"media_type": "image/png", "data": png(64, 48)}]
img[3]["images"] = [{"media_type": "image/png", "data": png(32, 32)}, {"url": "https://example.invalid/diagram.png"}]
# Windows below attempt 0's real tokens (the simulation rejects the captured request, so the
# recovery is judged by it, not by an upstream that accepts everything) and above the recovered
# request's: images-in-history 4 394 real tokens at attempt 0, 2 939 after rung 1.
capture("images-in-history", "vision inputs count toward the weight", img, F(400, "prompt is too long"), model(4000, "anthropic"), E("recovered"), settings=NOCOMPACT, surface="chat")
na = [sysmsg(), {"role": "user", "content": "Corrija o teste que falha — 日本語のログも確認して。 Ça marche? 🚀"}]
for t in range(20):
    na.append({"role": "assistant", "content": ("análise do erro: o banco está bloqueado — " + "データベースがロックされています。" * 40 + " ") * 3})
    na.append({"role": "user", "content": "continue — 続けて"})
capture("non-ascii-text", "Portuguese, Japanese and emoji: every cut lands on a char boundary", na, F(400, "prompt is too long"), model(15000, "anthropic"), E("recovered"), settings=NOCOMPACT, surface="chat")
# Microcompact is pushed out of the way (ages of 1000 turns) so the provider's editing is what frees
# the window: 40 results of 9 KB, over the 60 000-token trigger, all but the last 5 cleared.
EDITS = {"trigger_input_tokens": 60000, "keep_tool_uses": 5, "clear_at_least_tokens": 20000}
NOMICRO = {"CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "1000", "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "1000"}
capture("context-editing-provider", "provider-side clear_tool_uses: the provider clears old tool results and the client mirrors them", agent(40, 9000, 45),
        F(), {**model(110_000, "anthropic"), "context_editing": EDITS}, E("no_failure", events=[
            ev("context_edit", "behavior.md §9: the provider clears all but the 5 most recent tool uses; mirrored as stubs", count=1, cleared_tool_uses=35, stubs=35)]),
        settings={**NOCOMPACT, **NOMICRO, "CHATCLI_CONTEXT_ENGINE": "provider"})
capture("context-editing-needs-the-engine", "context editing configured upstream but CHATCLI_CONTEXT_ENGINE unset: no field sent, nothing cleared", agent(40, 9000, 45),
        F(), {**model(400_000, "anthropic"), "context_editing": EDITS}, E("no_failure", events=[
            ev("context_edit", "behavior.md §9: only with CHATCLI_CONTEXT_ENGINE=provider", count=0)]), settings={**NOCOMPACT, **NOMICRO})
capture("context-editing-not-for-openai", "CHATCLI_CONTEXT_ENGINE=provider on an OpenAI session is ignored", agent(40, 9000, 45),
        F(), {**model(400_000, "openai"), "context_editing": EDITS}, E("no_failure", events=[
            ev("context_edit", "behavior.md §9: other providers ignore the setting", count=0)]),
        provider="openai", model="gpt-4o", settings={**NOCOMPACT, **NOMICRO, "CHATCLI_CONTEXT_ENGINE": "provider"})
capture("output-limit-escalation", "the answer stops at max_tokens twice: max_tokens doubles, partial answers kept", small, F(),
        {**model(200000, "anthropic", out=64000), "responses": [{"stop_reason": "max_tokens", "content": "Part one of the patch…"}, {"stop_reason": "max_tokens", "content": "Part two…"}, {"stop_reason": "end_turn", "content": "Done."}]},
        E("no_failure"))
capture("output-limit-openai-length", "OpenAI's length stop, escalation capped at the provider's output cap", small, F(), {**model(128000, "openai", out=16384), "responses": [{"stop_reason": "length", "content": "Partial…"}, {"stop_reason": "end_turn", "content": "Complete."}]},
        E("no_failure", events=[
            ev("response_received", "behavior.md §8: OpenAI's length stop is journaled as length", min=1, stop_reason="length"),
            ev("token_escalation", "§8: one escalation, capped at the provider's output cap", count=1)]), provider="openai", model="gpt-4o")
several = agent(500, 7000, 46)
capture("several-mb-session", "a 3.5 MB agent session against a 200k-token window", several, F(400, "prompt is too long"), model(200000, "anthropic"), E("recovered"), settings=NOCOMPACT)
# Long prose answers (no tool results, so microcompact cannot help): 640 KB against an agent budget
# of 200 000 × 0.60 × 4 = 480 KB. Level 1 (trim) frees nothing in plain prose; level 2 summarizes.
capture("auto-compaction-before-send", "the client's own budget compacts before the first send: the request is accepted", chat(80, 8000, 47),
        F(), model(200000, "anthropic"), E("no_failure", events=[
            ev("compaction", "behavior.md §7: weight > budget → compaction before the request", min=1, trigger="auto", outcome="applied"),
            ev("summary_attempt", "§7 level 2: the built-in summary passes the quality gate", min=1, passed=True),
            ev("provider_error", "the compacted request fits the window", count=0)]), surface="agent")
# 380 KB of prose against CHATCLI_MAX_PAYLOAD=400KB: over 85 % of the cap, so pre-flight forces the
# ratio to 0.40 and the budget min(200 000 × 0.40 × 4, 0.7 × cap) compacts before the request.
capture("preflight-forced", "a configured cap at 85% forces pre-flight compaction at ratio 0.40", chat(45, 8400, 48),
        F(), gw(5_000_000, "http_413"), E("no_failure", events=[
            ev("preflight", "behavior.md §3 pre-flight: weight > cap × 0.85 forces ratio 0.40", count=1, forced_ratio_percent=40),
            ev("compaction", "§7: the forced budget needs compaction", min=1, outcome="applied")]), settings={"CHATCLI_MAX_PAYLOAD": "400KB"})
capture("cap-only-tightens", "CHATCLI_MAX_PAYLOAD below the learned 3/4 keeps the configured cap", big, F(413, "413 Payload Too Large"), gw(120_000, "http_413", report=True),
        E("recovered", cap=65536), settings={**NOCOMPACT, "CHATCLI_MAX_PAYLOAD": "64KB"})
capture("recorded-summary", "a recorded level-2 summary is replayed exactly during auto compaction", chat(80, 8000, 49),
        F(), model(200000, "anthropic"), E("no_failure", events=[
            ev("compaction", "behavior.md §7 level 2 with the recorded summarizer", min=1, level=2, outcome="applied"),
            ev("summary_attempt", "§7 gate: the recorded summary passes", min=1, passed=True)]), recorded=["## Task\n- make two_openers deterministic\n## Files read\n- crates/store/src/lib.rs\n- crates/store/tests/open.rs\n## Findings\n- WAL switch races before busy_timeout is installed"])
capture("orphan-and-duplicate-calls", "a history with an orphan tool result and duplicate call ids is repaired before sending",
        # A later call reuses the first call's id (toolu_50_000): a duplicate the repair renames.
        agent(6, 3000, 50) + [{"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_50_000", "type": "function", "name": "read_file", "arguments": {"path": "src/dup.rs", "offset": 1, "limit": 20}}]},
                              {"role": "tool", "tool_call_id": "toolu_50_000", "content": "fn dup() {}"},
                              {"role": "tool", "tool_call_id": "ghost", "content": "stray"}, {"role": "user", "content": "Find why two_openers is flaky and fix it."}],
        F(400, "prompt is too long"), model(5000, "anthropic"), E("recovered"), settings=NOCOMPACT)
capture("max-attempts-1", "CHATCLI_MAX_RECOVERY_ATTEMPTS=1: rung 1 cannot fit, attempts exhausted", chat(60, 1500, 51), F(400, "prompt is too long"), model(4000, "anthropic"),
        E("exhausted", max_attempts=1), settings={**NOCOMPACT, "CHATCLI_MAX_RECOVERY_ATTEMPTS": "1"}, surface="chat")
capture("openai-style-body-413", "an OpenAI-shaped request body judged by a 413 gateway", agent(30, 6000, 52), F(413, "413 Payload Too Large"), gw(100_000, "http_413", report=True),
        E("recovered", notice=True), provider="openai", model="gpt-4o", settings=NOCOMPACT)
# --- the guarantees on hostile content (issue "The guarantees hold on hostile content") ----------
# A long analysis that quotes a marker (a pasted log line) is ordinary content: rung 1 archives it
# before cutting it (section 4, "archived means archived by us"); `recoverable` proves it.
qa = chat(12, 9000, 60)
# The quote sits inside an assistant answer (index 4, 9 000 bytes): rung 1 cuts assistants over
# 5 000 bytes, so it is the message the rung archives and cuts (a user message there was never cut).
assert qa[4]["role"] == "assistant" and len(qa[4]["content"]) > 5000
qa[4]["content"] = qa[4]["content"][:4000] + " the earlier run printed [full content recoverable via @recall <<ccr:0123456789abcdef>>] " + qa[4]["content"][4000:]
capture("quoted-marker-in-analysis", "an answer that quotes a marker is archived before rung 1 cuts it", qa, F(400, "prompt is too long: 41200 tokens > 16000 maximum"),
        model(16000, "anthropic"), E("recovered", level=1, events=[
            ev("recovery_attempt", "behavior.md §4 rung 1 cuts assistants over 5 000 bytes, archiving first", count=1, rung=1, outcome="applied")]), settings=NOCOMPACT, surface="chat")
# Nothing left to compact and attempts = 1000: every rung is a no-op on the request; nothing is re-sent.
capture("no-op-rungs-are-not-sent", "rungs that cannot shrink the request are no-ops: the captured request is the only one sent", [sysmsg(300), {"role": "user", "content": "Fix the flaky test."}],
        F(400, "prompt is too long: 300000 tokens > 200000 maximum"), {}, E("exhausted", events=[
            ev("request_sent", "behavior.md §4 no-op rule: an identical or heavier request is not sent", count=1),
            ev("recovery_attempt", "§4: every rung is a no-op, each consuming one attempt; rung 3 is the last rung, so once it is a no-op nothing can change the request and the climb ends (attempts 1, 2, 3 of 1000)", count=3, outcome="skipped"),
            ev("recovery_attempt", "§4 no-op rule: a later attempt would run rung 3 again on the same request; it is not attempted", count=1, rung=3)]), settings={**NOCOMPACT, "CHATCLI_MAX_RECOVERY_ATTEMPTS": "1000"})
# A 150 KB pasted task with a 2 KB system prompt: the floor counts the task as rung 3 sends it (4 000
# bytes), so the session is not failed fast; rung 3 recovers.
pt = [sysmsg(), {"role": "user", "content": "Here is the log:\n" + code(150_000, 61) + "\nWhy does it fail?"}]
capture("pasted-task-is-not-floor", "a 150 KB pasted task is not floor: no fail-fast, rung 3 recovers", pt, F(413, "413 Payload Too Large"),
        gw(100_000, "http_413", report=True), E("recovered", level=3, events=[
            ev("floor_diagnosis", "behavior.md §3 [better]: the task as rung 3 would send it", count=1, verdict="ok")]), settings=NOCOMPACT)
# Invalid settings are reported once and journaled with the session start; their defaults stand.
capture("invalid-settings-are-reported", "CHATCLI_MAX_RECOVERY_ATTEMPTS=abc and CHATCLI_MAX_PAYLOAD=lots: defaults stand, both reported", chat(12, 9000, 62),
        F(400, "prompt is too long: 41200 tokens > 16000 maximum"), model(16000, "anthropic"), E("recovered", events=[
            ev("session_started", "behavior.md §10: an invalid value is journaled with the session start", count=1)]),
        settings={**NOCOMPACT, "CHATCLI_MAX_RECOVERY_ATTEMPTS": "abc", "CHATCLI_MAX_PAYLOAD": "lots"}, surface="chat")
# Real wordings of section 2's additions, each on the path its class takes.
capture("axios-413-sentence", "axios's 'Request failed with status code 413.' takes the payload path", big, F(None, "Request failed with status code 413."),
        gw(120_000, "http_413"), E("recovered", notice=True, events=[ev("provider_error", "behavior.md §2: a status token followed by punctuation", min=1, **{"class": "payload_too_large"})]), settings=NOCOMPACT)
capture("waffles-org-403-is-auth", "a 403 naming the organisation waffles-inc is auth, not a WAF", small,
        F(403, "Error code: 403 - {'error': {'message': 'Project `proj_waffles-inc` does not have access to model `gpt-4o`'}}"), {}, E("not_recoverable", events=[
            ev("provider_error", "behavior.md §2: signals match as words", count=1, **{"class": "auth"})]), provider="openai", model="gpt-4o")
capture("llamacpp-500-context-size", "llama.cpp's exceed_context_size_error sent with HTTP 500: the phrase wins", chat(12, 9000, 63),
        F(500, '{"error":{"code":500,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}'),
        model(12000, "openai"), E("recovered", events=[ev("provider_error", "behavior.md §2 additions: llama.cpp", min=1, **{"class": "context_overflow"})]), provider="openai", model="local-llama", settings=NOCOMPACT, surface="chat")
capture("tgi-422-inputs-tokens", "Hugging Face TGI's 422 'inputs tokens + max_new_tokens must be <= N' is an overflow", chat(12, 9000, 64),
        F(422, '{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 9000 `inputs` tokens and 1024 `max_new_tokens`","error_type":"validation"}'),
        model(12000, "openai"), E("recovered", events=[ev("provider_error", "behavior.md §2 additions: TGI, status rule with 422", min=1, **{"class": "context_overflow"})]), provider="openai", model="tgi", settings=NOCOMPACT, surface="chat")
orph = agent(6, 3000, 65) + [{"role": "tool", "tool_call_id": "ghost", "content": "stray result " + prose(3000, 65)}, {"role": "user", "content": "Find why two_openers is flaky and fix it."}]
capture("orphan-result-is-recallable", "an orphan tool result dropped by rung 1 stays recallable through the notice's marker", orph,
        F(400, "prompt is too long"), model(6000, "anthropic"), E("recovered", level=1, events=[  # 6 261 real tokens at attempt 0, 5 868 after rung 1
            ev("recovery_attempt", "behavior.md §6: orphans are archived and their marker is in the notice", count=1, rung=1, outcome="applied")]), settings=NOCOMPACT)

# The defects of "The guarantees hold on hostile content" that a capture can reach, one each.
vllm = "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.\", 'type': 'BadRequestError', 'param': None, 'code': 400}"
capture("vllm-400-maximum-context-length", "vLLM's 'maximum context length is N tokens. However, you requested M tokens' is an overflow", chat(12, 9000, 67),
        F(400, vllm), model(12000, "openai"), E("recovered", events=[ev("provider_error", "behavior.md §2 additions: vLLM", min=1, **{"class": "context_overflow"})]),
        provider="openai", model="vllm-served", settings=NOCOMPACT, surface="chat")
capture("error-403-status-in-text-only", "'Error 403.' with no status: the status token in the text classifies it (auth, not unknown)", small,
        F(None, "Error 403."), {}, E("not_recoverable", events=[
            ev("provider_error", "behavior.md §2 additions: a status token followed by punctuation; no firewall signal", count=1, **{"class": "auth"})]))
mb = chat(6, 4000, 68)
mb[1]["images"] = [{"media_type": "image/png", "data": "データ" * 30000}]
capture("multibyte-image-data", "an image whose data holds 270 KB of multibyte text: weighed without slicing inside a character", mb,
        F(400, "prompt is too long"), model(4000, "anthropic"), E("recovered", events=[  # 4 237 real tokens at attempt 0
            ev("recovery_attempt", "behavior.md §4: the ladder runs on a history whose image data is not base64", min=1, outcome="applied")]), settings=NOCOMPACT, surface="chat")
capture("tool-result-limit-below-preview", "CHATCLI_TOOL_RESULT_MAX_CHARS=50, below the preview's head and tail: applied, originals archived", agent(6, 30000, 69),
        F(), model(400000, "anthropic"), E("no_failure", events=[
            ev("request_sent", "behavior.md §7 tool budget: a limit below head + tail still previews and archives", count=1),
            ev("provider_error", "the budgeted request fits", count=0)]), settings={**NOCOMPACT, **NOMICRO, "CHATCLI_TOOL_RESULT_MAX_CHARS": "50"})

# --- every per-turn pass on its own path (section 7) --------------------------------------------
capture("microcompact-old-results", "old tool results are previewed then stubbed before the request (no model, no network)", agent(30, 6000, 66),
        F(), model(400000, "anthropic"), E("no_failure", events=[
            ev("microcompact", "behavior.md §7 microcompact: results of age ≥ 2 previewed, ≥ 4 stubbed", count=1)]), settings=NOCOMPACT)
dd = [sysmsg(), {"role": "user", "content": "Refactor src/lib.rs."}]
for i, (off, lim) in enumerate([(1, 200), (1, 400), (1, 400)]):
    cid = f"toolu_dd_{i}"
    dd.append({"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function", "name": "read_file", "arguments": {"path": "src/lib.rs", "offset": off, "limit": lim}}]})
    dd.append({"role": "tool", "tool_call_id": cid, "content": code(2500, 70 + i)})
dd.append({"role": "user", "content": "Now apply the change."})
capture("dedup-repeated-reads", "a later read of the same file covering the earlier ones turns them into stubs", dd,
        F(), model(400000, "anthropic"), E("no_failure", events=[
            ev("dedup", "behavior.md §7 dedup: a later same-or-wider read stubs every earlier read", count=1, stubbed=2)]), settings=NOCOMPACT)
sk = [sysmsg(), {"role": "user", "content": "[skill: rust-style]\n" + prose(4000, 71), "meta": {"skill_names": "rust-style"}}]
for t in range(8):
    sk.append({"role": "assistant", "content": prose(300, 72 + t)})
    sk.append({"role": "user", "content": prose(100, 90 + t)})
capture("skill-aging", "a skill block older than 6 turns collapses to a stub with its marker", sk,
        F(), model(400000, "anthropic"), E("no_failure", events=[
            ev("skill_aging", "behavior.md §7 skill aging: CHATCLI_SKILL_AGE_TURNS (6)", count=1, collapsed=1)]), settings=NOCOMPACT, surface="chat")

print(len([f for f in os.listdir(OUT) if f.endswith('.json')]), "captures")
