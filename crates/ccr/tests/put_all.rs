//! Several originals in one put: compressed in parallel, originals over a frame cut into frames,
//! keys the caller computed taken as given (and a wrong one refused or never returned).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use rusqlite::params;
use salvage_ccr::{Ccr, CcrError, FRAME};
use salvage_store::{Options, Store};
use salvage_types::{CcrKey, FixedClock};

/// Compressible text that never repeats exactly (so each frame has something to do).
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(format!("line {} of the log: ok\n", x % 5000).as_bytes());
    }
    out.truncate(n);
    out
}

/// Runs `test` on the archive of a fresh file.
fn with_ccr(test: impl FnOnce(&Store, &Ccr<'_>)) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db"), &Options::default()).unwrap();
    let clock = FixedClock::at_ms(1_000);
    test(&store, &Ccr::new(store.conn(), &clock));
}

fn stored(store: &Store, key: &CcrKey) -> (i64, Vec<u8>) {
    store
        .conn()
        .query_row("SELECT codec, data FROM ccr_blobs WHERE key = ?1", [&key.0[..]], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

#[test]
fn put_all_stores_every_original_once_in_input_order() {
    with_ccr(|_, ccr| {
        let items =
            vec![text(3 * FRAME + 12_345, 1), b"tiny".to_vec(), text(40_000, 2), text(40_000, 2), Vec::new()];
        let out = ccr.put_all(&items).unwrap();
        assert_eq!(out.len(), items.len());
        for (o, it) in out.iter().zip(&items) {
            assert_eq!(o.key, CcrKey::of(it));
            assert_eq!(ccr.get(&o.key.hex()).unwrap(), *it);
        }
        assert_eq!(out.iter().map(|o| o.inserted).collect::<Vec<_>>(), [true, true, true, false, true]);
        assert_eq!(ccr.stats().unwrap().entries, 4);
        // Idempotent against what an earlier put stored.
        assert!(!ccr.put(&items[0]).unwrap().inserted);
        assert!(ccr.verify().unwrap().bad.is_empty());
    });
}

#[test]
fn an_original_over_a_frame_is_stored_as_frames_and_each_is_verified() {
    with_ccr(|store, ccr| {
        let big = text(2 * FRAME + 777, 5);
        let key = ccr.put(&big).unwrap().key;
        let (codec, data) = stored(store, &key);
        assert_eq!(codec, 1);
        // Three zstd frames, each starting with the zstd magic number, in the original's order.
        let magic = [0x28, 0xb5, 0x2f, 0xfd];
        let starts: Vec<usize> =
            data.windows(4).enumerate().filter(|(_, w)| *w == magic).map(|(i, _)| i).collect();
        assert!(starts.len() >= 3 && starts[0] == 0, "frames at {starts:?}");
        assert_eq!(ccr.get(&key.short()).unwrap(), big);
        // A flipped byte in the last frame, or a frame dropped, is caught on read and by verify.
        for bad in [
            {
                let mut d = data.clone();
                let last = d.len() - 5;
                d[last] ^= 0x01;
                d
            },
            data[..starts[2]].to_vec(),
        ] {
            store
                .conn()
                .execute("UPDATE ccr_blobs SET data = ?1 WHERE key = ?2", params![bad, &key.0[..]])
                .unwrap();
            assert!(matches!(ccr.get(&key.short()), Err(CcrError::Corrupt { .. })));
            assert_eq!(ccr.verify().unwrap().bad.len(), 1);
        }
    });
}

#[test]
fn a_keyed_put_takes_the_callers_key() {
    with_ccr(|_, ccr| {
        let items: Vec<Vec<u8>> = (0..6).map(|i| text(100_000 + i * 1000, i as u64)).collect();
        let keyed: Vec<(CcrKey, &[u8])> = items.iter().map(|b| (CcrKey::of(b), b.as_slice())).collect();
        let out = ccr.put_all_keyed(&keyed).unwrap();
        for ((k, b), o) in keyed.iter().zip(&out) {
            assert_eq!(o.key, *k);
            assert_eq!(ccr.get(&k.short()).unwrap(), *b);
        }
    });
}

/// Debug builds (the tests) hash a keyed original anyway and refuse a key that is not its hash:
/// nothing is stored, not even the other originals of the put.
#[cfg(debug_assertions)]
#[test]
fn a_wrong_key_is_refused() {
    with_ccr(|_, ccr| {
        let a = text(50_000, 1);
        let b = text(50_000, 2);
        let wrong = [(CcrKey::of(&a), a.as_slice()), (CcrKey::of(&a), b.as_slice())];
        match ccr.put_all_keyed(&wrong) {
            Err(CcrError::Corrupt { key, .. }) => assert_eq!(key, CcrKey::of(&a).hex()),
            other => panic!("a wrong key was accepted: {other:?}"),
        }
        assert_eq!(ccr.stats().unwrap().entries, 0);
    });
}

/// Whatever a build checks at put, a read never returns content under a key it does not hash
/// to: a row whose key was wrong from the start (here forged) is reported corrupt.
#[test]
fn content_stored_under_a_wrong_key_is_never_returned() {
    with_ccr(|store, ccr| {
        let a = text(3 * FRAME / 2, 1);
        let b = text(3 * FRAME / 2, 2);
        let ka = ccr.put(&a).unwrap().key;
        let kb = ccr.put(&b).unwrap().key;
        let (_, data_b) = stored(store, &kb);
        store
            .conn()
            .execute("UPDATE ccr_blobs SET data = ?1 WHERE key = ?2", params![data_b, &ka.0[..]])
            .unwrap();
        assert!(matches!(ccr.get(&ka.short()), Err(CcrError::Corrupt { .. })));
        assert_eq!(ccr.get(&kb.short()).unwrap(), b);
    });
}

/// Noise no compressor can shrink (stored raw).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Staging (a writer compresses before it takes the write lock) stores what a put stores: a tiny
/// original and an incompressible one raw, the rest compressed (one over a frame in frames), each
/// read back whole under the caller's key; an original over the ceiling is refused at staging.
#[test]
fn staged_originals_are_stored_as_a_put_stores_them() {
    with_ccr(|store, ccr| {
        let items = [b"tiny".to_vec(), noise(20_000, 3), text(100_000, 4), text(3 * FRAME / 2, 5)];
        let keyed: Vec<(CcrKey, Vec<u8>)> = items.iter().map(|b| (CcrKey::of(b), b.clone())).collect();
        let staged = Ccr::stage_owned(keyed, salvage_ccr::archive::DEFAULT_MAX_BLOB_BYTES).unwrap();
        assert_eq!(staged.len(), 4);
        let out = ccr.put_staged(&staged).unwrap();
        let codecs: Vec<i64> = items
            .iter()
            .zip(&out)
            .map(|(b, o)| {
                assert_eq!(o.key, CcrKey::of(b), "the caller's key");
                assert!(o.inserted);
                assert_eq!(ccr.get(&o.key.hex()).unwrap(), *b, "read back whole");
                stored(store, &o.key).0
            })
            .collect();
        assert_eq!(codecs, vec![0, 0, 1, 1], "raw, raw, zstd, zstd");
        let big = vec![(CcrKey::of(b"0123456789"), b"0123456789".to_vec())];
        match Ccr::stage_owned(big, 9) {
            Err(CcrError::TooLarge { len: 10, limit: 9, .. }) => {}
            other => panic!("an original over the ceiling was staged: {:?}", other.map(|s| s.len())),
        }
        // The ceiling of the handle that inserts holds too.
        let small = [(CcrKey::of(&items[2]), items[2].clone())];
        let staged = Ccr::stage_keyed(&small, salvage_ccr::archive::DEFAULT_MAX_BLOB_BYTES).unwrap();
        let clock = FixedClock::at_ms(2_000);
        let strict = Ccr::new(store.conn(), &clock).with_max_blob_bytes(1_000);
        assert!(matches!(strict.put_staged(&staged), Err(CcrError::TooLarge { .. })));
    });
}
