//! Snapshots of what people and scripts read: every `--help`, the replay table, a journal timeline,
//! and the JSON shapes `spec/cli.md` promises (`classify`, `config --json`, `replay --json`).
//!
//! A change to any of them shows in review as a diff of `tests/snapshots/*.snap`. Update them with
//! `INSTA_UPDATE=always cargo test -p salvage-cli --test snapshots` (or `cargo insta review`) and
//! read the diff; CI runs with `INSTA_UPDATE=no`, so a missing or different snapshot fails it.
//! Volatile parts (times, run stamps, temporary and checkout paths) are redacted by insta filters.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs `salvage` in `dir` with a sealed environment (no `SALVAGE_*` or `CHATCLI_*` of the
/// developer's shell, help wrapped at 100 columns) plus `env`, with `stdin` piped in if given.
fn salvage_in(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("COLUMNS", "100")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// The standard output of a run that must exit with `code`.
fn stdout(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn json(o: &Output, code: i32) -> Value {
    serde_json::from_str(&stdout(o, code)).unwrap()
}

/// Runs `f` with the filters that redact RFC 3339 times, run stamps, `dir` and the checkout.
fn redacted(dir: Option<&Path>, f: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.add_filter(r"\d{8}T\d{6}\.\d{3}Z-[0-9a-f]+", "[STAMP]");
    settings.add_filter(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", "[TIME]");
    if let Some(d) = dir {
        settings.add_filter(&regex_escape(&d.display().to_string()), "[TMP]");
    }
    settings.add_filter(&regex_escape(&root().display().to_string()), "[ROOT]");
    settings.bind(f);
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !(c.is_ascii_alphanumeric() || c == '/' || c == '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subcommands a `--help` lists under `Commands:` (clap's own `help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_help() {
    // Walks the tree from `salvage --help`, so a new command or subcommand needs its snapshot.
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = stdout(&salvage_in(&root(), &args, &[], None), 0);
        let name = if path.is_empty() { "help".to_string() } else { format!("help_{}", path.join("_")) };
        let expr = format!("salvage {}", args.join(" "));
        redacted(None, || insta::assert_snapshot!(name, help, &expr));
        seen += 1;
        for sub in subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
    }
    assert!(seen > 20, "{seen} help pages: the Commands: parsing found too few");
}

#[test]
fn replay_table_without_a_failure() {
    let o = salvage_in(&root(), &["replay", "testdata/corpus/no-failure.json", "--no-journal"], &[], None);
    let table = stdout(&o, 0);
    redacted(None, || insta::assert_snapshot!("replay_table_no_failure", table));
}

#[test]
fn replay_table_of_a_recovered_failure() {
    let o =
        salvage_in(&root(), &["replay", "testdata/corpus/gateway-waf403.json", "--no-journal"], &[], None);
    let table = stdout(&o, 0);
    redacted(None, || insta::assert_snapshot!("replay_table_waf403", table));
}

#[test]
fn replay_table_of_a_missed_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let mut c: Value =
        serde_json::from_slice(&std::fs::read(root().join("testdata/corpus/no-failure.json")).unwrap())
            .unwrap();
    c["expect"] = serde_json::json!({"outcome": "recovered"});
    std::fs::write(dir.path().join("wrong-expect.json"), serde_json::to_vec(&c).unwrap()).unwrap();
    let o = salvage_in(dir.path(), &["replay", "wrong-expect.json", "--no-journal"], &[], None);
    let table = stdout(&o, 1);
    redacted(Some(dir.path()), || insta::assert_snapshot!("replay_table_missed_expect", table));
}

#[test]
fn journal_log_of_a_small_session() {
    let dir = tempfile::tempdir().unwrap();
    let capture = root().join("testdata/corpus/gateway-waf403.json");
    let db = [("SALVAGE_DB", "j.db")];
    let table = stdout(&salvage_in(dir.path(), &["replay", capture.to_str().unwrap()], &db, None), 0);
    let log = stdout(&salvage_in(dir.path(), &["journal", "log", "latest"], &db, None), 0);
    let log_json = json(&salvage_in(dir.path(), &["journal", "log", "latest", "--json"], &db, None), 0);
    redacted(Some(dir.path()), || {
        insta::assert_snapshot!("replay_table_journaled", table);
        insta::assert_snapshot!("journal_log", log);
        insta::assert_json_snapshot!("journal_log_json", log_json);
    });
}

#[test]
fn classify_json() {
    let args = ["classify", "--status", "403", "--message", "Attention Required! | Cloudflare"];
    let flags = json(&salvage_in(&root(), &args, &[], None), 0);
    let input = r#"{"status":413,"message":"Request Entity Too Large","transport":null,"history_bytes":0,"rejected_request_bytes":null}"#;
    let piped = json(&salvage_in(&root(), &["classify"], &[], Some(input)), 0);
    redacted(None, || {
        insta::assert_json_snapshot!("classify_flags", flags);
        insta::assert_json_snapshot!("classify_stdin", piped);
    });
}

#[test]
fn config_json() {
    let defaults = json(&salvage_in(&root(), &["config", "--json"], &[], None), 0);
    let env = [("CHATCLI_MAX_PAYLOAD", "5MB"), ("CHATCLI_MAX_RECOVERY_ATTEMPTS", "lots")];
    let from_env = json(&salvage_in(&root(), &["config", "--json"], &env, None), 1);
    redacted(None, || {
        insta::assert_json_snapshot!("config_json_defaults", defaults);
        insta::assert_json_snapshot!("config_json_from_env", from_env);
    });
}

/// The keys and value types of a JSON document: every leaf becomes its type, an array its first
/// element's shape (`[]` when empty), so the snapshot locks names and types, not numbers.
fn shape(v: &Value) -> Value {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => "int".into(),
        Value::Number(_) => "float".into(),
        Value::String(_) => "string".into(),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
    }
}

#[test]
fn replay_json_keys() {
    let dir = tempfile::tempdir().unwrap();
    let capture = root().join("testdata/corpus/gateway-waf403.json");
    let db = [("SALVAGE_DB", "j.db")];
    let report =
        json(&salvage_in(dir.path(), &["replay", capture.to_str().unwrap(), "--json"], &db, None), 0);
    // The spec's keys first, so a renamed or removed one fails here with its name.
    for key in
        ["id", "file", "outcome", "attempts", "rung", "request_bytes", "expect_met", "checks", "session"]
    {
        assert!(report["captures"][0].get(key).is_some(), "replay --json lost captures[].{key}");
    }
    for key in ["total", "passed", "failed"] {
        assert!(report["summary"].get(key).is_some(), "replay --json lost summary.{key}");
    }
    redacted(None, || insta::assert_json_snapshot!("replay_json_keys", shape(&report)));
}
