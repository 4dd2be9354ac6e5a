//! The shipped migrations (`migrations/` at the top level, embedded) and the schema version.

use rusqlite::Connection;

/// One shipped migration: `NNNN_name.sql` from the top-level `migrations/` folder.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The schema version it produces.
    pub version: u32,
    /// The file name.
    pub name: &'static str,
    /// The SQL.
    pub sql: &'static str,
}

/// A shipped migration: its version and the file under `migrations/` it is read from at build time.
macro_rules! migration {
    ($version:literal, $name:literal) => {
        Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../../../migrations/", $name)),
        }
    };
}

/// Every shipped migration, in order. Shipped migrations are frozen (see `migrations/checksums.txt`).
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "0001_ccr.sql"),
    migration!(2, "0002_journal.sql"),
    migration!(3, "0003_session_deletion.sql"),
    migration!(4, "0004_redactions_capture_ids.sql"),
    migration!(5, "0005_history_snapshots.sql"),
    migration!(6, "0006_ccr_key_range.sql"),
    migration!(7, "0007_events_without_rowid.sql"),
    migration!(8, "0008_event_blob_links.sql"),
];

/// The schema version this build writes.
pub fn latest_version() -> u32 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

/// The schema version a connection sees (`PRAGMA user_version`); a negative one reads as `u32::MAX`.
pub(crate) fn user_version(conn: &Connection) -> Result<u32, rusqlite::Error> {
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}
