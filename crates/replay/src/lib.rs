//! Replay: re-running the recovery over captured failures against a simulated provider and
//! gateway, journaling every step, and checking the result.
//!
//! Owns the simulated upstream (gateway styles, a real BPE token count, provider wording,
//! context editing, scripted replies), the turn driver in the order of `behavior.md` section 11,
//! the checks of `capture.md`, and corpus runs. It does not parse arguments or print (the CLI
//! does). Design decision: every run is a journal session, and the rewind check restores the
//! journal before each rewrite and compares it with the driver's own copy, so the journal's
//! exactness is tested on every capture of every corpus run.

pub mod baseline;
pub mod checks;
pub mod corpus;
pub mod driver;
pub mod shard;
pub mod synth;
pub mod upstream;
