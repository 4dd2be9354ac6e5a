//! The README's session-file commands end to end: `salvage import --from claude-code|codex|cline`
//! then a replay of the capture, pairing repair on an imported Cline history, and
//! `salvage journal import` twice, then `journal log` and `journal show --at` around a compaction.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn salvage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .env_remove("SALVAGE_DB")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = salvage(args);
    assert!(
        o.status.success(),
        "salvage {args:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn sample(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/samples").join(rel).display().to_string()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn imported_sessions_replay() {
    let dir = tempfile::tempdir().unwrap();
    let db = s(&dir.path().join("r.db"));
    // Whether compaction can bring each history under the 4 KB cap: the two shortest (a few
    // messages, nothing to drop or cut) cannot, and their replay says so — exhausted, the
    // convergence check failed, exit 1 — instead of passing a recovery that never happened.
    for (from, file, recovers) in [
        ("claude-code", "claude-code/v1.0.108-real-tools-split-blocks-inline-sidechain.jsonl", true),
        ("claude-code", "claude-code/fixture-branch-and-compaction.jsonl", false),
        ("codex", "codex/fixture-tool-item-types.jsonl", true),
        ("codex", "codex/real-v0.77.0-session-start.jsonl", false),
        ("cline", "cline/native-tools-tool-result-with-result-prefix.json", true),
    ] {
        let cap = s(&dir.path().join(format!("{from}.json")));
        let o = salvage(&[
            "import",
            "--from",
            from,
            &sample(file),
            "--status",
            "413",
            "--gateway-max-bytes",
            "4096",
            "-o",
            &cap,
        ]);
        assert!(o.status.success(), "{file}: {}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("records:") && err.contains("blocks:"), "the accounting is printed: {err}");
        let c: Value = serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
        assert_eq!(c["client"]["name"], from);
        assert_eq!(c["request"]["format"], from.replace('-', "_"));
        assert!(c["request"].get("bytes").is_none(), "a session file's body size is unknown");
        if recovers {
            let out = ok(&["replay", &cap, "--db", &db]);
            assert!(out.contains("recovered") && out.contains("1 passed"), "{file}: {out}");
        } else {
            let o = salvage(&["replay", &cap, "--db", &db]);
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(1), "{file}: {out}");
            assert!(out.contains("exhausted") && out.contains("did not converge"), "{file}: {out}");
        }
    }
}

