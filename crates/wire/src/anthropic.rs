//! Anthropic Messages request bodies: `{"model", "system"?, "messages": [...], "max_tokens", …}`.
//!
//! A user message's `tool_result` blocks become `tool` messages and each run of other blocks one
//! message, in block order; the later ones join the first when the body is rebuilt. An
//! assistant's `tool_use` blocks become native tool calls, `text` blocks the content, `image`
//! blocks (also inside a `tool_result`) images. Every other block — `thinking` and
//! `redacted_thinking` with their signatures, `document`, server tool blocks, `compaction`,
//! unknown types — and every field the model has no place for (`cache_control`, `citations`, …)
//! is carried in the message's `wire` template (see [`crate::shape`]).

use crate::conv::{self, without, Runs};
use crate::shape::{self, lit, slot, strip_control, text_marker, Draft, Fill, Shape};
use crate::{kind, Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Image, Message, Role, SystemPart, ToolCall};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: RequestFormat = RequestFormat::Anthropic;

/// Builds Anthropic blocks.
pub(crate) struct Anthropic;

impl Shape for Anthropic {
    fn call(&self, mut rest: Map<String, Value>, call: &ToolCall) -> Value {
        strip_control(&mut rest);
        rest.entry("type").or_insert_with(|| json!("tool_use"));
        rest.insert("id".into(), json!(call.id));
        rest.insert("name".into(), json!(call.name));
        rest.insert("input".into(), shape::arguments_object(&call.arguments));
        Value::Object(rest)
    }

    fn image(&self, mut rest: Map<String, Value>, image: &Image) -> Value {
        rest.entry("type").or_insert_with(|| json!("image"));
        let source = match (&image.url, &image.data) {
            (Some(u), _) => json!({"type": "url", "url": u}),
            (None, d) => json!({
                "type": "base64",
                "media_type": image.media_type.clone().unwrap_or_else(|| "image/png".into()),
                "data": d.clone().unwrap_or_default(),
            }),
        };
        rest.insert("source".into(), source);
        Value::Object(rest)
    }
}

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let beside =
        conv::SystemBeside::new(F, "missing (an Anthropic Messages body has a messages array)", true);
    let (top, history, request) = beside.read((cx, body), system, message, default_template)?;
    let model = cx.opt_str(top, "model", "")?.map(str::to_string);
    Ok(Imported { history, model, provider: Some("anthropic".to_string()), request: Some(request) })
}

/// The system blocks as one system message: text blocks are its parts (with `cache_control`);
/// any other block or field makes a template of `part` markers and opaque blocks.
fn system(cx: &Cx<'_>, blocks: &[Value]) -> Result<Message, CaptureError> {
    let mut m = Message::system("");
    let mut template = Vec::new();
    let mut plain = true;
    for (i, b) in blocks.iter().enumerate() {
        let path = format!("system[{i}]");
        let o = cx.obj(b, &path)?;
        let is_text = o.get("type").and_then(Value::as_str) == Some("text");
        match (is_text, o.get("text")) {
            (true, Some(Value::String(text))) => {
                m.system_parts.push(SystemPart {
                    kind: "text".into(),
                    text: text.clone(),
                    cache_control: o.get("cache_control").cloned(),
                });
                let rest = without(o, &["type", "text", "cache_control"]);
                plain &= rest.is_empty();
                template.push(slot("part", rest));
            }
            _ => {
                plain = false;
                template.push(lit(b.clone()));
            }
        }
    }
    m.content = m.system_parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
    if !plain {
        m.wire = Some(shape::wire(F, json!({ "system": template }), false));
    }
    Ok(m)
}

pub(crate) fn message(cx: &Cx<'_>, m: &Value, path: &str) -> Result<Vec<Draft>, CaptureError> {
    let o = cx.obj(m, path)?;
    let role = conv::user_or_assistant(cx, o, path)?;
    let content = o.get("content").ok_or_else(|| cx.err(&format!("{path}.content"), "missing"))?;
    let env = without(o, &["content"]);
    let blocks = match content {
        Value::String(s) => {
            let mut t: Map<String, Value> = env.into_iter().map(|(k, v)| (k, lit(v))).collect();
            t.insert("content".into(), text_marker("s", Map::new(), s));
            return Ok(vec![Draft { msg: Message::new(role, ""), template: Value::Object(t), join: false }]);
        }
        Value::Array(b) => b,
        other => {
            return Err(cx.err(
                &format!("{path}.content"),
                format!("expected a string or an array of blocks, found {}", kind(other)),
            ))
        }
    };
    let mut runs = Runs::new(env, "role", "content", role);
    for (i, b) in blocks.iter().enumerate() {
        let bpath = format!("{path}.content[{i}]");
        let bo = cx.obj(b, &bpath)?;
        let ty = cx.req_str(bo, "type", &bpath)?;
        match ty {
            "tool_result" if role == Role::User => {
                let (msg, tpl) = tool_result(cx, bo, &bpath)?;
                runs.result(msg, tpl);
            }
            _ => {
                let (tpl, add) = block(cx, bo, b, role, &bpath)?;
                add.apply(runs.block(tpl));
            }
        }
    }
    Ok(runs.finish())
}

