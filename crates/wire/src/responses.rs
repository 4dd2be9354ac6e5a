//! OpenAI Responses API request bodies: `{"model", "instructions"?, "input": "…" | [items], …}`.
//!
//! `instructions` is a system message. Input messages of role `user`, `system` or `developer`
//! are one message each. A run of model-side items — an `assistant` message, `function_call`s
//! (native tool calls), `custom_tool_call`s, `reasoning` (its `encrypted_content` kept opaque),
//! hosted tool calls — is one assistant message. A `function_call_output` or
//! `custom_tool_call_output` is a tool message. Any other item (`compaction`, `item_reference`,
//! other outputs, unknown types) is carried in the template of the message before it (or after
//! it, at the start). Every message's template is its list of items (see [`crate::shape`]).

use crate::conv::without;
use crate::shape::{self, finish, lit, slot, strip_control, text_marker, Draft, Fill, Shape};
use crate::{kind, Cx, Imported};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: RequestFormat = RequestFormat::OpenaiResponses;

/// Model-side items that belong to the assistant turn they appear in.
const MODEL_SIDE: &[&str] = &[
    "reasoning",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
];

/// Builds Responses items.
pub(crate) struct Responses;

impl Shape for Responses {
    fn call(&self, mut rest: Map<String, Value>, call: &ToolCall) -> Value {
        let fmt = rest.shift_remove("$fmt");
        strip_control(&mut rest);
        let ty = rest.entry("type").or_insert_with(|| json!("function_call")).clone();
        rest.insert("call_id".into(), json!(call.id));
        rest.insert("name".into(), json!(call.name));
        let key = if ty == "custom_tool_call" { "input" } else { "arguments" };
        rest.insert(
            key.into(),
            json!(shape::arguments_string(&call.arguments, fmt.as_ref().and_then(Value::as_str))),
        );
        Value::Object(rest)
    }

    fn image(&self, mut rest: Map<String, Value>, image: &Image) -> Value {
        rest.entry("type").or_insert_with(|| json!("input_image"));
        rest.insert("image_url".into(), json!(crate::openai::image_url(image)));
        Value::Object(rest)
    }
}

pub(crate) fn import(cx: &Cx<'_>, body: &Value) -> Result<Imported, CaptureError> {
    let top = cx.obj(body, "(top level)")?;
    let mut history = History::new();
    let mut modeled = vec!["input"];
    if let Some(Value::String(s)) = top.get("instructions") {
        if !s.is_empty() {
            history.push(Message::system(s.clone()));
            modeled.push("instructions");
        }
    }
    let input =
        top.get("input").ok_or_else(|| cx.err("input", "missing (a Responses API body has an input)"))?;
    match input {
        Value::String(s) => {
            let d = Draft { msg: Message::user(""), template: text_marker("s", Map::new(), s), join: false };
            history.push(finish(d, F, default_template));
        }
        Value::Array(items) => {
            for d in items_to_drafts(cx, items, &|i| format!("input[{i}]"))? {
                history.push(finish(d, F, default_template));
            }
        }
        v => {
            return Err(cx.err("input", format!("expected a string or an array of items, found {}", kind(v))))
        }
    }
    if top.get("previous_response_id").is_some_and(Value::is_string) {
        mark_calls_held_upstream(&mut history);
    }
    let request = crate::conv::request_of(F, top, &modeled);
    Ok(Imported {
        history,
        model: cx.opt_str(top, "model", "")?.map(str::to_string),
        provider: Some("openai".to_string()),
        request: Some(request),
    })
}

/// With `previous_response_id`, the calls of the chained response live with the provider: a tool
/// result whose call is in no assistant message of this input answers one of them.
fn mark_calls_held_upstream(history: &mut History) {
    let local: std::collections::HashSet<String> =
        history.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone())).collect();
    for m in history.iter_mut().filter(|m| m.role == Role::Tool) {
        if m.tool_call_id.as_ref().is_some_and(|id| !local.contains(id)) {
            m.meta.call_held_upstream = true;
        }
    }
}

fn push_item(d: &mut Draft, item: Value) {
    if let Value::Array(a) = &mut d.template {
        a.push(item);
    }
}

/// Drafts being gathered from input items.
struct Gather {
    drafts: Vec<Draft>,
    /// Whether the last draft is an assistant turn still taking model-side items.
    open: bool,
    /// Unmodeled items before the first draft.
    prefix: Vec<Value>,
}

impl Gather {
    /// A new draft of `role`, taking the unmodeled items gathered so far.
    fn new_draft(&mut self, role: Role) -> Draft {
        Draft {
            msg: Message::new(role, ""),
            template: Value::Array(std::mem::take(&mut self.prefix)),
            join: false,
        }
    }

    /// The assistant draft taking model-side items (a new one unless one is open).
    fn assistant(&mut self) -> Option<&mut Draft> {
        if !self.open {
            let d = self.new_draft(Role::Assistant);
            self.drafts.push(d);
            self.open = true;
        }
        self.drafts.last_mut()
    }

