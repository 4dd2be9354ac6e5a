//! Snapshots: the state after an event and the decoded history at it, so a restore reads a few
//! rows and decodes them once, and applies only the few splices after it (instead of one keyed
//! lookup, hash check and JSON parse per message).
//!
//! A snapshot row holds the state's JSON and its history in snapshot format 2 ([`packed`]: a
//! header naming the row's base, then each message's stored JSON transcoded to MessagePack,
//! uncompressed — the format's module says why). Rows of format 1 (zstd frames of the messages'
//! JSON joined by commas, a skippable frame naming the base) written by earlier versions are still
//! read, never extended: the next snapshot after one is whole. Design decision (incremental
//! snapshots): a snapshot extends a base — the latest snapshot at or before it whose history is a
//! prefix of its own — and holds only the messages after it, and its state lists only the hashes
//! after the base (a whole row's lists them all), so each message is read, hash-checked, encoded
//! and listed once and snapshot work grows linearly with the session (re-encoding the whole
//! history at every snapshot made batched appends five times slower; listing every hash again in
//! every row cost a writer as much, and a restore reading a chain of 16 rows sixteen copies of the
//! list). A chain is at most [`MAX_CHAIN`] rows: the snapshot that would make it longer holds the
//! chain's messages again, copied as they are (nothing re-encoded), so a restore reads at most
//! that many rows and decodes each row's messages once. A history that is not an extension of the
//! latest snapshot's (a rewrite, a rewind) is written whole. A writer keeps its latest snapshot
//! ([`Last`]) beside its head state, so its next snapshot reads no earlier row (except, once per
//! chain, the rows it copies); a cold writer reads the latest row back. The messages a writer
//! appends enter its snapshots from the bytes it hashed, not read back, whether this transaction
//! or one of the handle's earlier ones stored them ([`crate::fresh`]; a message stored otherwise
//! is read back, and so is every one when the file records redactions: it may be redacted).
//!
//! Design decision (integrity): the event a snapshot is taken at records the snapshot's BLAKE3
//! ([`digest`], over the state and the stored history bytes) in its `snapshot_hash` column, which
//! the event hash chain covers. A restore checks every row of a chain it reads against that hash
//! and refuses one that differs (a snapshot edited behind the journal's back would otherwise
//! change what a restore returns unnoticed), and `journal verify` checks every snapshot row the
//! same way, so a tampered row is caught by both; changing the recorded hash instead breaks the
//! chain, which verify reports. Message hashes are checked when a message enters a snapshot and
//! by `journal verify`, not on restores through a snapshot: the snapshot's hash vouches for those
//! bytes, and checking it costs one BLAKE3 pass over the stored bytes, a fraction of
//! re-hashing every message. Snapshots stay disposable: a row that is missing (deleted, or dropped
//! by a redaction of a message it holds) is folded past, and so is a row whose chain misses one;
//! a row at an event that records no snapshot hash is never read (migration 0005 dropped the
//! unvouched state snapshots written before). Rows of reducer version 1 listed every hash in every
//! row; version 2 rows list only their own, and the version-1 rows of an older file are ignored.

use crate::error::{i, sql, stored_hash, stored_u64, JournalError};
use crate::messages::{fetch_raw, is_redacted, message_hash};
use crate::packed;
use crate::state::{hex, MsgHash, State, REDUCER_VERSION};
use rusqlite::{params, Connection, OptionalExtension};
use salvage_types::Message;
use std::collections::HashMap;

/// A format-1 delta's history starts with a skippable zstd frame (decoders pass over it) with this
/// magic number, holding its base snapshot's seq. (Format 1 is read, no longer written.)
const BASE_MAGIC: u32 = 0x184D_2A5A;
/// The most rows a history is spread over: the snapshot that would make a chain longer holds
/// its whole history again (the chain's frames copied as they are, nothing recompressed).
pub(crate) const MAX_CHAIN: usize = 16;

/// A snapshot as written: the state's JSON, the compressed history, and the digest the event
/// records.
pub(crate) struct Written {
    /// The state's JSON.
    pub state: Vec<u8>,
    /// The history's compressed JSON array.
    pub history: Vec<u8>,
    /// [`digest`] of both.
    pub hash: [u8; 32],
}

