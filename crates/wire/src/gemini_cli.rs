//! Gemini CLI session files: the chat record `~/.gemini/tmp/<project>/chats/session-*.json[l]`
//! and the `/chat save` checkpoints `checkpoint-<tag>.json` beside them.
//!
//! Read from the CLI's writer and reader (`packages/core/src/services/chatRecordingService.ts`,
//! `chatRecordingTypes.ts` and `utils/sessionUtils.ts` of google-gemini/gemini-cli) and from files
//! its releases 0.38.2 and 0.61.0 wrote (`testdata/samples/gemini-cli/`, provenance in
//! `testdata/samples/README.md`).
//!
//! - **The record, up to v0.38**: one JSON document `{sessionId, projectHash, startTime,
//!   lastUpdated, messages, …}`, rewritten on every change.
//! - **The record, v0.39 on**: JSON Lines, replayed as the CLI replays them: a line with an `id` is
//!   a message (a later line with the same id replaces it in place), `{"$set": {"messages": […]}}`
//!   rebuilds the list (resume, compression, masking), `{"$rewindTo": id}` drops that message and
//!   every later one, a line with `sessionId` and `projectHash` is the header. A line that is not
//!   JSON is skipped, as the CLI skips it, and said.
//! - **A message** is `{id, timestamp, type: user | gemini | info | error | warning, content}`;
//!   `content` is a string, a part or a list of parts. A `gemini` message may carry `toolCalls`
//!   (`{id, name, args, result, status, …}`), `thoughts`, `tokens` and `model`.
//!
//! The history is what the CLI sends, built as its `convertSessionToClientHistory` builds it on
//! resume, in Gemini `contents` read by the Gemini body reader:
//! - `info`, `warning` and `error` messages are the CLI's UI and are never sent; an `error` is
//!   kept as the failure the client saw. Slash commands (`/…`, `?…`) are not sent either.
//! - A `gemini` message whose content holds function calls is sent as it is; otherwise its text
//!   and then a `functionCall` for each of its `toolCalls`. Its tool results follow as a user turn
//!   of `functionResponse` parts (a string result as `{output}`).
//! - Thought parts and thought summaries are not sent: the CLI strips them for Gemini 2 and later.
//! - Since v0.44 the CLI also records each tool response as a `user` message, and its own resume
//!   then sends every result twice. Here a result is sent once: a `functionResponse` whose call id
//!   was already answered is dropped, and counted as such.
//!
//! A `$set.messages` that drops messages is a compaction (the CLI's compression); one that only
//! rewrites them (a resume) changes nothing when the history it builds is the same. A
//! `/chat save` checkpoint is already the history as sent (`{history: Content[]}`, or a bare
//! array before v0.16).

use crate::gemini::{self, Ids};
use crate::session::{Disposition, Report, SeenError, Session};
use crate::{shape, Cx};
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::message::Role;
use salvage_types::timeline::{Change, Step};
use salvage_types::History;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// What the file's lines say, in order.
enum Event {
    /// A message line (added, or replacing the message with its id).
    Upsert(String),
    /// `$set.messages`: the list rebuilt.
    Set(Vec<String>),
    /// `$rewindTo`: that message and every later one dropped.
    Rewind(String),
}

