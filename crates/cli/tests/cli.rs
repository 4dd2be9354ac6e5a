//! End-to-end tests of the `salvage` binary: exit codes, one clear error line, JSON shapes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn salvage(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_salvage"));
    c.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("CHATCLI_") || k == "SALVAGE_DB" {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn testdata(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(p).display().to_string()
}

fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr).lines().map(str::to_string).collect()
}

#[test]
fn config_json_shape_and_sources() {
    let o = salvage(&["config", "--json"], &[("CHATCLI_MAX_PAYLOAD", "512KB")]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["max_payload_bytes"], 524288);
    let s = &v["settings"]["CHATCLI_MAX_PAYLOAD"];
    assert_eq!(
        (s["value"].as_u64(), s["raw"].as_str(), s["source"].as_str()),
        (Some(524288), Some("512KB"), Some("env"))
    );
    assert!(s["error"].is_null());
    assert_eq!(v["settings"]["CHATCLI_MAX_RECOVERY_ATTEMPTS"]["source"], "default");
    assert_eq!(v["settings"].as_object().unwrap().len(), 12);
}

#[test]
fn config_names_invalid_values_and_exits_1() {
    let o = salvage(&["config"], &[("CHATCLI_EMERGENCY_KEEP_MESSAGES", "-3")]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().find(|l| l.starts_with("CHATCLI_EMERGENCY_KEEP_MESSAGES")).unwrap();
    assert!(line.contains("10") && line.contains("invalid"), "{line}");
    assert!(stderr_lines(&o)[0].contains("CHATCLI_EMERGENCY_KEEP_MESSAGES"));
}

#[test]
fn import_builds_a_capture_that_reads_back() {
    let f = testdata("requests/openai-agent-tools.json");
    let o = salvage(
        &[
            "import",
            "--from",
            "openai",
            &f,
            "--status",
            "413",
            "--rejected-bytes",
            "129434",
            "--gateway-max-bytes",
            "131072",
            "--gateway-rejects-with",
            "waf_html_403",
            "--context-window",
            "128000",
        ],
        &[("CHATCLI_MAX_PAYLOAD", "5MB")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = salvage_types::capture::parse_capture(&o.stdout, "stdout").unwrap();
    assert_eq!(c.id, "openai-agent-tools");
    assert_eq!(c.failure.status, Some(413));
    assert_eq!(c.failure.message, "413 Payload Too Large");
    assert_eq!(c.failure.rejected_request_bytes, Some(129434));
    let g = c.upstream.gateway.unwrap();
    assert_eq!((g.max_body_bytes, g.rejects_with.as_str()), (Some(131072), "waf_html_403"));
    assert_eq!(c.upstream.model.unwrap().context_window_tokens, Some(128000));
    assert_eq!(c.settings.get("CHATCLI_MAX_PAYLOAD").map(String::as_str), Some("5MB"));
    assert_eq!(c.history.len(), 9);
}

#[test]
fn import_to_file_is_atomic_and_refuses_bad_input_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    let cases: Vec<(&[u8], &str)> = vec![
        (br#"{"messages":[{"role":"user","content":"hi"}"#, "malformed JSON at line 1"),
        (br#"{"messages":[{"role":"user","content":["x"]}]}"#, "messages[0].content[0]: expected an object"),
        (b"{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", "invalid UTF-8 at byte"),
        (br#"{"messages":[]}"#, "the history is empty"),
    ];
    let out = dir.path().join("out.json");
    for (bytes, want) in cases {
        std::fs::write(&bad, bytes).unwrap();
        let o =
            salvage(&["import", "--from", "openai", bad.to_str().unwrap(), "-o", out.to_str().unwrap()], &[]);
        assert_eq!(o.status.code(), Some(2), "{want}");
        let lines = stderr_lines(&o);
        assert_eq!(lines.len(), 1, "one error line: {lines:?}");
        assert!(lines[0].contains("bad.json") && lines[0].contains(want), "{lines:?} / {want}");
        assert!(!out.exists(), "nothing half-written");
    }
    let anth = testdata("requests/anthropic-agent-tools.json");
    let o = salvage(&["import", "--from", "anthropic", &anth, "-o", out.to_str().unwrap()], &[]);
    assert!(o.status.success());
    assert!(salvage_types::capture::read_capture(&out).is_ok());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn unknown_session_version_and_bad_flag() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.json");
    std::fs::write(&f, r#"{"version":7,"chat_history":[]}"#).unwrap();
    let o = salvage(&["import", "--from", "chatcli", f.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_lines(&o)[0].contains("s.json: version: unsupported session file version 7"));
    let o = salvage(&["import", "--from", "cohere", f.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_teaches() {
    let o = salvage(&["--help"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    for cmd in ["config", "import", "Exit codes"] {
        assert!(text.contains(cmd), "--help mentions {cmd}");
    }
    let o = salvage(&["import", "--help"], &[]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("Example:"));
}

#[test]
fn import_redacts_secrets_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let body = serde_json::json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "deploy with OPENAI_API_KEY=sk-proj-1234567890abcdefghijABCD"},
        {"role": "user", "content": "the db is postgres://app:s3cretPassw0rd@db:5432/x and AWS key AKIAZ3MDNB2QYX7TKPLE"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "http", "arguments": "{\"headers\": {\"Authorization\": \"Bearer abcdefghijklmnopqrstuvwxyz123456\"}}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    ]});
    let f = dir.path().join("b.json");
    std::fs::write(&f, body.to_string()).unwrap();
    let o = salvage(&["import", "--from", "openai", f.to_str().unwrap()], &[]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    for secret in [
        "1234567890abcdefghijABCD",
        "s3cretPassw0rd",
        "AKIAZ3MDNB2QYX7TKPLE",
        "abcdefghijklmnopqrstuvwxyz123456",
    ] {
        assert!(!out.contains(secret), "{secret} leaked");
    }
    assert!(out.contains("[REDACTED:openai_key:") && out.contains("[REDACTED:bearer_token:"));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("redacted 4 secret(s)"), "{err}");
    let o = salvage(&["import", "--from", "openai", f.to_str().unwrap(), "--no-redact"], &[]);
    assert!(String::from_utf8(o.stdout).unwrap().contains("AKIAZ3MDNB2QYX7TKPLE"));
}
