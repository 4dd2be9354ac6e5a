//! A snapshot a faulty writer built wrong — its hash recorded by its event and covered by the
//! chain, so every hash check passes — is reported by `verify` at that snapshot's event, while a
//! restore through it would return the wrong history. Each forgery below rewrites one snapshot row
//! and then re-chains the session exactly as the writer would have (snapshot hash, event hashes,
//! session head), so only checking the row against the events and message rows can catch it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use chrono::{TimeZone, Utc};
use rusqlite::params;
use salvage_journal::hash_chain::{link, Row};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap()).unwrap()
}

/// One session of 200 events, one message each: snapshots at 64-event intervals, later ones
/// extending earlier ones.
fn build(path: &Path) {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    for n in 1..200u64 {
        j.append(
            "s",
            None,
            vec![NewEvent::new(format!("s-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("message {n:03}"))]))],
        )
        .unwrap();
    }
    assert!(j.verify(None).unwrap().bad.is_empty(), "the honest file verifies");
}

/// The snapshot digest as the journal records it (its stored format: BLAKE3 over a domain tag
/// and each part length-prefixed).
fn digest(state: &[u8], history: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"salvage.snapshot/1\0");
    for part in [state, history] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    *h.finalize().as_bytes()
}

/// Replaces the snapshot row at `seq` and re-chains the session as a writer would have.
fn rewrite_snapshot(path: &Path, seq: i64, state: &[u8], history: &[u8]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("DROP TRIGGER events_append_only_update; DROP TRIGGER events_append_only_delete;")
        .unwrap();
    conn.execute(
        "UPDATE snapshots SET state = ?1, history = ?2 WHERE seq = ?3",
        params![state, history, seq],
    )
    .unwrap();
    conn.execute(
        "UPDATE events SET snapshot_hash = ?1 WHERE seq = ?2",
        params![&digest(state, history)[..], seq],
    )
    .unwrap();
    type Ev = (i64, String, Option<i64>, i64, String, u32, String, Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);
    let events: Vec<Ev> = conn
        .prepare("SELECT seq, event_id, parent, depth, kind, kind_version, ts, body, delta, snapshot_hash FROM events WHERE session_id = 's' ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut prev = [0u8; 32];
    for (s, id, parent, depth, kind, kv, t, body, delta, snap) in &events {
        let snap: Option<[u8; 32]> = snap.as_ref().map(|b| b.as_slice().try_into().unwrap());
        let row = Row {
            session: "s",
            seq: u64::try_from(*s).unwrap(),
            event_id: id,
            parent: parent.map(|p| u64::try_from(p).unwrap()),
            depth: u64::try_from(*depth).unwrap(),
            kind,
            kind_version: *kv,
            ts: t,
            body,
            delta: delta.as_deref(),
            snapshot: snap.as_ref(),
            blobs: None, // these events reference no CCR blobs
        };
        let hash = link(&prev, &row);
        conn.execute(
            "UPDATE events SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
            params![&prev[..], &hash[..], s],
        )
        .unwrap();
        prev = hash;
    }
    conn.execute("UPDATE sessions SET head_hash = ?1 WHERE id = 's'", [&prev[..]]).unwrap();
}

fn snapshot_row(path: &Path, seq: i64) -> (Vec<u8>, Vec<u8>) {
    let j = Journal::open(path, &Options::default()).unwrap();
    j.conn()
        .query_row("SELECT state, history FROM snapshots WHERE seq = ?1", [seq], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

/// The seq of the second snapshot row: one extending the first.
fn second_snapshot(path: &Path) -> i64 {
    let j = Journal::open(path, &Options::default()).unwrap();
    j.conn().query_row("SELECT seq FROM snapshots ORDER BY seq LIMIT 1 OFFSET 1", [], |r| r.get(0)).unwrap()
}

/// The first problem verify reports, with its event.
fn first_bad(path: &Path) -> Option<(u64, String)> {
    let j = Journal::open(path, &Options::default()).unwrap();
    j.verify(None).unwrap().bad.first().map(|b| (b.seq, b.problem.clone()))
}

/// An honest file, its second snapshot's seq, and that row's stored state and history.
fn honest_file() -> (tempfile::TempDir, std::path::PathBuf, i64, Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p);
    let seq = second_snapshot(&p);
    let (state, history) = snapshot_row(&p, seq);
    (dir, p, seq, state, history)
}

/// The problem verify reports first, which must be at the forged snapshot's event.
fn reported_at(path: &Path, seq: i64) -> String {
    let (bad, problem) = first_bad(path).expect("verify reports the forged snapshot");
    assert_eq!(i64::try_from(bad).unwrap(), seq, "{problem}");
    problem
}

fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = hay.windows(from.len()).position(|w| w == from).expect("the row holds the bytes");
    let mut out = hay.to_vec();
    out[at..at + from.len()].copy_from_slice(to);
    out
}

#[test]
fn a_snapshot_built_from_a_wrong_message_is_reported() {
    let (_dir, p, seq, state, history) = honest_file();
    // The writer packed another text than the stored message's (same length, valid MessagePack).
    let forged = replace(&history, b"message 100", b"message 1OO");
    rewrite_snapshot(&p, seq, &state, &forged);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let through = j.view_at("s", u64::try_from(seq).unwrap()).unwrap();
    assert!(
        through.history.iter().any(|m| m.content == "message 1OO"),
        "the restore returns the forged text"
    );
    let problem = reported_at(&p, seq);
    assert!(problem.contains("differs from the stored messages"), "{problem}");
}

#[test]
fn a_snapshot_built_from_a_wrong_state_is_reported() {
    let (_dir, p, seq, state, history) = honest_file();
    // The writer recorded a cap the events never learned.
    let mut v: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert!(v["cap"].is_null());
    v["cap"] = serde_json::json!(12345);
    rewrite_snapshot(&p, seq, &serde_json::to_vec(&v).unwrap(), &history);
    let j = Journal::open(&p, &Options::default()).unwrap();
    assert_eq!(j.state_at("s", u64::try_from(seq).unwrap()).unwrap().cap, Some(12345));
    let problem = reported_at(&p, seq);
    assert!(problem.contains("events' fold: cap"), "{problem}");
}

#[test]
fn a_snapshot_extending_the_wrong_base_is_reported() {
    let (_dir, p, seq, state, history) = honest_file();
    // The writer extended the right base but listed and packed only the last of the messages
    // added since it: the row is well formed, and its history is short.
    let mut v: serde_json::Value = serde_json::from_slice(&state).unwrap();
    let hashes = v["history"].as_str().unwrap().to_string();
    assert!(hashes.len() > 64, "the row adds several messages");
    v["history"] = serde_json::Value::String(hashes[hashes.len() - 64..].to_string());
    // The last message's MessagePack map starts right before its first key, "role".
    let last_text = format!("message {:03}", seq - 1);
    let last_at = history.windows(last_text.len()).position(|w| w == last_text.as_bytes()).unwrap();
    let key_at = history[..last_at].windows(5).rposition(|w| w == b"\xa4role").unwrap();
    assert!((0x80..=0x8f).contains(&history[key_at - 1]), "a fixmap precedes the key");
    let mut forged = history[..12].to_vec();
    forged.extend_from_slice(&history[key_at - 1..]);
    rewrite_snapshot(&p, seq, &serde_json::to_vec(&v).unwrap(), &forged);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let n = u64::try_from(seq).unwrap();
    assert!(
        j.view_at("s", n).unwrap().history.len() < usize::try_from(n).unwrap() - 1,
        "the restore is short"
    );
    let problem = reported_at(&p, seq);
    assert!(problem.contains("events' fold: history"), "{problem}");
}

#[test]
fn an_honest_file_with_a_redaction_and_snapshots_after_it_verifies() {
    // The audit must not report what the journal wrote itself: a redaction drops the snapshot
    // rows holding the message (those extending them are folded past), and the snapshots taken
    // afterwards hold the replacement, which the stored row holds too.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    let hash = j.history_hashes("s", 200).unwrap()[99];
    let body = EventBody::Redaction { keys: vec![], counts: Default::default() };
    j.redact_messages("s", &[(hash, Message::user("[redacted]"))], NewEvent::new("red", ts(999), body))
        .unwrap();
    for n in 0..140u64 {
        j.append(
            "s",
            None,
            vec![NewEvent::new(format!("more-{n}"), ts(2000 + n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("more {n}"))]))],
        )
        .unwrap();
    }
    let after: i64 =
        j.conn().query_row("SELECT count(*) FROM snapshots WHERE seq > 201", [], |r| r.get(0)).unwrap();
    assert!(after >= 1, "a snapshot was taken after the redaction");
    let head = j.head("s").unwrap();
    assert_eq!(head.history[99].content, "[redacted]");
    drop(j);
    assert_eq!(first_bad(&p), None);
}