pub(crate) fn read(cx: &Cx<'_>, bytes: &[u8]) -> Result<Session, CaptureError> {
    let text = std::str::from_utf8(bytes).map_err(|_| cx.err("(top level)", "not UTF-8"))?;
    let mut report = Report::default();
    let values: Vec<(usize, Value)> = match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Array(a)) => return checkpoint(cx, &a, report),
        Ok(Value::Object(o))
            if o.get("history").is_some_and(Value::is_array) && !o.contains_key("messages") =>
        {
            let a = o.get("history").and_then(Value::as_array).cloned().unwrap_or_default();
            if o.contains_key("authType") {
                report
                    .count("field:authType", Disposition::Skipped("how the CLI signed in, not sent".into()));
            }
            return checkpoint(cx, &a, report);
        }
        Ok(v) => vec![(1, v)],
        Err(_) => {
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(v) => out.push((i.saturating_add(1), v)),
                    Err(e) => {
                        report.count(
                            "record:(not JSON)",
                            Disposition::Skipped("not JSON; the CLI skips such a line too".into()),
                        );
                        report.note(format!("line {}: not JSON ({e}); skipped", i.saturating_add(1)));
                    }
                }
            }
            out
        }
    };
    let mut latest: HashMap<String, Value> = HashMap::new();
    let mut events = Vec::new();
    let mut id = None;
    for (line, v) in &values {
        let Some(o) = v.as_object() else {
            report.count("record:(not an object)", Disposition::Skipped("not a record".into()));
            report.note(format!("line {line}: not an object; skipped"));
            continue;
        };
        if let Some(to) = o.get("$rewindTo").and_then(Value::as_str) {
            report.count("record:$rewindTo", Disposition::History);
            events.push(Event::Rewind(to.to_string()));
        } else if let Some(mid) = o.get("id").and_then(Value::as_str) {
            report.count("record:message", Disposition::History);
            latest.insert(mid.to_string(), v.clone());
            events.push(Event::Upsert(mid.to_string()));
        } else if let Some(set) = o.get("$set").and_then(Value::as_object) {
            report.count("record:$set", Disposition::History);
            if let Some(list) = set.get("messages").and_then(Value::as_array) {
                events.push(Event::Set(message_ids(list, &mut latest)));
            }
        } else if o.get("sessionId").is_some_and(Value::is_string) {
            report.count("record:header", Disposition::History);
            id = o.get("sessionId").and_then(Value::as_str).map(str::to_string);
            if let Some(list) = o.get("messages").and_then(Value::as_array) {
                events.push(Event::Set(message_ids(list, &mut latest)));
            }
        } else {
            report.count("record:(unknown)", Disposition::Skipped("a line this build does not read".into()));
            report.note(format!("line {line}: no id, $set, $rewindTo or sessionId; skipped"));
        }
    }
    if latest.is_empty() {
        return Err(
            cx.err("(top level)", "no message in the file: not a Gemini CLI chat record with a conversation")
        );
    }
    let mut b = Builder {
        cx,
        latest: &latest,
        conv: Conv::default(),
        cur: Vec::new(),
        steps: Vec::new(),
        report,
        errors: Vec::new(),
        model: None,
    };
    for e in events {
        b.apply(e)?;
    }
    let Builder { steps, report, errors, model, .. } = b;
    // Only the CLI's own context turn (the stub file it writes when it resumes another): no
    // conversation to replay (the CLI does not offer it for resume either).
    let context_only = crate::session::Session {
        format: RequestFormat::GeminiCli,
        id: None,
        client: "gemini-cli",
        model: None,
        provider: None,
        steps: steps.clone(),
        sidechains: Vec::new(),
        fields: Map::new(),
        report: Report::default(),
        errors: Vec::new(),
    }
    .history()
    .iter()
    .all(|m| m.role == Role::User && is_context(&m.content));
    if steps.is_empty() || context_only {
        return Err(cx.err(
            "(top level)",
            "no conversation in the record: only the CLI's session context (the file the CLI starts when it \
             resumes another session; import that one)",
        ));
    }
    Ok(Session {
        format: RequestFormat::GeminiCli,
        id,
        client: "gemini-cli",
        model,
        provider: Some("gemini".into()),
        steps,
        sidechains: Vec::new(),
        fields: Map::new(),
        report,
        errors,
    })
}

