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
    let wire = h[1].wire.as_ref().unwrap();
    assert_eq!(wire["f"], "anthropic", "the template of the API Claude Code sends");
    assert_eq!(wire["m"]["content"][0], thinking, "in place, verbatim");
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
    assert_eq!(wire["f"], "openai_responses", "the template of the API Codex sends");
    assert_eq!(wire["m"][0]["type"], "reasoning");
    assert_eq!(wire["m"][0]["encrypted_content"], "SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER");
    assert_eq!(h[1].tool_calls[0].arguments, json!({"cmd": "find . -maxdepth 1 -type f"}));
    assert_eq!(h[3].wire.as_ref().unwrap()["m"][0]["type"], "custom_tool_call", "sent back as it was");
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
    assert_eq!(s.history()[0].wire.as_ref().unwrap()["m"][0]["role"], "developer");
    let body = salvage_wire::request_body(&s.request(), &s.history());
    assert_eq!(body["input"][0]["role"], "developer", "{body}");
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
    assert_eq!(after[2].wire.as_ref().unwrap()["m"][0]["type"], "compaction");
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
        h[3].wire.as_ref().unwrap()["m"]["content"][1]["type"],
        "tool_use",
        "an unanswered call is carried, not modeled"
    );
    let body = salvage_wire::request_body(&s.request(), &h);
    assert_eq!(body["messages"][3]["content"][1]["id"], "toolu_x", "and sent back in place: {body}");
    assert!(body["messages"][0].get("ts").is_none(), "Cline's bookkeeping is not sent");
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
