//! Originals archived with an event (`NewEvent::with_archive`): they arrive with their keys, are
//! stored and referenced in the event's transaction, and a key that is not their hash stores
//! nothing under any key.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_ccr::{Ccr, SystemClock};
use salvage_journal::{Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::CcrKey;

fn ts(n: i64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + n).unwrap()
}

fn event(id: &str, n: i64) -> NewEvent {
    NewEvent::new(id, ts(n), EventBody::MessageAppended { count: 0 })
}

/// A transcript-sized original (several CCR frames) and a small one.
fn originals() -> Vec<Vec<u8>> {
    let big: String = (0..40_000).map(|i| format!("line {i} of a dropped transcript\n")).collect();
    vec![big.into_bytes(), b"a small archived tool result, over the raw-storage size".repeat(3)]
}

#[test]
fn archived_originals_are_stored_referenced_and_read_back_by_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    j.start_session("s", "", event("e0", 0)).unwrap();
    let keyed: Vec<(CcrKey, Vec<u8>)> = originals().into_iter().map(|b| (CcrKey::of(&b), b)).collect();
    j.append("s", Some(1), vec![event("e1", 1).with_archive(keyed.clone())]).unwrap();
    let clock = SystemClock;
    let ccr = Ccr::new(j.conn(), &clock);
    for (k, b) in &keyed {
        assert_eq!(&ccr.get_key(k).unwrap(), b, "the original read back by its key");
        assert_eq!(j.sessions_referencing(k).unwrap(), vec!["s".to_string()]);
    }
    let mut referenced = j.referenced_blobs("s").unwrap();
    referenced.sort();
    let mut expected: Vec<CcrKey> = keyed.iter().map(|(k, _)| *k).collect();
    expected.sort();
    assert_eq!(referenced, expected);
}

#[test]
fn an_original_under_a_key_that_is_not_its_hash_is_refused_with_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    j.start_session("s", "", event("e0", 0)).unwrap();
    let [big, small]: [Vec<u8>; 2] = originals().try_into().unwrap();
    let wrong = CcrKey::of(&small);
    let refused = j.append("s", Some(1), vec![event("e1", 1).with_archive(vec![(wrong, big.clone())])]);
    let clock = SystemClock;
    let ccr = Ccr::new(j.conn(), &clock);
    if cfg!(debug_assertions) {
        // Debug builds hash the keyed original anyway and refuse the mismatch with the event.
        assert!(refused.is_err(), "an original filed under another content's key was accepted");
        assert_eq!(j.version("s").unwrap(), 1, "the event was appended");
        assert!(!ccr.contains(&wrong).unwrap(), "content was stored under a key it does not hash to");
        assert!(!ccr.contains(&CcrKey::of(&big)).unwrap(), "the refused event's original was kept");
    } else {
        // Release builds trust the key; the read by it still verifies and returns nothing false.
        assert!(ccr.get_key(&wrong).is_err(), "content that does not hash to its key was returned");
    }
}

fn sqlite3(path: &std::path::Path, sql: &str) {
    let o = std::process::Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .expect("the sqlite3 tool is installed (CI installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A journal whose event 3 archives two originals; returns the file and their keys.
fn with_archived(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, Vec<CcrKey>) {
    let p = dir.join(name);
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("s", "", event("e0", 0)).unwrap();
    j.append("s", Some(1), vec![event("e1", 1)]).unwrap();
    let keyed: Vec<(CcrKey, Vec<u8>)> = originals().into_iter().map(|b| (CcrKey::of(&b), b)).collect();
    j.append("s", Some(2), vec![event("e2", 2).with_archive(keyed.clone()), event("e3", 3)]).unwrap();
    assert_eq!(j.verify(None).unwrap().bad, vec![]);
    (p, keyed.into_iter().map(|(k, _)| k).collect())
}

/// Review finding 03: the links that keep an event's blobs alive (its `event_blobs` rows, the
/// journal's `ccr_refs` rows) could be deleted and `journal verify` still said the journal was
/// intact, while retention was then free to evict a blob a live marker names. The triggers
/// refuse such deletes, and behind their back verify reports the event.
#[test]
fn removed_blob_links_are_refused_and_reported_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (p, keys) = with_archived(dir.path(), "refused.db");
    let j = Journal::open(&p, &Options::default()).unwrap();
    for sql in ["DELETE FROM event_blobs", "UPDATE event_blobs SET seq = 2", "DELETE FROM ccr_refs"] {
        let e = j.conn().execute(sql, []).unwrap_err().to_string();
        assert!(e.contains("journal"), "{sql}: {e}");
    }
    drop(j);
    let hex = |k: &CcrKey| k.hex();
    let one = format!("x'{}'", hex(&keys[0]));
    let cases = [
        ("unlinked", format!("DROP TRIGGER event_blobs_append_only_delete; DELETE FROM event_blobs WHERE blob_key = {one};"), "CCR references"),
        ("moved", format!("DROP TRIGGER event_blobs_append_only_update; UPDATE event_blobs SET seq = 2 WHERE blob_key = {one};"), "CCR references"),
        ("unheld", format!("DROP TRIGGER ccr_refs_journal_held; DELETE FROM ccr_refs WHERE blob_id = (SELECT id FROM ccr_blobs WHERE key = {one});"), "no longer held"),
    ];
    for (name, sql, problem) in cases {
        let (p, _) = with_archived(dir.path(), &format!("{name}.db"));
        sqlite3(&p, &sql);
        let j = Journal::open(&p, &Options::default()).unwrap();
        let bad = j.verify(None).unwrap().bad;
        let first = bad.first().unwrap_or_else(|| panic!("{name}: verify said the journal is intact"));
        assert_eq!(first.seq, if name == "moved" { 2 } else { 3 }, "{name}: {first:?}");
        assert!(first.problem.contains(problem), "{name}: {first:?}");
    }
}
