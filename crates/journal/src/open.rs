//! The journal handle over one database file, and the reads about sessions as a whole.

use crate::error::{sql, stored_u64, JournalError};
use crate::state::State;
use rusqlite::{Connection, OptionalExtension};
use salvage_store::{Options, Store};
use salvage_types::CcrKey;
use salvage_types::{Clock, SystemClock};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A session in the list.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionInfo {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Events.
    pub events: u64,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// The capture a replayed session came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
}

/// The journal over one database file.
pub struct Journal {
    pub(crate) store: Store,
    /// State after each session's latest appended event, so sequential appends need no fold.
    pub(crate) head: HashMap<String, (u64, State)>,
    /// Each session's latest snapshot as this handle wrote or read it, valid with `head`.
    pub(crate) snapshots: HashMap<String, crate::snapshot::Last>,
    /// The JSON of the messages the latest append's session stored since its latest snapshot,
    /// valid with `head` ([`crate::fresh::Fresh::resume`]).
    pub(crate) fresh: Option<(String, crate::fresh::Fresh)>,
    /// The time CCR writes are stamped with (`created_at`, `last_access`).
    pub(crate) clock: Arc<dyn Clock + Send + Sync>,
    /// Threads a restore decodes messages on ([`Journal::with_decode_threads`]; 0, the default:
    /// every core, counted only when a restore has many messages to decode).
    pub(crate) decode_threads: usize,
    /// The file's schema records which CCR keys each event references (`blobs_hash`, schema 8):
    /// false only for a file a test keeps at an earlier version.
    pub(crate) vouch_blobs: bool,
}

impl Journal {
    /// Opens (creating) the journal in a database file, stamping CCR writes with the system
    /// clock (see [`Journal::with_clock`]).
    pub fn open(path: &Path, options: &Options) -> Result<Journal, JournalError> {
        Ok(Journal::from_store(Store::open(path, options)?))
    }

    /// An in-memory journal.
    pub fn in_memory() -> Result<Journal, JournalError> {
        Ok(Journal::from_store(Store::in_memory()?))
    }

    /// Wraps an open store.
    pub fn from_store(store: Store) -> Journal {
        let vouch_blobs = store.version().map_or(true, |v| v >= 8);
        Journal {
            vouch_blobs,
            store,
            head: HashMap::new(),
            snapshots: HashMap::new(),
            fresh: None,
            clock: Arc::new(SystemClock),
            decode_threads: 0,
        }
    }

    /// The same journal restoring on `threads` threads (at least one; the default is every
    /// core, up to 8). On one, a restore decodes each stored message as it reads it and holds
    /// no second copy of the history's stored bytes, and its allocations stay on the caller's
    /// thread: for callers that already run a thread per core (corpus replays), or that bound
    /// memory rather than latency.
    pub fn with_decode_threads(mut self, threads: usize) -> Journal {
        self.decode_threads = threads.max(1);
        self
    }

    /// The same journal with CCR writes stamped by `clock` (deterministic runs inject theirs).
    pub fn with_clock(mut self, clock: Arc<dyn Clock + Send + Sync>) -> Journal {
        self.clock = clock;
        self
    }

    /// The underlying store (CCR shares it).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The connection.
    pub fn conn(&self) -> &Connection {
        self.store.conn()
    }

    /// The session's version (its latest event's seq).
    pub fn version(&self, session: &str) -> Result<u64, JournalError> {
        let v = self
            .conn()
            .prepare_cached("SELECT head_seq FROM sessions WHERE id = ?1")
            .and_then(|mut st| st.query_row([session], |r| r.get::<_, i64>(0)).optional())
            .map_err(sql("version"))?
            .ok_or_else(|| JournalError::NoSession(session.to_string()))?;
        stored_u64(session, 0, "the session's head_seq", v)
    }

    /// Every session, oldest first.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, JournalError> {
        let mut st = self
            .conn()
            .prepare(
                "SELECT id, title, head_seq, created_at, capture_id FROM sessions ORDER BY created_at, id",
            )
            .map_err(sql("sessions"))?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?, r.get(3)?, r.get(4)?)))
            .map_err(sql("sessions"))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, title, head, created_at, capture): (String, _, _, _, _) =
                row.map_err(sql("sessions"))?;
            let events = stored_u64(&id, 0, "the session's head_seq", head)?;
            out.push(SessionInfo { id, title, events, created_at, capture });
        }
        Ok(out)
    }

    /// Sessions whose events reference a CCR blob.
    pub fn sessions_referencing(&self, key: &CcrKey) -> Result<Vec<String>, JournalError> {
        let mut st = self
            .conn()
            .prepare("SELECT DISTINCT session_id FROM event_blobs WHERE blob_key = ?1 ORDER BY session_id")
            .map_err(sql("references"))?;
        let rows = st.query_map([&key.0[..]], |r| r.get::<_, String>(0)).map_err(sql("references"))?;
        rows.collect::<Result<_, _>>().map_err(sql("references"))
    }

    /// Every CCR blob the events of a session reference.
    pub fn referenced_blobs(&self, session: &str) -> Result<Vec<CcrKey>, JournalError> {
        let mut st = self
            .conn()
            .prepare("SELECT seq, blob_key FROM event_blobs WHERE session_id = ?1 ORDER BY seq")
            .map_err(sql("references"))?;
        let rows = st
            .query_map([session], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
            .map_err(sql("references"))?;
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for row in rows {
            let (seq, bytes) = row.map_err(sql("references"))?;
            let seq = stored_u64(session, 0, "event_blobs.seq", seq)?;
            let key = CcrKey(crate::error::stored_hash(session, seq, "a referenced blob key", &bytes)?);
            if seen.insert(key.0) {
                out.push(key);
            }
        }
        Ok(out)
    }
}
