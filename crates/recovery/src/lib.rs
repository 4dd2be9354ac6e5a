//! Context recovery as pure logic: the failure classifier, the payload policy, the three-rung
//! ladder with content shrinking, the tool-result budget, pairing repair and output-limit
//! escalation.
//!
//! This crate takes data and returns data: no files, database, clock or environment. It reaches
//! the outside only through the [`archive::Archive`] trait, so the replay driver plugs in the real
//! CCR and tests an in-memory one. Design decision: every operation returns a report (what was
//! done, bytes and messages before and after, keys archived, messages for the user) that the
//! journal records as an event and the CLI prints.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod archive;
pub mod budget;
pub mod classify;
pub mod compaction;
pub mod context_edit;
pub mod dedup;
pub mod engine;
pub mod escalation;
pub mod gate;
pub mod ladder;
pub mod microcompact;
pub mod notices;
pub mod pairing;
pub mod payload;
pub mod recoverable;
pub mod session;
pub mod shrink;
pub mod skills;
pub mod summarizer;
pub mod task;
pub mod tool_budget;
pub mod trim;
