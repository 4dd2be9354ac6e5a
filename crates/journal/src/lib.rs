//! The event-sourced journal: every turn, compaction, recovery attempt and server-side edit of a
//! session, from which any past state is restored exactly.
//!
//! Owns the `sessions`, `events`, `messages`, `event_blobs` and `snapshots` tables: appending
//! (optimistic concurrency per session, idempotent retries by writer-chosen event id, a BLAKE3
//! hash chain), folding a session's state at any event, rewinds as appended events, verification
//! and export. It does not decide what happens in a session (the replay driver does). Design
//! decision: a history change is stored as one splice of message hashes against the parent
//! event's state, so in-place rewrites (stubs that leave the last message alone) are recorded and
//! restored exactly, and a rewind is an event whose parent is its target — never a deletion.

pub mod branches;
pub mod delete;
pub mod export;
pub mod hash_chain;
pub mod history_diff;
pub mod import;
pub mod lookup;
pub mod otlp;
pub mod state;

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use salvage_ccr::{Ccr, Clock};
use salvage_store::{Options, Store, StoreError};
use salvage_types::event::EventBody;
use salvage_types::{CcrKey, Message};
use state::{diff, hex, unhex, Delta, MsgHash, State, REDUCER_VERSION};
use std::collections::HashMap;
use std::path::Path;

/// A snapshot of the state is written every this many events along a parent chain.
pub const SNAPSHOT_EVERY: u64 = 64;
/// The snapshot interval for a history of `len` messages: at least [`SNAPSHOT_EVERY`], growing
/// with the history (a power of two, so every multiple of a larger interval is one of a smaller
/// one) so that writing snapshots costs O(1) per event amortized while a restore folds at most
/// that many small deltas.
pub fn snapshot_interval(len: usize) -> u64 {
    (len as u64 / 16).max(SNAPSHOT_EVERY).next_power_of_two()
}

/// Messages whose JSON is larger than this are stored in CCR.
pub const LARGE_MESSAGE: usize = 256 * 1024;
/// The CCR reference owner for journal content.
pub const CCR_OWNER: &str = "journal";

/// Why a journal operation failed. Every variant names what failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another writer appended first.
    #[error("session {session}: version conflict: expected {expected}, the session is at {actual}")]
    Conflict {
        /// The session.
        session: String,
        /// The version the writer expected.
        expected: u64,
        /// The version found.
        actual: u64,
    },
    /// No such session.
    #[error("session {0}: not found")]
    NoSession(String),
    /// The session already exists.
    #[error("session {0}: already exists")]
    SessionExists(String),
    /// No such event.
    #[error("session {session}: no event {seq}")]
    NoEvent {
        /// The session.
        session: String,
        /// The event.
        seq: u64,
    },
    /// An event id was reused for different content.
    #[error("event id {0}: already used by another event")]
    IdReused(String),
    /// Stored data does not decode or does not match its hash.
    #[error("session {session}, event {seq}: {problem}")]
    Corrupt {
        /// The session.
        session: String,
        /// The event.
        seq: u64,
        /// What is wrong.
        problem: String,
    },
    /// A referenced CCR blob is missing.
    #[error("CCR blob {0} referenced by an event is not archived")]
    MissingBlob(String),
    /// SQLite failed.
    #[error("journal {op}: {source}")]
    Sql {
        /// The operation.
        op: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Invalid input.
    #[error("{0}")]
    Invalid(String),
}

fn sql(op: &'static str) -> impl FnOnce(rusqlite::Error) -> JournalError {
    move |source| JournalError::Sql { op, source }
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// How an event changes the history.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum HistoryChange {
    /// It does not.
    #[default]
    None,
    /// Messages appended at the end.
    Append(Vec<Message>),
    /// The whole history is now this (the journal stores the smallest splice).
    Set(Vec<Message>),
}

/// Which state an event continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parent {
    /// The session's latest event.
    #[default]
    Head,
    /// A given event (rewinds).
    Seq(u64),
}

/// An event to append.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// Writer-chosen id: a retried append with the same id returns the original.
    pub event_id: String,
    /// When it happened (injected).
    pub ts: DateTime<Utc>,
    /// What happened.
    pub body: EventBody,
    /// How the history changed.
    pub history: HistoryChange,
    /// Which state it continues.
    pub parent: Parent,
    /// CCR blobs the event references (kept from eviction).
    pub blobs: Vec<CcrKey>,
    /// Originals to archive in the event's own transaction and reference like `blobs`: no
    /// moment exists in which they are stored but unreferenced, so a concurrent `ccr gc` cannot
    /// take them whatever its grace period.
    pub archive: Vec<Vec<u8>>,
}

impl NewEvent {
    /// An event with no history change, continuing the head.
    pub fn new(event_id: impl Into<String>, ts: DateTime<Utc>, body: EventBody) -> NewEvent {
        NewEvent {
            event_id: event_id.into(),
            ts,
            body,
            history: HistoryChange::None,
            parent: Parent::Head,
            blobs: Vec::new(),
            archive: Vec::new(),
        }
    }

