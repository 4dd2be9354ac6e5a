//! Test support for the workspace, a dev-dependency only (never a normal one: the architecture
//! test gives no crate an arrow to it). It reads the environment and files, which the vocabulary
//! crate must not.
//!
//! [`vectors`] loads the acceptance vectors of `../shared/spec/vectors/`; [`python`] makes the
//! Python with pinned packages the end-to-end tests run against.

pub mod python;
pub mod vectors;
