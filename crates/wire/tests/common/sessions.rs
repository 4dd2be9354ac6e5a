//! The session samples of `testdata/samples/` and reading a session file or an inline one.

use salvage_types::History;
use salvage_wire::session::Session;
use salvage_wire::{read_session, Source};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub fn samples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/samples")
}

pub fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("jsonl" | "json"))
            && !p.to_string_lossy().ends_with(".meta.json")
        {
            out.push(p);
        }
    }
}

/// Every sample file of a format.
pub fn all(format: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(&samples().join(format), &mut out);
    out.sort();
    assert!(!out.is_empty(), "no {format} samples");
    out
}

pub fn read_file(source: Source, p: &Path) -> Session {
    let bytes = std::fs::read(p).unwrap();
    read_session(source, &bytes, &p.display().to_string()).unwrap_or_else(|e| panic!("{e}"))
}

pub fn read_str(source: Source, text: &str) -> Session {
    read_session(source, text.as_bytes(), "inline").unwrap_or_else(|e| panic!("{e}"))
}

pub fn texts(h: &History) -> Vec<String> {
    h.iter().map(|m| format!("{}:{}", m.role.as_str(), m.content)).collect()
}

pub const FORMATS: [(&str, Source); 3] =
    [("claude-code", Source::ClaudeCode), ("codex", Source::Codex), ("cline", Source::Cline)];

/// A Claude Code record.
pub fn cc(uuid: &str, parent: Option<&str>, kind: &str, ts: u32, message: Value) -> Value {
    json!({"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": false, "sessionId": "s",
           "timestamp": format!("2025-07-01T10:00:{ts:02}.000Z"), "message": message})
}
