//! When the `-wal` is copied back into the file (a checkpoint), and by whom.
//!
//! Design decision: SQLite's automatic checkpoint runs inside the `COMMIT` that brings the `-wal`
//! to 1 000 pages, so the writer does it while it still holds the write lock and, in salvage,
//! this process's write turn ([`crate::WriteGate`]): the other replay jobs wait for a copy that
//! does not need the lock (`PASSIVE` checkpoints run beside writers). Measured on
//! `replay --jobs 2` over the corpus: about a third of the time a turn was held was that copy.
//! So each writer connection records the `-wal`'s length after each commit (SQLite's WAL hook,
//! which replaces the automatic checkpoint) and a writer that has given its turn back calls
//! [`crate::Store::checkpoint_if_due`]. A writer that never calls it still checkpoints, in its
//! commit as before, once the `-wal` reaches [`INLINE_PAGES`]; closing the last connection
//! checkpoints too (SQLite's own rule). Setting `PRAGMA wal_autocheckpoint` on a connection
//! afterwards replaces the hook (SQLite's rule too): that connection's checkpoints are then the
//! pragma's, and `checkpoint_if_due` runs at most once more for it (the length it last recorded).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// The `-wal` length (in pages) at which a checkpoint is due: SQLite's default.
pub const DUE_PAGES: i32 = 1_000;
/// The length at which the commit itself checkpoints, as SQLite's automatic checkpoint would
/// (for writers that never call [`crate::Store::checkpoint_if_due`]).
pub const INLINE_PAGES: i32 = 4 * DUE_PAGES;

/// The `-wal` length after the connection's latest commit.
#[derive(Debug, Default)]
pub(crate) struct WalPages(AtomicI32);

impl WalPages {
    /// True when a checkpoint is due.
    pub(crate) fn due(&self) -> bool {
        self.0.load(Ordering::Relaxed) >= DUE_PAGES
    }

    /// Records that a checkpoint ran (the next commit records the length again).
    pub(crate) fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Installs the WAL hook on a writer connection: it records the `-wal`'s length after each
/// commit, and checkpoints in the commit at [`INLINE_PAGES`].
pub(crate) fn install(conn: &mut rusqlite::Connection) -> rusqlite::Result<Arc<WalPages>> {
    let pages = Arc::new(WalPages::default());
    let seen = Arc::clone(&pages);
    conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, n: std::ffi::c_int| {
        seen.0.store(n, Ordering::Relaxed);
        if n >= INLINE_PAGES {
            // As SQLite's automatic checkpoint: the commit has happened, and a checkpoint that
            // cannot run now (a reader holds an old snapshot) is tried again at the next commit.
            if wal.checkpoint().is_ok() {
                seen.0.store(0, Ordering::Relaxed);
            }
        }
        Ok(())
    }))?;
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use crate::{Options, Store};

    /// Writes `bytes` of incompressible rows in one transaction.
    fn write(store: &Store, bytes: usize) {
        let conn = store.conn();
        conn.execute_batch("CREATE TABLE IF NOT EXISTS t (b BLOB); BEGIN IMMEDIATE").unwrap();
        let mut x = 0x9e37_79b9_u32;
        let row: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for _ in 0..bytes / row.len() {
            conn.execute("INSERT INTO t (b) VALUES (?1)", [&row]).unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    }

    fn file_len(store: &Store) -> u64 {
        std::fs::metadata(store.path()).unwrap().len()
    }

    #[test]
    fn a_due_wal_is_copied_back_only_when_the_writer_asks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &Options::default()).unwrap();
        let before = file_len(&store);
        // ~1 300 pages: past the due length, short of the inline one.
        write(&store, 5 << 20);
        assert!(file_len(&store) < before + (1 << 20), "the commit copied the -wal back itself");
        store.checkpoint_if_due();
        assert!(file_len(&store) >= before + (5 << 20), "the due checkpoint did not run");
    }

    #[test]
    fn a_short_wal_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &Options::default()).unwrap();
        let before = file_len(&store);
        write(&store, 1 << 20);
        store.checkpoint_if_due();
        assert!(file_len(&store) < before + (1 << 20), "a 256-page -wal was checkpointed");
    }

    #[test]
    fn a_writer_that_never_asks_still_checkpoints_at_the_inline_length() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("j.db"), &Options::default()).unwrap();
        let before = file_len(&store);
        // ~4 400 pages.
        write(&store, 17 << 20);
        assert!(file_len(&store) >= before + (17 << 20), "the -wal grew past the inline length");
    }
}
