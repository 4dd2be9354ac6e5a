//! `salvage import --from auto` over the real body samples, the gateway a payload failure
//! implies, and `salvage journal export --format <body format>`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn salvage(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_salvage"));
    c.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("CHATCLI_") || k == "SALVAGE_DB" {
            c.env_remove(k);
        }
    }
    c.output().unwrap()
}

fn testdata(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata").join(p)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn capture(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn auto_detects_every_body_sample_and_records_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let named = dir.path().join("named.json");
    let mut n = 0;
    for (folder, format, flag) in [
        ("anthropic", "anthropic", "anthropic"),
        ("openai-chat", "openai", "openai"),
        ("openai-responses", "openai_responses", "openai-responses"),
        ("gemini", "gemini", "gemini"),
        ("bedrock", "bedrock", "bedrock"),
    ] {
        for e in std::fs::read_dir(testdata("samples").join(folder)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if !name.ends_with(".json") || name.starts_with("docs-fragment-") {
                continue;
            }
            let o = salvage(&["import", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            assert!(stderr(&o).contains(&format!("detected {format} (")), "{name}: {}", stderr(&o));
            let c = capture(&out);
            assert_eq!(c["request"]["format"], format, "{name}");
            let body: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            assert_eq!(c["request"]["bytes"].as_u64().unwrap(), body.to_string().len() as u64, "{name}");
            assert!(salvage_types::capture::read_capture(&out).is_ok(), "{name}");
            // Detection imports the tree it parsed: the capture is the one `--from` makes.
            let o = salvage(&["import", "--from", flag, p.to_str().unwrap(), "-o", named.to_str().unwrap()]);
            assert!(o.status.success(), "{name} --from {flag}: {}", stderr(&o));
            assert!(
                std::fs::read(&named).unwrap() == std::fs::read(&out).unwrap(),
                "{name}: auto and --from differ"
            );
            n += 1;
        }
    }
    assert!(n >= 15, "{n} samples");
}

#[test]
fn an_unrecognised_shape_is_one_line_naming_the_formats() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("odd.json");
    std::fs::write(&f, r#"{"prompt": "hi", "temperature": 0}"#).unwrap();
    let o = salvage(&["import", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let lines: Vec<&str> = std::str::from_utf8(&o.stderr).unwrap().lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("odd.json: a JSON object with keys prompt, temperature"), "{lines:?}");
    assert!(lines[0].contains("supported: openai") && lines[0].contains("bedrock"), "{lines:?}");
}

#[test]
fn a_payload_failure_without_a_cap_models_the_tightest_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let body = testdata("requests/anthropic-agent-tools.json");
    let size = {
        let v: Value = serde_json::from_slice(&std::fs::read(&body).unwrap()).unwrap();
        v.to_string().len() as u64
    };
    // 413 with no size reported: one byte under the body.
    let o = salvage(&["import", body.to_str().unwrap(), "--status", "413", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let g = &capture(&out)["upstream"]["gateway"];
    assert_eq!(g["max_body_bytes"].as_u64(), Some(size - 1));
    assert_eq!(g["rejects_with"], "http_413");
    assert!(stderr(&o).contains(&format!("rejects bodies over {} bytes", size - 1)), "{}", stderr(&o));
    // A reported size: one byte under it, and the gateway reports sizes.
    let o = salvage(&[
        "import",
        body.to_str().unwrap(),
        "--status",
        "413",
        "--rejected-bytes",
        "1000",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let g = &capture(&out)["upstream"]["gateway"];
    assert_eq!((g["max_body_bytes"].as_u64(), g["reports_request_size"].as_bool()), (Some(999), Some(true)));
    // A WAF block page seen as a JSON-decode error.
    let o = salvage(&[
        "import",
        body.to_str().unwrap(),
        "--status",
        "403",
        "--message",
        "StatusCode: 403, invalid character '<' looking for beginning of value",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(capture(&out)["upstream"]["gateway"]["rejects_with"], "waf_html_403");
    // A given cap is kept; a failure that is not about size models nothing.
    let o = salvage(&[
        "import",
        body.to_str().unwrap(),
        "--status",
        "413",
        "--gateway-max-bytes",
        "5000",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(capture(&out)["upstream"]["gateway"]["max_body_bytes"], 5000);
    let o = salvage(&["import", body.to_str().unwrap(), "--status", "429", "-o", out.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(capture(&out)["upstream"].get("gateway").is_none_or(Value::is_null));
}

#[test]
fn journal_export_writes_request_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let cap = dir.path().join("c.json");
    let body = testdata("requests/anthropic-agent-tools.json");
    let o = salvage(&["import", body.to_str().unwrap(), "-o", cap.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = salvage(&["replay", cap.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(o.status.code().is_some(), "{}", stderr(&o));
    let o = salvage(&["journal", "sessions", "--json", "--db", db.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let session = v["sessions"][0]["id"].as_str().unwrap().to_string();
    let export = |format: &str| -> Value {
        let o = salvage(&["journal", "export", &session, "--format", format, "--db", db.to_str().unwrap()]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let a = export("anthropic");
    assert!(a["messages"].as_array().is_some_and(|m| !m.is_empty()));
    assert!(a["max_tokens"].is_number());
    let text = a.to_string();
    assert!(text.contains(r#""signature":"sig""#), "the thinking block rides along: {text}");
    assert!(export("openai")["messages"].is_array());
    assert!(export("openai_responses")["input"].is_array());
    assert!(export("gemini")["contents"].is_array());
    assert!(export("bedrock")["messages"].is_array());
    assert_eq!(export("chatcli")["version"], 2);
}

/// Every body and session file under `testdata/samples`, found by walking the folder.
fn every_sample() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![testdata("samples")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            // A subagent transcript is read with its parent session, a docs fragment is no body.
            if p.is_dir() {
                if name != "subagents" {
                    dirs.push(p);
                }
            } else if (name.ends_with(".json") || name.ends_with(".jsonl"))
                && !name.starts_with("docs-fragment-")
                && !name.ends_with(".meta.json")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_sample_imports_and_replays_with_fidelity_green() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let samples = every_sample();
    assert!(samples.len() >= 30, "{} samples", samples.len());
    for p in samples {
        let name = p.strip_prefix(testdata("samples")).unwrap().display().to_string();
        let o = salvage(&["import", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let o = salvage(&["replay", out.to_str().unwrap(), "--no-journal", "--json"]);
        let r: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{name}: {}", stderr(&o)));
        let checks = r["captures"][0]["checks"].as_array().unwrap();
        let fidelity = checks.iter().find(|c| c["name"] == "fidelity").expect("a fidelity check");
        assert_eq!(fidelity["ok"], true, "{name}: {fidelity}");
        let failed: Vec<&Value> = checks.iter().filter(|c| c["ok"] != true).collect();
        assert!(failed.is_empty(), "{name}: {failed:?}");
    }
}

/// Review finding: `journal export` of a replayed session wrote a body without the request's
/// parameters (temperature, top_p, metadata, tools): the capture's `request` part was never
/// journaled. The session's start event now records it, and the export is the request as sent.
#[test]
fn journal_export_keeps_the_request_parameters_of_the_replayed_capture() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let mut body: Value =
        serde_json::from_slice(&std::fs::read(testdata("requests/anthropic-agent-tools.json")).unwrap())
            .unwrap();
    let extra = serde_json::json!({
        "temperature": 0.3,
        "top_p": 0.9,
        "metadata": {"user_id": "u-42"},
        "tools": [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let body_path = dir.path().join("body.json");
    std::fs::write(&body_path, serde_json::to_vec(&body).unwrap()).unwrap();
    let cap = dir.path().join("c.json");
    let o = salvage(&["import", body_path.to_str().unwrap(), "-o", cap.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = salvage(&["replay", cap.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(o.status.code().is_some(), "{}", stderr(&o));
    let o = salvage(&["journal", "sessions", "--json", "--db", db.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let session = v["sessions"][0]["id"].as_str().unwrap().to_string();
    let export = |args: &[&str]| -> Value {
        let mut all =
            vec!["journal", "export", session.as_str(), "--no-redact", "--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = salvage(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let a = export(&["--format", "anthropic"]);
    for (k, v) in extra.as_object().unwrap() {
        assert_eq!(&a[k], v, "{k} is in the exported body");
    }
    let c = export(&[]);
    assert_eq!(c["request"]["fields"]["metadata"], extra["metadata"]);
    // The size as sent holds for the history as sent only.
    let sent = export(&["--at", "1"]);
    assert!(sent["request"]["bytes"].is_u64(), "{}", sent["request"]);
    let later = export(&[]);
    assert_ne!(later["history"], sent["history"], "the replay's answer grew the history");
    assert!(later["request"].get("bytes").is_none(), "{}", later["request"]);
    // A redaction keeps a message's hash and changes its bytes: the size as sent no longer holds.
    let o = salvage(&[
        "journal",
        "redact",
        &session,
        "--at",
        "1",
        "--index",
        "1",
        "--whole",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let redacted = export(&["--at", "1"]);
    assert!(redacted["request"].get("bytes").is_none(), "{}", redacted["request"]);
    assert_eq!(redacted["request"]["fields"]["metadata"], extra["metadata"], "the rest of the request stays");
}

/// A real Responses body that continues a stored response: `import` says the conversation is not
/// in the body, and the replay of its context overflow fails fidelity, naming the reference,
/// instead of judging a recovery against a count without it.
#[test]
fn an_overflow_of_a_stored_conversation_is_not_replayed_as_if_held() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.json");
    let body = testdata("samples/openai-responses/responses-previous-response-id-function-call-output.json");
    let o = salvage(&[
        "import",
        body.to_str().unwrap(),
        "--status",
        "400",
        "--message",
        r#"{"error":{"message":"Your input exceeds the context window of this model.","code":"context_length_exceeded"}}"#,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("note: the request refers to content it does not carry: a response the provider keeps"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("(request.previous_response_id); its context overflow cannot be replayed"),
        "{}",
        stderr(&o)
    );
    let o = salvage(&["replay", out.to_str().unwrap(), "--no-journal", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = report.pointer("/captures/0/checks").and_then(Value::as_array).unwrap();
    let fidelity = checks.iter().find(|c| c["name"] == "fidelity").unwrap();
    assert_eq!(fidelity["ok"], false, "{fidelity}");
    assert!(fidelity["detail"].as_str().unwrap().contains("request.previous_response_id"), "{fidelity}");
}
