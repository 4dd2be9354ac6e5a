//! Bedrock Converse request bodies: `{"messages": [...], "system"?: [...], "inferenceConfig"?,
//! "toolConfig"?, "additionalModelRequestFields"?, …}` (the model id is in the URL; a body that
//! names `modelId` keeps it as a field).
//!
//! Content blocks are single-key unions. `text` blocks are the content, `image` blocks with
//! inline `bytes` images, `toolUse` native tool calls, each `toolResult` a tool message (its
//! `text` items the content, `json` items their compact JSON, `image` items images,
//! `"status": "error"` an error result). `system` text blocks are a system message. Everything
//! else — `reasoningContent` (text with its signature, or `redactedContent`), `document`,
//! `cachePoint`, `guardContent`, `video`, S3 images, unknown blocks — is carried in the message's
//! `wire` template (see [`crate::shape`]).

use crate::anthropic::Add;
use crate::conv::{self, without, Runs};
use crate::shape::{self, finish, lit, slot, strip_control, text_marker, Draft, Fill, Shape};
use crate::{Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: RequestFormat = RequestFormat::Bedrock;

/// Builds Converse blocks.
pub(crate) struct Bedrock;

impl Shape for Bedrock {
    fn call(&self, mut rest: Map<String, Value>, call: &ToolCall) -> Value {
        strip_control(&mut rest);
        let mut tu = match rest.shift_remove("toolUse") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        tu.insert("toolUseId".into(), json!(call.id));
        tu.insert("name".into(), json!(call.name));
        tu.insert("input".into(), shape::arguments_object(&call.arguments));
        rest.insert("toolUse".into(), Value::Object(tu));
        Value::Object(rest)
    }

    fn image(&self, mut rest: Map<String, Value>, image: &Image) -> Value {
        let mut im = match rest.shift_remove("image") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        let media = image.media_type.as_deref().unwrap_or("image/png");
        im.insert("format".into(), json!(media.strip_prefix("image/").unwrap_or(media)));
        let mut src = match im.shift_remove("source") {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        src.insert("bytes".into(), json!(image.data.clone().unwrap_or_default()));
        im.insert("source".into(), Value::Object(src));
        rest.insert("image".into(), Value::Object(im));
        Value::Object(rest)
    }
}

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let beside = conv::SystemBeside::new(F, "missing (a Bedrock Converse body has a messages array)", false);
    let (top, history, request) = beside.read((cx, body), system, message, default_template)?;
    let model = top.get("modelId").and_then(Value::as_str).map(str::to_string);
    Ok(Imported { history, model, provider: Some("bedrock".to_string()), request: Some(request) })
}

fn system(cx: &Cx<'_>, blocks: &[Value]) -> Result<Message, CaptureError> {
    let mut t = Vec::with_capacity(blocks.len());
    for (i, b) in blocks.iter().enumerate() {
        let bo = cx.obj(b, &format!("system[{i}]"))?;
        t.push(match bo.get("text") {
            Some(Value::String(s)) => text_marker("text", without(bo, &["text"]), s),
            _ => lit(b.clone()),
        });
    }
    let d = Draft { msg: Message::system(""), template: json!({ "system": t }), join: false };
    Ok(finish(d, F, default_template))
}

fn message(cx: &Cx<'_>, m: &Value, path: &str) -> Result<Vec<Draft>, CaptureError> {
    let o = cx.obj(m, path)?;
    let role = conv::user_or_assistant(cx, o, path)?;
    let content = o.get("content").ok_or_else(|| cx.err(&format!("{path}.content"), "missing"))?;
    let blocks = cx.arr(content, &format!("{path}.content"))?;
    let mut runs = Runs::new(without(o, &["content"]), "role", "content", role);
    for (i, b) in blocks.iter().enumerate() {
        let bo = cx.obj(b, &format!("{path}.content[{i}]"))?;
        if let (Some(Value::Object(tr)), Role::User) = (bo.get("toolResult"), role) {
            if let Some(Value::String(id)) = tr.get("toolUseId") {
                let (msg, tpl) = tool_result(bo, tr, id);
                runs.result(msg, tpl);
                continue;
            }
        }
        let (tpl, add) = block(bo, b, role);
        add.apply(runs.block(tpl));
    }
    Ok(runs.finish())
}

fn block(bo: &Map<String, Value>, b: &Value, role: Role) -> (Value, Add) {
    if let Some(Value::String(s)) = bo.get("text") {
        return (text_marker("text", without(bo, &["text"]), s), Add::Nothing);
    }
    if let Some(img) = image_of(bo) {
        let mut rest = without(bo, &["image"]);
        if let Some(Value::Object(im)) = bo.get("image") {
            let mut imr = without(im, &["format", "source"]);
            if let Some(Value::Object(src)) = im.get("source") {
                let srest = without(src, &["bytes"]);
                if !srest.is_empty() {
                    imr.insert("source".into(), Value::Object(srest));
                }
            }
            if !imr.is_empty() {
                rest.insert("image".into(), Value::Object(imr));
            }
        }
        let (tpl, img) = shape::image_slot(&Bedrock, rest, img, b);
        return (tpl, img.map_or(Add::Nothing, Add::Image));
    }
    if let (Some(Value::Object(tu)), Role::Assistant) = (bo.get("toolUse"), role) {
        if let (Some(Value::String(id)), Some(Value::String(name))) = (tu.get("toolUseId"), tu.get("name")) {
            let call = ToolCall {
                id: id.clone(),
                kind: "function".into(),
                name: name.clone(),
                arguments: tu.get("input").cloned().unwrap_or_else(|| json!({})),
            };
            let mut rest = without(bo, &["toolUse"]);
            let turest = without(tu, &["toolUseId", "name", "input"]);
            if !turest.is_empty() {
                rest.insert("toolUse".into(), Value::Object(turest));
            }
            let tpl = if Bedrock.call(rest.clone(), &call) == *b {
                slot("call", rest)
            } else {
                shape::call_as_sent(b)
            };
            return (tpl, Add::Call(call));
        }
    }
    (lit(b.clone()), Add::Nothing)
}

fn image_of(bo: &Map<String, Value>) -> Option<Image> {
    let im = bo.get("image")?.as_object()?;
    let format = im.get("format")?.as_str()?;
    let data = im.get("source")?.as_object()?.get("bytes")?.as_str()?;
    Some(Image { media_type: Some(format!("image/{format}")), data: Some(data.into()), url: None })
}

fn tool_result(bo: &Map<String, Value>, tr: &Map<String, Value>, id: &str) -> (Message, Value) {
    let mut msg = Message::tool(id, "");
    let mut t = Map::new();
    for (k, v) in tr {
        let tv = match (k.as_str(), v) {
            ("toolUseId", _) => Value::Object(shape::marker("id")),
            ("status", Value::String(s)) if s == "error" => {
                msg.is_error = true;
                let mut m = shape::marker("err");
                m.insert("$v".into(), json!("error"));
                Value::Object(m)
            }
            ("content", Value::Array(items)) => {
                let mut inner = Vec::with_capacity(items.len());
                for it in items {
                    inner.push(match it.as_object() {
                        Some(io) if io.contains_key("json") && io.len() == 1 => {
                            text_marker("json", Map::new(), &io["json"].to_string())
                        }
                        Some(io) => {
                            let (tpl, add) = block(io, it, Role::User);
                            if let Add::Image(img) = add {
                                msg.images.push(img);
                            }
                            tpl
                        }
                        None => lit(it.clone()),
                    });
                }
                Value::Array(inner)
            }
            _ => lit(v.clone()),
        };
        t.insert(k.clone(), tv);
    }
    let mut block: Map<String, Value> =
        without(bo, &["toolResult"]).into_iter().map(|(k, v)| (k, lit(v))).collect();
    block.insert("toolResult".into(), Value::Object(t));
    (msg, Value::Object(block))
}

/// The template a message without `wire` is built from.
pub(crate) fn default_template(m: &Message) -> (Value, bool) {
    let t = match m.role {
        Role::System => json!({"system": [{"$": "text"}]}),
        Role::Tool => {
            let mut content = vec![json!({"$": "text"})];
            content.extend(m.images.iter().map(|_| json!({"$": "image"})));
            let mut tr = Map::new();
            tr.insert("toolUseId".into(), json!({"$": "id"}));
            tr.insert("content".into(), Value::Array(content));
            if m.is_error {
                tr.insert("status".into(), json!({"$": "err", "$v": "error"}));
            }
            json!({"role": "user", "content": [{"toolResult": tr}]})
        }
        Role::User | Role::Assistant => {
            let mut blocks = Vec::new();
            if !m.content.is_empty() || (m.images.is_empty() && m.tool_calls.is_empty()) {
                blocks.push(json!({"$": "text"}));
            }
            blocks.extend(m.images.iter().map(|_| json!({"$": "image"})));
            blocks.extend(m.tool_calls.iter().map(|_| json!({"$": "call"})));
            json!({"role": m.role.as_str(), "content": blocks})
        }
    };
    (t, false)
}

fn place(v: &mut Value, f: &mut Fill<'_>, msg: &Message) {
    let calls: Vec<Value> = f.rest_calls().iter().map(|c| Bedrock.call(Map::new(), c)).collect();
    let images: Vec<Value> = f.rest_images().iter().map(|i| Bedrock.image(Map::new(), i)).collect();
    let text = f.leftover_text.take();
    let Some(Value::Array(blocks)) = v.get_mut("content") else { return };
    if msg.role == Role::Tool {
        if let (Some(t), Some(Value::Object(tr))) =
            (text, blocks.iter_mut().find_map(|b| b.get_mut("toolResult")))
        {
            match tr.get_mut("content") {
                Some(Value::Array(items)) => items.insert(0, json!({"text": t})),
                _ => {
                    tr.insert("content".into(), json!([{"text": t}]));
                }
            }
        }
        return;
    }
    conv::place_rest(blocks, text, images, calls);
}

/// The Converse body for a history, with the request's other fields.
///
/// Converse wants the roles to alternate: a message salvage wrote (a notice, a stub) merges into
/// a neighbour of the same role.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let names = HashMap::new();
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in history {
        let (template, join, wired) = shape::template_for(m, F, default_template);
        let v = shape::build(&Bedrock, m, &template, &names, |v, f| place(v, f, m));
        if m.role == Role::System {
            if let Some(Value::Array(b)) = v.get("system") {
                system.extend(b.iter().cloned());
            }
            continue;
        }
        let same_role = messages.last().is_some_and(|l| l.get("role") == v.get("role"));
        let join = if wired { join || same_role } else { same_role };
        conv::push(&mut messages, v, join, "role", "content");
    }
    let mut out = request.fields.clone();
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    Value::Object(out)
}
