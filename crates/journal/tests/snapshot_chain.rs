//! Snapshots are incremental: each row holds only the messages after its base, a chain is written
//! whole again once it reaches its length limit, every restore through a chain is exact, a chain
//! cut short falls back to row-by-row reads, a tampered base is refused, and restores whose chains
//! pass over the rows of abandoned branches are exact.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent, View};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;

/// The first bytes of a snapshot's history (format 2), followed by its base's seq (0: a whole row).
const MAGIC: [u8; 4] = *b"SVH2";

/// True when a stored history is a delta: format 2 naming a base.
fn is_delta(h: &[u8]) -> bool {
    h.starts_with(&MAGIC) && h[4..12] != [0u8; 8]
}

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + n as i64).single().unwrap()
}

/// A session of `events` events, each appending one message, in batches of 100.
fn build(path: &Path, events: u64) {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let mut batch = Vec::new();
    for n in 1..events {
        let m = Message::user(format!("message {n} {}", "x".repeat((n as usize * 7) % 300)));
        batch.push(
            NewEvent::new(format!("e{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m])),
        );
        if batch.len() == 100 {
            j.append("s", None, std::mem::take(&mut batch)).unwrap();
        }
    }
    j.append("s", None, batch).unwrap();
}

/// The snapshot rows: seq and whether the history is a delta.
fn rows(j: &Journal) -> Vec<(u64, bool)> {
    histories(j).into_iter().map(|(seq, h)| (seq, is_delta(&h))).collect()
}

/// The views at `seqs` restored without any snapshot (row by row), from a copy of the file.
fn without_snapshots(path: &Path, seqs: &[u64]) -> Vec<View> {
    let copy = path.with_extension("plain.db");
    std::fs::copy(path, &copy).unwrap();
    let j = Journal::open(&copy, &Options::default()).unwrap();
    j.conn().execute("DELETE FROM snapshots", []).unwrap();
    seqs.iter().map(|s| j.view_at("s", *s).unwrap()).collect()
}

/// Restores at `seqs` through the snapshots equal restores without them (row by row), and the
/// file verifies.
fn assert_restores_exactly(path: &Path, seqs: &[u64]) {
    let want = without_snapshots(path, seqs);
    let j = Journal::open(path, &Options::read_only()).unwrap();
    for (s, w) in seqs.iter().zip(&want) {
        assert_eq!(&j.view_at("s", *s).unwrap(), w, "restore at {s}");
    }
    assert!(j.verify(None).unwrap().bad.is_empty());
}

#[test]
fn delta_snapshots_restore_exactly_and_a_chain_is_rewritten_whole_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("chain.db");
    build(&p, 1300);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let snaps = rows(&j);
    assert!(snaps.len() > 16, "{snaps:?}");
    let whole: Vec<u64> = snaps.iter().filter(|(_, d)| !d).map(|(s, _)| *s).collect();
    assert!(whole.len() >= 2, "a chain past its limit is written whole again: {snaps:?}");
    assert!(snaps.iter().filter(|(_, d)| *d).count() >= 15, "{snaps:?}");
    let mut seqs: Vec<u64> = snaps.iter().map(|(s, _)| *s).collect();
    seqs.extend([1, 63, 65, 700, 1299, 1300]);
    drop(j);
    assert_restores_exactly(&p, &seqs);
}

#[test]
fn a_chain_cut_short_is_read_row_by_row_and_a_tampered_base_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.db");
    build(&p, 600);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let snaps = rows(&j);
    let (last, _) = *snaps.last().unwrap();
    let (middle, is_delta) = snaps[snaps.len() / 2];
    assert!(is_delta && snaps.last().unwrap().1, "{snaps:?}");
    drop(j);
    let want = without_snapshots(&p, &[last]).remove(0);
    // A base behind the journal's back: edited (its messages forged), restores through it refuse.
    let j = Journal::open(&p, &Options::default()).unwrap();
    let history: Vec<u8> = j
        .conn()
        .query_row("SELECT history FROM snapshots WHERE seq = ?1", [middle as i64], |r| r.get(0))
        .unwrap();
    // Same-length text in the MessagePack strings: the row still decodes, only its hash differs.
    let forged: Vec<u8> = {
        let at: Vec<usize> =
            history.windows(7).enumerate().filter(|(_, w)| w == b"message").map(|(i, _)| i).collect();
        assert!(!at.is_empty(), "the row holds the messages' text uncompressed");
        let mut f = history.clone();
        for i in at {
            f[i..i + 7].copy_from_slice(b"forged!");
        }
        f
    };
    j.conn()
        .execute("UPDATE snapshots SET history = ?1 WHERE seq = ?2", rusqlite::params![forged, middle as i64])
        .unwrap();
    let e = j.view_at("s", last).unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
    assert!(!j.verify(None).unwrap().bad.is_empty());
    // Gone instead (a redaction drops rows like this): the restore reads the rest row by row.
    j.conn().execute("DELETE FROM snapshots WHERE seq = ?1", [middle as i64]).unwrap();
    assert_eq!(j.view_at("s", last).unwrap(), want);
    assert!(j.verify(None).unwrap().bad.is_empty());
}

