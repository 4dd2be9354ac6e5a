//! Context recovery as pure logic: the failure classifier, the payload policy, the three-rung
//! ladder with content shrinking, the tool-result budget, pairing repair, output-limit
//! escalation, the compaction pipeline, and the sans-IO turn engine ([`engine::Turn`]) that
//! strings them together.
//!
//! This crate takes data and returns data: no files, database, clock or environment. It reaches
//! the outside only through its traits, which the drivers implement (`salvage-replay` with the
//! journal's CCR, `salvage-adapters` with real processes and servers, tests in memory):
//!
//! | trait | what it stands for | implemented by |
//! |---|---|---|
//! | [`archive::Archive`] | where originals go before they are cut or dropped | `MemoryArchive`, replay's archive, `salvage_adapters::archive` (CCR) |
//! | [`summarizer::Summarizer`] | turns a segment into a level-2 summary | `Builtin`, `Recorded`, `cmd:` and `mcp:` in adapters |
//! | [`compaction::Hooks`] | PreCompact/PostCompact hooks | `NoHooks`, `salvage_adapters::hooks::ConfiguredHooks` |
//! | [`compaction::MemorySink`] | takes a segment before it is summarized away | `NoMemory`, the drivers |
//! | [`engine::Wire`] | the request-size model of the wire format in use | replay's capture wire, the proxy |
//!
//! [`engine::EngineIo`] bundles them for one step of a turn. Design decision: every operation
//! returns a report (what was done, bytes and messages before and after, keys archived, messages
//! for the user) that the journal records as an event and the CLI prints. Texts salvage inserts
//! into a history live in [`notices`], so the modules that insert and recognise them do not
//! import each other.

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
pub mod preview;
pub mod recoverable;
pub mod session;
pub mod shrink;
pub mod skills;
pub mod summarizer;
pub mod task;
pub mod tool_budget;
pub mod trim;
