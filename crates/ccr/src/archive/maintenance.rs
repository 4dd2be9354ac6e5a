//! The archive's upkeep: totals, verification of every blob, retention (garbage collection of
//! unreferenced blobs) and redaction.

use super::codec::{decode, key_from_blob};
use super::error::sql;
use super::{Ccr, CcrError};
use rusqlite::params;
use salvage_types::ccr_key::CcrKey;
use std::time::Duration;

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

impl Ccr<'_> {
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
        // A dry run only reads: no write lock, and it works on a read-only connection.
        let run = |f: &dyn Fn() -> Result<GcReport, CcrError>| {
            if policy.dry_run {
                self.read("gc", f)
            } else {
                self.write("gc", f)
            }
        };
        run(&|| {
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
