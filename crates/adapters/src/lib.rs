//! Real I/O behind the recovery crate's traits: the CCR archive, the `cmd:PROGRAM` and
//! `mcp:SERVER` summarizers, and command and HTTP hooks.
//!
//! The recovery crate is pure logic; everything here touches processes, pipes, sockets or the
//! database, and is plugged in by the replay driver and the CLI. Design decision: every adapter
//! bounds its time (a timeout on each process or request) and turns every failure into a value
//! the pipeline reports — a slow or broken hook or engine never stalls a compaction.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod archive;
pub mod hooks;
pub mod mcp;
pub mod process;

pub use archive::CcrArchive;
