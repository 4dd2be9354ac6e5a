//! Writes `testdata/imports/expected.tsv`, what `tests/import_fidelity.rs` compares `salvage
//! import` with, from a reference binary (not the binary under test):
//! `cargo run -p salvage-cli --example write_import_expected -- /path/to/reference/salvage`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a developer's tool; a failure panics with its cause

#[path = "../tests/imports/mod.rs"]
mod imports;

use imports::{expected_path, import, inputs, root, MODES};
use std::path::PathBuf;

fn main() {
    let Some(bin) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: write_import_expected /path/to/reference/salvage");
        std::process::exit(2);
    };
    let root = root();
    let mut out = String::from("# file\tmode\texit code\tBLAKE3 of the capture (see import_fidelity.rs)\n");
    for file in inputs(&root) {
        for mode in MODES {
            let (code, hash) = import(&bin, &root, &file, mode);
            out.push_str(&format!("{file}\t{mode}\t{code}\t{hash}\n"));
        }
    }
    std::fs::write(expected_path(&root), out).unwrap();
}
