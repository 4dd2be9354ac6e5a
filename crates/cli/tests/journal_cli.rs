//! `salvage journal …` end to end on a journal written through the library.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::{EventBody, StepOutcome};
use salvage_types::Message;
use std::process::{Command, Output, Stdio};

fn salvage(db: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .arg("--db")
        .arg(db)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn build(db: &std::path::Path) {
    let ts = |n: i64| Utc.timestamp_millis_opt(1_764_000_000_000 + n * 1000).unwrap();
    let mut j = Journal::open(db, &Options::default()).unwrap();
    j.start_session(
        "s1",
        "a session",
        NewEvent::new(
            "e1",
            ts(0),
            EventBody::SessionStarted {
                provider: Some("anthropic".into()),
                model: Some("claude".into()),
                context_window: None,
                settings: [("CHATCLI_MAX_PAYLOAD".to_string(), "5MB".to_string())].into(),
                cap: Some(5 << 20),
                invalid_settings: Vec::new(),
                request: None,
            },
        )
        .with_history(HistoryChange::Append(vec![Message::system("S"), Message::user("fix it")])),
    )
    .unwrap();
    j.append(
        "s1",
        None,
        vec![NewEvent::new(
            "e2",
            ts(1),
            EventBody::ProviderError {
                status: Some(413),
                message: "413 Payload Too Large".into(),
                transport: None,
                rejected_bytes: Some(9000),
                class: salvage_types::ErrorClass::PayloadTooLarge,
                reason: "status 413".into(),
            },
        )],
    )
    .unwrap();
    j.append(
        "s1",
        None,
        vec![NewEvent::new(
            "e3",
            ts(2),
            EventBody::RecoveryAttempt {
                attempt: 2,
                rung: 2,
                outcome: StepOutcome::Applied,
                before_bytes: 4_404_019,
                after_bytes: 1_153_434,
                before_messages: 40,
                after_messages: 12,
                archived: vec!["a".into(), "b".into(), "c".into()],
            },
        )
        .with_history(HistoryChange::Set(vec![
            Message::system("S"),
            Message::user("[Context was automatically compacted]"),
            Message::user("fix it"),
        ]))],
    )
    .unwrap();
    j.append("s1", None, vec![NewEvent::new("e4", ts(3), EventBody::Checkpoint { name: "safe".into() })])
        .unwrap();
}

#[test]
fn sessions_log_show_rewind_verify_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    build(&db);
    let v: serde_json::Value =
        serde_json::from_slice(&salvage(&db, &["journal", "sessions", "--json"]).stdout).unwrap();
    assert_eq!(v["sessions"][0]["id"], "s1");
    assert_eq!(v["sessions"][0]["events"], 4);
    assert!(v["sessions"][0]["created_at"].as_str().unwrap().starts_with("2025-11-24T"));
    let log = String::from_utf8(salvage(&db, &["journal", "log", "s1"]).stdout).unwrap();
    assert!(log.contains("recovery attempt 2 rung 2: 4.2 MB → 1.1 MB, 3 archived"), "{log}");
    let v: serde_json::Value =
        serde_json::from_slice(&salvage(&db, &["journal", "log", "s1", "--json"]).stdout).unwrap();
    assert_eq!(
        v["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["session_started", "provider_error", "recovery_attempt", "checkpoint"]
    );
    let h: Vec<Message> =
        serde_json::from_slice(&salvage(&db, &["journal", "show", "s1", "--at", "2"]).stdout).unwrap();
    assert_eq!(h, vec![Message::system("S"), Message::user("fix it")]);
    let o = salvage(&db, &["journal", "rewind", "s1", "--to", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h: Vec<Message> = serde_json::from_slice(&salvage(&db, &["journal", "show", "s1"]).stdout).unwrap();
    assert_eq!(h.len(), 2, "the rewind restored event 2's history");
    let v: serde_json::Value =
        serde_json::from_slice(&salvage(&db, &["journal", "checkpoints", "s1", "--json"]).stdout).unwrap();
    assert_eq!(v["checkpoints"].as_array().unwrap().len(), 0, "the checkpoint is on the abandoned branch");
    assert!(salvage(&db, &["journal", "verify"]).status.success());
    let cap = salvage(&db, &["journal", "export", "s1"]);
    let c = salvage_types::capture::parse_capture(&cap.stdout, "export").unwrap();
    assert_eq!(c.failure.status, Some(413));
    assert_eq!(c.settings["CHATCLI_MAX_PAYLOAD"], "5MB");
    let jsonl =
        String::from_utf8(salvage(&db, &["journal", "export", "s1", "--format", "jsonl"]).stdout).unwrap();
    assert_eq!(jsonl.lines().count(), 5);
    // Errors: unknown session and event are exit 2; tampering is exit 1 naming the event.
    assert_eq!(salvage(&db, &["journal", "log", "nope"]).status.code(), Some(2));
    assert_eq!(salvage(&db, &["journal", "show", "s1", "--at", "99"]).status.code(), Some(2));
    let o = Command::new("sqlite3")
        .arg(&db)
        .arg("DROP TRIGGER events_append_only_update; UPDATE events SET ts = 'x' WHERE seq = 3;")
        .status()
        .unwrap();
    assert!(o.success());
    let o = salvage(&db, &["journal", "verify"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("session s1 event 3"));
}

#[test]
fn export_redacts_secrets_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    let mut j = Journal::open(&db, &Options::default()).unwrap();
    j.start_session(
        "s",
        "",
        NewEvent::new("e1", ts, EventBody::MessageAppended { count: 1 }).with_history(HistoryChange::Append(
            vec![Message::user("my key is sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx")],
        )),
    )
    .unwrap();
    drop(j);
    for format in ["capture", "jsonl"] {
        let o = salvage(&db, &["journal", "export", "s", "--format", format]);
        let out = String::from_utf8(o.stdout).unwrap();
        assert!(
            !out.contains("AbCdEfGhIjKlMnOpQrStUvWx") && out.contains("[REDACTED:anthropic_key:"),
            "{format}: {out}"
        );
        let o = salvage(&db, &["journal", "export", "s", "--format", format, "--no-redact"]);
        assert!(String::from_utf8(o.stdout).unwrap().contains("AbCdEfGhIjKlMnOpQrStUvWx"));
    }
}