    /// With a history change.
    pub fn with_history(mut self, h: HistoryChange) -> NewEvent {
        self.history = h;
        self
    }

    /// With referenced blobs.
    pub fn with_blobs(mut self, blobs: Vec<CcrKey>) -> NewEvent {
        self.blobs = blobs;
        self
    }

    /// With originals archived (and referenced) in the event's transaction.
    pub fn with_archive(mut self, archive: Vec<Vec<u8>>) -> NewEvent {
        self.archive = archive;
        self
    }
}

/// Where an appended event landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Its sequence number.
    pub seq: u64,
    /// Its chain hash.
    pub hash: [u8; 32],
    /// False when this was a retry of an event already stored.
    pub inserted: bool,
}

/// A stored event as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Sequence number.
    pub seq: u64,
    /// Writer-chosen id.
    pub event_id: String,
    /// The state it continues.
    pub parent: Option<u64>,
    /// The kind.
    pub kind: String,
    /// The kind's version.
    pub kind_version: u32,
    /// RFC 3339 time.
    pub ts: String,
    /// The decoded body.
    pub body: EventBody,
    /// The history splice.
    pub delta: Option<Delta>,
}

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

/// The restored state at one event.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The event.
    pub seq: u64,
    /// The exact history.
    pub history: Vec<Message>,
    /// Everything else.
    pub state: State,
}

/// The first problem `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BadEvent {
    /// The session.
    pub session: String,
    /// The event (0 for a session-level problem).
    pub seq: u64,
    /// What is wrong.
    pub problem: String,
}

/// What `verify` checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Events checked.
    pub events: u64,
    /// The first bad event per bad session.
    pub bad: Vec<BadEvent>,
}

/// The journal over one database file.
pub struct Journal {
    store: Store,
    /// State after each session's latest appended event, so sequential appends need no fold.
    head: HashMap<String, (u64, State)>,
}

