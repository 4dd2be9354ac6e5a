//! The request-body samples of `testdata/` and what the round-trip tests check on histories.

use salvage_types::message::{Message, Role};
use salvage_wire::Source;
use serde_json::Value;
use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every sample of a format: (name, bytes).
pub fn samples(source: Source) -> Vec<(String, Vec<u8>)> {
    let (dir, extra): (&str, &[&str]) = match source {
        Source::Anthropic => ("anthropic", &["anthropic-agent-tools.json"]),
        Source::Openai => ("openai-chat", &["openai-agent-tools.json"]),
        Source::OpenaiResponses => ("openai-responses", &[]),
        Source::Gemini => ("gemini", &[]),
        Source::Bedrock => ("bedrock", &[]),
        Source::Chatcli => ("chatcli", &["chatcli-session-v2.json"]),
        // Session files are not bodies: tests/sessions.rs covers them.
        Source::ClaudeCode | Source::Codex | Source::Cline | Source::GeminiCli => return Vec::new(),
    };
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root().join("samples").join(dir)) {
        let mut paths: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
        paths.sort();
        // `docs-fragment-*` files are partial bodies (a documentation snippet of one field).
        let bodies = paths.into_iter().filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("docs-fragment-"))
        });
        for p in bodies {
            out.push((p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    for name in extra {
        out.push((name.to_string(), std::fs::read(root().join("requests").join(name)).unwrap()));
    }
    out
}

pub const ALL: [Source; 6] = [
    Source::Anthropic,
    Source::Openai,
    Source::OpenaiResponses,
    Source::Gemini,
    Source::Bedrock,
    Source::Chatcli,
];

/// Blocks carried opaquely in a history's templates (literal objects in block lists, and `raw`
/// markers), as JSON.
pub fn opaque(history: &[Message]) -> Vec<Value> {
    fn has_marker(v: &Value) -> bool {
        match v {
            Value::Object(o) => o.contains_key("$") || o.values().any(has_marker),
            Value::Array(a) => a.iter().any(has_marker),
            _ => false,
        }
    }
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Array(a) => {
                for x in a {
                    if x.is_object() && !has_marker(x) {
                        out.push(x.clone());
                    } else {
                        walk(x, out);
                    }
                }
            }
            Value::Object(o) if o.get("$").is_some_and(|k| k == "raw") => out.push(o["v"].clone()),
            Value::Object(o) => {
                for (k, y) in o {
                    if !k.starts_with('$') {
                        walk(y, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for m in history {
        if let Some(w) = &m.wire {
            if w["f"] != "chatcli" {
                walk(&w["m"], &mut out);
            }
        }
    }
    out
}

/// Pairing holds on a history: each tool result answers a call of the latest assistant message
/// before it, and each call of an assistant message is answered before the next assistant.
///
/// A result whose call is in no message (held server-side, e.g. by `previous_response_id`) is
/// left alone.
pub fn assert_paired(name: &str, h: &[Message]) {
    let calls: Vec<&str> = h.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str())).collect();
    let mut open: Vec<String> = Vec::new();
    for m in h {
        match m.role {
            Role::Assistant => {
                assert!(open.is_empty(), "{name}: calls {open:?} unanswered");
                open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                if !calls.contains(&id.as_str()) {
                    continue;
                }
                let i = open.iter().position(|x| *x == id);
                assert!(i.is_some(), "{name}: result {id} answers no open call ({open:?})");
                open.remove(i.unwrap());
            }
            Role::User | Role::System => {}
        }
    }
}
