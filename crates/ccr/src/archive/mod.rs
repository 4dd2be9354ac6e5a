//! The archive handle: put, get-and-verify and references over the `ccr_blobs` table; its
//! upkeep (totals, verification, retention, redaction) is in `maintenance` and the stored form
//! (raw or zstd, verified on decode) in `codec`.

mod codec;
mod encode;
mod error;
mod maintenance;

pub use codec::{decode, LEVEL, TINY};
pub use error::CcrError;
pub use maintenance::{GcReport, Retention, Stats, VerifyReport};

use codec::key_from_blob;
use encode::Prepared;
pub use encode::{FRAME, PARALLEL_MIN};
use error::sql;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};
use salvage_types::ccr_key::{CcrKey, KeyPrefix, MARKER_HEX_LEN};
// The clock is the vocabulary's (defined once in salvage-types), re-exported for callers of `Ccr::new`.
pub use salvage_types::clock::{Clock, SystemClock};

/// The largest original this build will decompress (a tampered length cannot exhaust memory).
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 2 << 30;
/// `last_access` is refreshed at most this often per blob, so reads rarely write.
const ACCESS_GRANULARITY_MS: i64 = 3_600_000;

/// What a put did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutOutcome {
    /// The key of the original.
    pub key: CcrKey,
    /// False when the content was already archived (idempotent put).
    pub inserted: bool,
    /// Other archived contents whose key shares the 16-hex marker prefix: the marker is
    /// ambiguous for them and a recall must use more characters.
    pub collisions: Vec<CcrKey>,
}

/// The marker key a prefix is looked up by (as a range of keys, [`key_range`]): its first 16 hex
/// characters. [`KeyPrefix::parse`] guarantees at least 16 ASCII hex characters; were it ever
/// shorter, it names an empty range and the lookup finds nothing.
fn short_of(p: &KeyPrefix) -> &str {
    p.as_str().get(..MARKER_HEX_LEN).unwrap_or(p.as_str())
}

/// The smallest and the largest key whose first 16 hex characters are `short`: the range of the
/// unique key index a marker key names (no index of its own: migration 0006). A `short` that is
/// not 16 hex characters gives an empty range.
fn key_range(short: &str) -> (CcrKey, CcrKey) {
    let hex = short.len() == MARKER_HEX_LEN && short.bytes().all(|b| b.is_ascii_hexdigit());
    match u64::from_str_radix(short, 16).ok().filter(|_| hex) {
        Some(p) => {
            let (mut lo, mut hi) = ([0u8; 32], [0xffu8; 32]);
            for (l, (h, b)) in lo.iter_mut().zip(hi.iter_mut().zip(p.to_be_bytes())) {
                (*l, *h) = (b, b);
            }
            (CcrKey(lo), CcrKey(hi))
        }
        None => (CcrKey([0xff; 32]), CcrKey([0; 32])),
    }
}

/// A row read by `get`: its id and access time, and its decoded, verified content.
struct Opened {
    id: i64,
    last_access: i64,
    bytes: Result<Vec<u8>, CcrError>,
}

/// A handle on the archive over a connection (which may be inside the caller's transaction).
pub struct Ccr<'c> {
    conn: &'c Connection,
    clock: &'c dyn Clock,
    max_blob_bytes: u64,
}

/// Originals hashed and compressed, ready for [`Ccr::put_staged`] ([`Ccr::stage_keyed`]).
pub struct Staged<'b>(Vec<Prepared<'b>>);

impl Staged<'_> {
    /// How many originals it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys of the originals, in order.
    pub fn keys(&self) -> impl Iterator<Item = CcrKey> + '_ {
        self.0.iter().map(|p| p.key)
    }
}

/// Refuses an original larger than `limit`.
fn check_sizes(lens: impl Iterator<Item = usize>, limit: u64) -> Result<(), CcrError> {
    for len in lens {
        let len = len as u64;
        if len > limit {
            return Err(CcrError::TooLarge { key: "put".into(), len, limit });
        }
    }
    Ok(())
}

/// Checks the sizes, then hashes (where no key came) and compresses.
fn stage<'b>(items: &[(Option<CcrKey>, &'b [u8])], limit: u64) -> Result<Staged<'b>, CcrError> {
    check_sizes(items.iter().map(|(_, b)| b.len()), limit)?;
    encode::prepare(items).map(Staged)
}

