//! Anthropic Messages request bodies: `{"model", "system"?, "messages": [...], "max_tokens"}`.
//!
//! A user message's `tool_result` blocks become `tool` messages (in block order) followed by a
//! user message with the remaining text and images; an assistant's `tool_use` blocks become
//! native tool calls. `thinking` blocks are not part of the history and are skipped.

use crate::{kind, Cx, Imported};
use salvage_types::capture::CaptureError;
use salvage_types::message::{Image, Message, Role, SystemPart, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    let mut history = History::new();
    match top.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => history.push(Message::system(s.clone())),
        Some(Value::Array(blocks)) => {
            let mut m = Message::system("");
            for (i, b) in blocks.iter().enumerate() {
                let path = format!("system[{i}]");
                let o = cx.obj(b, &path)?;
                let text = cx.req_str(o, "text", &path)?;
                m.system_parts.push(SystemPart {
                    kind: cx.opt_str(o, "type", &path)?.unwrap_or("text").to_string(),
                    text: text.to_string(),
                    cache_control: o.get("cache_control").cloned(),
                });
            }
            m.content = m.system_parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
            history.push(m);
        }
        Some(v) => {
            return Err(
                cx.err("system", format!("expected a string or an array of blocks, found {}", kind(v)))
            )
        }
    }
    let messages = top
        .get("messages")
        .ok_or_else(|| cx.err("messages", "missing (an Anthropic Messages body has a messages array)"))?;
    for (i, m) in cx.arr(messages, "messages")?.iter().enumerate() {
        message(cx, m, &format!("messages[{i}]"), &mut history)?;
    }
    Ok(Imported {
        history,
        model: cx.opt_str(top, "model", "")?.map(str::to_string),
        provider: Some("anthropic".to_string()),
    })
}

fn text_of(cx: &Cx<'_>, v: &Value, path: &str) -> Result<String, CaptureError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                let bpath = format!("{path}[{i}]");
                let o = cx.obj(b, &bpath)?;
                if cx.req_str(o, "type", &bpath)? == "text" {
                    texts.push(cx.req_str(o, "text", &bpath)?.to_string());
                }
            }
            Ok(texts.join("\n"))
        }
        other => Err(cx.err(path, format!("expected a string or an array of blocks, found {}", kind(other)))),
    }
}

fn image(cx: &Cx<'_>, o: &Map<String, Value>, path: &str) -> Result<Image, CaptureError> {
    let spath = format!("{path}.source");
    let src = cx.obj(o.get("source").ok_or_else(|| cx.err(&spath, "missing"))?, &spath)?;
    Ok(match cx.opt_str(src, "type", &spath)? {
        Some("url") => {
            Image { media_type: None, data: None, url: Some(cx.req_str(src, "url", &spath)?.to_string()) }
        }
        _ => Image {
            media_type: cx.opt_str(src, "media_type", &spath)?.map(str::to_string),
            data: Some(cx.req_str(src, "data", &spath)?.to_string()),
            url: None,
        },
    })
}

fn message(cx: &Cx<'_>, m: &Value, path: &str, out: &mut History) -> Result<(), CaptureError> {
    let o = cx.obj(m, path)?;
    let role = match cx.req_str(o, "role", path)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(cx
                .err(&format!("{path}.role"), format!("unknown role {other:?}, expected user or assistant")))
        }
    };
    let content = o.get("content").ok_or_else(|| cx.err(&format!("{path}.content"), "missing"))?;
    let blocks = match content {
        Value::String(s) => {
            out.push(Message::new(role, s.clone()));
            return Ok(());
        }
        Value::Array(b) => b,
        other => {
            return Err(cx.err(
                &format!("{path}.content"),
                format!("expected a string or an array of blocks, found {}", kind(other)),
            ))
        }
    };
    let mut msg = Message::new(role, "");
    let mut texts: Vec<String> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let bpath = format!("{path}.content[{i}]");
        let bo = cx.obj(b, &bpath)?;
        match cx.req_str(bo, "type", &bpath)? {
            "text" => texts.push(cx.req_str(bo, "text", &bpath)?.to_string()),
            "image" => msg.images.push(image(cx, bo, &bpath)?),
            "tool_use" if role == Role::Assistant => msg.tool_calls.push(ToolCall {
                id: cx.req_str(bo, "id", &bpath)?.to_string(),
                kind: "function".to_string(),
                name: cx.req_str(bo, "name", &bpath)?.to_string(),
                arguments: bo.get("input").cloned().unwrap_or_else(|| Value::Object(Map::new())),
            }),
            "tool_result" if role == Role::User => {
                let id = cx.req_str(bo, "tool_use_id", &bpath)?;
                let text =
                    text_of(cx, bo.get("content").unwrap_or(&Value::Null), &format!("{bpath}.content"))?;
                let mut t = Message::tool(id, text);
                t.is_error = bo.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                out.push(t);
            }
            "thinking" | "redacted_thinking" => {}
            other => {
                return Err(cx.err(
                    &format!("{bpath}.type"),
                    format!("unsupported block type {other:?} for a {} message", role.as_str()),
                ))
            }
        }
    }
    msg.content = texts.join("\n");
    if !msg.content.is_empty() || !msg.images.is_empty() || !msg.tool_calls.is_empty() {
        out.push(msg);
    }
    Ok(())
}

/// The Anthropic Messages request body a client would send for this history.
///
/// System messages go to `system` (as blocks when they carry parts); consecutive tool results are
/// folded into one user message of `tool_result` blocks, as the API requires.
pub fn request_body(history: &[Message], model: &str, max_tokens: u64) -> Value {
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in history {
        match m.role {
            Role::System => {
                if m.system_parts.is_empty() {
                    system.push(json!({"type": "text", "text": m.content}));
                } else {
                    for p in &m.system_parts {
                        let mut b = json!({"type": p.kind, "text": p.text});
                        if let (Some(cc), Some(o)) = (&p.cache_control, b.as_object_mut()) {
                            o.insert("cache_control".into(), cc.clone());
                        }
                        system.push(b);
                    }
                }
            }
            Role::Tool => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                });
                if let (true, Some(o)) = (m.is_error, block.as_object_mut()) {
                    o.insert("is_error".into(), json!(true));
                }
                push_block(&mut messages, "user", block, true);
            }
            Role::User | Role::Assistant => {
                let role = m.role.as_str();
                let mut blocks = Vec::new();
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for img in &m.images {
                    blocks.push(match (&img.url, &img.data) {
                        (Some(u), _) => json!({"type": "image", "source": {"type": "url", "url": u}}),
                        (None, d) => json!({"type": "image", "source": {"type": "base64", "media_type": img.media_type.clone().unwrap_or_else(|| "image/png".into()), "data": d.clone().unwrap_or_default()}}),
                    });
                }
                for c in &m.tool_calls {
                    blocks
                        .push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": ""}));
                }
                let fold = m.role == Role::User;
                let mut blocks = blocks.into_iter();
                if let Some(first) = blocks.next() {
                    push_block(&mut messages, role, first, fold);
                }
                for b in blocks {
                    push_block(&mut messages, role, b, true);
                }
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    Value::Object(body)
}

/// Appends a block, folding it into the previous message when the role matches and `fold` holds
/// (tool results and the user text after them share one user message).
fn push_block(messages: &mut Vec<Value>, role: &str, block: Value, fold: bool) {
    if fold {
        if let Some(last) = messages.last_mut() {
            if last["role"] == role {
                if let Some(Value::Array(blocks)) = last.get_mut("content") {
                    blocks.push(block);
                    return;
                }
            }
        }
    }
    messages.push(json!({"role": role, "content": [block]}));
}
