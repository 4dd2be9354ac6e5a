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

/// One transaction appending more stored JSON than the append keeps for its snapshots (4 MB):
/// 80 events of 100 KB, so the snapshot at depth 64 is built in the same transaction and reads
/// back the rows it no longer holds. The restore through it equals the appended history, and the
/// file verifies.
#[test]
fn a_snapshot_in_a_transaction_larger_than_its_budget_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    let history: Vec<Message> =
        (0..80).map(|n| Message::user(format!("{n} {}", "y".repeat(100 * 1024)))).collect();
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts, EventBody::MessageAppended { count: 0 })).unwrap();
    let events: Vec<NewEvent> = history
        .iter()
        .enumerate()
        .map(|(n, m)| {
            NewEvent::new(format!("s-{}", n + 1), ts, EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m.clone()]))
        })
        .collect();
    j.append("s", None, events).unwrap();
    drop(j);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let snapshots: i64 = j.conn().query_row("SELECT COUNT(*) FROM snapshots", [], |r| r.get(0)).unwrap();
    assert!(snapshots >= 1, "a snapshot was taken in the transaction");
    assert!(j.head("s").unwrap().history == history);
    assert!(j.view_at("s", 70).unwrap().history == history[..69]);
    assert!(j.verify(None).unwrap().bad.is_empty());
}