struct SysClock;
impl Clock for SysClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// Formats a time as RFC 3339 with milliseconds.
pub fn rfc3339(ts: &DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn message_hash(json: &[u8]) -> MsgHash {
    *blake3::hash(json).as_bytes()
}

impl Journal {
    /// Opens (creating) the journal in a database file.
    pub fn open(path: &Path, options: &Options) -> Result<Journal, JournalError> {
        Ok(Journal::from_store(Store::open(path, options)?))
    }

    /// An in-memory journal.
    pub fn in_memory() -> Result<Journal, JournalError> {
        Ok(Journal::from_store(Store::in_memory()?))
    }

    /// Wraps an open store.
    pub fn from_store(store: Store) -> Journal {
        Journal { store, head: HashMap::new() }
    }

    /// The underlying store (CCR shares it).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The connection.
    pub fn conn(&self) -> &Connection {
        self.store.conn()
    }

    /// Starts a session with its first event (`session_started`).
    pub fn start_session(
        &mut self,
        id: &str,
        title: &str,
        first: NewEvent,
    ) -> Result<Appended, JournalError> {
        self.start_session_from(id, title, None, first)
    }

    /// [`Journal::start_session`], recording the capture the session replays.
    pub fn start_session_from(
        &mut self,
        id: &str,
        title: &str,
        capture: Option<&str>,
        first: NewEvent,
    ) -> Result<Appended, JournalError> {
        let created = rfc3339(&first.ts);
        {
            let conn = self.store.conn();
            let exists: bool = conn
                .query_row("SELECT 1 FROM sessions WHERE id = ?1", [id], |_| Ok(true))
                .optional()
                .map_err(sql("start session"))?
                .unwrap_or(false);
            if exists {
                // A retried start with the same first event id is the original.
                let same: Option<(i64, Vec<u8>)> = conn
                    .query_row(
                        "SELECT seq, hash FROM events WHERE event_id = ?1 AND session_id = ?2",
                        params![first.event_id, id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(sql("start session"))?;
                return match same {
                    Some((seq, hash)) => Ok(Appended { seq: u(seq), hash: to32(&hash), inserted: false }),
                    None => Err(JournalError::SessionExists(id.to_string())),
                };
            }
        }
        // The session row and its first event commit together: a kill or a full disk between
        // them would leave a session that cannot be restored.
        let head_cache = self.head.remove(id);
        let (mut appended, head) = self.append_tx(
            id,
            Some(0),
            vec![first],
            head_cache,
            Begin::NewSession { title, created: &created, capture },
        )?;
        self.head.insert(id.to_string(), head);
        appended.pop().ok_or_else(|| JournalError::Invalid("no event appended".into()))
    }

    /// The session's version (its latest event's seq).
    pub fn version(&self, session: &str) -> Result<u64, JournalError> {
        self.conn()
            .query_row("SELECT head_seq FROM sessions WHERE id = ?1", [session], |r| r.get::<_, i64>(0))
            .optional()
            .map_err(sql("version"))?
            .map(u)
            .ok_or_else(|| JournalError::NoSession(session.to_string()))
    }

    /// Appends events in one transaction. With `expected`, the session must be at that version,
    /// else [`JournalError::Conflict`]. A retried batch (same event ids) returns the originals.
    pub fn append(
        &mut self,
        session: &str,
        expected: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Appended>, JournalError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        // Idempotent retry: the first id already stored means the whole batch was.
        if let Some(found) = self.find_event_ids(session, &events)? {
            return Ok(found);
        }
        let head_cache = self.head.remove(session);
        let result = self.append_tx(session, expected, events, head_cache, Begin::Existing);
        match result {
            Ok((appended, head)) => {
                self.head.insert(session.to_string(), head);
                Ok(appended)
            }
            Err(e) => Err(e),
        }
    }

    fn find_event_ids(
        &self,
        session: &str,
        events: &[NewEvent],
    ) -> Result<Option<Vec<Appended>>, JournalError> {
        let Some(first) = events.first() else { return Ok(None) };
        let mut st = self
            .conn()
            .prepare_cached("SELECT session_id, seq, hash, ts, body FROM events WHERE event_id = ?1")
            .map_err(sql("append"))?;
        type Found = (String, i64, Vec<u8>, String, Vec<u8>);
        let find =
            |st: &mut rusqlite::CachedStatement<'_>, id: &str| -> Result<Option<Found>, JournalError> {
                st.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                    .optional()
                    .map_err(sql("append"))
            };
        let Some((s, ..)) = find(&mut st, &first.event_id)? else { return Ok(None) };
        if s != session {
            return Err(JournalError::IdReused(first.event_id.clone()));
        }
        let mut out = Vec::new();
        for e in events {
            // A retry is the same event: same time and the same body. Anything else reusing the
            // id is refused instead of silently answered with the original.
            let body = serde_json::to_vec(&e.body).map_err(|x| JournalError::Invalid(x.to_string()))?;
            match find(&mut st, &e.event_id)? {
                Some((s, seq, hash, ts, stored))
                    if s == session && ts == rfc3339(&e.ts) && stored == body =>
                {
                    out.push(Appended { seq: u(seq), hash: to32(&hash), inserted: false })
                }
                _ => return Err(JournalError::IdReused(e.event_id.clone())),
            }
        }
        Ok(Some(out))
    }

    #[allow(clippy::type_complexity)]
    fn append_tx(
        &mut self,
        session: &str,
        expected: Option<u64>,
        events: Vec<NewEvent>,
        cached: Option<(u64, State)>,
        begin: Begin<'_>,
    ) -> Result<(Vec<Appended>, (u64, State)), JournalError> {
        let tx = self
            .store
            .conn_mut()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("append"))?;
        match begin {
            Begin::Existing => {}
            Begin::NewSession { title, created, capture } => {
                tx.execute(
                    "INSERT INTO sessions (id, title, created_at, head_seq, head_hash, capture_id) VALUES (?1, ?2, ?3, 0, ?4, ?5)",
                    params![session, title, created, &[0u8; 32][..], capture],
                )
                .map_err(|e| match e {
                    rusqlite::Error::SqliteFailure(f, _)
                        if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        JournalError::SessionExists(session.to_string())
                    }
                    other => JournalError::Sql { op: "start session", source: other },
                })?;
            }
            Begin::Redact(redactions) => {
                let (head_seq,): (i64,) = tx
                    .query_row("SELECT head_seq FROM sessions WHERE id = ?1", [session], |r| Ok((r.get(0)?,)))
                    .optional()
                    .map_err(sql("redact"))?
                    .ok_or_else(|| JournalError::NoSession(session.to_string()))?;
                let seq = u(head_seq) + 1;
                let at = rfc3339(&events.first().map(|e| e.ts).unwrap_or_else(Utc::now));
                for (hash, replacement) in redactions {
                    redact_message(&tx, session, seq, &at, hash, replacement)?;
                }
            }
        }
        let (head_seq, head_hash): (i64, Vec<u8>) = tx
            .query_row("SELECT head_seq, head_hash FROM sessions WHERE id = ?1", [session], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(sql("append"))?
            .ok_or_else(|| JournalError::NoSession(session.to_string()))?;
        let head_seq = u(head_seq);
        if let Some(exp) = expected {
            if exp != head_seq {
                return Err(JournalError::Conflict {
                    session: session.to_string(),
                    expected: exp,
                    actual: head_seq,
                });
            }
        }
        let mut prev_hash = to32(&head_hash);
        let mut seq = head_seq;
        let mut cur: (u64, State) = match cached {
            Some((s, st)) if s == head_seq => (s, st),
            _ if head_seq == 0 => (0, State::default()),
            _ => (head_seq, fold(&tx, session, head_seq, None)?.1),
        };
        let mut cur_depth: Option<u64> = None;
        let clock = SysClock;
        let mut appended = Vec::with_capacity(events.len());
        for e in events {
            seq += 1;
            let (parent, mut state, depth) = match e.parent {
                Parent::Head => {
                    let depth = match (cur.0, cur_depth) {
                        (0, _) => 0,
                        (_, Some(d)) => d + 1,
                        (c, None) => event_depth(&tx, session, c)? + 1,
                    };
                    (if cur.0 == 0 { None } else { Some(cur.0) }, std::mem::take(&mut cur.1), depth)
                }
                Parent::Seq(p) => {
                    if p == 0 || p >= seq {
                        return Err(JournalError::Invalid(format!(
                            "session {session}: parent {p} is not an earlier event"
                        )));
                    }
                    let (_, st) = fold(&tx, session, p, Some(&cur))?;
                    (Some(p), st, event_depth(&tx, session, p)? + 1)
                }
            };
            // Store new messages and compute the splice.
            let delta = match &e.history {
                HistoryChange::None => None,
                HistoryChange::Append(msgs) if msgs.is_empty() => None,
                HistoryChange::Append(msgs) => {
                    let mut insert = Vec::with_capacity(msgs.len());
                    for m in msgs {
                        insert.push(hex(&store_message(&tx, &clock, m)?));
                    }
                    Some(Delta { at: state.history.len(), remove: 0, insert })
                }
                HistoryChange::Set(msgs) => {
                    let mut h = Vec::with_capacity(msgs.len());
                    for m in msgs {
                        h.push(store_message(&tx, &clock, m)?);
                    }
                    diff(&state.history, &h)
                }
            };
            let body = serde_json::to_vec(&e.body).map_err(|x| JournalError::Invalid(x.to_string()))?;
            let delta_bytes = delta
                .as_ref()
                .map(serde_json::to_vec)
                .transpose()
                .map_err(|x| JournalError::Invalid(x.to_string()))?;
            let ts = rfc3339(&e.ts);
            let row = hash_chain::Row {
                session,
                seq,
                event_id: &e.event_id,
                parent,
                depth,
                kind: e.body.kind(),
                kind_version: e.body.kind_version(),
                ts: &ts,
                body: &body,
                delta: delta_bytes.as_deref(),
            };
            let hash = hash_chain::link(&prev_hash, &row);
            tx.prepare_cached(
                "INSERT INTO events (session_id, seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    session,
                    i(seq),
                    e.event_id,
                    parent.map(i),
                    i(depth),
                    e.body.kind(),
                    e.body.kind_version(),
                    ts,
                    body,
                    delta_bytes,
                    &prev_hash[..],
                    &hash[..]
                ])
            })
            .map_err(|x| match x {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                    JournalError::IdReused(e.event_id.clone())
                }
                other => JournalError::Sql { op: "append", source: other },
            })?;
            let mut keys = e.blobs.clone();
            for bytes in &e.archive {
                let k =
                    Ccr::new(&tx, &clock).put(bytes).map_err(|x| JournalError::Invalid(x.to_string()))?.key;
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for k in &keys {
                let ccr = Ccr::new(&tx, &clock);
                if !ccr.contains(k).map_err(|x| JournalError::Invalid(x.to_string()))? {
                    return Err(JournalError::MissingBlob(k.hex()));
                }
                ccr.reference(k, CCR_OWNER).map_err(|x| JournalError::Invalid(x.to_string()))?;
                tx.prepare_cached(
                    "INSERT OR IGNORE INTO event_blobs (session_id, seq, blob_key) VALUES (?1, ?2, ?3)",
                )
                .and_then(|mut st| st.execute(params![session, i(seq), &k.0[..]]))
                .map_err(sql("append"))?;
            }
            state.apply(session, seq, parent, &e.body, delta.as_ref())?;
            if depth > 0 && depth % snapshot_interval(state.history.len()) == 0 {
                let blob = serde_json::to_vec(&state).map_err(|x| JournalError::Invalid(x.to_string()))?;
                tx.prepare_cached("INSERT OR REPLACE INTO snapshots (session_id, seq, reducer_version, state) VALUES (?1, ?2, ?3, ?4)")
                    .and_then(|mut st| st.execute(params![session, i(seq), REDUCER_VERSION, blob]))
                    .map_err(sql("snapshot"))?;
            }
            prev_hash = hash;
            appended.push(Appended { seq, hash, inserted: true });
            cur = (seq, state);
            cur_depth = Some(depth);
        }
        tx.execute(
            "UPDATE sessions SET head_seq = ?1, head_hash = ?2 WHERE id = ?3",
            params![i(seq), &prev_hash[..], session],
        )
        .map_err(sql("append"))?;
        tx.commit().map_err(sql("append"))?;
        Ok((appended, cur))
    }

    /// Events of a session in order, from `after` (exclusive), at most `limit`.
    pub fn events(&self, session: &str, after: u64, limit: usize) -> Result<Vec<StoredEvent>, JournalError> {
        self.version(session)?;
        let mut st = self
            .conn()
            .prepare_cached(
                "SELECT seq, event_id, parent, kind, kind_version, ts, body, delta FROM events
                 WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )
            .map_err(sql("read events"))?;
        let rows = st
            .query_map(params![session, i(after), i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Vec<u8>>(6)?,
                    r.get::<_, Option<Vec<u8>>>(7)?,
                ))
            })
            .map_err(sql("read events"))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, event_id, parent, kind, kv, ts, body, delta) = row.map_err(sql("read events"))?;
            let seq = u(seq);
            let (body, delta) = decode(session, seq, &body, delta.as_deref())?;
            out.push(StoredEvent {
                seq,
                event_id,
                parent: parent.map(u),
                kind,
                kind_version: u32::try_from(kv).unwrap_or(0),
                ts,
                body,
                delta,
            });
        }
        Ok(out)
    }

    /// The state after event `seq` (folded along its parent chain from the nearest snapshot).
    pub fn state_at(&self, session: &str, seq: u64) -> Result<State, JournalError> {
        let head = self.head.get(session).filter(|(s, _)| *s == seq);
        if let Some((_, st)) = head {
            return Ok(st.clone());
        }
        Ok(fold(self.conn(), session, seq, None)?.1)
    }

    /// The exact state, history included, after event `seq`.
    pub fn view_at(&self, session: &str, seq: u64) -> Result<View, JournalError> {
        let state = self.state_at(session, seq)?;
        let history = load_history(self.conn(), session, seq, &state.history)?;
        Ok(View { seq, history, state })
    }

    /// The state after the latest event.
    pub fn head(&self, session: &str) -> Result<View, JournalError> {
        let v = self.version(session)?;
        self.view_at(session, v)
    }

    /// Appends a rewind to `target`: the new state is the target's; nothing is deleted.
    pub fn rewind(
        &mut self,
        session: &str,
        target: u64,
        reason: &str,
        event_id: &str,
        ts: DateTime<Utc>,
    ) -> Result<Appended, JournalError> {
        let v = self.version(session)?;
        if target == 0 || target > v {
            return Err(JournalError::NoEvent { session: session.to_string(), seq: target });
        }
        let mut e = NewEvent::new(event_id, ts, EventBody::Rewind { target, reason: reason.to_string() });
        e.parent = Parent::Seq(target);
        let mut out = self.append(session, Some(v), vec![e])?;
        out.pop().ok_or_else(|| JournalError::Invalid("no event appended".into()))
    }

    /// Undoes the latest history rewrite (a rewind to the state before it), if any.
    pub fn undo(
        &mut self,
        session: &str,
        event_id: &str,
        ts: DateTime<Utc>,
    ) -> Result<Option<Appended>, JournalError> {
        let v = self.version(session)?;
        let st = self.state_at(session, v)?;
        match st.undo.last() {
            Some(&target) => self.rewind(session, target, "undo", event_id, ts).map(Some),
            None => Ok(None),
        }
    }

    /// Replaces the stored content of messages this session holds (secrets that reached the
    /// journal) and appends `event` (a redaction) in the same transaction. The message hashes stay,
    /// so every history state that lists them restores the replacement and the hash chain, which
    /// covers events and not message bodies, still verifies; `verify` accepts a body that differs
    /// from its hash only for a message recorded as redacted.
    pub fn redact_messages(
        &mut self,
        session: &str,
        redactions: &[(MsgHash, Message)],
        event: NewEvent,
    ) -> Result<Appended, JournalError> {
        let v = self.version(session)?;
        let cached = self.head.remove(session);
        let (mut out, head) =
            self.append_tx(session, Some(v), vec![event], cached, Begin::Redact(redactions))?;
        self.head.insert(session.to_string(), head);
        out.pop().ok_or_else(|| JournalError::Invalid("no event appended".into()))
    }

    /// The message hashes of a session's history at an event, in order (repeats kept).
    pub fn history_hashes(&self, session: &str, seq: u64) -> Result<Vec<MsgHash>, JournalError> {
        Ok(self.state_at(session, seq)?.history)
    }

    /// The message hashes an event inserted into the history.
    pub fn inserted_hashes(&self, session: &str, seq: u64) -> Result<Vec<MsgHash>, JournalError> {
        let e = self.events(session, seq.saturating_sub(1), 1)?;
        let e = e
            .into_iter()
            .find(|e| e.seq == seq)
            .ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq })?;
        Ok(e.delta.map(|d| d.insert.iter().filter_map(|h| unhex(h)).collect()).unwrap_or_default())
    }

    /// Every message hash any event of the session inserted, in first-seen order.
    pub fn history_hashes_all(&self, session: &str) -> Result<Vec<MsgHash>, JournalError> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        self.for_each_event(session, |e| {
            for h in e.delta.iter().flat_map(|d| d.insert.iter()).filter_map(|h| unhex(h)) {
                if seen.insert(h) {
                    out.push(h);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The stored messages with these hashes, in order (errors name `session` and `seq`).
    pub fn messages_by_hash(
        &self,
        session: &str,
        seq: u64,
        hashes: &[MsgHash],
    ) -> Result<Vec<Message>, JournalError> {
        load_history(self.conn(), session, seq, hashes)
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
            .prepare("SELECT DISTINCT blob_key FROM event_blobs WHERE session_id = ?1")
            .map_err(sql("references"))?;
        let rows = st.query_map([session], |r| r.get::<_, Vec<u8>>(0)).map_err(sql("references"))?;
        let mut out = Vec::new();
        for row in rows {
            let bytes = row.map_err(sql("references"))?;
            let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| JournalError::Corrupt {
                session: session.to_string(),
                seq: 0,
                problem: format!("a referenced blob key of {} bytes", bytes.len()),
            })?;
            out.push(CcrKey(key));
        }
        Ok(out)
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
            .query_map([], |r| {
                Ok(SessionInfo {
                    id: r.get(0)?,
                    title: r.get(1)?,
                    events: u(r.get(2)?),
                    created_at: r.get(3)?,
                    capture: r.get(4)?,
                })
            })
            .map_err(sql("sessions"))?;
        rows.collect::<Result<_, _>>().map_err(sql("sessions"))
    }

    /// Verifies hash chains, gapless sequences, parent links, message hashes and CCR references,
    /// reporting the first bad event of each bad session.
    pub fn verify(&self, only: Option<&str>) -> Result<VerifyReport, JournalError> {
        let ids: Vec<String> = match only {
            Some(s) => {
                self.version(s)?;
                vec![s.to_string()]
            }
            None => self.sessions()?.into_iter().map(|s| s.id).collect(),
        };
        let mut report = VerifyReport::default();
        // The file's structure first: pages mixed in by a damaged or foreign WAL show here.
        let problems: Vec<String> = {
            let mut st = self.conn().prepare("PRAGMA quick_check").map_err(sql("verify"))?;
            let rows = st.query_map([], |r| r.get::<_, String>(0)).map_err(sql("verify"))?;
            rows.collect::<Result<_, _>>().map_err(sql("verify"))?
        };
        if problems.iter().any(|p| p != "ok") {
            report.bad.push(BadEvent {
                session: "(database)".into(),
                seq: 0,
                problem: format!("SQLite quick_check: {}", problems.join("; ")),
            });
            return Ok(report);
        }
        for id in ids {
            report.sessions += 1;
            let (n, bad) = hash_chain::verify_session(self.conn(), &id)?;
            report.events += n;
            if let Some(b) = bad {
                report.bad.push(b);
            }
        }
        Ok(report)
    }
}

/// What an append transaction does before its events.
enum Begin<'a> {
    /// Nothing: the session exists.
    Existing,
    /// Creates the session row (its first event follows in the same transaction).
    NewSession {
        /// The title.
        title: &'a str,
        /// RFC 3339 creation time.
        created: &'a str,
        /// The capture it replays.
        capture: Option<&'a str>,
    },
    /// Replaces stored message contents (the redaction event follows in the same transaction).
    Redact(&'a [(MsgHash, Message)]),
}

/// Replaces one stored message's content with `replacement`, keeping its hash (the history states
/// that list it then restore the replacement), and records it in `message_redactions`. A message
/// archived in CCR has its blob cleared too. `secure_delete` zeroes the old bytes in the file.
fn redact_message(
    tx: &Connection,
    session: &str,
    seq: u64,
    at: &str,
    hash: &MsgHash,
    replacement: &Message,
) -> Result<(), JournalError> {
    let h = hex(hash);
    // Only a message this session's history holds (a delta inserted it).
    let pattern = format!("%\"{h}\"%");
    let referenced = tx
        .prepare_cached("SELECT 1 FROM events WHERE session_id = ?1 AND CAST(delta AS TEXT) LIKE ?2 LIMIT 1")
        .and_then(|mut st| st.exists(params![session, pattern]))
        .map_err(sql("redact"))?;
    if !referenced {
        return Err(JournalError::Invalid(format!("session {session}: no event holds message {h}")));
    }
    let key: Option<Option<Vec<u8>>> = tx
        .query_row("SELECT ccr_key FROM messages WHERE hash = ?1", [&hash[..]], |r| r.get(0))
        .optional()
        .map_err(sql("redact"))?;
    let Some(key) = key else {
        return Err(JournalError::Invalid(format!("message {h}: not stored")));
    };
    if let Some(k) = key {
        let clock = SysClock;
        match Ccr::new(tx, &clock).redact(&hex(&to32(&k))) {
            Ok(_) | Err(salvage_ccr::CcrError::NotFound { .. }) => {}
            Err(e) => return Err(JournalError::Invalid(e.to_string())),
        }
    }
    let json = serde_json::to_vec(replacement).map_err(|e| JournalError::Invalid(e.to_string()))?;
    tx.execute("UPDATE messages SET body = ?1, ccr_key = NULL WHERE hash = ?2", params![json, &hash[..]])
        .map_err(sql("redact"))?;
    tx.execute(
        "INSERT OR REPLACE INTO message_redactions (hash, session_id, seq, redacted_at) VALUES (?1, ?2, ?3, ?4)",
        params![&hash[..], session, i(seq), at],
    )
    .map_err(sql("redact"))?;
    Ok(())
}

/// True when `salvage journal redact` replaced this message's content.
pub(crate) fn is_redacted(conn: &Connection, hash: &MsgHash) -> Result<bool, JournalError> {
    conn.prepare_cached("SELECT 1 FROM message_redactions WHERE hash = ?1")
        .and_then(|mut st| st.exists([&hash[..]]))
        .map_err(sql("redaction lookup"))
}

fn to32(b: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    if b.len() == 32 {
        out.copy_from_slice(b);
    }
    out
}

fn decode(
    session: &str,
    seq: u64,
    body: &[u8],
    delta: Option<&[u8]>,
) -> Result<(EventBody, Option<Delta>), JournalError> {
    let corrupt = |what: &str, e: serde_json::Error| JournalError::Corrupt {
        session: session.to_string(),
        seq,
        problem: format!("{what} does not decode: {e}"),
    };
    let body: EventBody = serde_json::from_slice(body).map_err(|e| corrupt("body", e))?;
    let delta =
        delta.map(serde_json::from_slice::<Delta>).transpose().map_err(|e| corrupt("history delta", e))?;
    Ok((body, delta))
}

fn event_depth(conn: &Connection, session: &str, seq: u64) -> Result<u64, JournalError> {
    conn.prepare_cached("SELECT depth FROM events WHERE session_id = ?1 AND seq = ?2")
        .and_then(|mut st| st.query_row(params![session, i(seq)], |r| r.get::<_, i64>(0)).optional())
        .map_err(sql("read event"))?
        .map(u)
        .ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq })
}

