//! What an existing path holds, found without writing to it: a salvage database (and its
//! version), a new file, or something refused (another application's database, a foreign `-wal`).

use crate::migrations::user_version;
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
/// database of another application or one this build cannot read is refused here, before any
/// connection that could write (switch the journal mode, add tables, stamp an identity) opens it.
/// The read-only connection comes back with a salvage database, so a read-only open uses it
/// instead of opening (and parsing the schema) a second time.
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
    let mut header = [0u8; 16];
    let mut f = std::fs::File::open(path)
        .map_err(|source| StoreError::Create { path: path.to_path_buf(), source })?;
    if f.read_exact(&mut header).is_err() || &header != b"SQLite format 3\0" {
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
    // One read transaction: a migration committed by another process between the two reads
    // would otherwise show tables without their version.
    conn.execute_batch("BEGIN").map_err(open_err)?;
    let version = user_version(&conn).map_err(open_err)?;
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut st| st.query_map([], |r| r.get::<_, String>(0))?.collect())
        .map_err(open_err)?;
    let _ = conn.execute_batch("COMMIT");
    if version == 0 && names.is_empty() {
        return Ok((Found::Empty, None));
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
    Ok((Found::Salvage(version), Some(conn)))
}
