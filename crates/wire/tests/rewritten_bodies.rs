//! After a simulated compaction (middle turns dropped, contents cut, a notice inserted, a result
//! replaced by a stub) the rebuilt body is still a well-formed body of its format that carries
//! the surviving messages' opaque blocks; every history exports to every body format; redaction
//! keeps the round trip.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::bodies::*;
use salvage_types::message::{Message, Role};
use salvage_types::weight::compact_json_len;
use salvage_wire::{import, request_body, request_bytes, Source};
use serde_json::Value;

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
