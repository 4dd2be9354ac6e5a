//! The archive against real SQLite files: idempotence, verification on every read, prefixes and
//! collisions, retention, redaction, a 100 MB original, and writers in separate processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use rusqlite::params;
use salvage_ccr::{Ccr, CcrError, Retention};
use salvage_store::{Options, Store};
use salvage_types::CcrKey;
use salvage_types::FixedClock;
use std::time::Duration;

fn text(n: usize, seed: u64) -> Vec<u8> {
    // Realistic-ish text: words from a small vocabulary chosen by a xorshift generator.
    let words = [
        "the",
        "build",
        "failed",
        "in",
        "crates/store",
        "because",
        "SQLITE_BUSY",
        "was",
        "returned",
        "retry",
        "fn",
        "main()",
        "{",
        "}",
        "error:",
        "line",
        "42",
        "ok",
        "wal",
        "checkpoint",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(n);
    out
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("s.db"), &Options::default()).unwrap()
}

#[test]
fn put_is_idempotent_and_get_returns_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(1_000);
    let ccr = Ccr::new(store.conn(), &clock);
    let original = text(50_000, 7);
    let a = ccr.put(&original).unwrap();
    let b = ccr.put(&original).unwrap();
    assert!(a.inserted && !b.inserted);
    assert_eq!(a.key, CcrKey::of(&original));
    assert_eq!(ccr.stats().unwrap().entries, 1);
    for prefix_len in [16, 17, 40, 64] {
        assert_eq!(ccr.get(&a.key.hex()[..prefix_len]).unwrap(), original);
    }
    assert_eq!(ccr.get(&a.key.hex().to_uppercase()[..20]).unwrap(), original);
    let s = ccr.stats().unwrap();
    assert!(s.stored_bytes < s.raw_bytes / 2, "text compresses: {s:?}");
    // Tiny content is stored raw.
    let tiny = ccr.put(b"ok").unwrap();
    assert_eq!(ccr.get(&tiny.key.short()).unwrap(), b"ok");
    let codec: i64 = store
        .conn()
        .query_row("SELECT codec FROM ccr_blobs WHERE key = ?1", [&tiny.key.0[..]], |r| r.get(0))
        .unwrap();
    assert_eq!(codec, 0);
    // Unknown and malformed keys.
    assert!(matches!(ccr.get("0000000000000000"), Err(CcrError::NotFound { .. })));
    assert!(matches!(ccr.get("abc"), Err(CcrError::Key(_))));
}

/// Finding 10 (recall): an original over the handle's ceiling is refused from its recorded
/// length, before its content is read: with the content removed, the refusal is still the size's.
#[test]
fn an_original_over_the_ceiling_is_refused_before_its_content_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(1_000);
    let original = text(50_000, 3);
    let key = Ccr::new(store.conn(), &clock).put(&original).unwrap().key;
    store.conn().execute("UPDATE ccr_blobs SET data = NULL WHERE key = ?1", params![&key.0[..]]).unwrap();
    let small = Ccr::new(store.conn(), &clock).with_max_blob_bytes(10_000);
    let e = small.get(&key.hex()).unwrap_err();
    assert!(matches!(e, CcrError::TooLarge { len: 50_000, limit: 10_000, .. }), "{e}");
    // Within the ceiling the missing content is what is reported.
    let e = Ccr::new(store.conn(), &clock).get(&key.hex()).unwrap_err();
    assert!(matches!(e, CcrError::Corrupt { .. }), "{e}");
}

#[test]
fn a_flipped_byte_anywhere_is_detected_by_get_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(1_000);
    let ccr = Ccr::new(store.conn(), &clock);
    for (content, label) in [
        (text(20_000, 3), "zstd"),
        (b"incompressible?".to_vec(), "raw-tiny"),
        ((0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<u8>>(), "raw-random"),
    ] {
        let key = ccr.put(&content).unwrap().key;
        let data: Vec<u8> = store
            .conn()
            .query_row("SELECT data FROM ccr_blobs WHERE key = ?1", [&key.0[..]], |r| r.get(0))
            .unwrap();
        let positions = [0, 1, data.len() / 3, data.len() / 2, data.len() - 1];
        for pos in positions {
            let mut bad = data.clone();
            bad[pos] ^= 0x20;
            store
                .conn()
                .execute("UPDATE ccr_blobs SET data = ?1 WHERE key = ?2", params![bad, &key.0[..]])
                .unwrap();
            match ccr.get(&key.short()) {
                Err(CcrError::Corrupt { .. }) => {}
                other => panic!("{label} byte {pos}: {other:?}"),
            }
            let v = ccr.verify().unwrap();
            assert_eq!(v.bad.len(), 1, "{label} byte {pos}");
            assert_eq!(v.bad[0].0, key.hex());
        }
        store
            .conn()
            .execute("UPDATE ccr_blobs SET data = ?1 WHERE key = ?2", params![data, &key.0[..]])
            .unwrap();
        assert_eq!(ccr.get(&key.short()).unwrap(), content);
        // A tampered length is caught too.
        store
            .conn()
            .execute("UPDATE ccr_blobs SET raw_len = raw_len + 1 WHERE key = ?1", params![&key.0[..]])
            .unwrap();
        assert!(matches!(ccr.get(&key.short()), Err(CcrError::Corrupt { .. })), "{label} length");
        store
            .conn()
            .execute("UPDATE ccr_blobs SET raw_len = raw_len - 1 WHERE key = ?1", params![&key.0[..]])
            .unwrap();
    }
    assert!(ccr.verify().unwrap().bad.is_empty());
}

