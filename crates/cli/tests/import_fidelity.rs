//! `salvage import` writes the captures `main`'s binary wrote, byte for byte: every body and
//! session file of `testdata/` imported, each output's BLAKE3 compared with
//! `testdata/imports/expected.tsv`. That file is written by a reference binary, not by the
//! binary under test: `cargo run -p salvage-cli --example write_import_expected --
//! /path/to/reference/salvage` (the one committed was written by the binary of
//! `main` at b23e441, before the import was made parallel; one row since: the redacted import of
//! `bedrock-many-messages.json`, whose modeled gateway cap is now under the body the capture keeps,
//! the only difference from that binary's output; and the two rows of
//! `claude-code/v2.1.53-real-compaction-dangling-logical-parent.jsonl`, added with that sample and
//! written by the binary of its commit, whose import of the rest is unchanged; and the redacted
//! (`file`) rows of five `requests/grown/` bodies, rewritten when redaction stopped reading code such
//! as `context_window_tokens: 200_000` or `let max_tokens = budget.ratio()` as secrets: every
//! placeholder that went was one of those, checked one by one; and the rows of `samples/gemini-cli/`,
//! added with the Gemini CLI importer and written by the binary of its commit). The large bodies of
//! `testdata/imports/` (`make.py`) are long enough to be converted on several threads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod imports;

use imports::{expected_path, import, inputs, root, MODES};
use std::path::PathBuf;

#[test]
fn imports_write_what_the_reference_binary_wrote() {
    let root = root();
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
