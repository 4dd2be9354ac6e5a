//! Body shapes the samples do not cover: each rebuilds exactly, and what it models is checked.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::bodies::*;
use salvage_types::message::Role;
use salvage_types::weight::compact_json_len;
use salvage_wire::{import, request_body, request_bytes, Source};
use serde_json::Value;

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

/// Review (third pass): a file starting with a UTF-8 byte-order mark was detected (detection
/// skips the mark) and then failed to parse ("expected value at line 1 column 1").
#[test]
fn a_byte_order_mark_is_skipped_by_every_reader() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    for (source, rel) in [
        (Source::Anthropic, "requests/anthropic-agent-tools.json"),
        (Source::ClaudeCode, "samples/claude-code/fixture-branch-and-compaction.jsonl"),
    ] {
        let plain = std::fs::read(root.join(rel)).unwrap();
        let mut marked = b"\xEF\xBB\xBF".to_vec();
        marked.extend_from_slice(&plain);
        let a = import(source, &plain, rel).unwrap();
        let b = import(source, &marked, rel).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(a.history, b.history, "{rel}");
        let c = salvage_wire::import_owned(source, marked, rel).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(a.history, c.history, "{rel}");
    }
}