#[test]
fn pairing_repair_invents_no_result_for_an_imported_cline_history() {
    let dir = tempfile::tempdir().unwrap();
    // The XML-tool era (tool results are user text) and an interrupted native call.
    let history = json!([
        {"role": "user", "content": [{"type": "text", "text": "<task>\nRead a.ts\n</task>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "export {}"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_cut", "name": "write_to_file", "input": {"path": "b.ts"}}]}
    ]);
    let file = dir.path().join("api_conversation_history.json");
    std::fs::write(&file, history.to_string()).unwrap();
    let cap = s(&dir.path().join("cline.json"));
    ok(&["import", "--from", "cline", &s(&file), "-o", &cap]);
    let report = s(&dir.path().join("pairing.json"));
    let db = s(&dir.path().join("r.db"));
    let repaired = ok(&["apply", "pairing", &cap, "--report", &report, "--db", &db]);
    assert!(!repaired.contains("missing_result"), "{repaired}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["synthetic"], 0, "{r}");
    let out = ok(&["replay", &cap, "--db", &db]);
    assert!(out.contains("1 passed"), "{out}");
}

#[test]
fn journal_import_is_idempotent_and_restores_around_a_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = s(&dir.path().join("j.db"));
    let file = sample("claude-code/fixture-branch-and-compaction.jsonl");
    let first = ok(&["journal", "import", "--from", "claude-code", &file, "--db", &db]);
    assert!(first.contains("session s1: 9 event(s) appended, 0 step(s) already journaled"), "{first}");
    let again = ok(&["journal", "import", "--from", "claude-code", &file, "--db", &db]);
    assert!(again.contains("0 event(s) appended, 9 step(s) already journaled"), "{again}");
    let log = ok(&["journal", "log", "s1", "--db", &db]);
    assert!(log.contains("compaction (auto) by claude-code: applied, 150000 tokens before"), "{log}");
    assert!(log.contains("2025-07-01T10:41:00.000Z"), "timestamps from the file: {log}");
    let seq = log.lines().find(|l| l.contains("compaction")).unwrap().split_whitespace().next().unwrap();
    let seq: u64 = seq.parse().unwrap();
    let before: Value =
        serde_json::from_str(&ok(&["journal", "show", "s1", "--at", &(seq - 1).to_string(), "--db", &db]))
            .unwrap();
    let after: Value =
        serde_json::from_str(&ok(&["journal", "show", "s1", "--at", &seq.to_string(), "--db", &db])).unwrap();
    assert_eq!(before.as_array().unwrap().len(), 6);
    assert_eq!(before[2]["content"], "Second attempt");
    assert_eq!(after.as_array().unwrap().len(), 1);
    assert_eq!(after[0]["meta"]["is_summary"], true);
    ok(&["journal", "verify", "--db", &db]);
    // The archived pre-compaction history is recallable.
    let key = log.split("<<ccr:").nth(1).unwrap().split(">>").next().unwrap();
    let recalled = ok(&["recall", key, "--db", &db]);
    assert!(recalled.contains("Second attempt"), "{recalled}");
    // Codex, with --session and --json.
    let out = ok(&[
        "journal",
        "import",
        "--from",
        "codex",
        &sample("codex/fixture-tool-item-types.jsonl"),
        "--session",
        "cx",
        "--json",
        "--db",
        &db,
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["session"], "cx");
    assert_eq!(v["import"]["appended"], 8);
    assert_eq!(v["report"]["kinds"]["record:response_item/reasoning"]["opaque"], 1);
}

#[test]
fn a_malformed_line_is_named_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, "{\"type\":\"user\"\nnot json\n{}\n").unwrap();
    let o = salvage(&[
        "journal",
        "import",
        "--from",
        "claude-code",
        &s(&file),
        "--db",
        &s(&dir.path().join("x.db")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("t.jsonl: line 1: malformed JSON"), "{err}");
}

#[test]
fn a_session_that_ended_on_an_error_brings_its_failure() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let lines = [
        json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s", "timestamp": "2025-07-01T10:00:00.000Z",
               "message": {"role": "user", "content": "here is the whole log"}}),
        json!({"type": "assistant", "uuid": "e1", "parentUuid": "u1", "sessionId": "s", "timestamp": "2025-07-01T10:00:05.000Z",
               "isApiErrorMessage": true,
               "message": {"id": "x", "model": "<synthetic>", "role": "assistant",
                           "content": [{"type": "text", "text": "Prompt is too long"}]}}),
    ];
    std::fs::write(&file, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).unwrap();
    let cap = s(&dir.path().join("c.json"));
    ok(&["import", "--from", "claude-code", &s(&file), "-o", &cap]);
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
    assert_eq!(c["failure"]["message"], "Prompt is too long");
    assert_eq!(c["history"].as_array().unwrap().len(), 1);
    // The command line wins.
    ok(&["import", "--from", "claude-code", &s(&file), "--status", "413", "-o", &cap]);
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
    assert_eq!(c["failure"]["message"], "413 Payload Too Large");
}

#[test]
fn from_auto_detects_and_imports_each_session_format() {
    let dir = tempfile::tempdir().unwrap();
    for (file, client) in [
        ("claude-code/fixture-branch-and-compaction.jsonl", "claude-code"),
        ("codex/real-v0.77.0-session-start.jsonl", "codex"),
        ("cline/native-tools-tool-result-with-result-prefix.json", "cline"),
    ] {
        let cap = s(&dir.path().join("c.json"));
        let o = salvage(&["import", &sample(file), "-o", &cap]);
        assert!(o.status.success(), "{file}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("detected"));
        let c: Value = serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
        assert_eq!(c["client"]["name"], client);
    }
}

/// A session file read while its client is writing its second record: its first record and the
/// half-written one are still that client's file (detected, the half line skipped and said).
/// (A Codex rollout's first record is its session_meta: one record and a half hold no message.)
#[test]
fn a_young_session_file_with_a_half_written_record_is_detected_and_imported() {
    let dir = tempfile::tempdir().unwrap();
    let rel = "claude-code/fixture-branch-and-compaction.jsonl";
    let text = std::fs::read_to_string(sample(rel)).unwrap();
    let mut lines = text.lines();
    let first = lines.next().unwrap();
    let second = lines.next().unwrap();
    let file = dir.path().join("young.jsonl");
    std::fs::write(&file, format!("{first}\n{}", &second[..second.len() / 2])).unwrap();
    let cap = s(&dir.path().join("c.json"));
    let o = salvage(&["import", &s(&file), "--status", "413", "-o", &cap]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("detected claude_code"), "{err}");
    assert!(err.contains("line 2 is not complete JSON"), "{err}");
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
    assert_eq!(c["client"]["name"], "claude-code");
    assert_eq!(c["history"].as_array().unwrap().len(), 1, "the first record's message");
}

/// Review (second pass): `journal prune --dry-run` and `report` on an empty database file wrote
/// the schema into it; a command that only reads leaves the file as it is.
#[test]
fn dry_runs_and_reports_leave_an_empty_database_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").unwrap();
    let d = db.to_str().unwrap();
    let html = dir.path().join("r.html");
    for args in [
        vec!["journal", "prune", "--title", "x", "--dry-run", "--db", d],
        vec!["ccr", "gc", "--max-age-days", "1", "--dry-run", "--db", d],
        vec!["journal", "sessions", "--db", d],
        vec!["report", "-o", html.to_str().unwrap(), "latest", "--db", d],
    ] {
        let _ = std::process::Command::new(env!("CARGO_BIN_EXE_salvage"))
            .args(&args)
            .current_dir(dir.path())
            .env_remove("SALVAGE_DB")
            .output()
            .unwrap();
        assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "{args:?} wrote into the empty file");
    }
}

