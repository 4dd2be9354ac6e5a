//! What an existing path holds, found without writing to it: a salvage database (and its
//! version), a new file, or something refused (another application's database, a foreign `-wal`).
//!
//! Design decision (one `-wal` check per kind of connection): a connection that can write would
//! replay a foreign `-wal` into the file at its first checkpoint, so before one opens,
//! [`check_wal_identity`] walks the `-wal` itself ([`crate::wal`]). A read-only connection never
//! checkpoints (SQLite cannot take the exclusive lock it needs on a file it opened read-only), so
//! a reader needs no walk: [`inspect`] asks SQLite for page 1 as SQLite reads it — its newest
//! committed copy in the `-wal`, whose frames SQLite's own recovery checked — and compares its
//! application id with the file header's. That is the condition the walk tests, decided by the
//! code that would replay the `-wal`, for one read of a page the schema read loads anyway instead
//! of one `pread` per frame of the whole `-wal` on every cold reader.

use crate::wal::be32;
use crate::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// Refuses a `-wal` beside `path` whose committed copy of page 1 names another application id
/// than the database file's header ([`crate::wal`] says how it is read, crash leftovers included).
pub(crate) fn check_wal_identity(path: &Path) -> Result<(), StoreError> {
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let mut header = [0u8; 100];
    if f.read_exact(&mut header).is_err() {
        return Ok(());
    }
    let Some(file_id) = be32(&header, 68).filter(|&id| id != 0) else { return Ok(()) };
    match crate::wal::foreign_wal_id(path, file_id) {
        Some(wal_id) => Err(StoreError::ForeignWal { path: path.to_path_buf(), file_id, wal_id }),
        None => Ok(()),
    }
}

/// What an existing path holds, found without writing to it.
pub(crate) enum Found {
    /// Nothing at the path.
    Missing,
    /// An empty file or a database without any schema (a new file).
    Empty,
    /// A salvage database at this schema version.
    Salvage(u32),
}

/// Our first migration's table: every salvage database at version 1 or later has it.
const MARKER_TABLE: &str = "ccr_blobs";

/// Looks at an existing file through a read-only connection: a file that is not a database, a
/// database of another application, one this build cannot read or one whose `-wal` SQLite reads
/// as another database's page 1 is refused here, before any connection that could write (switch
/// the journal mode, add tables, stamp an identity, checkpoint) opens it. The read-only connection
/// comes back with a salvage database, so a read-only open uses it instead of opening (and parsing
/// the schema) a second time.
pub(crate) fn inspect(path: &Path) -> Result<(Found, Option<Connection>), StoreError> {
    if path.as_os_str() == ":memory:" {
        return Ok((Found::Empty, None));
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Found::Missing, None)),
        Err(source) => return Err(StoreError::Create { path: path.to_path_buf(), source }),
    };
    if !meta.is_file() {
        return Err(StoreError::Foreign { path: path.to_path_buf(), detail: "not a regular file".into() });
    }
    if meta.len() == 0 {
        return Ok((Found::Empty, None));
    }
    let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
    let mut header = [0u8; 100];
    let mut f = std::fs::File::open(path)
        .map_err(|source| StoreError::Create { path: path.to_path_buf(), source })?;
    if f.read_exact(&mut header).is_err() || header.get(..16) != Some(b"SQLite format 3\0".as_slice()) {
        return Err(open_err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some("file is not a database".into()),
        )));
    }
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(open_err)?;
    let _ = conn.busy_timeout(Duration::from_secs(30));
    // Registered before the schema is read: registering a module later expires every statement
    // prepared before, so a cold reader would compile each of its statements twice.
    rusqlite::vtab::array::load_module(&conn).map_err(open_err)?;
    let seen = read_page1_and_schema(&conn).map_err(open_err)?;
    // The file header's id against page 1 as SQLite reads it, through the `-wal` (an id of 0 on
    // either side names no database, as in the walk).
    let file_id = be32(&header, 68).unwrap_or(0);
    if file_id != 0 && seen.app_id != 0 && seen.app_id != file_id {
        return Err(StoreError::ForeignWal { path: path.to_path_buf(), file_id, wal_id: seen.app_id });
    }
    classify(path, seen.version, &seen.names).map(|found| {
        let keep = matches!(found, Found::Salvage(_));
        (found, keep.then_some(conn))
    })
}

/// What one read of page 1 and the schema shows.
struct Seen {
    /// `PRAGMA user_version` (a negative one reads as `u32::MAX`).
    version: u32,
    /// `PRAGMA application_id` as SQLite reads page 1 (through the `-wal`).
    app_id: u32,
    /// The tables, indexes and triggers, by name.
    names: Vec<String>,
}

