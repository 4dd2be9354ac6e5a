//! The Claude Code importer against its samples and small inline transcripts built from the
//! shapes `testdata/samples/README.md` documents: the active branch, compaction, split responses,
//! sidechains and subagents, thinking, parallel tool results, API errors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_testkit::jsonl;
use salvage_types::message::Role;
use salvage_types::timeline::{self, Change};
use salvage_wire::Source;
use serde_json::json;

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
    // Its own session, named after its agent: the parent's file keeps the parent's session id
    // (importing both into one journal used to rewind the parent's session to the subagent's).
    let parent = "55550000-0000-4000-8000-000000000001";
    assert_eq!(s.id.as_deref(), Some(format!("{parent}-agent-showcol1").as_str()));
    let main = read_file(
        Source::ClaudeCode,
        &samples().join(format!("claude-code/fixture-v2-subagent-layout/{parent}.jsonl")),
    );
    assert_eq!(main.id.as_deref(), Some(parent));
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

/// Review (second pass): a line repeating a record (same uuid; a resumed session can write one
/// again) was merged into its own response as a sibling: the history read "Ready\nReady".
#[test]
fn claude_code_a_repeated_record_is_read_once() {
    let p = samples().join("claude-code/fixture-branch-and-compaction.jsonl");
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].contains(r#""uuid":"a1""#));
    // a1 again right after itself, at the end, and the last record again at the end.
    let last = lines.len() - 1;
    for (at, line) in [(2, 1), (lines.len(), 1), (lines.len(), last)] {
        let mut repeated = lines.clone();
        repeated.insert(at, lines[line]);
        let s = read_str(Source::ClaudeCode, &(repeated.join("\n") + "\n"));
        let all: Vec<String> =
            s.steps.iter().flat_map(|st| texts(&timeline::fold(std::slice::from_ref(st)))).collect();
        assert!(!all.iter().any(|t| t.contains("Ready\nReady")), "line {line} repeated at {at}: {all:?}");
        let original = read_file(Source::ClaudeCode, &p);
        assert_eq!(s.history(), original.history(), "line {line} repeated at {at}");
        let at_compaction = |s: &salvage_wire::session::Session| {
            let k = s.steps.iter().position(|st| matches!(st.change, Change::Compaction { .. })).unwrap();
            texts(&timeline::fold(&s.steps[..k]))
        };
        assert_eq!(at_compaction(&s), at_compaction(&original), "line {line} repeated at {at}");
    }
}

/// A real Claude Code 2.1.53 session (`testdata/samples/README.md`): its compaction boundary's
/// `logicalParentUuid` names a record Claude Code never wrote (anthropics/claude-code#46603). The
/// conversation it compacted is the one written just before it, and is the history before the
/// compaction; stopping at the missing uuid lost it (the journal archived an empty transcript).
#[test]
fn claude_code_compaction_with_a_missing_logical_parent_keeps_what_was_written_before_it() {
    let s = read_file(
        Source::ClaudeCode,
        &samples().join("claude-code/v2.1.53-real-compaction-dangling-logical-parent.jsonl"),
    );
    let at = s.steps.iter().position(|st| matches!(st.change, Change::Compaction { .. })).unwrap();
    let before = timeline::fold(&s.steps[..at]);
    // Lines 429-432: a tool result, a call, its result, a last call (answered by no result).
    assert_eq!(before.len(), 4, "{:#?}", texts(&before));
    assert_eq!(before[0].role, Role::Tool);
    assert_eq!(before[1].role, Role::Assistant);
    assert_eq!(before[1].tool_calls.len(), 1);
    assert_eq!(before[3].tool_calls[0].id, "toolu_01SMWQr3DEskqeeyQAbKqXeF");
    assert!(
        s.report.notes.iter().any(|n| n.contains("line 8: this compaction's logicalParentUuid")),
        "{:?}",
        s.report.notes
    );
    let after = s.history();
    assert!(after[0].meta.is_summary && after[0].content.starts_with("This session is being continued"));
}

/// Two records written without a newline between them (a real Claude Code race, found by a
/// sweep of public transcripts: the whole file was refused) are both read, and said.
#[test]
fn records_joined_on_one_line_are_each_read() {
    let p = samples().join("claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl");
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let joined: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| if i == 5 { (*l).to_string() } else { format!("{l}\n") })
        .collect();
    assert_ne!(joined, text);
    let whole = read_str(Source::ClaudeCode, &text);
    let s = read_str(Source::ClaudeCode, &joined);
    assert_eq!(texts(&s.history()), texts(&whole.history()));
    assert!(s.report.notes.iter().any(|n| n.starts_with("line 6: several records")), "{:?}", s.report.notes);
}
