//! Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl`, one JSON record per
//! line.
//!
//! Records with a `uuid` form a tree through `parentUuid`: a rewind or an edited prompt starts a
//! new branch, so the file holds abandoned branches too. The active branch is the chain that
//! ends at the last non-sidechain record of the file, walked back through `parentUuid`. A
//! `compact_boundary` system record starts a new root (`parentUuid: null`) and names the last
//! record before the compaction in `logicalParentUuid`; the walk continues there, so the steps
//! hold the pre-compaction history, then a compaction whose history is the compact summary (the
//! `isCompactSummary` user record that follows the boundary), then what came after.
//!
//! One API response is written as several `assistant` records (one content block each) sharing
//! `message.id`; they are merged into one assistant message. Parallel tool calls can leave
//! sibling records and their tool results off the single-parent walk; they are put back after the
//! last member of their response, as Claude Code itself does when it resumes.
//!
//! Subagent records (`isSidechain: true`) are kept apart in [`Session::sidechains`]. A file that
//! holds only sidechain records (a subagent transcript) is read as its own main history.

use crate::session::{line_id, lines, parse_line, Disposition, Report, SeenError, Session, Sidechain};
use crate::{anthropic, kind, shape, Cx};
use salvage_types::capture::{check_utf8, CaptureError, RequestFormat};
use salvage_types::timeline::{self, Change, Step};
use salvage_types::History;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The format of the messages' `wire` templates: the API Claude Code sends.
const F: RequestFormat = RequestFormat::Anthropic;

/// One parsed record.
struct Rec {
    line: usize,
    o: Map<String, Value>,
    kind: String,
    uuid: Option<String>,
    parent: Option<String>,
    side: bool,
    ts: Option<String>,
}

impl Rec {
    fn str(&self, key: &str) -> Option<&str> {
        self.o.get(key).and_then(Value::as_str)
    }