/// The ids of a `$set.messages` list, each message's version kept as the latest seen.
fn message_ids(list: &[Value], latest: &mut HashMap<String, Value>) -> Vec<String> {
    let mut ids = Vec::new();
    for m in list {
        if let Some(id) = m.get("id").and_then(Value::as_str) {
            latest.insert(id.to_string(), m.clone());
            // The CLI's resume writes the same `<id>_response` message twice in a row.
            if ids.last() != Some(&id.to_string()) {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

/// A `/chat save` checkpoint: the history as sent, one step for each turn.
fn checkpoint(cx: &Cx<'_>, contents: &[Value], mut report: Report) -> Result<Session, CaptureError> {
    let mut conv = Conv::default();
    let mut steps = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        report.count("record:content", Disposition::History);
        let c = conv.dedupe(c);
        let msgs = conv.messages(cx, &c, &format!("history[{i}]"))?;
        if !msgs.is_empty() {
            steps.push(step(format!("c{i}"), msgs));
        }
    }
    if steps.is_empty() {
        return Err(cx.err("history", "the checkpoint's history is empty: nothing to import"));
    }
    Ok(Session {
        format: RequestFormat::GeminiCli,
        id: None,
        client: "gemini-cli",
        model: None,
        provider: Some("gemini".into()),
        steps,
        sidechains: Vec::new(),
        fields: Map::new(),
        report,
        errors: Vec::new(),
    })
}

/// One step of messages: a model turn is a response, anything else input.
fn step(id: String, msgs: History) -> Step {
    let change = if msgs.iter().all(|m| m.role == Role::Assistant) {
        Change::Response { messages: msgs, stop_reason: None, output_tokens: None }
    } else {
        Change::Input(msgs)
    };
    Step { id, ts: None, change }
}

/// Contents read into messages, with what has been sent so far: call ids answered, and the ids
/// the Gemini reader gives calls sent without one.
#[derive(Default)]
struct Conv {
    ids: Ids,
    answered: HashSet<String>,
}

impl Conv {
    /// `content` without the `functionResponse` parts whose call was already answered, and
    /// with thought parts left out.
    fn dedupe(&mut self, content: &Value) -> Value {
        let mut c = content.clone();
        if let Some(parts) = c.get_mut("parts").and_then(Value::as_array_mut) {
            parts.retain(|p| {
                if p.get("thought") == Some(&Value::Bool(true)) {
                    return false;
                }
                match p.get("functionResponse").and_then(|f| f.get("id")).and_then(Value::as_str) {
                    Some(id) => self.answered.insert(id.to_string()),
                    None => true,
                }
            });
        }
        c
    }

    /// The messages of one content, as the Gemini body reader reads it.
    fn messages(&mut self, cx: &Cx<'_>, content: &Value, path: &str) -> Result<History, CaptureError> {
        if content.get("parts").and_then(Value::as_array).is_some_and(Vec::is_empty) {
            return Ok(History::new());
        }
        let drafts = gemini::content(cx, content, path, &mut self.ids)?;
        Ok(drafts
            .into_iter()
            .map(|d| shape::finish(d, RequestFormat::Gemini, gemini::default_template))
            .collect())
    }
}

/// Parts from a `PartListUnion`: a string, one part, or a list of parts and strings.
fn parts_of(v: Option<&Value>) -> Vec<Value> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![json!({"text": s})],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|p| match p {
                Value::String(s) if s.is_empty() => None,
                Value::String(s) => Some(json!({"text": s})),
                other => Some(other.clone()),
            })
            .collect(),
        Some(other) => vec![other.clone()],
    }
}

/// The text a user message starts with (its first text part), for the CLI's rule on what it
/// does not send.
fn leading_text(parts: &[Value]) -> String {
    parts
        .iter()
        .find_map(|p| p.get("text").and_then(Value::as_str))
        .unwrap_or_default()
        .trim_start()
        .to_string()
}

/// The context turns the CLI writes itself (not the user's words).
fn is_context(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<session_context>") || t.starts_with("<hook_context>")
}

/// The session built step by step from the events.
struct Builder<'a> {
    cx: &'a Cx<'a>,
    latest: &'a HashMap<String, Value>,
    conv: Conv,
    /// The message ids of the record now.
    cur: Vec<String>,
    steps: Vec<Step>,
    report: Report,
    errors: Vec<SeenError>,
    model: Option<String>,
}