/// Page 1's schema version and application id and the schema's names, in one read transaction
/// (a migration another process commits between the reads cannot show tables without their
/// version). Plain statements: the same read through the pragmas' table-valued functions in one
/// statement took twice as long to compile.
fn read_page1_and_schema(conn: &Connection) -> Result<Seen, rusqlite::Error> {
    conn.execute_batch("BEGIN")?;
    let seen = read_in_transaction(conn);
    let _ = conn.execute_batch("COMMIT");
    seen
}

fn read_in_transaction(conn: &Connection) -> Result<Seen, rusqlite::Error> {
    let mut names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    names.retain(|n| !n.starts_with("sqlite_"));
    names.sort_unstable();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let app_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    Ok(Seen {
        version: u32::try_from(version).unwrap_or(u32::MAX),
        // A signed 32-bit integer in SQLite's hands: its bits are the header's.
        app_id: app_id as u32,
        names,
    })
}

/// What a schema version and the schema's names say the file is.
fn classify(path: &Path, version: u32, names: &[String]) -> Result<Found, StoreError> {
    if version == 0 && names.is_empty() {
        return Ok(Found::Empty);
    }
    if !names.iter().any(|n| n == MARKER_TABLE) {
        let mut shown: Vec<&str> = names.iter().map(String::as_str).take(5).collect();
        if names.len() > 5 {
            shown.push("…");
        }
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            detail: if names.is_empty() {
                format!("schema version {version} without salvage's tables")
            } else {
                format!("tables {}", shown.join(", "))
            },
        });
    }
    if version == 0 {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            detail: "a ccr_blobs table but no salvage schema version".into(),
        });
    }
    // Every table the migrations up to its version create: one table of the right name is no
    // proof (a file of another application with a `ccr_blobs` table and user_version 8 was
    // switched to WAL and stamped before a statement failed on it; review of the CLI, finding 9).
    // Tables added beside ours are allowed; a trigger or an index dropped is tampering that
    // `journal verify` reports, not another file.
    let missing: Vec<&str> = TABLES
        .iter()
        .filter(|(_, since)| *since <= version)
        .map(|(name, _)| *name)
        .filter(|n| names.binary_search_by(|x| x.as_str().cmp(n)).is_err())
        .take(3)
        .collect();
    if !missing.is_empty() {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            detail: format!(
                "schema version {version} without salvage's {} (not salvage's, or damaged)",
                missing.join(", ")
            ),
        });
    }
    Ok(Found::Salvage(version))
}

/// Salvage's tables and the schema version that created each (no migration drops one). A constant,
/// not worked out from the migrations at every open (that cost a cold command 4 ms); the test
/// `the_tables_of_each_version_are_the_migrations` keeps it equal to what they create.
const TABLES: &[(&str, u32)] = &[
    ("ccr_blobs", 1),
    ("ccr_refs", 1),
    ("deleted_sessions", 3),
    ("event_blobs", 2),
    ("event_blobs_unvouched", 8),
    ("events", 2),
    ("message_redactions", 4),
    ("messages", 2),
    ("session_deletions", 3),
    ("sessions", 2),
    ("snapshots", 2),
];

#[cfg(test)]
mod tests {
    use crate::wal::tests::wal_bytes;
    use crate::{Options, Store, StoreError};
    use rusqlite::Connection;
    use std::path::{Path, PathBuf};

    fn side(p: &Path, suffix: &str) -> PathBuf {
        let mut w = p.as_os_str().to_owned();
        w.push(suffix);
        PathBuf::from(w)
    }

    /// A closed salvage database (its own `-wal` checkpointed away) and its application id.
    fn ours(dir: &Path) -> (PathBuf, u32) {
        let p = dir.join("ours.db");
        drop(Store::open(&p, &Options::default()).unwrap());
        let id: i64 =
            Connection::open(&p).unwrap().query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
        assert!(!side(&p, "-wal").exists());
        (p, id as u32)
    }