/// parent, body, delta of an event row.
type EventRow = (Option<i64>, Vec<u8>, Option<Vec<u8>>);

/// Folds the state after `seq`: walks the parent chain back to a snapshot, the root, or `cached`.
fn fold(
    conn: &Connection,
    session: &str,
    seq: u64,
    cached: Option<&(u64, State)>,
) -> Result<(u64, State), JournalError> {
    let mut chain: Vec<(u64, Option<u64>, EventBody, Option<Delta>)> = Vec::new();
    let mut cur = Some(seq);
    let mut base = State::default();
    let mut ev = conn
        .prepare_cached("SELECT parent, body, delta FROM events WHERE session_id = ?1 AND seq = ?2")
        .map_err(sql("restore"))?;
    let mut snap = conn
        .prepare_cached(
            "SELECT state FROM snapshots WHERE session_id = ?1 AND seq = ?2 AND reducer_version = ?3",
        )
        .map_err(sql("restore"))?;
    while let Some(s) = cur {
        if let Some((cs, st)) = cached {
            if *cs == s {
                base = st.clone();
                break;
            }
        }
        let snapshot: Option<Vec<u8>> = snap
            .query_row(params![session, i(s), REDUCER_VERSION], |r| r.get(0))
            .optional()
            .map_err(sql("restore"))?;
        if let Some(bytes) = snapshot {
            if let Ok(st) = serde_json::from_slice::<State>(&bytes) {
                base = st;
                break;
            }
        }
        let row: Option<EventRow> = ev
            .query_row(params![session, i(s)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(sql("restore"))?;
        let (parent, body, delta) =
            row.ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq: s })?;
        let parent = parent.map(u);
        if parent.is_some_and(|p| p >= s) {
            return Err(JournalError::Corrupt {
                session: session.to_string(),
                seq: s,
                problem: "parent is not an earlier event".into(),
            });
        }
        let (body, delta) = decode(session, s, &body, delta.as_deref())?;
        chain.push((s, parent, body, delta));
        cur = parent;
    }
    for (s, parent, body, delta) in chain.into_iter().rev() {
        base.apply(session, s, parent, &body, delta.as_ref())?;
    }
    Ok((seq, base))
}

