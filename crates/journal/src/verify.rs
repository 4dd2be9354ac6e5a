//! Verification: each session's hash chain, gapless sequence, parent links and depths, bodies,
//! history deltas (every message present and matching its hash) and CCR references, after
//! SQLite's own structural check. It reports the first bad event of each bad session and
//! writes nothing.

use crate::error::{i, sql, stored_hash, stored_u32, stored_u64, JournalError};
use crate::hash_chain::{self, Row};
use crate::messages::is_redacted;
use crate::open::Journal;
use crate::snapshot_audit::{Audit, Row as SnapshotRow};
use crate::state::{unhex, Delta, MsgHash};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashSet;

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
    /// Sound sessions whose last recovery run was cut short (a request after their last
    /// `run_ended`: a killed process, a full disk): their outcome is unknown, not `exhausted`.
    /// Not a failure of integrity; said so that an audit does not read them as finished.
    pub incomplete: Vec<String>,
}

/// One stored event row as `verify` reads it.
struct Record {
    seq: u64,
    event_id: String,
    parent: Option<u64>,
    depth: u64,
    kind: String,
    kind_version: u32,
    ts: String,
    body: Vec<u8>,
    delta: Option<Vec<u8>>,
    prev_hash: Vec<u8>,
    hash: Vec<u8>,
    snapshot_hash: Option<[u8; 32]>,
    blobs_hash: Option<[u8; 32]>,
}

const RECORD_COLUMNS: &str =
    "seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash, snapshot_hash, blobs_hash";

/// Reads a row; `at` names the event expected there (for a row whose own seq is corrupt).
fn record(session: &str, at: u64, r: &rusqlite::Row<'_>) -> Result<Record, JournalError> {
    // A column of another type than the one written (a BLOB retyped as TEXT by hand keeps its
    // bytes) is a problem of this event, not a failure of verify.
    let g = |e| match e {
        rusqlite::Error::InvalidColumnType(_, name, ty) => JournalError::corrupt(
            session,
            at,
            format!("column {name} is stored as {ty}, not as written (the row was retyped)"),
        ),
        e => JournalError::Sql { op: "verify", source: e },
    };
    let seq = stored_u64(session, at, "seq", r.get(0).map_err(g)?)?;
    let parent: Option<i64> = r.get(2).map_err(g)?;
    Ok(Record {
        seq,
        event_id: r.get(1).map_err(g)?,
        parent: parent.map(|p| stored_u64(session, seq, "parent", p)).transpose()?,
        depth: stored_u64(session, seq, "depth", r.get(3).map_err(g)?)?,
        kind: r.get(4).map_err(g)?,
        kind_version: stored_u32(session, seq, "kind_version", r.get(5).map_err(g)?)?,
        ts: r.get(6).map_err(g)?,
        body: r.get(7).map_err(g)?,
        delta: r.get(8).map_err(g)?,
        prev_hash: r.get(9).map_err(g)?,
        hash: r.get(10).map_err(g)?,
        snapshot_hash: r
            .get::<_, Option<Vec<u8>>>(11)
            .map_err(g)?
            .map(|h| stored_hash(session, seq, "snapshot_hash", &h))
            .transpose()?,
        blobs_hash: r
            .get::<_, Option<Vec<u8>>>(12)
            .map_err(g)?
            .map(|h| stored_hash(session, seq, "blobs_hash", &h))
            .transpose()?,
    })
}

/// A problem at an event.
type Problem = (u64, String);

/// The walk over one session's events in order.
struct Walk<'c> {
    conn: &'c Connection,
    session: &'c str,
    prev: [u8; 32],
    /// Depth and history length after each event so far (index = seq - 1).
    depths: Vec<u64>,
    lens: Vec<usize>,
    checked_msgs: HashSet<MsgHash>,
}

