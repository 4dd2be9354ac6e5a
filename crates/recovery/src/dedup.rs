//! Dedup of repeated file reads (behaviour spec section 7).
//!
//! **The read-result format recognised**: a native tool call whose name is one of `read_file`,
//! `read`, `Read`, `view`, `cat`, `open_file` (any case), with the path in `path`, `file_path` or
//! `file`, and an optional line range given as `offset` + `limit` (lines `offset ..
//! offset+limit-1`), `start_line` + `end_line` (inclusive), or `lines: "A-B"`; no range means the
//! whole file. The read's result is the tool message answering that call.
//!
//! When a later read of the same path covers the same or a wider range (or the whole file),
//! every earlier read of it becomes a one-line stub (archived first). A narrower later read never
//! replaces a wider earlier one; recall output, errors and verbatim messages are never touched.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

const READ_TOOLS: &[&str] = &["read_file", "read", "view", "cat", "open_file"];
const STUB_PREFIX: &str = "[Earlier read of ";

/// A line range; `None` bounds mean the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First line (1-based), or `None` for the whole file.
    pub lines: Option<(u64, u64)>,
}

impl Range {
    /// True when `self` covers `other`.
    pub fn covers(&self, other: &Range) -> bool {
        match (self.lines, other.lines) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some((a, b)), Some((c, d))) => a <= c && b >= d,
        }
    }

    fn describe(&self) -> String {
        match self.lines {
            None => "whole file".into(),
            Some((a, b)) => format!("lines {a}–{b}"),
        }
    }
}

/// The path and range a read call asks for, if it is a read.
pub fn read_of(name: &str, args: &Value) -> Option<(String, Range)> {
    let n = name.to_ascii_lowercase();
    if !READ_TOOLS.contains(&n.as_str()) {
        return None;
    }
    let path =
        ["path", "file_path", "file"].iter().find_map(|k| args.get(*k).and_then(Value::as_str))?.to_string();
    let num =
        |k: &str| args.get(k).and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())));
    let lines = if let (Some(o), Some(l)) = (num("offset"), num("limit")) {
        Some((o.max(1), o.max(1).saturating_add(l.max(1).saturating_sub(1))))
    } else if let (Some(a), Some(b)) = (num("start_line"), num("end_line")) {
        Some((a, b))
    } else if let Some((a, b)) = args.get("lines").and_then(Value::as_str).and_then(|s| s.split_once('-')) {
        Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
    } else {
        None
    };
    Some((path, Range { lines }))
}

/// What dedup did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DedupReport {
    /// Earlier reads stubbed.
    pub stubbed: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

/// Runs dedup.
pub fn dedup(
    history: &[Message],
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, DedupReport), ArchiveError> {
    // Which call each result answers.
    let mut reads: HashMap<&str, (String, Range)> = HashMap::new();
    for m in history.iter().filter(|m| m.role == Role::Assistant) {
        for c in &m.tool_calls {
            if let Some(r) = read_of(&c.name, &c.arguments) {
                reads.insert(c.id.as_str(), r);
            }
        }
    }
    let results: Vec<(usize, String, Range)> = history
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.role == Role::Tool
                && !m.is_error
                && !m.meta.preserve_verbatim
                && !m.content.starts_with(STUB_PREFIX)
        })
        .filter_map(|(i, m)| {
            m.tool_call_id.as_deref().and_then(|id| reads.get(id)).map(|(p, r)| (i, p.clone(), *r))
        })
        .collect();
    let mut out = history.to_vec();
    let mut report = DedupReport::default();
    for (k, (i, path, range)) in results.iter().enumerate() {
        let mut later = results.iter().skip(k.saturating_add(1));
        let superseded = later.any(|(_, p, r)| p == path && r.covers(range));
        let Some(m) = out.get_mut(*i).filter(|_| superseded) else { continue };
        let before = m.content.len();
        let mut stub = format!("{STUB_PREFIX}{path} ({}) superseded by a later read", range.describe());
        if let Some(key) = archiver.put(m.content.as_bytes())? {
            stub.push_str(&format!(" — recoverable via @recall {}", key.marker()));
        }
        stub.push(']');
        if stub.len() < before {
            report.stubbed = report.stubbed.saturating_add(1);
            report.freed_bytes = report.freed_bytes.saturating_add(before.saturating_sub(stub.len()) as u64);
            m.content = stub;
        }
    }
    Ok((out, report))
}
