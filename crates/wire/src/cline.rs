//! Cline and Roo Code task histories: `tasks/<id>/api_conversation_history.json` in the
//! extension's global storage, a JSON array of Anthropic-shaped messages (`role`, `content`)
//! with Cline's bookkeeping (`ts`, `id`, `modelInfo`, `metrics`).
//!
//! In the XML-tool era the assistant writes its tool calls as XML inside its text and the tool
//! results come back as **user text** (`[read_file for 'x'] Result:` …): they stay user text,
//! flagged `agent_feedback`, and there is no native call for pairing repair to answer with a
//! synthetic "missing result". With native tool calling (`tool_use` / `tool_result` blocks) a
//! call becomes a native tool call only when a `tool_result` for it follows in the next user
//! message; an unanswered `tool_use` (an interrupted task) is carried opaquely instead, for the
//! same reason: nothing downstream may invent its result. A `tool_result` without a native call
//! stays user text.

use crate::anthropic::{self, Add};
use crate::conv::{without, Runs};
use crate::session::{Disposition, Report, Session};
use crate::shape::{self, lit, text_marker, Draft};
use crate::{kind, Cx};
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::message::{Message, Role};
use salvage_types::timeline::{Change, Step};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The format of the messages' `wire` templates: the API Cline sends.
const F: RequestFormat = RequestFormat::Anthropic;

/// True for user text that carries a tool's output (`[tool for 'arg'] Result:`).
fn is_tool_feedback(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    first.starts_with('[') && first.contains("] Result:")
}

fn tool_result_ids(m: &Value) -> HashSet<String> {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

pub(crate) fn read(cx: &Cx<'_>, body: &Value) -> Result<Session, CaptureError> {
    let msgs = match body {
        Value::Array(a) => a,
        other => {
            return Err(cx.err(
                "(top level)",
                format!(
                    "expected an array of messages (api_conversation_history.json), found {}",
                    kind(other)
                ),
            ))
        }
    };
    let mut r = Reader { cx, report: Report::default(), answered: HashSet::new(), modeled: HashSet::new() };
    let mut steps = Vec::new();
    let mut model = None;
    for (i, m) in msgs.iter().enumerate() {
        let path = format!("[{i}]");
        let o = cx.obj(m, &path)?;
        let role = crate::conv::user_or_assistant(cx, o, &path)?;
        r.count_bookkeeping(o);
        if let Some(mid) = o.get("modelInfo").and_then(|mi| mi.get("modelId")).and_then(Value::as_str) {
            model = Some(mid.to_string());
        }
        if role == Role::Assistant {
            r.answered = msgs.get(i.saturating_add(1)).map(tool_result_ids).unwrap_or_default();
        }
        let out = finish_drafts(r.drafts(o, role, &path)?);
        r.report.count(&format!("record:{}", role.as_str()), Disposition::History);
        steps.push(step(i, m, role, out));
    }
    if steps.is_empty() {
        return Err(cx.err("(top level)", "the array is empty: nothing to import"));
    }
    Ok(Session {
        format: RequestFormat::Cline,
        id: None,
        client: "cline",
        model,
        provider: None,
        steps,
        sidechains: Vec::new(),
        fields: Map::new(),
        report: r.report,
        errors: Vec::new(),
    })
}

/// The drafts finished into messages; the first user message flagged `agent_feedback` when it
/// carries a tool's output.
fn finish_drafts(drafts: Vec<Draft>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for d in drafts {
        let mut m = shape::finish(d, F, anthropic::default_template);
        let first_user = m.role == Role::User && !out.iter().any(|o| o.role == Role::User);
        if first_user && is_tool_feedback(&m.content) {
            m.meta.agent_feedback = true;
        }
        out.push(m);
    }
    out
}

/// Message `i` of the file as a step, its id derived from its position and content.
fn step(i: usize, m: &Value, role: Role, out: Vec<Message>) -> Step {
    let digest = blake3::hash(m.to_string().as_bytes()).to_hex();
    // A hex digest is ASCII: any cut is a char boundary.
    let id = format!("m{i}-{}", digest.as_str().get(..12).unwrap_or(digest.as_str()));
    let change = if role == Role::Assistant {
        Change::Response { messages: out, stop_reason: None, output_tokens: None }
    } else {
        Change::Input(out)
    };
    Step { id, ts: None, change }
}

/// The file being read: the report, and what is known of the native tool calls.
struct Reader<'a> {
    cx: &'a Cx<'a>,
    report: Report,
    /// Native calls that are answered: the ids of tool_results in the message after each one.
    answered: HashSet<String>,
    /// Calls modeled natively so far (a tool_result for another id stays user text).
    modeled: HashSet<String>,
}

