//! OpenAI chat-completions request bodies: `{"model", "messages": [...], "tools"?: [...], …}`.
//!
//! One provider message is one salvage message (`developer` is a system message, the legacy
//! `function` role a tool message). Content parts `text` and `refusal` are the content,
//! `image_url` parts images, `tool_calls` and the legacy `function_call` native tool calls; every
//! other part (`input_audio`, `file`, unknown types) and field (`name`, `audio`, …) is carried in
//! the message's `wire` template (see [`crate::shape`]).

use crate::shape::{self, finish, flag, lit, slot, strip_control, text_marker, Draft, Fill, Shape};
use crate::{kind, split_data_url, Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: RequestFormat = RequestFormat::Openai;

/// Builds OpenAI chat parts.
pub(crate) struct Openai;

impl Shape for Openai {
    fn call(&self, mut rest: Map<String, Value>, call: &ToolCall) -> Value {
        let legacy = flag(&mut rest, "$legacy");
        let as_object = flag(&mut rest, "$obj");
        let fmt = rest.shift_remove("$fmt");
        strip_control(&mut rest);
        let args = if as_object {
            call.arguments.clone()
        } else {
            json!(shape::arguments_string(&call.arguments, fmt.as_ref().and_then(Value::as_str)))
        };
        if legacy {
            rest.insert("name".into(), json!(call.name));
            rest.insert("arguments".into(), args);
            return Value::Object(rest);
        }
        let mut function = match rest.shift_remove("function") {
            Some(Value::Object(f)) => f,
            _ => Map::new(),
        };
        function.insert("name".into(), json!(call.name));
        function.insert("arguments".into(), args);
        rest.insert("id".into(), json!(call.id));
        rest.insert("type".into(), json!(call.kind));
        rest.insert("function".into(), Value::Object(function));
        Value::Object(rest)
    }

    fn image(&self, mut rest: Map<String, Value>, image: &Image) -> Value {
        rest.entry("type").or_insert_with(|| json!("image_url"));
        let mut iu = match rest.shift_remove("image_url") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        iu.insert("url".into(), json!(image_url(image)));
        rest.insert("image_url".into(), Value::Object(iu));
        Value::Object(rest)
    }
}

/// An image as a URL (a `data:` URL for inline bytes).
pub(crate) fn image_url(img: &Image) -> String {
    match (&img.url, &img.data) {
        (Some(u), _) => u.clone(),
        (None, Some(d)) => format!("data:{};base64,{d}", img.media_type.as_deref().unwrap_or("image/png")),
        (None, None) => String::new(),
    }
}

/// An image read from a URL (inline when it is a `data:` URL).
pub(crate) fn image_from_url(url: &str) -> Image {
    match split_data_url(url) {
        Some((media, data)) => Image { media_type: Some(media), data: Some(data), url: None },
        None => Image { media_type: None, data: None, url: Some(url.to_string()) },
    }
}

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    let messages = top.get("messages").ok_or_else(|| {
        cx.err("messages", "missing (an OpenAI chat-completions body has a messages array)")
    })?;
    let messages = cx.arr(messages, "messages")?;
    let mut history = History::with_capacity(messages.len());
    let mut legacy = Legacy::default();
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        history.push(finish(message(cx, m, &path, &mut legacy)?, F, default_template));
    }
    let request = crate::conv::request_of(F, top, &["messages"]);
    Ok(Imported {
        history,
        model: cx.opt_str(top, "model", "")?.map(str::to_string),
        provider: Some("openai".to_string()),
        request: Some(request),
    })
}

/// Ids given to legacy `function_call`s (they have none) so that the `function` message that
/// answers one names it: by name, in order.
#[derive(Default)]
struct Legacy {
    n: usize,
    pending: Vec<(String, String)>,
}

impl Legacy {
    /// A legacy `function_call` (no id): modeled under a made-up id when it rebuilds as sent.
    fn call(&mut self, fc: &Map<String, Value>, v: &Value, msg: &mut Message) -> Value {
        match (fc.get("name").and_then(Value::as_str), fc.get("arguments")) {
            (Some(name), Some(Value::String(raw))) => {
                self.n = self.n.saturating_add(1);
                let id = format!("function_call_{}", self.n);
                self.pending.push((name.to_string(), id.clone()));
                let (arguments, fmt) = shape::arguments_from_string(raw);
                let call = ToolCall { id, kind: "function".into(), name: name.to_string(), arguments };
                let mut rest = crate::conv::without(fc, &["name", "arguments"]);
                rest.insert("$legacy".into(), json!(1));
                if let Some(f) = fmt {
                    rest.insert("$fmt".into(), json!(f));
                }
                if Openai.call(rest.clone(), &call) == *v {
                    msg.tool_calls.push(call);
                    slot("call", rest)
                } else {
                    lit(v.clone())
                }
            }
            _ => lit(v.clone()),
        }
    }
}

