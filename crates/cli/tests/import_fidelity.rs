//! `salvage import` writes the captures `main`'s binary wrote, byte for byte: every body and
//! session file of `testdata/` imported, each output's BLAKE3 compared with
//! `testdata/imports/expected.tsv`. That file is written by a reference binary, not by the
//! binary under test: `SALVAGE_REFERENCE_BIN=/path/to/salvage cargo test -p salvage-cli --test
//! import_fidelity -- --ignored write_expected` (the one committed was written by the binary of
//! `main` at b23e441, before the import was made parallel). The large bodies of
//! `testdata/imports/` (`make.py`) are long enough to be converted on several threads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use std::path::{Path, PathBuf};

/// The files imported, relative to the workspace root, sorted.
fn inputs(root: &Path) -> Vec<String> {
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
const MODES: [&str; 2] = ["file", "stdout-no-redact"];

/// `bin import` of `file` in `mode`: its exit code and the BLAKE3 of the capture it wrote.
fn import(bin: &Path, root: &Path, file: &str, mode: &str) -> (i32, String) {
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

fn expected_path(root: &Path) -> PathBuf {
    root.join("testdata/imports/expected.tsv")
}

#[test]
fn imports_write_what_the_reference_binary_wrote() {
    let root = common::root();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_salvage"));
    let expected = std::fs::read_to_string(expected_path(&root)).unwrap();
    let mut rows = 0;
    let mut wrong = Vec::new();
    for line in expected.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [file, mode, code, hash] = cols[..] else { panic!("bad line {line:?}") };
        let (got_code, got_hash) = import(&bin, &root, file, mode);
        if (got_code.to_string(), got_hash.as_str()) != (code.to_string(), hash) {
            wrong.push(format!(
                "{file} ({mode}): exit {got_code}, expected {code}; output differs: {}",
                got_hash != hash
            ));
        }
        rows += 1;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every input of testdata is covered, in both modes.
    assert_eq!(rows, inputs(&root).len() * MODES.len(), "expected.tsv is out of date: regenerate it");
}

#[test]
#[ignore]
fn write_expected() {
    let root = common::root();
    let bin = PathBuf::from(std::env::var("SALVAGE_REFERENCE_BIN").expect("SALVAGE_REFERENCE_BIN"));
    let mut out = String::from("# file\tmode\texit code\tBLAKE3 of the capture (see import_fidelity.rs)\n");
    for file in inputs(&root) {
        for mode in MODES {
            let (code, hash) = import(&bin, &root, &file, mode);
            out.push_str(&format!("{file}\t{mode}\t{code}\t{hash}\n"));
        }
    }
    std::fs::write(expected_path(&root), out).unwrap();
}
