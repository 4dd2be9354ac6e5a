//! What a session's next request sends back: every reasoning block (signed thinking, redacted
//! thinking, encrypted reasoning) verbatim, in order and weighed, and every block kind the file
//! took in.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_testkit::jsonl;
use salvage_types::timeline::Change;
use salvage_wire::session::Session;
use salvage_wire::Source;
use serde_json::{json, Value};
use std::path::Path;

/// Provider blocks a session's next request must send back verbatim (signed or encrypted).
const REASONING: [&str; 3] = ["thinking", "redacted_thinking", "reasoning"];

/// Every object of a reasoning kind under `v`, in document order.
fn reasoning_blocks(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str).is_some_and(|t| REASONING.contains(&t)) {
                out.push(v.clone());
                return;
            }
            o.values().for_each(|x| reasoning_blocks(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| reasoning_blocks(x, out)),
        _ => {}
    }
}

/// The reasoning blocks of a session file, in file order, and whether the file holds a
/// compaction, a branch, a sidechain or a rollback (then only some of them are in the final
/// history).
fn file_reasoning(p: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        // Claude Code: the message; Codex: the response item (bare in the legacy layout).
        let part = if v.get("message").is_some() {
            &v["message"]["content"]
        } else if v["type"] == "response_item" {
            &v["payload"]
        } else {
            &v
        };
        reasoning_blocks(part, &mut out);
    }
    out
}

/// True when `sub` appears in `all` in order (not necessarily contiguously).
fn is_subsequence(sub: &[Value], all: &[Value]) -> bool {
    let mut it = all.iter();
    sub.iter().all(|x| it.any(|y| y == x))
}

/// The body the session's client would send next, in the session's own provider format, and
/// the reasoning blocks in it.
fn rebuilt(s: &Session) -> (Value, Vec<Value>) {
    let h = s.history();
    let body = salvage_wire::request_body(&s.request(), &h);
    let mut out = Vec::new();
    reasoning_blocks(&body, &mut out);
    (body, out)
}

#[test]
fn session_bodies_send_back_every_reasoning_block_verbatim_in_order_and_weighed() {
    for (dir, source) in [("claude-code", Source::ClaudeCode), ("codex", Source::Codex)] {
        for p in all(dir) {
            let s = read_file(source, &p);
            let (body, got) = rebuilt(&s);
            let want = file_reasoning(&p);
            assert!(
                is_subsequence(&got, &want),
                "{}: {got:?} not verbatim/in order in {want:?}",
                p.display()
            );
            // Every reasoning block the report puts in the history is in the final body unless
            // a compaction, a rollback or a branch left it out.
            let carried: u64 = [
                "block:thinking",
                "block:redacted_thinking",
                "record:response_item/reasoning",
                "record:reasoning (bare item)",
            ]
            .iter()
            .map(|k| s.report.get(k).opaque + s.report.get(k).history)
            .sum();
            let cut = s
                .steps
                .iter()
                .any(|st| matches!(st.change, Change::Compaction { .. } | Change::Rollback { .. }));
            if !cut {
                assert_eq!(
                    got.len() as u64,
                    carried,
                    "{}: reasoning blocks dropped from the body",
                    p.display()
                );
            }
            // Weighed: the size of the request is the size of a body that holds them.
            let bytes = salvage_wire::request_bytes(&s.request(), &s.history());
            assert_eq!(bytes, salvage_types::weight::compact_json_len(&body));
            let weight: u64 = s.history().iter().map(salvage_types::weight::message_weight).sum();
            let blocks: u64 = got.iter().map(salvage_types::weight::compact_json_len).sum();
            assert!(weight >= blocks, "{}: the history weighs less than its reasoning blocks", p.display());
        }
    }
}

#[test]
fn codex_samples_with_reasoning_send_it_back() {
    for name in ["fixture-tool-item-types.jsonl", "real-2026-04-excerpt-noncontiguous.jsonl"] {
        let p = samples().join("codex").join(name);
        let s = read_file(Source::Codex, &p);
        let (body, got) = rebuilt(&s);
        assert_eq!(got, file_reasoning(&p), "{name}: every reasoning item, verbatim, in order");
        assert!(got.iter().all(|r| r["encrypted_content"].is_string()));
        // The reasoning item comes right before the call it led to, as the rollout has it.
        let input = body["input"].as_array().unwrap();
        let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
        assert_eq!(input[at + 1]["type"], "function_call", "{name}: {body}");
    }
}

