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

use crate::session::{line_id, lines, note_joined, parse_line, Disposition, Report, Session};
use crate::{responses, shape, Cx};
use salvage_types::capture::{check_utf8, CaptureError, RequestFormat};
use salvage_types::message::{Message, Role};
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

/// The format of the messages' `wire` templates: the API Codex sends.
const F: RequestFormat = RequestFormat::OpenaiResponses;

/// A message item of one plain text part in the equivalent string form (`{"role", "content":
/// "…"}`, the same message to the API), so that a plain message needs no template; any other
/// item as it is.
fn plain(p: &Map<String, Value>) -> Value {
    let role = p.get("role").and_then(Value::as_str);
    let only_keys = p.keys().all(|k| matches!(k.as_str(), "type" | "role" | "content"));
    if let (Some("message"), Some(role), true, Some(Value::Array(parts))) =
        (p.get("type").and_then(Value::as_str), role, only_keys, p.get("content"))
    {
        if let [part] = parts.as_slice() {
            let want = if role == "assistant" { "output_text" } else { "input_text" };
            let is_plain = part
                .as_object()
                .is_some_and(|o| o.len() == 2 && o.get("type").and_then(Value::as_str) == Some(want));
            if let (true, Some(text @ Value::String(_))) = (is_plain, part.get("text")) {
                return json!({"role": role, "content": text});
            }
        }
    }
    Value::Object(p.clone())
}

/// A tool output item as Codex sends it: an output recorded as `{content, success}` (older
/// rollouts) goes on the wire as its content string; the second value is `success == false`.
fn as_sent(p: &Map<String, Value>) -> (Value, bool) {
    let mut item = p.clone();
    let mut failed = false;
    if let Some(Value::Object(o)) = p.get("output") {
        failed = o.get("success").and_then(Value::as_bool) == Some(false);
        let text = o.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
        item.insert("output".into(), Value::String(text));
    }
    (Value::Object(item), failed)
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
    let mut r = Reader::new(cx);
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
    note_joined(&all, &mut r.report);
    for (k, (line, t)) in all.iter().enumerate() {
        let Some(o) = parse_line(cx, *line, t, k.saturating_add(1) == all.len(), &mut r.report)? else {
            continue;
        };
        let id = line_id(*line, t);
        let ts = o.get("timestamp").and_then(Value::as_str).map(str::to_string);
        let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
        match (kind, o.get("payload")) {
            ("session_meta", Some(p)) => session_meta(&mut session, p, &mut r.report),
            ("turn_context", Some(p)) => {
                if let Some(m) = p.get("model").and_then(Value::as_str) {
                    session.model = Some(m.to_string());
                }
                r.report.count(
                    "record:turn_context",
                    Disposition::Skipped("per-turn settings (model read); not a history item".into()),
                );
            }
            ("response_item", Some(Value::Object(p))) => {
                r.item(p, &id, ts, false, format!("line {line}.payload"))
            }
            ("compacted", Some(Value::Object(p))) => r.compacted(p, id, ts, &format!("line {line}.payload")),
            ("event_msg", Some(p)) => r.event_msg(p, id, ts),
            ("", None) if k == 0 && o.contains_key("id") => {
                session.id = o.get("id").and_then(Value::as_str).map(str::to_string);
                r.report.count(
                    "record:(legacy header)",
                    Disposition::Skipped("session header of the older layout (id read)".into()),
                );
            }
            (t, None) if is_item_type(t) => r.item(&o, &id, ts, true, format!("line {line}")),
            (other, _) => {
                let name = if other.is_empty() { "(untyped)" } else { other };
                let why = format!("record type {name:?} is not a rollout item this build reads");
                r.report.count(&format!("record:{name}"), Disposition::Skipped(why));
            }
        }
    }
    r.flush();
    if let Some(e) = r.error.take() {
        return Err(e);
    }
    if r.steps.is_empty() {
        return Err(cx.err("(top level)", "no response_item or compacted records: nothing to import"));
    }
    session.provider = session.provider.or_else(|| Some("openai".into()));
    session.steps = r.steps;
    session.report = r.report;
    Ok(session)
}

