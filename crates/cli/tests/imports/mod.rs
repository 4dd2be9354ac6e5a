//! What the import fidelity test and its reference writer share
//! (`tests/import_fidelity.rs`, `examples/write_import_expected.rs`): the files imported, the
//! ways each is imported, and one import's exit code and BLAKE3.

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The files imported, relative to the workspace root, sorted.
pub fn inputs(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json" || x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["testdata/requests", "testdata/samples", "testdata/sessions", "testdata/imports"] {
        walk(&root.join(dir), &mut files);
    }
    let mut names: Vec<String> =
        files.iter().map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The ways each file is imported: to a file (the atomic writer), and to stdout unredacted.
pub const MODES: [&str; 2] = ["file", "stdout-no-redact"];

/// `bin import` of `file` in `mode`: its exit code and the BLAKE3 of the capture it wrote.
pub fn import(bin: &Path, root: &Path, file: &str, mode: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capture.json");
    let mut args: Vec<&str> = vec!["import", file, "--status", "413", "--message", "413 Payload Too Large"];
    let out_arg = out.to_string_lossy().into_owned();
    if mode == "file" {
        args.extend(["-o", &out_arg]);
    } else {
        args.push("--no-redact");
    }
    let run = std::process::Command::new(bin)
        .args(&args)
        .current_dir(root)
        .env_remove("SALVAGE_DB")
        .env_remove("SALVAGE_MAX_CAPTURE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let bytes = if mode == "file" { std::fs::read(&out).unwrap_or_default() } else { run.stdout };
    (run.status.code().unwrap_or(-1), blake3::hash(&bytes).to_hex().to_string())
}

pub fn expected_path(root: &Path) -> PathBuf {
    root.join("testdata/imports/expected.tsv")
}
