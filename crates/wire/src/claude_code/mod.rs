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

mod build;
mod chain;

use crate::session::{line_id, lines, note_joined, parse_line, Disposition, Report, Session, Sidechain};
use crate::{kind, Cx};
use build::Builder;
use chain::{active_chain, recover_parallel, root_of};
use salvage_types::capture::{check_utf8, CaptureError, RequestFormat};
use salvage_types::timeline;
use serde_json::{Map, Value};
use std::collections::HashMap;

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
    let (recs, raw) = parse_records(cx, text, &mut report)?;
    let by_uuid: HashMap<&str, usize> =
        recs.iter().enumerate().filter_map(|(i, r)| r.uuid.as_deref().map(|u| (u, i))).collect();
    let main_exists = recs.iter().any(|r| r.is_participant() && !r.side);
    if !main_exists && recs.iter().any(Rec::is_participant) {
        report.note("every record is a sidechain record (a subagent transcript): read as the main history");
    }
    // A line repeating an earlier record (same uuid) is not where the conversation ended.
    let mut first_of: HashMap<&str, usize> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if let Some(u) = r.uuid.as_deref() {
            first_of.entry(u).or_insert(i);
        }
    }
    let repeat = |i: usize, r: &Rec| r.uuid.as_deref().is_some_and(|u| first_of.get(u) != Some(&i));
    let leaf = recs
        .iter()
        .enumerate()
        .rev()
        .find(|(i, r)| r.is_participant() && (r.side != main_exists) && !repeat(*i, r))
        .map(|(i, _)| i);
    let Some(leaf) = leaf else {
        return Err(cx.err(
            "(top level)",
            "no conversation records (user, assistant, system with a uuid): nothing to import",
        ));
    };
    let chain = active_chain(&recs, &by_uuid, leaf, &mut report);
    let chain = recover_parallel(&recs, chain, main_exists);
    let mut counted = vec![false; recs.len()];
    let main = Builder::new(cx, &recs, &raw, &mut report, false).run(&chain, &mut counted)?;
    let sidechains = if main_exists {
        read_sidechains(cx, (&recs, &raw), &by_uuid, &mut report, &mut counted)?
    } else {
        Vec::new()
    };
    account_rest(&recs, &counted, main_exists, &mut report);
    let id = recs.iter().find_map(|r| r.str("sessionId")).map(str::to_string);
    // A subagent transcript carries its parent's `sessionId`: as a session of its own it is
    // named after the agent too, so that importing it beside the parent's file does not take
    // (and rewind) the parent's session.
    let id = match recs.iter().find_map(|r| r.str("agentId")).filter(|_| !main_exists) {
        Some(agent) => id.map(|s| format!("{s}-agent-{agent}")),
        None => id,
    };
    Ok(Session {
        format: RequestFormat::ClaudeCode,
        id,
        client: "claude-code",
        model: main.model,
        provider: Some("anthropic".into()),
        steps: main.steps,
        sidechains,
        fields: Map::new(),
        report,
        errors: main.errors,
    })
}

/// Parses every line into a record (with the text of its line), or fails on a record without a
/// string `type`.
fn parse_records<'t>(
    cx: &Cx<'_>,
    text: &'t str,
    report: &mut Report,
) -> Result<(Vec<Rec>, Vec<&'t str>), CaptureError> {
    let raw: Vec<(usize, &str)> = lines(text).collect();
    note_joined(&raw, report);
    let mut recs: Vec<Rec> = Vec::with_capacity(raw.len());
    let mut raw_of: Vec<&str> = Vec::with_capacity(raw.len());
    for (k, &(line, t)) in raw.iter().enumerate() {
        let Some(o) = parse_line(cx, line, t, k.saturating_add(1) == raw.len(), report)? else {
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
            line,
            kind,
            uuid: s("uuid"),
            parent: s("parentUuid"),
            side: o.get("isSidechain").and_then(Value::as_bool).unwrap_or(false),
            ts: s("timestamp"),
            o,
        });
        raw_of.push(t);
    }
    Ok((recs, raw_of))
}

/// Sidechains (subagents), kept apart: grouped by agent id, else by their root record, each read
/// along its own active chain.
fn read_sidechains(
    cx: &Cx<'_>,
    (recs, raw): (&[Rec], &[&str]),
    by_uuid: &HashMap<&str, usize>,
    report: &mut Report,
    counted: &mut [bool],
) -> Result<Vec<Sidechain>, CaptureError> {
    let mut sidechains: Vec<Sidechain> = Vec::new();
    for (key, members) in sidechain_groups(recs, by_uuid, counted) {
        let Some(&last) = members.last() else { continue };
        let mut scratch = Report::default();
        let sc = active_chain(recs, by_uuid, last, &mut scratch);
        let sc: Vec<usize> = sc.into_iter().filter(|i| recs.get(*i).is_some_and(|r| r.side)).collect();
        let built = Builder::new(cx, recs, raw, report, true).run(&sc, counted)?;
        sidechains.push(Sidechain { id: key, history: timeline::fold(&built.steps) });
    }
    Ok(sidechains)
}

/// The sidechain records not on the main chain, grouped by agent id (else by root uuid), in
/// order of first appearance.
fn sidechain_groups(
    recs: &[Rec],
    by_uuid: &HashMap<&str, usize>,
    counted: &[bool],
) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        if !r.side || counted.get(i) == Some(&true) || !r.is_participant() {
            continue;
        }
        let key = match r.str("agentId") {
            Some(a) => a.to_string(),
            None => root_of(recs, by_uuid, i),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups
}

/// Everything no chain took, accounted for: sidechain records apart, abandoned branches and
/// metadata records skipped.
fn account_rest(recs: &[Rec], counted: &[bool], main_exists: bool, report: &mut Report) {
    for (i, r) in recs.iter().enumerate() {
        if counted.get(i) == Some(&true) {
            continue;
        }
        let d = if r.side && main_exists {
            Disposition::Apart
        } else if r.kind == "progress" {
            // Hook and tool progress hang off the chain as leaves: never sent, never a rewind (a
            // real 2.1.56 file had 211 of them called abandoned branches).
            Disposition::Skipped(
                "a progress update beside the conversation (hooks, tools), not sent to the model".into(),
            )
        } else if r.is_participant() {
            Disposition::Skipped(
                "not on the active branch (abandoned by a rewind or an edited prompt)".into(),
            )
        } else {
            Disposition::Skipped(metadata_reason(&r.kind))
        };
        count_record(report, r, d);
    }
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