    fn flag(&self, key: &str) -> bool {
        self.o.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    fn message(&self) -> Option<&Map<String, Value>> {
        self.o.get("message").and_then(Value::as_object)
    }

    fn message_id(&self) -> Option<&str> {
        self.message().and_then(|m| m.get("id")).and_then(Value::as_str)
    }

    fn subtype(&self) -> Option<&str> {
        self.str("subtype")
    }

    fn is_participant(&self) -> bool {
        self.uuid.is_some()
            && matches!(self.kind.as_str(), "user" | "assistant" | "system" | "progress" | "attachment")
    }

    fn is_boundary(&self) -> bool {
        self.kind == "system" && self.subtype() == Some("compact_boundary")
    }

    fn has_tool_result(&self) -> bool {
        self.message()
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .is_some_and(|b| b.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")))
    }

    fn id(&self, raw: &str) -> String {
        self.uuid.clone().unwrap_or_else(|| line_id(self.line, raw))
    }
}

/// Why a metadata record (one outside the conversation chain) is not part of the history.
fn metadata_reason(kind: &str) -> String {
    match kind {
        "summary" => "a session title for the resume picker, not sent to the model".into(),
        "file-history-snapshot" => "file backups for undo, not sent to the model".into(),
        "queue-operation" => "typed-ahead input queue; the prompt itself is a user record".into(),
        "last-prompt" | "custom-title" | "ai-title" | "tag" | "agent-name" | "agent-color"
        | "agent-setting" | "mode" | "worktree-state" | "pr-link" => {
            "session metadata, not sent to the model".into()
        }
        _ => format!("record type {kind:?} is outside the conversation chain (no uuid or not a message)"),
    }
}

pub(crate) fn read(cx: &Cx<'_>, bytes: &[u8]) -> Result<Session, CaptureError> {
    let text = check_utf8(bytes, cx.file)?;
    let mut report = Report::default();
    let raw: Vec<(usize, &str)> = lines(text).collect();
    let mut recs: Vec<Rec> = Vec::with_capacity(raw.len());
    let mut raw_of: Vec<&str> = Vec::with_capacity(raw.len());
    for (k, (line, t)) in raw.iter().enumerate() {
        let Some(o) = parse_line(cx, *line, t, k.saturating_add(1) == raw.len(), &mut report)? else {
            continue;
        };
        let path = format!("line {line}");
        let kind = match o.get("type") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                return Err(cx.err(&format!("{path}.type"), format!("expected a string, found {}", kind(v))))
            }
            None => {
                return Err(cx.err(&format!("{path}.type"), "missing (every transcript record has a type)"))
            }
        };
        let s = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_string);
        recs.push(Rec {
            line: *line,
            kind,
            uuid: s("uuid"),
            parent: s("parentUuid"),
            side: o.get("isSidechain").and_then(Value::as_bool).unwrap_or(false),
            ts: s("timestamp"),
            o,
        });
        raw_of.push(t);
    }
    let by_uuid: HashMap<&str, usize> =
        recs.iter().enumerate().filter_map(|(i, r)| r.uuid.as_deref().map(|u| (u, i))).collect();
    let main_exists = recs.iter().any(|r| r.is_participant() && !r.side);
    if !main_exists && recs.iter().any(Rec::is_participant) {
        report.note("every record is a sidechain record (a subagent transcript): read as the main history");
    }
    let leaf = recs.iter().rposition(|r| r.is_participant() && (r.side != main_exists));
    let Some(leaf) = leaf else {
        return Err(cx.err(
            "(top level)",
            "no conversation records (user, assistant, system with a uuid): nothing to import",
        ));
    };
    let chain = active_chain(&recs, &by_uuid, leaf, &mut report);
    let chain = recover_parallel(&recs, chain, main_exists);
    let mut counted = vec![false; recs.len()];
    let mut model = None;
    let mut errors = Vec::new();
    let steps = {
        let mut b = Builder {
            cx,
            error: None,
            recs: &recs,
            raw: &raw_of,
            report: &mut report,
            apart: false,
            model: &mut model,
            errors: &mut errors,
        };
        let steps = b.steps(&chain, &mut counted);
        if let Some(e) = b.error.take() {
            return Err(e);
        }
        steps
    };
    // Sidechains (subagents), kept apart: grouped by agent id, else by their root record.
    let mut sidechains: Vec<Sidechain> = Vec::new();
    if main_exists {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if !r.side || counted.get(i) == Some(&true) || !r.is_participant() {
                continue;
            }
            let key = match r.str("agentId") {
                Some(a) => a.to_string(),
                None => root_of(&recs, &by_uuid, i),
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        for (key, members) in groups {
            let Some(&last) = members.last() else { continue };
            let mut scratch = Report::default();
            let sc = active_chain(&recs, &by_uuid, last, &mut scratch);
            let sc: Vec<usize> = sc.into_iter().filter(|i| recs.get(*i).is_some_and(|r| r.side)).collect();
            let mut no_model = None;
            let mut no_errors = Vec::new();
            let steps = {
                let mut b = Builder {
                    cx,
                    error: None,
                    recs: &recs,
                    raw: &raw_of,
                    report: &mut report,
                    apart: true,
                    model: &mut no_model,
                    errors: &mut no_errors,
                };
                let steps = b.steps(&sc, &mut counted);
                if let Some(e) = b.error.take() {
                    return Err(e);
                }
                steps
            };
            sidechains.push(Sidechain { id: key, history: timeline::fold(&steps) });
        }
    }
    // Everything else, accounted for.
    for (i, r) in recs.iter().enumerate() {
        if counted.get(i) == Some(&true) {
            continue;
        }
        let d = if r.side && main_exists {
            Disposition::Apart
        } else if r.is_participant() {
            Disposition::Skipped(
                "not on the active branch (abandoned by a rewind or an edited prompt)".into(),
            )
        } else {
            Disposition::Skipped(metadata_reason(&r.kind))
        };
        count_record(&mut report, r, d);
    }
    let id = recs.iter().find_map(|r| r.str("sessionId")).map(str::to_string);
    Ok(Session {
        format: RequestFormat::ClaudeCode,
        id,
        client: "claude-code",
        model,
        provider: Some("anthropic".into()),
        steps,
        sidechains,
        fields: Map::new(),
        report,
        errors,
    })
}

