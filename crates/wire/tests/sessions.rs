//! Session-file importers (Claude Code, Codex CLI, Cline) over every sample in
//! `testdata/samples/` (real captures and parser fixtures, provenance in its README): each imports
//! and accounts for every record and block, and a file cut anywhere is read or refused without a
//! panic. The formats' own behaviour is in `claude_code_sessions.rs`, `codex_sessions.rs` and
//! `cline_sessions.rs`; what a session sends back, in `session_reasoning.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_testkit::jsonl;
use salvage_wire::{read_session, Source};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn every_sample_imports_and_accounts_for_everything() {
    for (dir, source) in FORMATS {
        for p in all(dir) {
            let s = read_file(source, &p);
            assert!(!s.history().is_empty(), "{}: empty history", p.display());
            for (kind, t) in &s.report.kinds {
                assert!(t.balanced(), "{}: {kind} is not balanced: {t:?}", p.display());
            }
            let req = s.request();
            assert_eq!(req.bytes, None, "a session file is not a body: its size as sent is unknown");
        }
    }
}

/// Counts the raw file's records and blocks by kind, independently of the importer, in the
/// report's naming. Inner parts (tool_result content, tool outputs, replacement histories) are
/// left out: the importer names them by their container.
fn raw_counts(source: Source, p: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut c: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |k: String| *c.entry(k).or_insert(0) += 1;
    let blocks = |content: &Value, add: &mut dyn FnMut(String)| match content {
        Value::String(_) => add("block:text".into()),
        Value::Array(b) => {
            for x in b {
                add(format!("block:{}", x["type"].as_str().unwrap()));
            }
        }
        _ => {}
    };
    match source {
        Source::ClaudeCode => {
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                let v: Value = serde_json::from_str(l).unwrap();
                let t = v["type"].as_str().unwrap();
                match (t, v["subtype"].as_str()) {
                    ("system", Some(sub)) => add(format!("record:system/{sub}")),
                    _ => add(format!("record:{t}")),
                }
                blocks(&v["message"]["content"], &mut add);
            }
        }
        Source::Codex => {
            for (i, l) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                let v: Value = serde_json::from_str(l).unwrap();
                let t = v["type"].as_str().unwrap_or("");
                let pt = v["payload"]["type"].as_str().unwrap_or("(untyped)");
                let item = if v.get("payload").is_some() { &v["payload"] } else { &v };
                match t {
                    "response_item" => add(format!("record:response_item/{pt}")),
                    "event_msg" => add(format!("record:event_msg/{pt}")),
                    "" if i == 0 => add("record:(legacy header)".into()),
                    "message" | "reasoning" | "function_call" | "function_call_output" => {
                        add(format!("record:{t} (bare item)"))
                    }
                    other => add(format!("record:{other}")),
                }
                if item["type"] == "message" {
                    blocks(&item["content"], &mut add);
                }
            }
        }
        _ => {
            let v: Value = serde_json::from_str(&text).unwrap();
            for m in v.as_array().unwrap() {
                add(format!("record:{}", m["role"].as_str().unwrap()));
                blocks(&m["content"], &mut add);
            }
        }
    }
    c
}

#[test]
fn records_and_blocks_in_equal_records_and_blocks_accounted() {
    for (dir, source) in FORMATS {
        for p in all(dir) {
            let s = read_file(source, &p);
            let raw = raw_counts(source, &p);
            let mut got: BTreeMap<String, u64> = BTreeMap::new();
            for (k, t) in &s.report.kinds {
                let inner = k.starts_with("block:tool_result.")
                    || k.starts_with("block:output.")
                    || k.starts_with("record:replacement_history/")
                    || k.starts_with("field:");
                if !inner {
                    got.insert(k.clone(), t.seen);
                }
            }
            assert_eq!(got, raw, "{}: kinds in ≠ kinds accounted", p.display());
        }
    }
}

#[test]
fn a_truncated_last_line_is_skipped_and_a_bad_line_elsewhere_is_named() {
    let good = jsonl(&[cc("u1", None, "user", 0, json!({"role": "user", "content": "hi"}))]);
    let s = read_str(Source::ClaudeCode, &(good.clone() + "{\"type\":\"assistant\",\"uui"));
    assert_eq!(s.history().len(), 1);
    assert!(s.report.notes[0].contains("line 2"));
    let e = read_session(Source::ClaudeCode, format!("{{oops\n{good}").as_bytes(), "t.jsonl").unwrap_err();
    assert!(e.to_string().starts_with("t.jsonl: line 1: malformed JSON"), "{e}");
    let e = read_session(Source::Codex, b"", "empty.jsonl").unwrap_err();
    assert!(e.to_string().contains("nothing to import"), "{e}");
}

#[test]
fn cut_anywhere_a_sample_is_read_or_refused_without_panicking() {
    for (dir, source) in FORMATS {
        for p in all(dir) {
            let bytes = std::fs::read(&p).unwrap();
            let step = (bytes.len() / 97).max(1);
            for cut in (0..bytes.len()).step_by(step) {
                if let Ok(s) = read_session(source, &bytes[..cut], "cut") {
                    for t in s.report.kinds.values() {
                        assert!(t.balanced());
                    }
                    let _ = s.history();
                }
            }
        }
    }
}
