//! Gemini `generateContent` request bodies: `{"contents": [...], "systemInstruction"?, "tools"?,
//! "toolConfig"?, "generationConfig"?, …}` (the model is in the URL).
//!
//! `systemInstruction` is a system message. In `contents`, role `model` is the assistant;
//! `functionCall` parts are native tool calls, each `functionResponse` part a tool message (its
//! `response` is the content: the string when it is `{"key": "string"}`, else its compact JSON;
//! a `response` with an `error` key is an error result), `text` parts the content, `inlineData`
//! images images. Thought parts (`"thought": true`), `thoughtSignature`, non-image inline data,
//! `fileData`, executable code and unknown parts are carried in the message's `wire` template.
//! Both the camelCase and the snake_case spellings the API accepts are kept as sent. A call
//! without an `id` gets one for pairing (never sent); a response without one answers the oldest
//! open call of its name.

use crate::conv::{self, without, Runs};
use crate::shape::{self, finish, flag, lit, slot, strip_control, text_marker, Fill, Shape};
use crate::{kind, Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};

const F: RequestFormat = RequestFormat::Gemini;

/// Builds Gemini parts.
pub(crate) struct Gemini;

impl Shape for Gemini {
    fn call(&self, mut rest: Map<String, Value>, call: &ToolCall) -> Value {
        let noid = flag(&mut rest, "$noid");
        strip_control(&mut rest);
        let key = if rest.contains_key("function_call") { "function_call" } else { "functionCall" };
        let mut fc = match rest.shift_remove(key) {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        if !noid {
            fc.insert("id".into(), json!(call.id));
        }
        fc.insert("name".into(), json!(call.name));
        fc.insert("args".into(), shape::arguments_object(&call.arguments));
        rest.insert(key.into(), Value::Object(fc));
        Value::Object(rest)
    }

    fn image(&self, mut rest: Map<String, Value>, image: &Image) -> Value {
        let snake = rest.contains_key("inline_data");
        let (key, mime) = if snake { ("inline_data", "mime_type") } else { ("inlineData", "mimeType") };
        let mut d = match rest.shift_remove(key) {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        d.insert(mime.into(), json!(image.media_type.clone().unwrap_or_else(|| "image/png".into())));
        d.insert("data".into(), json!(image.data.clone().unwrap_or_default()));
        rest.insert(key.into(), Value::Object(d));
        Value::Object(rest)
    }
}

fn first_key<'a>(o: &'a Map<String, Value>, keys: [&'static str; 2]) -> Option<(&'static str, &'a Value)> {
    keys.into_iter().find_map(|k| o.get(k).map(|v| (k, v)))
}

/// Ids for calls sent without one, and the calls still waiting for a response.
#[derive(Default)]
pub(crate) struct Ids {
    n: usize,
    open: Vec<(String, String)>,
}

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    let mut history = History::new();
    let mut modeled = vec!["contents"];
    if let Some((key, si)) = first_key(top, ["systemInstruction", "system_instruction"]) {
        if let Some(m) = system(cx, si, key)? {
            history.push(m);
            modeled.push(key);
        }
    }
    let missing = "missing (a Gemini generateContent body has a contents array)";
    let mut ids = Ids::default();
    let read = |c: &Value, path: &str| content(cx, c, path, &mut ids);
    history.extend(conv::message_list(cx, top, ("contents", missing), read, F, default_template)?);
    let request = conv::request_of(F, top, &modeled);
    let model = top.get("model").and_then(Value::as_str).map(|m| m.trim_start_matches("models/").to_string());
    Ok(Imported { history, model, provider: Some("gemini".to_string()), request: Some(request) })
}

fn system(cx: &Cx<'_>, si: &Value, path: &str) -> Result<Option<Message>, CaptureError> {
    let o = match si {
        Value::Object(o) => o,
        Value::String(s) if !s.is_empty() => {
            let mut m = Message::system("");
            let d = shape::Draft { msg: m.clone(), template: text_marker("s", Map::new(), s), join: false };
            m = finish(d, F, |_| (Value::Null, false));
            return Ok(Some(m));
        }
        _ => return Ok(None),
    };
    let parts = match o.get("parts") {
        Some(Value::Array(p)) if !p.is_empty() => p,
        _ => return Ok(None),
    };
    let mut t: Map<String, Value> = without(o, &["parts"]).into_iter().map(|(k, v)| (k, lit(v))).collect();
    let mut tparts = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let ppath = format!("{path}.parts[{i}]");
        let po = cx.obj(p, &ppath)?;
        tparts.push(match po.get("text") {
            Some(Value::String(s)) if po.get("thought") != Some(&Value::Bool(true)) => {
                text_marker("text", without(po, &["text"]), s)
            }
            _ => lit(p.clone()),
        });
    }
    t.insert("parts".into(), Value::Array(tparts));
    if path == "system_instruction" {
        t.insert("$snake".into(), Value::Bool(true));
    }
    let d = shape::Draft { msg: Message::system(""), template: Value::Object(t), join: false };
    Ok(Some(finish(d, F, default_template)))
}

