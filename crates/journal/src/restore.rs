//! Restoring: a session's state at any event, folded along its parent chain from the nearest
//! snapshot, the exact history decoded, and the events read back in order.

use crate::error::{i, sql, stored_u64, JournalError};
use crate::event::{decode, event_from_row, StoredEvent, EVENT_COLUMNS};
use crate::messages::{assemble, load_messages};
use crate::open::Journal;
use crate::read_tx::ReadTx;
use crate::snapshot;
use crate::state::{Delta, MsgHash, State};
use rusqlite::{params, Connection, OptionalExtension};
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::collections::HashMap;

/// A snapshot of the state is written every this many events along a parent chain.
pub const SNAPSHOT_EVERY: u64 = 64;

/// The snapshot interval for a history of `len` messages: at least [`SNAPSHOT_EVERY`], growing
/// with the history (a power of two, so every multiple of a larger interval is one of a smaller
/// one) so that writing snapshots costs O(1) per event amortized while a restore folds at most
/// that many small deltas.
pub fn snapshot_interval(len: usize) -> u64 {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    (len / 16).max(SNAPSHOT_EVERY).checked_next_power_of_two().unwrap_or(1 << 63)
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

/// The parent-chain depth of an event.
pub(crate) fn event_depth(conn: &Connection, session: &str, seq: u64) -> Result<u64, JournalError> {
    let depth = conn
        .prepare_cached("SELECT depth FROM events WHERE session_id = ?1 AND seq = ?2")
        .and_then(|mut st| st.query_row(params![session, i(seq)], |r| r.get::<_, i64>(0)).optional())
        .map_err(sql("read event"))?
        .ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq })?;
    stored_u64(session, seq, "depth", depth)
}

/// An event of the chain a fold applies: seq, parent, body, delta.
type Link = (u64, Option<u64>, EventBody, Option<Delta>);

/// An event row as a fold reads it: parent, body, delta.
type EventRow = (Option<i64>, Vec<u8>, Option<Vec<u8>>);

/// One event of a fold's chain, its parent checked to be earlier.
fn link(conn: &Connection, session: &str, seq: u64) -> Result<Link, JournalError> {
    let row: Option<EventRow> = conn
        .prepare_cached("SELECT parent, body, delta FROM events WHERE session_id = ?1 AND seq = ?2")
        .and_then(|mut st| {
            st.query_row(params![session, i(seq)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
        })
        .map_err(sql("restore"))?;
    let row = row.ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq })?;
    decode_link(session, seq, row)
}

/// A read event row as a link of the chain, its parent checked to be earlier.
fn decode_link(session: &str, seq: u64, (parent, body, delta): EventRow) -> Result<Link, JournalError> {
    let parent = parent.map(|p| stored_u64(session, seq, "parent", p)).transpose()?;
    if parent.is_some_and(|p| p >= seq) {
        return Err(JournalError::corrupt(session, seq, "parent is not an earlier event"));
    }
    let (body, delta) = decode(session, seq, &body, delta.as_deref())?;
    Ok((seq, parent, body, delta))
}

/// The most rows of other branches a range read of a chain passes over before it leaves the rest
/// of the chain to one read per event.
const MAX_SKIPPED: usize = 64;

/// The links of the chain from `seq` down to (not including) `floor` — the latest snapshot row
/// at or before `seq` (0 without one), so no event of that stretch has one — read in one scan of the events
/// between them, newest first, instead of two keyed reads per event (its snapshot, then its row).
/// The scan stops at `stop` (the caller's cached state), at an event it does not find, or after
/// passing over [`MAX_SKIPPED`] rows of other branches; it returns where the chain goes on.
fn links_above(
    conn: &Connection,
    session: &str,
    seq: u64,
    floor: u64,
    stop: Option<u64>,
    chain: &mut Vec<Link>,
) -> Result<Option<u64>, JournalError> {
    let mut want = Some(seq);
    let mut st = conn
        .prepare_cached(
            "SELECT seq, parent, body, delta FROM events WHERE session_id = ?1 AND seq > ?2 AND seq <= ?3
             ORDER BY seq DESC",
        )
        .map_err(sql("restore"))?;
    let mut rows = st.query(params![session, i(floor), i(seq)]).map_err(sql("restore"))?;
    let mut skipped = 0usize;
    while let Some(w) = want.filter(|w| *w > floor && Some(*w) != stop) {
        let Some(r) = rows.next().map_err(sql("restore"))? else { break };
        let at = stored_u64(session, w, "seq", r.get::<_, i64>(0).map_err(sql("restore"))?)?;
        if at > w {
            skipped = skipped.saturating_add(1);
            if skipped > MAX_SKIPPED {
                break;
            }
            continue;
        }
        if at < w {
            break; // `w` is missing: the keyed read reports it
        }
        let row = (r.get(1), r.get(2), r.get(3));
        let row =
            (row.0.map_err(sql("restore"))?, row.1.map_err(sql("restore"))?, row.2.map_err(sql("restore"))?);
        let l = decode_link(session, w, row)?;
        want = l.1;
        chain.push(l);
    }
    Ok(want)
}

/// Folds the state after `seq`: walks the parent chain back to a snapshot, the root, or `cached`.
pub(crate) fn fold(
    conn: &Connection,
    session: &str,
    seq: u64,
    cached: Option<&(u64, State)>,
) -> Result<State, JournalError> {
    Ok(fold_from(conn, session, seq, cached, true)?.0)
}

