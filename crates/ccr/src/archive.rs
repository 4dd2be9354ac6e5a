//! Put, get-and-verify, stats, verify, retention and redaction over the `ccr_blobs` table.

use rusqlite::{params, Connection, OptionalExtension};
use salvage_types::ccr_key::{CcrKey, KeyPrefix, KeyPrefixError, MARKER_HEX_LEN};
// The clock is the vocabulary's (defined once in salvage-types), re-exported for callers of `Ccr::new`.
pub use salvage_types::clock::{Clock, SystemClock};
use std::cell::RefCell;
use std::time::Duration;

/// Below this size an original is stored raw: compression cannot pay.
pub const TINY: usize = 64;
/// The zstd level.
pub const LEVEL: i32 = 3;
/// The largest original this build will decompress (a tampered length cannot exhaust memory).
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 2 << 30;
/// `last_access` is refreshed at most this often per blob, so reads rarely write.
const ACCESS_GRANULARITY_MS: i64 = 3_600_000;

const CODEC_RAW: i64 = 0;
const CODEC_ZSTD: i64 = 1;

/// Why an archive operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CcrError {
    /// The key text is malformed.
    #[error("{0}")]
    Key(#[from] KeyPrefixError),
    /// No blob has this prefix.
    #[error("ccr:{prefix}: not found — expired or evicted from the local store")]
    NotFound {
        /// The prefix asked for.
        prefix: String,
    },
    /// Several blobs share this prefix.
    #[error("ccr:{prefix}: ambiguous — {} archived contents share it ({}); give more hex characters", candidates.len(), candidates.join(", "))]
    Ambiguous {
        /// The prefix asked for.
        prefix: String,
        /// The full keys that match.
        candidates: Vec<String>,
    },
    /// The stored bytes do not decode to the original (never returned).
    #[error("ccr:{key}: corrupt blob: {reason}")]
    Corrupt {
        /// The full key.
        key: String,
        /// What does not match.
        reason: String,
    },
    /// The content was redacted.
    #[error("ccr:{key}: content redacted (the key is kept so markers still explain themselves)")]
    Redacted {
        /// The full key.
        key: String,
    },
    /// The original is larger than the configured ceiling.
    #[error("ccr:{key}: original of {len} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// The full key (or `put`).
        key: String,
        /// Its length.
        len: u64,
        /// The ceiling.
        limit: u64,
    },
    /// SQLite failed.
    #[error("ccr {op}: {source}")]
    Sql {
        /// The operation.
        op: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Compression failed.
    #[error("ccr put: compression failed: {0}")]
    Compress(#[source] std::io::Error),
}

fn sql(op: &'static str) -> impl FnOnce(rusqlite::Error) -> CcrError {
    move |source| CcrError::Sql { op, source }
}

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

/// Archive totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Blobs (including redacted ones).
    pub entries: u64,
    /// Sum of original sizes.
    pub raw_bytes: u64,
    /// Sum of stored sizes.
    pub stored_bytes: u64,
    /// Blobs kept alive by a reference.
    pub referenced: u64,
    /// Redacted blobs.
    pub redacted: u64,
}

impl Stats {
    /// Original bytes per stored byte.
    pub fn ratio(&self) -> f64 {
        if self.stored_bytes == 0 {
            return 1.0;
        }
        self.raw_bytes as f64 / self.stored_bytes as f64
    }
}

/// The result of verifying every blob.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Blobs checked.
    pub checked: u64,
    /// Redacted blobs (nothing to check).
    pub redacted: u64,
    /// `(full key, what is wrong)` for every bad blob.
    pub bad: Vec<(String, String)>,
}

/// Retention policy for unreferenced blobs.
#[derive(Debug, Clone)]
pub struct Retention {
    /// Keep the archive's stored bytes under this, evicting least recently used first.
    pub max_bytes: Option<u64>,
    /// Evict blobs not accessed for this long.
    pub max_age: Option<Duration>,
    /// Never evict a blob written (or archived again, or read) less than this long ago: writers
    /// in flight reference it soon. Measured from each blob's own write, never from the start
    /// of the run that wrote it.
    pub grace: Duration,
    /// Report without deleting.
    pub dry_run: bool,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_bytes: None, max_age: None, grace: Duration::from_secs(600), dry_run: false }
    }
}

