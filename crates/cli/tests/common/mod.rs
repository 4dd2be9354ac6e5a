//! Helpers the CLI's end-to-end tests share: where the workspace and its corpus are, and the
//! real binary run in a folder with no `SALVAGE_DB` from the caller's environment.

// Each test binary uses its own subset.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The regression corpus, `testdata/corpus`.
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus")
}

/// `salvage ARGS` in `dir`, stdin closed, `SALVAGE_DB` unset.
pub fn cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_salvage"));
    c.args(args).current_dir(dir).env_remove("SALVAGE_DB").stdin(Stdio::null());
    c
}

/// Runs [`cmd`] to completion.
pub fn salvage(dir: &Path, args: &[&str]) -> Output {
    cmd(dir, args).output().unwrap()
}
