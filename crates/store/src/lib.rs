//! The project's SQLite file: opening it with the right settings and applying `migrations/`.
//!
//! Owns the connection settings (WAL, `synchronous`, `busy_timeout`, foreign keys, owner-only
//! file permissions) and the schema version (`PRAGMA user_version`). It does not know what the
//! tables mean: the journal and CCR crates own their queries. Design decision: migrations are
//! embedded SQL files applied in one `BEGIN IMMEDIATE` transaction, so two processes opening a new
//! file at once serialize on the write lock and the second one finds the work done.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

mod busy;
mod checkpoint;
mod error;
mod gate;
mod identity;
mod migrations;
mod wal;

pub use checkpoint::{DUE_PAGES, INLINE_PAGES};
pub use error::StoreError;
pub use gate::{GateTurn, WriteGate};
pub use migrations::{latest_version, Migration, MIGRATIONS};

use identity::{check_wal_identity, inspect, Found};
use migrations::user_version;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much of the file a read-only handle maps (SQLite's `mmap_size`): reads of mapped pages are
/// memory copies instead of one `pread` per page. salvage never shrinks a journal file (no
/// `VACUUM`; WAL checkpoints only grow it), which is what would make a mapping unsafe.
const READER_MMAP: i64 = 1 << 30;

/// How durable a commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=NORMAL` in WAL mode: a power loss may drop the last commits, never corrupt.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is on disk when it returns.
    Full,
}

/// Options for opening the file.
#[derive(Debug, Clone)]
pub struct Options {
    /// Commit durability.
    pub durability: Durability,
    /// How long a writer waits for the lock before `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Create the file (and its folder) when missing.
    pub create: bool,
    /// Open for reading only: nothing in the file changes (no journal-mode switch, no identity
    /// stamp). A file whose schema is older than this build's is still migrated first.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(30),
            create: true,
            read_only: false,
        }
    }
}

impl Options {
    /// Options for a command that only reads an existing file.
    pub fn read_only() -> Options {
        Options { create: false, read_only: true, ..Options::default() }
    }
}