/// A `session_meta` record: the session id, the provider and the base instructions.
fn session_meta(session: &mut Session, p: &Value, report: &mut Report) {
    session.id = p.get("id").and_then(Value::as_str).map(str::to_string).or(session.id.take());
    if let Some(prov) = p.get("model_provider").and_then(Value::as_str) {
        session.provider = Some(prov.to_string());
    }
    if let Some(text) = p.get("base_instructions").and_then(|b| b.get("text")).and_then(Value::as_str) {
        session.fields.insert("instructions".into(), json!(text));
    }
    report.count(
        "record:session_meta",
        Disposition::Skipped("session metadata (id, provider, instructions) read; not a history item".into()),
    );
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

/// A response being gathered from consecutive model items: the items as the client sends them
/// back, with the paths that name them in errors.
struct Response {
    items: Vec<Value>,
    paths: Vec<String>,
    id: String,
    ts: Option<String>,
}

enum Acc {
    None,
    Input { messages: History, id: String, ts: Option<String> },
    Response(Box<Response>),
}

struct Reader<'a> {
    cx: &'a Cx<'a>,
    /// The first item the Responses reader refused (the read fails with it).
    error: Option<CaptureError>,
    report: Report,
    steps: Vec<Step>,
    /// The history so far (for rollbacks and rebuilt compactions).
    history: History,
    acc: Acc,
}