#[test]
fn a_shared_marker_prefix_is_reported_never_merged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(1_000);
    let ccr = Ccr::new(store.conn(), &clock);
    let a = ccr.put(&text(1000, 1)).unwrap().key;
    // Forge a second blob whose key shares the 16-hex prefix but differs after it.
    let mut forged = a.0;
    forged[31] ^= 0xff;
    let content = b"different content";
    store
        .conn()
        .execute(
            "INSERT INTO ccr_blobs (key, short, codec, raw_len, stored_len, data, created_at, last_access) VALUES (?1, ?2, 0, ?3, ?3, ?4, 0, 0)",
            params![&forged[..], a.short(), content.len() as i64, &content[..]],
        )
        .unwrap();
    match ccr.get(&a.short()) {
        Err(CcrError::Ambiguous { candidates, .. }) => assert_eq!(candidates.len(), 2),
        other => panic!("{other:?}"),
    }
    // The full key still resolves, and a put of A reports the collision.
    assert_eq!(ccr.get(&a.hex()).unwrap(), text(1000, 1));
    let again = ccr.put(&text(1000, 1)).unwrap();
    assert_eq!(again.collisions, vec![CcrKey(forged)]);
}

#[test]
fn retention_spares_referenced_and_young_blobs_and_evicts_lru_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(0);
    let ccr = Ccr::new(store.conn(), &clock);
    let mut keys = Vec::new();
    for i in 0..6u64 {
        clock.set_ms(i64::try_from(i).unwrap() * 10_000_000);
        keys.push(ccr.put(&text(10_000, i + 100)).unwrap().key);
    }
    ccr.reference(&keys[0], "session:a").unwrap();
    clock.set_ms(60_000_000);
    let each = ccr.stats().unwrap().stored_bytes / 6;
    // Capacity for ~3 blobs: evicts the least recently used unreferenced ones (1, 2, 3) but never 0.
    let policy = Retention {
        max_bytes: Some(each * 3 + each / 2),
        grace: Duration::from_secs(1),
        ..Retention::default()
    };
    let dry = ccr.gc(&Retention { dry_run: true, ..policy.clone() }).unwrap();
    assert_eq!(ccr.stats().unwrap().entries, 6, "a dry run deletes nothing");
    let r = ccr.gc(&policy).unwrap();
    assert_eq!((r.evicted, dry.evicted), (3, 3));
    assert_eq!(r.kept_referenced, 1);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(ccr.contains(k).unwrap(), !(1..=3).contains(&i), "blob {i}");
    }
    // Age: blob 4 (put at 40M) and 5 (put at 50M) are not accessed since; at 200M with a 120M
    // max age both go except a young one inside the grace period.
    clock.set_ms(200_000_000);
    let young = ccr.put(b"written by a writer still in flight -- keep me around please").unwrap().key;
    let r = ccr
        .gc(&Retention {
            max_age: Some(Duration::from_millis(120_000_000)),
            grace: Duration::from_secs(60),
            ..Retention::default()
        })
        .unwrap();
    assert_eq!(r.evicted, 2);
    assert!(ccr.contains(&young).unwrap() && ccr.contains(&keys[0]).unwrap());
    assert!(ccr.reference(&CcrKey::of(b"never stored"), "x").is_err());
}

#[test]
fn redaction_clears_content_and_keeps_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(5);
    let ccr = Ccr::new(store.conn(), &clock);
    let k = ccr.put(b"AKIAIOSFODNN7EXAMPLE is the key, do not leak it anywhere at all").unwrap().key;
    assert_eq!(ccr.redact(&k.short()).unwrap(), k);
    assert!(matches!(ccr.get(&k.short()), Err(CcrError::Redacted { .. })));
    assert!(ccr.contains(&k).unwrap());
    let data: Option<Vec<u8>> =
        store.conn().query_row("SELECT data FROM ccr_blobs", [], |r| r.get(0)).unwrap();
    assert_eq!(data, None);
    let v = ccr.verify().unwrap();
    assert_eq!((v.checked, v.redacted, v.bad.len()), (0, 1, 0));
}

#[test]
fn a_100_mb_original_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = salvage_ccr::SystemClock;
    let ccr = Ccr::new(store.conn(), &clock);
    let big = text(100 * 1024 * 1024, 99);
    let k = ccr.put(&big).unwrap().key;
    let back = ccr.get(&k.short()).unwrap();
    assert!(back == big);
    assert_eq!(ccr.verify().unwrap().checked, 1);
}