fn message(cx: &Cx<'_>, m: &Value, path: &str, legacy: &mut Legacy) -> Result<Draft, CaptureError> {
    let o = cx.obj(m, path)?;
    let role_name = cx.req_str(o, "role", path)?;
    let role = match role_name {
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
    let mut t = Map::new();
    for (k, v) in o {
        let kpath = format!("{path}.{k}");
        let tv = match (k.as_str(), v) {
            ("content", Value::String(s)) => text_marker("s", Map::new(), s),
            ("content", Value::Null) => Value::Null,
            ("content", Value::Array(parts)) => {
                let mut out = Vec::with_capacity(parts.len());
                for (j, p) in parts.iter().enumerate() {
                    out.push(part(cx, p, &format!("{kpath}[{j}]"), &mut msg)?);
                }
                Value::Array(out)
            }
            ("content", v) => {
                return Err(cx
                    .err(&kpath, format!("expected a string, an array of parts or null, found {}", kind(v))))
            }
            ("tool_calls", Value::Array(calls)) if role == Role::Assistant => {
                let mut out = Vec::with_capacity(calls.len());
                for (j, c) in calls.iter().enumerate() {
                    out.push(tool_call(cx, c, &format!("{kpath}[{j}]"), &mut msg)?);
                }
                Value::Array(out)
            }
            ("function_call", Value::Object(fc)) if role == Role::Assistant => legacy.call(fc, v, &mut msg),
            ("tool_call_id", Value::String(id)) if role_name == "tool" => {
                msg.tool_call_id = Some(id.clone());
                Value::Object(shape::marker("id"))
            }
            _ => lit(v.clone()),
        };
        t.insert(k.clone(), tv);
    }
    if role_name == "function" {
        // The legacy result names its function; it answers the latest pending call of that name.
        let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
        let id = match legacy.pending.iter().rposition(|(n, _)| n == name) {
            Some(i) => legacy.pending.remove(i).1,
            None => name.to_string(),
        };
        msg.tool_call_id = Some(id);
    }
    Ok(Draft { msg, template: Value::Object(t), join: false })
}

fn part(cx: &Cx<'_>, p: &Value, path: &str, msg: &mut Message) -> Result<Value, CaptureError> {
    let po = cx.obj(p, path)?;
    Ok(match cx.req_str(po, "type", path)? {
        "text" | "input_text" | "output_text" => {
            let text = cx.req_str(po, "text", path)?;
            text_marker("text", crate::conv::without(po, &["text"]), text)
        }
        "refusal" => match po.get("refusal") {
            Some(Value::String(r)) => {
                let mut rest = crate::conv::without(po, &["refusal"]);
                rest.insert("$k".into(), json!("refusal"));
                text_marker("text", rest, r)
            }
            _ => lit(p.clone()),
        },
        "image_url" => {
            let url = match po.get("image_url") {
                Some(Value::Object(iu)) => iu.get("url").and_then(Value::as_str),
                _ => None,
            };
            match url {
                Some(url) => {
                    let img = image_from_url(url);
                    let mut rest = crate::conv::without(po, &["image_url"]);
                    if let Some(Value::Object(iu)) = po.get("image_url") {
                        rest.insert("image_url".into(), Value::Object(crate::conv::without(iu, &["url"])));
                    }
                    let (tpl, img) = shape::image_slot(&Openai, rest, img, p);
                    msg.images.extend(img);
                    tpl
                }
                None => lit(p.clone()),
            }
        }
        _ => lit(p.clone()),
    })
}

fn tool_call(cx: &Cx<'_>, c: &Value, path: &str, msg: &mut Message) -> Result<Value, CaptureError> {
    let co = cx.obj(c, path)?;
    let fpath = format!("{path}.function");
    let fo = cx.obj(co.get("function").ok_or_else(|| cx.err(&fpath, "missing"))?, &fpath)?;
    let name = cx.req_str(fo, "name", &fpath)?;
    let (arguments, as_object, fmt) = match fo.get("arguments") {
        Some(Value::String(s)) => {
            let (a, f) = shape::arguments_from_string(s);
            (a, false, f)
        }
        Some(v @ Value::Object(_)) => (v.clone(), true, None),
        None | Some(Value::Null) => (Value::Object(Map::new()), false, None),
        Some(v) => {
            return Err(
                cx.err(&format!("{fpath}.arguments"), format!("expected a JSON string, found {}", kind(v)))
            )
        }
    };
    let call = ToolCall {
        id: cx.opt_str(co, "id", path)?.unwrap_or_default().to_string(),
        kind: cx.opt_str(co, "type", path)?.unwrap_or("function").to_string(),
        name: name.to_string(),
        arguments,
    };
    let mut rest = crate::conv::without(co, &["id", "type", "function"]);
    let frest = crate::conv::without(fo, &["name", "arguments"]);
    if !frest.is_empty() {
        rest.insert("function".into(), Value::Object(frest));
    }
    if as_object {
        rest.insert("$obj".into(), json!(1));
    }
    if let Some(f) = fmt {
        rest.insert("$fmt".into(), json!(f));
    }
    if Openai.call(rest.clone(), &call) == *c {
        msg.tool_calls.push(call);
        Ok(slot("call", rest))
    } else {
        // Kept as sent; the call is still modeled so that its result stays paired.
        msg.tool_calls.push(call);
        Ok(shape::call_as_sent(c))
    }
}

/// The template a message without `wire` is built from.
pub(crate) fn default_template(m: &Message) -> (Value, bool) {
    let mut t = Map::new();
    t.insert("role".into(), json!(m.role.as_str()));
    if m.images.is_empty() {
        if m.role == Role::Assistant && m.content.is_empty() && !m.tool_calls.is_empty() {
            t.insert("content".into(), Value::Null);
        } else {
            t.insert("content".into(), json!({"$": "s"}));
        }
    } else {
        let mut parts = Vec::new();
        if !m.content.is_empty() {
            parts.push(json!({"$": "text", "type": "text"}));
        }
        parts.extend(m.images.iter().map(|_| json!({"$": "image", "type": "image_url"})));
        t.insert("content".into(), Value::Array(parts));
    }
    if !m.tool_calls.is_empty() {
        t.insert(
            "tool_calls".into(),
            Value::Array(m.tool_calls.iter().map(|_| json!({"$": "call"})).collect()),
        );
    }
    if m.role == Role::Tool {
        t.insert("tool_call_id".into(), json!({"$": "id"}));
    }
    (Value::Object(t), false)
}

fn place(v: &mut Value, f: &mut Fill<'_>) {
    let calls: Vec<Value> = f.rest_calls().iter().map(|c| Openai.call(Map::new(), c)).collect();
    let images: Vec<Value> = f.rest_images().iter().map(|i| Openai.image(Map::new(), i)).collect();
    let text = f.leftover_text.take();
    let Some(o) = v.as_object_mut() else { return };
    if let Some(t) = text {
        match o.get_mut("content") {
            Some(Value::Array(parts)) => parts.insert(0, json!({"type": "text", "text": t})),
            _ => {
                o.insert("content".into(), json!(t));
            }
        }
    }
    if !images.is_empty() {
        let content = o.entry("content").or_insert(Value::Null);
        let mut parts = match std::mem::take(content) {
            Value::Array(p) => p,
            Value::String(s) if !s.is_empty() => vec![json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
        parts.extend(images);
        *content = Value::Array(parts);
    }
    if !calls.is_empty() {
        match o.get_mut("tool_calls") {
            Some(Value::Array(c)) => c.extend(calls),
            _ => {
                o.insert("tool_calls".into(), Value::Array(calls));
            }
        }
    }
}

/// The chat-completions body for a history, with the request's other fields.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let names = HashMap::new();
    let messages: Vec<Value> = history
        .iter()
        .map(|m| {
            let template = match shape::template_of(m, F) {
                Some((t, _)) => t.clone(),
                None => default_template(m).0,
            };
            shape::build(&Openai, m, &template, &names, place)
        })
        .collect();
    let mut out = request.fields.clone();
    out.insert("messages".into(), Value::Array(messages));
    Value::Object(out)
}

/// The OpenAI chat-completions request body a client would send for this history (no template,
/// no request fields: the replay's estimate; see [`crate::request_body`] for the request as sent).
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