fn store_message(conn: &Connection, clock: &dyn Clock, m: &Message) -> Result<MsgHash, JournalError> {
    let json = serde_json::to_vec(m).map_err(|e| JournalError::Invalid(e.to_string()))?;
    let hash = message_hash(&json);
    if json.len() <= LARGE_MESSAGE {
        conn.prepare_cached("INSERT OR IGNORE INTO messages (hash, body, ccr_key) VALUES (?1, ?2, NULL)")
            .and_then(|mut st| st.execute(params![&hash[..], json]))
            .map_err(sql("store message"))?;
        return Ok(hash);
    }
    let exists = conn
        .prepare_cached("SELECT 1 FROM messages WHERE hash = ?1")
        .and_then(|mut st| st.exists([&hash[..]]))
        .map_err(sql("store message"))?;
    if exists {
        return Ok(hash);
    }
    if json.len() > LARGE_MESSAGE {
        let ccr = Ccr::new(conn, clock);
        let key = ccr.put(&json).map_err(|e| JournalError::Invalid(e.to_string()))?.key;
        ccr.reference(&key, CCR_OWNER).map_err(|e| JournalError::Invalid(e.to_string()))?;
        conn.prepare_cached("INSERT INTO messages (hash, body, ccr_key) VALUES (?1, NULL, ?2)")
            .and_then(|mut st| st.execute(params![&hash[..], &key.0[..]]))
            .map_err(sql("store message"))?;
    } else {
        conn.prepare_cached("INSERT INTO messages (hash, body, ccr_key) VALUES (?1, ?2, NULL)")
            .and_then(|mut st| st.execute(params![&hash[..], json]))
            .map_err(sql("store message"))?;
    }
    Ok(hash)
}

