//! Redaction inside an append transaction: one stored message's content replaced, its hash kept.

use crate::error::{i, sql, stored_hash, JournalError};
use crate::snapshot;
use crate::state::{hex, MsgHash};
use rusqlite::{params, Connection, OptionalExtension};
use salvage_ccr::{Ccr, Clock};
use salvage_types::Message;

/// Replaces one stored message's content with `replacement`, keeping its hash (the history states
/// that list it then restore the replacement), and records it in `message_redactions`. A message
/// archived in CCR has its blob cleared too. `secure_delete` zeroes the old bytes in the file.
pub(crate) fn redact_message(
    tx: &Connection,
    clock: &dyn Clock,
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
        let k = stored_hash(session, seq, "messages.ccr_key", &k)?;
        match Ccr::new(tx, clock).redact(&hex(&k)) {
            Ok(_) | Err(salvage_ccr::CcrError::NotFound { .. }) => {}
            Err(e) => return Err(JournalError::Invalid(e.to_string())),
        }
    }
    let json = serde_json::to_vec(replacement).map_err(|e| JournalError::Invalid(e.to_string()))?;
    tx.execute("UPDATE messages SET body = ?1, ccr_key = NULL WHERE hash = ?2", params![json, &hash[..]])
        .map_err(sql("redact"))?;
    // Snapshots hold the old content in their materialised histories: drop them.
    snapshot::drop_holding(tx, hash)?;
    tx.execute(
        "INSERT OR REPLACE INTO message_redactions (hash, session_id, seq, redacted_at) VALUES (?1, ?2, ?3, ?4)",
        params![&hash[..], session, i(seq), at],
    )
    .map_err(sql("redact"))?;
    Ok(())
}