/// What a block adds to the message it goes to, besides its template.
pub(crate) enum Add {
    Nothing,
    Image(Image),
    Call(ToolCall),
}

impl Add {
    /// Models the image or call on the message the block went to.
    pub(crate) fn apply(self, msg: &mut Message) {
        match self {
            Add::Nothing => {}
            Add::Image(img) => msg.images.push(img),
            Add::Call(c) => msg.tool_calls.push(c),
        }
    }
}

/// One non-result block: its template and what it adds to the message.
pub(crate) fn block(
    cx: &Cx<'_>,
    bo: &Map<String, Value>,
    b: &Value,
    role: Role,
    path: &str,
) -> Result<(Value, Add), CaptureError> {
    Ok(match bo.get("type").and_then(Value::as_str) {
        Some("text") => {
            let text = cx.req_str(bo, "text", path)?;
            (text_marker("text", without(bo, &["text"]), text), Add::Nothing)
        }
        Some("image") => match image_of(bo) {
            Some(img) => {
                let rest = without(bo, &["source"]);
                let (tpl, img) = shape::image_slot(&Anthropic, rest, img, b);
                (tpl, img.map_or(Add::Nothing, Add::Image))
            }
            None => (lit(b.clone()), Add::Nothing),
        },
        Some("tool_use") if role == Role::Assistant => {
            match (bo.get("id").and_then(Value::as_str), bo.get("name").and_then(Value::as_str)) {
                (Some(id), Some(name)) => {
                    let call = ToolCall {
                        id: id.to_string(),
                        kind: "function".into(),
                        name: name.to_string(),
                        arguments: bo.get("input").cloned().unwrap_or_else(|| json!({})),
                    };
                    let rest = without(bo, &["id", "name", "input"]);
                    if Anthropic.call(rest.clone(), &call) == *b {
                        (slot("call", rest), Add::Call(call))
                    } else {
                        (shape::call_as_sent(b), Add::Call(call))
                    }
                }
                _ => (lit(b.clone()), Add::Nothing),
            }
        }
        _ => (lit(b.clone()), Add::Nothing),
    })
}

fn image_of(bo: &Map<String, Value>) -> Option<Image> {
    let src = bo.get("source")?.as_object()?;
    match src.get("type")?.as_str()? {
        "url" => Some(Image { media_type: None, data: None, url: Some(src.get("url")?.as_str()?.into()) }),
        "base64" => Some(Image {
            media_type: Some(src.get("media_type")?.as_str()?.into()),
            data: Some(src.get("data")?.as_str()?.into()),
            url: None,
        }),
        _ => None,
    }
}

/// A `tool_result` block: a tool message and the block's template.
pub(crate) fn tool_result(
    cx: &Cx<'_>,
    bo: &Map<String, Value>,
    path: &str,
) -> Result<(Message, Value), CaptureError> {
    result_block(cx, bo, path, true)
}

/// A `tool_result` block whose call is not modeled (a client that answers text tools in
/// kind): its texts and images are the user message's, its id and error flag are carried as
/// they were.
pub(crate) fn tool_result_as_user(
    cx: &Cx<'_>,
    bo: &Map<String, Value>,
    path: &str,
) -> Result<(Message, Value), CaptureError> {
    result_block(cx, bo, path, false)
}

fn result_block(
    cx: &Cx<'_>,
    bo: &Map<String, Value>,
    path: &str,
    as_tool: bool,
) -> Result<(Message, Value), CaptureError> {
    let id = cx.req_str(bo, "tool_use_id", path)?;
    let mut msg = if as_tool { Message::tool(id, "") } else { Message::user("") };
    let mut t = Map::new();
    for (k, v) in bo {
        match (k.as_str(), v) {
            ("tool_use_id", _) if as_tool => {
                t.insert(k.clone(), Value::Object(shape::marker("id")));
            }
            ("is_error", Value::Bool(true)) if as_tool => {
                msg.is_error = true;
                t.insert(k.clone(), Value::Object(shape::marker("err")));
            }
            ("content", Value::String(s)) => {
                t.insert(k.clone(), text_marker("s", Map::new(), s));
            }
            ("content", Value::Array(items)) => {
                let mut inner = Vec::with_capacity(items.len());
                for (j, it) in items.iter().enumerate() {
                    let ipath = format!("{path}.content[{j}]");
                    let io = cx.obj(it, &ipath)?;
                    let (tpl, add) = block(cx, io, it, Role::User, &ipath)?;
                    match add {
                        Add::Image(img) => msg.images.push(img),
                        Add::Call(_) | Add::Nothing => {}
                    }
                    inner.push(tpl);
                }
                t.insert(k.clone(), Value::Array(inner));
            }
            _ => {
                t.insert(k.clone(), lit(v.clone()));
            }
        }
    }
    Ok((msg, Value::Object(t)))
}