    /// The `-wal` real SQLite leaves for another application's database (application id 8738)
    /// before any checkpoint, copied beside `to`.
    fn foreign_wal_beside(dir: &Path, to: &Path) {
        let theirs = dir.join("theirs.db");
        let c = Connection::open(&theirs).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; PRAGMA application_id = 8738;
             CREATE TABLE t (x); INSERT INTO t VALUES (1);",
        )
        .unwrap();
        std::fs::copy(side(&theirs, "-wal"), side(to, "-wal")).unwrap();
    }

    #[test]
    fn the_tables_of_each_version_are_the_migrations() {
        let conn = Connection::open_in_memory().unwrap();
        for m in crate::migrations::MIGRATIONS {
            conn.execute_batch(m.sql).unwrap();
            let made: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let listed: Vec<&str> =
                super::TABLES.iter().filter(|(_, v)| *v <= m.version).map(|(n, _)| *n).collect();
            assert_eq!(made, listed, "version {}", m.version);
        }
    }

    /// Review of the CLI, finding 9: another application's file with a `ccr_blobs` table and
    /// user_version 8 was taken for ours, switched to WAL and stamped before a statement failed.
    /// It is refused at the open, unchanged; ours with a table of its own added still opens.
    #[test]
    fn one_table_named_like_ours_is_no_proof_and_the_file_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("theirs.db");
        Connection::open(&p)
            .unwrap()
            .execute_batch("CREATE TABLE ccr_blobs (x); PRAGMA user_version = 8;")
            .unwrap();
        let before = std::fs::read(&p).unwrap();
        for opts in [Options::default(), Options::read_only()] {
            match Store::open(&p, &opts) {
                Err(StoreError::Foreign { detail, .. }) => {
                    assert!(detail.contains("schema version 8 without"), "{detail}")
                }
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("a file with one table of ours was opened"),
            }
        }
        assert_eq!(std::fs::read(&p).unwrap(), before, "the file is unchanged");
        assert!(!side(&p, "-wal").exists());
        let (ours, _) = ours(dir.path());
        Connection::open(&ours).unwrap().execute_batch("CREATE TABLE mine (x)").unwrap();
        assert!(Store::open(&ours, &Options::default()).is_ok());
    }

    #[test]
    fn a_reader_refuses_a_foreign_wal_as_sqlite_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let (p, id) = ours(dir.path());
        foreign_wal_beside(dir.path(), &p);
        let before = std::fs::read(&p).unwrap();
        match Store::open(&p, &Options::read_only()) {
            Err(StoreError::ForeignWal { file_id, wal_id: 8738, path }) => {
                assert_eq!((file_id, path), (id, p.clone()));
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a reader accepted a foreign -wal"),
        }
        assert_eq!(std::fs::read(&p).unwrap(), before, "the reader changed the file");
        // A writer refuses it too, after the reader (which cannot checkpoint it into the file).
        assert!(matches!(
            Store::open(&p, &Options::default()),
            Err(StoreError::ForeignWal { wal_id: 8738, .. })
        ));
        assert_eq!(std::fs::read(&p).unwrap(), before, "the writer changed the file");
        // Without it (SQLite rebuilds its index from the -wal it finds), the file reads.
        std::fs::remove_file(side(&p, "-wal")).unwrap();
        let _ = std::fs::remove_file(side(&p, "-shm"));
        Store::open(&p, &Options::read_only()).unwrap();
    }

    #[test]
    fn a_reader_of_a_live_journal_takes_its_own_wal() {
        let dir = tempfile::tempdir().unwrap();
        // A new file whose header still holds no id (the id is only in the -wal), then a file
        // whose id is in its header and in the page-1 copies its live writer keeps adding.
        let p = dir.path().join("live.db");
        let w = Store::open(&p, &Options::default()).unwrap();
        Store::open(&p, &Options::read_only()).unwrap();
        w.conn().execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 0;").unwrap();
        for n in 0..5 {
            w.conn().execute_batch(&format!("CREATE TABLE extra{n} (x);")).unwrap();
            let r = Store::open(&p, &Options::read_only()).unwrap();
            assert!(std::fs::metadata(side(&p, "-wal")).unwrap().len() > 0);
            let n: i64 = r
                .conn()
                .query_row("SELECT count(*) FROM sqlite_master WHERE name LIKE 'extra%'", [], |r| r.get(0))
                .unwrap();
            assert!(n >= 1);
        }
    }

    #[test]
    fn a_reader_refuses_a_foreign_wal_sqlite_cannot_read_as_a_database() {
        // Frames whose page 1 is no database page (page size 512, no header string): SQLite's
        // view of the file fails, and the reader fails with it, naming the file.
        let dir = tempfile::tempdir().unwrap();
        let (p, _) = ours(dir.path());
        std::fs::write(side(&p, "-wal"), wal_bytes(false, 512, &[(1, 1, 0x2222)])).unwrap();
        let e = Store::open(&p, &Options::read_only()).expect_err("a reader accepted a foreign -wal");
        assert!(e.to_string().contains("ours.db"), "{e}");
    }
}
