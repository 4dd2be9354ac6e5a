//! The Gemini CLI importer against files the CLI's releases wrote (`testdata/samples/gemini-cli/`,
//! provenance in `testdata/samples/README.md`), against the CLI's own test of its history
//! builder, and against inline records for the JSON Lines rules (replace, `$set`, `$rewindTo`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_types::message::Role;
use salvage_types::timeline::Change;
use salvage_types::History;
use salvage_wire::{read_session, Source};
use serde_json::json;

fn sample(name: &str) -> std::path::PathBuf {
    samples().join("gemini-cli").join(name)
}

/// Role, text, and each tool call's id, name and arguments: what a history sends.
fn sent(h: &History) -> Vec<String> {
    h.iter()
        .map(|m| {
            let calls: Vec<String> =
                m.tool_calls.iter().map(|c| format!("{}/{}/{}", c.id, c.name, c.arguments)).collect();
            format!(
                "{}:{}:[{}]:{}",
                m.role.as_str(),
                m.content,
                calls.join(","),
                m.tool_call_id.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// Every sample is recognised as Gemini CLI's and reads.
#[test]
fn every_sample_is_detected_and_reads() {
    for p in all("gemini-cli") {
        let bytes = std::fs::read(&p).unwrap();
        let d = salvage_wire::detect::detect(&bytes).unwrap();
        assert_eq!(d.format.as_str(), "gemini_cli", "{}", p.display());
        let s =
            read_session(Source::GeminiCli, &bytes, "f").unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(s.history().iter().any(|m| m.role == Role::Assistant), "{}", p.display());
        for (kind, t) in &s.report.kinds {
            assert!(t.balanced(), "{}: {kind} is not balanced: {t:?}", p.display());
        }
    }
}

/// The CLI's own test of `convertSessionToClientHistory` ("should correctly map tool calls and
/// their responses"): its messages, read as a record, build the history its expectation holds.
#[test]
fn the_history_is_the_one_the_cli_builds() {
    let record = read_file(Source::GeminiCli, &sample("fixture-sessionUtils.test-toolcall-messages.json"));
    let expected =
        read_file(Source::GeminiCli, &sample("fixture-sessionUtils.test-toolcall-expected-history.json"));
    assert_eq!(sent(&record.history()), sent(&expected.history()));
    assert_eq!(
        sent(&record.history()),
        [
            "user:List files:[]:-",
            r#"assistant:Let me check.:[call123/ls/{"dir":"."}]:-"#,
            "tool:file.txt:[]:call123",
        ]
    );
}

/// v0.61.0 (JSON Lines) records each tool result twice, and its own resume sends both: here each
/// result is sent once, and the copies are counted. The same conversation written by v0.38.2 (one
/// JSON document) and the checkpoint v0.61.0 saved after two resumes (8 results for 2 calls)
/// build the same turns.
#[test]
fn each_tool_result_is_sent_once() {
    let s = read_file(Source::GeminiCli, &sample("v0.61.0-session-main.jsonl"));
    let h = s.history();
    let tools: Vec<&str> = h.iter().filter(|m| m.role == Role::Tool).map(|m| m.content.as_str()).collect();
    assert_eq!(tools.len(), 2, "{:#?}", sent(&h));
    assert_eq!(tools[0], "hello from the salvage fixture\n");
    assert!(tools[1].starts_with("File not found"), "{}", tools[1]);
    // The results of the two calls, recorded a second time as a user message.
    let copies = s.report.kinds.get("block:functionResponse (again)").unwrap();
    assert_eq!(copies.seen, 2, "{copies:?}");
    assert_eq!(s.model.as_deref(), Some("gemini-2.5-flash"));

    let legacy = read_file(Source::GeminiCli, &sample("v0.38.2-session.json")).history();
    let checkpoint = read_file(Source::GeminiCli, &sample("v0.61.0-checkpoint-t1.json")).history();
    for other in [&legacy, &checkpoint] {
        let turns = |h: &History| -> Vec<(Role, usize)> {
            h.iter().filter(|m| m.role != Role::User).map(|m| (m.role, m.tool_calls.len())).collect()
        };
        assert_eq!(turns(other), turns(&h)[..turns(other).len()], "{:#?}", sent(other));
        assert_eq!(other.iter().filter(|m| m.role == Role::Tool).count(), 2);
    }
}

fn record(lines: &[serde_json::Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn header() -> serde_json::Value {
    json!({"sessionId": "s1", "projectHash": "p", "startTime": "2026-12-04T10:00:00.000Z", "lastUpdated": "2026-12-04T10:00:00.000Z", "kind": "main"})
}

fn user(id: &str, text: &str) -> serde_json::Value {
    json!({"id": id, "timestamp": "2026-12-04T10:00:01.000Z", "type": "user", "content": [{"text": text}]})
}

fn gemini(id: &str, text: &str) -> serde_json::Value {
    json!({"id": id, "timestamp": "2026-12-04T10:00:02.000Z", "type": "gemini", "content": text, "model": "gemini-2.5-pro"})
}

/// The JSON Lines rules as the CLI's reader applies them: a later line with the same id replaces
/// the message (its tool calls merged in), `$set.messages` that drops messages is a compaction,
/// `$rewindTo` drops a message and all after it, a line that is not JSON is skipped and said,
/// UI lines are not sent, and an error line is the failure the session ended on.
#[test]
fn json_lines_replace_compact_rewind_and_end_on_an_error() {
    let mut with_call = gemini("g1", "Reading.");
    with_call["toolCalls"] = json!([{"id": "c1", "name": "read_file", "args": {"path": "a"}, "status": "success",
        "result": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "A"}}}]}]);
    let text = record(&[
        header(),
        user("u1", "read a"),
        gemini("g1", "Reading."),
        with_call,
        json!({"id": "i1", "timestamp": "t", "type": "info", "content": "Tip of the day"}),
        user("u2", "/stats"),
        gemini("g2", "A says A."),
        user("u3", "now b"),
        gemini("g3", "B?"),
        json!({"$rewindTo": "u3"}),
        json!({"$set": {"messages": [user("u9", "<state_snapshot>read a: A</state_snapshot>"), gemini("g9", "Got it. Thanks for the additional context!")]}}),
        user("u4", "continue"),
        json!({"id": "e1", "timestamp": "2026-12-04T10:00:09.000Z", "type": "error",
               "content": "[API Error: The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).]"}),
    ]) + "{\"id\": \"torn";
    let s = read_str(Source::GeminiCli, &text);
    let kinds: Vec<&str> = s
        .steps
        .iter()
        .map(|st| match &st.change {
            Change::Input(_) => "input",
            Change::Response { .. } => "response",
            Change::Compaction { .. } => "compaction",
            Change::Rollback { .. } => "rollback",
        })
        .collect();
    assert_eq!(
        kinds,
        ["input", "response", "input", "response", "input", "response", "rollback", "compaction", "input"]
    );
    let Change::Rollback { turns, history } = &s.steps[6].change else { unreachable!() };
    assert_eq!(*turns, 1);
    assert_eq!(history.len(), 4, "u1, the call, its result, the answer: {:#?}", sent(history));
    assert_eq!(
        texts(&s.history()),
        [
            "user:<state_snapshot>read a: A</state_snapshot>",
            "assistant:Got it. Thanks for the additional context!",
            "user:continue"
        ]
    );
    let e = s.final_error().expect("the session ended on the error line");
    assert!(e.message.contains("exceeds the maximum number of tokens"), "{}", e.message);
    assert!(s.report.notes.iter().any(|n| n.starts_with("line 14: not JSON")), "{:?}", s.report.notes);
    assert_eq!(s.report.kinds["record:info"].seen, 1);
    assert_eq!(s.report.kinds["record:user"].skipped.values().sum::<u64>(), 1, "the slash command");
}

/// The stub v0.61.0 starts when it resumes another file (its two lines, as the CLI wrote them but
/// for the trimmed context): only the CLI's own context turn, no conversation. Refused, with the
/// reason.
#[test]
fn the_resume_stub_is_refused() {
    let text = record(&[
        header(),
        json!({"$set": {"messages": [{"id": "d04923d38bb0f6017037e74183378ef4", "timestamp": "2026-12-04T21:27:10.533Z",
            "type": "user", "content": [{"text": "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat."}]}],
            "lastUpdated": "2026-12-04T21:27:10.533Z"}}),
    ]);
    let e = read_session(Source::GeminiCli, text.as_bytes(), "stub.jsonl").unwrap_err().to_string();
    assert!(e.contains("no conversation in the record: only the CLI's session context"), "{e}");
}

/// Review findings on real interactive sessions of CLI 0.61.0: on a failure the CLI writes a
/// `$set.messages` without the turn that failed, then its error line (the capture lost the prompt
/// whose request failed); a message rewritten later (its call merged in) was used in its final
/// version for the earlier steps (a call appeared twice); a repeated result's image was sent
/// again; a rewind into what a compaction kept was refused.
#[test]
fn real_session_shapes_the_review_found() {
    let mut sleeping = gemini("g2", "Sleeping.");
    sleeping["content"] = json!("Sleeping.");
    let mut call = gemini("g3", "");
    // A tool's binary output: the result carries the image beside its response, in `toolCalls`
    // and again in the user message the CLI records.
    call["toolCalls"] = json!([{"id": "c9", "name": "run_shell_command", "args": {"command": "sleep 120"}, "status": "cancelled",
        "result": [{"functionResponse": {"id": "c9", "name": "run_shell_command", "response": {"error": "[Operation Cancelled]"}}},
                   {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}]);
    let result = json!({"id": "r3", "timestamp": "t", "type": "user",
        "content": [{"functionResponse": {"id": "c9", "name": "run_shell_command", "response": {"error": "[Operation Cancelled]"}}},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]});
    let mut merged = gemini("g2", "Sleeping.");
    merged["content"] = json!([{"text": "Sleeping."}, {"functionCall": {"id": "c9", "name": "run_shell_command", "args": {"command": "sleep 120"}}}]);
    let text = record(&[
        header(),
        user("u1", "please sleep"),
        sleeping,
        call,
        result.clone(),
        user("u2", "hello again"),
        json!({"$set": {"messages": [user("u1", "please sleep"), merged, result]}}),
        json!({"id": "e1", "timestamp": "t", "type": "error", "content": "[API Error: quota]"}),
    ]);
    let s = read_str(Source::GeminiCli, &text);
    let h = s.history();
    assert_eq!(h.last().map(|m| m.content.as_str()), Some("hello again"), "{:#?}", sent(&h));
    assert!(
        s.report.notes.iter().any(|n| n.contains("took the turn that failed back out")),
        "{:?}",
        s.report.notes
    );
    assert_eq!(h.iter().map(|m| m.tool_calls.len()).sum::<usize>(), 1, "{:#?}", sent(&h));
    assert_eq!(
        h.iter().map(|m| m.images.len()).sum::<usize>(),
        1,
        "the result's image once: {:#?}",
        sent(&h)
    );
    // Before the rewrite, the steps hold each message as it was then: the call once.
    let at = s.steps.iter().position(|st| matches!(st.change, Change::Compaction { .. })).unwrap();
    let before = salvage_types::timeline::fold(&s.steps[..at]);
    assert_eq!(before.iter().map(|m| m.tool_calls.len()).sum::<usize>(), 1, "{:#?}", sent(&before));
    assert_eq!(before.iter().map(|m| m.images.len()).sum::<usize>(), 1, "{:#?}", sent(&before));
    assert!(s.final_error().is_some());

    // A rewind into the tail a compaction kept: a state the session never had as such.
    let text = record(&[
        header(),
        user("u1", "one"),
        gemini("g1", "1"),
        user("u2", "two"),
        gemini("g2", "2"),
        json!({"$set": {"messages": [user("s1", "<state_snapshot>one</state_snapshot>"), gemini("s2", "Got it."), user("u2", "two"), gemini("g2", "2")]}}),
        user("u3", "three"),
        gemini("g3", "3"),
        json!({"$rewindTo": "g2"}),
    ]);
    let s = read_str(Source::GeminiCli, &text);
    let last = s.steps.last().map(|st| &st.change).unwrap();
    assert!(matches!(last, Change::Compaction { trigger: Some(t), .. } if t == "rewind"), "{last:?}");
    assert_eq!(
        texts(&s.history()),
        ["user:<state_snapshot>one</state_snapshot>", "assistant:Got it.", "user:two"]
    );
}