impl Walk<'_> {
    fn expected_seq(&self) -> u64 {
        u64::try_from(self.depths.len()).unwrap_or(u64::MAX).saturating_add(1)
    }

    /// Depth and history length after an earlier event.
    fn after(&self, seq: u64) -> Option<(u64, usize)> {
        let k = usize::try_from(seq.checked_sub(1)?).ok()?;
        Some((*self.depths.get(k)?, *self.lens.get(k)?))
    }

    /// Checks one event; `Ok(Some(problem))` when it is bad.
    fn check(&mut self, r: &Record) -> Result<Option<Problem>, JournalError> {
        let seq = r.seq;
        let expected = self.expected_seq();
        if seq != expected {
            return Ok(Some((
                expected,
                format!("event {expected} is missing (found {seq} next): the sequence has a gap"),
            )));
        }
        if r.prev_hash != self.prev {
            let why = "link to the previous event does not match (an event was removed, reordered or edited)";
            return Ok(Some((seq, why.into())));
        }
        let row = Row {
            session: self.session,
            seq,
            event_id: &r.event_id,
            parent: r.parent,
            depth: r.depth,
            kind: &r.kind,
            kind_version: r.kind_version,
            ts: &r.ts,
            body: &r.body,
            delta: r.delta.as_deref(),
            snapshot: r.snapshot_hash.as_ref(),
            blobs: r.blobs_hash.as_ref(),
        };
        if hash_chain::link(&self.prev, &row)[..] != r.hash[..] {
            return Ok(Some((seq, "hash does not match the stored bytes (the event was edited)".into())));
        }
        // Parent link: an earlier event, and the depth follows from it.
        let (want_depth, parent_len) = match r.parent {
            None => (0, 0),
            Some(p) => match self.after(p).filter(|_| p < seq) {
                Some((d, len)) => (d.saturating_add(1), len),
                None => return Ok(Some((seq, format!("parent {p} is not an earlier event")))),
            },
        };
        if r.depth != want_depth {
            return Ok(Some((
                seq,
                format!("depth {} does not follow from parent (expected {want_depth})", r.depth),
            )));
        }
        match serde_json::from_slice::<salvage_types::event::EventBody>(&r.body) {
            Ok(b) if b.kind() == r.kind => {}
            Ok(b) => {
                return Ok(Some((
                    seq,
                    format!("kind column {:?} disagrees with the body ({})", r.kind, b.kind()),
                )))
            }
            Err(e) => return Ok(Some((seq, format!("body does not decode: {e}")))),
        }
        let len = match self.check_delta(r.delta.as_deref(), parent_len)? {
            Ok(len) => len,
            Err(problem) => return Ok(Some((seq, problem))),
        };
        if let Some(problem) = self.check_blobs(seq, r.blobs_hash.as_ref())? {
            return Ok(Some((seq, problem)));
        }
        self.depths.push(r.depth);
        self.lens.push(len);
        self.prev = stored_hash(self.session, seq, "hash", &r.hash)?;
        Ok(None)
    }

    /// The history delta: well-formed, within bounds, every message present and matching its
    /// hash. Returns the history length after it, or the problem.
    fn check_delta(
        &mut self,
        delta: Option<&[u8]>,
        parent_len: usize,
    ) -> Result<Result<usize, String>, JournalError> {
        let Some(d) = delta else { return Ok(Ok(parent_len)) };
        let d: Delta = match serde_json::from_slice(d) {
            Ok(d) => d,
            Err(e) => return Ok(Err(format!("history delta does not decode: {e}"))),
        };
        let Some(kept) =
            d.at.checked_add(d.remove)
                .filter(|end| *end <= parent_len)
                .map(|_| parent_len.saturating_sub(d.remove))
        else {
            return Ok(Err("history delta is outside the parent's history".into()));
        };
        for h in &d.insert {
            let Some(hash) = unhex(h) else { return Ok(Err(format!("bad message hash {h:?}"))) };
            if self.checked_msgs.insert(hash) {
                if let Some(problem) = self.check_message(h, &hash)? {
                    return Ok(Err(problem));
                }
            }
        }
        Ok(Ok(kept.saturating_add(d.insert.len())))
    }

    fn check_message(&self, h: &str, hash: &MsgHash) -> Result<Option<String>, JournalError> {
        type StoredMessage = (Option<Vec<u8>>, Option<Vec<u8>>);
        let row: Option<StoredMessage> = self
            .conn
            .prepare_cached("SELECT body, ccr_key FROM messages WHERE hash = ?1")
            .and_then(|mut st| st.query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(sql("verify"))?;
        Ok(match row {
            Some((Some(b), _)) if blake3::hash(&b).as_bytes() == hash => None,
            Some((Some(_), _)) if is_redacted(self.conn, hash)? => None,
            Some((Some(_), _)) => Some(format!("message {h} does not match its hash")),
            // Stored in CCR: under its own hash (the key of its JSON), held by the journal, and
            // the blob decodes to bytes of that hash (a row repointed at another message's blob,
            // or a blob edited, would restore something else or nothing).
            Some((None, Some(k))) if k.as_slice() != hash.as_slice() => {
                Some(format!("message {h} names another CCR blob than its own content (the row was edited)"))
            }
            Some((None, Some(k))) => {
                let id: Option<i64> = self
                    .conn
                    .prepare_cached("SELECT id FROM ccr_blobs WHERE key = ?1")
                    .and_then(|mut st| st.query_row([&k], |r| r.get(0)).optional())
                    .map_err(sql("verify"))?;
                match id {
                    None => Some(format!("message {h} lives in CCR but its blob is gone")),
                    Some(id) if !self.held(id)? => Some(format!(
                        "message {h} lives in CCR but the journal no longer holds its blob (its ccr_refs row is gone): retention may evict it"
                    )),
                    Some(_) => crate::messages::read_blob(self.conn, &salvage_types::CcrKey(*hash))
                        .err()
                        .map(|e| format!("message {h} lives in CCR but cannot be restored from it: {e}")),
                }
            }
            _ => Some(format!("message {h} is missing")),
        })
    }

    /// The event's CCR links: its `event_blobs` rows are the keys its `blobs_hash` vouches for
    /// (an event stored before links were vouched for is listed in `event_blobs_unvouched`),
    /// every blob resolves, and the journal still holds it in `ccr_refs`, so retention cannot
    /// evict it.
    fn check_blobs(&self, seq: u64, vouched: Option<&[u8; 32]>) -> Result<Option<String>, JournalError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT b.blob_key, c.id FROM event_blobs b LEFT JOIN ccr_blobs c ON c.key = b.blob_key WHERE b.session_id = ?1 AND b.seq = ?2")
            .map_err(sql("verify"))?;
        let rows = st
            .query_map(params![self.session, i(seq)], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .map_err(sql("verify"))?;
        let mut links: Vec<([u8; 32], Option<i64>)> = Vec::new();
        for b in rows {
            let (key, id) = b.map_err(sql("verify"))?;
            links.push((stored_hash(self.session, seq, "event_blobs.blob_key", &key)?, id));
        }
        let keys: Vec<[u8; 32]> = links.iter().map(|(k, _)| *k).collect();
        match vouched {
            Some(h) if hash_chain::blobs_digest(&keys).as_ref() != Some(h) => {
                return Ok(Some(format!(
                    "its CCR references were edited: {} event_blobs row(s) where the event vouches for others (one was removed, added or moved)",
                    keys.len()
                )));
            }
            Some(_) => {}
            None if keys.is_empty() || self.unvouched(seq)? => {}
            None => {
                return Ok(Some(format!(
                    "its CCR references were edited: {} event_blobs row(s) the event does not vouch for (added or moved here)",
                    keys.len()
                )));
            }
        }
        for (key, id) in links {
            let hexkey = salvage_types::CcrKey(key).hex();
            match id {
                None => return Ok(Some(format!("referenced CCR blob {hexkey} does not resolve"))),
                Some(id) if !self.held(id)? => {
                    return Ok(Some(format!(
                        "referenced CCR blob {hexkey} is no longer held by the journal (its ccr_refs row is gone): retention may evict it"
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(None)
    }

    /// Whether the event was stored before links were vouched for and referenced blobs then.
    fn unvouched(&self, seq: u64) -> Result<bool, JournalError> {
        self.conn
            .prepare_cached("SELECT 1 FROM event_blobs_unvouched WHERE session_id = ?1 AND seq = ?2")
            .and_then(|mut st| st.exists(params![self.session, i(seq)]))
            .map_err(sql("verify"))
    }

    /// Whether the journal holds blob `id` in `ccr_refs`.
    fn held(&self, id: i64) -> Result<bool, JournalError> {
        self.conn
            .prepare_cached("SELECT 1 FROM ccr_refs WHERE blob_id = ?1 AND owner = ?2")
            .and_then(|mut st| st.exists(params![id, crate::messages::CCR_OWNER]))
            .map_err(sql("verify"))
    }
}

/// Checks one session; returns the events checked and the first bad one.
pub fn verify_session(conn: &Connection, session: &str) -> Result<(u64, Option<BadEvent>), JournalError> {
    let bad = |(seq, problem): Problem| Some(BadEvent { session: session.to_string(), seq, problem });
    let (head_seq, head_hash): (i64, Vec<u8>) = conn
        .query_row("SELECT head_seq, head_hash FROM sessions WHERE id = ?1", [session], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql("verify"))?;
    let mut st = conn
        .prepare(&format!("SELECT {RECORD_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq"))
        .map_err(sql("verify"))?;
    let mut rows = st.query([session]).map_err(sql("verify"))?;
    let mut walk = Walk {
        conn,
        session,
        prev: [0; 32],
        depths: Vec::new(),
        lens: Vec::new(),
        checked_msgs: HashSet::new(),
    };
    let mut n = 0u64;
    while let Some(r) = rows.next().map_err(sql("verify"))? {
        n = n.saturating_add(1);
        let checked = record(session, walk.expected_seq(), r).and_then(|rec| walk.check(&rec));
        match checked {
            Ok(None) => {}
            Ok(Some(problem)) => return Ok((n, bad(problem))),
            Err(JournalError::Corrupt { seq, problem, .. }) => return Ok((n, bad((seq, problem)))),
            Err(e) => return Err(e),
        }
    }
    let last = walk.expected_seq().saturating_sub(1);
    if n == 0 {
        let why = "the session has no events: it cannot be restored (its start was interrupted)";
        return Ok((0, bad((0, why.into()))));
    }
    if u64::try_from(head_seq).ok() != Some(last) {
        let why = format!(
            "the session says it has {head_seq} events but {last} are stored (the last ones were removed)"
        );
        return Ok((n, bad((walk.expected_seq(), why))));
    }
    if head_hash != walk.prev {
        return Ok((n, bad((last, "the session's chain head does not match its last event".into()))));
    }
    Ok((n, check_snapshots(conn, session)?.and_then(bad)))
}

/// Every snapshot row of the session against the hash its event records (which the chain,
/// checked before, covers), then against what the events and message rows say
/// ([`crate::snapshot_audit`]: a hash proves a row unedited, not written right). A row at an event
/// that records none is one restores never read.
fn check_snapshots(conn: &Connection, session: &str) -> Result<Option<Problem>, JournalError> {
    let mut st = conn
        .prepare(
            "SELECT s.seq, s.state, s.history, e.snapshot_hash, s.reducer_version FROM snapshots AS s
             LEFT JOIN events AS e ON e.session_id = s.session_id AND e.seq = s.seq
             WHERE s.session_id = ?1 ORDER BY s.seq",
        )
        .map_err(sql("verify"))?;
    let mut rows = st.query([session]).map_err(sql("verify"))?;
    let mut audit = Audit::default();
    while let Some(r) = rows.next().map_err(sql("verify"))? {
        let g = |e| JournalError::Sql { op: "verify", source: e };
        let seq = stored_u64(session, 0, "snapshots.seq", r.get(0).map_err(g)?)?;
        let recorded: Option<Vec<u8>> = r.get(3).map_err(g)?;
        let Some(recorded) = recorded else { continue };
        let recorded = stored_hash(session, seq, "snapshot_hash", &recorded)?;
        let state: Vec<u8> = r.get(1).map_err(g)?;
        let history: Vec<u8> = r.get(2).map_err(g)?;
        if let Some(problem) = crate::snapshot::check(&state, &history, &recorded) {
            return Ok(Some((seq, problem)));
        }
        let version: i64 = r.get(4).map_err(g)?;
        let row = SnapshotRow { seq, version, state: &state, history: &history };
        if let Some(problem) = audit.check(conn, session, &row)? {
            return Ok(Some((seq, problem)));
        }
    }
    Ok(None)
}

impl Journal {
    /// Verifies hash chains, gapless sequences, parent links, message hashes and CCR references,
    /// reporting the first bad event of each bad session.
    pub fn verify(&self, only: Option<&str>) -> Result<VerifyReport, JournalError> {
        // Ids only: a session row whose counters are corrupt is reported, not an error.
        let ids: Vec<String> = {
            let mut st = self
                .conn()
                .prepare("SELECT id FROM sessions WHERE ?1 IS NULL OR id = ?1 ORDER BY created_at, id")
                .map_err(sql("verify"))?;
            let rows = st.query_map([only], |r| r.get::<_, String>(0)).map_err(sql("verify"))?;
            rows.collect::<Result<_, _>>().map_err(sql("verify"))?
        };
        if let (Some(s), true) = (only, ids.is_empty()) {
            return Err(JournalError::NoSession(s.to_string()));
        }
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
            report.sessions = report.sessions.saturating_add(1);
            let (n, bad) = verify_session(self.conn(), &id)?;
            report.events = report.events.saturating_add(n);
            if bad.is_none() && self.session_outcome(&id)? == Some(crate::lookup::INCOMPLETE) {
                report.incomplete.push(id);
            }
            report.bad.extend(bad);
        }
        // A blob link to no event (written behind the foreign keys' back) keeps its blob alive
        // and is in no session's walk.
        let stray: Option<(String, i64)> = self
            .conn()
            .query_row(
                "SELECT b.session_id, b.seq FROM event_blobs b
                 WHERE (?1 IS NULL OR b.session_id = ?1)
                   AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = b.session_id AND e.seq = b.seq)
                 LIMIT 1",
                [only],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sql("verify"))?;
        if let Some((session, seq)) = stray {
            report.bad.push(BadEvent {
                session,
                seq: u64::try_from(seq).unwrap_or(0),
                problem: "an event_blobs row names an event that is not stored (it keeps its blob alive)"
                    .into(),
            });
        }
        Ok(report)
    }
}
