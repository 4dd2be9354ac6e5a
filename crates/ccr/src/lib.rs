//! CCR: the compressed, content-addressed archive behind `@recall`.
//!
//! Owns the `ccr_blobs` and `ccr_refs` tables: putting originals (idempotent, keyed by BLAKE3 of
//! the original bytes, zstd level 3 or raw; several in one transaction, hashed and compressed on
//! every core beforehand, see `archive/encode.rs`), getting them back by a 16-to-64-hex prefix with the
//! hash verified on every read, retention, redaction, and parsing the many forms a recall request
//! takes. It does not decide what to archive (the recovery crate does) nor open the file (the
//! store crate does). Design decision: the archive is a borrowed handle over a SQLite connection,
//! so the journal can put a blob, append the event that references it and record the reference in
//! one transaction.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod archive;
pub mod recall;

pub use archive::{
    Ccr, CcrError, Clock, GcReport, PutOutcome, Retention, Staged, Stats, SystemClock, VerifyReport, FRAME,
    PARALLEL_MIN,
};