/// A snapshot as read back (every row of its chain verified): the state, and the history blobs.
pub(crate) struct Read {
    /// The event it was taken at.
    pub seq: u64,
    /// The state after it, its whole history listed.
    pub state: State,
    /// The history blobs of its chain's rows, the whole one first and its own last.
    pub rows: Vec<Vec<u8>>,
    /// How many messages each of those rows lists.
    pub counts: Vec<usize>,
}

/// BLAKE3 over a snapshot's stored bytes, each length-prefixed.
pub(crate) fn digest(state: &[u8], history: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"salvage.snapshot/1\0");
    for part in [state, history] {
        h.update(&u64::try_from(part.len()).unwrap_or(u64::MAX).to_le_bytes());
        h.update(part);
    }
    *h.finalize().as_bytes()
}

/// The messages `hashes` in snapshot format 2 (each one's stored JSON transcoded to MessagePack,
/// [`packed`]). Each read back is checked against its hash here, once, as it enters a snapshot (a
/// body that differs is accepted only for a redacted message): restores through the snapshot then
/// rely on the snapshot's own hash, which the chain covers. The messages the writer appended in
/// this transaction (`fresh`, hashed from these very bytes, which the stored rows hold) are not
/// read back.
fn packed_messages(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
    fresh: &HashMap<MsgHash, Vec<u8>>,
) -> Result<Vec<u8>, JournalError> {
    let mut unique: Vec<MsgHash> = hashes.iter().filter(|h| !fresh.contains_key(*h)).copied().collect();
    unique.sort_unstable();
    unique.dedup();
    let raw: HashMap<MsgHash, Vec<u8>> = fetch_raw(conn, session, seq, &unique)?.into_iter().collect();
    for (h, json) in &raw {
        if message_hash(json) != *h && !is_redacted(conn, h)? {
            return Err(JournalError::corrupt(
                session,
                seq,
                format!("message {} does not match its hash", hex(h)),
            ));
        }
    }
    let size = |h: &MsgHash| fresh.get(h).or_else(|| raw.get(h)).map_or(0, Vec::len);
    let total: usize = hashes.iter().map(size).fold(0, usize::saturating_add);
    let mut out = Vec::with_capacity(total);
    for h in hashes {
        let json = fresh
            .get(h)
            .or_else(|| raw.get(h))
            .ok_or_else(|| JournalError::corrupt(session, seq, format!("message {} is missing", hex(h))))?;
        packed::transcode(json, &mut out).map_err(|e| {
            JournalError::corrupt(session, seq, format!("message {} does not transcode: {e}", hex(h)))
        })?;
    }
    Ok(out)
}

/// The latest snapshot a writer wrote (or read back) for a session: what its next snapshot
/// extends. The journal handle keeps it beside the head state, so a writer's next snapshot needs
/// no read of the rows before it.
#[derive(Debug, Clone)]
pub(crate) struct Last {
    /// The event it was taken at.
    pub seq: u64,
    /// Its whole history.
    pub history: Vec<MsgHash>,
    /// The rows its history is spread over, itself included.
    pub rows: usize,
}

/// The seq of the latest snapshot row at or before `seq` (of any branch), if any.
pub(crate) fn latest_seq(conn: &Connection, session: &str, seq: u64) -> Result<Option<u64>, JournalError> {
    let at: Option<i64> = conn
        .prepare_cached(
            "SELECT seq FROM snapshots WHERE session_id = ?1 AND seq <= ?2 AND reducer_version = ?3
             ORDER BY seq DESC LIMIT 1",
        )
        .and_then(|mut st| st.query_row(params![session, i(seq), REDUCER_VERSION], |r| r.get(0)).optional())
        .map_err(sql("snapshot"))?;
    at.map(|a| stored_u64(session, seq, "snapshots.seq", a)).transpose()
}

