//! Journaling whole client sessions (`Journal::import_steps`) from the session samples in
//! `testdata/samples/`: idempotence, a longer file appends only what is new, a changed branch is
//! a rewind, and the state before and after each of the client's compactions is exact.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_ccr::{Ccr, SystemClock};
use salvage_journal::import::Source as Src;
use salvage_journal::{Journal, StoredEvent};
use salvage_testkit::codex::{self, assistant, user};
use salvage_types::capture::StopReason;
use salvage_types::event::EventBody;
use salvage_types::timeline::{self, Change, Step};
use salvage_types::{CcrKey, History, Message};
use salvage_wire::{read_session, Source};
use serde_json::json;
use std::path::PathBuf;

fn sample(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/samples").join(rel);
    std::fs::read_to_string(p).unwrap()
}

fn steps(source: Source, text: &str) -> Vec<Step> {
    read_session(source, text.as_bytes(), "t").unwrap().steps
}

fn src(session: &str, client: &str) -> Src {
    Src { session: session.into(), title: "t".into(), client: client.into(), provider: None, model: None }
}

fn now() -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_800_000_000_000).unwrap()
}

/// The first `n` non-blank lines of a JSONL file.
fn head(text: &str, n: usize) -> String {
    text.lines().filter(|l| !l.trim().is_empty()).take(n).map(|l| format!("{l}\n")).collect()
}

fn events(j: &Journal, s: &str) -> Vec<StoredEvent> {
    j.events(s, 0, 10_000).unwrap()
}

#[test]
fn importing_twice_appends_nothing() {
    let text = sample("claude-code/fixture-branch-and-compaction.jsonl");
    let st = steps(Source::ClaudeCode, &text);
    let mut j = Journal::in_memory().unwrap();
    let first = j.import_steps(&src("s1", "claude-code"), &st, now()).unwrap();
    assert!(first.started);
    assert_eq!(first.appended, st.len() as u64);
    let before = events(&j, "s1");
    let again = j.import_steps(&src("s1", "claude-code"), &st, now()).unwrap();
    assert_eq!((again.appended, again.existing, again.started), (0, st.len() as u64, false));
    assert_eq!(events(&j, "s1"), before, "the same events, byte for byte");
    // Timestamps come from the file.
    assert_eq!(before[1].ts, "2025-07-01T10:00:00.000Z");
    // Stop reasons too; a file that does not record one says so.
    assert!(matches!(before[2].body, EventBody::ResponseReceived { stop_reason: StopReason::EndTurn, .. }));
    let cx = steps(Source::Codex, &sample("codex/fixture-tool-item-types.jsonl"));
    j.import_steps(&src("cx", "codex"), &cx, now()).unwrap();
    assert!(events(&j, "cx")
        .iter()
        .any(|e| matches!(e.body, EventBody::ResponseReceived { stop_reason: StopReason::Unrecorded, .. })));
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
}

#[test]
fn a_longer_file_appends_only_the_new_steps() {
    let text = sample("claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl");
    let full = steps(Source::ClaudeCode, &text);
    let mut j = Journal::in_memory().unwrap();
    // The file as it was after 11 lines (three tool results of one response written).
    let part = steps(Source::ClaudeCode, &head(&text, 11));
    let a = j.import_steps(&src("s", "claude-code"), &part, now()).unwrap();
    let b = j.import_steps(&src("s", "claude-code"), &full, now()).unwrap();
    assert_eq!(b.rewound_to, None);
    assert_eq!(a.appended + b.appended, full.len() as u64);
    assert_eq!(b.existing, part.len() as u64);
    assert_eq!(j.head("s").unwrap().history, timeline::fold(&full));
}

#[test]
fn a_response_still_being_written_is_completed_through_a_rewind() {
    let text = sample("claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl");
    let full = steps(Source::ClaudeCode, &text);
    let mut j = Journal::in_memory().unwrap();
    // After 7 lines, two of the three tool_use records of one response were written.
    let part = steps(Source::ClaudeCode, &head(&text, 7));
    j.import_steps(&src("s", "claude-code"), &part, now()).unwrap();
    assert_eq!(j.head("s").unwrap().history.last().unwrap().tool_calls.len(), 2);
    let b = j.import_steps(&src("s", "claude-code"), &full, now()).unwrap();
    assert!(b.rewound_to.is_some(), "the partial response is left on its own branch");
    assert_eq!(j.head("s").unwrap().history, timeline::fold(&full));
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
}

