//! A restore decoding on one thread (row by row, as the replay's workers restore) gives the same
//! history as one decoding on every core, and refuses the same forged row.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;

/// A session of two events whose history is 300 messages (enough for a parallel decode), with
/// repeats and one message large enough to be stored in CCR. No snapshot: every message is
/// loaded row by row.
fn build(path: &Path) -> Vec<Message> {
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    let mut history: Vec<Message> = (0..300).map(|n| Message::user(format!("message {n} é中"))).collect();
    history[10] = history[3].clone();
    history[200] = Message::user("x".repeat(300 * 1024));
    let mut j = Journal::open(path, &Options::default()).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts, EventBody::MessageAppended { count: 0 })).unwrap();
    j.append(
        "s",
        None,
        vec![NewEvent::new("s-1", ts, EventBody::MessageAppended { count: 300 })
            .with_history(HistoryChange::Append(history.clone()))],
    )
    .unwrap();
    history
}

fn restore(path: &Path, threads: Option<usize>) -> Result<Vec<Message>, String> {
    let j = Journal::open(path, &Options::default()).unwrap();
    let j = match threads {
        Some(n) => j.with_decode_threads(n),
        None => j,
    };
    j.head("s").map(|v| v.history).map_err(|e| e.to_string())
}

#[test]
fn one_thread_restores_what_every_core_restores() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    let history = build(&p);
    assert!(restore(&p, None).unwrap() == history, "every core");
    for threads in [0, 1, 2] {
        assert!(restore(&p, Some(threads)).unwrap() == history, "{threads} thread(s)");
    }
}

#[test]
fn one_thread_refuses_a_forged_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let forged = j
        .conn()
        .execute(
            "UPDATE messages SET body = CAST('{\"role\":\"user\",\"content\":\"forged\"}' AS BLOB) WHERE CAST(body AS TEXT) LIKE '%message 7 %'",
            [],
        )
        .unwrap();
    assert_eq!(forged, 1);
    drop(j);
    for threads in [None, Some(1)] {
        let e = restore(&p, threads).unwrap_err();
        assert!(e.contains("does not match its hash"), "{threads:?}: {e}");
    }
}
