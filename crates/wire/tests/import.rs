//! Importers against realistic request bodies in `testdata/requests/`: message count, roles,
//! tool-call ids and text match the source, and import → request body → import is the identity.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_types::message::Role;
use salvage_types::History;
use salvage_wire::{anthropic, import, openai, Source};
use serde_json::Value;
use std::path::PathBuf;

fn read(name: &str) -> (Vec<u8>, Value) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/requests").join(name);
    let bytes = std::fs::read(&p).unwrap();
    let v = serde_json::from_slice(&bytes).unwrap();
    (bytes, v)
}

/// The history without the provider templates (the legacy body builders do not write them).
fn modeled(h: &History) -> History {
    h.iter()
        .cloned()
        .map(|mut m| {
            m.wire = None;
            m
        })
        .collect()
}

fn roles(h: &History) -> Vec<&'static str> {
    h.iter().map(|m| m.role.as_str()).collect()
}

#[test]
fn openai_body_matches_source() {
    let (bytes, src) = read("openai-agent-tools.json");
    let got = import(Source::Openai, &bytes, "openai-agent-tools.json").unwrap();
    let msgs = src["messages"].as_array().unwrap();
    assert_eq!(got.history.len(), msgs.len());
    assert_eq!(got.model.as_deref(), src["model"].as_str());
    for (m, s) in got.history.iter().zip(msgs) {
        assert_eq!(m.role.as_str(), s["role"].as_str().unwrap());
        match &s["content"] {
            Value::String(t) => assert_eq!(&m.content, t),
            Value::Array(parts) => {
                let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
                assert_eq!(m.content, texts.join("\n"));
                let images = parts.iter().filter(|p| p["type"] == "image_url").count();
                assert_eq!(m.images.len(), images);
            }
            _ => assert_eq!(m.content, ""),
        }
        let ids: Vec<&str> = s["tool_calls"]
            .as_array()
            .map(|a| a.iter().map(|c| c["id"].as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(m.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ids);
        for (c, sc) in m.tool_calls.iter().zip(s["tool_calls"].as_array().into_iter().flatten()) {
            let args: Value = serde_json::from_str(sc["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(c.arguments, args, "arguments are parsed from their JSON string");
        }
        assert_eq!(m.tool_call_id.as_deref(), s["tool_call_id"].as_str());
    }
    assert!(got.history[1].content.contains("O build quebrou"));
    // Round trip through the body a client would send.
    let body = openai::request_body(&got.history, "gpt-4.1", None);
    let again = import(Source::Openai, body.to_string().as_bytes(), "rt").unwrap();
    assert_eq!(modeled(&again.history), modeled(&got.history));
}

#[test]
fn anthropic_body_matches_source() {
    let (bytes, src) = read("anthropic-agent-tools.json");
    let got = import(Source::Anthropic, &bytes, "anthropic-agent-tools.json").unwrap();
    let h = &got.history;
    // system, user, assistant(text+call), tool, assistant(2 calls), tool, tool, user(text+image), assistant, user
    assert_eq!(
        roles(h),
        vec!["system", "user", "assistant", "tool", "assistant", "tool", "tool", "user", "assistant", "user"]
    );
    let sys = src["system"].as_array().unwrap();
    assert_eq!(h[0].system_parts.len(), sys.len());
    assert_eq!(h[0].system_parts[1].cache_control, Some(sys[1]["cache_control"].clone()));
    assert_eq!(h[1].content, src["messages"][0]["content"].as_str().unwrap());
    assert_eq!(h[2].content, "Let me read the test.", "thinking is not content");
    let thinking = &h[2].wire.as_ref().unwrap()["m"]["content"][0];
    assert_eq!(thinking["signature"], "sig", "thinking is carried with its signature");
    assert_eq!(h[2].tool_calls[0].id, "toolu_01A");
    assert_eq!(h[2].tool_calls[0].arguments, src["messages"][1]["content"][2]["input"]);
    assert_eq!(h[3].tool_call_id.as_deref(), Some("toolu_01A"));
    assert_eq!(
        h[4].tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        vec!["toolu_01B", "toolu_01C"]
    );
    assert!(h[5].is_error);
    assert_eq!(h[5].content, "error: database is locked (SQLITE_BUSY)");
    assert_eq!(h[7].images.len(), 1);
    assert_eq!(h[9].content, "ok, go ahead — 謝謝");
    let body = anthropic::request_body(h, "claude-sonnet-4-5", 8192);
    let again = import(Source::Anthropic, body.to_string().as_bytes(), "rt").unwrap();
    assert_eq!(modeled(&again.history), modeled(h));
    // The rebuilt body folds the two tool results and the text into one user message, as the API requires.
    assert_eq!(body["messages"].as_array().unwrap().len(), src["messages"].as_array().unwrap().len());
}

#[test]
fn chatcli_session_loads_unchanged() {
    let (bytes, src) = read("chatcli-session-v2.json");
    let got = import(Source::Chatcli, &bytes, "chatcli-session-v2.json").unwrap();
    let msgs = src["chat_history"].as_array().unwrap();
    assert_eq!(got.history.len(), msgs.len());
    for (m, s) in got.history.iter().zip(msgs) {
        assert_eq!(m.role.as_str(), s["role"].as_str().unwrap());
        assert_eq!(m.content, s["content"].as_str().unwrap());
    }
    assert_eq!(got.history[5].error_code.as_deref(), Some("ENOENT"));
    assert!(got.history[6].meta.preserve_verbatim && got.history[6].meta.agent_feedback);
    assert_eq!(got.history[7].meta.summary_of, Some(12));
    assert_eq!(got.history[8].meta.skill_names.as_deref(), Some("go-style,testing"));
    assert_eq!(got.history[0].role, Role::System);
    assert_eq!(got.model.as_deref(), Some("claude-sonnet-4"));
    // Serializing and reading back is the identity.
    let json = serde_json::to_string(&got.history).unwrap();
    assert_eq!(serde_json::from_str::<History>(&json).unwrap(), got.history);
}

#[test]
fn malformed_inputs_name_file_and_path() {
    let cases: &[(Source, &[u8], &str)] = &[
        (
            Source::Openai,
            br#"{"messages":[{"role":"user","content":5}]}"#,
            "f.json: messages[0].content: expected a string, an array of parts or null, found a number",
        ),
        (
            Source::Openai,
            br#"{"messages":[{"role":"wizard"}]}"#,
            "f.json: messages[0].role: unknown role \"wizard\"",
        ),
        (Source::Openai, br#"{"model":"x"}"#, "f.json: messages: missing"),
        (Source::Openai, br#"[1,2]"#, "f.json: (top level): expected an object, found an array"),
        (
            Source::Anthropic,
            br#"{"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}"#,
            "f.json: messages[0].content[0].tool_use_id: missing",
        ),
        (
            Source::Anthropic,
            br#"{"system":7,"messages":[]}"#,
            "f.json: system: expected a string or an array of blocks, found a number",
        ),
        (
            Source::Chatcli,
            br#"{"version":3,"chat_history":[]}"#,
            "f.json: version: unsupported session file version 3",
        ),
        (
            Source::Chatcli,
            br#"{"version":2,"chat_history":[{"role":"user"},{"role":1}]}"#,
            "f.json: chat_history[1].role: invalid type: integer `1`, expected",
        ),
        (Source::Openai, br#"{"messages":[{"role":"user","#, "f.json: malformed JSON at line 1, column 28"),
        (
            Source::Openai,
            b"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
            "f.json: invalid UTF-8 at byte 39 (line 1)",
        ),
    ];
    for (src, bytes, want) in cases {
        let e = import(*src, bytes, "f.json").unwrap_err().to_string();
        assert!(e.starts_with(want), "got {e:?}, want prefix {want:?}");
    }
}

/// A body of 4 MB or more has its size counted beside the import (on another thread): the
/// request still records the exact compact size, through every entry point, in every body format.
#[test]
fn a_large_bodys_size_is_counted_exactly() {
    let text = "a line of a long tool result, with \"quotes\", a tab\t and é\n".repeat(90_000);
    let bodies = [
        (
            Source::Anthropic,
            serde_json::json!({"model": "m", "max_tokens": 10, "system": "be brief", "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": "go on"}
            ]}),
        ),
        (
            Source::Openai,
            serde_json::json!({"model": "m", "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": text}
            ]}),
        ),
        (Source::Gemini, serde_json::json!({"contents": [{"role": "user", "parts": [{"text": text}]}]})),
    ];
    for (source, body) in bodies {
        let bytes = serde_json::to_vec_pretty(&body).unwrap();
        assert!(bytes.len() >= 4 << 20, "{source:?}: the body must be large");
        let size = Some(salvage_types::weight::compact_json_len(&body));
        assert_eq!(size, Some(serde_json::to_vec(&body).unwrap().len() as u64));
        let seen = [
            import(source, &bytes, "big.json").unwrap(),
            salvage_wire::import_owned(source, bytes.clone(), "big.json").unwrap(),
            salvage_wire::import_value(source, &body, "big.json").unwrap(),
        ];
        for (i, imported) in seen.iter().enumerate() {
            assert_eq!(imported.request.as_ref().and_then(|r| r.bytes), size, "{source:?}, entry {i}");
        }
    }
}
