//! Why a journal operation failed, and the checked conversions of stored integers and hashes:
//! a value SQLite hands back that no writer could have stored (a negative sequence number, a hash
//! that is not 32 bytes) is corruption naming the session and the event, never clamped.

use salvage_store::StoreError;

/// Why a journal operation failed. Every variant names what failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another writer appended first.
    #[error("session {session}: version conflict: expected {expected}, the session is at {actual}")]
    Conflict {
        /// The session.
        session: String,
        /// The version the writer expected.
        expected: u64,
        /// The version found.
        actual: u64,
    },
    /// No such session.
    #[error("session {0}: not found")]
    NoSession(String),
    /// The session already exists.
    #[error("session {0}: already exists")]
    SessionExists(String),
    /// No such event.
    #[error("session {session}: no event {seq}")]
    NoEvent {
        /// The session.
        session: String,
        /// The event.
        seq: u64,
    },
    /// An event id was reused for different content.
    #[error("event id {0}: already used by another event")]
    IdReused(String),
    /// Stored data does not decode or does not match its hash.
    #[error("session {session}, event {seq}: {problem}")]
    Corrupt {
        /// The session.
        session: String,
        /// The event (0 for the session row itself).
        seq: u64,
        /// What is wrong.
        problem: String,
    },
    /// A referenced CCR blob is missing.
    #[error("CCR blob {0} referenced by an event is not archived")]
    MissingBlob(String),
    /// SQLite failed.
    #[error("journal {op}: {source}")]
    Sql {
        /// The operation.
        op: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Invalid input.
    #[error("{0}")]
    Invalid(String),
}

impl JournalError {
    /// Corruption at `seq` of `session`.
    pub(crate) fn corrupt(session: &str, seq: u64, problem: impl Into<String>) -> JournalError {
        JournalError::Corrupt { session: session.to_string(), seq, problem: problem.into() }
    }
}

/// Maps a SQLite error of operation `op`.
pub(crate) fn sql(op: &'static str) -> impl FnOnce(rusqlite::Error) -> JournalError {
    move |source| JournalError::Sql { op, source }
}

/// A stored integer column that must be non-negative (sequence numbers, depths, counts).
pub(crate) fn stored_u64(session: &str, seq: u64, column: &str, v: i64) -> Result<u64, JournalError> {
    u64::try_from(v).map_err(|_| JournalError::corrupt(session, seq, format!("{column} is {v}, not a count")))
}

/// A stored integer column that must fit in 32 bits unsigned (kind versions).
pub(crate) fn stored_u32(session: &str, seq: u64, column: &str, v: i64) -> Result<u32, JournalError> {
    u32::try_from(v)
        .map_err(|_| JournalError::corrupt(session, seq, format!("{column} is {v}, outside 0..=4294967295")))
}

/// A stored 32-byte hash or key column.
pub(crate) fn stored_hash(session: &str, seq: u64, column: &str, b: &[u8]) -> Result<[u8; 32], JournalError> {
    <[u8; 32]>::try_from(b)
        .map_err(|_| JournalError::corrupt(session, seq, format!("{column} is {} bytes, not 32", b.len())))
}

/// A sequence number, depth or count as SQLite's integer. Values above `i64::MAX` cannot be
/// stored and are never produced by the journal (a session would need 2^63 events); a caller
/// asking for such an event saturates to `i64::MAX`, which names no stored row, so the read
/// answers "no event" as it should.
pub(crate) fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
