//! `journal verify`'s check that each snapshot says what the events and the message rows say.
//!
//! Design decision (what a snapshot's hash proves): the hash an event records for its snapshot
//! proves the row was not edited after it was written, not that it was written right. A writer
//! that built a snapshot from the wrong state, the wrong base or the wrong bytes would record the
//! hash of that wrong row, the chain would cover it, and every restore through it would return a
//! wrong history while the hash check passes. So verify also rebuilds each row from the journal's
//! ground truth: its state against the events folded without any snapshot, and its history,
//! message by message, against the MessagePack transcoded from the stored JSON of the hashes it
//! lists (rows of format 1, no longer written, are checked by their hash only).

use crate::error::JournalError;
use crate::messages::fetch_raw;
use crate::packed;
use crate::restore::fold_events;
use crate::snapshot;
use crate::state::{hex, MsgHash, State, REDUCER_VERSION};
use rusqlite::Connection;
use std::collections::HashMap;

/// One stored snapshot row, as verify reads it.
pub(crate) struct Row<'a> {
    /// The event it was taken at.
    pub seq: u64,
    /// Its reducer version.
    pub version: i64,
    /// Its stored state (the hashes it lists).
    pub state: &'a [u8],
    /// Its stored history.
    pub history: &'a [u8],
}

/// What the audit of one session carries from row to row: the state folded at the previous row,
/// so each fold walks only the events since it.
#[derive(Default)]
pub(crate) struct Audit {
    folded: Option<(u64, State)>,
}

impl Audit {
    /// Why `row` does not say what the events and messages say, if it does not. Rows of another
    /// reducer version (never read) and rows whose chain is cut short (folded past) are skipped.
    pub(crate) fn check(
        &mut self,
        conn: &Connection,
        session: &str,
        row: &Row<'_>,
    ) -> Result<Option<String>, JournalError> {
        if row.version != REDUCER_VERSION {
            return Ok(None);
        }
        match self.check_row(conn, session, row) {
            Err(JournalError::Corrupt { problem, .. }) => Ok(Some(problem)),
            other => other,
        }
    }

    fn check_row(
        &mut self,
        conn: &Connection,
        session: &str,
        row: &Row<'_>,
    ) -> Result<Option<String>, JournalError> {
        let listed: State = match serde_json::from_slice(row.state) {
            Ok(s) => s,
            Err(e) => return Ok(Some(format!("snapshot state does not decode: {e}"))),
        };
        if packed::is_packed(row.history) {
            if let Some(p) = own_messages(conn, session, row.seq, &listed.history, packed::body(row.history))?
            {
                return Ok(Some(p));
            }
        }
        let Some(read) = snapshot::read(conn, session, row.seq)? else { return Ok(None) };
        let folded = fold_events(conn, session, row.seq, self.folded.as_ref())?;
        let problem = state_difference(&read.state, &folded);
        self.folded = Some((row.seq, folded));
        Ok(problem)
    }
}

/// Compares a row's own messages with the MessagePack of the stored JSON of the hashes it lists.
fn own_messages(
    conn: &Connection,
    session: &str,
    seq: u64,
    hashes: &[MsgHash],
    body: &[u8],
) -> Result<Option<String>, JournalError> {
    let mut unique = hashes.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let stored: HashMap<MsgHash, Vec<u8>> = fetch_raw(conn, session, seq, &unique)?.into_iter().collect();
    let mut at = 0usize;
    let mut expected = Vec::new();
    for (n, h) in hashes.iter().enumerate() {
        let Some(json) = stored.get(h) else {
            return Ok(Some(format!("snapshot lists message {}, which is not stored", hex(h))));
        };
        expected.clear();
        if let Err(e) = packed::transcode(json, &mut expected) {
            return Ok(Some(format!("stored message {} does not transcode: {e}", hex(h))));
        }
        let end = at.saturating_add(expected.len());
        if body.get(at..end) != Some(expected.as_slice()) {
            return Ok(Some(format!(
                "snapshot history differs from the stored messages at its message {n} ({})",
                hex(h)
            )));
        }
        at = end;
    }
    Ok((at != body.len()).then(|| {
        format!(
            "snapshot history holds {} bytes after the {} messages it lists",
            body.len().saturating_sub(at),
            hashes.len()
        )
    }))
}

/// The first field in which a snapshot's state differs from the events' fold, named.
fn state_difference(snap: &State, folded: &State) -> Option<String> {
    if snap == folded {
        return None;
    }
    let field = if snap.history != folded.history {
        format!(
            "history ({} messages in the snapshot, {} from the events)",
            snap.history.len(),
            folded.history.len()
        )
    } else if snap.cap != folded.cap {
        "cap".into()
    } else if snap.undo != folded.undo {
        "undo".into()
    } else if snap.checkpoints != folded.checkpoints {
        "checkpoints".into()
    } else {
        "counters".into()
    };
    Some(format!("snapshot state differs from the events' fold: {field}"))
}
