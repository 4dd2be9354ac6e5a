//! Deleting whole sessions. The journal is append-only: single events can never be edited or
//! removed (triggers refuse it). A session is deleted as a whole in one transaction that lists it
//! in `session_deletions` (the only case the delete trigger lets through), removes its events,
//! blob links and snapshots, records it in `deleted_sessions`, then drops the messages no
//! remaining event inserts and the journal's hold on CCR blobs no remaining event or message
//! references. The blobs themselves are left to `salvage ccr gc`, which evicts unreferenced
//! blobs under its retention policy (its grace period included).

use crate::error::{sql, stored_hash, stored_u64};
use crate::{rfc3339, Journal, JournalError, CCR_OWNER};
use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use std::collections::HashSet;

/// What a deletion removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Deleted {
    /// The sessions deleted.
    pub sessions: Vec<String>,
    /// Their events.
    pub events: u64,
    /// Stored messages no remaining event uses.
    pub messages: u64,
    /// CCR blobs the journal no longer holds (now evictable by `ccr gc`).
    pub unreferenced_blobs: u64,
}

impl Journal {
    /// Deletes whole sessions (and what only they used) in one transaction; `reason` is kept in
    /// `deleted_sessions`. Unknown ids are [`JournalError::NoSession`] and nothing is deleted.
    pub fn delete_sessions(
        &mut self,
        ids: &[String],
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Deleted, JournalError> {
        let mut out = Deleted::default();
        let deleted_at = rfc3339(&now);
        let tx = self
            .store
            .conn_mut()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("delete session"))?;
        for id in ids {
            let row: Option<(String, i64, String)> = tx
                .query_row("SELECT title, head_seq, created_at FROM sessions WHERE id = ?1", [id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
                .map_err(sql("delete session"))?;
            let (title, head, created) = row.ok_or_else(|| JournalError::NoSession(id.clone()))?;
            let steps = [
                "INSERT OR IGNORE INTO session_deletions (session_id) VALUES (?1)",
                "DELETE FROM event_blobs WHERE session_id = ?1",
                "DELETE FROM event_blobs_unvouched WHERE session_id = ?1",
                "DELETE FROM snapshots WHERE session_id = ?1",
                "DELETE FROM events WHERE session_id = ?1",
                "DELETE FROM sessions WHERE id = ?1",
                "DELETE FROM session_deletions WHERE session_id = ?1",
            ];
            for step in steps {
                tx.execute(step, [id]).map_err(sql("delete session"))?;
            }
            tx.execute(
                "INSERT INTO deleted_sessions (id, title, events, created_at, deleted_at, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id, title, head, created, deleted_at, reason],
            )
            .map_err(sql("delete session"))?;
            out.sessions.push(id.clone());
            out.events = out.events.saturating_add(stored_u64(id, 0, "the session's head_seq", head)?);
        }
        let orphans = orphan_messages(&tx)?;
        {
            let mut del = tx.prepare("DELETE FROM messages WHERE id = ?1").map_err(sql("delete session"))?;
            for id in &orphans {
                del.execute([id]).map_err(sql("delete session"))?;
            }
        }
        out.messages = u64::try_from(orphans.len()).unwrap_or(u64::MAX);
        let released = tx
            .execute(
                "DELETE FROM ccr_refs WHERE owner = ?1 AND blob_id IN (
                     SELECT b.id FROM ccr_blobs b
                     WHERE NOT EXISTS (SELECT 1 FROM event_blobs e WHERE e.blob_key = b.key)
                       AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.ccr_key = b.key))",
                [CCR_OWNER],
            )
            .map_err(sql("delete session"))?;
        out.unreferenced_blobs = u64::try_from(released).unwrap_or(u64::MAX);
        tx.commit().map_err(sql("delete session"))?;
        for id in ids {
            // What the handle cached of a deleted session goes with it (a long-lived writer that
            // deletes sessions keeps no trace of them).
            self.head.remove(id);
            self.snapshots.remove(id);
            if self.fresh.as_ref().is_some_and(|(s, _)| s == id) {
                self.fresh = None;
            }
        }
        Ok(out)
    }
}

