//! The tool-result budget (behaviour spec section 6): per-result previews and a per-turn budget
//! cut largest-first, originals archived.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use salvage_types::truncate::{head, tail};
use serde::Serialize;

/// Head of a preview, at most.
pub const PREVIEW_HEAD: usize = 4_000;
/// Tail of a preview, at most.
pub const PREVIEW_TAIL: usize = 1_000;

/// The two limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Per result (`CHATCLI_TOOL_RESULT_MAX_CHARS`).
    pub per_result: usize,
    /// Per turn, a group of results (`CHATCLI_TOOL_RESULT_BUDGET_CHARS`).
    pub per_turn: usize,
}

impl Limits {
    /// Both limits halved (rung 1).
    pub fn halved(self) -> Limits {
        Limits { per_result: self.per_result / 2, per_turn: self.per_turn / 2 }
    }
}

/// What the budget did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BudgetReport {
    /// Results cut to a preview.
    pub previewed: usize,
    /// Bytes removed.
    pub freed_bytes: u64,
}

/// A preview of a long result: head at a line break, tail after one, and a banner between.
pub fn preview(content: &str) -> String {
    let mut h = head(content, PREVIEW_HEAD);
    if let Some(nl) = h.rfind('\n').filter(|&p| p >= PREVIEW_HEAD / 2) {
        h = &h[..=nl];
    }
    let mut t = tail(content, PREVIEW_TAIL);
    if let Some(nl) = t.find('\n').filter(|&p| p + 1 < t.len() && p < PREVIEW_TAIL / 2) {
        t = &t[nl + 1..];
    }
    let omitted = content.len() - h.len() - t.len();
    format!("{h}\n[... {omitted} chars of tool result omitted ({} total) ...]\n{t}", content.len())
}

fn cut(
    m: &mut Message,
    archiver: &mut Archiver<'_>,
    report: &mut BudgetReport,
) -> Result<bool, ArchiveError> {
    let before = m.content.len();
    if preview(&m.content).len() >= before {
        return Ok(false);
    }
    let Some(p) = archiver.reduce(&m.content, |body, _| Some(preview(body)))? else { return Ok(false) };
    report.previewed += 1;
    report.freed_bytes += (before - p.len()) as u64;
    m.content = p;
    Ok(true)
}

/// Applies the budget to a history (the input is not mutated).
pub fn apply(
    history: &[Message],
    limits: Limits,
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, BudgetReport), ArchiveError> {
    let mut out = history.to_vec();
    let mut report = BudgetReport::default();
    let mut i = 0;
    while i < out.len() {
        if !out[i].has_tool_calls() {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut end = start;
        while end < out.len() && out[end].role == Role::Tool {
            end += 1;
        }
        for m in &mut out[start..end] {
            if !m.meta.preserve_verbatim && m.content.len() > limits.per_result {
                cut(m, archiver, &mut report)?;
            }
        }
        loop {
            let total: usize = out[start..end].iter().map(|m| m.content.len()).sum();
            if total <= limits.per_turn {
                break;
            }
            // Largest first (first on ties), among results that can still be cut.
            let mut order: Vec<usize> = (start..end).filter(|&j| !out[j].meta.preserve_verbatim).collect();
            order.sort_by(|a, b| out[*b].content.len().cmp(&out[*a].content.len()).then(a.cmp(b)));
            let mut progressed = false;
            for j in order {
                if cut(&mut out[j], archiver, &mut report)? {
                    progressed = true;
                    break;
                }
            }
            if !progressed {
                break;
            }
        }
        i = end.max(i + 1);
    }
    Ok((out, report))
}
