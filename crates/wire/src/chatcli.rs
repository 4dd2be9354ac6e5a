//! The reference client's session files (version 2): `{"version": 2, "chat_history": [...]}`.
//!
//! Messages there are already in salvage's model (the JSON names are the reference's own), so
//! they load unchanged; other fields of the session file are ignored.

use crate::{kind, Cx, Imported};
use salvage_types::capture::CaptureError;
use salvage_types::History;
use serde_json::Value;

/// Session file versions this build reads.
pub const KNOWN_VERSIONS: &[u64] = &[2];

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    match top.get("version") {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|v| KNOWN_VERSIONS.contains(&v)) => {}
        Some(v) => {
            return Err(cx.err(
                "version",
                format!("unsupported session file version {v} (this build reads version 2)"),
            ))
        }
        None => return Err(cx.err("version", "missing (a session file version 2 has \"version\": 2)")),
    }
    let hist = top.get("chat_history").ok_or_else(|| cx.err("chat_history", "missing"))?;
    if !hist.is_array() {
        return Err(cx.err("chat_history", format!("expected an array, found {}", kind(hist))));
    }
    let history: History = serde_path_to_error::deserialize(hist).map_err(|e| {
        let path = e.path().to_string();
        cx.err(
            &format!(
                "chat_history{}",
                if path == "." {
                    String::new()
                } else if path.starts_with('[') {
                    path
                } else {
                    format!(".{path}")
                }
            ),
            e.into_inner().to_string(),
        )
    })?;
    let model =
        ["model", "model_name"].iter().find_map(|k| top.get(*k).and_then(Value::as_str)).map(str::to_string);
    let provider = top.get("provider").and_then(Value::as_str).map(str::to_string);
    Ok(Imported { history, model, provider })
}
