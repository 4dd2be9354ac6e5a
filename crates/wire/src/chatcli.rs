//! The reference client's session files (version 2): `{"version": 2, "chat_history": [...]}`.
//!
//! Messages there are already in salvage's model (the JSON names are the reference's own), so
//! they load unchanged. What the model's serialization would not write back — Go's `null`s and
//! zero values, unknown fields — is kept in the message's `wire` (`{"f": "chatcli", "m": {...}}`,
//! the fields to restore, merged where the model's value is empty); the file's other top-level
//! fields are the request's fields. The request has no `bytes`: a session file is not a request
//! body, so a replay builds the body it sends from the history.

use crate::{kind, Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::Message;
use salvage_types::History;
use serde_json::{Map, Value};

const F: RequestFormat = RequestFormat::Chatcli;

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
    let mut history: History = serde_path_to_error::deserialize(hist).map_err(|e| {
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
    for (m, original) in history.iter_mut().zip(hist.as_array().into_iter().flatten()) {
        if m.wire.is_some() {
            continue;
        }
        if let (Some(o), Value::Object(ser)) = (original.as_object(), plain(m)) {
            let extra = extra(o, &ser);
            if !extra.is_empty() {
                m.wire = Some(crate::shape::wire(F, Value::Object(extra), false));
            }
        }
    }
    let fields = crate::conv::without(top, &["chat_history"]);
    // A session file is not a request body: there is no size as sent (`request_body` rebuilds
    // the file itself, JSON-equal, for export).
    let request = Request { format: F, bytes: None, fields };
    Ok(Imported { history, model, provider, request: Some(request) })
}

/// A message as the model serializes it, without a `chatcli` wire.
fn plain(m: &Message) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if crate::shape::template_of(m, F).is_some() {
        if let Some(o) = v.as_object_mut() {
            o.shift_remove("wire");
        }
    }
    v
}

/// Null, false, zero, empty: what Go writes for a field the model omits.
fn emptyish(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(emptyish),
    }
}

/// The fields of `original` the serialization `ser` does not reproduce.
fn extra(original: &Map<String, Value>, ser: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in original {
        match (ser.get(k), v) {
            (None, _) => {
                out.insert(k.clone(), v.clone());
            }
            (Some(s), _) if s == v => {}
            (Some(Value::Object(so)), Value::Object(vo)) => {
                let sub = extra(vo, so);
                if !sub.is_empty() {
                    out.insert(k.clone(), Value::Object(sub));
                }
            }
            (Some(s), _) if emptyish(s) && emptyish(v) => {
                out.insert(k.clone(), v.clone());
            }
            // A value the model normalises (documented): the model's form is written.
            (Some(_), _) => {}
        }
    }
    out
}

fn merge(ser: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, e) in extra {
        match ser.get_mut(k) {
            None => {
                ser.insert(k.clone(), e.clone());
            }
            Some(Value::Object(so)) if e.is_object() => {
                if let Value::Object(eo) = e {
                    merge(so, eo);
                }
            }
            Some(s) if emptyish(s) => *s = e.clone(),
            Some(_) => {}
        }
    }
}

/// The session file for a history, with the file's other fields.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let messages: Vec<Value> = history
        .iter()
        .map(|m| {
            let mut v = plain(m);
            match (crate::shape::template_of(m, F), v.as_object_mut()) {
                (Some((Value::Object(extra), _)), Some(o)) => merge(o, extra),
                // A template of another format means nothing to the reference client.
                (None, Some(o)) => {
                    o.shift_remove("wire");
                }
                _ => {}
            }
            v
        })
        .collect();
    let mut out = request.fields.clone();
    out.insert("chat_history".into(), Value::Array(messages));
    Value::Object(out)
}