/// Appends one event adding one message to the head; returns its seq.
fn push(j: &mut Journal, n: &mut u64) -> u64 {
    *n += 1;
    let m = Message::user(format!("message {n}"));
    let e = NewEvent::new(format!("e{n}"), ts(*n), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![m]));
    j.append("s", None, vec![e]).unwrap()[0].seq
}

/// Appends a rewind to `target`; returns its seq.
fn rewind(j: &mut Journal, n: &mut u64, target: u64) -> u64 {
    *n += 1;
    j.rewind("s", target, "test", &format!("e{n}"), ts(*n)).unwrap().seq
}

#[test]
fn restores_whose_chains_pass_over_abandoned_branches_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("branches.db");
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let mut n = 0;
    // A line of 100 events: a snapshot at depth 64 (seq 65).
    for _ in 0..99 {
        push(&mut j, &mut n);
    }
    // Back to 90 and on: the chain of the new events skips the 11 abandoned rows above 90, all
    // above the snapshot.
    rewind(&mut j, &mut n, 90);
    for _ in 0..5 {
        push(&mut j, &mut n);
    }
    // Ten times back to 95 and 8 events on: the last chain passes over more than 64 rows of
    // abandoned branches between its rewind and 95.
    for _ in 0..10 {
        rewind(&mut j, &mut n, 95);
        for _ in 0..8 {
            push(&mut j, &mut n);
        }
    }
    // On past depth 128 (a snapshot on this branch), then back to 97 of the first line: the
    // latest snapshot before the new events is on another branch than theirs.
    for _ in 0..30 {
        push(&mut j, &mut n);
    }
    rewind(&mut j, &mut n, 97);
    for _ in 0..5 {
        push(&mut j, &mut n);
    }
    let head = j.version("s").unwrap();
    let snaps: Vec<u64> = rows(&j).into_iter().map(|(s, _)| s).collect();
    assert!(snaps.len() >= 2 && snaps[0] == 65, "{snaps:?}");
    assert!(snaps.iter().any(|s| *s > 200), "a snapshot on a later branch: {snaps:?}");
    assert_eq!(j.view_at("s", head).unwrap().history.len(), 97 - 1 + 5);
    drop(j);
    assert_restores_exactly(&p, &(1..=head).collect::<Vec<_>>());
}

/// Each snapshot row's state: how many hashes it lists.
fn listed(j: &Journal) -> Vec<(u64, usize)> {
    let mut st = j.conn().prepare("SELECT seq, state FROM snapshots ORDER BY seq").unwrap();
    st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Vec<u8>>(1)?)))
        .unwrap()
        .map(|r| {
            let (seq, state) = r.unwrap();
            let v: serde_json::Value = serde_json::from_slice(&state).unwrap();
            (seq, v["history"].as_str().unwrap().len() / 64)
        })
        .collect()
}

#[test]
fn a_delta_row_lists_only_the_hashes_after_its_base() {
    let dir = tempfile::tempdir().unwrap();
    build(&dir.path().join("listed.db"), 1300);
    let j = Journal::open(&dir.path().join("listed.db"), &Options::read_only()).unwrap();
    let deltas: Vec<u64> = rows(&j).into_iter().map(|(s, d)| if d { s } else { 0 }).collect();
    let mut before = 0;
    for ((seq, n), delta) in listed(&j).into_iter().zip(deltas) {
        // Event `seq` holds seq - 1 messages; a delta lists those since the previous row.
        let want = if delta == 0 { seq as usize - 1 } else { seq as usize - 1 - before };
        assert_eq!(n, want, "snapshot at {seq}");
        before = seq as usize - 1;
    }
}

