//! The stored JSON an append transaction keeps for the snapshots it takes.

use crate::state::MsgHash;

/// Messages an append transaction stored, by hash: their JSON as stored, up to
/// [`FRESH_BUDGET`] bytes. A snapshot reads the rows of the others back, as it does for messages
/// earlier transactions stored: a transaction appending a whole long history (a session's start)
/// does not hold a second copy of it for a snapshot it seldom takes.
#[derive(Default)]
pub(crate) struct Fresh {
    pub(crate) json: std::collections::HashMap<MsgHash, Vec<u8>>,
    bytes: usize,
}

/// What [`Fresh`] holds at most: a batch of a thousand 1 KB events, many times over.
const FRESH_BUDGET: usize = 4 << 20;

impl Fresh {
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
}
