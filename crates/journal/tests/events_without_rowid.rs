//! Migration 0007 (the events table keyed by (session_id, seq) alone, WITHOUT ROWID): a file
//! written at schema 5 migrates with every event row, blob link and restore unchanged, verifies,
//! and keeps what the old table enforced (append-only events, blob links to stored events only,
//! whole-session deletion).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent, View};
use salvage_store::{Options, Store};
use salvage_types::event::EventBody;
use salvage_types::{CcrKey, Message};
use std::path::Path;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + n as i64).single().unwrap()
}

/// Two sessions of 150 events at schema 5, single appends and batches, one event archiving an
/// original (so event_blobs holds a row).
fn write_v5(path: &Path) {
    let mut j = Journal::from_store(Store::open_to(path, &Options::default(), 5).unwrap());
    for s in ["a", "b"] {
        j.start_session(
            s,
            "",
            NewEvent::new(format!("{s}0"), ts(0), EventBody::MessageAppended { count: 0 }),
        )
        .unwrap();
        let ev = |n: u64| {
            NewEvent::new(format!("{s}{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("{s} message {n}"))]))
        };
        for n in 1..50 {
            j.append(s, None, vec![ev(n)]).unwrap();
        }
        j.append(s, None, (50..150).map(ev).collect()).unwrap();
        let original = format!("archived by {s}: {}", "x".repeat(300)).into_bytes();
        let archived = NewEvent::new(format!("{s}-arch"), ts(200), EventBody::NoticeInjected {})
            .with_archive(vec![(CcrKey::of(&original), original)]);
        j.append(s, None, vec![archived]).unwrap();
    }
    assert_eq!(j.store().version().unwrap(), 5);
}

type EventRow = (String, i64, String, Vec<u8>, Vec<u8>, Option<Vec<u8>>);

fn event_rows(conn: &rusqlite::Connection) -> Vec<EventRow> {
    let mut st = conn
        .prepare("SELECT session_id, seq, event_id, body, hash, snapshot_hash FROM events ORDER BY session_id, seq")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn blob_rows(conn: &rusqlite::Connection) -> Vec<(String, i64, Vec<u8>)> {
    let mut st = conn.prepare("SELECT session_id, seq, blob_key FROM event_blobs ORDER BY 1, 2, 3").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

fn views(j: &Journal, s: &str) -> Vec<View> {
    [1, 40, 64, 100, 129, 150, 151].iter().map(|n| j.view_at(s, *n).unwrap()).collect()
}

#[test]
fn a_schema_5_file_migrates_with_its_events_unchanged_and_their_rules_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v5.db");
    write_v5(&p);
    let (rows, blobs, before) = {
        let old = Journal::from_store(Store::open_to(&p, &Options::read_only(), 5).unwrap());
        (event_rows(old.conn()), blob_rows(old.conn()), [views(&old, "a"), views(&old, "b")])
    };
    assert_eq!((rows.len(), blobs.len()), (302, 2));

    let mut j = Journal::open(&p, &Options::default()).unwrap();
    let sql: String = j
        .conn()
        .query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'", [], |r| r.get(0))
        .unwrap();
    assert!(sql.contains("WITHOUT ROWID"), "{sql}");
    assert_eq!(event_rows(j.conn()), rows, "every event row, byte for byte");
    assert_eq!(blob_rows(j.conn()), blobs);
    assert_eq!([views(&j, "a"), views(&j, "b")], before, "restores");
    assert!(j.verify(None).unwrap().bad.is_empty());

    // Append-only, as before; a blob link names a stored event.
    let e = j.conn().execute("UPDATE events SET body = x'00' WHERE session_id = 'a' AND seq = 3", []);
    assert!(e.unwrap_err().to_string().contains("append-only"));
    let e = j.conn().execute("DELETE FROM events WHERE session_id = 'a' AND seq = 151", []);
    assert!(e.unwrap_err().to_string().contains("append-only"));
    let e = j.conn().execute("INSERT INTO event_blobs VALUES ('a', 999, zeroblob(32))", []);
    assert!(e.unwrap_err().to_string().contains("FOREIGN KEY"));

    // Appends continue the chain, and a whole session is still deleted with its links.
    let next = NewEvent::new("a-next", ts(300), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![Message::user("after the migration")]));
    assert_eq!(j.append("a", Some(151), vec![next]).unwrap()[0].seq, 152);
    j.delete_sessions(&["b".to_string()], "test", ts(400)).unwrap();
    let left = event_rows(j.conn());
    assert_eq!(left.len(), 152);
    assert!(left.iter().all(|r| r.0 == "a"));
    assert_eq!(blob_rows(j.conn()).len(), 1);
    assert!(j.verify(None).unwrap().bad.is_empty());
    assert_eq!(j.view_at("a", 152).unwrap().history.len(), 150);
}
