//! OpenAI chat-completions request bodies: `{"model", "messages": [...], "tools"?: [...]}`.

use crate::{kind, parse_arguments, split_data_url, Cx, Imported};
use salvage_types::capture::CaptureError;
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    let messages = top.get("messages").ok_or_else(|| {
        cx.err("messages", "missing (an OpenAI chat-completions body has a messages array)")
    })?;
    let messages = cx.arr(messages, "messages")?;
    let mut history = History::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        history.push(message(cx, m, &path)?);
    }
    Ok(Imported {
        history,
        model: cx.opt_str(top, "model", "")?.map(str::to_string),
        provider: Some("openai".to_string()),
    })
}

fn message(cx: &Cx<'_>, m: &Value, path: &str) -> Result<Message, CaptureError> {
    let o = cx.obj(m, path)?;
    let role = match cx.req_str(o, "role", path)? {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        other => {
            return Err(cx.err(
                &format!("{path}.role"),
                format!("unknown role {other:?}, expected system, developer, user, assistant or tool"),
            ))
        }
    };
    let mut msg = Message::new(role, "");
    match o.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => msg.content = s.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let ppath = format!("{path}.content[{j}]");
                let po = cx.obj(p, &ppath)?;
                match cx.req_str(po, "type", &ppath)? {
                    "text" | "input_text" | "output_text" => {
                        texts.push(cx.req_str(po, "text", &ppath)?.to_string())
                    }
                    "image_url" => {
                        let url = match po.get("image_url") {
                            Some(Value::String(s)) => s.as_str(),
                            Some(v) => cx.req_str(
                                cx.obj(v, &format!("{ppath}.image_url"))?,
                                "url",
                                &format!("{ppath}.image_url"),
                            )?,
                            None => return Err(cx.err(&format!("{ppath}.image_url"), "missing")),
                        };
                        msg.images.push(match split_data_url(url) {
                            Some((media, data)) => {
                                Image { media_type: Some(media), data: Some(data), url: None }
                            }
                            None => Image { media_type: None, data: None, url: Some(url.to_string()) },
                        });
                    }
                    "refusal" => texts.push(cx.req_str(po, "refusal", &ppath)?.to_string()),
                    other => {
                        return Err(cx.err(
                            &format!("{ppath}.type"),
                            format!("unsupported content part type {other:?} (text and image_url are read)"),
                        ))
                    }
                }
            }
            msg.content = texts.join("\n");
        }
        Some(v) => {
            return Err(cx.err(
                &format!("{path}.content"),
                format!("expected a string, an array of parts or null, found {}", kind(v)),
            ))
        }
    }
    if let Some(calls) = o.get("tool_calls").filter(|v| !v.is_null()) {
        let calls = cx.arr(calls, &format!("{path}.tool_calls"))?;
        for (j, c) in calls.iter().enumerate() {
            let cpath = format!("{path}.tool_calls[{j}]");
            let co = cx.obj(c, &cpath)?;
            let f = co.get("function").ok_or_else(|| cx.err(&format!("{cpath}.function"), "missing"))?;
            let fpath = format!("{cpath}.function");
            let fo = cx.obj(f, &fpath)?;
            let arguments = match fo.get("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(s)) => parse_arguments(s),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(v) => {
                    return Err(cx.err(
                        &format!("{fpath}.arguments"),
                        format!("expected a JSON string, found {}", kind(v)),
                    ))
                }
            };
            msg.tool_calls.push(ToolCall {
                id: cx.opt_str(co, "id", &cpath)?.unwrap_or_default().to_string(),
                kind: cx.opt_str(co, "type", &cpath)?.unwrap_or("function").to_string(),
                name: cx.req_str(fo, "name", &fpath)?.to_string(),
                arguments,
            });
        }
    }
    if role == Role::Tool {
        msg.tool_call_id =
            cx.opt_str(o, "tool_call_id", path)?.or(cx.opt_str(o, "name", path)?).map(str::to_string);
    }
    Ok(msg)
}

/// The OpenAI chat-completions request body a client would send for this history.
pub fn request_body(history: &[Message], model: &str, max_tokens: Option<u64>) -> Value {
    let messages: Vec<Value> = history.iter().map(to_wire).collect();
    let mut body = json!({ "model": model, "messages": messages });
    if let (Some(n), Some(o)) = (max_tokens, body.as_object_mut()) {
        o.insert("max_tokens".into(), json!(n));
    }
    body
}

fn to_wire(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    if m.images.is_empty() {
        if m.role == Role::Assistant && m.content.is_empty() && !m.tool_calls.is_empty() {
            o.insert("content".into(), Value::Null);
        } else {
            o.insert("content".into(), json!(m.content));
        }
    } else {
        let mut parts = Vec::new();
        if !m.content.is_empty() {
            parts.push(json!({"type": "text", "text": m.content}));
        }
        for img in &m.images {
            let url = match (&img.url, &img.data) {
                (Some(u), _) => u.clone(),
                (None, Some(d)) => {
                    format!("data:{};base64,{d}", img.media_type.as_deref().unwrap_or("image/png"))
                }
                (None, None) => String::new(),
            };
            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        o.insert("content".into(), Value::Array(parts));
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                let args = match &c.arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                json!({"id": c.id, "type": c.kind, "function": {"name": c.name, "arguments": args}})
            })
            .collect();
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(o)
}
