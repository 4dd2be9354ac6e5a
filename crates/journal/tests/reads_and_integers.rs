//! Reads never write (restores, listings, exports and verification leave the file as it was,
//! CCR blobs included), a corrupt integer in a row is an error naming the session and the event
//! instead of a silently clamped value, and the journal stamps CCR writes with the clock it is
//! given rather than the wall clock.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_ccr::Clock;
use salvage_journal::lookup::SessionFilter;
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent, LARGE_MESSAGE};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;
use std::sync::Arc;

struct Fixed(i64);
impl Clock for Fixed {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap()).unwrap()
}

/// A 12-event session whose history holds one message large enough to live in CCR.
fn build(path: &Path, clock: i64) {
    let mut j = Journal::open(path, &Options::default()).unwrap().with_clock(Arc::new(Fixed(clock)));
    j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    for n in 1..12u64 {
        let m = if n == 3 {
            Message::user("x".repeat(LARGE_MESSAGE + 10))
        } else {
            Message::user(format!("m {n}"))
        };
        let e = NewEvent::new(format!("s-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![m]));
        j.append("s", None, vec![e]).unwrap();
    }
}

/// Runs SQL on the file behind the journal's back, triggers dropped.
fn tamper(path: &Path, sql: &str) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS events_append_only_update; DROP TRIGGER IF EXISTS events_append_only_delete; {sql}"
    ))
    .unwrap();
}

fn data_version(c: &rusqlite::Connection) -> i64 {
    c.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap()
}

#[test]
fn reads_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 1_764_000_000_000);
    // The spilled blob was last read long ago: a read that refreshes `last_access` would write now.
    tamper(&p, "UPDATE ccr_blobs SET last_access = 0;");
    let observer = rusqlite::Connection::open(&p).unwrap();
    let before = data_version(&observer);
    let j = Journal::open(&p, &Options::default()).unwrap().with_clock(Arc::new(Fixed(1_900_000_000_000)));
    let changes = j.conn().total_changes();
    let view = j.view_at("s", 12).unwrap();
    assert_eq!(view.history.len(), 11);
    assert_eq!(view.history[2].content.len(), LARGE_MESSAGE + 10);
    j.head("s").unwrap();
    j.events("s", 0, 100).unwrap();
    j.sessions().unwrap();
    j.sessions_filtered(&SessionFilter::default()).unwrap();
    j.resolve_session("latest").unwrap();
    assert!(j.verify(None).unwrap().bad.is_empty());
    assert!(j.export_jsonl("s").unwrap().contains(&"x".repeat(100)));
    j.export_capture("s").unwrap();
    let all = j.history_hashes_all("s").unwrap();
    j.messages_by_hash("s", 12, &all).unwrap();
    j.referenced_blobs("s").unwrap();
    salvage_journal::otlp::session_traces(&j, "s").unwrap();
    assert_eq!(j.conn().total_changes(), changes, "a read changed rows");
    drop(j);
    assert_eq!(data_version(&observer), before, "a read committed a write to the file");
    let touched: i64 =
        observer.query_row("SELECT max(last_access) FROM ccr_blobs", [], |r| r.get(0)).unwrap();
    assert_eq!(touched, 0);
}

#[test]
fn the_journal_stamps_ccr_writes_with_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 1_234_567);
    let c = rusqlite::Connection::open(&p).unwrap();
    let (created, access): (i64, i64) = c
        .query_row("SELECT created_at, last_access FROM ccr_blobs", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!((created, access), (1_234_567, 1_234_567));
}

/// The error of `f` on a journal whose file had `sql` applied.
fn corrupted<T: std::fmt::Debug>(
    sql: &str,
    f: impl FnOnce(&mut Journal) -> Result<T, JournalError>,
) -> JournalError {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 1_764_000_000_000);
    tamper(&p, sql);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    f(&mut j).expect_err("a corrupt integer is an error")
}

fn assert_corrupt(e: &JournalError, seq: u64, word: &str) {
    match e {
        JournalError::Corrupt { session, seq: s, problem } => {
            assert_eq!((session.as_str(), *s), ("s", seq), "{e}");
            assert!(problem.contains(word), "{e}");
        }
        other => panic!("expected corruption naming s/{seq}, got {other}"),
    }
}

#[test]
fn corrupt_integers_are_errors_naming_the_session_and_event() {
    // A negative parent: the fold must not read it as "no parent" or event 0.
    let e = corrupted("UPDATE events SET parent = -4 WHERE seq = 5;", |j| j.view_at("s", 7));
    assert_corrupt(&e, 5, "parent");
    // A negative kind version read back as 0 would hide the damage.
    let e = corrupted("UPDATE events SET kind_version = -1 WHERE seq = 6;", |j| j.events("s", 0, 100));
    assert_corrupt(&e, 6, "kind_version");
    // A negative head is not an empty session.
    let e = corrupted("UPDATE sessions SET head_seq = -3;", |j| j.version("s"));
    assert_corrupt(&e, 0, "head_seq");
    // A head hash of the wrong length is not a zero hash to chain onto.
    let e = corrupted("UPDATE sessions SET head_hash = X'0102';", |j| {
        j.append("s", None, vec![NewEvent::new("more", ts(99), EventBody::MessageAppended { count: 0 })])
    });
    assert_corrupt(&e, 12, "head_hash");
    // A negative depth is reported by verify at its event.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 1_764_000_000_000);
    tamper(&p, "UPDATE events SET depth = -2 WHERE seq = 8;");
    let r = Journal::open(&p, &Options::default()).unwrap().verify(None).unwrap();
    let bad = r.bad.first().expect("reported");
    assert_eq!(bad.seq, 8, "{bad:?}");
    assert!(bad.problem.contains("depth"), "{bad:?}");
}

#[test]
fn a_restore_ends_the_read_transaction_it_begins_and_leaves_the_callers() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 1_000);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    assert_eq!(j.view_at("s", 12).unwrap().history.len(), 11);
    assert!(j.conn().is_autocommit(), "a restore left its transaction open");
    assert!(matches!(j.view_at("s", 99), Err(JournalError::NoEvent { seq: 99, .. })));
    assert!(j.conn().is_autocommit(), "a failed restore left its transaction open");
    // The handle still writes after both.
    let e = NewEvent::new("s-12", ts(12), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![Message::user("after")]));
    j.append("s", None, vec![e]).unwrap();
    // Inside a caller's transaction, the restore reads in it and leaves it open.
    j.conn().execute_batch("BEGIN").unwrap();
    assert_eq!(j.view_at("s", 13).unwrap().history.len(), 12);
    assert!(!j.conn().is_autocommit(), "a restore ended its caller's transaction");
    j.conn().execute_batch("COMMIT").unwrap();
}
