//! Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`, one
//! `{"timestamp", "type", "payload"}` record per line.
//!
//! `response_item` records are the model-visible history (OpenAI Responses items); they are
//! replayed in order. A run of model items (`reasoning`, an assistant `message`, function and
//! custom tool calls, web searches…) is one assistant response; a run of input items (user,
//! developer and system messages, tool outputs) is one input step, and each real user prompt
//! starts its own. `reasoning` with its `encrypted_content` and every item the message model has
//! no field for is carried verbatim in the response's `wire`. A `compacted` record replaces the
//! history with its `replacement_history`; an older record without one is rebuilt the way Codex
//! rebuilds it (the real user messages, then the summary as a user message) and marked
//! approximate, since Codex also caps the kept user messages by tokens. `event_msg` records
//! duplicate the history for the UI and are counted, not replayed, except `thread_rolled_back`,
//! which drops the newest user turns. `session_meta` and `turn_context` give the session id,
//! the provider and the model.
//!
//! The older layout (a first line `{id, timestamp}`, then bare response items) is read too.

use crate::session::{line_id, lines, parse_line, Disposition, Opaque, Report, Session};
use crate::{split_data_url, Cx};
use salvage_types::capture::{check_utf8, CaptureError, RequestFormat};
use salvage_types::message::{Image, Message, Role, ToolCall};
use salvage_types::timeline::{Change, Step};
use salvage_types::History;
use serde_json::{json, Map, Value};

/// Text prefixes of the user-role messages Codex injects as context (instructions, environment,
/// skills, shell commands, aborted-turn markers): not user turns.
const CONTEXTUAL_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<skills_instructions>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
];