/// An open database file.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The turn-taking of this process's writers of the file (`None`: reads only, in memory).
    gate: Option<std::sync::Arc<WriteGate>>,
    busy_timeout: Duration,
    /// The `-wal`'s length after the latest commit (writer connections only: `checkpoint.rs`).
    wal: Option<std::sync::Arc<checkpoint::WalPages>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating if allowed) and migrates the file at `path`.
    pub fn open(path: &Path, options: &Options) -> Result<Store, StoreError> {
        Store::open_to(path, options, latest_version())
    }

    /// Opens and migrates up to `target` (tests use this to build every earlier version).
    ///
    /// An existing file is inspected through a read-only connection first: a file of another
    /// application, or of a newer salvage, or a `-wal` of another database, is refused before
    /// anything in it changes. A read-only open keeps that connection (SQLite itself vouched for
    /// its `-wal`); any other walks the `-wal` before a connection that can write opens.
    pub fn open_to(path: &Path, options: &Options, target: u32) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let (found, inspected) = inspect(&path)?;
        let found = match found {
            Found::Missing if options.create => {
                create_owner_only(&path)?;
                0
            }
            Found::Missing => return Err(StoreError::Missing { path }),
            // A read of an empty file (made by `touch`, or by a writer that has not started) reads
            // an empty journal and writes nothing: the schema lives in memory only.
            Found::Empty if options.read_only && path.as_os_str() != ":memory:" => {
                let mut store = Store::in_memory()?;
                store.path = path;
                return Ok(store);
            }
            Found::Empty => 0,
            Found::Salvage(v) => v,
        };
        if found > latest_version() {
            return Err(StoreError::NewerSchema { path, found, supported: latest_version() });
        }
        if let Some(conn) = inspected.filter(|_| options.read_only && found >= target) {
            // The connection that inspected the file, its schema already read: a cold reader
            // opens the file once.
            let setting = |setting: &'static str| {
                let path = path.clone();
                move |source| StoreError::Setting { path, setting, source }
            };
            conn.busy_timeout(options.busy_timeout).map_err(setting("busy_timeout"))?;
            // A reader maps the file instead of reading it a page at a time: a restore reads a
            // snapshot's megabytes as overflow pages, one `pread` each without it.
            conn.pragma_update(None, "mmap_size", READER_MMAP).map_err(setting("mmap_size"))?;
            return Ok(Store { conn, path, gate: None, busy_timeout: options.busy_timeout, wal: None });
        }
        // The inspecting connection is closed (`filter` dropped it): walk the `-wal` before one
        // that can write opens.
        check_wal_identity(&path)?;
        // A path is a path: no SQLite URI interpretation (`file:x.db` is a file of that name).
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags)
            .map_err(|source| StoreError::Open { path: path.clone(), source })?;
        let wal = checkpoint::install(&mut conn).map_err(|source| StoreError::Setting {
            path: path.clone(),
            setting: "wal_hook",
            source,
        })?;
        let gate = gate::gate_of(&path);
        let store = Store { conn, path, gate, busy_timeout: options.busy_timeout, wal: Some(wal) };
        store.configure(options)?;
        store.migrate(target)?;
        store.ensure_identity()?;
        Ok(store)
    }

    /// An in-memory database with the schema applied (for `--no-journal` runs and tests).
    pub fn in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn =
            Connection::open_in_memory().map_err(|source| StoreError::Open { path: path.clone(), source })?;
        let store =
            Store { conn, path, gate: None, busy_timeout: Options::default().busy_timeout, wal: None };
        store.conn.pragma_update(None, "foreign_keys", "ON").map_err(|source| StoreError::Setting {
            path: store.path.clone(),
            setting: "foreign_keys",
            source,
        })?;
        rusqlite::vtab::array::load_module(&store.conn).map_err(|source| StoreError::Setting {
            path: store.path.clone(),
            setting: "rarray",
            source,
        })?;
        store.migrate(latest_version())?;
        Ok(store)
    }

    fn configure(&self, options: &Options) -> Result<(), StoreError> {
        self.conn.busy_timeout(options.busy_timeout).map_err(|source| StoreError::Setting {
            path: self.path.clone(),
            setting: "busy_timeout",
            source,
        })?;
        let path = &self.path;
        let setting =
            |setting: &'static str| move |source| StoreError::Setting { path: path.clone(), setting, source };
        // Checking the header first turns "file is not a database" into a clear open error.
        self.conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(|source| StoreError::Open { path: self.path.clone(), source })?;
        let mode = busy::retry(options.busy_timeout, || {
            self.conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
        })
        .map_err(setting("journal_mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Setting {
                path: self.path.clone(),
                setting: "journal_mode",
                source: rusqlite::Error::InvalidParameterName(format!("journal_mode stayed {mode}")),
            });
        }
        let sync = match options.durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        self.conn.pragma_update(None, "synchronous", sync).map_err(setting("synchronous"))?;
        self.conn.pragma_update(None, "foreign_keys", "ON").map_err(setting("foreign_keys"))?;
        // Deleted and overwritten content is zeroed, so a redacted secret does not linger in
        // free pages of the file.
        self.conn.pragma_update(None, "secure_delete", "ON").map_err(setting("secure_delete"))?;
        // `rarray(?)` lets readers fetch many rows by key in one statement.
        rusqlite::vtab::array::load_module(&self.conn).map_err(setting("rarray"))?;
        Ok(())
    }

    /// Gives a new file a random identity in `PRAGMA application_id` (page 1 of the header), so a
    /// stray `-wal` from another database can be recognised before SQLite replays it.
    fn ensure_identity(&self) -> Result<(), StoreError> {
        let id: i64 = self.conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(|source| {
            StoreError::Setting { path: self.path.clone(), setting: "application_id", source }
        })?;
        if id == 0 {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write(self.path.to_string_lossy().as_bytes());
            let v = (h.finish() as u32 & 0x7fff_ffff).max(1);
            self.conn.pragma_update(None, "application_id", v).map_err(|source| StoreError::Setting {
                path: self.path.clone(),
                setting: "application_id",
                source,
            })?;
        }
        Ok(())
    }

    /// The schema version of the file.
    pub fn version(&self) -> Result<u32, StoreError> {
        user_version(&self.conn).map_err(|source| StoreError::Open { path: self.path.clone(), source })
    }

    fn migrate(&self, target: u32) -> Result<(), StoreError> {
        let found = self.version()?;
        if found > latest_version() {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found,
                supported: latest_version(),
            });
        }
        if found >= target {
            return Ok(());
        }
        // The write lock serializes two processes migrating a new file; re-read under it.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Migrate { path: self.path.clone(), name: "(begin)", source })?;
        let found =
            user_version(&tx).map_err(|source| StoreError::Open { path: self.path.clone(), source })?;
        if found > latest_version() {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found,
                supported: latest_version(),
            });
        }
        for m in MIGRATIONS.iter().filter(|m| m.version > found && m.version <= target) {
            tx.execute_batch(m.sql)
                .and_then(|()| tx.pragma_update(None, "user_version", m.version))
                .map_err(|source| StoreError::Migrate { path: self.path.clone(), name: m.name, source })?;
        }
        tx.commit().map_err(|source| StoreError::Migrate {
            path: self.path.clone(),
            name: "(commit)",
            source,
        })?;
        Ok(())
    }

    /// The connection.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, mutably (for transactions).
    pub fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Waits for this process's other writers of the same file (see [`WriteGate`]), at most the
    /// busy timeout; hold the turn from before `BEGIN IMMEDIATE` to after the commit or rollback.
    pub fn write_turn(&self) -> GateTurn {
        match &self.gate {
            Some(g) => g.enter(self.busy_timeout),
            None => GateTurn::none(),
        }
    }

    /// Copies the `-wal` back into the file when it has grown to [`DUE_PAGES`] (a `PASSIVE`
    /// checkpoint, which does not wait for other writers and which they need not wait for).
    /// Writers call it after giving back their write turn (see `checkpoint.rs`). A checkpoint
    /// that fails is tried again after the next commit: the commits it follows have happened.
    pub fn checkpoint_if_due(&self) {
        let Some(wal) = self.wal.as_ref().filter(|w| w.due()) else { return };
        if self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).is_ok() {
            wal.reset();
        }
    }

    /// The file's path (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates the folder and an empty file readable by its owner only (SQLite gives the `-wal` and