/// What a garbage collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// Blobs evicted (or that would be, on a dry run).
    pub evicted: u64,
    /// Stored bytes freed.
    pub freed_bytes: u64,
    /// Blobs that stayed because a reference keeps them.
    pub kept_referenced: u64,
    /// Blobs left.
    pub remaining: u64,
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

fn compress(bytes: &[u8]) -> Result<Vec<u8>, CcrError> {
    COMPRESSOR.with(|c| {
        let mut slot = c.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(LEVEL).map_err(CcrError::Compress)?);
        }
        match slot.as_mut() {
            Some(comp) => comp.compress(bytes).map_err(CcrError::Compress),
            None => Err(CcrError::Compress(std::io::Error::other("no compressor"))),
        }
    })
}

/// Decodes stored bytes and checks them against the key. Never returns unverified content.
pub fn decode(key: &CcrKey, codec: i64, raw_len: u64, data: &[u8], limit: u64) -> Result<Vec<u8>, CcrError> {
    let corrupt = |reason: String| CcrError::Corrupt { key: key.hex(), reason };
    if raw_len > limit {
        return Err(CcrError::TooLarge { key: key.hex(), len: raw_len, limit });
    }
    let cap = usize::try_from(raw_len).map_err(|_| corrupt("length does not fit in memory".into()))?;
    let bytes = match codec {
        CODEC_RAW => data.to_vec(),
        CODEC_ZSTD => zstd::bulk::decompress(data, cap).map_err(|e| corrupt(format!("zstd: {e}")))?,
        other => return Err(corrupt(format!("unknown codec {other}"))),
    };
    if bytes.len() != cap {
        return Err(corrupt(format!("decoded {} bytes, expected {raw_len}", bytes.len())));
    }
    if CcrKey::of(&bytes) != *key {
        return Err(corrupt("content does not hash to its key".into()));
    }
    Ok(bytes)
}