/// Tool-call arguments given as a JSON string: parsed, or kept as the string when not JSON.
fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    if !crate::within_value_budget(text) {
        return Value::String(text.to_string());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// True for a user message the user typed (not injected context).
fn is_user_turn(m: &Message) -> bool {
    m.role == Role::User
        && !m.meta.is_summary
        && m.tool_call_id.is_none()
        && !CONTEXTUAL_PREFIXES.iter().any(|p| m.content.trim_start().starts_with(p))
}

pub(crate) fn read(cx: &Cx<'_>, bytes: &[u8]) -> Result<Session, CaptureError> {
    let text = check_utf8(bytes, cx.file)?;
    let mut r =
        Reader { report: Report::default(), steps: Vec::new(), history: History::new(), acc: Acc::None };
    let mut session = Session {
        format: RequestFormat::Codex,
        id: None,
        client: "codex",
        model: None,
        provider: None,
        steps: Vec::new(),
        sidechains: Vec::new(),
        fields: Map::new(),
        report: Report::default(),
        errors: Vec::new(),
    };
    let all: Vec<(usize, &str)> = lines(text).collect();
    for (k, (line, t)) in all.iter().enumerate() {
        let Some(o) = parse_line(cx, *line, t, k + 1 == all.len(), &mut r.report)? else { continue };
        let id = line_id(*line, t);
        let ts = o.get("timestamp").and_then(Value::as_str).map(str::to_string);
        let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
        match (kind, o.get("payload")) {
            ("session_meta", Some(p)) => {
                session.id = p.get("id").and_then(Value::as_str).map(str::to_string).or(session.id);
                if let Some(prov) = p.get("model_provider").and_then(Value::as_str) {
                    session.provider = Some(prov.to_string());
                }
                if let Some(text) =
                    p.get("base_instructions").and_then(|b| b.get("text")).and_then(Value::as_str)
                {
                    session.fields.insert("instructions".into(), json!(text));
                }
                r.report.count(
                    "record:session_meta",
                    Disposition::Skipped(
                        "session metadata (id, provider, instructions) read; not a history item".into(),
                    ),
                );
            }
            ("turn_context", Some(p)) => {
                if let Some(m) = p.get("model").and_then(Value::as_str) {
                    session.model = Some(m.to_string());
                }
                r.report.count(
                    "record:turn_context",
                    Disposition::Skipped("per-turn settings (model read); not a history item".into()),
                );
            }
            ("response_item", Some(Value::Object(p))) => r.item(p, &id, ts, false),
            ("compacted", Some(Value::Object(p))) => r.compacted(p, id, ts),
            ("event_msg", Some(p)) => {
                let ev = p.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                if ev == "thread_rolled_back" {
                    let turns = p.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
                    r.rollback(turns, id, ts);
                } else {
                    r.report.count(
                        &format!("record:event_msg/{ev}"),
                        Disposition::Skipped("UI event: the history is in the response_item records".into()),
                    );
                }
            }
            ("", None) if k == 0 && o.contains_key("id") => {
                session.id = o.get("id").and_then(Value::as_str).map(str::to_string);
                r.report.count(
                    "record:(legacy header)",
                    Disposition::Skipped("session header of the older layout (id read)".into()),
                );
            }
            (t, None) if is_item_type(t) => r.item(&o, &id, ts, true),
            (other, _) => {
                let name = if other.is_empty() { "(untyped)" } else { other };
                r.report.count(
                    &format!("record:{name}"),
                    Disposition::Skipped(format!(
                        "record type {name:?} is not a rollout item this build reads"
                    )),
                );
            }
        }
    }
    r.flush();
    if r.steps.is_empty() {
        return Err(cx.err("(top level)", "no response_item or compacted records: nothing to import"));
    }
    session.provider = session.provider.or_else(|| Some("openai".into()));
    session.steps = r.steps;
    session.report = r.report;
    Ok(session)
}

/// Response item types of the older layout, where items are written bare.
fn is_item_type(t: &str) -> bool {
    matches!(
        t,
        "message"
            | "reasoning"
            | "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "web_search_call"
    )
}

/// A response being gathered from consecutive model items.
struct Response {
    msg: Message,
    texts: Vec<String>,
    opaque: Opaque,
    pos: usize,
    id: String,
    ts: Option<String>,
}

enum Acc {
    None,
    Input { messages: History, id: String, ts: Option<String> },
    Response(Box<Response>),
}

struct Reader {
    report: Report,
    steps: Vec<Step>,
    /// The history so far (for rollbacks and rebuilt compactions).
    history: History,
    acc: Acc,
}

impl Reader {
    fn push(&mut self, step: Step) {
        step.apply(&mut self.history);
        self.steps.push(step);
    }

    fn flush(&mut self) {
        match std::mem::replace(&mut self.acc, Acc::None) {
            Acc::None => {}
            Acc::Input { messages, id, ts } => {
                if !messages.is_empty() {
                    self.push(Step { id, ts, change: Change::Input(messages) });
                }
            }
            Acc::Response(r) => {
                let Response { mut msg, texts, opaque, id, ts, .. } = *r;
                msg.content = texts.join("\n");
                msg.wire = opaque.into_wire();
                self.push(Step {
                    id,
                    ts,
                    change: Change::Response { messages: vec![msg], stop_reason: None, output_tokens: None },
                });
            }
        }
    }

    /// Adds a model-side item to the current response.
    fn model_part(
        &mut self,
        id: &str,
        ts: Option<String>,
        f: impl FnOnce(&mut Message, &mut Vec<String>, &mut Opaque, usize),
    ) {
        if !matches!(self.acc, Acc::Response(_)) {
            self.flush();
            self.acc = Acc::Response(Box::new(Response {
                msg: Message::assistant(""),
                texts: Vec::new(),
                opaque: Opaque::default(),
                pos: 0,
                id: String::new(),
                ts: None,
            }));
        }
        if let Acc::Response(r) = &mut self.acc {
            f(&mut r.msg, &mut r.texts, &mut r.opaque, r.pos);
            r.pos += 1;
            r.id = id.to_string();
            r.ts = ts;
        }
    }

    /// Adds an input message; a real user prompt starts a new input step.
    fn input(&mut self, m: Message, id: &str, ts: Option<String>) {
        let new_turn = is_user_turn(&m);
        if new_turn || !matches!(self.acc, Acc::Input { .. }) {
            self.flush();
            self.acc = Acc::Input { messages: Vec::new(), id: String::new(), ts: ts.clone() };
        }
        if let Acc::Input { messages, id: gid, .. } = &mut self.acc {
            messages.push(m);
            *gid = id.to_string();
        }
    }

    /// One response item (`bare` for the older layout).
    fn item(&mut self, p: &Map<String, Value>, id: &str, ts: Option<String>, bare: bool) {
        let t = p.get("type").and_then(Value::as_str).unwrap_or("(untyped)").to_string();
        let kind = if bare { format!("record:{t} (bare item)") } else { format!("record:response_item/{t}") };
        match t.as_str() {
            "message" => {
                let role = p.get("role").and_then(Value::as_str).unwrap_or("user").to_string();
                if role == "assistant" {
                    let parts = p.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
                    let mut counts: Vec<(String, Disposition)> = Vec::new();
                    self.model_part(id, ts, |_, texts, opaque, pos| {
                        let mut kept_other = false;
                        for part in &parts {
                            let pt = part.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                            if pt == "output_text" || pt == "input_text" || pt == "text" {
                                texts.push(
                                    part.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                                );
                                counts.push((format!("block:{pt}"), Disposition::History));
                            } else {
                                kept_other = true;
                                counts.push((format!("block:{pt}"), Disposition::Opaque));
                            }
                        }
                        // Fields beyond role/content (phase, end_turn, id) and non-text parts:
                        // the item's shape, carried without its modeled text.
                        let mut rest = p.clone();
                        if !kept_other {
                            rest.remove("content");
                        } else if let Some(Value::Array(c)) = rest.get_mut("content") {
                            c.retain(|part| {
                                !matches!(
                                    part.get("type").and_then(Value::as_str),
                                    Some("output_text" | "input_text" | "text")
                                )
                            });
                        }
                        rest.remove("role");
                        if rest.len() > 1 {
                            opaque.push(pos, Value::Object(rest));
                        }
                    });
                    for (k, d) in counts {
                        self.report.count(&k, d);
                    }
                    self.report.count(&kind, Disposition::History);
                    return;
                }
                let mut m = Message::new(if role == "user" { Role::User } else { Role::System }, "");
                let mut texts = Vec::new();
                let mut opaque = Opaque::default();
                for (n, part) in p.get("content").and_then(Value::as_array).into_iter().flatten().enumerate()
                {
                    let pt = part.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                    match pt {
                        "input_text" | "output_text" | "text" => {
                            texts.push(
                                part.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                            );
                            self.report.count(&format!("block:{pt}"), Disposition::History);
                        }
                        "input_image" => match part.get("image_url").and_then(Value::as_str) {
                            Some(url) => {
                                m.images.push(match split_data_url(url) {
                                    Some((media, data)) => {
                                        Image { media_type: Some(media), data: Some(data), url: None }
                                    }
                                    None => {
                                        Image { media_type: None, data: None, url: Some(url.to_string()) }
                                    }
                                });
                                self.report.count("block:input_image", Disposition::History);
                            }
                            None => {
                                opaque.push(n, part.clone());
                                self.report.count("block:input_image", Disposition::Opaque);
                            }
                        },
                        other => {
                            opaque.push(n, part.clone());
                            self.report.count(&format!("block:{other}"), Disposition::Opaque);
                        }
                    }
                }
                m.content = texts.join("\n");
                let mut wire = opaque.into_wire();
                if role != "user" && role != "system" {
                    let mut w = wire.take().unwrap_or_else(|| json!({}));
                    if let Some(o) = w.as_object_mut() {
                        o.insert("role".into(), json!(role));
                    }
                    wire = Some(w);
                }
                m.wire = wire;
                self.report.count(&kind, Disposition::History);
                self.input(m, id, ts);
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call_id = p
                    .get("call_id")
                    .or_else(|| p.get("id"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let call = match t.as_str() {
                    "function_call" => ToolCall {
                        id: call_id,
                        kind: "function".into(),
                        name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        arguments: match p.get("arguments") {
                            Some(Value::String(s)) => parse_arguments(s),
                            Some(v) => v.clone(),
                            None => Value::Object(Map::new()),
                        },
                    },
                    "custom_tool_call" => ToolCall {
                        id: call_id,
                        kind: "custom".into(),
                        name: p.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        arguments: p.get("input").cloned().unwrap_or(Value::String(String::new())),
                    },
                    _ => ToolCall {
                        id: call_id,
                        kind: "local_shell".into(),
                        name: "local_shell".into(),
                        arguments: p.get("action").cloned().unwrap_or(Value::Null),
                    },
                };
                // Fields the call model has no place for (namespace, status) ride along.
                let mut rest = p.clone();
                for k in ["type", "call_id", "name", "arguments", "input", "action", "id"] {
                    rest.remove(k);
                }
                self.model_part(id, ts, |msg, _, opaque, pos| {
                    msg.tool_calls.push(call);
                    if !rest.is_empty() {
                        rest.insert("type".into(), json!(format!("{t}.fields")));
                        opaque.push(pos, Value::Object(rest));
                    }
                });
                self.report.count(&kind, Disposition::History);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or_default();
                let mut m = Message::tool(call_id, "");
                let mut opaque = Opaque::default();
                match p.get("output") {
                    Some(Value::String(s)) => m.content = s.clone(),
                    Some(Value::Array(items)) => {
                        let mut texts = Vec::new();
                        for (n, it) in items.iter().enumerate() {
                            let pt = it.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                            if matches!(pt, "input_text" | "output_text" | "text") {
                                texts.push(
                                    it.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                                );
                                self.report.count(&format!("block:output.{pt}"), Disposition::History);
                            } else {
                                opaque.push(n, it.clone());
                                self.report.count(&format!("block:output.{pt}"), Disposition::Opaque);
                            }
                        }
                        m.content = texts.join("\n");
                    }
                    Some(Value::Object(o)) => {
                        m.content = o.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
                        m.is_error = o.get("success").and_then(Value::as_bool) == Some(false);
                    }
                    _ => {}
                }
                m.wire = opaque.into_wire();
                self.report.count(&kind, Disposition::History);
                self.input(m, id, ts);
            }
            "ghost_snapshot" => {
                self.report.count(
                    &kind,
                    Disposition::Skipped("git snapshot for /undo, not sent to the model".into()),
                );
            }
            _ => {
                // reasoning (encrypted_content), web_search_call, compaction, image generation,
                // tool search and any item this build does not model: verbatim, in order.
                let item = Value::Object(p.clone());
                self.model_part(id, ts, |_, _, opaque, pos| opaque.push(pos, item));
                self.report.count(&kind, Disposition::Opaque);
            }
        }
    }

    fn compacted(&mut self, p: &Map<String, Value>, id: String, ts: Option<String>) {
        self.flush();
        let summary = p.get("message").and_then(Value::as_str).unwrap_or_default().to_string();
        let (history, exact) = match p.get("replacement_history").and_then(Value::as_array) {
            Some(items) => {
                let mut sub = Reader {
                    report: Report::default(),
                    steps: Vec::new(),
                    history: History::new(),
                    acc: Acc::None,
                };
                for it in items {
                    if let Value::Object(o) = it {
                        sub.item(o, &id, ts.clone(), false);
                    }
                }
                sub.flush();
                for (k, t) in sub.report.kinds {
                    let k = k.replacen("record:", "record:replacement_history/", 1);
                    for _ in 0..t.history {
                        self.report.count(&k, Disposition::History);
                    }
                    for _ in 0..t.opaque {
                        self.report.count(&k, Disposition::Opaque);
                    }
                    for (reason, n) in t.skipped {
                        for _ in 0..n {
                            self.report.count(&k, Disposition::Skipped(reason.clone()));
                        }
                    }
                }
                let mut h = sub.history;
                if !summary.is_empty() {
                    if let Some(m) =
                        h.iter_mut().rev().find(|m| m.role == Role::User && m.content.contains(&summary))
                    {
                        m.meta.is_summary = true;
                    }
                }
                (h, true)
            }
            None => {
                self.report.note(
                    "a compacted record without replacement_history: the post-compaction history is rebuilt as the real user messages then the summary (approximate: Codex also caps the kept user messages by tokens)",
                );
                let mut h: History = self.history.iter().filter(|m| is_user_turn(m)).cloned().collect();
                let mut s = Message::user(summary);
                s.meta.is_summary = true;
                h.push(s);
                (h, false)
            }
        };
        self.report.count("record:compacted", Disposition::History);
        self.push(Step {
            id,
            ts,
            change: Change::Compaction { trigger: None, pre_tokens: None, history, exact },
        });
    }

    fn rollback(&mut self, turns: u64, id: String, ts: Option<String>) {
        self.flush();
        let starts: Vec<usize> =
            self.history.iter().enumerate().filter(|(_, m)| is_user_turn(m)).map(|(i, _)| i).collect();
        let n = usize::try_from(turns).unwrap_or(usize::MAX);
        let cut = if n == 0 {
            self.history.len()
        } else if n >= starts.len() {
            starts.first().copied().unwrap_or(self.history.len())
        } else {
            starts[starts.len() - n]
        };
        let history: History = self.history[..cut].to_vec();
        self.report.count("record:event_msg/thread_rolled_back", Disposition::History);
        self.push(Step { id, ts, change: Change::Rollback { turns, history } });
    }
}
