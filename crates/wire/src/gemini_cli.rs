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
//! The steps are the record's messages in the versions they had when the next message came
//! (the CLI merges a message's tool calls into it before that), so an earlier step never shows
//! what a later rewrite made of it. A `$set.messages` that leaves out user turns is a compaction
//! (the CLI's compression); one that only rewrites them (a resume merging calls, masked outputs)
//! is a `rewrite` when the history it builds differs, and nothing when it does not. On a failure
//! the CLI writes a `$set.messages` without the turn that failed, then its error line: that turn
//! is kept, since the request that failed carried it (the filler model turn the CLI adds before
//! it when a response was interrupted is not in the file, and not in the capture). A
//! `$rewindTo` back to a state the session had is a rollback; into what a rewrite kept, the
//! history is set as a `rewind`. A `/chat save` checkpoint is already the history as sent
//! (`{history: Content[]}`, or a bare array before v0.16).

use crate::gemini::{self, Ids};
use crate::session::{Disposition, Report, SeenError, Session};
use crate::{shape, Cx};
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::message::Role;
use salvage_types::timeline::{Change, Step};
use salvage_types::History;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// What the file's lines say, in order (with the line each came from).
enum Event {
    /// A message line (added, or replacing the message with its id).
    Upsert(String, Value),
    /// `$set.messages`: the list rebuilt, each message in its version there.
    Set(usize, Vec<(String, Value)>),
    /// `$rewindTo`: that message and every later one dropped.
    Rewind(usize, String),
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
    let mut events = Vec::new();
    let mut id = None;
    for (line, v) in values {
        let Some(o) = v.as_object() else {
            report.count("record:(not an object)", Disposition::Skipped("not a record".into()));
            report.note(format!("line {line}: not an object; skipped"));
            continue;
        };
        if let Some(to) = o.get("$rewindTo").and_then(Value::as_str) {
            report.count("record:$rewindTo", Disposition::History);
            events.push(Event::Rewind(line, to.to_string()));
        } else if let Some(mid) = o.get("id").and_then(Value::as_str) {
            report.count("record:message", Disposition::History);
            events.push(Event::Upsert(mid.to_string(), v.clone()));
        } else if let Some(set) = o.get("$set").and_then(Value::as_object) {
            match set.get("messages").and_then(Value::as_array) {
                Some(list) => {
                    report.count("record:$set (messages)", Disposition::History);
                    events.push(Event::Set(line, message_list(list)));
                }
                None => report.count(
                    "record:$set (metadata)",
                    Disposition::Skipped("session metadata (last update, summary…), not sent".into()),
                ),
            }
        } else if o.get("sessionId").is_some_and(Value::is_string) {
            report.count("record:header", Disposition::Skipped("the session's header, not sent".into()));
            id = o.get("sessionId").and_then(Value::as_str).map(str::to_string);
            if let Some(list) = o.get("messages").and_then(Value::as_array) {
                events.push(Event::Set(line, message_list(list)));
            }
        } else {
            report.count("record:(unknown)", Disposition::Skipped("a line this build does not read".into()));
            report.note(format!("line {line}: no id, $set, $rewindTo or sessionId; skipped"));
        }
    }
    if !events.iter().any(|e| matches!(e, Event::Upsert(..) | Event::Set(..))) {
        return Err(
            cx.err("(top level)", "no message in the file: not a Gemini CLI chat record with a conversation")
        );
    }
    let mut b = Builder {
        cx,
        versions: HashMap::new(),
        conv: Conv::default(),
        cur: Vec::new(),
        pending: None,
        steps: Vec::new(),
        report,
        errors: Vec::new(),
        model: None,
        lengths: vec![0],
        cleared: None,
    };
    for (i, e) in events.iter().enumerate() {
        // A `$set.messages` the CLI writes on a failure, right before its error line, leaves out
        // the turn that failed: the request that failed carried it.
        let before_error = matches!(e, Event::Set(..))
            && events.get(i.saturating_add(1)).is_some_and(|n| matches!(n, Event::Upsert(_, v) if v.get("type").and_then(Value::as_str) == Some("error")));
        b.apply(e, before_error)?;
    }
    b.flush()?;
    let Builder { steps, report, errors, model, cleared, .. } = b;
    // Only the CLI's own context turn (the stub file it writes when it resumes another): no
    // conversation to replay (the CLI does not offer it for resume either).
    let context_only =
        salvage_types::timeline::fold(&steps).iter().all(|m| m.role == Role::User && is_context(&m.content));
    if let (Some(line), true) = (cleared, steps.is_empty() || context_only) {
        return Err(cx.err(
            &format!("line {line}"),
            "the record's $rewindTo names no message in it, and the CLI then clears the whole conversation: \
             nothing is left to replay",
        ));
    }
    if steps.is_empty() || context_only {
        return Err(cx.err(
            "(top level)",
            "no conversation in the record: only the CLI's session context (the file the CLI starts when it \
             resumes another session; import that one)",
        ));
    }
    Ok(session(id, model, steps, report, errors))
}