fn key_from_blob(b: Vec<u8>) -> Result<CcrKey, CcrError> {
    let arr: [u8; 32] = b.try_into().map_err(|_| CcrError::Corrupt {
        key: "(unknown)".into(),
        reason: "stored key is not 32 bytes".into(),
    })?;
    Ok(CcrKey(arr))
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

    /// Totals.
    pub fn stats(&self) -> Result<Stats, CcrError> {
        let (entries, raw, stored, redacted): (i64, i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(raw_len), 0), coalesce(sum(stored_len), 0),
                        count(redacted_at) FROM ccr_blobs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .map_err(sql("stats"))?;
        let referenced: i64 = self
            .conn
            .query_row("SELECT count(DISTINCT blob_id) FROM ccr_refs", [], |r| r.get(0))
            .map_err(sql("stats"))?;
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(Stats {
            entries: u(entries),
            raw_bytes: u(raw),
            stored_bytes: u(stored),
            referenced: u(referenced),
            redacted: u(redacted),
        })
    }

    /// Decodes and hashes every blob, reporting each bad one.
    pub fn verify(&self) -> Result<VerifyReport, CcrError> {
        let mut report = VerifyReport::default();
        let mut st = self
            .conn
            .prepare("SELECT key, codec, raw_len, data, redacted_at FROM ccr_blobs ORDER BY id")
            .map_err(sql("verify"))?;
        let mut rows = st.query([]).map_err(sql("verify"))?;
        while let Some(r) = rows.next().map_err(sql("verify"))? {
            let key_bytes: Vec<u8> = r.get(0).map_err(sql("verify"))?;
            let key = match key_from_blob(key_bytes.clone()) {
                Ok(k) => k,
                Err(_) => {
                    report.bad.push((hex(&key_bytes), "stored key is not 32 bytes".into()));
                    continue;
                }
            };
            if r.get::<_, Option<i64>>(4).map_err(sql("verify"))?.is_some() {
                report.redacted = report.redacted.saturating_add(1);
                continue;
            }
            report.checked = report.checked.saturating_add(1);
            let codec: i64 = r.get(1).map_err(sql("verify"))?;
            let raw_len: i64 = r.get(2).map_err(sql("verify"))?;
            let data: Option<Vec<u8>> = r.get(3).map_err(sql("verify"))?;
            let result = match (data, u64::try_from(raw_len)) {
                (Some(d), Ok(len)) => decode(&key, codec, len, &d, self.max_blob_bytes).map(drop),
                (None, _) => Err(CcrError::Corrupt { key: key.hex(), reason: "content missing".into() }),
                (_, Err(_)) => Err(CcrError::Corrupt { key: key.hex(), reason: "negative length".into() }),
            };
            if let Err(e) = result {
                let reason = match e {
                    CcrError::Corrupt { reason, .. } => reason,
                    other => other.to_string(),
                };
                report.bad.push((key.hex(), reason));
            }
        }
        Ok(report)
    }

    /// Evicts unreferenced blobs by age and by capacity (least recently used first), sparing
    /// blobs younger than the grace period.
    pub fn gc(&self, policy: &Retention) -> Result<GcReport, CcrError> {
        let now = self.clock.now_ms();
        let grace_ms = i64::try_from(policy.grace.as_millis()).unwrap_or(i64::MAX);
        self.write("gc", || {
            let mut report = GcReport::default();
            let mut candidates: Vec<(i64, i64, i64)> = Vec::new(); // id, stored_len, last_access
            {
                let mut st = self
                    .conn
                    .prepare(
                        "SELECT b.id, b.stored_len, b.last_access, b.created_at,
                                EXISTS (SELECT 1 FROM ccr_refs r WHERE r.blob_id = b.id)
                         FROM ccr_blobs b ORDER BY b.last_access, b.id",
                    )
                    .map_err(sql("gc"))?;
                let rows = st
                    .query_map([], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, bool>(4)?,
                        ))
                    })
                    .map_err(sql("gc"))?;
                for row in rows {
                    let (id, len, access, created, referenced) = row.map_err(sql("gc"))?;
                    if referenced {
                        report.kept_referenced = report.kept_referenced.saturating_add(1);
                    } else if now.saturating_sub(created.max(access)) >= grace_ms {
                        candidates.push((id, len, access));
                    }
                }
            }
            let mut total: i64 = self
                .conn
                .query_row("SELECT coalesce(sum(stored_len), 0) FROM ccr_blobs", [], |r| r.get(0))
                .map_err(sql("gc"))?;
            let max_age_ms = policy.max_age.map(|a| i64::try_from(a.as_millis()).unwrap_or(i64::MAX));
            let max_bytes = policy.max_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
            let mut evict: Vec<i64> = Vec::new();
            for (id, len, access) in candidates {
                let too_old = max_age_ms.is_some_and(|m| now.saturating_sub(access) > m);
                let over = max_bytes.is_some_and(|m| total > m);
                if too_old || over {
                    evict.push(id);
                    // The schema keeps `stored_len >= 0`; a row that breaks it frees nothing.
                    let len = len.max(0);
                    total = total.saturating_sub(len);
                    report.evicted = report.evicted.saturating_add(1);
                    report.freed_bytes = report.freed_bytes.saturating_add(u64::try_from(len).unwrap_or(0));
                }
            }
            if !policy.dry_run {
                let mut del =
                    self.conn.prepare_cached("DELETE FROM ccr_blobs WHERE id = ?1").map_err(sql("gc"))?;
                for id in &evict {
                    del.execute([id]).map_err(sql("gc"))?;
                }
            }
            let all: i64 =
                self.conn.query_row("SELECT count(*) FROM ccr_blobs", [], |r| r.get(0)).map_err(sql("gc"))?;
            report.remaining = u64::try_from(all).unwrap_or(0).saturating_sub(if policy.dry_run {
                report.evicted
            } else {
                0
            });
            Ok(report)
        })
    }

    /// Clears a blob's content, keeping its key and lengths; later reads say it was redacted.
    pub fn redact(&self, prefix: &str) -> Result<CcrKey, CcrError> {
        let (id, key) = self.resolve_row(prefix)?;
        let now = self.clock.now_ms();
        self.write("redact", || {
            self.conn
                .execute(
                    "UPDATE ccr_blobs SET data = NULL, stored_len = 0, redacted_at = ?1 WHERE id = ?2",
                    params![now, id],
                )
                .map_err(sql("redact"))?;
            Ok(key)
        })
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
