//! The read transaction of a restore.

use crate::error::{sql, JournalError};
use rusqlite::Connection;

/// One read transaction around the statements of a restore, begun and ended by cached
/// statements. Every statement outside a transaction begins and ends a read transaction of its
/// own (a lock and an unlock of the `-wal` index, and SQLite re-reading its header), and a restore
/// runs several; in one they also all read the same committed state, whatever a writer commits
/// meanwhile. A connection already in a transaction (the caller's) is left to it.
pub(crate) struct ReadTx<'c> {
    conn: Option<&'c Connection>,
}

impl<'c> ReadTx<'c> {
    /// Begins the transaction unless `conn` is already in one.
    pub(crate) fn begin(conn: &'c Connection) -> Result<ReadTx<'c>, JournalError> {
        if !conn.is_autocommit() {
            return Ok(ReadTx { conn: None });
        }
        conn.prepare_cached("BEGIN").and_then(|mut st| st.execute([])).map_err(sql("restore"))?;
        Ok(ReadTx { conn: Some(conn) })
    }

    /// Ends it (a failed end leaves the transaction to [`Drop`], which rolls it back).
    pub(crate) fn end(mut self) -> Result<(), JournalError> {
        let Some(conn) = self.conn else { return Ok(()) };
        conn.prepare_cached("COMMIT").and_then(|mut st| st.execute([])).map_err(sql("restore"))?;
        self.conn = None;
        Ok(())
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        // A read transaction changed nothing: ending it early (a failed restore) loses nothing.
        if let Some(conn) = self.conn.take().filter(|c| !c.is_autocommit()) {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::ReadTx;
    use rusqlite::Connection;

    fn count(c: &Connection) -> i64 {
        c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap()
    }

    /// A reader and a writer on one WAL file, the table holding one row.
    fn pair(dir: &std::path::Path) -> (Connection, Connection) {
        let p = dir.join("r.db");
        let w = Connection::open(&p).unwrap();
        w.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
        (Connection::open(&p).unwrap(), w)
    }

    #[test]
    fn its_statements_read_one_state_whatever_commits_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let (r, w) = pair(dir.path());
        let tx = ReadTx::begin(&r).unwrap();
        assert_eq!(count(&r), 1);
        w.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(count(&r), 1, "a statement in the transaction saw a later commit");
        tx.end().unwrap();
        assert!(r.is_autocommit());
        assert_eq!(count(&r), 2, "outside it, the commit shows");
    }

    #[test]
    fn a_transaction_dropped_unended_is_ended() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _w) = pair(dir.path());
        let tx = ReadTx::begin(&r).unwrap();
        assert_eq!(count(&r), 1);
        assert!(!r.is_autocommit());
        drop(tx);
        assert!(r.is_autocommit());
    }

    #[test]
    fn the_callers_transaction_is_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _w) = pair(dir.path());
        r.execute_batch("BEGIN").unwrap();
        ReadTx::begin(&r).unwrap().end().unwrap();
        drop(ReadTx::begin(&r).unwrap());
        assert!(!r.is_autocommit(), "the caller's transaction was ended");
        r.execute_batch("COMMIT").unwrap();
    }
}
