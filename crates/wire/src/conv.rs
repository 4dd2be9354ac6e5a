//! Shared by the formats whose body is a list of role-tagged messages with a list of blocks each
//! (Anthropic Messages, Bedrock Converse, Gemini `contents`): one provider message becomes one or
//! more salvage messages — each tool result its own `tool` message, each run of other blocks one
//! message — and the later ones *join* the first when the body is rebuilt.

use crate::shape::{finish, Draft};
use crate::{kind, Cx};
use salvage_types::capture::{CaptureError, Request, RequestFormat};
use salvage_types::message::{Message, Role};
use salvage_types::History;
use serde_json::{Map, Value};

/// Splits one provider message into drafts.
pub(crate) struct Runs {
    env: Map<String, Value>,
    role_only: Map<String, Value>,
    content_key: &'static str,
    role: Role,
    drafts: Vec<Draft>,
    cur: Option<Draft>,
}

impl Runs {
    /// `env` is the provider message without its block list; `role` the salvage role of its
    /// non-result blocks.
    pub fn new(env: Map<String, Value>, role_key: &str, content_key: &'static str, role: Role) -> Self {
        let mut role_only = Map::new();
        if let Some(r) = env.get(role_key) {
            role_only.insert(role_key.to_string(), r.clone());
        }
        Runs { env, role_only, content_key, role, drafts: Vec::new(), cur: None }
    }

    fn template(&self, blocks: Vec<Value>) -> Value {
        let mut t = if self.drafts.is_empty() && self.cur.is_none() {
            self.env.clone()
        } else {
            self.role_only.clone()
        };
        for v in t.values_mut() {
            *v = crate::shape::lit(std::mem::take(v));
        }
        t.insert(self.content_key.to_string(), Value::Array(blocks));
        Value::Object(t)
    }

    /// Adds a block template to the current run of non-result blocks; returns its message.
    pub fn block(&mut self, tpl: Value) -> &mut Message {
        if self.cur.is_none() {
            let join = !self.drafts.is_empty();
            let template = self.template(Vec::new());
            self.cur = Some(Draft { msg: Message::new(self.role, ""), template, join });
        }
        let d = self.cur.get_or_insert_with(|| Draft {
            msg: Message::new(Role::User, ""),
            template: Value::Null,
            join: false,
        });
        if let Some(Value::Array(blocks)) = d.template.get_mut(self.content_key) {
            blocks.push(tpl);
        }
        &mut d.msg
    }

    /// Adds a tool result: its own message, whose template holds its one block.
    pub fn result(&mut self, msg: Message, tpl: Value) {
        if let Some(d) = self.cur.take() {
            self.drafts.push(d);
        }
        let join = !self.drafts.is_empty();
        let template = self.template(vec![tpl]);
        self.drafts.push(Draft { msg, template, join });
    }

    /// The drafts, in order (one empty message when the block list was empty).
    pub fn finish(mut self) -> Vec<Draft> {
        if let Some(d) = self.cur.take() {
            self.drafts.push(d);
        }
        if self.drafts.is_empty() {
            let template = self.template(Vec::new());
            self.drafts.push(Draft { msg: Message::new(self.role, ""), template, join: false });
        }
        self.drafts
    }
}

/// Appends a rebuilt provider message, merging it into the previous one when `join` holds and
/// both have the same role and a block list.
pub(crate) fn push(out: &mut Vec<Value>, v: Value, join: bool, role_key: &str, content_key: &str) {
    if join {
        if let Some(last) = out.last_mut() {
            if last.get(role_key) == v.get(role_key) && last.get(content_key).is_some_and(Value::is_array) {
                if let (Some(Value::Array(add)), Some(Value::Array(blocks))) =
                    (v.get(content_key).cloned(), last.get_mut(content_key))
                {
                    blocks.extend(add);
                    return;
                }
            }
        }
    }
    out.push(v);
}

/// True when every block of the last message satisfies `is_result` (and it has at least one).
pub(crate) fn last_is_results(out: &[Value], content_key: &str, is_result: impl Fn(&Value) -> bool) -> bool {
    out.last()
        .and_then(|m| m.get(content_key))
        .and_then(Value::as_array)
        .is_some_and(|b| !b.is_empty() && b.iter().all(is_result))
}

