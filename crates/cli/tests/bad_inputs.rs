//! Every file in `testdata/bad/` is refused by `salvage replay FILE` with exit code 2 and the one
//! error line kept in `testdata/bad.expected.json`; a 200 MB message is refused by the ceiling.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::Path;
use std::process::{Command, Stdio};

fn refuse(file: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .arg("replay")
        .arg(file)
        .current_dir(dir.path())
        .env_remove("SALVAGE_DB")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "{}: nothing on stdout", file.display());
    assert!(!dir.path().join(".salvage").exists(), "{}: nothing written", file.display());
    let err = String::from_utf8(o.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{}: one line: {err}", file.display());
    lines[0].to_string()
}

#[test]
fn every_bad_input_is_refused_with_its_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let expected: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(root.join("bad.expected.json")).unwrap()).unwrap();
    let on_disk: Vec<String> = std::fs::read_dir(root.join("bad"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert!(on_disk.len() >= 40, "{} bad inputs", on_disk.len());
    for name in &on_disk {
        assert!(expected.contains_key(name), "{name} has an expected line");
    }
    for (name, want) in &expected {
        let file = root.join("bad").join(name);
        let line = refuse(&file);
        assert_eq!(line, format!("salvage: error: {}: {}", file.display(), want.as_str().unwrap()), "{name}");
    }
}

#[test]
fn a_200_mb_message_is_refused_by_the_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("huge.json");
    let mut body = String::with_capacity(210 << 20);
    body.push_str(
        r#"{"format":"salvage.capture/1","id":"huge","failure":{},"history":[{"role":"user","content":""#,
    );
    body.push_str(&"x".repeat(200 << 20));
    body.push_str(r#""}]}"#);
    std::fs::write(&f, body).unwrap();
    let line = refuse(&f);
    assert!(
        line.ends_with("history[0]: message of 200.0 MB is over the 64.0 MB limit for one message"),
        "{line}"
    );
}

#[test]
fn ceilings_are_configurable_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.json");
    let c = serde_json::json!({"format": "salvage.capture/1", "id": "c", "failure": {}, "history": [{"role": "user", "content": "x".repeat(4096)}]});
    std::fs::write(&f, c.to_string()).unwrap();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_salvage"));
        cmd.args(args).current_dir(dir.path()).env_remove("SALVAGE_DB").stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let o = run(&[("SALVAGE_MAX_MESSAGE", "1KB")], &["replay", "c.json", "--no-journal"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("c.json: history[0]: message of 4.0 KB is over the 1.0 KB limit"));
    let o = run(&[("SALVAGE_MAX_HISTORY", "2KB")], &["replay", "c.json", "--no-journal"]);
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("c.json: history: 4.0 KB of history is over the 2.0 KB limit"));
    let o = run(&[("SALVAGE_MAX_CAPTURE", "100B")], &["replay", "c.json", "--no-journal"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("over the 100-byte limit for a capture"));
    let o = run(&[("SALVAGE_MAX_MESSAGE", "lots")], &["replay", "c.json", "--no-journal"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SALVAGE_MAX_MESSAGE: \"lots\" is not a size"));
    assert!(run(&[], &["replay", "c.json", "--no-journal"]).status.success());
    std::fs::write(dir.path().join("big.txt"), "y".repeat(5000)).unwrap();
    let marker = String::from_utf8(run(&[], &["ccr", "put", "big.txt"]).stdout).unwrap();
    let o = run(&[("SALVAGE_MAX_RECALL", "1KB")], &["recall", marker.trim()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("recall output of 4.9 KB is over the 1.0 KB limit (SALVAGE_MAX_RECALL)"));
}

#[test]
fn generate_refuses_a_size_no_capture_may_hold_before_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.json");
    for (size, want) in [("600MB", "over the 512 MB"), ("1TB", "over the 512 MB"), ("ten", "is not a size")] {
        let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
            .args(["generate", "--size", size, "-o"])
            .arg(&out)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{size}: {err}");
        assert!(err.contains("--size") && err.contains(want), "{size}: {err}");
        assert!(!out.exists(), "{size}: nothing written");
    }
}
