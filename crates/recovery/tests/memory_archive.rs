//! The in-memory archive: a handed-over buffer is held like a copied one, and an original is
//! found by its full key only (a key sharing the 16-hex short key is another content).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_types::CcrKey;

#[test]
fn put_owned_holds_what_put_holds_under_the_same_key() {
    let original = b"a transcript of dropped messages".to_vec();
    let mut copied = MemoryArchive::new();
    let mut moved = MemoryArchive::new();
    let k = copied.put(&original).unwrap();
    assert_eq!(moved.put_owned(original.clone()).unwrap(), k);
    assert_eq!(k, CcrKey::of(&original));
    assert_eq!(moved.get(&k.short()), Some(original.clone()));
    assert_eq!(moved.keyed().collect::<Vec<_>>(), vec![(k, original.as_slice())]);
    // Idempotent: the same content again is one blob.
    moved.put_owned(original.clone()).unwrap();
    assert_eq!(moved.len(), 1);
}

#[test]
fn an_original_is_found_by_its_full_key_only() {
    let mut mem = MemoryArchive::new();
    let k = mem.put(b"original").unwrap();
    assert_eq!(mem.original(&k), Some(&b"original"[..]));
    // Same short key (first 8 bytes), different content hash: not this original.
    let mut other = k;
    other.0[31] ^= 1;
    assert_eq!(other.short(), k.short());
    assert_eq!(mem.original(&other), None);
}

#[test]
fn a_transcript_is_archived_and_recorded_once() {
    let mut mem = MemoryArchive::new();
    let mut a = Archiver::new(Some(&mut mem));
    let m1 = a.put_transcript(&["one", "two"]).unwrap().unwrap();
    let m2 = a.put_transcript(&["one", "two"]).unwrap().unwrap();
    assert_eq!(m1, m2);
    assert_eq!(a.keys.len(), 1);
    let k = a.keys[0];
    drop(a);
    assert_eq!(mem.original(&k), Some(&br#"["one","two"]"#[..]));
    // CCR off: nothing archived, no marker.
    assert_eq!(Archiver::new(None).put_transcript(&["x"]).unwrap(), None);
}