impl<'a> Reader<'a> {
    fn new(cx: &'a Cx<'a>) -> Self {
        Reader {
            cx,
            error: None,
            report: Report::default(),
            steps: Vec::new(),
            history: History::new(),
            acc: Acc::None,
        }
    }

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
                let Response { items, paths, id, ts } = *r;
                let mut messages = self.convert(&items, &paths);
                for m in &mut messages {
                    // Model-side items the Responses reader does not group into a turn (a
                    // `compaction`) travel in a message of their own: the model's.
                    if m.role == Role::User {
                        m.role = Role::Assistant;
                    }
                }
                if !messages.is_empty() {
                    self.push(Step {
                        id,
                        ts,
                        change: Change::Response { messages, stop_reason: None, output_tokens: None },
                    });
                }
            }
        }
    }

    /// Response items read as the Responses reader reads a body's `input` (one convention for
    /// what the message model cannot hold: the items' `wire` templates), their message parts
    /// and tool-output parts counted by what became of them.
    fn convert(&mut self, items: &[Value], paths: &[String]) -> History {
        let path_of = |i: usize| paths.get(i).cloned().unwrap_or_default();
        let drafts = match responses::items_to_drafts(self.cx, items, &path_of) {
            Ok(d) => d,
            Err(e) => {
                self.error.get_or_insert(e);
                return History::new();
            }
        };
        let templates: Vec<&Value> = drafts.iter().filter_map(|d| d.template.as_array()).flatten().collect();
        for (item, t) in items.iter().zip(templates) {
            self.count_parts(item, t);
        }
        drafts.into_iter().map(|d| shape::finish(d, F, responses::default_template)).collect()
    }

    /// Counts a message's content parts (`block:TYPE`) or a tool output's parts
    /// (`block:output.TYPE`): a slot is modeled, a verbatim copy carried opaquely.
    fn count_parts(&mut self, item: &Value, t: &Value) {
        let (key, prefix) = match item.get("type").and_then(Value::as_str) {
            Some("message") | None => ("content", "block:"),
            Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output") => {
                ("output", "block:output.")
            }
            Some(_) => return,
        };
        match (item.get(key), t.get(key)) {
            (Some(Value::String(_)), _) if key == "content" => {
                // A plain message read in its string form (see [`plain`]) counts as its part.
                let kind = match (item.get("type"), item.get("role").and_then(Value::as_str)) {
                    (Some(_), _) => "block:text",
                    (None, Some("assistant")) => "block:output_text",
                    (None, _) => "block:input_text",
                };
                self.report.count(kind, Disposition::History)
            }
            (Some(Value::Array(parts)), Some(Value::Array(tpls))) => {
                for (part, tp) in parts.iter().zip(tpls) {
                    let pt = part.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                    let d = if shape::is_slot(tp) { Disposition::History } else { Disposition::Opaque };
                    self.report.count(&format!("{prefix}{pt}"), d);
                }
            }
            _ => {}
        }
    }

    /// Adds a model-side item to the current response.
    fn model_item(&mut self, id: &str, ts: Option<String>, item: Value, path: String) {
        if !matches!(self.acc, Acc::Response(_)) {
            self.flush();
            self.acc = Acc::Response(Box::new(Response {
                items: Vec::new(),
                paths: Vec::new(),
                id: String::new(),
                ts: None,
            }));
        }
        if let Acc::Response(r) = &mut self.acc {
            r.items.push(item);
            r.paths.push(path);
            r.id = id.to_string();
            r.ts = ts;
        }
    }

    /// Adds an input item (a message or a tool output); a real user prompt starts a new input
    /// step.
    fn input_item(&mut self, item: Value, path: String, id: &str, ts: Option<String>) {
        for m in self.convert(std::slice::from_ref(&item), std::slice::from_ref(&path)) {
            self.input(m, id, ts.clone());
        }
    }

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

    /// One response item (`bare` for the older layout); `path` names it in errors.
    fn item(&mut self, p: &Map<String, Value>, id: &str, ts: Option<String>, bare: bool, path: String) {
        let t = p.get("type").and_then(Value::as_str).unwrap_or("(untyped)").to_string();
        let kind = if bare { format!("record:{t} (bare item)") } else { format!("record:response_item/{t}") };
        let item = plain(p);
        match t.as_str() {
            "message" if p.get("role").and_then(Value::as_str) == Some("assistant") => {
                self.model_item(id, ts, item, path);
                self.report.count(&kind, Disposition::History);
            }
            "message" => {
                self.input_item(item, path, id, ts);
                self.report.count(&kind, Disposition::History);
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                self.model_item(id, ts, item, path);
                self.report.count(&kind, Disposition::History);
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let (item, failed) = as_sent(p);
                let call_id = p.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                for mut m in self.convert(std::slice::from_ref(&item), std::slice::from_ref(&path)) {
                    if m.tool_call_id.as_deref() == Some(call_id.as_str()) {
                        m.is_error |= failed;
                    }
                    self.input(m, id, ts.clone());
                }
                self.report.count(&kind, Disposition::History);
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
                self.model_item(id, ts, item, path);
                self.report.count(&kind, Disposition::Opaque);
            }
        }
    }

    fn compacted(&mut self, p: &Map<String, Value>, id: String, ts: Option<String>, path: &str) {
        self.flush();
        let summary = p.get("message").and_then(Value::as_str).unwrap_or_default().to_string();
        let (history, exact) = match p.get("replacement_history").and_then(Value::as_array) {
            Some(items) => {
                let mut sub = Reader::new(self.cx);
                for (n, it) in items.iter().enumerate() {
                    if let Value::Object(o) = it {
                        sub.item(o, &id, ts.clone(), false, format!("{path}.replacement_history[{n}]"));
                    }
                }
                sub.flush();
                if let Some(e) = sub.error.take() {
                    self.error.get_or_insert(e);
                }
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

    /// An `event_msg` record: a rollback is replayed, any other UI event counted.
    fn event_msg(&mut self, p: &Value, id: String, ts: Option<String>) {
        let ev = p.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
        if ev == "thread_rolled_back" {
            let turns = p.get("num_turns").and_then(Value::as_u64).unwrap_or(0);
            self.rollback(turns, id, ts);
        } else {
            self.report.count(
                &format!("record:event_msg/{ev}"),
                Disposition::Skipped("UI event: the history is in the response_item records".into()),
            );
        }
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
            starts.get(starts.len().saturating_sub(n)).copied().unwrap_or(self.history.len())
        };
        let history: History = self.history.get(..cut).unwrap_or(&self.history).to_vec();
        self.report.count("record:event_msg/thread_rolled_back", Disposition::History);
        self.push(Step { id, ts, change: Change::Rollback { turns, history } });
    }
}
