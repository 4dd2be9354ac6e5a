//! A Python with pinned packages, for end-to-end tests against real SDKs and servers (the MCP
//! SDK for the adapters, the provider SDKs for the proxy).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    here.canonicalize().unwrap_or(here)
}

/// The Python a test runs: `$override_var` when set, else `target/<venv>/bin/python` under the
/// workspace root, created on first use from `requirements` (relative to the root) unless it
/// already runs `probe` (a line of Python that imports what the test needs). Call it once per
/// test binary (behind a `OnceLock`): it may install packages.
pub fn python(override_var: &str, venv: &str, probe: &str, requirements: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(override_var) {
        return Ok(PathBuf::from(p));
    }
    let venv = root().join("target").join(venv);
    let py = venv.join("bin/python");
    let ok = Command::new(&py).args(["-c", probe]).status().is_ok_and(|s| s.success());
    if !ok {
        let st = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
        if !st.as_ref().is_ok_and(|s| s.success()) {
            return Err(format!("python3 -m venv {} failed: {st:?}", venv.display()));
        }
        let st = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "-r"])
            .arg(root().join(requirements))
            .status();
        if !st.as_ref().is_ok_and(|s| s.success()) {
            return Err(format!("installing {requirements} failed: {st:?}"));
        }
    }
    Ok(py)
}