#[test]
fn a_rolled_back_snapshot_is_never_extended_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rollback.db");
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let ev = |id: String, n: u64| {
        NewEvent::new(id, ts(n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![Message::user(format!("message {n}"))]))
    };
    // A batch that takes a snapshot (event 65, messages 1..=64) and then fails on a reused id:
    // nothing of it commits.
    let mut batch: Vec<NewEvent> = (1..100).map(|n| ev(format!("a{n}"), n)).collect();
    batch.push(ev("start".into(), 100));
    assert!(j.append("s", None, batch).is_err());
    // Another writer appends the same messages one event later: its snapshot at event 65 holds
    // messages 1..=63, and the history at every later snapshot starts with the rolled-back one's.
    let mut other = Journal::open(&p, &Options::default()).unwrap();
    let quiet = NewEvent::new("q", ts(0), EventBody::NoticeInjected {});
    other.append("s", None, vec![quiet]).unwrap();
    other.append("s", None, (1..100).map(|n| ev(format!("b{n}"), n)).collect()).unwrap();
    drop(other);
    j.append("s", None, (100..200).map(|n| ev(format!("c{n}"), n)).collect()).unwrap();
    let seqs: Vec<u64> = rows(&j).into_iter().map(|(s, _)| s).chain([201]).collect();
    assert!(seqs.len() >= 3, "{seqs:?}");
    drop(j);
    let want = without_snapshots(&p, &seqs);
    let j = Journal::open(&p, &Options::read_only()).unwrap();
    for (s, w) in seqs.iter().zip(&want) {
        assert_eq!(&j.view_at("s", *s).unwrap(), w, "event {s}");
    }
}

#[test]
fn a_redacted_message_appended_again_enters_snapshots_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("again.db");
    build(&p, 10);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    let hash = j.history_hashes("s", 10).unwrap()[6];
    let secret = j.messages_by_hash("s", 10, &[hash]).unwrap().remove(0);
    let body = EventBody::Redaction { keys: vec![], counts: Default::default() };
    j.redact_messages("s", &[(hash, Message::user("[redacted]"))], NewEvent::new("red", ts(999), body))
        .unwrap();
    // The same content again, in the batch that takes the next snapshot (event 65): the writer
    // holds its original bytes, the stored row its replacement.
    let again = |n: u64| {
        NewEvent::new(format!("again{n}"), ts(1000 + n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![secret.clone()]))
    };
    j.append("s", None, (12..80).map(again).collect()).unwrap();
    let seqs: Vec<u64> = rows(&j).into_iter().map(|(s, _)| s).chain([79]).collect();
    assert_eq!(seqs[0], 65, "{seqs:?}");
    drop(j);
    let want = without_snapshots(&p, &seqs);
    let j = Journal::open(&p, &Options::read_only()).unwrap();
    for (s, w) in seqs.iter().zip(&want) {
        let v = j.view_at("s", *s).unwrap();
        assert!(v.history.iter().all(|m| m.content != secret.content), "event {s}");
        assert_eq!(&v, w, "event {s}");
    }
}

/// A journal written by salvage 0.1.0 at d25858a (snapshot format 1: zstd frames of JSON), made by
/// `testdata/journals/README.md`'s program: 1 300 events, a rewrite at event 700.
fn format1_copy(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/journals/format1.db");
    let p = dir.join("format1.db");
    std::fs::copy(src, &p).unwrap();
    p
}

/// The first bytes of a format-1 history: a zstd frame, or the skippable frame naming a base.
fn is_format1(h: &[u8]) -> bool {
    h.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) || h.starts_with(&[0x5A, 0x2A, 0x4D, 0x18])
}

