//! `salvage journal export --format otlp` decoded by the official OpenTelemetry protobuf
//! definitions (Python's `opentelemetry-proto` in a venv under `target/otlp-venv`, created on
//! first use from `testdata/otlp/requirements.txt`; `SALVAGE_OTLP_PYTHON` names an existing one).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SALVAGE_OTLP_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = root().join("target/otlp-venv");
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import opentelemetry.proto.collector.trace.v1.trace_service_pb2"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let st = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().expect("python3 runs");
        assert!(st.success(), "python3 -m venv failed (apt-get install python3-venv)");
        let st = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "-r"])
            .arg(root().join("testdata/otlp/requirements.txt"))
            .status()
            .expect("pip runs");
        assert!(st.success(), "installing opentelemetry-proto failed");
    }
    py
}

fn salvage(dir: &Path, args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .current_dir(dir)
        .env_remove("SALVAGE_DB")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

#[test]
fn otlp_export_decodes_with_the_official_protobuf_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let capture = root().join("testdata/corpus/cap-only-tightens.json");
    salvage(dir.path(), &["replay", capture.to_str().unwrap()]);
    let out = dir.path().join("trace.json");
    salvage(dir.path(), &["journal", "export", "latest", "--format", "otlp", "-o", out.to_str().unwrap()]);
    let o = Command::new(python()).arg(root().join("testdata/otlp/decode.py")).arg(&out).output().unwrap();
    assert!(
        o.status.success(),
        "the protobuf decoder refused the export: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["resource"]["service.name"], "salvage");
    let spans = v["spans"].as_array().unwrap();
    let root_span = &spans[0];
    assert_eq!(root_span["parent"], "");
    assert_eq!(root_span["attributes"]["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(root_span["attributes"]["salvage.outcome"], "recovered");
    let conversation = root_span["attributes"]["gen_ai.conversation.id"].as_str().unwrap();
    assert!(conversation.starts_with("cap-only-tightens@"));
    assert!(root_span["events"].as_array().unwrap().iter().any(|e| e == "salvage.provider_error"));
    let chats: Vec<&serde_json::Value> =
        spans.iter().filter(|s| s["attributes"]["gen_ai.operation.name"] == "chat").collect();
    assert_eq!(chats.len(), 2, "one chat span per request sent");
    for c in &chats {
        assert_eq!(c["kind"], 3, "client spans");
        assert_eq!(c["parent"], root_span["id"]);
        assert_eq!(c["trace"], root_span["trace"]);
        assert_eq!(c["attributes"]["gen_ai.conversation.id"], conversation);
        assert!(c["attributes"]["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0);
        assert!(c["attributes"]["gen_ai.request.model"].is_string());
    }
    assert_eq!(chats[0]["status"], 2, "the rejected request is an error span");
    assert_eq!(chats[0]["attributes"]["error.type"], "payload_too_large");
    assert_eq!(chats[1]["attributes"]["salvage.request.accepted"], true);
    assert!(chats[1]["attributes"]["gen_ai.response.finish_reasons"].is_array());
    assert!(spans.iter().any(|s| s["attributes"]["salvage.recovery.rung"] == 2));
}