/// `-shm` files the same permissions).
fn create_owner_only(path: &Path) -> Result<(), StoreError> {
    if path.as_os_str() == ":memory:" {
        return Ok(());
    }
    let err = |source| StoreError::Create { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // New folders are the owner's only, whatever the umask.
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(dir).map_err(err)?;
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path).map(drop).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(conn: &Connection) -> Vec<String> {
        let mut st = conn
            .prepare(
                "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY name",
            )
            .unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect()
    }

    /// A database file whose header holds application id `file_id`, and a `-wal` beside it built
    /// by `wal` (raw bytes, so the test can write what SQLite never would).
    fn with_wal(dir: &Path, file_id: u32, wal: &[u8]) -> PathBuf {
        let p = dir.join("w.db");
        let mut header = vec![0u8; 100];
        header[68..72].copy_from_slice(&file_id.to_be_bytes());
        std::fs::write(&p, header).unwrap();
        let mut wal_path = p.as_os_str().to_owned();
        wal_path.push("-wal");
        std::fs::write(wal_path, wal).unwrap();
        p
    }

    use crate::wal::tests::wal_bytes;

    fn refused(p: &Path) -> Option<u32> {
        match check_wal_identity(p) {
            Err(StoreError::ForeignWal { file_id: 0x1111, wal_id, .. }) => Some(wal_id),
            Err(e) => panic!("{e}"),
            Ok(()) => None,
        }
    }

    #[test]
    fn a_committed_foreign_page_1_is_refused_in_either_checksum_order() {
        let dir = tempfile::tempdir().unwrap();
        for big_endian in [false, true] {
            // One transaction writing page 1 of another database.
            let p = with_wal(dir.path(), 0x1111, &wal_bytes(big_endian, 512, &[(2, 0, 0), (1, 3, 0x2222)]));
            assert_eq!(refused(&p), Some(0x2222), "big endian {big_endian}");
            // Our own id, and a later committed transaction that brings another id.
            let p = with_wal(dir.path(), 0x1111, &wal_bytes(big_endian, 512, &[(1, 1, 0x1111)]));
            assert_eq!(refused(&p), None);
            let p =
                with_wal(dir.path(), 0x1111, &wal_bytes(big_endian, 512, &[(1, 1, 0x1111), (1, 1, 0x2222)]));
            assert_eq!(refused(&p), Some(0x2222));
        }
    }

    #[test]
    fn what_a_killed_writer_leaves_in_the_wal_is_not_taken_for_a_foreign_database() {
        let dir = tempfile::tempdir().unwrap();
        // A transaction that never committed (no frame records a database size).
        let p = with_wal(
            dir.path(),
            0x1111,
            &wal_bytes(false, 512, &[(1, 1, 0x1111), (1, 0, 0x2222), (3, 0, 0)]),
        );
        assert_eq!(refused(&p), None);
        // A commit frame whose header was written but whose page still holds other bytes: its
        // checksum does not match, so SQLite ignores it and so does the check.
        let mut w = wal_bytes(false, 512, &[(1, 1, 0x1111), (1, 2, 0x2222)]);
        let last_page = w.len() - 512;
        w[last_page + 300] ^= 0xff;
        let p = with_wal(dir.path(), 0x1111, &w);
        assert_eq!(refused(&p), None);
        // The same frame intact is refused: the corruption above is what made the difference.
        w[last_page + 300] ^= 0xff;
        let p = with_wal(dir.path(), 0x1111, &w);
        assert_eq!(refused(&p), Some(0x2222));
    }

    #[test]
    fn a_foreign_page_1_under_a_later_copy_sqlite_would_not_replay_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // A committed foreign page 1, then a commit of our own page 1 whose checksum fails:
        // SQLite replays the first transaction only, so the foreign copy is the one it writes.
        let mut w = wal_bytes(false, 512, &[(1, 1, 0x2222), (1, 2, 0x1111)]);
        let last_page = w.len() - 512;
        w[last_page + 300] ^= 0xff;
        assert_eq!(refused(&with_wal(dir.path(), 0x1111, &w)), Some(0x2222));
    }

    #[test]
    fn a_wal_real_sqlite_wrote_for_another_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours.db");
        let theirs = dir.path().join("theirs.db");
        drop(Store::open(&ours, &Options::default()).unwrap());
        // Another application's database whose page 1 (its new application id) sits, committed,
        // in a -wal SQLite has not checkpointed: the walk must verify SQLite's own checksums.
        let c = Connection::open(&theirs).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; PRAGMA application_id = 8738;
             CREATE TABLE t (x); INSERT INTO t VALUES (1);",
        )
        .unwrap();
        let wal = |p: &Path| {
            let mut w = p.as_os_str().to_owned();
            w.push("-wal");
            PathBuf::from(w)
        };
        std::fs::copy(wal(&theirs), wal(&ours)).unwrap();
        drop(c);
        match Store::open(&ours, &Options::default()) {
            Err(StoreError::ForeignWal { wal_id: 8738, .. }) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a foreign -wal was accepted"),
        }
        // Without that -wal the file opens, and its own live -wal is its own.
        std::fs::remove_file(wal(&ours)).unwrap();
        let live = Store::open(&ours, &Options::default()).unwrap();
        live.conn().execute_batch("PRAGMA user_version = user_version").unwrap();
        assert!(check_wal_identity(&ours).is_ok());
        drop(live);
    }

    #[test]
    fn a_hostile_wal_header_is_walked_safely() {
        let dir = tempfile::tempdir().unwrap();
        let good = wal_bytes(false, 512, &[(1, 1, 0x2222)]);
        // Page sizes SQLite never writes (the header re-checksummed so only the size is wrong),
        // a bad header checksum, a frame cut short, a header cut short: nothing is concluded,
        // nothing panics.
        for declared in [u32::MAX, 0, 1000, 1 << 17, 1024] {
            let mut w = good.clone();
            w[8..12].copy_from_slice(&declared.to_be_bytes());
            let mut s = (0, 0);
            crate::wal::tests::sums(false, &w[..24], &mut s);
            w[24..28].copy_from_slice(&s.0.to_be_bytes());
            w[28..32].copy_from_slice(&s.1.to_be_bytes());
            assert_eq!(refused(&with_wal(dir.path(), 0x1111, &w)), None, "page size {declared}");
        }
        let mut w = good.clone();
        w[27] ^= 1;
        assert_eq!(refused(&with_wal(dir.path(), 0x1111, &w)), None);
        for cut in [40, good.len() - 1] {
            assert_eq!(refused(&with_wal(dir.path(), 0x1111, &good[..cut])), None, "cut at {cut}");
        }
        assert_eq!(refused(&with_wal(dir.path(), 0x1111, &good)), Some(0x2222));
    }

    #[test]
    fn migrates_from_empty_and_from_every_earlier_version() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = Store::open(&dir.path().join("fresh.db"), &Options::default()).unwrap();
        assert_eq!(fresh.version().unwrap(), latest_version());
        let want = schema(fresh.conn());
        for from in 0..latest_version() {
            let p = dir.path().join(format!("v{from}.db"));
            drop(Store::open_to(&p, &Options::default(), from).unwrap());
            let s = Store::open(&p, &Options::default()).unwrap();
            assert_eq!(s.version().unwrap(), latest_version());
            assert_eq!(schema(s.conn()), want, "from version {from}");
        }
    }

    #[test]
    fn settings_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(
            &dir.path().join("a.db"),
            &Options { durability: Durability::Full, ..Options::default() },
        )
        .unwrap();
        let mode: String = s.conn().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        let sync: i64 = s.conn().query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        let fk: i64 = s.conn().query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
        assert_eq!((mode.as_str(), sync, fk), ("wal", 2, 1));
        let s = Store::open(&dir.path().join("b.db"), &Options::default()).unwrap();
        let sync: i64 = s.conn().query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
        assert_eq!(sync, 1);
    }

    #[cfg(unix)]
    #[test]
    fn file_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/x.db");
        drop(Store::open(&p, &Options::default()).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn newer_schema_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.db");
        drop(Store::open(&p, &Options::default()).unwrap());
        Connection::open(&p).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let e = Store::open(&p, &Options::default()).unwrap_err().to_string();
        assert!(e.contains("schema version 99 is newer than this build's"), "{e}");
    }

    /// Review finding: `journal sessions` on an empty file wrote the whole schema into it.
    #[test]
    fn a_read_of_an_empty_file_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty.db");
        std::fs::write(&p, b"").unwrap();
        let s = Store::open(&p, &Options::read_only()).unwrap();
        let n: i64 = s.conn().query_row("SELECT count(*) FROM events", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "an empty journal");
        drop(s);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0, "the file is untouched");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["empty.db".to_string()], "no -wal or -shm beside it");
        // A writer still creates the schema in it.
        drop(Store::open(&p, &Options::default()).unwrap());
        assert!(std::fs::metadata(&p).unwrap().len() > 0);
    }

    #[test]
    fn not_a_database_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk.db");
        std::fs::write(&p, vec![0x42u8; 8192]).unwrap();
        let e = Store::open(&p, &Options::default()).unwrap_err().to_string();
        assert!(e.contains("junk.db") && e.contains("not a database"), "{e}");
    }

    #[test]
    fn shipped_migrations_are_frozen() {
        let text = include_str!("../../../migrations/checksums.txt");
        let pinned: Vec<(&str, &str)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_once("  ").unwrap())
            .collect();
        assert_eq!(pinned.len(), MIGRATIONS.len(), "every migration is pinned in migrations/checksums.txt");
        for (m, (hash, name)) in MIGRATIONS.iter().zip(&pinned) {
            assert_eq!(m.name, *name);
            assert_eq!(
                blake3::hash(m.sql.as_bytes()).to_hex().as_str(),
                *hash,
                "{} changed after shipping: add a new migration instead",
                m.name
            );
        }
        // Versions are 1..=N in order and match the file names.
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1);
            assert!(m.name.starts_with(&format!("{:04}_", m.version)));
        }
        let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sql"))
            .count();
        assert_eq!(on_disk, MIGRATIONS.len(), "every .sql file in migrations/ is embedded");
    }

    #[test]
    fn two_processes_worth_of_openers_on_a_new_file() {
        // Threads with their own connections race on a new file exactly as processes would.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("race.db");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || Store::open(&p, &Options::default()).map(|s| s.version().unwrap()))
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap().unwrap(), latest_version());
        }
    }

    #[test]
    fn two_openers_of_a_new_file_both_open_it_every_time() {
        // One race in seven failed with "journal_mode: database is locked" before the switch to
        // WAL was retried: SQLite refuses that lock at once, without a busy handler.
        let dir = tempfile::tempdir().unwrap();
        for round in 0..150 {
            let p = dir.path().join(format!("pair{round}.db"));
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let p = p.clone();
                    std::thread::spawn(move || Store::open(&p, &Options::default()).map(|_| ()))
                })
                .collect();
            for h in handles {
                if let Err(e) = h.join().unwrap() {
                    panic!("round {round}: {e}");
                }
            }
        }
    }
}