impl Reader<'_> {
    /// Counts Cline's bookkeeping fields of a message as skipped.
    fn count_bookkeeping(&mut self, o: &Map<String, Value>) {
        for f in ["ts", "id", "modelInfo", "metrics"] {
            if o.contains_key(f) {
                self.report.count(
                    &format!("field:{f}"),
                    Disposition::Skipped("Cline bookkeeping, not sent to the model".into()),
                );
            }
        }
    }

    /// A message's content as drafts (a string as one text message, blocks in runs).
    fn drafts(&mut self, o: &Map<String, Value>, role: Role, path: &str) -> Result<Vec<Draft>, CaptureError> {
        // The message as Cline sends it: without its bookkeeping.
        let env = without(o, &["content", "ts", "id", "modelInfo", "metrics"]);
        match o.get("content") {
            Some(Value::String(s)) => {
                self.report.count("block:text", Disposition::History);
                let mut t: Map<String, Value> = env.into_iter().map(|(k, v)| (k, lit(v))).collect();
                t.insert("content".into(), text_marker("s", Map::new(), s));
                Ok(vec![Draft { msg: Message::new(role, ""), template: Value::Object(t), join: false }])
            }
            Some(Value::Array(blocks)) if blocks.is_empty() => Ok(Vec::new()),
            Some(Value::Array(blocks)) => {
                let mut runs = Runs::new(env, "role", "content", role);
                for (k, b) in blocks.iter().enumerate() {
                    self.block(&mut runs, b, role, &format!("{path}.content[{k}]"))?;
                }
                Ok(runs.finish())
            }
            Some(v) => Err(self.cx.err(
                &format!("{path}.content"),
                format!("expected a string or an array of blocks, found {}", kind(v)),
            )),
            None => Err(self.cx.err(&format!("{path}.content"), "missing")),
        }
    }

    /// One content block, into the runs.
    fn block(&mut self, runs: &mut Runs, b: &Value, role: Role, bpath: &str) -> Result<(), CaptureError> {
        let cx = self.cx;
        let bo = cx.obj(b, bpath)?;
        match cx.req_str(bo, "type", bpath)? {
            "tool_use" if role == Role::Assistant => self.tool_use(runs, bo, b, bpath),
            "tool_result" if role == Role::User => self.tool_result(runs, bo, bpath),
            other => {
                let (tpl, add) = anthropic::block(cx, bo, b, role, bpath)?;
                self.report.count(&format!("block:{other}"), Disposition::of_template(&tpl));
                let msg = runs.block(tpl);
                match add {
                    Add::Image(img) => msg.images.push(img),
                    // A tool_use in a user message is not a call.
                    Add::Call(_) | Add::Nothing => {}
                }
                Ok(())
            }
        }
    }

    /// An assistant `tool_use`: a native call when answered, else carried opaquely.
    fn tool_use(
        &mut self,
        runs: &mut Runs,
        bo: &Map<String, Value>,
        b: &Value,
        bpath: &str,
    ) -> Result<(), CaptureError> {
        let id = self.cx.req_str(bo, "id", bpath)?.to_string();
        if self.answered.contains(&id) {
            let (tpl, add) = anthropic::block(self.cx, bo, b, Role::Assistant, bpath)?;
            let d = Disposition::of_template(&tpl);
            let msg = runs.block(tpl);
            if let Add::Call(c) = add {
                msg.tool_calls.push(c);
                self.modeled.insert(id);
            }
            self.report.count("block:tool_use", d);
        } else {
            self.report.note(format!(
                "{bpath}: tool_use {id} has no tool_result in the next message; carried opaquely so that no result is invented for it"
            ));
            runs.block(lit(b.clone()));
            self.report.count("block:tool_use", Disposition::Opaque);
        }
        Ok(())
    }

    /// A user `tool_result`: a tool message for a modeled call, else user text.
    fn tool_result(
        &mut self,
        runs: &mut Runs,
        bo: &Map<String, Value>,
        bpath: &str,
    ) -> Result<(), CaptureError> {
        let id = self.cx.req_str(bo, "tool_use_id", bpath)?;
        let (msg, tpl) = if self.modeled.contains(id) {
            anthropic::tool_result(self.cx, bo, bpath)?
        } else {
            // Kept as user text, the block as it was around it.
            anthropic::tool_result_as_user(self.cx, bo, bpath)?
        };
        if let (Some(Value::Array(items)), Some(Value::Array(tpls))) = (bo.get("content"), tpl.get("content"))
        {
            for (it, tp) in items.iter().zip(tpls) {
                let it = it.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                self.report.count(&format!("block:tool_result.{it}"), Disposition::of_template(tp));
            }
        }
        if msg.role == Role::Tool {
            runs.result(msg, tpl);
        } else {
            runs.block(tpl).images.extend(msg.images);
        }
        self.report.count("block:tool_result", Disposition::History);
        Ok(())
    }
}
