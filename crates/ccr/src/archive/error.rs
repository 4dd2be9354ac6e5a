//! Why an archive operation failed.

use salvage_types::ccr_key::KeyPrefixError;

/// Why an archive operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CcrError {
    /// The key text is malformed.
    #[error("{0}")]
    Key(#[from] KeyPrefixError),
    /// No blob has this prefix.
    #[error("ccr:{prefix}: not found — expired or evicted from the local store")]
    NotFound {
        /// The prefix asked for.
        prefix: String,
    },
    /// Several blobs share this prefix.
    #[error("ccr:{prefix}: ambiguous — {} archived contents share it ({}); give more hex characters", candidates.len(), candidates.join(", "))]
    Ambiguous {
        /// The prefix asked for.
        prefix: String,
        /// The full keys that match.
        candidates: Vec<String>,
    },
    /// The stored bytes do not decode to the original (never returned).
    #[error("ccr:{key}: corrupt blob: {reason}")]
    Corrupt {
        /// The full key.
        key: String,
        /// What does not match.
        reason: String,
    },
    /// The content was redacted.
    #[error("ccr:{key}: content redacted (the key is kept so markers still explain themselves)")]
    Redacted {
        /// The full key.
        key: String,
    },
    /// The original is larger than the configured ceiling.
    #[error("ccr:{key}: original of {len} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// The full key (or `put`).
        key: String,
        /// Its length.
        len: u64,
        /// The ceiling.
        limit: u64,
    },
    /// SQLite failed.
    #[error("ccr {op}: {source}")]
    Sql {
        /// The operation.
        op: &'static str,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Compression failed.
    #[error("ccr put: compression failed: {0}")]
    Compress(#[source] std::io::Error),
}

pub(super) fn sql(op: &'static str) -> impl FnOnce(rusqlite::Error) -> CcrError {
    move |source| CcrError::Sql { op, source }
}