/// A Claude Code transcript in the newer layout (one block per record, `apiBlockIndex`) with
/// thinking, redacted thinking and parallel tool use, built from the shapes the samples README
/// documents (no public transcript with signed thinking was found).
fn thinking_transcript() -> (String, Vec<Value>) {
    let t1 = json!({"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkD1"});
    let r1 = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"});
    let t2 = json!({"type": "thinking", "thinking": "Now the second file.", "signature": "EqQBCkYIBxgCKkD2"});
    let a = |id: &str, block: &Value| json!({"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [block], "usage": {"output_tokens": 7}});
    let text = jsonl(&[
        cc("u1", None, "user", 0, json!({"role": "user", "content": "Fix the test"})),
        cc("a1", Some("u1"), "assistant", 1, a("msg_1", &t1)),
        cc("a2", Some("a1"), "assistant", 2, a("msg_1", &r1)),
        cc(
            "a3",
            Some("a2"),
            "assistant",
            3,
            a(
                "msg_1",
                &json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.rs"}}),
            ),
        ),
        cc(
            "u2",
            Some("a3"),
            "user",
            4,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn a() {}"}]}),
        ),
        cc("a4", Some("u2"), "assistant", 5, a("msg_2", &t2)),
        cc("a5", Some("a4"), "assistant", 6, a("msg_2", &json!({"type": "text", "text": "Reading b."}))),
        cc(
            "a6",
            Some("a5"),
            "assistant",
            7,
            a(
                "msg_2",
                &json!({"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "b.rs"}}),
            ),
        ),
        cc(
            "u3",
            Some("a6"),
            "user",
            8,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "fn b() {}"}]}]}),
        ),
    ]);
    (text, vec![t1, r1, t2])
}

#[test]
fn claude_code_body_sends_back_thinking_and_redacted_thinking_in_place() {
    let (text, blocks) = thinking_transcript();
    let s = read_str(Source::ClaudeCode, &text);
    let (body, got) = rebuilt(&s);
    assert_eq!(got, blocks, "every thinking block, verbatim (signature included), in order");
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 5, "{body}");
    // The first assistant turn is exactly what the API returned: thinking, redacted, tool_use.
    let kinds = |i: usize| {
        m[i]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(1), ["thinking", "redacted_thinking", "tool_use"]);
    assert_eq!(kinds(3), ["thinking", "text", "tool_use"]);
    assert_eq!(m[3]["content"][0], blocks[2]);
    assert_eq!(m[3]["content"][1]["text"], "Reading b.");
    // Response-only fields stay out of the request.
    assert!(m[1].get("usage").is_none() && m[1].get("model").is_none() && m[1].get("id").is_none());
    // The model text is not stored twice.
    assert!(!s.history()[3].wire.as_ref().unwrap().to_string().contains("Reading b."));
    assert_eq!(s.report.get("block:thinking").opaque, 2);
    assert_eq!(s.report.get("block:redacted_thinking").opaque, 1);
}

/// Objects with `"type": kind` in the body's message list (top level of each message's blocks,
/// or the input items).
fn body_count(body: &Value, kind: &str) -> u64 {
    let top: Vec<&Value> = match (body.get("messages"), body.get("input")) {
        (Some(Value::Array(ms)), _) => ms.iter().filter_map(|m| m["content"].as_array()).flatten().collect(),
        (_, Some(Value::Array(items))) => items.iter().collect(),
        _ => Vec::new(),
    };
    top.iter().filter(|b| b["type"] == kind).count() as u64
}

#[test]
fn every_sample_sends_out_each_block_kind_it_took_in() {
    // Per kind, what the report puts in the history (modeled or carried opaquely) is what the
    // rebuilt body holds, for every session sample whose final history is its whole active branch
    // (no compaction or rollback cut it).
    let kinds: [(&str, &[&str]); 3] = [
        ("claude-code", &["tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"]),
        (
            "codex",
            &[
                "function_call",
                "function_call_output",
                "custom_tool_call",
                "custom_tool_call_output",
                "reasoning",
                "web_search_call",
                "local_shell_call",
            ],
        ),
        ("cline", &["tool_use", "tool_result", "image", "document"]),
    ];
    let mut checked = 0;
    for ((dir, source), (_, ks)) in FORMATS.into_iter().zip(kinds) {
        for p in all(dir) {
            let s = read_file(source, &p);
            if s.steps
                .iter()
                .any(|st| matches!(st.change, Change::Compaction { .. } | Change::Rollback { .. }))
            {
                continue;
            }
            let (body, _) = rebuilt(&s);
            for k in ks {
                let report_keys = [
                    format!("block:{k}"),
                    format!("record:response_item/{k}"),
                    format!("record:{k} (bare item)"),
                ];
                let took: u64 =
                    report_keys.iter().map(|r| s.report.get(r).history + s.report.get(r).opaque).sum();
                assert_eq!(body_count(&body, k), took, "{}: {k} in ≠ {k} out\n{body:#}", p.display());
                checked += took;
            }
        }
    }
    assert!(checked > 10, "the samples hold blocks of these kinds ({checked})");
}