fn histories(j: &Journal) -> Vec<(u64, Vec<u8>)> {
    let mut st = j.conn().prepare("SELECT seq, history FROM snapshots ORDER BY seq").unwrap();
    st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Vec<u8>>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn an_older_files_format1_snapshots_restore_exactly_and_are_never_extended() {
    let dir = tempfile::tempdir().unwrap();
    let p = format1_copy(dir.path());
    let j = Journal::open(&p, &Options::default()).unwrap();
    let old = histories(&j);
    assert!(old.len() >= 4 && old.iter().all(|(_, h)| is_format1(h)), "{:?}", old.len());
    let seqs: Vec<u64> = old.iter().map(|(s, _)| *s).chain([699, 700, 701, 1299]).collect();
    drop(j);
    assert_restores_exactly(&p, &seqs);
    // The new version appends after it: its first snapshot is format 2 and whole (a format-1 row
    // is never a base), and every restore stays exact.
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    for n in 1300..1500u64 {
        let m = Message::user(format!("later {n}"));
        j.append(
            "s",
            None,
            vec![NewEvent::new(format!("l{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m]))],
        )
        .unwrap();
    }
    let new: Vec<(u64, Vec<u8>)> = histories(&j).into_iter().filter(|(s, _)| *s >= 1300).collect();
    assert!(!new.is_empty());
    assert!(new.iter().all(|(_, h)| h.starts_with(&MAGIC)), "format 2 after the upgrade");
    assert!(!is_delta(&new[0].1), "the first format-2 row is whole");
    let last = j.version("s").unwrap();
    drop(j);
    assert_restores_exactly(&p, &[last, 1299]);
}

#[test]
fn messages_stored_before_enter_snapshots_exactly_from_the_writers_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("repeat.db");
    build(&p, 10);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    let earlier = j.view_at("s", 10).unwrap().history;
    // Earlier messages again (stored before, never redacted), then new ones, then earlier ones
    // in a later transaction: the snapshots at 65, 129 and 193 hold messages of every kind.
    let event = |n: u64, m: &Message| {
        NewEvent::new(format!("r{n}"), ts(1000 + n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![m.clone()]))
    };
    let batch: Vec<NewEvent> = (11..150)
        .map(|n| match n % 3 {
            0 => event(n, &Message::user(format!("new {n}"))),
            _ => event(n, &earlier[(n as usize) % earlier.len()]),
        })
        .collect();
    j.append("s", None, batch).unwrap();
    j.append("s", None, (150..200).map(|n| event(n, &earlier[(n as usize) % earlier.len()])).collect())
        .unwrap();
    let seqs: Vec<u64> = rows(&j).into_iter().map(|(s, _)| s).chain([199]).collect();
    assert_eq!(&seqs[..3], &[65, 129, 193], "{seqs:?}");
    drop(j);
    assert_restores_exactly(&p, &seqs);
}

#[test]
fn a_message_another_handle_redacts_between_single_appends_enters_the_next_snapshot_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("carried.db");
    let secret = Message::user("the key is hunter2");
    let msg = |n: u64| if n == 5 { secret.clone() } else { Message::user(format!("message {n}")) };
    let one = |n: u64| {
        vec![NewEvent::new(format!("a{n}"), ts(n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![msg(n)]))]
    };
    // This handle appends one event per transaction, as a live proxy does; the messages it stored
    // since its last snapshot are kept between them.
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("a", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    for n in 1..40 {
        j.append("a", None, one(n)).unwrap();
    }
    // Another handle redacts the same content in its own session (rows are shared by content):
    // session a's head does not move.
    let mut other = Journal::open(&p, &Options::default()).unwrap();
    let first = NewEvent::new("b0", ts(0), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![secret.clone()]));
    other.start_session("b", "", first).unwrap();
    let hash = other.history_hashes("b", 1).unwrap()[0];
    let body = EventBody::Redaction { keys: vec![], counts: Default::default() };
    other
        .redact_messages("b", &[(hash, Message::user("[redacted]"))], NewEvent::new("red", ts(999), body))
        .unwrap();
    drop(other);
    for n in 40..70 {
        j.append("a", None, one(n)).unwrap();
    }
    let snaps: Vec<u64> = rows(&j).into_iter().map(|(s, _)| s).collect();
    assert_eq!(snaps, vec![65], "one snapshot (at depth 64), taken after the redaction");
    drop(j);
    let want = {
        let copy = p.with_extension("plain.db");
        std::fs::copy(&p, &copy).unwrap();
        let plain = Journal::open(&copy, &Options::default()).unwrap();
        plain.conn().execute("DELETE FROM snapshots", []).unwrap();
        plain.view_at("a", 65).unwrap()
    };
    let got = Journal::open(&p, &Options::read_only()).unwrap().view_at("a", 65).unwrap();
    assert!(got.history.iter().all(|m| m.content != secret.content), "the snapshot holds the secret");
    assert_eq!(got, want);
}