pub(crate) fn content(
    cx: &Cx<'_>,
    c: &Value,
    path: &str,
    ids: &mut Ids,
) -> Result<Vec<shape::Draft>, CaptureError> {
    let o = cx.obj(c, path)?;
    let role = match cx.opt_str(o, "role", path)? {
        Some("model") => Role::Assistant,
        None | Some("user" | "function" | "tool") => Role::User,
        Some(other) => {
            return Err(
                cx.err(&format!("{path}.role"), format!("unknown role {other:?}, expected user or model"))
            )
        }
    };
    let parts = match o.get("parts") {
        Some(Value::Array(p)) => p.as_slice(),
        None | Some(Value::Null) => &[],
        Some(v) => {
            return Err(cx.err(&format!("{path}.parts"), format!("expected an array, found {}", kind(v))))
        }
    };
    let mut runs = Runs::new(without(o, &["parts"]), "role", "parts", role);
    for (i, p) in parts.iter().enumerate() {
        let ppath = format!("{path}.parts[{i}]");
        let po = cx.obj(p, &ppath)?;
        let thought = po.get("thought") == Some(&Value::Bool(true));
        if let (Some(Value::String(s)), false) = (po.get("text"), thought) {
            runs.block(text_marker("text", without(po, &["text"]), s));
        } else if let Some((key, Value::Object(fr))) =
            first_key(po, ["functionResponse", "function_response"])
        {
            let (msg, tpl) = response(po, key, fr, ids);
            runs.result(msg, tpl);
        } else if let (Some((key, Value::Object(fc))), Role::Assistant) =
            (first_key(po, ["functionCall", "function_call"]), role)
        {
            let tpl = call(po, p, key, fc, ids);
            match tpl {
                Some((tpl, call)) => runs.block(tpl).tool_calls.push(call),
                None => {
                    runs.block(lit(p.clone()));
                }
            }
        } else if let Some(img) = image_of(po) {
            let key = if po.contains_key("inline_data") { "inline_data" } else { "inlineData" };
            let mut rest = without(po, &[key]);
            if let Some(Value::Object(d)) = po.get(key) {
                rest.insert(key.into(), Value::Object(without(d, &["mimeType", "mime_type", "data"])));
            }
            let (tpl, img) = shape::image_slot(&Gemini, rest, img, p);
            runs.block(tpl).images.extend(img);
        } else {
            runs.block(lit(p.clone()));
        }
    }
    Ok(runs.finish())
}

fn image_of(po: &Map<String, Value>) -> Option<Image> {
    let (_, d) = first_key(po, ["inlineData", "inline_data"])?;
    let d = d.as_object()?;
    let (_, mime) = first_key(d, ["mimeType", "mime_type"])?;
    let mime = mime.as_str()?;
    let data = d.get("data")?.as_str()?;
    mime.starts_with("image/").then(|| Image {
        media_type: Some(mime.into()),
        data: Some(data.into()),
        url: None,
    })
}

fn call(
    po: &Map<String, Value>,
    p: &Value,
    key: &str,
    fc: &Map<String, Value>,
    ids: &mut Ids,
) -> Option<(Value, ToolCall)> {
    let name = fc.get("name")?.as_str()?;
    let (id, noid) = match fc.get("id").and_then(Value::as_str) {
        Some(id) => (id.to_string(), false),
        None => {
            ids.n = ids.n.saturating_add(1);
            (format!("gemini_call_{}", ids.n), true)
        }
    };
    ids.open.push((name.to_string(), id.clone()));
    let call = ToolCall {
        id,
        kind: "function".into(),
        name: name.to_string(),
        arguments: fc.get("args").cloned().unwrap_or_else(|| json!({})),
    };
    let mut rest = without(po, &[key]);
    let frest = without(fc, &["id", "name", "args"]);
    if !frest.is_empty() || key != "functionCall" {
        rest.insert(key.into(), Value::Object(frest));
    }
    if noid {
        rest.insert("$noid".into(), json!(1));
    }
    let tpl =
        if Gemini.call(rest.clone(), &call) == *p { slot("call", rest) } else { shape::call_as_sent(p) };
    Some((tpl, call))
}

