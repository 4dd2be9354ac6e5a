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