/// A Gemini CLI session of these parts (no sidechains, no request fields: the file holds neither).
fn session(
    id: Option<String>,
    model: Option<String>,
    steps: Vec<Step>,
    report: Report,
    errors: Vec<SeenError>,
) -> Session {
    Session {
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
    }
}

/// The messages of a `$set.messages` list, each in its version there.
fn message_list(list: &[Value]) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for m in list {
        if let Some(id) = m.get("id").and_then(Value::as_str) {
            // The CLI's resume writes the same `<id>_response` message twice in a row.
            if out.last().map(|(last, _)| last.as_str()) != Some(id) {
                out.push((id.to_string(), m.clone()));
            }
        }
    }
    out
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
    Ok(session(None, None, steps, report, Vec::new()))
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
    /// The media parts beside results that were all sent already (a binary tool output's
    /// `inlineData`) go with them: a review saw a tool's image sent twice.
    fn dedupe(&mut self, content: &Value) -> Value {
        let mut c = content.clone();
        if let Some(parts) = c.get_mut("parts").and_then(Value::as_array_mut) {
            let (mut results, mut repeated) = (0usize, 0usize);
            parts.retain(|p| {
                if p.get("thought") == Some(&Value::Bool(true)) {
                    return false;
                }
                match p.get("functionResponse").and_then(|f| f.get("id")).and_then(Value::as_str) {
                    Some(id) => {
                        results = results.saturating_add(1);
                        let new = self.answered.insert(id.to_string());
                        if !new {
                            repeated = repeated.saturating_add(1);
                        }
                        new
                    }
                    None => true,
                }
            });
            if results > 0 && repeated == results {
                parts.retain(|p| {
                    !["inlineData", "inline_data", "fileData", "file_data"]
                        .iter()
                        .any(|k| p.get(*k).is_some())
                });
            }
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
    /// Each message's version now (a later line with its id replaces it).
    versions: HashMap<String, Value>,
    conv: Conv,
    /// The message ids of the record now.
    cur: Vec<String>,
    /// The last message added, not yet a step: the CLI merges its tool calls and results into it
    /// before the next message, so it becomes a step in the version it has then.
    pending: Option<String>,
    steps: Vec<Step>,
    report: Report,
    errors: Vec<SeenError>,
    model: Option<String>,
    /// The history's length after each step since the last rewrite: the states a rewind can
    /// return to.
    lengths: Vec<usize>,
    /// The line of a `$rewindTo` naming no message (the CLI clears everything then).
    cleared: Option<usize>,
}

impl Builder<'_> {
    fn apply(&mut self, e: &Event, before_error: bool) -> Result<(), CaptureError> {
        match e {
            Event::Upsert(id, v) => {
                self.versions.insert(id.clone(), v.clone());
                if !self.cur.contains(id) {
                    self.flush()?;
                    self.cur.push(id.clone());
                    self.pending = Some(id.clone());
                }
            }
            Event::Set(line, list) => {
                self.flush()?;
                let mut ids: Vec<String> = list.iter().map(|(id, _)| id.clone()).collect();
                if before_error {
                    // The user turns added since the last one the list keeps: the request that
                    // failed ended with them.
                    let kept =
                        self.cur.iter().rposition(|id| ids.contains(id)).map_or(0, |p| p.saturating_add(1));
                    let taken: Vec<String> = self
                        .cur
                        .get(kept..)
                        .unwrap_or_default()
                        .iter()
                        .filter(|id| self.kind_of(id) == Some("user"))
                        .cloned()
                        .collect();
                    if !taken.is_empty() {
                        self.report.note(format!(
                            "line {line}: the CLI took the turn that failed back out of its history before its error line; \
                             the capture keeps it, as the request that failed carried it"
                        ));
                        ids.extend(taken);
                    }
                }
                let extends = ids.starts_with(&self.cur);
                let (before, _) = self.rebuild(&self.cur.clone())?;
                for (id, v) in list {
                    self.versions.insert(id.clone(), v.clone());
                }
                if extends {
                    // Appended messages (and versions rewritten in place, as the CLI resyncs).
                    let (after, conv) = self.rebuild(&ids)?;
                    if after.starts_with(&before) {
                        let new: Vec<String> = ids.get(self.cur.len()..).unwrap_or_default().to_vec();
                        for id in new {
                            self.cur.push(id.clone());
                            self.append(&id)?;
                        }
                        return Ok(());
                    }
                    self.rewrite(ids, after, conv, &before);
                    return Ok(());
                }
                let (after, conv) = self.rebuild(&ids)?;
                if after != before {
                    self.rewrite(ids, after, conv, &before);
                } else {
                    self.cur = ids;
                    self.conv = conv;
                }
            }
            Event::Rewind(line, to) => {
                self.flush()?;
                let keep = match self.cur.iter().position(|id| id == to) {
                    Some(p) => p,
                    None => {
                        self.cleared = Some(*line);
                        self.report.note(format!(
                            "line {line}: $rewindTo {to} names no message in the record; the CLI clears the conversation then"
                        ));
                        0
                    }
                };
                let gone: Vec<String> = self.cur.split_off(keep);
                let turns = gone.iter().filter(|id| self.kind_of(id) == Some("user")).count() as u64;
                let (history, conv) = self.rebuild(&self.cur.clone())?;
                self.conv = conv;
                let len = history.len();
                let change = if self.lengths.contains(&len) {
                    // A state the session had, since its last rewrite.
                    while self.lengths.last().is_some_and(|l| *l > len) {
                        self.lengths.pop();
                    }
                    Change::Rollback { turns, history }
                } else {
                    // Back into the middle of a rewrite (a rewind into what a compaction kept):
                    // no state the session had, so the history is set as it now is.
                    self.lengths = vec![len];
                    Change::Compaction {
                        trigger: Some("rewind".into()),
                        pre_tokens: None,
                        history,
                        exact: true,
                    }
                };
                self.steps.push(Step { id: format!("rewind{}", self.steps.len()), ts: None, change });
            }
        }
        Ok(())
    }

    /// The history set as a list builds it: a compaction when it leaves out user turns the
    /// history had (the CLI's compression), a rewrite otherwise (messages merged, outputs
    /// masked).
    fn rewrite(&mut self, ids: Vec<String>, after: History, conv: Conv, before: &History) {
        let lost = before
            .iter()
            .filter(|m| m.role == Role::User && !m.content.is_empty())
            .any(|m| !after.iter().any(|a| a.role == Role::User && a.content == m.content));
        let trigger = (!lost).then(|| "rewrite".to_string());
        self.cur = ids;
        self.conv = conv;
        self.lengths = vec![after.len()];
        self.steps.push(Step {
            id: format!("set{}", self.steps.len()),
            ts: None,
            change: Change::Compaction { trigger, pre_tokens: None, history: after, exact: true },
        });
    }

    /// The pending message as a step, in its version now.
    fn flush(&mut self) -> Result<(), CaptureError> {
        if let Some(id) = self.pending.take() {
            self.append(&id)?;
        }
        Ok(())
    }

    fn kind_of(&self, id: &str) -> Option<&str> {
        self.versions.get(id).and_then(|m| m.get("type")).and_then(Value::as_str)
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
        let record = self.versions.get(id);
        let ts = record.and_then(|m| m.get("timestamp")).and_then(Value::as_str).map(str::to_string);
        // The id names the message's version too: a message the CLI rewrote later (its tool
        // calls merged in) is another step, so a journal import of the longer file sees it.
        let digest = blake3::hash(record.map(Value::to_string).unwrap_or_default().as_bytes()).to_hex();
        let short = digest.as_str().get(..12).unwrap_or_default().to_string();
        for (n, (_, msgs)) in turns.into_iter().enumerate() {
            let mut s = step(format!("{id}#{n}-{short}"), msgs);
            s.ts.clone_from(&ts);
            self.steps.push(s);
            let len = self.lengths.last().copied().unwrap_or(0);
            let added = match &self.steps.last().map(|s| &s.change) {
                Some(Change::Input(m)) | Some(Change::Response { messages: m, .. }) => m.len(),
                _ => 0,
            };
            self.lengths.push(len.saturating_add(added));
        }
        Ok(())
    }

    /// The turns message `id` sends (its model turn, then its tool results), read into
    /// messages; `count` reports its parts (once, when it is first appended).
    fn contents_of(&mut self, id: &str, count: bool) -> Result<Vec<(Role, History)>, CaptureError> {
        let Some(m) = self.versions.get(id).cloned() else { return Ok(Vec::new()) };
        let m = &m;
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