/// An object's fields without `skip`.
pub(crate) fn without(o: &Map<String, Value>, skip: &[&str]) -> Map<String, Value> {
    o.iter().filter(|(k, _)| !skip.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The body's message list `key` (`missing`: what the error says when it is absent), each item
/// read into drafts by `read(item, path)` and finished in `format`.
pub(crate) fn message_list(
    cx: &Cx<'_>,
    top: &Map<String, Value>,
    (key, missing): (&str, &str),
    mut read: impl FnMut(&Value, &str) -> Result<Vec<Draft>, CaptureError>,
    format: RequestFormat,
    default: fn(&Message) -> (Value, bool),
) -> Result<Vec<Message>, CaptureError> {
    let list = top.get(key).ok_or_else(|| cx.err(key, missing))?;
    let mut out = Vec::new();
    for (i, m) in cx.arr(list, key)?.iter().enumerate() {
        for d in read(m, &format!("{key}[{i}]"))? {
            out.push(finish(d, format, default));
        }
    }
    Ok(out)
}

/// How a message of a body is read into drafts.
pub(crate) type ReadMessage = fn(&Cx<'_>, &Value, &str) -> Result<Vec<Draft>, CaptureError>;
/// How a `system` array of blocks is read into a system message.
pub(crate) type ReadSystem = fn(&Cx<'_>, &[Value]) -> Result<Message, CaptureError>;

/// A body whose `system` field stands beside its `messages` list (Anthropic Messages, Bedrock
/// Converse).
pub(crate) struct SystemBeside {
    format: RequestFormat,
    missing: &'static str,
    text: bool,
}

impl SystemBeside {
    /// A body of `format`; `missing` is what the error says when `messages` is missing, `text`
    /// whether `system` may be a plain string besides an array of blocks.
    pub(crate) const fn new(format: RequestFormat, missing: &'static str, text: bool) -> Self {
        SystemBeside { format, missing, text }
    }

    /// The body's top level, its history (the system message first, when `system` has one) and
    /// the request besides it. An absent, null or empty `system` is no message; an array of
    /// blocks is read by `system`; a string is a plain system message where the format allows
    /// one; anything else is an error naming the field. Each message is read by `message` (see
    /// [`message_list`]).
    pub(crate) fn read<'b>(
        &self,
        (cx, body): (&Cx<'_>, &'b Value),
        system: ReadSystem,
        message: ReadMessage,
        default: fn(&Message) -> (Value, bool),
    ) -> Result<(&'b Map<String, Value>, History, Request), CaptureError> {
        let top = cx.obj(body, "(top level)")?;
        let first = match top.get("system") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if self.text => (!s.is_empty()).then(|| Message::system(s.clone())),
            Some(Value::Array(blocks)) => (!blocks.is_empty()).then(|| system(cx, blocks)).transpose()?,
            Some(v) => {
                let expected =
                    if self.text { "a string or an array of blocks" } else { "an array of blocks" };
                return Err(cx.err("system", format!("expected {expected}, found {}", kind(v))));
            }
        };
        let mut modeled = vec!["messages"];
        let mut history: History = first.into_iter().collect();
        if !history.is_empty() {
            modeled.push("system");
        }
        let list = top.get("messages").ok_or_else(|| cx.err("messages", self.missing))?;
        let reader =
            crate::par_list::Reader { cx, key: "messages", read: message, format: self.format, default };
        history.extend(crate::par_list::messages(&reader, cx.arr(list, "messages")?)?);
        Ok((top, history, request_of(self.format, top, &modeled)))
    }
}

/// The request as sent besides its messages: its format and the top-level fields not
/// `modeled`. Its `bytes`, the body's size, is counted by [`crate::import_value`] (beside the
/// import, on another thread, for a large body).
pub(crate) fn request_of(format: RequestFormat, top: &Map<String, Value>, modeled: &[&str]) -> Request {
    Request { format, bytes: None, fields: without(top, modeled) }
}

/// A message's `role` where the format knows only user and assistant messages.
pub(crate) fn user_or_assistant(
    cx: &Cx<'_>,
    o: &Map<String, Value>,
    path: &str,
) -> Result<Role, CaptureError> {
    match cx.req_str(o, "role", path)? {
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        other => {
            Err(cx
                .err(&format!("{path}.role"), format!("unknown role {other:?}, expected user or assistant")))
        }
    }
}

/// Places what had no slot in a block list: the leftover text first, then the images, then the
/// calls.
pub(crate) fn place_rest(blocks: &mut Vec<Value>, text: Option<&str>, images: Vec<Value>, calls: Vec<Value>) {
    if let Some(t) = text {
        blocks.insert(0, serde_json::json!({"text": t}));
    }
    blocks.extend(images);
    blocks.extend(calls);
}