/// A decoded message: its hash, the message, and whether its bytes match the hash.
type Decoded = (MsgHash, Message, bool);

/// Loads and verifies the messages of a history state (repeats decoded once), fetching the
/// rows in one statement.
fn load_history(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
) -> Result<Vec<Message>, JournalError> {
    let clock = SysClock;
    let corrupt = |problem: String| JournalError::Corrupt { session: session.to_string(), seq, problem };
    let mut unique: Vec<MsgHash> = hashes.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let keys: std::rc::Rc<Vec<rusqlite::types::Value>> =
        std::rc::Rc::new(unique.iter().map(|h| rusqlite::types::Value::Blob(h.to_vec())).collect());
    let mut st = conn
        .prepare_cached("SELECT m.hash, m.body, m.ccr_key FROM rarray(?1) AS k CROSS JOIN messages AS m ON m.hash = k.value")
        .map_err(sql("restore"))?;
    let mut rows = st.query([keys]).map_err(sql("restore"))?;
    let mut fetched: Vec<(MsgHash, Vec<u8>)> = Vec::with_capacity(unique.len());
    while let Some(r) = rows.next().map_err(sql("restore"))? {
        let h = to32(&r.get::<_, Vec<u8>>(0).map_err(sql("restore"))?);
        let body: Option<Vec<u8>> = r.get(1).map_err(sql("restore"))?;
        let key: Option<Vec<u8>> = r.get(2).map_err(sql("restore"))?;
        let json = match (body, key) {
            (Some(b), _) => b,
            (None, Some(k)) => Ccr::new(conn, &clock)
                .get_key(&CcrKey(to32(&k)))
                .map_err(|e| corrupt(format!("message {} in CCR: {e}", hex(&h))))?,
            (None, None) => return Err(corrupt(format!("message {} has no content", hex(&h)))),
        };
        fetched.push((h, json));
    }
    // Verify and decode on every core: restores are latency-sensitive and the rows are independent.
    // A body that does not match its hash is accepted only for a message recorded as redacted.
    let decode = |chunk: &[(MsgHash, Vec<u8>)]| -> Result<Vec<Decoded>, String> {
        chunk
            .iter()
            .map(|(h, json)| {
                let matches = message_hash(json) == *h;
                serde_json::from_slice::<Message>(json)
                    .map(|m| (*h, m, matches))
                    .map_err(|e| format!("message {} does not decode: {e}", hex(h)))
            })
            .collect()
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
    let parts: Vec<Result<Vec<Decoded>, String>> = if threads > 1 && fetched.len() >= 128 {
        let size = fetched.len().div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = fetched.chunks(size).map(|c| s.spawn(move || decode(c))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a decoder thread panicked".into())))
                .collect()
        })
    } else {
        vec![decode(&fetched)]
    };
    let mut decoded: HashMap<MsgHash, Message> = HashMap::with_capacity(unique.len());
    for p in parts {
        for (h, m, matches) in p.map_err(corrupt)? {
            if !matches && !is_redacted(conn, &h)? {
                return Err(corrupt(format!("message {} does not match its hash", hex(&h))));
            }
            decoded.insert(h, m);
        }
    }
    // Hand each message over without a copy, cloning only for repeats.
    let mut remaining: HashMap<MsgHash, usize> = HashMap::with_capacity(unique.len());
    for h in hashes {
        *remaining.entry(*h).or_insert(0) += 1;
    }
    let mut out = Vec::with_capacity(hashes.len());
    for h in hashes {
        let left = remaining.get_mut(h).ok_or_else(|| corrupt(format!("message {} is missing", hex(h))))?;
        *left -= 1;
        let m = if *left == 0 { decoded.remove(h) } else { decoded.get(h).cloned() };
        out.push(m.ok_or_else(|| corrupt(format!("message {} is missing", hex(h))))?);
    }
    Ok(out)
}

/// Loads and verifies the messages with these hashes, in order.
pub(crate) fn load_messages(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
) -> Result<Vec<Message>, JournalError> {
    load_history(conn, session, seq, hashes)
}

/// Parses a hex message hash (for tools reading deltas).
pub fn parse_hash(s: &str) -> Option<MsgHash> {
    unhex(s)
}
