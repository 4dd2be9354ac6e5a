//! Session-file importers (Claude Code, Codex CLI, Cline) against the samples in
//! `testdata/samples/` (real captures and parser fixtures, provenance in its README) and against
//! small inline files built from the shapes that README documents.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_types::message::Role;
use salvage_types::timeline::{self, Change};
use salvage_types::History;
use salvage_wire::session::Session;
use salvage_wire::{read_session, Source};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn samples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/samples")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("jsonl" | "json"))
            && !p.to_string_lossy().ends_with(".meta.json")
        {
            out.push(p);
        }
    }
}

/// Every sample file of a format.
fn all(format: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(&samples().join(format), &mut out);
    out.sort();
    assert!(!out.is_empty(), "no {format} samples");
    out
}

fn read_file(source: Source, p: &Path) -> Session {
    let bytes = std::fs::read(p).unwrap();
    read_session(source, &bytes, &p.display().to_string()).unwrap_or_else(|e| panic!("{e}"))
}

fn read_str(source: Source, text: &str) -> Session {
    read_session(source, text.as_bytes(), "inline").unwrap_or_else(|e| panic!("{e}"))
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

fn texts(h: &History) -> Vec<String> {
    h.iter().map(|m| format!("{}:{}", m.role.as_str(), m.content)).collect()
}

const FORMATS: [(&str, Source); 3] =
    [("claude-code", Source::ClaudeCode), ("codex", Source::Codex), ("cline", Source::Cline)];

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
fn claude_code_active_branch_and_compaction() {
    let s = read_file(Source::ClaudeCode, &samples().join("claude-code/fixture-branch-and-compaction.jsonl"));
    let at = s.steps.iter().position(|st| matches!(st.change, Change::Compaction { .. })).unwrap();
    let before = timeline::fold(&s.steps[..at]);
    assert_eq!(
        texts(&before),
        [
            "user:Start",
            "assistant:Ready",
            "user:Second attempt",
            "assistant:Second answer",
            "user:Keep going",
            "assistant:Kept going"
        ],
        "the active branch goes through the second attempt; the first is abandoned"
    );
    let Change::Compaction { trigger, pre_tokens, history, exact } = &s.steps[at].change else {
        unreachable!()
    };
    assert_eq!((trigger.as_deref(), *pre_tokens, *exact), (Some("auto"), Some(150_000), true));
    assert_eq!(history.len(), 1);
    assert!(history[0].meta.is_summary && history[0].content.starts_with("This session is being continued"));
    let after = s.history();
    assert_eq!(texts(&after)[1..], ["user:After compaction", "assistant:Final answer"]);
    assert_eq!(s.report.total("record:").skipped.values().sum::<u64>(), 2, "b1u and b1a, off the branch");
}

#[test]
fn claude_code_split_responses_merge_and_the_sidechain_stays_apart() {
    let s = read_file(
        Source::ClaudeCode,
        &samples().join("claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl"),
    );
    let h = s.history();
    // Lines 2 and 3 (text, tool_use) are one response; lines 5-7 three calls of one response.
    assert_eq!(h[2].role, Role::Assistant);
    assert!(h[2].content.starts_with("I'll help you update the CLAUDE.md"));
    assert_eq!(h[2].tool_calls.len(), 1);
    assert_eq!(h[4].tool_calls.len(), 3);
    let ids: Vec<&str> = h[4].tool_calls.iter().map(|c| c.id.as_str()).collect();
    let answered: Vec<&str> = h[5..8].iter().map(|m| m.tool_call_id.as_deref().unwrap()).collect();
    assert_eq!(ids, answered, "the three results follow their calls in order");
    // The Task subagent (inline sidechain) is not in the main history.
    assert_eq!(s.sidechains.len(), 1);
    let side = &s.sidechains[0].history;
    assert_eq!(side.len(), 6);
    assert!(h.iter().all(|m| !side.iter().any(|x| x.role == Role::User && x.content == m.content)));
    assert_eq!(s.report.total("record:").apart, 7);
    // The failed Task's result keeps its error flag.
    assert!(h.iter().any(|m| m.role == Role::Tool && m.is_error));
}

#[test]
fn claude_code_subagent_file_is_read_as_its_own_history() {
    let s = read_file(
        Source::ClaudeCode,
        &samples().join(
            "claude-code/fixture-v2-subagent-layout/55550000-0000-4000-8000-000000000001/subagents/agent-showcol1.jsonl",
        ),
    );
    assert_eq!(s.history().len(), 2);
    assert!(s.report.notes.iter().any(|n| n.contains("subagent transcript")));
}

fn cc(uuid: &str, parent: Option<&str>, kind: &str, ts: u32, message: Value) -> Value {
    json!({"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": false, "sessionId": "s",
           "timestamp": format!("2025-07-01T10:00:{ts:02}.000Z"), "message": message})
}

#[test]
fn claude_code_thinking_is_carried_opaquely_with_its_signature() {
    let thinking = json!({"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCkYIBxgCKkD"});
    let text = jsonl(&[
        cc("u1", None, "user", 0, json!({"role": "user", "content": "Fix the test"})),
        cc(
            "a1",
            Some("u1"),
            "assistant",
            1,
            json!({"id": "msg_1", "role": "assistant", "content": [thinking]}),
        ),
        cc(
            "a2",
            Some("a1"),
            "assistant",
            2,
            json!({"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "Reading it."}]}),
        ),
        cc(
            "a3",
            Some("a2"),
            "assistant",
            3,
            json!({"id": "msg_1", "role": "assistant", "stop_reason": "tool_use", "usage": {"output_tokens": 42},
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.rs"}}]}),
        ),
        cc(
            "u2",
            Some("a3"),
            "user",
            4,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn main() {}"}]}),
        ),
    ]);
    let s = read_str(Source::ClaudeCode, &text);
    let h = s.history();
    assert_eq!(texts(&h), ["user:Fix the test", "assistant:Reading it.", "tool:fn main() {}"]);
    assert_eq!(h[1].wire, Some(json!({"blocks": [thinking], "at": [0]})));
    assert!(
        !h[1].wire.as_ref().unwrap().to_string().contains("Reading it."),
        "modeled text is not stored twice"
    );
    let Change::Response { stop_reason, output_tokens, .. } = &s.steps[1].change else { panic!() };
    assert_eq!((stop_reason.as_deref(), *output_tokens), (Some("tool_use"), Some(42)));
    assert_eq!(s.steps[1].id, "a3", "a response takes the id of its last record");
    assert_eq!(s.report.get("block:thinking").opaque, 1);
}

#[test]
fn claude_code_parallel_tool_results_off_the_walk_are_put_back() {
    // Newer Claude Code writes each parallel tool_use as its own record (same message.id) and
    // parents each result on its own call's record, so the single-parent walk from the leaf
    // sees only one of the results.
    let call = |id: &str| json!({"id": "msg_p", "role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Read", "input": {}}]});
    let result = |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": format!("out {id}")}]});
    let text = jsonl(&[
        cc("u1", None, "user", 0, json!({"role": "user", "content": "go"})),
        cc("ax", Some("u1"), "assistant", 1, call("x")),
        cc("ay", Some("ax"), "assistant", 2, call("y")),
        cc("rx", Some("ax"), "user", 3, result("x")),
        cc("ry", Some("ay"), "user", 4, result("y")),
        cc(
            "a2",
            Some("ry"),
            "assistant",
            5,
            json!({"id": "msg_2", "role": "assistant", "content": [{"type": "text", "text": "done"}]}),
        ),
    ]);
    let s = read_str(Source::ClaudeCode, &text);
    let h = s.history();
    assert_eq!(texts(&h), ["user:go", "assistant:", "tool:out x", "tool:out y", "assistant:done"]);
    assert_eq!(h[1].tool_calls.len(), 2);
    assert_eq!(s.report.total("record:").skipped.len(), 0, "nothing left off");
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

fn cx(ts: u32, kind: &str, payload: Value) -> Value {
    json!({"timestamp": format!("2026-01-02T03:04:{ts:02}.000Z"), "type": kind, "payload": payload})
}

fn user_item(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

fn assistant_item(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
}

#[test]
fn codex_reasoning_is_opaque_and_tools_pair() {
    let s = read_file(Source::Codex, &samples().join("codex/fixture-tool-item-types.jsonl"));
    let h = s.history();
    let wire = h[1].wire.as_ref().unwrap();
    assert_eq!(wire["blocks"][0]["type"], "reasoning");
    assert_eq!(wire["blocks"][0]["encrypted_content"], "SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER");
    assert_eq!(h[1].tool_calls[0].arguments, json!({"cmd": "find . -maxdepth 1 -type f"}));
    assert_eq!(h[3].tool_calls[0].kind, "custom");
    assert_eq!(h[4].content, "Done!");
    assert_eq!(s.model.as_deref(), Some("synthetic-model"));
    assert_eq!(s.report.get("record:future_synthetic_record").skipped.len(), 1);
    assert_eq!(s.report.get("record:event_msg/user_message").seen, 1);
}

#[test]
fn codex_context_messages_are_not_user_turns_and_developer_keeps_its_role() {
    let s = read_file(Source::Codex, &samples().join("codex/real-v0.77.0-session-start.jsonl"));
    assert_eq!(s.steps.len(), 2, "the injected context, then the user's first prompt");
    assert_eq!(s.model.as_deref(), Some("gpt-5.2-codex"));
    assert_eq!(s.id.as_deref(), Some("019b64e5-57fa-7463-b644-fba7e456f905"));
    let text = jsonl(&[cx(
        0,
        "response_item",
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>x"}]}),
    )]);
    let s = read_str(Source::Codex, &text);
    assert_eq!(s.history()[0].role, Role::System);
    assert_eq!(s.history()[0].wire, Some(json!({"role": "developer"})));
}

#[test]
fn codex_compacted_replaces_the_history() {
    // The shape of `compacted` from the Codex source (see testdata/samples/README.md): remote
    // compaction writes `message: ""` and a replacement_history with a `compaction` item.
    let text = jsonl(&[
        cx(0, "response_item", user_item("first task")),
        cx(1, "response_item", assistant_item("first answer")),
        cx(2, "response_item", user_item("second task")),
        cx(
            3,
            "compacted",
            json!({"message": "", "replacement_history": [
                user_item("first task"), user_item("second task"),
                {"type": "compaction", "encrypted_content": "gAAAAABcompacted"}
            ]}),
        ),
        cx(4, "response_item", assistant_item("after")),
        // An older rollout: only the summary text.
        cx(5, "response_item", user_item("third task")),
        cx(6, "compacted", json!({"message": "SUMMARY"})),
    ]);
    let s = read_str(Source::Codex, &text);
    let compactions: Vec<usize> = s
        .steps
        .iter()
        .enumerate()
        .filter(|(_, st)| matches!(st.change, Change::Compaction { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(compactions.len(), 2);
    let before = timeline::fold(&s.steps[..compactions[0]]);
    assert_eq!(texts(&before), ["user:first task", "assistant:first answer", "user:second task"]);
    let after = timeline::fold(&s.steps[..=compactions[0]]);
    assert_eq!(texts(&after), ["user:first task", "user:second task", "assistant:"]);
    assert_eq!(after[2].wire.as_ref().unwrap()["blocks"][0]["type"], "compaction");
    let Change::Compaction { exact, .. } = s.steps[compactions[1]].change else { panic!() };
    assert!(!exact, "rebuilt without a replacement_history");
    assert_eq!(
        texts(&s.history()),
        ["user:first task", "user:second task", "user:third task", "user:SUMMARY"]
    );
    assert!(s.history()[3].meta.is_summary);
    assert!(s.report.notes.iter().any(|n| n.contains("approximate")));
}

#[test]
fn codex_thread_rollback_drops_the_newest_turns() {
    let text = jsonl(&[
        cx(0, "response_item", user_item("<environment_context>cwd</environment_context>")),
        cx(1, "response_item", user_item("one")),
        cx(2, "response_item", assistant_item("1")),
        cx(3, "response_item", user_item("two")),
        cx(4, "response_item", assistant_item("2")),
        cx(5, "event_msg", json!({"type": "thread_rolled_back", "num_turns": 1})),
        cx(6, "response_item", user_item("three")),
    ]);
    let s = read_str(Source::Codex, &text);
    assert_eq!(
        texts(&s.history()),
        ["user:<environment_context>cwd</environment_context>", "user:one", "assistant:1", "user:three"]
    );
}

#[test]
fn cline_tool_results_as_user_text_stay_user_text() {
    // The XML-tool era shape (Cline's src/core/task/index.ts, see the samples README).
    let body = json!([
        {"role": "user", "content": [{"type": "text", "text": "<task>\nRead a.ts\n</task>"}, {"type": "text", "text": "<environment_details>x</environment_details>"}], "ts": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "export {}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}, {"type": "tool_use", "id": "toolu_x", "name": "attempt_completion", "input": {}}]}
    ]);
    let s = read_str(Source::Cline, &body.to_string());
    let h = s.history();
    assert_eq!(
        h.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(),
        ["user", "assistant", "user", "assistant"]
    );
    assert!(h.iter().all(|m| m.tool_calls.is_empty() && m.role != Role::Tool), "no native call to answer");
    assert!(h[2].meta.agent_feedback && !h[0].meta.agent_feedback);
    assert_eq!(
        h[3].wire.as_ref().unwrap()["blocks"][0]["type"],
        "tool_use",
        "an unanswered call is carried, not modeled"
    );
    assert_eq!(s.report.get("field:ts").seen, 1);
}

#[test]
fn cline_native_tool_results_pair() {
    let s =
        read_file(Source::Cline, &samples().join("cline/native-tools-tool-result-with-result-prefix.json"));
    let h = s.history();
    assert_eq!(h[0].tool_calls[0].id, "toolu_write");
    assert_eq!(h[1].role, Role::Tool);
    assert!(h[1].content.starts_with("[write_to_file for 'new-file.ts'] Result:"));
}

#[test]
fn claude_code_api_errors_are_the_failure_not_the_history() {
    // A client-made assistant record (`isApiErrorMessage`, model `<synthetic>`), the shape the
    // samples README documents.
    let mut err = cc(
        "e1",
        Some("u1"),
        "assistant",
        1,
        json!({"id": "x", "model": "<synthetic>", "role": "assistant", "stop_reason": "stop_sequence",
               "content": [{"type": "text", "text": "API Error: 413 Request Entity Too Large"}]}),
    );
    err["isApiErrorMessage"] = json!(true);
    err["apiErrorStatus"] = json!(413);
    let text = jsonl(&[cc("u1", None, "user", 0, json!({"role": "user", "content": "big paste"})), err]);
    let s = read_str(Source::ClaudeCode, &text);
    assert_eq!(texts(&s.history()), ["user:big paste"], "the error is not model output");
    let e = s.final_error().unwrap();
    assert_eq!((e.status, e.message.as_str()), (Some(413), "API Error: 413 Request Entity Too Large"));
    assert_eq!(s.model, None, "a synthetic record names no model");
    assert_eq!(s.report.get("record:assistant").skipped.len(), 1);
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
