//! Replay: re-running the recovery over captured failures against a simulated provider and
//! gateway, journaling every step, and checking the result.
//!
//! Owns the simulated upstream (gateway styles, a real BPE token count, provider wording,
//! context editing, scripted replies), the turn driver in the order of `behavior.md` section 11,
//! the checks of `capture.md`, and corpus runs. It does not parse arguments or print (the CLI
//! does). Design decision: every run is a journal session, and the rewind check restores the
//! journal before each rewrite and compares it with the driver's own copy, so the journal's
//! exactness is tested on every capture of every corpus run.

// Libraries do not panic on any input (issue #12): no indexing or slicing that can be out of
// bounds or split a character, no arithmetic that can overflow or divide by zero. Use `get()`,
// iterators, `split_at_checked`, `char_indices`, `saturating_*` and `checked_*`. Unit tests may.
#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod baseline;
pub mod checks;
pub mod corpus;
pub mod driver;
mod held;
pub mod media;
pub mod o200k;
pub mod shard;
pub mod synth;
pub mod unheld;
pub mod upstream;