#[test]
fn a_rewound_branch_is_a_rewind() {
    let text = sample("claude-code/fixture-branch-and-compaction.jsonl");
    let full = steps(Source::ClaudeCode, &text);
    let mut j = Journal::in_memory().unwrap();
    // After 4 lines the active branch was the first attempt (b1u, b1a); the user then rewound
    // to a1 and tried again.
    let early = steps(Source::ClaudeCode, &head(&text, 4));
    j.import_steps(&src("s", "claude-code"), &early, now()).unwrap();
    let abandoned = j.head("s").unwrap().history;
    let later = j.import_steps(&src("s", "claude-code"), &full, now()).unwrap();
    let a1 = 3; // start, u1, a1
    assert_eq!(later.rewound_to, Some(a1));
    assert_eq!(j.head("s").unwrap().history, timeline::fold(&full));
    // Nothing is deleted: the abandoned attempt is still restorable.
    let ev = events(&j, "s");
    let rewind = ev.iter().find(|e| matches!(e.body, EventBody::Rewind { .. })).unwrap();
    assert_eq!(rewind.parent, Some(a1));
    assert_eq!(j.view_at("s", rewind.seq - 1).unwrap().history, abandoned);
    assert_eq!(j.import_steps(&src("s", "claude-code"), &full, now()).unwrap().appended, 0);
}

#[test]
fn show_at_restores_the_states_before_and_after_each_compaction() {
    let text = sample("claude-code/fixture-branch-and-compaction.jsonl");
    let st = steps(Source::ClaudeCode, &text);
    let mut j = Journal::in_memory().unwrap();
    j.import_steps(&src("s", "claude-code"), &st, now()).unwrap();
    let at = st.iter().position(|s| matches!(s.change, Change::Compaction { .. })).unwrap();
    let ev = events(&j, "s");
    let c = ev.iter().find(|e| e.kind == "compaction").unwrap();
    assert_eq!(c.kind_version, 2);
    let pre = timeline::fold(&st[..at]);
    assert_eq!(j.view_at("s", c.seq - 1).unwrap().history, pre, "before the compaction");
    assert_eq!(j.view_at("s", c.seq).unwrap().history, timeline::fold(&st[..=at]), "after it");
    let EventBody::Compaction { by, pre_tokens, archived, .. } = &c.body else { panic!() };
    assert_eq!((by.as_deref(), *pre_tokens), (Some("claude-code"), Some(150_000)));
    // The pre-compaction history is archived and referenced by the event.
    let key = CcrKey::of(&serde_json::to_vec(&pre).unwrap());
    assert_eq!(archived.as_deref(), Some(key.short().as_str()));
    let bytes = Ccr::new(j.conn(), &SystemClock).get_key(&key).unwrap();
    assert_eq!(serde_json::from_slice::<History>(&bytes).unwrap(), pre);
    assert_eq!(j.sessions_referencing(&key).unwrap(), vec!["s".to_string()]);
    assert!(c.body.summary().contains("by claude-code"), "{}", c.body.summary());
    assert_eq!(j.state_at("s", c.seq).unwrap().compactions, 1);
}