/// Counts a record and its blocks (and notable fields) under one disposition.
fn count_record(report: &mut Report, r: &Rec, d: Disposition) {
    let kind = match (r.kind.as_str(), r.subtype()) {
        ("system", Some(sub)) => format!("record:system/{sub}"),
        (k, _) => format!("record:{k}"),
    };
    report.count(&kind, d.clone());
    if let Some(Value::Array(blocks)) = r.message().and_then(|m| m.get("content")) {
        for b in blocks {
            let t = b.get("type").and_then(Value::as_str).unwrap_or("(untyped)");
            report.count(&format!("block:{t}"), d.clone());
        }
    } else if let Some(Value::String(_)) = r.message().and_then(|m| m.get("content")) {
        report.count("block:text", d.clone());
    }
    if r.o.contains_key("toolUseResult") {
        report.count("field:toolUseResult", d);
    }
}

/// The root uuid of a record's chain (for grouping sidechain records without an agent id).
fn root_of(recs: &[Rec], by_uuid: &HashMap<&str, usize>, mut i: usize) -> String {
    let mut seen = HashSet::new();
    while let Some(p) = recs.get(i).and_then(|r| r.parent.as_deref()).and_then(|p| by_uuid.get(p)) {
        if !seen.insert(*p) {
            break;
        }
        i = *p;
    }
    recs.get(i).and_then(|r| r.uuid.clone()).unwrap_or_default()
}

/// The chain ending at `leaf`, oldest first, continuing across compaction boundaries through
/// `logicalParentUuid`.
fn active_chain(
    recs: &[Rec],
    by_uuid: &HashMap<&str, usize>,
    leaf: usize,
    report: &mut Report,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = Some(leaf);
    while let Some((i, r)) = cur.and_then(|i| Some((i, recs.get(i)?))) {
        if !seen.insert(i) {
            report.note(format!("line {}: parentUuid cycle; the chain stops there", r.line));
            break;
        }
        out.push(i);
        let next = match (&r.parent, r.is_boundary()) {
            (Some(p), _) => Some(p.as_str()),
            (None, true) => r.str("logicalParentUuid"),
            (None, false) => None,
        };
        cur = match next {
            None => None,
            Some(p) => match by_uuid.get(p) {
                Some(&j) => Some(j),
                None => {
                    report.note(if r.is_boundary() && r.parent.is_none() {
                        format!(
                            "line {}: the history before this compaction is not in the file (logicalParentUuid {p})",
                            r.line
                        )
                    } else {
                        format!("line {}: parent {p} is not in the file; the chain starts here", r.line)
                    });
                    None
                }
            },
        };
    }
    out.reverse();
    out
}