const CHILD_ENV: &str = "SALVAGE_CCR_CHILD";

/// The body of a child writer process: the test binary re-executed with `CHILD_ENV` set.
fn child_writer(spec: &str) {
    let (path, id) = spec.split_once('|').unwrap();
    let id: u64 = id.parse().unwrap();
    let store = Store::open(std::path::Path::new(path), &Options::default()).unwrap();
    let clock = salvage_ccr::SystemClock;
    let ccr = Ccr::new(store.conn(), &clock);
    for i in 0..200u64 {
        let content = text(2_000 + (i as usize % 7) * 500, id * 1_000 + i);
        let k = ccr.put(&content).unwrap().key;
        // Shared content written by every process at once.
        ccr.put(&text(3_000, 424_242 + i % 10)).unwrap();
        assert_eq!(ccr.get(&k.short()).unwrap(), content);
    }
}

#[test]
fn concurrent_writers_in_separate_processes_lose_nothing() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child_writer(&spec);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (1..=4u64)
        .map(|id| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "concurrent_writers_in_separate_processes_lose_nothing",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{}|{id}", path.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child writer failed");
    }
    let store = Store::open(&path, &Options::default()).unwrap();
    let clock = salvage_ccr::SystemClock;
    let ccr = Ccr::new(store.conn(), &clock);
    for id in 1..=4u64 {
        for i in 0..200u64 {
            let content = text(2_000 + (i as usize % 7) * 500, id * 1_000 + i);
            assert_eq!(ccr.get(&CcrKey::of(&content).short()).unwrap(), content, "child {id} item {i}");
        }
    }
    assert_eq!(ccr.stats().unwrap().entries, 4 * 200 + 10, "shared content stored once");
    assert!(ccr.verify().unwrap().bad.is_empty());
}

#[test]
fn grace_runs_from_each_write_not_from_an_earlier_time() {
    // A blob archived long ago and unreferenced is archived again by a writer in flight: the
    // grace period starts over at that write, so a concurrent gc does not evict it.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(0);
    let ccr = Ccr::new(store.conn(), &clock);
    let old = ccr.put(&text(5_000, 7)).unwrap().key;
    let other = ccr.put(&text(5_000, 8)).unwrap().key;
    clock.set_ms(10_000_000);
    assert!(!ccr.put(&text(5_000, 7)).unwrap().inserted);
    clock.set_ms(10_000_000 + 30_000);
    let policy = Retention { max_bytes: Some(0), grace: Duration::from_secs(60), ..Retention::default() };
    let r = ccr.gc(&policy).unwrap();
    assert_eq!(r.evicted, 1);
    assert!(ccr.contains(&old).unwrap(), "re-archived 30 s ago: inside its 60 s grace");
    assert!(!ccr.contains(&other).unwrap());
}

#[test]
fn row_values_a_damaged_file_can_hold_are_read_without_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let clock = FixedClock::at_ms(1_000);
    let ccr = Ccr::new(store.conn(), &clock);
    // `last_access` has no range constraint: the oldest representable time is "long ago", so a
    // read succeeds and refreshes it.
    let k = ccr.put(b"an original whose access time was written by someone else").unwrap().key;
    store
        .conn()
        .execute("UPDATE ccr_blobs SET last_access = ?1 WHERE key = ?2", params![i64::MIN, &k.0[..]])
        .unwrap();
    assert_eq!(ccr.get(&k.short()).unwrap(), b"an original whose access time was written by someone else");
    let access: i64 = store
        .conn()
        .query_row("SELECT last_access FROM ccr_blobs WHERE key = ?1", params![&k.0[..]], |r| r.get(0))
        .unwrap();
    assert_eq!(access, 1_000);

    // `stored_len` lengths that break the schema's CHECK (a file edited with the constraints off):
    // their sum fits an i64 in row order, but subtracting the negative one first would not. The
    // collection evicts all three by age and counts the impossible length as freeing nothing.
    store.conn().execute("DELETE FROM ccr_blobs", []).unwrap();
    let keys: Vec<CcrKey> =
        (0..3u64).map(|i| ccr.put(format!("blob number {i} of three").as_bytes()).unwrap().key).collect();
    store.conn().execute_batch("PRAGMA ignore_check_constraints = ON").unwrap();
    for (k, (len, access)) in keys.iter().zip([(-i64::MAX, 1), (i64::MAX, 2), (i64::MAX, 3)]) {
        store
            .conn()
            .execute(
                "UPDATE ccr_blobs SET stored_len = ?1, last_access = ?2, created_at = 0 WHERE key = ?3",
                params![len, access, &k.0[..]],
            )
            .unwrap();
    }
    clock.set_ms(10_000_000);
    let r = ccr
        .gc(&Retention {
            max_age: Some(Duration::from_millis(1_000)),
            grace: Duration::from_secs(1),
            ..Retention::default()
        })
        .unwrap();
    assert_eq!((r.evicted, r.freed_bytes, r.remaining), (3, 2 * u64::try_from(i64::MAX).unwrap(), 0));
}
