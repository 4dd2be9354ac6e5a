//! How much of the conversations an in-memory journal keeps (`--no-journal --captures DIR`).
//!
//! Design decision: without a journal the writer still writes every turn into an in-memory one,
//! because a capture is named after its session and the `provider_error` event's place in it, and
//! that place depends on what the session holds (its history's keys decide whether a turn
//! appends, splices or changes nothing). Nothing else ever reads it, so what it held of a
//! conversation nobody continues was kept for nothing, for the life of the process: every event,
//! message and archived original of every session. The writer now keeps only the sessions it
//! wrote last, by count ([`Keep::sessions`]) and by the database's bytes in use
//! ([`Keep::bytes`]): past either, the least recently written sessions are deleted (with the
//! messages only they used, their rows in `deleted_sessions` and the archived originals nothing
//! references any more) down to three quarters of the bound, so that one deletion (which reads
//! the deltas of the sessions left) is paid once per quarter of the bound, not once per new
//! session. A session the writer still keeps is written exactly as before, so its captures are
//! too; one that comes back after it was dropped starts afresh, as after a restart of the proxy.

use super::WriteError;
use salvage_ccr::{Ccr, Clock, Retention};
use salvage_journal::{Journal, JournalError};
use std::collections::{HashSet, VecDeque};

/// How much an in-memory journal keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Sessions, at most.
    pub sessions: usize,
    /// Bytes of the database in use (its pages less its free ones), at most.
    pub bytes: u64,
}

impl Keep {
    /// The bounds of `salvage proxy --no-journal`: the 256 sessions written last, within 256 MiB.
    pub const DEFAULT: Keep = Keep { sessions: 256, bytes: 256 << 20 };
}

impl Default for Keep {
    fn default() -> Keep {
        Keep::DEFAULT
    }
}

/// What an in-memory journal holds (for tests and the proxy's own checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Sessions.
    pub sessions: u64,
    /// Their events.
    pub events: u64,
    /// Stored messages.
    pub messages: u64,
    /// Archived originals.
    pub blobs: u64,
    /// Rows of `deleted_sessions`.
    pub deleted: u64,
    /// The database's pages (in use or free): the memory it takes, in pages.
    pub pages: u64,
    /// Bytes of its pages in use.
    pub bytes_in_use: u64,
}

/// Counts what `journal` holds.
pub fn held(journal: &Journal) -> Result<Held, JournalError> {
    let conn = journal.conn();
    let count = |sql: &str| -> Result<u64, JournalError> {
        let n: i64 = conn
            .query_row(sql, [], |r| r.get(0))
            .map_err(|source| JournalError::Sql { op: "count what the journal holds", source })?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    Ok(Held {
        sessions: count("SELECT count(*) FROM sessions")?,
        events: count("SELECT count(*) FROM events")?,
        messages: count("SELECT count(*) FROM messages")?,
        blobs: count("SELECT count(*) FROM ccr_blobs")?,
        deleted: count("SELECT count(*) FROM deleted_sessions")?,
        pages: count("PRAGMA page_count")?,
        bytes_in_use: bytes_in_use(journal)?,
    })
}

/// The bytes of the database's pages in use.
fn bytes_in_use(journal: &Journal) -> Result<u64, JournalError> {
    let conn = journal.conn();
    let pragma = |name: &str| -> Result<u64, JournalError> {
        let n: i64 = conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .map_err(|source| JournalError::Sql { op: "read the database's size", source })?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let used = pragma("page_count")?.saturating_sub(pragma("freelist_count")?);
    Ok(used.saturating_mul(pragma("page_size")?))
}

/// The sessions an in-memory journal holds, least recently written first.
#[derive(Debug)]
pub struct Retained {
    keep: Keep,
    order: VecDeque<String>,
}

struct NowClock;
impl Clock for NowClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

impl Retained {
    /// Keeps within `keep`.
    pub fn new(keep: Keep) -> Retained {
        Retained { keep: Keep { sessions: keep.sessions.max(1), bytes: keep.bytes }, order: VecDeque::new() }
    }

    /// `session` was just written.
    pub fn touch(&mut self, session: &str) {
        if let Some(i) = self.order.iter().position(|s| s == session) {
            if let Some(s) = self.order.remove(i) {
                self.order.push_back(s);
            }
        } else {
            self.order.push_back(session.to_string());
        }
    }

    /// Deletes the least recently written sessions while the journal holds more than the bounds
    /// allow; the number deleted.
    pub fn trim(&mut self, journal: &mut Journal) -> Result<usize, WriteError> {
        let mut deleted = 0usize;
        loop {
            let sessions = journal.sessions()?.len();
            let over_count = sessions > self.keep.sessions;
            let over_bytes = bytes_in_use(journal)? > self.keep.bytes;
            if !(over_count || over_bytes) || sessions == 0 {
                return Ok(deleted);
            }
            // Down to three quarters of the bound (of what it holds now, when over in bytes); the
            // session written last is always kept.
            let base = if over_count { self.keep.sessions } else { sessions };
            let keep = base.saturating_sub(base / 4).clamp(1, sessions.saturating_sub(1).max(1));
            while self.order.len() > keep {
                self.order.pop_front();
            }
            let kept: HashSet<&str> = self.order.iter().map(String::as_str).collect();
            // Every session not among the latest: also any the order missed (a turn whose append
            // failed after its session was started).
            let victims: Vec<String> = journal
                .sessions()?
                .into_iter()
                .map(|s| s.id)
                .filter(|id| !kept.contains(id.as_str()))
                .collect();
            if victims.is_empty() {
                return Ok(deleted);
            }
            journal.delete_sessions(&victims, "salvage proxy --no-journal: idle", chrono::Utc::now())?;
            deleted = deleted.saturating_add(victims.len());
            // Nobody reads the in-memory journal's record of deletions or the originals only the
            // deleted sessions referenced: they go too.
            journal
                .conn()
                .execute("DELETE FROM deleted_sessions", [])
                .map_err(|source| JournalError::Sql { op: "forget deleted sessions", source })?;
            let all = Retention {
                max_bytes: Some(0),
                max_age: None,
                grace: std::time::Duration::ZERO,
                dry_run: false,
            };
            Ccr::new(journal.conn(), &NowClock).gc(&all).map_err(|e| {
                WriteError::Archive(format!("dropping the originals nothing references: {e}"))
            })?;
            if self.order.len() <= 1 {
                return Ok(deleted);
            }
        }
    }
}
