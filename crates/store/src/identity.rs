//! What an existing path holds, found without writing to it: a salvage database (and its
//! version), a new file, or something refused (another application's database, a foreign `-wal`).

use crate::migrations::user_version;
use crate::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// WAL frame header length, and where the application id sits in a frame holding page 1 (the
/// frame header, then header offset 68 of the page).
const WAL_FRAME_HEADER: usize = 24;
const WAL_FRAME_APP_ID: usize = WAL_FRAME_HEADER + 68;

/// Reads the database identity (application id, header offset 68) from the file and from the
/// newest valid copy of page 1 in its `-wal`, without SQLite, and refuses a mismatch. The `-wal`
/// is untrusted bytes: a page size SQLite could never write (not a power of two in 512..=65536) or a frame cut
/// short ends the walk, and nothing is concluded from it. Only the frame headers (and the identity
/// of a frame holding page 1) are read, not the pages: a live `-wal` stays megabytes long and
/// every open, the cold readers of a restore included, passes here.
pub(crate) fn check_wal_identity(path: &Path) -> Result<(), StoreError> {
    let mut wal_path = path.as_os_str().to_owned();
    wal_path.push("-wal");
    let Ok(mut wal) = std::fs::File::open(&wal_path) else { return Ok(()) };
    let wal_len = wal.metadata().map(|m| m.len()).unwrap_or(0);
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let mut header = [0u8; 100];
    if f.read_exact(&mut header).is_err() {
        return Ok(());
    }
    let mut wal_header = [0u8; 32];
    let Some(file_id) = be32(&header, 68) else { return Ok(()) };
    if file_id == 0 || wal.read_exact(&mut wal_header).is_err() {
        return Ok(());
    }
    if !matches!(be32(&wal_header, 0), Some(0x377f_0682 | 0x377f_0683)) {
        return Ok(());
    }
    let (Some(page_size), Some(salt1), Some(salt2)) =
        (be32(&wal_header, 8), be32(&wal_header, 16), be32(&wal_header, 20))
    else {
        return Ok(());
    };
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Ok(());
    }
    let frame_len = u64::from(page_size).saturating_add(u64::try_from(WAL_FRAME_HEADER).unwrap_or(u64::MAX));
    let mut wal_id = None;
    let mut at: u64 = 32;
    let mut frame = [0u8; WAL_FRAME_APP_ID + 4];
    while at.checked_add(frame_len).is_some_and(|end| end <= wal_len) {
        if read_at(&wal, &mut frame, at).is_err() {
            break;
        }
        let (pgno, s1, s2) = (be32(&frame, 0), be32(&frame, 8), be32(&frame, 12));
        if s1 != Some(salt1) || s2 != Some(salt2) {
            break;
        }
        if pgno == Some(1) {
            wal_id = be32(&frame, WAL_FRAME_APP_ID);
        }
        at = at.saturating_add(frame_len);
    }
    match wal_id {
        Some(w) if w != 0 && w != file_id => {
            Err(StoreError::ForeignWal { path: path.to_path_buf(), file_id, wal_id: w })
        }
        _ => Ok(()),
    }
}

/// Reads `buf.len()` bytes at `at`: one `pread` per frame header where the platform has it (a
/// live `-wal` holds about a thousand frames, and every cold open walks them).
#[cfg(unix)]
fn read_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
}

#[cfg(not(unix))]
fn read_at(mut f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(at)).and_then(|_| f.read_exact(buf))
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