impl Builder<'_> {
    fn apply(&mut self, e: Event) -> Result<(), CaptureError> {
        match e {
            Event::Upsert(id) => {
                if !self.cur.contains(&id) {
                    self.cur.push(id.clone());
                    self.append(&id)?;
                }
            }
            Event::Set(ids) if ids.starts_with(&self.cur) => {
                let new: Vec<String> = ids.get(self.cur.len()..).unwrap_or_default().to_vec();
                for id in new {
                    self.cur.push(id.clone());
                    self.append(&id)?;
                }
            }
            Event::Set(ids) => {
                let (before, _) = self.rebuild(&self.cur.clone())?;
                let (after, conv) = self.rebuild(&ids)?;
                let dropped = self.cur.iter().any(|id| !ids.contains(id));
                self.cur = ids;
                self.conv = conv;
                if after != before {
                    if dropped {
                        self.steps.push(Step {
                            id: format!("set{}", self.steps.len()),
                            ts: None,
                            change: Change::Compaction {
                                trigger: None,
                                pre_tokens: None,
                                history: after,
                                exact: true,
                            },
                        });
                    } else {
                        // A rewrite that keeps every message (a resume, masked outputs): the
                        // history now is what it builds.
                        self.steps.push(Step {
                            id: format!("set{}", self.steps.len()),
                            ts: None,
                            change: Change::Compaction {
                                trigger: Some("rewrite".into()),
                                pre_tokens: None,
                                history: after,
                                exact: true,
                            },
                        });
                    }
                }
            }
            Event::Rewind(to) => {
                let keep = self.cur.iter().position(|id| *id == to).unwrap_or(0);
                let gone: Vec<String> = self.cur.split_off(keep);
                let turns = gone.iter().filter(|id| self.kind_of(id) == Some("user")).count() as u64;
                let (history, conv) = self.rebuild(&self.cur.clone())?;
                self.conv = conv;
                self.steps.push(Step {
                    id: format!("rewind{}", self.steps.len()),
                    ts: None,
                    change: Change::Rollback { turns, history },
                });
            }
        }
        Ok(())
    }

    fn kind_of(&self, id: &str) -> Option<&str> {
        self.latest.get(id).and_then(|m| m.get("type")).and_then(Value::as_str)
    }

    /// The history a list of messages builds, from scratch, and the converter after it.
    fn rebuild(&mut self, ids: &[String]) -> Result<(History, Conv), CaptureError> {
        let saved = std::mem::take(&mut self.conv);
        let mut out = History::new();
        for id in ids {
            for (_, msgs) in self.contents_of(id, false)? {
                out.extend(msgs);
            }
        }
        let conv = std::mem::replace(&mut self.conv, saved);
        Ok((out, conv))
    }

    /// Appends the steps of message `id`, counting what it holds.
    fn append(&mut self, id: &str) -> Result<(), CaptureError> {
        let turns = self.contents_of(id, true)?;
        let record = self.latest.get(id);
        let ts = record.and_then(|m| m.get("timestamp")).and_then(Value::as_str).map(str::to_string);
        // The id names the message's version too: a message the CLI rewrote later (its tool
        // calls merged in) is another step, so a journal import of the longer file sees it.
        let digest = blake3::hash(record.map(Value::to_string).unwrap_or_default().as_bytes()).to_hex();
        let short = digest.as_str().get(..12).unwrap_or_default().to_string();
        for (n, (_, msgs)) in turns.into_iter().enumerate() {
            let mut s = step(format!("{id}#{n}-{short}"), msgs);
            s.ts.clone_from(&ts);
            self.steps.push(s);
        }
        Ok(())
    }

    /// The turns message `id` sends (its model turn, then its tool results), read into
    /// messages; `count` reports its parts (once, when it is first appended).
    fn contents_of(&mut self, id: &str, count: bool) -> Result<Vec<(Role, History)>, CaptureError> {
        let Some(m) = self.latest.get(id) else { return Ok(Vec::new()) };
        let path = format!("message {id}");
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        let parts = parts_of(m.get("content"));
        let mut contents: Vec<Value> = Vec::new();
        match kind {
            "user" => {
                let lead = leading_text(&parts);
                let command = lead.starts_with('/') || lead.starts_with('?');
                if count {
                    let d = if command {
                        Disposition::Skipped("a slash command, run by the CLI, not sent".into())
                    } else {
                        Disposition::History
                    };
                    self.report.count("record:user", d);
                }
                if !command && !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            "gemini" => {
                if count {
                    self.report.count("record:gemini", Disposition::History);
                    if let Some(model) = m.get("model").and_then(Value::as_str) {
                        self.model = Some(model.to_string());
                    }
                    let thoughts = m.get("thoughts").and_then(Value::as_array).map_or(0, Vec::len);
                    for _ in 0..thoughts {
                        self.report.count(
                            "block:thought summary",
                            Disposition::Skipped("thoughts are not sent to Gemini 2 and later".into()),
                        );
                    }
                }
                let calls = m.get("toolCalls").and_then(Value::as_array).cloned().unwrap_or_default();
                let modern =
                    parts.iter().any(|p| p.get("functionCall").is_some() || p.get("thought").is_some());
                let mut model_parts = parts.clone();
                if !modern {
                    for c in &calls {
                        let mut fc = Map::new();
                        if let Some(cid) = c.get("id") {
                            fc.insert("id".into(), cid.clone());
                        }
                        fc.insert("name".into(), c.get("name").cloned().unwrap_or(Value::Null));
                        fc.insert("args".into(), c.get("args").cloned().unwrap_or_else(|| json!({})));
                        model_parts.push(json!({"functionCall": fc}));
                    }
                }
                model_parts.retain(|p| p.get("thought") != Some(&Value::Bool(true)));
                if model_parts.is_empty() {
                    return Ok(Vec::new());
                }
                contents.push(json!({"role": "model", "parts": model_parts}));
                let mut results = Vec::new();
                for c in &calls {
                    match c.get("result") {
                        None | Some(Value::Null) => {}
                        Some(Value::String(s)) => results.push(json!({"functionResponse": {
                            "id": c.get("id").cloned().unwrap_or(Value::Null),
                            "name": c.get("name").cloned().unwrap_or(Value::Null),
                            "response": {"output": s}}})),
                        Some(r) => results.extend(parts_of(Some(r))),
                    }
                }
                if !results.is_empty() {
                    contents.push(json!({"role": "user", "parts": results}));
                }
            }
            "error" => {
                if count {
                    self.report.count(
                        "record:error",
                        Disposition::Skipped("the CLI's error line: the failure it saw".into()),
                    );
                    let message = parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.errors.push(SeenError {
                        after_steps: self.steps.len(),
                        ts: m.get("timestamp").and_then(Value::as_str).map(str::to_string),
                        status: None,
                        message,
                    });
                }
            }
            other => {
                if count {
                    self.report.count(
                        &format!("record:{other}"),
                        Disposition::Skipped("the CLI's UI, not sent".into()),
                    );
                }
            }
        }
        let mut out = Vec::new();
        for (n, c) in contents.iter().enumerate() {
            let c = self.conv.dedupe(c);
            let before = c.get("parts").and_then(Value::as_array).map_or(0, Vec::len);
            let had =
                contents.get(n).and_then(|x| x.get("parts")).and_then(Value::as_array).map_or(0, Vec::len);
            if count {
                for _ in before..had {
                    self.report.count(
                        "block:functionResponse (again)",
                        Disposition::Skipped(
                            "a result already sent for its call (the CLI records each twice)".into(),
                        ),
                    );
                }
            }
            let role = if c.get("role").and_then(Value::as_str) == Some("model") {
                Role::Assistant
            } else {
                Role::User
            };
            let msgs = self.conv.messages(self.cx, &c, &format!("{path} ({n})"))?;
            if !msgs.is_empty() {
                out.push((role, msgs));
            }
        }
        Ok(out)
    }
}
