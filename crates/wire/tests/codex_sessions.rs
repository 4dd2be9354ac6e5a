//! The Codex CLI importer against its samples and small inline rollouts built from the shapes
//! `testdata/samples/README.md` documents: opaque reasoning, context messages, compaction,
//! rollbacks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_testkit::codex::{self, assistant as assistant_item, record as cx, user as user_item};
use salvage_testkit::jsonl;
use salvage_types::message::Role;
use salvage_types::timeline::{self, Change};
use salvage_wire::Source;
use serde_json::json;

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
    let context = cx(0, "response_item", user_item("<environment_context>cwd</environment_context>"));
    let text = jsonl(&[vec![context], codex::rolled_back_turn()].concat());
    let s = read_str(Source::Codex, &text);
    assert_eq!(
        texts(&s.history()),
        ["user:<environment_context>cwd</environment_context>", "user:one", "assistant:1", "user:three"]
    );
}
