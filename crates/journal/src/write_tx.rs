//! The write transaction of an append.

use crate::error::{sql, JournalError};
use rusqlite::Connection;
use salvage_store::{GateTurn, Store};

/// An append's `BEGIN IMMEDIATE` transaction, begun and committed by cached statements (a durable
/// append of one event is a few statements: parsing `BEGIN` and `COMMIT` again at every call
/// showed in its profile). Rolled back when dropped uncommitted. It holds this process's turn at
/// writing the file ([`Store::write_turn`]) from before `BEGIN` to after the commit or rollback,
/// so another writer of this process waiting for it is woken at once instead of sleeping.
pub(crate) struct WriteTx<'c> {
    store: &'c Store,
    open: bool,
    // Dropped after `Drop::drop` has rolled back: the turn ends with the transaction.
    turn: Option<GateTurn>,
}

impl<'c> WriteTx<'c> {
    /// Begins the transaction (waiting for this process's other writers, then for the write
    /// lock, as the busy timeout allows).
    pub(crate) fn begin(store: &'c Store) -> Result<WriteTx<'c>, JournalError> {
        let turn = store.write_turn();
        store
            .conn()
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut st| st.execute([]))
            .map_err(sql("append"))?;
        Ok(WriteTx { store, open: true, turn: Some(turn) })
    }

    /// Commits it, gives the turn back, and then checkpoints the `-wal` if it is due: the
    /// process's other writers do not wait for the copy ([`Store::checkpoint_if_due`]).
    pub(crate) fn commit(mut self) -> Result<(), JournalError> {
        self.store
            .conn()
            .prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))
            .map_err(sql("append"))?;
        self.open = false;
        drop(self.turn.take());
        self.store.checkpoint_if_due();
        Ok(())
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.store.conn()
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        // Nothing to report from a drop: a failed rollback leaves the transaction to the
        // connection, which rolls it back when it closes.
        if self.open && !self.store.conn().is_autocommit() {
            let _ = self.store.conn().execute_batch("ROLLBACK");
        }
    }
}
