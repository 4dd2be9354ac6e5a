//! Lossless import, over every sample body (`testdata/samples/<format>/`, `testdata/requests/`):
//! the rebuilt body is JSON-equal to the original and weighs exactly `request.bytes`; every block
//! or item is accounted for (modeled or carried); and after a simulated compaction (middle turns
//! dropped, contents cut, a notice inserted, a result replaced by a stub) the rebuilt body is
//! still a well-formed body of its format that carries the surviving messages' opaque blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_types::capture::RequestFormat;
use salvage_types::message::{Message, Role};
use salvage_types::weight::compact_json_len;
use salvage_wire::{import, request_body, request_bytes, Source};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every sample of a format: (name, bytes).
fn samples(source: Source) -> Vec<(String, Vec<u8>)> {
    let (dir, extra): (&str, &[&str]) = match source {
        Source::Anthropic => ("anthropic", &["anthropic-agent-tools.json"]),
        Source::Openai => ("openai-chat", &["openai-agent-tools.json"]),
        Source::OpenaiResponses => ("openai-responses", &[]),
        Source::Gemini => ("gemini", &[]),
        Source::Bedrock => ("bedrock", &[]),
        Source::Chatcli => ("chatcli", &["chatcli-session-v2.json"]),
        // Session files are not bodies: tests/sessions.rs covers them.
        Source::ClaudeCode | Source::Codex | Source::Cline => return Vec::new(),
    };
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root().join("samples").join(dir)) {
        let mut paths: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
        paths.sort();
        // `docs-fragment-*` files are partial bodies (a documentation snippet of one field).
        let bodies = paths.into_iter().filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("docs-fragment-"))
        });
        for p in bodies {
            out.push((p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    for name in extra {
        out.push((name.to_string(), std::fs::read(root().join("requests").join(name)).unwrap()));
    }
    out
}

const ALL: [Source; 6] = [
    Source::Anthropic,
    Source::Openai,
    Source::OpenaiResponses,
    Source::Gemini,
    Source::Bedrock,
    Source::Chatcli,
];

#[test]
fn every_sample_rebuilds_json_equal_with_exact_bytes() {
    let mut n = 0;
    for source in ALL {
        let list = samples(source);
        assert!(!list.is_empty(), "{source:?}: no samples");
        for (name, bytes) in list {
            let original: Value = serde_json::from_slice(&bytes).unwrap();
            let got = import(source, &bytes, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let req = got.request.as_ref().unwrap_or_else(|| panic!("{name}: no request"));
            assert_eq!(req.format, source.format(), "{name}");
            if source == Source::Chatcli {
                assert_eq!(req.bytes, None, "{name}: a session file is not a body as sent");
            } else {
                assert_eq!(req.bytes, Some(compact_json_len(&original)), "{name}: bytes is the compact size");
            }
            let body = request_body(req, &got.history);
            if body != original {
                panic!(
                    "{name}: rebuilt body differs\n--- original\n{}\n--- rebuilt\n{}",
                    serde_json::to_string_pretty(&original).unwrap(),
                    serde_json::to_string_pretty(&body).unwrap()
                );
            }
            assert_eq!(request_bytes(req, &got.history), compact_json_len(&original), "{name}");
            // The history survives a capture file (JSON) unchanged, wire included.
            let json = serde_json::to_string(&got.history).unwrap();
            let back: Vec<Message> = serde_json::from_str(&json).unwrap();
            assert_eq!(request_body(req, &back), original, "{name}: after a JSON round trip");
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} samples");
}

/// A union block's kind: its keys, sorted.
fn keys(v: &Value) -> String {
    let mut k: Vec<&String> = v.as_object().unwrap().keys().collect();
    k.sort();
    format!("{k:?}")
}

/// The kind of each block or item of a body, counted.
fn kinds(format: RequestFormat, body: &Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut add = |k: String| *out.entry(k).or_insert(0) += 1;
    let blocks = |v: &Value, key: &str| -> Vec<Value> {
        v.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    match format {
        RequestFormat::Anthropic => {
            for b in blocks(body, "system") {
                add(format!("system:{}", b["type"].as_str().unwrap_or("?")));
            }
            for m in blocks(body, "messages") {
                for b in blocks(&m, "content") {
                    add(b["type"].as_str().unwrap_or("?").to_string());
                    for inner in blocks(&b, "content") {
                        add(format!("tool_result/{}", inner["type"].as_str().unwrap_or("?")));
                    }
                }
            }
        }
        RequestFormat::Openai => {
            for m in blocks(body, "messages") {
                add(format!("role:{}", m["role"].as_str().unwrap_or("?")));
                for p in blocks(&m, "content") {
                    add(p["type"].as_str().unwrap_or("?").to_string());
                }
                for _ in blocks(&m, "tool_calls") {
                    add("tool_call".into());
                }
            }
        }
        RequestFormat::OpenaiResponses => {
            for it in blocks(body, "input") {
                add(it["type"].as_str().unwrap_or("message").to_string());
                for p in blocks(&it, "content").iter().chain(blocks(&it, "output").iter()) {
                    add(format!("part:{}", p["type"].as_str().unwrap_or("?")));
                }
            }
        }
        RequestFormat::Gemini => {
            for c in blocks(body, "contents") {
                for p in blocks(&c, "parts") {
                    add(keys(&p));
                }
            }
        }
        RequestFormat::Bedrock => {
            for b in blocks(body, "system") {
                add(format!("system:{}", keys(&b)));
            }
            for m in blocks(body, "messages") {
                for b in blocks(&m, "content") {
                    add(keys(&b));
                    if let Some(tr) = b.get("toolResult") {
                        for inner in blocks(tr, "content") {
                            add(format!(
                                "toolResult/{:?}",
                                inner.as_object().unwrap().keys().collect::<Vec<_>>()
                            ));
                        }
                    }
                }
            }
        }
        RequestFormat::Chatcli => {
            for m in blocks(body, "chat_history") {
                add(m["role"].as_str().unwrap_or("?").to_string());
            }
        }
        RequestFormat::ClaudeCode | RequestFormat::Codex | RequestFormat::Cline => {}
    }
    out
}

/// Blocks carried opaquely in a history's templates (literal objects in block lists, and `raw`
/// markers), as JSON.
fn opaque(history: &[Message]) -> Vec<Value> {
    fn has_marker(v: &Value) -> bool {
        match v {
            Value::Object(o) => o.contains_key("$") || o.values().any(has_marker),
            Value::Array(a) => a.iter().any(has_marker),
            _ => false,
        }
    }
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Array(a) => {
                for x in a {
                    if x.is_object() && !has_marker(x) {
                        out.push(x.clone());
                    } else {
                        walk(x, out);
                    }
                }
            }
            Value::Object(o) if o.get("$").is_some_and(|k| k == "raw") => out.push(o["v"].clone()),
            Value::Object(o) => {
                for (k, y) in o {
                    if !k.starts_with('$') {
                        walk(y, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for m in history {
        if let Some(w) = &m.wire {
            if w["f"] != "chatcli" {
                walk(&w["m"], &mut out);
            }
        }
    }
    out
}

/// Kinds salvage has no field for: they must be carried.
const UNMODELED: &[&str] = &[
    "thinking",
    "redacted_thinking",
    "document",
    "server_tool_use",
    "web_fetch_tool_result",
    "compaction",
    "input_audio",
    "file",
    "reasoning",
    "code_interpreter_call",
    "reasoningContent",
    "cachePoint",
    "\"thought\"",
    "inline_data",
];

#[test]
fn nothing_is_dropped_silently_block_counts_in_and_out() {
    for source in ALL {
        for (name, bytes) in samples(source) {
            let original: Value = serde_json::from_slice(&bytes).unwrap();
            let got = import(source, &bytes, &name).unwrap();
            let req = got.request.as_ref().unwrap();
            let before = kinds(req.format, &original);
            let after = kinds(req.format, &request_body(req, &got.history));
            assert_eq!(before, after, "{name}: blocks per kind, in and out");
            // Every block salvage cannot model is carried in a template.
            let unmodeled: usize =
                before.iter().filter(|(k, _)| UNMODELED.iter().any(|u| k.contains(u))).map(|(_, n)| n).sum();
            let carried = opaque(&got.history).len();
            assert!(
                carried >= unmodeled,
                "{name}: {carried} blocks carried, {unmodeled} unmodeled in {before:?}"
            );
            // Calls are modeled, one for one (a session file is the model itself).
            if source == Source::Chatcli {
                continue;
            }
            let calls: usize = got.history.iter().map(|m| m.tool_calls.len()).sum();
            let call_blocks: usize = before
                .iter()
                .filter(|(k, _)| {
                    ["tool_use", "tool_call", "function_call", "custom_tool_call"].contains(&k.as_str())
                        || k.contains("\"toolUse\"")
                        || k.contains("\"functionCall\"")
                })
                .map(|(_, n)| n)
                .sum();
            assert_eq!(calls, call_blocks, "{name}: tool calls modeled");
        }
    }
}

/// A rewrite like compaction's: a notice after the system messages, the turns between the first
/// and the last dropped whole, every content over 40 bytes cut, one tool result replaced by a
/// stub salvage wrote (no `wire`).
///
/// With `drop_middle` false nothing is dropped (so the turns with thinking and tool calls stay).
fn rewrite(h: &[Message], drop_middle: bool) -> Vec<Message> {
    let sys: Vec<Message> = h.iter().filter(|m| m.role == Role::System).cloned().collect();
    let rest: Vec<&Message> = h.iter().filter(|m| m.role != Role::System).collect();
    let starts: Vec<usize> = rest
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User && !m.content.is_empty())
        .map(|(i, _)| i)
        .collect();
    let mut out = sys;
    out.push(Message::user(
        "[Context was automatically compacted due to size limits. Previous conversation history has been summarized. Continue from where you left off.]",
    ));
    let keep_from = if drop_middle && starts.len() >= 2 { starts[starts.len() - 1] } else { 0 };
    let mut stubbed = false;
    for m in rest.iter().skip(keep_from) {
        let mut m = (*m).clone();
        if m.content.len() > 40 {
            let mut cut = 20;
            while !m.content.is_char_boundary(cut) {
                cut -= 1;
            }
            m.content = format!("{}\n... [truncated] ...", &m.content[..cut]);
        }
        if m.role == Role::Tool && !stubbed {
            let mut stub = Message::tool(m.tool_call_id.clone().unwrap_or_default(), "[result archived]");
            stub.is_error = m.is_error;
            m = stub;
            stubbed = true;
        }
        out.push(m);
    }
    out
}

/// Pairing holds on a history: each tool result answers a call of the latest assistant message
/// before it, and each call of an assistant message is answered before the next assistant.
///
/// A result whose call is in no message (held server-side, e.g. by `previous_response_id`) is
/// left alone.
fn assert_paired(name: &str, h: &[Message]) {
    let calls: Vec<&str> = h.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str())).collect();
    let mut open: Vec<String> = Vec::new();
    for m in h {
        match m.role {
            Role::Assistant => {
                assert!(open.is_empty(), "{name}: calls {open:?} unanswered");
                open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                if !calls.contains(&id.as_str()) {
                    continue;
                }
                let i = open.iter().position(|x| *x == id);
                assert!(i.is_some(), "{name}: result {id} answers no open call ({open:?})");
                open.remove(i.unwrap());
            }
            Role::User | Role::System => {}
        }
    }
}

#[test]
fn rewritten_histories_rebuild_well_formed_bodies() {
    for source in ALL {
        for ((name, bytes), drop_middle) in
            samples(source).into_iter().flat_map(|s| [(s.clone(), true), (s, false)])
        {
            let got = import(source, &bytes, &name).unwrap();
            let req = got.request.as_ref().unwrap();
            let h = rewrite(&got.history, drop_middle);
            let body = request_body(req, &h);
            assert_eq!(request_bytes(req, &h), compact_json_len(&body));
            // The rebuilt body reads back with the same importer, pairing intact …
            let again = import(source, body.to_string().as_bytes(), &name)
                .unwrap_or_else(|e| panic!("{name}: rebuilt body does not import: {e}\n{body:#}"));
            assert_paired(&name, &again.history);
            // … the notice and the cut contents in it …
            let text = body.to_string();
            assert!(text.contains("[Context was automatically compacted"), "{name}: notice");
            if h.iter().any(|m| m.content.contains("[truncated]")) {
                assert!(text.contains("[truncated]"), "{name}: cut content");
            }
            // … and every opaque block of the surviving messages (thinking with its signature,
            // documents, reasoning items …).
            for b in opaque(&h) {
                assert!(text.contains(&b.to_string()), "{name}: opaque block lost after a rewrite: {b}");
            }
            if source == Source::Anthropic {
                assert_anthropic_well_formed(&name, &body);
            }
            // Contents cut, the thinking block's signature still rides with its assistant turn.
            if name == "anthropic-agent-tools.json" && !drop_middle {
                let msgs = body["messages"].as_array().unwrap();
                let turn = &msgs.iter().find(|m| m["role"] == "assistant").unwrap()["content"];
                assert_eq!(turn[0]["type"], "thinking");
                assert_eq!(turn[0]["signature"], "sig");
                assert_eq!(turn[2]["type"], "tool_use");
            }
        }
    }
}

fn assert_anthropic_well_formed(name: &str, body: &Value) {
    let msgs = body["messages"].as_array().unwrap();
    for (i, m) in msgs.iter().enumerate() {
        let Some(blocks) = m["content"].as_array() else { continue };
        for b in blocks {
            if b["type"] == "text" {
                assert!(!b["text"].as_str().unwrap().is_empty(), "{name}: empty text block in message {i}");
            }
            if b["type"] == "thinking" {
                assert!(b["signature"].is_string(), "{name}: thinking without its signature");
            }
        }
        if m["role"] == "user" {
            // Results come first in their user message.
            let first_other = blocks.iter().position(|b| b["type"] != "tool_result").unwrap_or(blocks.len());
            assert!(
                blocks[first_other..].iter().all(|b| b["type"] != "tool_result"),
                "{name}: a tool_result after other blocks in message {i}"
            );
        }
    }
}

#[test]
fn every_history_exports_to_every_body_format() {
    for source in ALL {
        for (name, bytes) in samples(source) {
            let got = import(source, &bytes, &name).unwrap();
            let calls: usize = got.history.iter().map(|m| m.tool_calls.len()).sum();
            for target in ALL {
                let req = salvage_wire::bare_request(target.format(), Some("m"));
                let body = request_body(&req, &got.history);
                let again = import(target, body.to_string().as_bytes(), "x")
                    .unwrap_or_else(|e| panic!("{name} as {target:?}: {e}\n{body:#}"));
                assert_paired(&format!("{name} as {target:?}"), &again.history);
                let calls_again: usize = again.history.iter().map(|m| m.tool_calls.len()).sum();
                assert_eq!(calls_again, calls, "{name} as {target:?}: tool calls");
                let text = |h: &[Message]| -> String {
                    h.iter()
                        .map(|m| m.content.as_str())
                        .filter(|c| !c.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                if target != Source::Chatcli && source != Source::Chatcli {
                    for m in got.history.iter().filter(|m| m.role == Role::User && !m.content.is_empty()) {
                        assert!(
                            text(&again.history).contains(&m.content),
                            "{name} as {target:?}: user text kept"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn redaction_keeps_the_round_trip() {
    let body = serde_json::json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "metadata": {"user_id": "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx"},
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "first part, key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx"},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "AKIAZ3MDNB2QYX7TKPLE"}},
                {"type": "text", "text": "second part"}
            ]}
        ]
    });
    let mut c = salvage_types::capture::Capture {
        format: salvage_types::capture::CAPTURE_FORMAT.into(),
        id: "x".into(),
        title: None,
        client: None,
        provider: None,
        model: None,
        settings: Default::default(),
        request: None,
        history: Vec::new(),
        failure: Default::default(),
        upstream: Default::default(),
        recorded: Default::default(),
        expect: None,
    };
    let got = import(Source::Anthropic, body.to_string().as_bytes(), "b.json").unwrap();
    c.history = got.history;
    c.request = got.request;
    let counts = salvage_wire::redact::redact_capture(&mut c);
    assert_eq!(counts.values().sum::<u64>(), 3, "{counts:?}");
    let req = c.request.as_ref().unwrap();
    let rebuilt = request_body(req, &c.history);
    let text = rebuilt.to_string();
    assert!(!text.contains("AbCdEfGh") && !text.contains("AKIAZ3MDNB2QYX7TKPLE"), "{text}");
    // Still one text block per original block, and the size matches.
    let blocks = rebuilt["messages"][0]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[2]["text"], "second part");
    assert_eq!(req.bytes, Some(compact_json_len(&rebuilt)));
}

/// Shapes the samples do not cover: each body rebuilds exactly, and what it models is checked.
#[test]
fn edge_shapes_round_trip() {
    use serde_json::json;
    let cases: Vec<(Source, Value)> = vec![
        (
            Source::Openai,
            json!({"model": "gpt-4o", "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "name": "ana", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}]},
                {"role": "assistant", "content": null, "function_call": {"name": "lookup", "arguments": "{\"q\": \"caf\\u00e9\"}"}},
                {"role": "function", "name": "lookup", "content": "found"},
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\":1,\"a\":[1.5,true]}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}
            ]}),
        ),
        (
            Source::OpenaiResponses,
            json!({"model": "gpt-5", "input": [
                {"type": "item_reference", "id": "msg_0"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "patch it"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
                {"type": "custom_tool_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "Done."}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "original"}]},
                {"type": "local_shell_call", "id": "lsc_1", "call_id": "call_2", "action": {"type": "exec", "command": ["ls"]}},
                {"type": "local_shell_call_output", "call_id": "call_2", "output": "README.md"},
                {"role": "user", "content": "and the tests"}
            ]}),
        ),
        (Source::OpenaiResponses, json!({"model": "gpt-4.1", "instructions": "be kind", "input": "hello"})),
        (
            Source::Gemini,
            json!({"system_instruction": {"parts": [{"text": "sys"}]}, "contents": [
                {"role": "user", "parts": [{"text": "weather?"}]},
                {"role": "model", "parts": [{"function_call": {"name": "w", "args": {"c": "X"}}}, {"functionCall": {"name": "w", "args": {"c": "Y"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "w", "response": {"temp": 3, "unit": "C"}}},
                    {"functionResponse": {"name": "w", "response": {"error": "down"}}},
                    {"text": "thanks"}
                ]}
            ]}),
        ),
        (
            Source::Bedrock,
            json!({"modelId": "anthropic.claude", "messages": [
                {"role": "user", "content": [{"text": "go"}, {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k"}}}}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "run", "input": {"x": 1}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"ok": false}}, {"text": "tail"}], "status": "error"}}]}
            ]}),
        ),
        (
            Source::Anthropic,
            json!({"model": "claude", "max_tokens": 10, "system": [{"type": "text", "text": "s", "citations": null}], "messages": [
                {"role": "user", "content": ""},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "n", "input": "{\"a\":1}"}, {"type": "mystery", "$": "x"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "is_error": false, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "two"}]}
            ]}),
        ),
    ];
    for (i, (source, body)) in cases.iter().enumerate() {
        let got = import(*source, body.to_string().as_bytes(), "edge.json")
            .unwrap_or_else(|e| panic!("case {i}: {e}"));
        let req = got.request.as_ref().unwrap();
        let rebuilt = request_body(req, &got.history);
        assert_eq!(&rebuilt, body, "case {i}: {:#}", serde_json::to_value(&got.history).unwrap());
        assert_eq!(request_bytes(req, &got.history), compact_json_len(body), "case {i}");
        assert_paired(&format!("case {i}"), &got.history);
        let h = &got.history;
        match i {
            0 => {
                assert_eq!(h[0].role, Role::System);
                assert_eq!(h[1].content, "a\n");
                assert_eq!(h[1].images.len(), 1);
                assert_eq!(
                    h[2].tool_calls[0].arguments,
                    json!({"q": "café"}),
                    "python-style arguments parsed"
                );
                assert_eq!(
                    h[3].tool_call_id.as_deref(),
                    Some(h[2].tool_calls[0].id.as_str()),
                    "legacy pairing"
                );
                assert_eq!(h[4].content, "no");
            }
            1 => {
                assert_eq!(h[0].role, Role::User);
                assert_eq!(h[1].tool_calls[0].name, "apply_patch");
                assert_eq!(h[2].tool_call_id.as_deref(), Some("call_1"));
                assert_eq!((h[2].content.as_str(), h[2].images.len()), ("Done.", 1));
            }
            2 => assert_eq!((h[0].content.as_str(), h[1].content.as_str()), ("be kind", "hello")),
            3 => {
                let ids: Vec<&str> = h[2].tool_calls.iter().map(|c| c.id.as_str()).collect();
                assert_eq!(h[3].tool_call_id.as_deref(), Some(ids[0]));
                assert_eq!(h[4].tool_call_id.as_deref(), Some(ids[1]));
                assert!(h[4].is_error && !h[3].is_error);
                assert_eq!(h[3].content, r#"{"temp":3,"unit":"C"}"#);
            }
            4 => {
                assert!(h[2].is_error);
                assert_eq!(h[2].content, "{\"ok\":false}\ntail");
            }
            5 => {
                assert_eq!(h[2].tool_calls.len(), 1, "a call kept as sent is still modeled");
                assert_eq!(h[4].content, "one\ntwo");
            }
            _ => {}
        }
    }
}

/// The history's weight stays close to the body's size: templates add structure, never a second
/// copy of the modeled text.
#[test]
fn weight_is_honest() {
    for source in ALL {
        for (name, bytes) in samples(source) {
            let got = import(source, &bytes, &name).unwrap();
            let body = compact_json_len(&serde_json::from_slice(&bytes).unwrap());
            let weight = salvage_types::history_weight(&got.history);
            let images: u64 = got
                .history
                .iter()
                .flat_map(|m| m.images.iter())
                .map(|i| salvage_types::weight::image_tokens(i) * 4)
                .sum();
            let text_weight = weight - images;
            println!("{name}: body {body}, weight {weight} (images {images})");
            assert!(text_weight <= body, "{name}: weight {text_weight} over the body's {body} bytes");
        }
    }
}

#[test]
fn results_of_a_chained_response_are_marked_as_held_upstream() {
    let body = std::fs::read(
        root().join("samples/openai-responses/responses-previous-response-id-function-call-output.json"),
    )
    .unwrap();
    let h = import(Source::OpenaiResponses, &body, "chained.json").unwrap().history;
    let results: Vec<&Message> = h.iter().filter(|m| m.role == Role::Tool).collect();
    assert_eq!(results.len(), 1);
    assert!(results.iter().all(|m| m.meta.call_held_upstream), "{results:?}");
    // Without previous_response_id the same result answers nothing: an orphan, unmarked.
    let mut v: Value = serde_json::from_slice(&body).unwrap();
    v.as_object_mut().unwrap().remove("previous_response_id");
    let h = import(Source::OpenaiResponses, v.to_string().as_bytes(), "unchained.json").unwrap().history;
    assert!(h.iter().filter(|m| m.role == Role::Tool).all(|m| !m.meta.call_held_upstream));
}