    /// A message item: an assistant message joins the open assistant draft.
    fn message(
        &mut self,
        cx: &Cx<'_>,
        o: &Map<String, Value>,
        r: &str,
        path: &str,
    ) -> Result<(), CaptureError> {
        let role = match r {
            "user" => Role::User,
            "system" | "developer" => Role::System,
            "assistant" => Role::Assistant,
            other => {
                return Err(cx.err(
                    &format!("{path}.role"),
                    format!("unknown role {other:?}, expected user, system, developer or assistant"),
                ))
            }
        };
        if role != Role::Assistant || !self.open {
            let d = self.new_draft(role);
            self.drafts.push(d);
        }
        self.open = role == Role::Assistant;
        if let Some(d) = self.drafts.last_mut() {
            let tpl = text_item(cx, o, (path, "content"), &mut d.msg)?;
            push_item(d, tpl);
        }
        Ok(())
    }

    /// An unmodeled item: verbatim in the last draft, or before the first.
    fn verbatim(&mut self, it: &Value) {
        match self.drafts.last_mut() {
            Some(d) => push_item(d, lit(it.clone())),
            None => self.prefix.push(lit(it.clone())),
        }
    }
}

/// Reads input items into drafts; `path_of(i)` names item `i` in errors.
pub(crate) fn items_to_drafts(
    cx: &Cx<'_>,
    items: &[Value],
    path_of: &dyn Fn(usize) -> String,
) -> Result<Vec<Draft>, CaptureError> {
    let mut g = Gather { drafts: Vec::new(), open: false, prefix: Vec::new() };
    for (i, it) in items.iter().enumerate() {
        let path = path_of(i);
        let o = cx.obj(it, &path)?;
        let ty = cx.opt_str(o, "type", &path)?;
        let role = cx.opt_str(o, "role", &path)?;
        match (ty, role) {
            (None | Some("message"), Some(r)) => g.message(cx, o, r, &path)?,
            (Some("function_call" | "custom_tool_call"), _) => {
                if let Some(d) = g.assistant() {
                    let tpl = call_item(o, it, &mut d.msg);
                    push_item(d, tpl);
                }
            }
            (Some("local_shell_call"), _) if o.get("call_id").is_some_and(Value::is_string) => {
                // A call whose output comes back as an input item: modeled (so that its output
                // pairs), sent as it was.
                if let Some(d) = g.assistant() {
                    d.msg.tool_calls.push(ToolCall {
                        id: o.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string(),
                        kind: "local_shell".into(),
                        name: "local_shell".into(),
                        arguments: o.get("action").cloned().unwrap_or(Value::Null),
                    });
                    push_item(d, shape::call_as_sent(it));
                }
            }
            (Some(t), _) if MODEL_SIDE.contains(&t) => {
                if let Some(d) = g.assistant() {
                    push_item(d, lit(it.clone()));
                }
            }
            (Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output"), _)
                if o.get("call_id").is_some_and(Value::is_string) =>
            {
                g.open = false;
                let mut d = g.new_draft(Role::Tool);
                let tpl = text_item(cx, o, (&path, "output"), &mut d.msg)?;
                push_item(&mut d, tpl);
                g.drafts.push(d);
            }
            _ => g.verbatim(it),
        }
    }
    if !g.prefix.is_empty() {
        // Only unmodeled items: they travel in an empty user message.
        let d = g.new_draft(Role::User);
        g.drafts.push(d);
    }
    Ok(g.drafts)
}

fn content_parts(
    cx: &Cx<'_>,
    parts: &[Value],
    path: &str,
    msg: &mut Message,
) -> Result<Vec<Value>, CaptureError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.iter().enumerate() {
        let ppath = format!("{path}[{j}]");
        let po = cx.obj(p, &ppath)?;
        out.push(match (po.get("type").and_then(Value::as_str), po.get("text"), po.get("refusal")) {
            (Some("input_text" | "output_text" | "text"), Some(Value::String(t)), _) => {
                text_marker("text", without(po, &["text"]), t)
            }
            (Some("refusal"), _, Some(Value::String(r))) => {
                let mut rest = without(po, &["refusal"]);
                rest.insert("$k".into(), json!("refusal"));
                text_marker("text", rest, r)
            }
            (Some("input_image"), _, _) => match po.get("image_url").and_then(Value::as_str) {
                Some(url) => {
                    let img = crate::openai::image_from_url(url);
                    let rest = without(po, &["image_url"]);
                    let (tpl, img) = shape::image_slot(&Responses, rest, img, p);
                    msg.images.extend(img);
                    tpl
                }
                None => lit(p.clone()),
            },
            _ => lit(p.clone()),
        });
    }
    Ok(out)
}

