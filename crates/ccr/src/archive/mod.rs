//! The archive handle: put, get-and-verify and references over the `ccr_blobs` table; its
//! upkeep (totals, verification, retention, redaction) is in `maintenance` and the stored form
//! (raw or zstd, verified on decode) in `codec`.

mod codec;
mod error;
mod maintenance;

pub use codec::{decode, LEVEL, TINY};
pub use error::CcrError;
pub use maintenance::{GcReport, Retention, Stats, VerifyReport};

use codec::{compress, key_from_blob, CODEC_RAW, CODEC_ZSTD};
use error::sql;
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

/// The value of the `short` column a prefix is looked up by: its first 16 hex characters.
/// [`KeyPrefix::parse`] guarantees at least 16 ASCII hex characters; were it ever shorter, the
/// whole prefix matches no 16-character `short` and the lookup finds nothing.
fn short_of(p: &KeyPrefix) -> &str {
    p.as_str().get(..MARKER_HEX_LEN).unwrap_or(p.as_str())
}

/// id, key, codec, raw_len, data, last_access, redacted_at.
type BlobRow = (i64, CcrKey, i64, i64, Option<Vec<u8>>, i64, Option<i64>);

/// A handle on the archive over a connection (which may be inside the caller's transaction).
pub struct Ccr<'c> {
    conn: &'c Connection,
    clock: &'c dyn Clock,
    max_blob_bytes: u64,
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
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(sql(op))?;
        match f() {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(sql(op))?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Archives `bytes`: idempotent, keyed by BLAKE3 of the original.
    pub fn put(&self, bytes: &[u8]) -> Result<PutOutcome, CcrError> {
        let key = CcrKey::of(bytes);
        let raw_len = bytes.len() as u64;
        if raw_len > self.max_blob_bytes {
            return Err(CcrError::TooLarge { key: "put".into(), len: raw_len, limit: self.max_blob_bytes });
        }
        let short = key.short();
        // Compress before taking the write lock, so concurrent writers hold it briefly.
        let (codec, stored) = if bytes.len() < TINY {
            (CODEC_RAW, None)
        } else {
            let z = compress(bytes)?;
            if z.len() < bytes.len().saturating_sub(bytes.len() / 32) {
                (CODEC_ZSTD, Some(z))
            } else {
                (CODEC_RAW, None)
            }
        };
        let data: &[u8] = stored.as_deref().unwrap_or(bytes);
        let now = self.clock.now_ms();
        self.write("put", || {
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
                        codec,
                        i64::try_from(raw_len).unwrap_or(i64::MAX),
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
        })
    }

    fn by_short(&self, short: &str) -> Result<Vec<(i64, CcrKey)>, CcrError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, key FROM ccr_blobs WHERE short = ?1")
            .map_err(sql("lookup"))?;
        let rows = st
            .query_map([short], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
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
        // One query fetches the candidates with their content (almost always exactly one row).
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT id, key, codec, raw_len, data, last_access, redacted_at FROM ccr_blobs WHERE short = ?1",
            )
            .map_err(sql("get"))?;
        let mut rows = st.query([short_of(&p)]).map_err(sql("get"))?;
        let mut hit: Option<BlobRow> = None;
        let mut candidates: Vec<String> = Vec::new();
        while let Some(r) = rows.next().map_err(sql("get"))? {
            let key = key_from_blob(r.get(1).map_err(sql("get"))?)?;
            if !p.matches(&key) {
                continue;
            }
            candidates.push(key.hex());
            if hit.is_none() {
                hit = Some((
                    r.get(0).map_err(sql("get"))?,
                    key,
                    r.get(2).map_err(sql("get"))?,
                    r.get(3).map_err(sql("get"))?,
                    r.get(4).map_err(sql("get"))?,
                    r.get(5).map_err(sql("get"))?,
                    r.get(6).map_err(sql("get"))?,
                ));
            }
        }
        match (hit, candidates.len()) {
            (None, _) => Err(CcrError::NotFound { prefix: p.to_string() }),
            (Some(row), 1) => self.finish_get(row),
            (Some(_), _) => Err(CcrError::Ambiguous { prefix: p.to_string(), candidates }),
        }
    }

    #[allow(clippy::type_complexity)]
    fn finish_get(
        &self,
        (id, key, codec, raw_len, data, last_access, redacted_at): (
            i64,
            CcrKey,
            i64,
            i64,
            Option<Vec<u8>>,
            i64,
            Option<i64>,
        ),
    ) -> Result<Vec<u8>, CcrError> {
        if redacted_at.is_some() {
            return Err(CcrError::Redacted { key: key.hex() });
        }
        let data =
            data.ok_or_else(|| CcrError::Corrupt { key: key.hex(), reason: "content missing".into() })?;
        let raw_len = u64::try_from(raw_len)
            .map_err(|_| CcrError::Corrupt { key: key.hex(), reason: "negative length".into() })?;
        let bytes = match codec {
            CODEC_RAW if raw_len <= self.max_blob_bytes => {
                // Raw content: verify in place and hand the buffer over without a copy.
                if data.len() as u64 != raw_len || CcrKey::of(&data) != key {
                    return Err(CcrError::Corrupt {
                        key: key.hex(),
                        reason: "content does not hash to its key".into(),
                    });
                }
                data
            }
            _ => decode(&key, codec, raw_len, &data, self.max_blob_bytes)?,
        };
        let now = self.clock.now_ms();
        // `last_access` is a row value (any integer a damaged or hand-edited file holds): an
        // access time far in the past saturates to "long ago" and is refreshed.
        if now.saturating_sub(last_access) > ACCESS_GRANULARITY_MS {
            // Best effort: a busy database must not fail a read.
            let _ =
                self.conn.execute("UPDATE ccr_blobs SET last_access = ?1 WHERE id = ?2", params![now, id]);
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
        let row = self
            .conn
            .prepare_cached(
                "SELECT codec, raw_len, data, last_access, redacted_at FROM ccr_blobs WHERE id = ?1",
            )
            .and_then(|mut st| {
                st.query_row([id], |r| Ok((id, *key, r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            })
            .map_err(sql("get"))?;
        self.finish_get(row)
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
