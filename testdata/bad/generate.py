#!/usr/bin/env python3
"""Builds testdata/bad/: malformed or hostile captures that `salvage replay FILE` must refuse with
exit code 2 and one clear line naming the file and the problem. The expected line (after
`salvage: error: FILE: `) is written by hand next to each case into ../bad.expected.json.
Run from the repo root: python3 testdata/bad/generate.py"""
import json, os

OUT = os.path.dirname(os.path.abspath(__file__))
GOOD = {"format": "salvage.capture/1", "id": "bad", "history": [{"role": "system", "content": "S"}, {"role": "user", "content": "fix it"}],
        "failure": {"status": 413, "message": "413 Payload Too Large"}}
cases = {}

def put(name, data, expect):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    cases[name] = expect

def good(**over):
    c = json.loads(json.dumps(GOOD))
    for k, v in over.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    return c

text = json.dumps(GOOD)
# Truncated JSON at several depths.
put("truncated-start.json", text[:1], "malformed JSON at line 1, column 1: EOF while parsing an object")
put("truncated-mid-string.json", text[:40], "malformed JSON at line 1, column 40: EOF while parsing a string")
put("truncated-history.json", text[:text.index('"failure"') - 2], "malformed JSON at line 1, column %d: EOF while parsing an object" % (text.index('"failure"') - 2))
put("empty-file.json", "", "malformed JSON at line 1, column 0: EOF while parsing a value")
put("not-json.json", "format: salvage.capture/1\n", "malformed JSON at line 1, column 2: expected ident")
put("trailing-garbage.json", text + " {}", "malformed JSON at line 1, column %d: trailing characters" % (len(text) + 2))
# Wrong types.
put("top-level-array.json", "[1, 2]", "(top level): a capture is a JSON object, found an array")
put("history-object.json", json.dumps(good(history={"role": "user"})), "history: invalid type: map, expected a sequence")
put("role-number.json", json.dumps(good(history=[{"role": 5, "content": "x"}])), "history[0].role: invalid type: integer `5`, expected a string")
put("role-unknown.json", json.dumps(good(history=[{"role": "robot", "content": "x"}])), 'history[0].role: unknown value "robot", expected one of: system, user, assistant, tool')
put("content-number.json", json.dumps(good(history=[{"role": "user", "content": 42}])), "history[0].content: invalid type: integer `42`, expected a string")
put("tool-calls-object.json", json.dumps(good(history=[{"role": "assistant", "content": "", "tool_calls": {"id": "x"}}])), "history[0].tool_calls: invalid type: map, expected a sequence")
put("status-string.json", json.dumps(good(failure={"status": "413", "message": "x"})), 'failure.status: invalid type: string "413", expected u16')
put("status-out-of-range.json", json.dumps(good(failure={"status": 70000, "message": "x"})), "failure.status: invalid value: integer `70000`, expected u16")
put("rejected-negative.json", json.dumps(good(failure={"status": 413, "message": "x", "rejected_request_bytes": -5})), "failure.rejected_request_bytes: invalid value: integer `-5`, expected u64")
put("gateway-style-unknown.json", json.dumps(good(upstream={"gateway": {"max_body_bytes": 100, "rejects_with": "teapot"}})), 'upstream.gateway.rejects_with: unknown value "teapot", expected one of: http_413, http_431, waf_403, waf_html_403, connection_reset, eof')
put("overflow-style-number.json", json.dumps(good(upstream={"model": {"context_window_tokens": 1000, "overflow_style": 3}})), "upstream.model.overflow_style: invalid type: integer `3`, expected a string")
put("window-float.json", json.dumps(good(upstream={"model": {"context_window_tokens": 1.5}})), "upstream.model.context_window_tokens: invalid type: floating point `1.5`, expected u64")
put("expect-outcome-unknown.json", json.dumps(good(expect={"outcome": "victory"})), 'expect.outcome: unknown value "victory", expected one of: recovered, failed_fast, exhausted, not_recoverable, no_failure')
put("expect-unknown-field.json", json.dumps(good(expect={"outcome": "recovered", "levle": 2})), "expect.levle: unknown field `levle`, expected one of `outcome`, `max_attempts`, `level`, `notice_injected`, `cap_learned_bytes`, `events`")
put("settings-number.json", json.dumps(good(settings={"CHATCLI_MAX_PAYLOAD": 5})), "settings.CHATCLI_MAX_PAYLOAD: invalid type: integer `5`, expected a string")
put("responses-object.json", json.dumps(good(upstream={"responses": {"content": "x"}})), "upstream.responses: invalid type: map, expected a sequence")
put("stop-reason-unknown.json", json.dumps(good(upstream={"responses": [{"stop_reason": "tired", "content": "x"}]})), 'upstream.responses[0].stop_reason: unknown value "tired", expected one of: end_turn, max_tokens, length')
put("recorded-summaries-string.json", json.dumps(good(recorded={"summaries": "x"})), 'recorded.summaries: invalid type: string "x", expected a sequence')
put("image-data-number.json", json.dumps(good(history=[{"role": "user", "content": "x", "images": [{"data": 1}]}])), "history[0].images[0].data: invalid type: integer `1`, expected a string")
# Unknown versions and missing keys.
put("format-v2.json", json.dumps(good(format="salvage.capture/2")), 'format: unknown capture format "salvage.capture/2" (this build reads salvage.capture/1)')
put("format-missing.json", json.dumps(good(format=None)), "format: unknown capture format \"<missing>\" (this build reads salvage.capture/1)")
put("format-number.json", json.dumps(good(format=1)), 'format: unknown capture format "1" (this build reads salvage.capture/1)')
put("id-missing.json", json.dumps(good(id=None)), "(top level): missing field `id`")
put("id-empty.json", json.dumps(good(id="  ")), "id: must not be empty")
put("history-missing.json", json.dumps(good(history=None)), "(top level): missing field `history`")
put("history-empty.json", json.dumps(good(history=[])), "history: is empty: a capture needs the history of the rejected request")
put("failure-missing.json", json.dumps(good(failure=None)), "(top level): missing field `failure`")
put("role-missing.json", json.dumps(good(history=[{"content": "x"}])), "history[0]: missing field `role`")
put("tool-result-without-id.json", json.dumps(good(history=[{"role": "user", "content": "q"}, {"role": "tool", "content": "result"}])), "history[1].tool_call_id: a tool result must name the call it answers")
put("duplicate-key.json", '{"format":"salvage.capture/1","id":"a","id":"b","history":[{"role":"user","content":"x"}],"failure":{}}', "(top level): duplicate field `id`")
# Invalid UTF-8 and NUL bytes.
raw = text.encode()
put("invalid-utf8-start.json", b"\xff" + raw, "invalid UTF-8 at byte 0 (line 1)")
put("invalid-utf8-content.json", raw.replace(b"fix it", b"fix \xc3\x28it"), "invalid UTF-8 at byte %d (line 1)" % (raw.index(b"fix it") + 4))
put("invalid-utf8-line3.json", b"{\n\n\"format\": \"salvage.capture/1\xe2\x82\"}", "invalid UTF-8 at byte 31 (line 3)")
put("nul-byte.json", raw.replace(b"fix it", b"fix\x00it"), "malformed JSON at line 1, column %d: control character (\\u0000-\\u001F) found while parsing a string" % (raw.index(b"fix it") + 3))
# Hostile structure.
put("deeply-nested.json", '{"format":"salvage.capture/1","id":"x","history":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","name":"n","arguments":' + "[" * 5000 + "]" * 5000 + '}]}],"failure":{}}', "malformed JSON at line 1, column %d: recursion limit exceeded" % (len('{"format":"salvage.capture/1","id":"x","history":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","name":"n","arguments":') + 123))
with open(os.path.join(OUT, "..", "bad.expected.json"), "w") as f:
    json.dump(cases, f, indent=1, sort_keys=True, ensure_ascii=False)
print(len(cases), "bad inputs")
