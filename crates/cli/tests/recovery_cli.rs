//! `salvage classify` and `salvage apply` end to end.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn salvage(dir: &std::path::Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_salvage"));
    c.args(args)
        .current_dir(dir)
        .env_remove("SALVAGE_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("CHATCLI_")) {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin); // the command may exit before reading
    child.wait_with_output().unwrap()
}

#[test]
fn classify_from_flags_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let o =
        salvage(dir.path(), &["classify", "--status", "413", "--message", "413 Payload Too Large"], b"", &[]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["class"].as_str(), v["recoverable"].as_bool(), v["path"].as_str()),
        (Some("payload_too_large"), Some(true), Some("payload"))
    );
    let o = salvage(
        dir.path(),
        &["classify"],
        br#"{"status":null,"message":"prompt is too long: 241300 tokens > 200000 maximum"}"#,
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["class"], "context_overflow");
    assert_eq!(v["path"], "context");
    let o = salvage(dir.path(), &["classify"], br#"{"status":"403"}"#, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<stdin>: status: invalid type"));
}

fn agent_history() -> Vec<u8> {
    let mut h = vec![
        serde_json::json!({"role": "system", "content": "You are an agent."}),
        serde_json::json!({"role": "user", "content": "fix the failing build"}),
    ];
    for i in 0..8 {
        h.push(serde_json::json!({"role": "assistant", "content": "", "tool_calls": [{"id": format!("c{i}"), "type": "function", "name": "run", "arguments": {"cmd": "make"}}]}));
        h.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": format!("build output {i}\n").repeat(2000)}));
    }
    serde_json::to_vec(&h).unwrap()
}

#[test]
fn apply_rung3_keeps_the_task_and_every_marker_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let input = agent_history();
    let o = salvage(dir.path(), &["apply", "rung3", "--budget", "12KB"], &input, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Vec<salvage_types::Message> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(out.iter().any(|m| m.content == "fix the failing build"));
    assert!(salvage_types::history_weight(&out) <= 12 * 1024);
    let markers: Vec<String> = out
        .iter()
        .flat_map(|m| {
            salvage_types::ccr_key::find_markers(&m.content).into_iter().map(String::from).collect::<Vec<_>>()
        })
        .collect();
    assert!(!markers.is_empty());
    for k in markers {
        let r = salvage(dir.path(), &["recall", &k], b"", &[]);
        assert!(r.status.success(), "marker {k} resolves");
        assert_eq!(salvage_types::CcrKey::of(&r.stdout).short(), k, "recalled bytes hash to the key");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&o.stderr[o.stderr.iter().position(|b| *b == b'{').unwrap()..]).unwrap();
    assert_eq!(report["rung"], 3);
    assert_eq!(report["task_kept"], true);
}

#[test]
fn apply_rung2_honours_the_keep_setting_and_no_op_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let input = agent_history();
    let o = salvage(
        dir.path(),
        &["apply", "rung2", "--no-ccr"],
        &input,
        &[("CHATCLI_EMERGENCY_KEEP_MESSAGES", "4")],
    );
    let out: Vec<salvage_types::Message> = serde_json::from_slice(&o.stdout).unwrap();
    // system, notice, task, then the last 4 non-system messages.
    assert_eq!(out.len(), 7);
    let small = br#"[{"role":"system","content":"S"},{"role":"user","content":"Q"}]"#;
    let o = salvage(dir.path(), &["apply", "rung2", "--no-ccr"], small, &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-op"));
    let o = salvage(dir.path(), &["apply", "shrink"], small, &[]);
    assert_eq!(o.status.code(), Some(2), "shrink needs --budget");
    let o = salvage(
        dir.path(),
        &["apply", "pairing"],
        br#"[{"role":"user","content":"U"},{"role":"tool","content":"x","tool_call_id":"ghost"}]"#,
        &[],
    );
    let out: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn apply_compaction_stages() {
    let dir = tempfile::tempdir().unwrap();
    let session = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sessions/agent-200.json"),
    )
    .unwrap();
    let o =
        salvage(dir.path(), &["apply", "compact", "--budget", "120KB", "--report", "r.json"], &session, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Vec<salvage_types::Message> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(salvage_types::history_weight(&out) <= 120 * 1024);
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["outcome"], "applied");
    assert!(String::from_utf8_lossy(&o.stderr).contains("📦 Compacting history (200 msgs"));
    let o = salvage(dir.path(), &["apply", "compact", "--summarizer", "cmd:echo '## Summary from a command: the flaky two_openers store test was investigated; busy_timeout moved before WAL'", "--budget", "150KB"], &session, &[]);
    let out: Vec<salvage_types::Message> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(out.iter().any(|m| m.meta.is_summary && m.content.contains("Summary from a command")));
    let o = salvage(dir.path(), &["apply", "microcompact"], &session, &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("🗜 microcompact:"));
    let out: Vec<salvage_types::Message> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(out.iter().any(|m| m.content.starts_with("[Old tool result cleared — ")));
    let o = salvage(dir.path(), &["apply", "dedup", "--no-ccr"], &session, &[]);
    assert!(o.status.success());
    let o = salvage(dir.path(), &["apply", "trim"], &session, &[]);
    assert!(o.status.success());
    let o = salvage(dir.path(), &["apply", "compact", "--summarizer", "bogus"], &session, &[]);
    assert_eq!(o.status.code(), Some(2));
}
