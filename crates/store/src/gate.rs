//! Writers of one file inside one process take turns without sleeping.
//!
//! SQLite's busy handler polls a held write lock with sleeps that grow to 100 ms, so a writer
//! that waited behind a long transaction (a capture's whole history journaled at once) sleeps on
//! long after the lock is free: `replay --jobs 2` slept 150–1 500 ms of a 1.7 s run that way
//! (`strace -e clock_nanosleep`). Design decision: the connections this process opens on the
//! same file share a [`WriteGate`], entered before `BEGIN IMMEDIATE` and left after the commit
//! or rollback, so a waiting writer of this process is woken the moment the other one is done.
//! The gate never replaces SQLite's lock (other processes still meet the busy handler, and a
//! writer that did not enter the gate is still refused by SQLite): it only decides who of this
//! process asks for the lock next. A wait on the gate is bounded by the busy timeout; past it the
//! writer goes on to SQLite's lock as before, so the gate can delay a write, never lose one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

/// The turn-taking of one file's writers in this process.
#[derive(Debug, Default)]
pub struct WriteGate {
    taken: Mutex<bool>,
    freed: Condvar,
}

/// A turn at writing, given back when dropped.
#[derive(Debug)]
pub struct GateTurn {
    gate: Option<Arc<WriteGate>>,
}

impl WriteGate {
    /// Waits for this process's other writers of the file, at most `timeout`; the turn is empty
    /// (the writer goes on to SQLite's lock unguarded) when the wait timed out.
    pub fn enter(self: &Arc<WriteGate>, timeout: Duration) -> GateTurn {
        let deadline = Instant::now().checked_add(timeout);
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken {
            let left =
                deadline.map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return GateTurn { gate: None };
            }
            taken = self.freed.wait_timeout(taken, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        *taken = true;
        GateTurn { gate: Some(Arc::clone(self)) }
    }
}

impl GateTurn {
    /// No turn: a writer with no gate (an in-memory or read-only store).
    pub(crate) fn none() -> GateTurn {
        GateTurn { gate: None }
    }

    /// True when the turn was given (false after a timed-out wait).
    pub fn held(&self) -> bool {
        self.gate.is_some()
    }
}

impl Drop for GateTurn {
    fn drop(&mut self) {
        if let Some(g) = self.gate.take() {
            *g.taken.lock().unwrap_or_else(PoisonError::into_inner) = false;
            g.freed.notify_one();
        }
    }
}

/// What identifies a file however it was named: device and inode on Unix, else the canonical
/// path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileId {
    #[cfg(unix)]
    Inode(u64, u64),
    #[cfg(not(unix))]
    Path(std::path::PathBuf),
}

fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileId::Inode(m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok().map(FileId::Path)
    }
}

/// The gate of the file at `path`, shared by every store of this process open on it; `None` when
/// the file cannot be identified (the writer then relies on SQLite's lock alone).
pub(crate) fn gate_of(path: &Path) -> Option<Arc<WriteGate>> {
    static GATES: OnceLock<Mutex<HashMap<FileId, Weak<WriteGate>>>> = OnceLock::new();
    let id = file_id(path)?;
    let mut gates = GATES.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(g) = gates.get(&id).and_then(Weak::upgrade) {
        return Some(g);
    }
    // Gates of files no store holds any more are dropped as new ones are made.
    gates.retain(|_, w| w.strong_count() > 0);
    let g = Arc::new(WriteGate::default());
    gates.insert(id, Arc::downgrade(&g));
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_second_writer_waits_for_the_first_and_enters_when_it_is_done() {
        let g = Arc::new(WriteGate::default());
        let first = g.enter(Duration::from_secs(5));
        assert!(first.held());
        let done = Arc::new(AtomicBool::new(false));
        let (g2, done2) = (Arc::clone(&g), Arc::clone(&done));
        let waiter = std::thread::spawn(move || {
            let turn = g2.enter(Duration::from_secs(5));
            // The first turn must have ended before this one began.
            (turn.held(), done2.load(Ordering::SeqCst))
        });
        std::thread::sleep(Duration::from_millis(50));
        done.store(true, Ordering::SeqCst);
        drop(first);
        assert_eq!(waiter.join().unwrap(), (true, true));
    }

    #[test]
    fn a_wait_past_the_timeout_goes_on_without_a_turn() {
        let g = Arc::new(WriteGate::default());
        let _first = g.enter(Duration::from_secs(5));
        let t = Instant::now();
        let second = g.enter(Duration::from_millis(30));
        assert!(!second.held());
        assert!(t.elapsed() >= Duration::from_millis(30));
        // An empty turn gives nothing back: the first still holds the gate.
        drop(second);
        assert!(!g.enter(Duration::ZERO).held());
    }

    #[test]
    fn two_names_of_one_file_share_a_gate_and_other_files_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.db");
        std::fs::write(&a, b"").unwrap();
        let b = dir.path().join("b.db");
        std::fs::write(&b, b"").unwrap();
        let alias = dir.path().join("alias.db");
        std::fs::hard_link(&a, &alias).unwrap();
        let ga = gate_of(&a).unwrap();
        assert!(Arc::ptr_eq(&ga, &gate_of(&alias).unwrap()));
        assert!(!Arc::ptr_eq(&ga, &gate_of(&b).unwrap()));
        assert!(gate_of(&dir.path().join("missing.db")).is_none());
    }
}
