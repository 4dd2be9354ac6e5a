//! Chain records into steps: user input gathered into one step per turn, the assistant records
//! of one response merged, compaction boundaries with their summaries, and every record and
//! block counted by what became of it.

use super::{count_record, Rec};
use crate::session::{Disposition, Report, SeenError};
use crate::{anthropic, shape, Cx};
use salvage_types::capture::{CaptureError, RequestFormat};
use salvage_types::timeline::{Change, Step};
use salvage_types::History;
use serde_json::Value;

/// The format of the messages' `wire` templates: the API Claude Code sends.
const F: RequestFormat = RequestFormat::Anthropic;

/// Turns chain records into steps, counting each record.
pub(super) struct Builder<'a> {
    cx: &'a Cx<'a>,
    /// The first block the Anthropic reader refused (the read fails with it).
    error: Option<CaptureError>,
    recs: &'a [Rec],
    raw: &'a [&'a str],
    report: &'a mut Report,
    /// Reading a sidechain: what would be history is counted as kept apart, and API errors are
    /// not the session's.
    apart: bool,
    model: Option<String>,
    errors: Vec<SeenError>,
    steps: Vec<Step>,
    pending: Option<Pending>,
    /// Index in `steps` of a compaction still waiting for its summary record.
    awaiting_summary: Option<usize>,
}

/// What a chain became.
pub(super) struct Built {
    /// The steps, in order.
    pub(super) steps: Vec<Step>,
    /// The model last named by a response.
    pub(super) model: Option<String>,
    /// The API errors Claude Code wrote in place of a response.
    pub(super) errors: Vec<SeenError>,
}

/// User input being gathered into one step.
struct Pending {
    tool_results: bool,
    messages: History,
    id: String,
    ts: Option<String>,
}

/// Marks record `i` as taken by a chain.
fn mark(counted: &mut [bool], i: usize) {
    if let Some(c) = counted.get_mut(i) {
        *c = true;
    }
}

/// Why a record that is not a message (nor a compaction boundary) is skipped.
fn skip_reason(r: &Rec) -> String {
    match r.kind.as_str() {
        "system" => {
            let sub = r.subtype().unwrap_or("(none)");
            format!("client event ({sub}), not sent to the model")
        }
        "progress" => "progress update, not sent to the model".into(),
        "attachment" => {
            "attachment: Claude Code renders it into the prompt at request time; the rendering is not in the file"
                .into()
        }
        other => format!("record type {other:?} is not a message"),
    }
}

