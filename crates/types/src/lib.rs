//! Shared vocabulary of salvage: messages and histories in the reference client's JSON shape,
//! message weight, byte sizes, char-safe truncation, CCR keys and markers, failure classes, the
//! event bodies the journal stores, the capture format, the configuration struct and the
//! [`Clock`] every crate is handed (defined here once; [`SystemClock`] in binaries,
//! [`FixedClock`] in tests).
//!
//! This crate owns data and the rules that define it. Its only I/O is reading a capture file
//! ([`capture::reading`], [`input`]); it depends on nothing heavier than serde, serde_json,
//! blake3 and thiserror (plus base64 and two tiny decoding helpers for image weight), which
//! `crates/cli/tests/architecture.rs` holds it to. Test support that reads the environment (the
//! vectors loader) lives in `salvage-testkit`, not here. The design decision to know: every
//! persisted shape here is versioned and its JSON names are the reference client's own, so its
//! session files load as-is.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod bytesize;
pub mod capture;
pub mod ccr_key;
pub mod class;
pub mod clock;
pub mod config;
pub mod cut;
pub mod error;
pub mod event;
pub mod input;
pub mod message;
pub mod names;
pub mod timeline;
pub mod truncate;
pub mod weight;

pub use bytesize::{format_bytes, ByteSize};
pub use capture::{Capture, CaptureError, Expect, Failure, Outcome};
pub use ccr_key::{CcrKey, KeyPrefix};
pub use class::{ErrorClass, FallbackAction, RecoveryPath};
pub use clock::{Clock, FixedClock, SystemClock};
pub use config::Config;
pub use message::{History, Message, Role, ToolCall};
pub use weight::{history_weight, message_weight};