/// The `messages` rows no remaining event's delta inserts.
fn orphan_messages(tx: &rusqlite::Connection) -> Result<Vec<i64>, JournalError> {
    let mut used: HashSet<[u8; 32]> = HashSet::new();
    {
        let mut st = tx
            .prepare("SELECT session_id, seq, delta FROM events WHERE delta IS NOT NULL")
            .map_err(sql("delete session"))?;
        let mut rows = st.query([]).map_err(sql("delete session"))?;
        while let Some(r) = rows.next().map_err(sql("delete session"))? {
            let session: String = r.get(0).map_err(sql("delete session"))?;
            let seq = stored_u64(&session, 0, "seq", r.get(1).map_err(sql("delete session"))?)?;
            let bytes: Vec<u8> = r.get(2).map_err(sql("delete session"))?;
            // A remaining delta that does not decode could hold any message: deleting refuses
            // rather than drop what that event may need.
            let d = serde_json::from_slice::<crate::state::Delta>(&bytes).map_err(|e| {
                JournalError::corrupt(&session, seq, format!("history delta does not decode: {e}"))
            })?;
            used.extend(d.hashes(&session, seq)?);
        }
    }
    let mut st = tx.prepare("SELECT id, hash FROM messages").map_err(sql("delete session"))?;
    let rows = st
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
        .map_err(sql("delete session"))?;
    let mut orphans = Vec::new();
    for row in rows {
        let (id, hash) = row.map_err(sql("delete session"))?;
        if !used.contains(&stored_hash("(messages)", 0, "messages.hash", &hash)?) {
            orphans.push(id);
        }
    }
    Ok(orphans)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
    use super::*;
    use crate::{HistoryChange, NewEvent};
    use chrono::TimeZone;
    use salvage_types::event::EventBody;
    use salvage_types::Message;

    fn start(j: &mut Journal, id: &str, history: Vec<Message>) {
        let t = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
        let first = NewEvent::new(format!("{id}-1"), t, EventBody::session_started(None, None));
        j.start_session(id, "t", first).unwrap();
        let e =
            NewEvent::new(format!("{id}-2"), t, EventBody::MessageAppended { count: history.len() as u64 })
                .with_history(HistoryChange::Append(history));
        j.append(id, Some(1), vec![e]).unwrap();
    }

    #[test]
    fn deleting_a_session_keeps_what_others_share_and_refuses_single_events() {
        let mut j = Journal::in_memory().unwrap();
        let shared = Message::system("shared system prompt");
        start(&mut j, "a", vec![shared.clone(), Message::user("only in a")]);
        start(&mut j, "b", vec![shared.clone(), Message::user("only in b")]);
        assert!(j.conn().execute("DELETE FROM events WHERE session_id = 'a' AND seq = 2", []).is_err());
        let now = Utc.timestamp_millis_opt(1_765_000_000_000).unwrap();
        let d = j.delete_sessions(&["a".to_string()], "test", now).unwrap();
        assert_eq!((d.sessions.len(), d.events, d.messages), (1, 2, 1));
        assert_eq!(j.head("b").unwrap().history, vec![shared, Message::user("only in b")]);
        assert!(matches!(j.version("a"), Err(JournalError::NoSession(_))));
        assert!(j.verify(None).unwrap().bad.is_empty());
        let logged: i64 = j
            .conn()
            .query_row("SELECT count(*) FROM deleted_sessions WHERE id = 'a'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(logged, 1);
        // The permission does not outlive the transaction.
        assert!(j.conn().execute("DELETE FROM events WHERE session_id = 'b'", []).is_err());
        assert!(matches!(
            j.delete_sessions(&["zz".to_string()], "test", now),
            Err(JournalError::NoSession(_))
        ));
        // The same id can be used again.
        start(&mut j, "a", vec![Message::user("again")]);
        assert_eq!(j.head("a").unwrap().history.len(), 1);
    }
}