impl<'a> Builder<'a> {
    /// The text of record `i`'s line (for ids of records without a uuid).
    fn raw_line(&self, i: usize) -> &'a str {
        self.raw.get(i).copied().unwrap_or_default()
    }

    fn d(&self, d: Disposition) -> Disposition {
        match (self.apart, d) {
            (true, Disposition::History | Disposition::Opaque) => Disposition::Apart,
            (_, d) => d,
        }
    }

    fn count(&mut self, kind: &str, d: Disposition) {
        let d = self.d(d);
        self.report.count(kind, d);
    }

    pub(super) fn new(
        cx: &'a Cx<'a>,
        recs: &'a [Rec],
        raw: &'a [&'a str],
        report: &'a mut Report,
        apart: bool,
    ) -> Self {
        Builder {
            cx,
            error: None,
            recs,
            raw,
            report,
            apart,
            model: None,
            errors: Vec::new(),
            steps: Vec::new(),
            pending: None,
            awaiting_summary: None,
        }
    }

    /// The steps of `chain`, marking each record it takes in `counted`; fails with the first
    /// block the Anthropic reader refused.
    pub(super) fn run(mut self, chain: &[usize], counted: &mut [bool]) -> Result<Built, CaptureError> {
        self.walk(chain, counted);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(Built { steps: self.steps, model: self.model, errors: self.errors })
    }

    /// Each record of the chain, in order, by kind.
    fn walk(&mut self, chain: &[usize], counted: &mut [bool]) {
        let recs = self.recs;
        let mut k = 0usize;
        while let Some(&i) = chain.get(k) {
            let next = k.saturating_add(1);
            let Some(r) = recs.get(i) else {
                k = next;
                continue;
            };
            mark(counted, i);
            k = match r.kind.as_str() {
                "assistant" if r.flag("isApiErrorMessage") => {
                    self.api_error(r);
                    next
                }
                "assistant" => self.assistant(chain, k, counted),
                "user" if r.flag("isCompactSummary") && self.awaiting_summary.is_some() => {
                    self.compact_summary(r, i);
                    next
                }
                "user" => {
                    self.user_input(r, i);
                    next
                }
                "system" if r.is_boundary() => {
                    self.boundary(r, i);
                    next
                }
                _ => {
                    self.count_rec(r, Disposition::Skipped(skip_reason(r)));
                    next
                }
            };
        }
        self.flush();
    }

    /// Ends the user input being gathered: one input step, unless it holds no message.
    fn flush(&mut self) {
        if let Some(p) = self.pending.take() {
            if !p.messages.is_empty() {
                self.steps.push(Step { id: p.id, ts: p.ts, change: Change::Input(p.messages) });
            }
        }
    }

    /// An API error Claude Code wrote in place of a response: a seen failure, not a step.
    fn api_error(&mut self, r: &Rec) {
        self.flush();
        let text = r
            .message()
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let status = r.o.get("apiErrorStatus").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok());
        if !self.apart {
            self.errors.push(SeenError {
                after_steps: self.steps.len(),
                ts: r.ts.clone(),
                status,
                message: text,
            });
        }
        self.count_rec(
            r,
            Disposition::Skipped(
                "an API error Claude Code wrote in place of a response (the failure it saw), not model output"
                    .into(),
            ),
        );
    }

    /// The assistant record at `chain[k]` and the ones right after it of the same response, as
    /// one response step; returns the chain index after the group.
    fn assistant(&mut self, chain: &[usize], k: usize, counted: &mut [bool]) -> usize {
        self.awaiting_summary = None;
        self.flush();
        let recs = self.recs;
        let mut j = k.saturating_add(1);
        if let Some(mid) = chain.get(k).and_then(|&i| recs.get(i)).and_then(Rec::message_id) {
            while let Some(&n) = chain.get(j) {
                let same = recs.get(n).is_some_and(|x| x.kind == "assistant" && x.message_id() == Some(mid));
                if !same {
                    break;
                }
                mark(counted, n);
                j = j.saturating_add(1);
            }
        }
        let group: Vec<usize> = chain.get(k..j).unwrap_or_default().to_vec();
        if let Some(step) = self.response(&group) {
            self.steps.push(step);
        }
        j
    }

    /// The compact summary right after a boundary: the history of that compaction.
    fn compact_summary(&mut self, r: &Rec, i: usize) {
        self.flush();
        let mut msgs = self.user(r, false);
        for m in &mut msgs {
            m.meta.is_summary = true;
        }
        let id = r.id(self.raw_line(i));
        if let Some(Step { id: step_id, change: Change::Compaction { history, .. }, .. }) =
            self.awaiting_summary.take().and_then(|s| self.steps.get_mut(s))
        {
            *step_id = id;
            *history = msgs;
        }
        self.count_meta(r, Disposition::History);
    }

    /// A user record, gathered into the pending input (tool-result records of one turn join).
    fn user_input(&mut self, r: &Rec, i: usize) {
        // The summary is the message right after its boundary, or there is none.
        self.awaiting_summary = None;
        let tool_results = r.has_tool_result();
        let same = self.pending.as_ref().is_some_and(|p| p.tool_results && tool_results);
        // Result records of one turn are one user message on the wire.
        let join = same && self.pending.as_ref().is_some_and(|p| !p.messages.is_empty());
        let msgs = self.user(r, join);
        self.count_meta(r, Disposition::History);
        if !same {
            self.flush();
            self.pending =
                Some(Pending { tool_results, messages: Vec::new(), id: String::new(), ts: r.ts.clone() });
        }
        let id = r.id(self.raw_line(i));
        if let Some(p) = self.pending.as_mut() {
            p.messages.extend(msgs);
            p.id = id;
        }
    }

    /// A `compact_boundary` record: a compaction step, waiting for its summary.
    fn boundary(&mut self, r: &Rec, i: usize) {
        self.flush();
        let meta = r.o.get("compactMetadata");
        let trigger = meta.and_then(|m| m.get("trigger")).and_then(Value::as_str).map(str::to_string);
        let pre_tokens = meta.and_then(|m| m.get("preTokens")).and_then(Value::as_u64);
        if meta.and_then(|m| m.get("preservedSegment")).is_some() {
            self.report.note(format!(
                "line {}: a partial compaction kept a preserved segment; its relinking is not applied (the summary alone is the post-compaction history)",
                r.line
            ));
        }
        self.awaiting_summary = Some(self.steps.len());
        self.steps.push(Step {
            id: r.id(self.raw_line(i)),
            ts: r.ts.clone(),
            change: Change::Compaction { trigger, pre_tokens, history: Vec::new(), exact: true },
        });
        self.count_rec(r, Disposition::History);
    }

    /// Counts a record under `d` with all its blocks (records whose content is not modeled).
    fn count_rec(&mut self, r: &Rec, d: Disposition) {
        let d = self.d(d);
        count_record(self.report, r, d);
    }

    /// Counts a user/assistant record itself and its `toolUseResult` (blocks are counted while
    /// they are converted).
    fn count_meta(&mut self, r: &Rec, d: Disposition) {
        self.count(&format!("record:{}", r.kind), d);
        if r.o.contains_key("toolUseResult") {
            self.count(
                "field:toolUseResult",
                Disposition::Skipped(
                    "Claude Code's structured copy of the tool result for its UI; the model gets the tool_result block"
                        .into(),
                ),
            );
        }
    }

    /// A user record as messages, through the Anthropic Messages reader (the record's `message`
    /// is the message the client sent): each `tool_result` its own tool message, each run of
    /// other blocks a user message, in block order, with the blocks the model has no field for
    /// kept in the messages' `wire` templates. `join` makes the first message join the one
    /// before it when the body is rebuilt (the client merges the result records of one turn).
    fn user(&mut self, r: &Rec, join: bool) -> History {
        let content = match r.message().map(|m| m.get("content")) {
            Some(Some(c @ Value::String(_))) => c.clone(),
            Some(Some(Value::Array(b))) if !b.is_empty() => Value::Array(b.clone()),
            Some(Some(Value::Array(_))) => return History::new(),
            // A user record whose message is missing, or whose content is neither text nor
            // blocks, is not a message the client sent: refused by name, not dropped while the
            // accounting counted it (review of the CLI, finding 7).
            other => {
                let (path, problem) = match other {
                    None => (
                        format!("line {}.message", r.line),
                        "missing: a user record holds the message the client sent".to_string(),
                    ),
                    Some(None) => (format!("line {}.message.content", r.line), "missing".to_string()),
                    Some(Some(v)) => (
                        format!("line {}.message.content", r.line),
                        format!("expected a string or an array of blocks, found {}", crate::kind(v)),
                    ),
                };
                self.error.get_or_insert(self.cx.err(&path, problem));
                return History::new();
            }
        };
        let msg = serde_json::json!({"role": "user", "content": content});
        self.convert(r, &msg, join)
    }

    /// A provider message read as the Anthropic Messages reader reads a body's, its blocks
    /// counted by what became of them.
    fn convert(&mut self, r: &Rec, msg: &Value, join: bool) -> History {
        let path = format!("line {}.message", r.line);
        let mut drafts = match anthropic::message(self.cx, msg, &path) {
            Ok(d) => d,
            Err(e) => {
                self.error.get_or_insert(e);
                return History::new();
            }
        };
        if let Some(first) = drafts.first_mut() {
            first.join |= join;
        }
        let blocks = match msg.get("content") {
            Some(Value::Array(b)) => b.as_slice(),
            _ => &[],
        };
        if msg.get("content").is_some_and(Value::is_string) {
            self.count("block:text", Disposition::History);
        }
        let templates: Vec<&Value> = drafts
            .iter()
            .filter_map(|d| d.template.get("content").and_then(Value::as_array))
            .flatten()
            .collect();
        for (b, t) in blocks.iter().zip(templates) {
            let ty = b.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
            if ty == "tool_result" {
                self.count("block:tool_result", Disposition::History);
                if let (Some(Value::Array(items)), Some(Value::Array(tpls))) =
                    (b.get("content"), t.get("content"))
                {
                    for (it, tp) in items.iter().zip(tpls) {
                        let it = it.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
                        self.count(&format!("block:tool_result.{it}"), Disposition::of_template(tp));
                    }
                }
            } else {
                self.count(&format!("block:{ty}"), Disposition::of_template(t));
            }
        }
        drafts.into_iter().map(|d| shape::finish(d, F, anthropic::default_template)).collect()
    }

    /// One API response written as several assistant records: their blocks, in order, as one
    /// assistant message (only `role` and `content`: the rest of a record's `message` is the
    /// response's, never sent back).
    fn response(&mut self, group: &[usize]) -> Option<Step> {
        let mut blocks: Vec<Value> = Vec::new();
        let mut stop_reason = None;
        let mut output_tokens = None;
        let mut last = None;
        for &i in group {
            let Some(r) = self.recs.get(i) else { continue };
            self.count_meta(r, Disposition::History);
            let Some(m) = r.message() else {
                self.error.get_or_insert(self.cx.err(
                    &format!("line {}.message", r.line),
                    "missing: an assistant record holds the model's message",
                ));
                continue;
            };
            if let Some(model) = m.get("model").and_then(Value::as_str).filter(|m| *m != "<synthetic>") {
                self.model = Some(model.to_string());
            }
            if let Some(s) = m.get("stop_reason").and_then(Value::as_str) {
                stop_reason = Some(s.to_string());
            }
            if let Some(t) = m.get("usage").and_then(|u| u.get("output_tokens")).and_then(Value::as_u64) {
                output_tokens = Some(t);
            }
            match m.get("content") {
                Some(Value::Array(b)) => blocks.extend(b.iter().cloned()),
                Some(Value::String(s)) => blocks.push(serde_json::json!({"type": "text", "text": s})),
                other => {
                    let found = other.map_or("nothing", crate::kind);
                    self.error.get_or_insert(self.cx.err(
                        &format!("line {}.message.content", r.line),
                        format!("expected a string or an array of blocks, found {found}"),
                    ));
                }
            }
            last = Some(i);
        }
        let last = last?;
        let r = self.recs.get(last)?;
        let msg = serde_json::json!({"role": "assistant", "content": blocks});
        let messages = self.convert(r, &msg, false);
        Some(Step {
            id: r.id(self.raw_line(last)),
            ts: r.ts.clone(),
            change: Change::Response { messages, stop_reason, output_tokens },
        })
    }
}