/// A message item's (`key` = `content`) or a tool output item's (`key` = `output`) template: its
/// text field (a string, or content parts) modeled, and an output's `call_id`; every other field
/// kept verbatim, in order.
fn text_item(
    cx: &Cx<'_>,
    o: &Map<String, Value>,
    (path, key): (&str, &str),
    msg: &mut Message,
) -> Result<Value, CaptureError> {
    let mut t = Map::new();
    for (k, v) in o {
        let tv = match (k.as_str(), v) {
            ("call_id", Value::String(id)) if key == "output" => {
                msg.tool_call_id = Some(id.clone());
                Value::Object(shape::marker("id"))
            }
            (k, Value::String(s)) if k == key => text_marker("s", Map::new(), s),
            (k, Value::Array(parts)) if k == key => {
                Value::Array(content_parts(cx, parts, &format!("{path}.{key}"), msg)?)
            }
            _ => lit(v.clone()),
        };
        t.insert(k.clone(), tv);
    }
    Ok(Value::Object(t))
}

fn call_item(o: &Map<String, Value>, it: &Value, msg: &mut Message) -> Value {
    let custom = o.get("type").and_then(Value::as_str) == Some("custom_tool_call");
    let args_key = if custom { "input" } else { "arguments" };
    match (
        o.get("call_id").and_then(Value::as_str),
        o.get("name").and_then(Value::as_str),
        o.get(args_key).and_then(Value::as_str),
    ) {
        (Some(id), Some(name), Some(raw)) => {
            let (arguments, fmt) =
                if custom { (json!(raw), None) } else { shape::arguments_from_string(raw) };
            let call =
                ToolCall { id: id.to_string(), kind: "function".into(), name: name.to_string(), arguments };
            let mut rest = without(o, &["call_id", "name", args_key]);
            if let Some(f) = fmt {
                rest.insert("$fmt".into(), json!(f));
            }
            let tpl = if Responses.call(rest.clone(), &call) == *it {
                slot("call", rest)
            } else {
                shape::call_as_sent(it)
            };
            msg.tool_calls.push(call);
            tpl
        }
        _ => lit(it.clone()),
    }
}

/// The template a message without `wire` is built from (`null` for a system message: it goes to
/// `instructions`).
pub(crate) fn default_template(m: &Message) -> (Value, bool) {
    let t = match m.role {
        Role::System => Value::Null,
        Role::User if m.images.is_empty() => json!([{"role": "user", "content": {"$": "s"}}]),
        Role::User => {
            let mut parts = Vec::new();
            if !m.content.is_empty() {
                parts.push(json!({"$": "text", "type": "input_text"}));
            }
            parts.extend(m.images.iter().map(|_| json!({"$": "image", "type": "input_image"})));
            json!([{"role": "user", "content": parts}])
        }
        Role::Assistant => {
            let mut items = Vec::new();
            if !m.content.is_empty() || m.tool_calls.is_empty() {
                items.push(json!({"role": "assistant", "content": {"$": "s"}}));
            }
            items.extend(m.tool_calls.iter().map(|_| json!({"$": "call", "type": "function_call"})));
            Value::Array(items)
        }
        Role::Tool => {
            json!([{"type": "function_call_output", "call_id": {"$": "id"}, "output": {"$": "s"}}])
        }
    };
    (t, false)
}

fn place(v: &mut Value, f: &mut Fill<'_>, msg: &Message) {
    let calls: Vec<Value> = f.rest_calls().iter().map(|c| Responses.call(Map::new(), c)).collect();
    let text = f.leftover_text.take();
    let Value::Array(items) = v else { return };
    if let Some(t) = text {
        match msg.role {
            Role::Tool => {
                if let Some(o) = items
                    .iter_mut()
                    .find(|i| i.get("call_id").is_some() && i.get("output").is_none())
                    .and_then(Value::as_object_mut)
                {
                    o.insert("output".into(), json!(t));
                }
            }
            role => {
                let at = items.iter().position(|i| i.get("call_id").is_some()).unwrap_or(items.len());
                items.insert(at, json!({"role": role.as_str(), "content": t}));
            }
        }
    }
    items.extend(calls);
}

/// The Responses body for a history, with the request's other fields.
pub(crate) fn body(request: &Request, history: &[Message]) -> Value {
    let names = HashMap::new();
    let mut instructions: Vec<&str> = Vec::new();
    let mut input: Vec<Value> = Vec::new();
    let mut as_string: Option<String> = None;
    let non_system = history.iter().filter(|m| m.role != Role::System).count();
    for m in history {
        let template = match shape::template_of(m, F) {
            Some((t, _)) => t.clone(),
            None if m.role == Role::System => {
                instructions.push(&m.content);
                continue;
            }
            None => default_template(m).0,
        };
        let v = shape::build(&Responses, m, &template, &names, |v, f| place(v, f, m));
        match v {
            Value::Array(items) => input.extend(items),
            Value::String(s) if non_system == 1 => as_string = Some(s),
            Value::String(s) => input.push(json!({"role": "user", "content": s})),
            other => input.push(other),
        }
    }
    let mut out = request.fields.clone();
    if !instructions.is_empty() {
        out.insert("instructions".into(), json!(instructions.join("\n\n")));
    }
    out.insert("input".into(), as_string.map_or(Value::Array(input), Value::String));
    Value::Object(out)
}
