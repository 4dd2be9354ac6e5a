//! The events a writer appends and a reader gets back, and decoding a stored event row.

use crate::error::{stored_u32, stored_u64, JournalError};
use crate::state::Delta;
use chrono::{DateTime, SecondsFormat, Utc};
use salvage_types::event::EventBody;
use salvage_types::{CcrKey, Message};

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
    /// Messages appended at the end that the writer keeps too (a session's whole input history,
    /// which the engine goes on with): the journal reads them through the shared handle and drops
    /// only the handle, so the writer takes them back without a copy (issue #19, peak memory).
    AppendShared(std::sync::Arc<Vec<Message>>),
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
    /// take them whatever its grace period. Each comes with its key, as [`CcrKey::of`] computed
    /// it (the writer hashed it when it archived it in memory): it is not hashed again here.
    pub archive: Vec<(CcrKey, Vec<u8>)>,
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

    /// With originals archived (and referenced) in the event's transaction, each with its key
    /// ([`CcrKey::of`] of its bytes). A wrong key is refused in debug builds; in any build CCR never
    /// returns content that does not hash to the key it is read by.
    pub fn with_archive(mut self, archive: Vec<(CcrKey, Vec<u8>)>) -> NewEvent {
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

/// Formats a time as RFC 3339 with milliseconds.
pub fn rfc3339(ts: &DateTime<Utc>) -> String {
    ts.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The columns `SELECT seq, event_id, parent, kind, kind_version, ts, body, delta` of one event.
pub(crate) const EVENT_COLUMNS: &str = "seq, event_id, parent, kind, kind_version, ts, body, delta";

/// Decodes a row selected with [`EVENT_COLUMNS`]; integers out of range are corruption.
pub(crate) fn event_from_row(session: &str, r: &rusqlite::Row<'_>) -> Result<StoredEvent, JournalError> {
    let get = |e: rusqlite::Error| JournalError::Sql { op: "read events", source: e };
    let seq = stored_u64(session, 0, "seq", r.get(0).map_err(get)?)?;
    let parent: Option<i64> = r.get(2).map_err(get)?;
    let parent = parent.map(|p| stored_u64(session, seq, "parent", p)).transpose()?;
    let body: Vec<u8> = r.get(6).map_err(get)?;
    let delta: Option<Vec<u8>> = r.get(7).map_err(get)?;
    let (body, delta) = decode(session, seq, &body, delta.as_deref())?;
    Ok(StoredEvent {
        seq,
        event_id: r.get(1).map_err(get)?,
        parent,
        kind: r.get(3).map_err(get)?,
        kind_version: stored_u32(session, seq, "kind_version", r.get(4).map_err(get)?)?,
        ts: r.get(5).map_err(get)?,
        body,
        delta,
    })
}

/// Decodes an event's stored body and delta.
pub(crate) fn decode(
    session: &str,
    seq: u64,
    body: &[u8],
    delta: Option<&[u8]>,
) -> Result<(EventBody, Option<Delta>), JournalError> {
    let corrupt = |what: &str, e: serde_json::Error| {
        JournalError::corrupt(session, seq, format!("{what} does not decode: {e}"))
    };
    let body: EventBody = serde_json::from_slice(body).map_err(|e| corrupt("body", e))?;
    let delta =
        delta.map(serde_json::from_slice::<Delta>).transpose().map_err(|e| corrupt("history delta", e))?;
    Ok((body, delta))
}