/// Puts back what the single-parent walk leaves out after parallel tool calls: sibling
/// assistant records of a response on the chain (same `message.id`) and the tool results whose
/// parent is a member of that response. They go right after the response's last record on the
/// chain, siblings then results, each in timestamp order (file order on ties).
fn recover_parallel(recs: &[Rec], chain: Vec<usize>, main: bool) -> Vec<usize> {
    let on: HashSet<usize> = chain.iter().copied().collect();
    let eligible = |i: usize| recs.get(i).is_some_and(|r| r.side != main);
    let mut members: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut results_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if !eligible(i) {
            continue;
        }
        if r.kind == "assistant" {
            if let Some(mid) = r.message_id() {
                members.entry(mid).or_default().push(i);
            }
        } else if r.kind == "user" && r.has_tool_result() {
            if let Some(p) = r.parent.as_deref() {
                results_of.entry(p).or_default().push(i);
            }
        }
    }
    let mut anchor: HashMap<&str, usize> = HashMap::new();
    for &i in &chain {
        let Some(r) = recs.get(i) else { continue };
        if r.kind == "assistant" {
            if let Some(mid) = r.message_id() {
                anchor.insert(mid, i);
            }
        }
    }
    let mut added: HashSet<usize> = HashSet::new();
    let mut inserts: HashMap<usize, Vec<usize>> = HashMap::new();
    let ts = |i: usize| recs.get(i).and_then(|r| r.ts.as_deref());
    let by_time = |v: &mut Vec<usize>| v.sort_by(|a, b| ts(*a).cmp(&ts(*b)).then(a.cmp(b)));
    for (mid, &at) in &anchor {
        let group = members.get(mid).cloned().unwrap_or_default();
        let mut siblings: Vec<usize> =
            group.iter().copied().filter(|i| !on.contains(i) && !added.contains(i)).collect();
        let mut results: Vec<usize> = Vec::new();
        for m in &group {
            let Some(u) = recs.get(*m).and_then(|r| r.uuid.as_deref()) else { continue };
            for &t in results_of.get(u).map(Vec::as_slice).unwrap_or(&[]) {
                if !on.contains(&t) && !added.contains(&t) {
                    results.push(t);
                }
            }
        }
        if siblings.is_empty() && results.is_empty() {
            continue;
        }
        by_time(&mut siblings);
        by_time(&mut results);
        added.extend(siblings.iter().chain(&results));
        inserts.insert(at, siblings.into_iter().chain(results).collect());
    }
    if inserts.is_empty() {
        return chain;
    }
    let mut out = Vec::with_capacity(chain.len().saturating_add(added.len()));
    for i in chain {
        out.push(i);
        if let Some(v) = inserts.remove(&i) {
            out.extend(v);
        }
    }
    out
}

/// Turns chain records into steps, counting each record.
struct Builder<'a> {
    cx: &'a Cx<'a>,
    /// The first block the Anthropic reader refused (the read fails with it).
    error: Option<CaptureError>,
    recs: &'a [Rec],
    raw: &'a [&'a str],
    report: &'a mut Report,
    apart: bool,
    model: &'a mut Option<String>,
    errors: &'a mut Vec<SeenError>,
}

/// User input being gathered into one step.
struct Pending {
    tool_results: bool,
    messages: History,
    id: String,
    ts: Option<String>,
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

