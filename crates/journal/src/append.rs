//! Appending: the one transaction that stores a batch of events (their messages, the hash chain,
//! CCR references and snapshots), starting sessions, rewinds, undo and redaction.

use crate::error::{i, sql, stored_hash, stored_u64, JournalError};
use crate::event::{rfc3339, Appended, HistoryChange, NewEvent, Parent};
use crate::fresh::Fresh;
use crate::hash_chain;
use crate::messages::{any_redacted, is_redacted, stage_message, store_staged, CCR_OWNER};
use crate::open::Journal;
use crate::redact::redact_message;
use crate::restore::{event_depth, fold, snapshot_interval};
use crate::snapshot;
use crate::state::{diff, hex, Delta, MsgHash, State};
use crate::write_tx::WriteTx;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use salvage_ccr::{Ccr, Clock};
use salvage_types::event::EventBody;
use salvage_types::Message;

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

/// `v + 1` for a sequence number or depth; 2^64 events cannot happen, but a corrupt stored value
/// near the limit is an error rather than a wrap.
fn next(session: &str, v: u64) -> Result<u64, JournalError> {
    v.checked_add(1).ok_or_else(|| JournalError::corrupt(session, v, "no sequence number follows this one"))
}

/// The session's head: its latest seq and chain hash.
fn session_head(tx: &Connection, session: &str) -> Result<(u64, [u8; 32]), JournalError> {
    let (seq, hash): (i64, Vec<u8>) = tx
        .prepare_cached("SELECT head_seq, head_hash FROM sessions WHERE id = ?1")
        .and_then(|mut st| st.query_row([session], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(sql("append"))?
        .ok_or_else(|| JournalError::NoSession(session.to_string()))?;
    let seq = stored_u64(session, 0, "the session's head_seq", seq)?;
    Ok((seq, stored_hash(session, seq, "the session's head_hash", &hash)?))
}

/// The session's head as [`session_head`] reads it, and the head event's depth (read in the
/// same statement: an event appended after the head needs it; `None` before the first event).
fn session_head_depth(tx: &Connection, session: &str) -> Result<(u64, [u8; 32], Option<u64>), JournalError> {
    type Head = (i64, Vec<u8>, Option<i64>);
    let (seq, hash, depth): Head = tx
        .prepare_cached(
            "SELECT head_seq, head_hash,
                    (SELECT depth FROM events AS e WHERE e.session_id = s.id AND e.seq = s.head_seq)
             FROM sessions AS s WHERE s.id = ?1",
        )
        .and_then(|mut st| st.query_row([session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(sql("append"))?
        .ok_or_else(|| JournalError::NoSession(session.to_string()))?;
    let seq = stored_u64(session, 0, "the session's head_seq", seq)?;
    let hash = stored_hash(session, seq, "the session's head_hash", &hash)?;
    // A head without its event row is left to the event's own lookup, which reports it when an
    // event continues the head.
    let depth = depth.map(|d| stored_u64(session, seq, "depth", d)).transpose()?;
    Ok((seq, hash, depth))
}

/// Runs what `begin` asks before the events, inside the transaction.
fn begin(
    tx: &Connection,
    clock: &dyn Clock,
    session: &str,
    begin: Begin<'_>,
    first: &NewEvent,
) -> Result<(), JournalError> {
    match begin {
        Begin::Existing => Ok(()),
        Begin::NewSession { title, created, capture } => tx
            .execute(
                "INSERT INTO sessions (id, title, created_at, head_seq, head_hash, capture_id) VALUES (?1, ?2, ?3, 0, ?4, ?5)",
                params![session, title, created, &[0u8; 32][..], capture],
            )
            .map(|_| ())
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                    JournalError::SessionExists(session.to_string())
                }
                other => JournalError::Sql { op: "start session", source: other },
            }),
        Begin::Redact(redactions) => {
            let seq = next(session, session_head(tx, session)?.0)?;
            let at = rfc3339(&first.ts);
            for (hash, replacement) in redactions {
                redact_message(tx, clock, session, seq, &at, hash, replacement)?;
            }
            Ok(())
        }
    }
}

/// The state an event continues, its parent and its depth. `cur` is the state after the
/// previous event of the batch (taken when the event continues it).
fn parent_state(
    tx: &Connection,
    session: &str,
    seq: u64,
    parent: Parent,
    cur: &mut (u64, State, Option<u64>),
) -> Result<(Option<u64>, State, u64), JournalError> {
    match parent {
        Parent::Head if cur.0 == 0 => Ok((None, std::mem::take(&mut cur.1), 0)),
        Parent::Head => {
            let depth = match cur.2 {
                Some(d) => d,
                None => event_depth(tx, session, cur.0)?,
            };
            Ok((Some(cur.0), std::mem::take(&mut cur.1), next(session, depth)?))
        }
        Parent::Seq(p) => {
            if p == 0 || p >= seq {
                return Err(JournalError::Invalid(format!(
                    "session {session}: parent {p} is not an earlier event"
                )));
            }
            let cached = (cur.0, std::mem::take(&mut cur.1));
            let st = fold(tx, session, p, Some(&cached))?;
            cur.1 = cached.1;
            Ok((Some(p), st, next(session, event_depth(tx, session, p)?)?))
        }
    }
}

/// An event's history splice: the delta as stored, and the hashes it inserts.
type Splice = Option<(Delta, Vec<MsgHash>)>;

/// What a batch stages of its messages' JSON at most ([`Staged`]): as much as [`Fresh`] keeps
/// for a snapshot. The messages past it (a long history, a session's start) are serialized
/// under the turn as they are stored, so a history and its JSON are never both whole in memory.
const STAGE_BUDGET: usize = 4 << 20;

/// An event's messages: the first ones staged ([`stage_message`]: hash and JSON), the rest
/// still messages, in order.
struct Messages {
    staged: Vec<(MsgHash, Vec<u8>)>,
    rest: Rest,
}

/// The messages of an event past the staging budget.
enum Rest {
    /// Owned by the event: each is dropped once serialized.
    Owned(std::vec::IntoIter<Message>),
    /// Shared with the writer, from this index on.
    Shared(std::sync::Arc<Vec<Message>>, usize),
}

impl Messages {
    /// Stages messages while `budget` lasts (each message dropped once serialized, when the
    /// event owns it), and keeps the rest.
    fn stage(msgs: Source, budget: &mut usize) -> Result<Messages, JournalError> {
        let mut staged = Vec::new();
        let mut take = |m: &Message, budget: &mut usize| -> Result<(), JournalError> {
            let (hash, json) = stage_message(m)?;
            *budget = budget.saturating_sub(json.len());
            staged.push((hash, json));
            Ok(())
        };
        let rest = match msgs {
            Source::Owned(v) => {
                let mut it = v.into_iter();
                while *budget > 0 {
                    let Some(m) = it.next() else { break };
                    take(&m, budget)?;
                }
                Rest::Owned(it)
            }
            Source::Shared(v) => {
                let mut at = 0;
                while *budget > 0 {
                    let Some(m) = v.get(at) else { break };
                    take(m, budget)?;
                    at = at.saturating_add(1);
                }
                Rest::Shared(v, at)
            }
        };
        Ok(Messages { staged, rest })
    }

    /// Hands `each` every message as stored (hash and JSON), in order: the staged ones, then
    /// the rest serialized one at a time.
    fn each(
        self,
        mut each: impl FnMut((MsgHash, Vec<u8>)) -> Result<MsgHash, JournalError>,
    ) -> Result<Vec<MsgHash>, JournalError> {
        let mut hashes = Vec::with_capacity(self.staged.len());
        for item in self.staged {
            hashes.push(each(item)?);
        }
        match self.rest {
            Rest::Owned(it) => {
                for m in it {
                    hashes.push(each(stage_message(&m)?)?);
                }
            }
            Rest::Shared(v, at) => {
                for m in v.get(at..).unwrap_or_default() {
                    hashes.push(each(stage_message(m)?)?);
                }
            }
        }
        Ok(hashes)
    }
}

/// Messages as an event carries them.
enum Source {
    Owned(Vec<Message>),
    Shared(std::sync::Arc<Vec<Message>>),
}

/// An event's history change, staged.
enum StagedHistory {
    /// The event does not change the history.
    None,
    /// Messages appended at the end.
    Append(Messages),
    /// The whole history is now these.
    Set(Messages),
}

/// The work of an event that needs no connection, done before the append takes its write
/// turn, so another writer of the file does not wait for it: its messages serialized and
/// hashed (within [`STAGE_BUDGET`]), its body serialized, its originals compressed. Under the
/// turn run the SQL, the snapshot (which reads what is stored) and the messages past the budget.
struct Staged {
    history: StagedHistory,
    body: Vec<u8>,
    archive: salvage_ccr::Staged<'static>,
}

/// Stages an event's history while `budget` lasts.
fn stage_history(h: HistoryChange, budget: &mut usize) -> Result<StagedHistory, JournalError> {
    Ok(match h {
        HistoryChange::None => StagedHistory::None,
        HistoryChange::Append(msgs) if msgs.is_empty() => StagedHistory::None,
        HistoryChange::AppendShared(msgs) if msgs.is_empty() => StagedHistory::None,
        HistoryChange::Append(msgs) => StagedHistory::Append(Messages::stage(Source::Owned(msgs), budget)?),
        HistoryChange::AppendShared(msgs) => {
            StagedHistory::Append(Messages::stage(Source::Shared(msgs), budget)?)
        }
        HistoryChange::Set(msgs) => StagedHistory::Set(Messages::stage(Source::Owned(msgs), budget)?),
    })
}

/// Stages every event of a batch ([`Staged`]). The originals leave the events (a failed append
/// keeps only what recognises a retry: ids, times, bodies); each one compressed is dropped once
/// compressed, and its stored form once inserted.
fn stage(events: &mut [NewEvent]) -> Result<Vec<Staged>, JournalError> {
    let mut budget = STAGE_BUDGET;
    events
        .iter_mut()
        .map(|e| {
            Ok(Staged {
                history: stage_history(std::mem::take(&mut e.history), &mut budget)?,
                body: serde_json::to_vec(&e.body).map_err(|x| JournalError::Invalid(x.to_string()))?,
                archive: Ccr::stage_owned(
                    std::mem::take(&mut e.archive),
                    salvage_ccr::archive::DEFAULT_MAX_BLOB_BYTES,
                )
                .map_err(|x| JournalError::Invalid(x.to_string()))?,
            })
        })
        .collect()
}

/// Stores an event's staged messages and returns its history splice against `state`. The JSON
/// of each message goes into `fresh`, for the next snapshot: a message this call stored, and
/// one stored before unless a redaction may have replaced its row (`redactions`: the file
/// records any; the transaction holds the write lock, so none happens meanwhile). Otherwise the
/// stored row holds exactly these bytes (they hash to its key), and reading them back would
/// only cost.
fn store_history(
    tx: &Connection,
    clock: &dyn Clock,
    state: &State,
    h: StagedHistory,
    fresh: &mut Fresh,
    redactions: bool,
) -> Result<Splice, JournalError> {
    let mut store = |(hash, json): (MsgHash, Vec<u8>)| -> Result<MsgHash, JournalError> {
        let stored = store_staged(tx, clock, &hash, &json)?;
        if stored || !redactions || !is_redacted(tx, &hash)? {
            fresh.keep(hash, json);
        }
        Ok(hash)
    };
    match h {
        StagedHistory::None => Ok(None),
        StagedHistory::Append(msgs) => Ok(Some(appended(state, msgs.each(&mut store)?))),
        StagedHistory::Set(msgs) => {
            let hashes = msgs.each(&mut store)?;
            Ok(diff(&state.history, &hashes).map(|d| {
                // diff inserts new[at..at + insert.len()].
                let inserted =
                    hashes.get(d.at..d.at.saturating_add(d.insert.len())).unwrap_or_default().to_vec();
                (d, inserted)
            }))
        }
    }
}

/// The splice of messages appended after `state`'s history.
fn appended(state: &State, hashes: Vec<MsgHash>) -> (Delta, Vec<MsgHash>) {
    (Delta { at: state.history.len(), remove: 0, insert: hashes.iter().map(hex).collect() }, hashes)
}

/// Inserts the event row.
fn insert_event(
    tx: &Connection,
    row: &hash_chain::Row<'_>,
    prev: &[u8; 32],
    hash: &[u8; 32],
) -> Result<(), JournalError> {
    // A file at an earlier schema (kept there by a test) has no blobs_hash column; its rows
    // never carry one.
    tx.prepare_cached(if row.blobs.is_some() {
        "INSERT INTO events (session_id, seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash, snapshot_hash, blobs_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    } else {
        "INSERT INTO events (session_id, seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash, snapshot_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    })
    .and_then(|mut st| {
        let base: &[&dyn rusqlite::ToSql] = params![
            row.session,
            i(row.seq),
            row.event_id,
            row.parent.map(i),
            i(row.depth),
            row.kind,
            row.kind_version,
            row.ts,
            row.body,
            row.delta,
            &prev[..],
            &hash[..],
            row.snapshot.map(|h| &h[..]),
        ];
        match row.blobs {
            Some(b) => {
                let b: &[u8] = &b[..];
                let mut all = base.to_vec();
                all.push(&b);
                st.execute(all.as_slice())
            }
            None => st.execute(base),
        }
    })
    .map(|_| ())
    .map_err(|x| match x {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
            JournalError::IdReused(row.event_id.to_string())
        }
        other => JournalError::Sql { op: "append", source: other },
    })
}

/// Archives the event's staged originals and records every blob it references.
fn link_blobs(
    tx: &Connection,
    clock: &dyn Clock,
    session: &str,
    seq: u64,
    e: &NewEvent,
    archive: &salvage_ccr::Staged<'_>,
) -> Result<(), JournalError> {
    if e.blobs.is_empty() && archive.is_empty() {
        return Ok(());
    }
    let ccr = Ccr::new(tx, clock);
    let ccr_err = |x: salvage_ccr::CcrError| JournalError::Invalid(x.to_string());
    let mut keys = e.blobs.clone();
    // Compressed before the write turn ([`stage`]), with the keys that came with them.
    for k in ccr.put_staged(archive).map_err(ccr_err)?.into_iter().map(|p| p.key) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for k in &keys {
        if !ccr.contains(k).map_err(ccr_err)? {
            return Err(JournalError::MissingBlob(k.hex()));
        }
        ccr.reference(k, CCR_OWNER).map_err(ccr_err)?;
        tx.prepare_cached(
            "INSERT OR IGNORE INTO event_blobs (session_id, seq, blob_key) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut st| st.execute(params![session, i(seq), &k.0[..]]))
        .map_err(sql("append"))?;
    }
    Ok(())
}

/// Builds a snapshot of `state` (the state after the event) when `depth` is on the snapshot
/// interval, extending `last` (which it then replaces); its hash goes into the event row, so the
/// chain vouches for it.
fn maybe_snapshot(
    tx: &Connection,
    session: &str,
    seq: u64,
    depth: u64,
    state: &State,
    last: &mut Option<snapshot::Last>,
    fresh: &mut Fresh,
) -> Result<Option<snapshot::Written>, JournalError> {
    if depth == 0 || depth.checked_rem(snapshot_interval(state.history.len())) != Some(0) {
        return Ok(None);
    }
    let (written, now) = snapshot::build(tx, session, seq, state, last.as_ref(), &fresh.json)?;
    *last = Some(now);
    fresh.clear();
    Ok(Some(written))
}

/// Where a batch stands: the chain head and the state after the latest event.
struct Cursor {
    seq: u64,
    prev_hash: [u8; 32],
    /// (seq, state after it, its depth when known).
    state: (u64, State, Option<u64>),
    /// The latest snapshot of the session, when known.
    last: Option<snapshot::Last>,
    /// The JSON of the messages appended since the latest snapshot (by this transaction, or by
    /// this handle's earlier ones: [`Fresh::resume`]), when the stored rows hold exactly these
    /// bytes (see [`store_history`]).
    fresh: Fresh,
    /// The file records redactions: a message stored before may hold other bytes than its key's.
    redactions: bool,
    /// Events record the CCR keys they reference ([`crate::hash_chain::blobs_digest`]).
    vouch_blobs: bool,
}

/// Appends one event at `cursor.seq + 1`.
fn append_one(
    tx: &Connection,
    clock: &dyn Clock,
    session: &str,
    cursor: &mut Cursor,
    e: &NewEvent,
    staged: Staged,
) -> Result<Appended, JournalError> {
    let seq = next(session, cursor.seq)?;
    let (parent, mut state, depth) = parent_state(tx, session, seq, e.parent, &mut cursor.state)?;
    let (delta, inserted) =
        store_history(tx, clock, &state, staged.history, &mut cursor.fresh, cursor.redactions)?.unzip();
    let body = staged.body;
    let delta_bytes = delta
        .as_ref()
        .map(serde_json::to_vec)
        .transpose()
        .map_err(|x| JournalError::Invalid(x.to_string()))?;
    let ts = rfc3339(&e.ts);
    state.apply_inserted(session, seq, parent, &e.body, delta.as_ref().zip(inserted))?;
    let snap = maybe_snapshot(tx, session, seq, depth, &state, &mut cursor.last, &mut cursor.fresh)?;
    let keys: Vec<[u8; 32]> = e.blobs.iter().map(|k| k.0).chain(staged.archive.keys().map(|k| k.0)).collect();
    let blobs = if cursor.vouch_blobs { hash_chain::blobs_digest(&keys) } else { None };
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
        snapshot: snap.as_ref().map(|w| &w.hash),
        blobs: blobs.as_ref(),
    };
    let hash = hash_chain::link(&cursor.prev_hash, &row);
    insert_event(tx, &row, &cursor.prev_hash, &hash)?;
    link_blobs(tx, clock, session, seq, e, &staged.archive)?;
    // Their compressed forms are stored: not held while the rest of the batch appends.
    drop(staged.archive);
    if let Some(w) = &snap {
        snapshot::write(tx, session, seq, w)?;
    }
    cursor.seq = seq;
    cursor.prev_hash = hash;
    cursor.state = (seq, state, Some(depth));
    Ok(Appended { seq, hash, inserted: true })
}

impl Journal {
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
        mut first: NewEvent,
    ) -> Result<Appended, JournalError> {
        let exists = self
            .conn()
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .and_then(|mut st| st.exists([id]))
            .map_err(sql("start session"))?;
        if exists {
            // A retried start with the same first event id is the original.
            let same: Option<(i64, Vec<u8>)> = self
                .conn()
                .prepare_cached("SELECT seq, hash FROM events WHERE event_id = ?1 AND session_id = ?2")
                .and_then(|mut st| {
                    st.query_row(params![first.event_id, id], |r| Ok((r.get(0)?, r.get(1)?))).optional()
                })
                .map_err(sql("start session"))?;
            let (seq, hash) = same.ok_or_else(|| JournalError::SessionExists(id.to_string()))?;
            let seq = stored_u64(id, 0, "seq", seq)?;
            return Ok(Appended { seq, hash: stored_hash(id, seq, "hash", &hash)?, inserted: false });
        }
        // The session row and its first event commit together: a kill or a full disk between
        // them would leave a session that cannot be restored.
        let created = rfc3339(&first.ts);
        let mut appended = self.append_tx(
            id,
            Some(0),
            std::slice::from_mut(&mut first),
            Begin::NewSession { title, created: &created, capture },
        )?;
        appended.pop().ok_or_else(|| JournalError::Invalid("no event appended".into()))
    }

    /// Appends events in one transaction. With `expected`, the session must be at that version,
    /// else [`JournalError::Conflict`]. A retried batch (same event ids) returns the originals.
    pub fn append(
        &mut self,
        session: &str,
        expected: Option<u64>,
        mut events: Vec<NewEvent>,
    ) -> Result<Vec<Appended>, JournalError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        // Idempotent retry: the first id already stored means the whole batch was. A batch whose
        // first id is stored cannot append (its first event would reuse the id, which the
        // `events` table refuses), so the lookup waits for a failed append instead of costing
        // every append a query before it.
        match self.append_tx(session, expected, &mut events, Begin::Existing) {
            Ok(appended) => Ok(appended),
            Err(e) => match self.find_event_ids(session, &events)? {
                Some(found) => Ok(found),
                None => Err(e),
            },
        }
    }

    /// The stored events of a retried batch, or `None` when its first id is new.
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
        let mut find = |id: &str| -> Result<Option<Found>, JournalError> {
            st.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                .optional()
                .map_err(sql("append"))
        };
        let Some((s, ..)) = find(&first.event_id)? else { return Ok(None) };
        if s != session {
            return Err(JournalError::IdReused(first.event_id.clone()));
        }
        let mut out = Vec::new();
        for e in events {
            // A retry is the same event: same time and the same body. Anything else reusing the
            // id is refused instead of silently answered with the original.
            let body = serde_json::to_vec(&e.body).map_err(|x| JournalError::Invalid(x.to_string()))?;
            match find(&e.event_id)? {
                Some((s, seq, hash, ts, stored))
                    if s == session && ts == rfc3339(&e.ts) && stored == body =>
                {
                    let seq = stored_u64(session, 0, "seq", seq)?;
                    out.push(Appended {
                        seq,
                        hash: stored_hash(session, seq, "hash", &hash)?,
                        inserted: false,
                    })
                }
                _ => return Err(JournalError::IdReused(e.event_id.clone())),
            }
        }
        Ok(Some(out))
    }

    /// The append transaction: `begin`, the version check, each event, the new head. The head
    /// cache is taken for the transaction and put back only when it commits.
    fn append_tx(
        &mut self,
        session: &str,
        expected: Option<u64>,
        events: &mut [NewEvent],
        what: Begin<'_>,
    ) -> Result<Vec<Appended>, JournalError> {
        let cached = self.head.remove(session);
        // The writer's latest snapshot holds only while its head does, and not across a
        // redaction (which drops the rows holding the redacted messages).
        let last = self.snapshots.remove(session).filter(|_| matches!(what, Begin::Existing));
        let carried = Fresh::take_for(&mut self.fresh, session).filter(|_| matches!(what, Begin::Existing));
        let clock = self.clock.clone();
        // Every event's work that needs no connection is done before the write turn.
        let staged = stage(events)?;
        let tx = WriteTx::begin(&self.store)?;
        let first = events.first().ok_or_else(|| JournalError::Invalid("no event to append".into()))?;
        begin(&tx, clock.as_ref(), session, what, first)?;
        let (head_seq, head_hash, head_depth) = session_head_depth(&tx, session)?;
        if let Some(exp) = expected.filter(|e| *e != head_seq) {
            return Err(JournalError::Conflict {
                session: session.to_string(),
                expected: exp,
                actual: head_seq,
            });
        }
        let (state, last, carried) = match cached {
            Some((s, st)) if s == head_seq => (st, last, carried),
            _ if head_seq == 0 => (State::default(), None, None),
            _ => (fold(&tx, session, head_seq, None)?, None, None),
        };
        let redactions = any_redacted(&tx)?;
        let mut cursor = Cursor {
            seq: head_seq,
            prev_hash: head_hash,
            state: (head_seq, state, head_depth),
            last,
            fresh: Fresh::resume(carried, redactions),
            redactions,
            vouch_blobs: self.vouch_blobs,
        };
        let mut appended = Vec::with_capacity(events.len());
        for (e, staged) in events.iter().zip(staged) {
            appended.push(append_one(&tx, clock.as_ref(), session, &mut cursor, e, staged)?);
        }
        tx.prepare_cached("UPDATE sessions SET head_seq = ?1, head_hash = ?2 WHERE id = ?3")
            .and_then(|mut st| st.execute(params![i(cursor.seq), &cursor.prev_hash[..], session]))
            .map_err(sql("append"))?;
        tx.commit()?;
        let (seq, state, _) = cursor.state;
        self.head.insert(session.to_string(), (seq, state));
        if let Some(last) = cursor.last {
            self.snapshots.insert(session.to_string(), last);
        }
        self.fresh = cursor.fresh.carry().map(|f| (session.to_string(), f));
        Ok(appended)
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
        mut event: NewEvent,
    ) -> Result<Appended, JournalError> {
        let v = self.version(session)?;
        let mut out =
            self.append_tx(session, Some(v), std::slice::from_mut(&mut event), Begin::Redact(redactions))?;
        out.pop().ok_or_else(|| JournalError::Invalid("no event appended".into()))
    }
}
