//! The stored JSON an append keeps for the snapshots it takes.

use crate::state::MsgHash;

/// Messages appended since the session's latest snapshot, by hash: their JSON as stored, up to
/// [`FRESH_BUDGET`] bytes. A snapshot reads the rows of the others back, as it does for messages
/// another handle stored: a transaction appending a whole long history (a session's start) does
/// not hold a second copy of it for a snapshot it seldom takes.
///
/// Design decision (appends of one event each): a handle keeps them from one transaction to the
/// next (up to [`CARRY_BUDGET`] bytes, for the session it appended to last: a long-lived handle
/// writing many sessions holds one such set, not one per session), beside its head state and
/// under the same condition — the session's head is still the one it appended — so a snapshot
/// taken every 64 single-event appends does not read back and hash again the 63 messages the
/// handle itself stored. They are dropped when the file records any redaction: one, by any
/// handle and in any session, may have replaced a stored row since (rows are shared by content),
/// and those rows are read back.
#[derive(Default)]
pub(crate) struct Fresh {
    pub(crate) json: std::collections::HashMap<MsgHash, Vec<u8>>,
    bytes: usize,
}

/// What [`Fresh`] holds at most: a batch of a thousand 1 KB events, many times over.
const FRESH_BUDGET: usize = 4 << 20;

/// What a handle keeps between transactions at most (per session, beside its head state).
const CARRY_BUDGET: usize = 1 << 20;

impl Fresh {
    /// What an append transaction starts from: what the handle kept after its previous one
    /// (`carried`, taken only while the head it appended is the session's), unless the file
    /// records redactions.
    pub(crate) fn resume(carried: Option<Fresh>, redactions: bool) -> Fresh {
        carried.filter(|_| !redactions).unwrap_or_default()
    }

    /// What the handle kept for `session` (`slot` is emptied either way: appending to another
    /// session drops what was kept for the last one).
    pub(crate) fn take_for(slot: &mut Option<(String, Fresh)>, session: &str) -> Option<Fresh> {
        slot.take().filter(|(s, _)| s == session).map(|(_, f)| f)
    }

    /// Keeps `json` while the budget allows (else a snapshot reads its row back).
    pub(crate) fn keep(&mut self, hash: MsgHash, json: Vec<u8>) {
        let bytes = self.bytes.saturating_add(json.len());
        if bytes <= FRESH_BUDGET {
            self.bytes = bytes;
            self.json.insert(hash, json);
        }
    }

    /// Forgets everything (a snapshot was taken).
    pub(crate) fn clear(&mut self) {
        self.json.clear();
        self.bytes = 0;
    }

    /// What the handle keeps after a committed transaction: all of it within [`CARRY_BUDGET`],
    /// else nothing (the next snapshot reads those rows back).
    pub(crate) fn carry(self) -> Option<Fresh> {
        (self.bytes <= CARRY_BUDGET && !self.json.is_empty()).then_some(self)
    }
}
