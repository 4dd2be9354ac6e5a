//! Lossless import, over every sample body (`testdata/samples/<format>/`, `testdata/requests/`):
//! the rebuilt body is JSON-equal to the original and weighs exactly `request.bytes`, every block
//! or item is accounted for (modeled or carried), and the history weighs about what the body
//! does. After a rewrite, `rewritten_bodies.rs`; shapes no sample has, `edge_shapes.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::bodies::*;
use salvage_types::capture::RequestFormat;
use salvage_types::message::{Message, Role};
use salvage_types::weight::compact_json_len;
use salvage_wire::{import, request_body, request_bytes, Source};
use serde_json::Value;
use std::collections::BTreeMap;

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
        RequestFormat::ClaudeCode
        | RequestFormat::Codex
        | RequestFormat::Cline
        | RequestFormat::GeminiCli => {}
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