#[test]
fn codex_compaction_and_rollback_are_journaled_exactly() {
    let text = salvage_testkit::jsonl(
        &[
            vec![codex::record(0, "session_meta", json!({"id": "th-1", "model_provider": "openai"}))],
            codex::rolled_back_turn(),
            vec![
                codex::record(
                    7,
                    "compacted",
                    json!({"message": "", "replacement_history": [user("one"), user("three")]}),
                ),
                codex::record(8, "response_item", assistant("3")),
            ],
        ]
        .concat(),
    );
    let st = steps(Source::Codex, &text);
    let mut j = Journal::in_memory().unwrap();
    j.import_steps(&src("c", "codex"), &st, now()).unwrap();
    let ev = events(&j, "c");
    let rewind = ev.iter().find(|e| e.kind == "rewind").unwrap();
    assert_eq!(
        j.view_at("c", rewind.seq).unwrap().history,
        vec![Message::user("one"), Message::assistant("1")],
        "the rollback returns to the state after the first turn"
    );
    let c = ev.iter().find(|e| e.kind == "compaction").unwrap();
    assert_eq!(j.view_at("c", c.seq - 1).unwrap().history.last(), Some(&Message::user("three")));
    assert_eq!(j.view_at("c", c.seq).unwrap().history, vec![Message::user("one"), Message::user("three")]);
    assert_eq!(j.head("c").unwrap().history, timeline::fold(&st));
    assert_eq!(j.import_steps(&src("c", "codex"), &st, now()).unwrap().appended, 0);
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
}

#[test]
fn a_session_not_imported_is_not_overwritten() {
    let st = steps(Source::Codex, &sample("codex/fixture-tool-item-types.jsonl"));
    let mut j = Journal::in_memory().unwrap();
    j.start_session(
        "taken",
        "replay",
        salvage_journal::NewEvent::new("other-start", now(), EventBody::session_started(None, None)),
    )
    .unwrap();
    let e = j.import_steps(&src("taken", "codex"), &st, now()).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    let ok = j.import_steps(&src("fresh", "codex"), &st, now()).unwrap();
    assert_eq!(ok.appended, st.len() as u64);
}

#[test]
fn importing_the_file_as_it_grew_line_by_line_ends_at_the_same_history() {
    for (source, client, rel) in [
        (
            Source::ClaudeCode,
            "claude-code",
            "claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl",
        ),
        (Source::ClaudeCode, "claude-code", "claude-code/fixture-branch-and-compaction.jsonl"),
        (Source::Codex, "codex", "codex/fixture-tool-item-types.jsonl"),
    ] {
        let text = sample(rel);
        let n = text.lines().filter(|l| !l.trim().is_empty()).count();
        let mut j = Journal::in_memory().unwrap();
        for k in 1..=n {
            let Ok(s) = read_session(source, head(&text, k).as_bytes(), "t") else { continue };
            j.import_steps(&src("g", client), &s.steps, now()).unwrap();
            assert_eq!(j.head("g").unwrap().history, s.history(), "{rel}: after {k} lines");
        }
        assert_eq!(j.verify(None).unwrap().bad, vec![], "{rel}");
        let full = steps(source, &text);
        assert_eq!(j.head("g").unwrap().history, timeline::fold(&full), "{rel}");
    }
}