/// The latest verified snapshot of the session at or before `seq` (a row that fails its check,
/// or whose chain is cut short, is not used: verify reports the first; the new snapshot is then
/// built whole).
fn latest(conn: &Connection, session: &str, seq: u64) -> Result<Option<Read>, JournalError> {
    let at = match latest_seq(conn, session, seq) {
        Ok(at) => at,
        // A row whose seq is out of range is not used: the new snapshot is built whole.
        Err(JournalError::Corrupt { .. }) => None,
        Err(e) => return Err(e),
    };
    let Some(at) = at else { return Ok(None) };
    match read(conn, session, at) {
        // Only a format-2 chain is extended; any other latest row makes the next one whole.
        Ok(r) => Ok(r.filter(|r| r.rows.iter().all(|h| packed::is_packed(h)))),
        Err(JournalError::Corrupt { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Builds the snapshot of `state` (taken at `seq` of `session`), incrementally. Its base is the
/// latest snapshot (`last`, the writer's, or else read back) when its history is a prefix of this
/// one: the new row then holds only a frame naming the base, the hashes after it in its state,
/// and the messages after it compressed as one more frame, so every message is read and
/// compressed once. A history spread over [`MAX_CHAIN`] rows is written whole instead (the
/// chain's frames copied as they are). Without a usable base the history is one frame. Either way
/// it decodes to exactly what a row-by-row restore returns (the stored JSON).
pub(crate) fn build(
    conn: &Connection,
    session: &str,
    seq: u64,
    state: &State,
    last: Option<&Last>,
    fresh: &HashMap<MsgHash, Vec<u8>>,
) -> Result<(Written, Last), JournalError> {
    let read_back;
    let base: Option<(u64, &[MsgHash], usize)> = match last {
        Some(l) => Some((l.seq, &l.history, l.rows)),
        None => {
            read_back = latest(conn, session, seq)?;
            read_back.as_ref().map(|r| (r.seq, r.state.history.as_slice(), r.rows.len()))
        }
    };
    let base = base.filter(|(at, history, _)| *at < seq && state.history.starts_with(history));
    let (mut history, from, rows) = match base {
        Some((at, b_history, b_rows)) if b_rows < MAX_CHAIN => {
            (packed::header(Some(at)), b_history.len(), b_rows.saturating_add(1))
        }
        Some((at, b_history, _)) => match read(conn, session, at)? {
            Some(r) if r.state.history == b_history && r.rows.iter().all(|h| packed::is_packed(h)) => {
                let mut whole = packed::header(None);
                for h in &r.rows {
                    whole.extend_from_slice(packed::body(h));
                }
                (whole, b_history.len(), 1)
            }
            _ => (packed::header(None), 0, 1),
        },
        None => (packed::header(None), 0, 1),
    };
    let tail = state.history.get(from..).unwrap_or_default();
    history.extend_from_slice(&packed_messages(conn, session, seq, tail, fresh)?);
    // A delta's state lists only the hashes after its base; a whole row's, all of them.
    let listed = if rows > 1 { tail } else { state.history.as_slice() };
    let row_state = state.to_json_listing(listed).map_err(|e| JournalError::Invalid(e.to_string()))?;
    let hash = digest(&row_state, &history);
    let last = Last { seq, history: state.history.clone(), rows };
    Ok((Written { state: row_state, history, hash }, last))
}

/// The base a delta's history names, if it is a delta (either format).
fn base_of(blob: &[u8]) -> Option<u64> {
    if packed::is_packed(blob) {
        return packed::base_of(blob);
    }
    let word = |r: std::ops::Range<usize>| blob.get(r).and_then(|b| <[u8; 4]>::try_from(b).ok());
    if word(0..4).map(u32::from_le_bytes) != Some(BASE_MAGIC) || word(4..8).map(u32::from_le_bytes) != Some(8)
    {
        return None;
    }
    blob.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_le_bytes)
}

/// A format-1 history's frames of messages (without the frame naming its base).
fn frames(blob: &[u8]) -> &[u8] {
    match base_of(blob) {
        Some(_) => blob.get(16..).unwrap_or_default(),
        None => blob,
    }
}

/// The decompressed length of a history blob: the sum of its frames' recorded content sizes
/// (`None` when a frame does not record its size or the blob is not a sequence of frames).
fn raw_len(blob: &[u8]) -> Option<usize> {
    let mut rest = blob;
    let mut total = 0usize;
    while !rest.is_empty() {
        let size = zstd::zstd_safe::get_frame_content_size(rest).ok().flatten()?;
        total = total.checked_add(usize::try_from(size).ok()?)?;
        let frame = zstd::zstd_safe::find_frame_compressed_size(rest).ok()?;
        rest = rest.get(frame..).filter(|_| frame > 0)?;
    }
    Some(total)
}

/// Stores a built snapshot (its event, carrying its hash, is in the same transaction).
pub(crate) fn write(conn: &Connection, session: &str, seq: u64, w: &Written) -> Result<(), JournalError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO snapshots (session_id, seq, reducer_version, state, history) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut st| st.execute(params![session, i(seq), REDUCER_VERSION, w.state, w.history]))
    .map_err(sql("snapshot"))?;
    Ok(())
}

/// The snapshot after `seq`, if one of this reducer version is stored with the hash its event
/// records, with the rows of its chain (each checked the same way): the state with its whole
/// history, and every row's history blob. `None` when a row of the chain is gone (dropped by a
/// redaction, or deleted): the snapshot cannot be read and a restore folds past it. A row whose
/// bytes differ from its hash, or that does not decode, is corruption.
pub(crate) fn read(conn: &Connection, session: &str, seq: u64) -> Result<Option<Read>, JournalError> {
    let Some((state, history)) = checked_row(conn, session, seq)? else { return Ok(None) };
    let mut state = decode_state(session, seq, &state)?;
    let mut tails = vec![std::mem::take(&mut state.history)];
    let mut rows = vec![history];
    let mut at = seq;
    while let Some(b) = rows.last().and_then(|h| base_of(h)) {
        if b >= at || rows.len() >= MAX_CHAIN {
            return Err(JournalError::corrupt(
                session,
                at,
                format!("snapshot names base {b}, not an earlier one"),
            ));
        }
        let Some((base_state, base_history)) = checked_row(conn, session, b)? else { return Ok(None) };
        tails.push(decode_state(session, b, &base_state)?.history);
        rows.push(base_history);
        at = b;
    }
    rows.reverse();
    tails.reverse();
    let counts = tails.iter().map(Vec::len).collect();
    state.history = tails.concat();
    Ok(Some(Read { seq, state, rows, counts }))
}

/// A snapshot row's stored state and history.
type RowBytes = (Vec<u8>, Vec<u8>);

/// The state and history bytes of the snapshot after `seq`, checked against the hash its event
/// records (the state not decoded: a chain's bases need only their frames).
fn checked_row(conn: &Connection, session: &str, seq: u64) -> Result<Option<RowBytes>, JournalError> {
    // One statement: the row and the hash its event records, both by primary key. (A join of
    // the two is compiled again at every call: SQLite's STAT4 planner, built in, re-plans a join
    // whenever its bound values change; a scalar subquery is planned once.)
    type Row = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT state, history,
                    (SELECT snapshot_hash FROM events WHERE session_id = ?1 AND seq = ?2)
             FROM snapshots WHERE session_id = ?1 AND seq = ?2 AND reducer_version = ?3",
        )
        .and_then(|mut st| {
            st.query_row(params![session, i(seq), REDUCER_VERSION], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(sql("restore"))?;
    let Some((state, history, Some(recorded))) = row else { return Ok(None) };
    vouched(session, seq, &state, &history, &recorded)?;
    Ok(Some((state, history)))
}

/// Refuses a snapshot's bytes unless they hash to what its event records.
fn vouched(
    session: &str,
    seq: u64,
    state: &[u8],
    history: &[u8],
    recorded: &[u8],
) -> Result<(), JournalError> {
    let recorded = stored_hash(session, seq, "snapshot_hash", recorded)?;
    match check(state, history, &recorded) {
        Some(problem) => Err(JournalError::corrupt(session, seq, problem)),
        None => Ok(()),
    }
}

/// A snapshot's state.
fn decode_state(session: &str, seq: u64, state: &[u8]) -> Result<State, JournalError> {
    serde_json::from_slice::<State>(state)
        .map_err(|e| JournalError::corrupt(session, seq, format!("snapshot state does not decode: {e}")))
}

/// Why a snapshot's bytes do not match the hash its event records, if they do not.
pub(crate) fn check(state: &[u8], history: &[u8], recorded: &[u8; 32]) -> Option<String> {
    (digest(state, history) != *recorded)
        .then(|| "snapshot does not match the hash its event records (it was edited)".to_string())
}

/// Decodes a snapshot's history: exactly its state's messages, each row holding the count its
/// state lists. A chain is of one format: format 2 (written now) or format 1 (older files).
pub(crate) fn decode_history(session: &str, snap: &Read) -> Result<Vec<Message>, JournalError> {
    let corrupt = |p: String| JournalError::corrupt(session, snap.seq, p);
    let packed_rows = snap.rows.iter().filter(|h| packed::is_packed(h)).count();
    if packed_rows == 0 {
        return decode_format1(session, snap);
    }
    if packed_rows != snap.rows.len() || snap.counts.len() != snap.rows.len() {
        return Err(corrupt("snapshot chain mixes history formats".into()));
    }
    let mut msgs = Vec::with_capacity(snap.state.history.len());
    for (row, count) in snap.rows.iter().zip(&snap.counts) {
        packed::decode(packed::body(row), *count, &mut msgs)
            .map_err(|e| corrupt(format!("snapshot history does not decode: {e}")))?;
    }
    Ok(msgs)
}

/// Decodes a format-1 history: the frames of every row of its chain decompress into one buffer
/// between the array's brackets, which is parsed once.
fn decode_format1(session: &str, snap: &Read) -> Result<Vec<Message>, JournalError> {
    let corrupt = |p: String| JournalError::corrupt(session, snap.seq, p);
    let blobs: Vec<&[u8]> = snap.rows.iter().map(|h| frames(h)).collect();
    let mut sizes = Vec::with_capacity(blobs.len());
    for b in &blobs {
        sizes.push(raw_len(b).ok_or_else(|| corrupt("snapshot history is not zstd frames".into()))?);
    }
    let len = sizes.iter().fold(0usize, |a, n| a.saturating_add(*n));
    let mut json = vec![0u8; len.saturating_add(2)];
    let mut at = 1usize;
    for (b, n) in blobs.iter().zip(sizes) {
        let end = at.saturating_add(n);
        if let Some(out) = json.get_mut(at..end).filter(|_| n > 0) {
            let got = zstd::zstd_safe::decompress(out, b).map_err(|e| {
                corrupt(format!(
                    "snapshot history does not decompress: {}",
                    zstd::zstd_safe::get_error_name(e)
                ))
            })?;
            if got != n {
                return Err(corrupt(format!("snapshot history holds {got} bytes, not {n}")));
            }
        }
        at = end;
    }
    if let Some(close) = json.last_mut() {
        *close = b']';
    }
    if let Some(open) = json.first_mut() {
        *open = b'[';
    }
    let msgs: Vec<Message> = serde_json::from_slice(&json)
        .map_err(|e| corrupt(format!("snapshot history does not decode: {e}")))?;
    if msgs.len() != snap.state.history.len() {
        return Err(corrupt(format!(
            "snapshot history has {} messages, its state {}",
            msgs.len(),
            snap.state.history.len()
        )));
    }
    Ok(msgs)
}

/// Drops every snapshot row whose history holds message `hash` (its content was just redacted; a
/// row's state lists the hashes it adds in hex, so a match on the hex text finds every row holding
/// the message, and a rare match across two hashes only drops a disposable row too many). The rows
/// extending a dropped one can no longer be read (their chain is cut short) and are folded past.
pub(crate) fn drop_holding(conn: &Connection, hash: &MsgHash) -> Result<(), JournalError> {
    conn.execute("DELETE FROM snapshots WHERE instr(CAST(state AS TEXT), ?1) > 0", [hex(hash)])
        .map(|_| ())
        .map_err(sql("redact"))
}