/// The state after `seq` from the events alone: folded along the parent chain back to the root
/// or `cached`, reading no snapshot (what `journal verify` checks each snapshot against).
pub(crate) fn fold_events(
    conn: &Connection,
    session: &str,
    seq: u64,
    cached: Option<&(u64, State)>,
) -> Result<State, JournalError> {
    Ok(fold_from(conn, session, seq, cached, false)?.0)
}

/// [`fold`], also handing back the (verified) snapshot it started from, if it did.
fn fold_from(
    conn: &Connection,
    session: &str,
    seq: u64,
    cached: Option<&(u64, State)>,
    snapshots: bool,
) -> Result<(State, Option<snapshot::Read>), JournalError> {
    let mut chain: Vec<Link> = Vec::new();
    // Without a snapshot row (or when reading none) the scan runs down to the root (seq 0 is no
    // event) or the cached state.
    let floor = if snapshots { snapshot::latest_seq(conn, session, seq)?.unwrap_or(0) } else { 0 };
    let mut cur = links_above(conn, session, seq, floor, cached.map(|c| c.0), &mut chain)?;
    let mut base = State::default();
    let mut from = None;
    // The rest of the chain (from the snapshot row on, or all of it without one), one event at a
    // time: a snapshot that does not read (its chain cut short) is folded past.
    while let Some(s) = cur {
        if let Some((_, st)) = cached.filter(|(cs, _)| *cs == s) {
            base = st.clone();
            break;
        }
        if let Some(snap) = snapshots.then(|| snapshot::read(conn, session, s)).transpose()?.flatten() {
            base = snap.state.clone();
            from = Some(snap);
            break;
        }
        let l = link(conn, session, s)?;
        cur = l.1;
        chain.push(l);
    }
    for (s, parent, body, delta) in chain.into_iter().rev() {
        base.apply(session, s, parent, &body, delta.as_ref())?;
    }
    Ok((base, from))
}

/// The exact history listing `hashes` (the state after `seq`): the snapshot's decoded history,
/// plus the few messages spliced in after it loaded by hash; row by row without a snapshot.
fn history_from(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
    snap: Option<snapshot::Read>,
    threads: usize,
) -> Result<Vec<Message>, JournalError> {
    let Some(snap) = snap else { return load_messages(conn, session, seq, hashes, threads) };
    let mut msgs = snapshot::decode_history(session, &snap)?;
    // Messages appended after the snapshot (the common case): loaded and added at the end.
    if let Some(rest) = hashes.strip_prefix(snap.state.history.as_slice()) {
        if !rest.is_empty() {
            msgs.extend(load_messages(conn, session, seq, rest, threads)?);
        }
        return Ok(msgs);
    }
    let mut decoded: HashMap<MsgHash, Message> = snap.state.history.iter().copied().zip(msgs).collect();
    let mut missing: Vec<MsgHash> = hashes.iter().filter(|h| !decoded.contains_key(*h)).copied().collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        let loaded = load_messages(conn, session, seq, &missing, threads)?;
        decoded.extend(missing.into_iter().zip(loaded));
    }
    assemble(session, seq, hashes, decoded)
}

impl Journal {
    /// Events of a session in order, from `after` (exclusive), at most `limit`.
    pub fn events(&self, session: &str, after: u64, limit: usize) -> Result<Vec<StoredEvent>, JournalError> {
        self.version(session)?;
        let mut st = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
            ))
            .map_err(sql("read events"))?;
        let mut rows = st
            .query(params![session, i(after), i64::try_from(limit).unwrap_or(i64::MAX)])
            .map_err(sql("read events"))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(sql("read events"))? {
            out.push(event_from_row(session, r)?);
        }
        Ok(out)
    }

    /// The state after event `seq` (folded along its parent chain from the nearest snapshot).
    pub fn state_at(&self, session: &str, seq: u64) -> Result<State, JournalError> {
        match self.head.get(session).filter(|(s, _)| *s == seq) {
            Some((_, st)) => Ok(st.clone()),
            None => fold(self.conn(), session, seq, None),
        }
    }

    /// The exact state, history included, after event `seq`.
    pub fn view_at(&self, session: &str, seq: u64) -> Result<View, JournalError> {
        let tx = ReadTx::begin(self.conn())?;
        let (state, snap) = fold_from(self.conn(), session, seq, None, true)?;
        let history = history_from(self.conn(), session, seq, &state.history, snap, self.decode_threads)?;
        tx.end()?;
        Ok(View { seq, history, state })
    }

    /// The state after the latest event.
    pub fn head(&self, session: &str) -> Result<View, JournalError> {
        let v = self.version(session)?;
        self.view_at(session, v)
    }

    /// The message hashes of a session's history at an event, in order (repeats kept).
    pub fn history_hashes(&self, session: &str, seq: u64) -> Result<Vec<MsgHash>, JournalError> {
        Ok(self.state_at(session, seq)?.history)
    }

    /// The message hashes an event inserted into the history.
    pub fn inserted_hashes(&self, session: &str, seq: u64) -> Result<Vec<MsgHash>, JournalError> {
        let e = self
            .events(session, seq.saturating_sub(1), 1)?
            .into_iter()
            .find(|e| e.seq == seq)
            .ok_or_else(|| JournalError::NoEvent { session: session.to_string(), seq })?;
        e.delta.map(|d| d.hashes(session, seq)).transpose().map(Option::unwrap_or_default)
    }

    /// Every message hash any event of the session inserted, in first-seen order.
    pub fn history_hashes_all(&self, session: &str) -> Result<Vec<MsgHash>, JournalError> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        self.for_each_event(session, |e| {
            for h in e.delta.as_ref().map(|d| d.hashes(session, e.seq)).transpose()?.unwrap_or_default() {
                if seen.insert(h) {
                    out.push(h);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }
}