/// A Gemini CLI session that ended on the CLI's error line: `import` (format detected) takes the
/// error as the failure and the capture replays; `journal import` of the real v0.61.0 record is
/// idempotent.
#[test]
fn a_gemini_cli_session_imports_replays_and_journals() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::read_to_string(sample("gemini-cli/v0.61.0-session-main.jsonl")).unwrap();
    let error = json!({"id": "e1", "timestamp": "2026-12-04T21:30:00.000Z", "type": "error",
        "content": "[API Error: {\"error\":{\"code\":400,\"message\":\"The input token count (1210742) exceeds the maximum number of tokens allowed (1048576).\",\"status\":\"INVALID_ARGUMENT\"}}]"});
    let file = dir.path().join("session-2026-12-04T21-26-834e2881.jsonl");
    std::fs::write(&file, format!("{real}{error}\n")).unwrap();
    let cap = dir.path().join("c.json");
    let o = salvage(&["import", &s(&file), "-o", &s(&cap)]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("detected gemini_cli"), "{err}");
    let c: Value = serde_json::from_slice(&std::fs::read(&cap).unwrap()).unwrap();
    assert!(
        c["failure"]["message"].as_str().unwrap().contains("exceeds the maximum number of tokens"),
        "{}",
        c["failure"]
    );
    assert_eq!(c["client"]["name"], "gemini-cli");
    assert_eq!(c["request"]["format"], "gemini_cli");
    let o = salvage(&["replay", &s(&cap), "--no-journal", "--json"]);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let fidelity = report["captures"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fidelity")
        .unwrap()
        .clone();
    assert_eq!(fidelity["ok"], true, "{fidelity}");

    let db = dir.path().join("j.db");
    let journal_import = || {
        salvage(&[
            "journal",
            "import",
            "--from",
            "gemini-cli",
            &sample("gemini-cli/v0.61.0-session-main.jsonl"),
            "--db",
            &s(&db),
        ])
    };
    let first = journal_import();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let again = journal_import();
    let again_err =
        format!("{}{}", String::from_utf8_lossy(&again.stdout), String::from_utf8_lossy(&again.stderr));
    assert!(again.status.success() && again_err.contains("0 event(s) appended"), "{again_err}");
}

/// `import` says when the capture holds less than the session file (a compaction: the history
/// after it) and when a tool call has no result (a file written mid-call): a real sweep found
/// "246 in the history" printed above a capture of 4 messages, and an unanswered call unsaid.
#[test]
fn import_says_what_the_capture_holds_of_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.json");
    let o = salvage(&["import", &sample("claude-code/fixture-branch-and-compaction.jsonl"), "-o", &s(&cap)]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "the capture holds the history after the session's last compaction (3 messages; 1 compaction(s)"
        ),
        "{err}"
    );
    let o = salvage(&[
        "import",
        &sample("claude-code/v2.1.53-real-compaction-dangling-logical-parent.jsonl"),
        "-o",
        &s(&cap),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("1 tool call(s) have no result in the file"), "{err}");
}