impl<'c> Ccr<'c> {
    /// A handle with the default ceiling.
    pub fn new(conn: &'c Connection, clock: &'c dyn Clock) -> Ccr<'c> {
        Ccr { conn, clock, max_blob_bytes: DEFAULT_MAX_BLOB_BYTES }
    }

    /// Sets the largest original accepted by `put` and returned by `get`.
    pub fn with_max_blob_bytes(mut self, limit: u64) -> Ccr<'c> {
        self.max_blob_bytes = limit;
        self
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction unless the caller already holds one.
    fn write<T>(&self, op: &'static str, f: impl FnOnce() -> Result<T, CcrError>) -> Result<T, CcrError> {
        if !self.conn.is_autocommit() {
            return f();
        }
        // Cached like every other statement: a put of a few KB costs little more than these.
        let run =
            |stmt: &str| self.conn.prepare_cached(stmt).and_then(|mut st| st.execute([])).map_err(sql(op));
        run("BEGIN IMMEDIATE")?;
        match f() {
            Ok(v) => {
                run("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Runs `f` in one read transaction (a consistent view, and no write lock: it works on a
    /// read-only connection), unless a transaction is already open.
    pub(crate) fn read<T>(
        &self,
        op: &'static str,
        f: impl FnOnce() -> Result<T, CcrError>,
    ) -> Result<T, CcrError> {
        if !self.conn.is_autocommit() {
            return f();
        }
        self.conn.execute_batch("BEGIN DEFERRED").map_err(sql(op))?;
        let out = f();
        // A read transaction has nothing to keep: ending it cannot lose anything.
        let _ = self.conn.execute_batch("COMMIT");
        out
    }

    /// Archives `bytes`: idempotent, keyed by BLAKE3 of the original.
    pub fn put(&self, bytes: &[u8]) -> Result<PutOutcome, CcrError> {
        self.put_prepared(&[(None, bytes)])?
            .pop()
            .ok_or_else(|| CcrError::Compress(std::io::Error::other("nothing put")))
    }

    /// Archives several originals in one transaction (the caller's when it holds one), hashing
    /// and compressing them on every core first; the outcomes are in input order.
    pub fn put_all<B: AsRef<[u8]>>(&self, items: &[B]) -> Result<Vec<PutOutcome>, CcrError> {
        let items: Vec<(Option<CcrKey>, &[u8])> = items.iter().map(|b| (None, b.as_ref())).collect();
        self.put_prepared(&items)
    }

    /// [`Ccr::put_all`] for originals whose key the caller already computed with
    /// [`CcrKey::of`]: they are not hashed again. A key that is not the hash of its bytes is
    /// refused in debug builds and, in any build, never returned by a read (every read verifies).
    pub fn put_all_keyed<B: AsRef<[u8]>>(&self, items: &[(CcrKey, B)]) -> Result<Vec<PutOutcome>, CcrError> {
        let items: Vec<(Option<CcrKey>, &[u8])> = items.iter().map(|(k, b)| (Some(*k), b.as_ref())).collect();
        self.put_prepared(&items)
    }

    fn put_prepared(&self, items: &[(Option<CcrKey>, &[u8])]) -> Result<Vec<PutOutcome>, CcrError> {
        // Compress before taking the write lock, so concurrent writers hold it briefly.
        let staged = stage(items, self.max_blob_bytes)?;
        self.put_staged(&staged)
    }

    /// Inserts originals [`Ccr::stage_keyed`] hashed and compressed, in one transaction (the
    /// caller's when it holds one); the outcomes are in input order.
    pub fn put_staged(&self, staged: &Staged<'_>) -> Result<Vec<PutOutcome>, CcrError> {
        check_sizes(staged.0.iter().map(|p| p.raw_len), self.max_blob_bytes)?;
        let now = self.clock.now_ms();
        self.write("put", || staged.0.iter().map(|p| self.insert(p, now)).collect())
    }

    /// [`Ccr::stage_keyed`] of originals the caller gives up: each compressed original is
    /// dropped as soon as it is compressed (only its stored form is held until the insert), and
    /// one stored raw is kept as it is, not copied.
    pub fn stage_owned(
        items: Vec<(CcrKey, Vec<u8>)>,
        max_blob_bytes: u64,
    ) -> Result<Staged<'static>, CcrError> {
        let detached: Vec<Prepared<'static>> =
            Ccr::stage_keyed(&items, max_blob_bytes)?.0.into_iter().map(Prepared::detach).collect();
        Ok(Staged(detached.into_iter().zip(items).map(|(p, (_, original))| p.attach(original)).collect()))
    }

    /// The work of a [`Ccr::put_all_keyed`] that needs no connection: each original compressed
    /// (on every core), with the key that came with it. A writer stages before it takes the
    /// write lock and inserts with [`Ccr::put_staged`] under it, so another writer of the same
    /// file does not wait for the compression. Originals over `max_blob_bytes` are refused here
    /// already, before any work.
    pub fn stage_keyed<B: AsRef<[u8]>>(
        items: &[(CcrKey, B)],
        max_blob_bytes: u64,
    ) -> Result<Staged<'_>, CcrError> {
        let items: Vec<(Option<CcrKey>, &[u8])> = items.iter().map(|(k, b)| (Some(*k), b.as_ref())).collect();
        stage(&items, max_blob_bytes)
    }

    fn insert(&self, p: &Prepared<'_>, now: i64) -> Result<PutOutcome, CcrError> {
        let key = p.key;
        let short = key.short();
        let data = p.data();
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO ccr_blobs (key, short, codec, raw_len, stored_len, data, created_at, last_access)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT (key) DO NOTHING",
            )
            .and_then(|mut st| {
                st.execute(params![
                    &key.0[..],
                    short,
                    p.codec,
                    i64::try_from(p.raw_len).unwrap_or(i64::MAX),
                    i64::try_from(data.len()).unwrap_or(i64::MAX),
                    data,
                    now
                ])
            })
            .map_err(sql("put"))?
            == 1;
        if !inserted {
            // Archiving existing content again is a write in flight too: its grace period
            // starts over, so `gc` cannot evict it before the writer references it.
            self.conn
                .prepare_cached("UPDATE ccr_blobs SET last_access = ?2 WHERE key = ?1 AND last_access < ?2")
                .and_then(|mut st| st.execute(params![&key.0[..], now]))
                .map_err(sql("put"))?;
        }
        let collisions = self.by_short(&short)?.into_iter().map(|(_, k)| k).filter(|k| *k != key).collect();
        Ok(PutOutcome { key, inserted, collisions })
    }

    fn by_short(&self, short: &str) -> Result<Vec<(i64, CcrKey)>, CcrError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, key FROM ccr_blobs WHERE key BETWEEN ?1 AND ?2")
            .map_err(sql("lookup"))?;
        let (lo, hi) = key_range(short);
        let rows = st
            .query_map(params![&lo.0[..], &hi.0[..]], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
            .map_err(sql("lookup"))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, k) = row.map_err(sql("lookup"))?;
            out.push((id, key_from_blob(k)?));
        }
        Ok(out)
    }

    /// Resolves a 16-to-64-hex prefix to the one full key it names.
    pub fn resolve(&self, prefix: &str) -> Result<CcrKey, CcrError> {
        self.resolve_row(prefix).map(|(_, k)| k)
    }

    fn resolve_row(&self, prefix: &str) -> Result<(i64, CcrKey), CcrError> {
        let p = KeyPrefix::parse(prefix)?;
        let matches: Vec<(i64, CcrKey)> =
            self.by_short(short_of(&p))?.into_iter().filter(|(_, k)| p.matches(k)).collect();
        match matches.as_slice() {
            [] => Err(CcrError::NotFound { prefix: p.to_string() }),
            [one] => Ok(*one),
            many => Err(CcrError::Ambiguous {
                prefix: p.to_string(),
                candidates: many.iter().map(|(_, k)| k.hex()).collect(),
            }),
        }
    }

    /// Gets an original by key or unique prefix, verified against its hash.
    pub fn get(&self, prefix: &str) -> Result<Vec<u8>, CcrError> {
        let p = KeyPrefix::parse(prefix)?;
        // One query fetches the candidates with their content (almost always exactly one row);
        // the content is decoded from SQLite's buffer, not from a copy of it.
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT key, id, codec, raw_len, data, last_access, redacted_at FROM ccr_blobs WHERE key BETWEEN ?1 AND ?2",
            )
            .map_err(sql("get"))?;
        let (lo, hi) = key_range(short_of(&p));
        let mut rows = st.query(params![&lo.0[..], &hi.0[..]]).map_err(sql("get"))?;
        let mut hit: Option<Opened> = None;
        let mut candidates: Vec<String> = Vec::new();
        while let Some(r) = rows.next().map_err(sql("get"))? {
            let key = key_from_blob(r.get(0).map_err(sql("get"))?)?;
            if !p.matches(&key) {
                continue;
            }
            candidates.push(key.hex());
            if hit.is_none() {
                hit = Some(self.open(key, r)?);
            }
        }
        drop(rows);
        match (hit, candidates.len()) {
            (None, _) => Err(CcrError::NotFound { prefix: p.to_string() }),
            (Some(opened), 1) => self.touched(opened),
            (Some(_), _) => Err(CcrError::Ambiguous { prefix: p.to_string(), candidates }),
        }
    }

    /// Decodes and verifies the row's content (columns 1.. are id, codec, raw_len, data,
    /// last_access, redacted_at).
    fn open(&self, key: CcrKey, r: &rusqlite::Row<'_>) -> Result<Opened, CcrError> {
        let id: i64 = r.get(1).map_err(sql("get"))?;
        let codec: i64 = r.get(2).map_err(sql("get"))?;
        let raw_len: i64 = r.get(3).map_err(sql("get"))?;
        let last_access: i64 = r.get(5).map_err(sql("get"))?;
        let redacted_at: Option<i64> = r.get(6).map_err(sql("get"))?;
        let corrupt = |reason: &str| CcrError::Corrupt { key: key.hex(), reason: reason.into() };
        let bytes = if redacted_at.is_some() {
            Err(CcrError::Redacted { key: key.hex() })
        } else if let Some(len) = u64::try_from(raw_len).ok().filter(|&n| n > self.max_blob_bytes) {
            // Refused from its recorded length, before SQLite hands over the content (an
            // overflow chain the size of the original).
            Err(CcrError::TooLarge { key: key.hex(), len, limit: self.max_blob_bytes })
        } else {
            match r.get_ref(4).map_err(sql("get"))? {
                ValueRef::Blob(data) => u64::try_from(raw_len)
                    .map_err(|_| corrupt("negative length"))
                    .and_then(|raw_len| decode(&key, codec, raw_len, data, self.max_blob_bytes)),
                ValueRef::Null => Err(corrupt("content missing")),
                _ => Err(corrupt("content is not a blob")),
            }
        };
        Ok(Opened { id, last_access, bytes })
    }

    /// The content read, after refreshing its access time when it is old.
    fn touched(&self, opened: Opened) -> Result<Vec<u8>, CcrError> {
        let bytes = opened.bytes?;
        let now = self.clock.now_ms();
        // `last_access` is a row value (any integer a damaged or hand-edited file holds): an
        // access time far in the past saturates to "long ago" and is refreshed.
        if now.saturating_sub(opened.last_access) > ACCESS_GRANULARITY_MS {
            // Best effort: a busy database must not fail a read.
            let _ = self
                .conn
                .prepare_cached("UPDATE ccr_blobs SET last_access = ?1 WHERE id = ?2")
                .and_then(|mut st| st.execute(params![now, opened.id]));
        }
        Ok(bytes)
    }

    /// Gets an original by full key, verified.
    pub fn get_key(&self, key: &CcrKey) -> Result<Vec<u8>, CcrError> {
        let id: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM ccr_blobs WHERE key = ?1")
            .and_then(|mut st| st.query_row([&key.0[..]], |r| r.get(0)).optional())
            .map_err(sql("get"))?;
        match id {
            Some(id) => self.get_row(id, key),
            None => Err(CcrError::NotFound { prefix: key.hex() }),
        }
    }

    /// True when a blob with this full key is archived (redacted or not).
    pub fn contains(&self, key: &CcrKey) -> Result<bool, CcrError> {
        self.conn
            .prepare_cached("SELECT 1 FROM ccr_blobs WHERE key = ?1")
            .and_then(|mut st| st.exists([&key.0[..]]))
            .map_err(sql("contains"))
    }

    fn get_row(&self, id: i64, key: &CcrKey) -> Result<Vec<u8>, CcrError> {
        let opened = self
            .conn
            .prepare_cached(
                "SELECT key, id, codec, raw_len, data, last_access, redacted_at FROM ccr_blobs WHERE id = ?1",
            )
            .and_then(|mut st| st.query_row([id], |r| Ok(self.open(*key, r))))
            .map_err(sql("get"))??;
        self.touched(opened)
    }

    /// Records that `owner` (e.g. a journal session) references the blob: it is never evicted.
    pub fn reference(&self, key: &CcrKey, owner: &str) -> Result<(), CcrError> {
        self.write("reference", || {
            self.conn
                .prepare_cached(
                    "INSERT INTO ccr_refs (blob_id, owner) SELECT id, ?2 FROM ccr_blobs WHERE key = ?1
                     ON CONFLICT DO NOTHING",
                )
                .and_then(|mut st| st.execute(params![&key.0[..], owner]))
                .map_err(sql("reference"))
                .and_then(|n| {
                    if n == 0 && !self.contains(key)? {
                        Err(CcrError::NotFound { prefix: key.hex() })
                    } else {
                        Ok(())
                    }
                })
        })
    }
}

#[cfg(test)]
mod range_tests {
    use super::*;

    #[test]
    fn the_range_of_a_marker_key_holds_exactly_the_keys_it_prefixes() {
        let k = CcrKey::of(b"some original");
        let (lo, hi) = key_range(&k.short());
        assert!(lo.0 <= k.0 && k.0 <= hi.0);
        assert_eq!((&lo.0[..8], &hi.0[..8]), (&k.0[..8], &k.0[..8]));
        assert!(lo.0[8..].iter().all(|b| *b == 0) && hi.0[8..].iter().all(|b| *b == 0xff));
        // Upper case names the same range; anything else names none.
        assert_eq!(key_range(&k.short().to_uppercase()), (lo, hi));
        for bad in ["", "0123", "+123456789abcdef", "0123456789abcdefg", "0123456789abcdeg"] {
            let (lo, hi) = key_range(bad);
            assert!(lo.0 > hi.0, "{bad:?} named a range");
        }
    }
}
