//! Test support for the workspace, a dev-dependency only (never a normal one: the architecture
//! test gives no crate an arrow to it). It reads the environment and files, which the vocabulary
//! crate must not.
//!
//! [`vectors`] loads the acceptance vectors of `../shared/spec/vectors/`; [`python`] makes the
//! Python with pinned packages the end-to-end tests run against; [`codex`] builds Codex CLI
//! rollout lines for the session importers' tests, which [`jsonl`] writes as a file.

pub mod codex;
pub mod python;
pub mod vectors;

/// The text of a JSON Lines file (a session file, a rollout) of `records`.
pub fn jsonl(records: &[serde_json::Value]) -> String {
    records.iter().map(|r| r.to_string() + "\n").collect()
}
