//! Why a file could not be opened or migrated.

use std::path::PathBuf;

/// Why the file could not be opened or migrated. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The folder or file could not be created.
    #[error("{path}: cannot create: {source}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// SQLite refused to open the file (missing with `create: false`, not a database, corrupt…).
    #[error("{path}: cannot open the database: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// A connection setting could not be applied.
    #[error("{path}: cannot apply setting {setting}: {source}")]
    Setting {
        /// The file.
        path: PathBuf,
        /// The pragma.
        setting: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The `-wal` file beside the database belongs to another database: opening would replay its
    /// pages into this one.
    #[error("{path}: the write-ahead log beside it belongs to another database (application id {wal_id:#x}, the file's is {file_id:#x}); move {path}-wal away if it is stray")]
    ForeignWal {
        /// The file.
        path: PathBuf,
        /// The database identity in the file's header.
        file_id: u32,
        /// The identity in the log's copy of page 1.
        wal_id: u32,
    },
    /// The file is an SQLite database of another application: salvage does not touch it.
    #[error("{path}: is another application's SQLite database ({detail}); salvage will not modify it (pass --db PATH for a salvage database)")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        detail: String,
    },
    /// No file at the path (and creating was not allowed).
    #[error("{path}: no such database")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file was migrated by a newer salvage.
    #[error("{path}: schema version {found} is newer than this build's {supported}; upgrade salvage to open this file")]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The file's version.
        found: u32,
        /// This build's latest version.
        supported: u32,
    },
    /// A migration failed (nothing of it was applied).
    #[error("{path}: migration {name} failed: {source}")]
    Migrate {
        /// The file.
        path: PathBuf,
        /// The migration.
        name: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
}