/// Review finding 09: a session file edited in place (same record ids, other text) was
/// "already journaled" because its step ids were; the journal kept the old text and the import
/// said nothing was new. A step is journaled only when an event holding that step's content
/// continues the steps before it.
#[test]
fn an_edited_file_is_journaled_as_edited_and_reverting_it_returns_to_the_original() {
    let text = sample("claude-code/fixture-branch-and-compaction.jsonl");
    assert_eq!(text.matches(r#""text":"Ready""#).count(), 1);
    let edited = text.replace(r#""text":"Ready""#, r#""text":"Ready (edited in the file)""#);
    let original = steps(Source::ClaudeCode, &text);
    let changed = steps(Source::ClaudeCode, &edited);
    assert_eq!(
        original.iter().map(|s| &s.id).collect::<Vec<_>>(),
        changed.iter().map(|s| &s.id).collect::<Vec<_>>(),
        "the edit keeps every record id"
    );
    let mut j = Journal::in_memory().unwrap();
    j.import_steps(&src("s", "claude-code"), &original, now()).unwrap();
    let first = j.head("s").unwrap().history;
    assert_eq!(first, timeline::fold(&original));
    let holds_edit = |j: &Journal| {
        events(j, "s").iter().any(|e| {
            j.view_at("s", e.seq).unwrap().history.iter().any(|m| m.content.contains("edited in the file"))
        })
    };
    assert!(!holds_edit(&j));

    let again = j.import_steps(&src("s", "claude-code"), &changed, now()).unwrap();
    let u1 = 2; // start, u1: the edit is in a1, the step after it
    assert_eq!(again.rewound_to, Some(u1));
    assert_eq!(again.existing, 1);
    assert_eq!(again.appended, changed.len() as u64, "a rewind, then every step from the edited one");
    assert_eq!(j.head("s").unwrap().history, timeline::fold(&changed));
    // The file's compaction hides the edit from the head: it is in the states before it.
    assert!(holds_edit(&j), "the journal holds the edited text");
    // Importing the edited file again recognises every step.
    let third = j.import_steps(&src("s", "claude-code"), &changed, now()).unwrap();
    assert_eq!((third.appended, third.existing, third.rewound_to), (0, changed.len() as u64, None));
    // Reverting the file returns to the original events through one rewind: nothing appended
    // twice, nothing deleted.
    let back = j.import_steps(&src("s", "claude-code"), &original, now()).unwrap();
    assert_eq!((back.appended, back.existing), (1, original.len() as u64));
    assert_eq!(j.head("s").unwrap().history, first);
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
}

/// Review (second pass): re-importing an edited Codex file whose rollback returns to a state
/// both versions reach matched the other version's rollback, and the head flipped to it on
/// every re-import. A rollback's event must follow the step before it in the journal.
#[test]
fn an_edited_codex_file_with_a_rollback_stays_on_its_own_events() {
    let file = |edited: bool| {
        let mut records =
            vec![codex::record(0, "session_meta", json!({"id": "th-1", "model_provider": "openai"}))];
        let mut turns = codex::rolled_back_turn();
        if edited {
            turns[3] = codex::record(4, "response_item", assistant("2, edited"));
        }
        records.extend(turns);
        steps(Source::Codex, &salvage_testkit::jsonl(&records))
    };
    let (a, b) = (file(false), file(true));
    let mut j = Journal::in_memory().unwrap();
    j.import_steps(&src("c", "codex"), &a, now()).unwrap();
    j.import_steps(&src("c", "codex"), &b, now()).unwrap();
    let head = j.version("c").unwrap();
    for round in 0..2 {
        let again = j.import_steps(&src("c", "codex"), &b, now()).unwrap();
        assert_eq!((again.appended, again.rewound_to), (0, None), "round {round}");
        assert_eq!(
            j.version("c").unwrap(),
            head,
            "round {round}: the head stays on the edited file's events"
        );
    }
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
}

/// Review (second pass): edits to what a step records besides its messages (a stop reason, output
/// tokens, a compaction's trigger and token count, a time) were "already journaled", and the
/// journal kept the old values.
#[test]
fn an_edit_to_a_stop_reason_trigger_or_time_is_journaled() {
    let text = sample("claude-code/fixture-branch-and-compaction.jsonl");
    let edits: [(&str, &str, &str); 4] = [
        ("stop reason", r#""stop_reason":"end_turn""#, r#""stop_reason":"max_tokens""#),
        ("output tokens", r#""output_tokens":5"#, r#""output_tokens":6"#),
        ("compaction trigger", r#""trigger":"auto""#, r#""trigger":"manual""#),
        ("time", "2025-07-01T10:01:00.000Z", "2025-07-01T10:01:30.000Z"),
    ];
    for (what, from, to) in edits {
        assert!(text.contains(from), "{what}: the sample has {from}");
        let original = steps(Source::ClaudeCode, &text);
        let edited = steps(Source::ClaudeCode, &text.replacen(from, to, 1));
        let mut j = Journal::in_memory().unwrap();
        j.import_steps(&src("s", "claude-code"), &original, now()).unwrap();
        let again = j.import_steps(&src("s", "claude-code"), &edited, now()).unwrap();
        assert!(again.appended > 0 && again.existing < edited.len() as u64, "{what}: {again:?}");
        let third = j.import_steps(&src("s", "claude-code"), &edited, now()).unwrap();
        assert_eq!(third.appended, 0, "{what}: the edited file is journaled now");
        assert_eq!(j.verify(None).unwrap().bad, vec![], "{what}");
    }
}
