//! Cline and Roo Code task histories: `tasks/<id>/api_conversation_history.json` in the
//! extension's global storage, a JSON array of Anthropic-shaped messages (`role`, `content`)
//! with Cline's bookkeeping (`ts`, `id`, `modelInfo`, `metrics`).
//!
//! In the XML-tool era the assistant writes its tool calls as XML inside its text and the tool
//! results come back as **user text** (`[read_file for 'x'] Result:` …): they stay user text,
//! flagged `agent_feedback`, and there is no native call for pairing repair to answer with a
//! synthetic "missing result". With native tool calling (`tool_use` / `tool_result` blocks) a
//! call becomes a native tool call only when a `tool_result` for it follows in the next user
//! message; an unanswered `tool_use` (an interrupted task) is carried opaquely instead, for the
//! same reason: nothing downstream may invent its result. A `tool_result` without a native call
//! stays user text.

use crate::session::{Disposition, Opaque, Report, Session};
use crate::{kind, Cx};
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::timeline::{Change, Step};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// True for user text that carries a tool's output (`[tool for 'arg'] Result:`).
fn is_tool_feedback(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    first.starts_with('[') && first.contains("] Result:")
}

fn tool_result_ids(m: &Value) -> HashSet<String> {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

pub(crate) fn read(cx: &Cx<'_>, body: &Value) -> Result<Session, CaptureError> {
    let msgs = match body {
        Value::Array(a) => a,
        other => {
            return Err(cx.err(
                "(top level)",
                format!(
                    "expected an array of messages (api_conversation_history.json), found {}",
                    kind(other)
                ),
            ))
        }
    };
    let mut report = Report::default();
    let mut steps = Vec::new();
    let mut model = None;
    // Native calls that are answered: the ids of tool_results in the message after each one.
    let mut answered: HashSet<String> = HashSet::new();
    // Calls modeled natively so far (a tool_result for another id stays user text).
    let mut modeled: HashSet<String> = HashSet::new();
    for (i, m) in msgs.iter().enumerate() {
        let path = format!("[{i}]");
        let o = cx.obj(m, &path)?;
        let role = match cx.req_str(o, "role", &path)? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(cx.err(
                    &format!("{path}.role"),
                    format!("unknown role {other:?}, expected user or assistant"),
                ))
            }
        };
        for f in ["ts", "id", "modelInfo", "metrics"] {
            if o.contains_key(f) {
                report.count(
                    &format!("field:{f}"),
                    Disposition::Skipped("Cline bookkeeping, not sent to the model".into()),
                );
            }
        }
        if let Some(mid) = o.get("modelInfo").and_then(|mi| mi.get("modelId")).and_then(Value::as_str) {
            model = Some(mid.to_string());
        }
        if role == Role::Assistant {
            answered = msgs.get(i + 1).map(tool_result_ids).unwrap_or_default();
        }
        let mut out: Vec<Message> = Vec::new();
        let mut msg = Message::new(role, "");
        let mut texts: Vec<String> = Vec::new();
        let mut opaque = Opaque::default();
        match o.get("content") {
            Some(Value::String(s)) => {
                texts.push(s.clone());
                report.count("block:text", Disposition::History);
            }
            Some(Value::Array(blocks)) => {
                for (k, b) in blocks.iter().enumerate() {
                    let bpath = format!("{path}.content[{k}]");
                    let bo = cx.obj(b, &bpath)?;
                    let t = cx.req_str(bo, "type", &bpath)?;
                    match t {
                        "text" => {
                            texts
                                .push(bo.get("text").and_then(Value::as_str).unwrap_or_default().to_string());
                            report.count("block:text", Disposition::History);
                            // Other fields of a text block (reasoning_details, signature…) ride in
                            // `wire` without the text.
                            if bo.keys().any(|key| key != "type" && key != "text") {
                                let mut rest: Map<String, Value> = bo.clone();
                                rest.remove("text");
                                opaque.push(k, Value::Object(rest));
                            }
                        }
                        "image" => match image(bo) {
                            Some(img) => {
                                msg.images.push(img);
                                report.count("block:image", Disposition::History);
                            }
                            None => {
                                opaque.push(k, b.clone());
                                report.count("block:image", Disposition::Opaque);
                            }
                        },
                        "tool_use" if role == Role::Assistant => {
                            let id = cx.req_str(bo, "id", &bpath)?.to_string();
                            if answered.contains(&id) {
                                msg.tool_calls.push(ToolCall {
                                    id: id.clone(),
                                    kind: "function".into(),
                                    name: bo
                                        .get("name")
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_string(),
                                    arguments: bo
                                        .get("input")
                                        .cloned()
                                        .unwrap_or_else(|| Value::Object(Map::new())),
                                });
                                modeled.insert(id);
                                report.count("block:tool_use", Disposition::History);
                            } else {
                                report.note(format!(
                                    "{bpath}: tool_use {id} has no tool_result in the next message; carried opaquely so that no result is invented for it"
                                ));
                                opaque.push(k, b.clone());
                                report.count("block:tool_use", Disposition::Opaque);
                            }
                        }
                        "tool_result" if role == Role::User => {
                            let id = bo.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                            let (text, inner) = result_parts(bo.get("content"), &mut report);
                            if modeled.contains(id) {
                                let mut tm = Message::tool(id, text);
                                tm.is_error = bo.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                                tm.wire = inner.into_wire();
                                out.push(tm);
                            } else {
                                // Kept as user text; its non-text parts ride at its position.
                                texts.push(text);
                                if let Some(w) = inner.into_wire() {
                                    opaque.push(k, serde_json::json!({"type": "tool_result.parts", "tool_use_id": id, "parts": w}));
                                }
                            }
                            report.count("block:tool_result", Disposition::History);
                        }
                        other => {
                            opaque.push(k, b.clone());
                            report.count(&format!("block:{other}"), Disposition::Opaque);
                        }
                    }
                }
            }
            Some(v) => {
                return Err(cx.err(
                    &format!("{path}.content"),
                    format!("expected a string or an array of blocks, found {}", kind(v)),
                ))
            }
            None => return Err(cx.err(&format!("{path}.content"), "missing")),
        }
        msg.content = texts.join("\n");
        msg.wire = opaque.into_wire();
        if role == Role::User && texts.first().is_some_and(|t| is_tool_feedback(t)) {
            msg.meta.agent_feedback = true;
        }
        if !msg.content.is_empty()
            || !msg.images.is_empty()
            || !msg.tool_calls.is_empty()
            || msg.wire.is_some()
            || !texts.is_empty()
        {
            out.push(msg);
        }
        report.count(&format!("record:{}", role.as_str()), Disposition::History);
        let digest = blake3::hash(m.to_string().as_bytes()).to_hex();
        let id = format!("m{i}-{}", &digest.as_str()[..12]);
        let change = if role == Role::Assistant {
            Change::Response { messages: out, stop_reason: None, output_tokens: None }
        } else {
            Change::Input(out)
        };
        steps.push(Step { id, ts: None, change });
    }
    if steps.is_empty() {
        return Err(cx.err("(top level)", "the array is empty: nothing to import"));
    }
    Ok(Session {
        format: RequestFormat::Cline,
        id: None,
        client: "cline",
        model,
        provider: None,
        steps,
        sidechains: Vec::new(),
        fields: Map::new(),
        report,
        errors: Vec::new(),
    })
}

/// A tool_result's text, and its other parts (images, documents) kept opaquely.
fn result_parts(content: Option<&Value>, report: &mut Report) -> (String, Opaque) {
    let mut opaque = Opaque::default();
    let text = match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut texts = Vec::new();
            for (n, it) in items.iter().enumerate() {
                let t = it.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                if t == "text" {
                    texts.push(it.get("text").and_then(Value::as_str).unwrap_or_default());
                    report.count("block:tool_result.text", Disposition::History);
                } else {
                    opaque.push(n, it.clone());
                    report.count(&format!("block:tool_result.{t}"), Disposition::Opaque);
                }
            }
            texts.join("\n")
        }
        _ => String::new(),
    };
    (text, opaque)
}

fn image(b: &Map<String, Value>) -> Option<Image> {
    let src = b.get("source")?.as_object()?;
    match src.get("type").and_then(Value::as_str) {
        Some("url") => {
            Some(Image { media_type: None, data: None, url: Some(src.get("url")?.as_str()?.to_string()) })
        }
        Some("base64") => Some(Image {
            media_type: src.get("media_type").and_then(Value::as_str).map(str::to_string),
            data: Some(src.get("data")?.as_str()?.to_string()),
            url: None,
        }),
        _ => None,
    }
}