/// The template a message without `wire` is built from, and whether it joins the previous
/// provider message.
pub(crate) fn default_template(m: &Message) -> (Value, bool) {
    let role = match m.role {
        Role::Assistant => "assistant",
        Role::User | Role::Tool | Role::System => "user",
    };
    if m.role == Role::Tool {
        let mut r = Map::new();
        r.insert("type".into(), json!("tool_result"));
        r.insert("tool_use_id".into(), Value::Object(shape::marker("id")));
        if !m.images.is_empty() {
            let mut inner = vec![json!({"$": "text", "type": "text"})];
            inner.extend(m.images.iter().map(|_| json!({"$": "image", "type": "image"})));
            r.insert("content".into(), Value::Array(inner));
        } else if !m.content.is_empty() {
            r.insert("content".into(), json!({"$": "s"}));
        }
        if m.is_error {
            r.insert("is_error".into(), Value::Object(shape::marker("err")));
        }
        return (json!({"role": role, "content": [Value::Object(r)]}), false);
    }
    if m.images.is_empty() && m.tool_calls.is_empty() {
        return (json!({"role": role, "content": {"$": "s"}}), false);
    }
    let mut blocks = Vec::new();
    if !m.content.is_empty() {
        blocks.push(json!({"$": "text", "type": "text"}));
    }
    blocks.extend(m.images.iter().map(|_| json!({"$": "image", "type": "image"})));
    blocks.extend(m.tool_calls.iter().map(|_| json!({"$": "call", "type": "tool_use"})));
    (json!({"role": role, "content": blocks}), false)
}

fn is_result(b: &Value) -> bool {
    b.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// Places what had no slot: content as a text block (first) or as a result's content, calls
/// and images as blocks at the end.
fn place(v: &mut Value, f: &mut Fill<'_>, msg: &Message) {
    let calls: Vec<Value> = f.rest_calls().iter().map(|c| Anthropic.call(Map::new(), c)).collect();
    let images: Vec<Value> = f.rest_images().iter().map(|i| Anthropic.image(Map::new(), i)).collect();
    let text = f.leftover_text.take();
    let Some(content) = v.get_mut("content") else { return };
    if msg.role == Role::Tool {
        if let Some(r) = content.as_array_mut().and_then(|b| b.iter_mut().find(|b| is_result(b))) {
            if let (Some(t), Some(ro)) = (text, r.as_object_mut()) {
                match ro.get_mut("content") {
                    Some(Value::Array(items)) => items.insert(0, json!({"type": "text", "text": t})),
                    _ => {
                        ro.insert("content".into(), json!(t));
                    }
                }
            }
        }
        return;
    }
    if let Value::String(s) = content {
        if calls.is_empty() && images.is_empty() {
            return;
        }
        let first = std::mem::take(s);
        *content = Value::Array(if first.is_empty() {
            vec![]
        } else {
            vec![json!({"type": "text", "text": first})]
        });
    }
    if let Value::Array(blocks) = content {
        if let Some(t) = text {
            blocks.insert(0, json!({"type": "text", "text": t}));
        }
        blocks.extend(images);
        blocks.extend(calls);
    }
}

/// The Anthropic Messages body for a history, with the request's other fields.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let names = HashMap::new();
    let mut system: Vec<Value> = Vec::new();
    let mut system_string: Option<&str> = None;
    let n_system = history.iter().filter(|m| m.role == Role::System).count();
    let mut messages: Vec<Value> = Vec::new();
    for m in history {
        if m.role == Role::System {
            match shape::template_of(m, F).and_then(|(t, _)| t.get("system")) {
                Some(t) => {
                    let mut f = Fill::new(&Anthropic, m, t, &names);
                    if let Some(Value::Array(b)) = f.fill(t) {
                        system.extend(b);
                    }
                }
                None if m.system_parts.is_empty() && n_system == 1 => system_string = Some(&m.content),
                None if m.system_parts.is_empty() => system.push(json!({"type": "text", "text": m.content})),
                None => {
                    let mut f = Fill::new(&Anthropic, m, &Value::Null, &names);
                    for _ in &m.system_parts {
                        if let Some(b) = f.fill(&json!({"$": "part"})) {
                            system.push(b);
                        }
                    }
                }
            }
            continue;
        }
        let (template, join, wired) = shape::template_for(m, F, default_template);
        let v = shape::build(&Anthropic, m, &template, &names, |v, f| place(v, f, m));
        let join = if wired {
            join
        } else {
            // A result salvage wrote joins the results before it, as the API requires.
            m.role == Role::Tool && conv::last_is_results(&messages, "content", is_result)
        };
        conv::push(&mut messages, v, join, "role", "content");
    }
    let mut out = request.fields.clone();
    if let Some(s) = system_string {
        out.insert("system".into(), json!(s));
    } else if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    Value::Object(out)
}

/// The Anthropic Messages request body a client would send for this history (no template, no
/// request fields: the replay's estimate; see [`crate::request_body`] for the request as sent).
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