/// A `functionResponse` part: a tool message and the part's template.
fn response(po: &Map<String, Value>, key: &str, fr: &Map<String, Value>, ids: &mut Ids) -> (Message, Value) {
    let name = fr.get("name").and_then(Value::as_str).unwrap_or_default();
    let given = fr.get("id").and_then(Value::as_str);
    let id = match given {
        Some(id) => {
            ids.open.retain(|(_, i)| i != id);
            id.to_string()
        }
        None => match ids.open.iter().position(|(n, _)| n == name) {
            Some(i) => ids.open.remove(i).1,
            None => {
                ids.n = ids.n.saturating_add(1);
                format!("gemini_result_{}", ids.n)
            }
        },
    };
    let mut msg = Message::tool(id, "");
    let mut t = Map::new();
    for (k, v) in fr {
        let tv = match (k.as_str(), v) {
            ("id", _) => Value::Object(shape::marker("id")),
            ("response", Value::Object(r)) if r.is_empty() => lit(v.clone()),
            ("response", Value::Object(r)) if r.len() == 1 => match r.iter().next() {
                Some((rk, Value::String(s))) => {
                    msg.is_error = rk == "error";
                    let mut inner = Map::new();
                    inner.insert(rk.clone(), text_marker("s", Map::new(), s));
                    Value::Object(inner)
                }
                _ => text_marker("jsonv", Map::new(), &v.to_string()),
            },
            ("response", Value::Object(r)) => {
                msg.is_error = r.contains_key("error");
                text_marker("jsonv", Map::new(), &v.to_string())
            }
            _ => lit(v.clone()),
        };
        t.insert(k.clone(), tv);
    }
    let mut part: Map<String, Value> = without(po, &[key]).into_iter().map(|(k, v)| (k, lit(v))).collect();
    part.insert(key.into(), Value::Object(t));
    (msg, Value::Object(part))
}

/// The template a message without `wire` is built from.
pub(crate) fn default_template(m: &Message) -> (Value, bool) {
    let t = match m.role {
        Role::System => json!({"parts": [{"$": "text"}]}),
        Role::Tool => {
            let key = if m.is_error { "error" } else { "output" };
            json!({"role": "user", "parts": [{"functionResponse": {"id": {"$": "id"}, "response": {key: {"$": "s"}}}}]})
        }
        Role::User | Role::Assistant => {
            let mut parts = Vec::new();
            if !m.content.is_empty() || (m.images.is_empty() && m.tool_calls.is_empty()) {
                parts.push(json!({"$": "text"}));
            }
            parts.extend(m.images.iter().map(|_| json!({"$": "image"})));
            parts.extend(m.tool_calls.iter().map(|_| json!({"$": "call"})));
            let role = if m.role == Role::Assistant { "model" } else { "user" };
            json!({"role": role, "parts": parts})
        }
    };
    (t, false)
}

fn is_result(p: &Value) -> bool {
    p.get("functionResponse").is_some() || p.get("function_response").is_some()
}

fn place(v: &mut Value, f: &mut Fill<'_>, msg: &Message) {
    let calls: Vec<Value> = f.rest_calls().iter().map(|c| Gemini.call(Map::new(), c)).collect();
    let images: Vec<Value> = f.rest_images().iter().map(|i| Gemini.image(Map::new(), i)).collect();
    let text = f.leftover_text.take();
    let Some(Value::Array(parts)) = v.get_mut("parts") else { return };
    // A response names its function: from the call it answers when the template has no name.
    if msg.role == Role::Tool {
        let name = msg.tool_call_id.as_ref().and_then(|id| f.names.get(id)).cloned().unwrap_or_default();
        for p in parts.iter_mut() {
            for key in ["functionResponse", "function_response"] {
                if let Some(Value::Object(fr)) = p.get_mut(key) {
                    fr.entry("name").or_insert_with(|| json!(name));
                    if let Some(t) = text {
                        let k = if msg.is_error { "error" } else { "output" };
                        fr.entry("response").or_insert_with(|| json!({k: t}));
                    }
                }
            }
        }
        return;
    }
    conv::place_rest(parts, text, images, calls);
}

/// The `generateContent` body for a history, with the request's other fields.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let names = shape::call_names(history);
    let mut system: Option<Value> = None;
    let mut system_key = "systemInstruction";
    let mut contents: Vec<Value> = Vec::new();
    for m in history {
        let (template, join, wired) = shape::template_for(m, F, default_template);
        let mut v = shape::build(&Gemini, m, &template, &names, |v, f| place(v, f, m));
        if m.role == Role::System {
            if let Some(o) = v.as_object_mut() {
                if o.shift_remove("$snake").is_some() {
                    system_key = "system_instruction";
                }
            }
            match (&mut system, v) {
                (None, v) => system = Some(v),
                (Some(s), Value::Object(o)) => {
                    if let (Some(Value::Array(a)), Some(Value::Array(b))) =
                        (s.get_mut("parts"), o.get("parts"))
                    {
                        a.extend(b.iter().cloned());
                    }
                }
                (Some(_), _) => {}
            }
            continue;
        }
        let join = if wired {
            join
        } else {
            m.role == Role::Tool && conv::last_is_results(&contents, "parts", is_result)
        };
        conv::push(&mut contents, v, join, "role", "parts");
    }
    let mut out = request.fields.clone();
    if let Some(s) = system {
        out.insert(system_key.into(), s);
    }
    out.insert("contents".into(), Value::Array(contents));
    Value::Object(out)
}