    fn steps(&mut self, chain: &[usize], counted: &mut [bool]) -> Vec<Step> {
        let mut steps: Vec<Step> = Vec::new();
        let mut pending: Option<Pending> = None;
        // Index in `steps` of a compaction still waiting for its summary record.
        let mut awaiting_summary: Option<usize> = None;
        let flush = |pending: &mut Option<Pending>, steps: &mut Vec<Step>| {
            if let Some(p) = pending.take() {
                if !p.messages.is_empty() {
                    steps.push(Step { id: p.id, ts: p.ts, change: Change::Input(p.messages) });
                }
            }
        };
        let recs = self.recs;
        let mut k = 0usize;
        while let Some(&i) = chain.get(k) {
            let Some(r) = recs.get(i) else {
                k = k.saturating_add(1);
                continue;
            };
            if let Some(c) = counted.get_mut(i) {
                *c = true;
            }
            match r.kind.as_str() {
                "assistant" if r.flag("isApiErrorMessage") => {
                    flush(&mut pending, &mut steps);
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
                        self.errors.push(SeenError { after_steps: steps.len(), ts: r.ts.clone(), status, message: text });
                    }
                    self.count_rec(
                        r,
                        Disposition::Skipped(
                            "an API error Claude Code wrote in place of a response (the failure it saw), not model output"
                                .into(),
                        ),
                    );
                }
                "assistant" => {
                    awaiting_summary = None;
                    flush(&mut pending, &mut steps);
                    let mut j = k.saturating_add(1);
                    if let Some(mid) = r.message_id() {
                        while let Some(&n) = chain.get(j) {
                            let same = recs.get(n).is_some_and(|x| x.kind == "assistant" && x.message_id() == Some(mid));
                            if !same {
                                break;
                            }
                            if let Some(c) = counted.get_mut(n) {
                                *c = true;
                            }
                            j = j.saturating_add(1);
                        }
                    }
                    let group: Vec<usize> = chain.get(k..j).unwrap_or_default().to_vec();
                    if let Some(step) = self.response(&group) {
                        steps.push(step);
                    }
                    k = j;
                    continue;
                }
                "user" if r.flag("isCompactSummary") && awaiting_summary.is_some() => {
                    flush(&mut pending, &mut steps);
                    let mut msgs = self.user(r, false);
                    for m in &mut msgs {
                        m.meta.is_summary = true;
                    }
                    if let Some(Step { id, change: Change::Compaction { history, .. }, .. }) =
                        awaiting_summary.take().and_then(|s| steps.get_mut(s))
                    {
                        *id = r.id(self.raw_line(i));
                        *history = msgs;
                    }
                    self.count_meta(r, Disposition::History);
                }
                "user" => {
                    // The summary is the message right after its boundary, or there is none.
                    awaiting_summary = None;
                    let tool_results = r.has_tool_result();
                    let same = pending.as_ref().is_some_and(|p| p.tool_results && tool_results);
                    // Result records of one turn are one user message on the wire.
                    let join = same && pending.as_ref().is_some_and(|p| !p.messages.is_empty());
                    let msgs = self.user(r, join);
                    self.count_meta(r, Disposition::History);
                    if !same {
                        flush(&mut pending, &mut steps);
                        pending =
                            Some(Pending { tool_results, messages: Vec::new(), id: String::new(), ts: r.ts.clone() });
                    }
                    if let Some(p) = pending.as_mut() {
                        p.messages.extend(msgs);
                        p.id = r.id(self.raw_line(i));
                    }
                }
                "system" if r.is_boundary() => {
                    flush(&mut pending, &mut steps);
                    let meta = r.o.get("compactMetadata");
                    let trigger = meta.and_then(|m| m.get("trigger")).and_then(Value::as_str).map(str::to_string);
                    let pre_tokens = meta.and_then(|m| m.get("preTokens")).and_then(Value::as_u64);
                    if meta.and_then(|m| m.get("preservedSegment")).is_some() {
                        self.report.note(format!(
                            "line {}: a partial compaction kept a preserved segment; its relinking is not applied (the summary alone is the post-compaction history)",
                            r.line
                        ));
                    }
                    awaiting_summary = Some(steps.len());
                    steps.push(Step {
                        id: r.id(self.raw_line(i)),
                        ts: r.ts.clone(),
                        change: Change::Compaction { trigger, pre_tokens, history: Vec::new(), exact: true },
                    });
                    self.count_rec(r, Disposition::History);
                }
                "system" => {
                    let sub = r.subtype().unwrap_or("(none)").to_string();
                    self.count_rec(r, Disposition::Skipped(format!("client event ({sub}), not sent to the model")));
                }
                "progress" => self.count_rec(r, Disposition::Skipped("progress update, not sent to the model".into())),
                "attachment" => self.count_rec(
                    r,
                    Disposition::Skipped(
                        "attachment: Claude Code renders it into the prompt at request time; the rendering is not in the file"
                            .into(),
                    ),
                ),
                other => {
                    let reason = format!("record type {other:?} is not a message");
                    self.count_rec(r, Disposition::Skipped(reason))
                }
            }
            k = k.saturating_add(1);
        }
        flush(&mut pending, &mut steps);
        steps
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
        let content = match r.message().and_then(|m| m.get("content")) {
            Some(c @ Value::String(_)) => c.clone(),
            Some(Value::Array(b)) if !b.is_empty() => Value::Array(b.clone()),
            _ => return History::new(),
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
                        self.count(&format!("block:tool_result.{it}"), disposition(tp));
                    }
                }
            } else {
                self.count(&format!("block:{ty}"), disposition(t));
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
            let Some(m) = r.message() else { continue };
            if let Some(model) = m.get("model").and_then(Value::as_str).filter(|m| *m != "<synthetic>") {
                *self.model = Some(model.to_string());
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
                _ => {}
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

/// What a block's template made of it: a slot is modeled (in the history), a verbatim copy is
/// carried opaquely.
fn disposition(template: &Value) -> Disposition {
    if shape::is_slot(template) {
        Disposition::History
    } else {
        Disposition::Opaque
    }
}
