//! The tool-result budget (behaviour spec section 6): per-result previews and a per-turn budget
//! cut largest-first, originals archived.
//!
//! **The per-result limit is applied whatever its value**: a result over it becomes a preview of
//! at most the limit ([`preview_within`]: the standard preview when it fits, else head and tail
//! shrunk around the banner, else the head alone), plus the archive suffix when CCR is on
//! (at most [`crate::archive::SUFFIX_LEN`] bytes). A cut that would not make the result shorter
//! (a result barely over a tiny limit, once the suffix is added) is not made: the budget never
//! makes a result heavier.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use salvage_types::truncate::head;
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

/// A preview of a long result: head at a line break, tail after one, and a banner between
/// (head ≤ [`PREVIEW_HEAD`], tail ≤ [`PREVIEW_TAIL`]).
pub fn preview(content: &str) -> String {
    shaped(content, PREVIEW_HEAD, PREVIEW_TAIL)
}

/// The preview of a result under a per-result limit of `max` bytes: the standard [`preview`]
/// when it fits; else head and tail shrunk 4:1 around the banner so that the whole is at most
/// `max`; else (a limit too small to hold the banner) the head alone, cut to `max` on a char
/// boundary. The archive suffix a cut gets comes on top of `max`.
pub fn preview_within(content: &str, max: usize) -> String {
    let standard = preview(content);
    if standard.len() <= max {
        return standard;
    }
    // The banner at its longest for this content: `omitted` is at most the content's length.
    let longest_banner = banner(content.len(), content.len()).len();
    match max.checked_sub(longest_banner).filter(|room| *room > 0) {
        Some(room) => {
            let head_max = room.saturating_mul(4) / 5;
            shaped(content, head_max, room.saturating_sub(head_max))
        }
        None => head(content, max).to_string(),
    }
}

fn banner(omitted: usize, total: usize) -> String {
    format!("\n[... {omitted} chars of tool result omitted ({total} total) ...]\n")
}

/// Head of at most `head_max` bytes (cut back to a line break past its half), tail of at most
/// `tail_max` bytes taken from what follows the head (cut forward past a line break in its first
/// half), and the banner between. Head and tail never overlap.
fn shaped(content: &str, head_max: usize, tail_max: usize) -> String {
    crate::preview::head_and_tail(content, head_max, tail_max, tail_max / 2, |omitted| {
        banner(omitted, content.len())
    })
}

fn cut(
    m: &mut Message,
    max: usize,
    archiver: &mut Archiver<'_>,
    report: &mut BudgetReport,
) -> Result<bool, ArchiveError> {
    let before = m.content.len();
    if preview_within(&m.content, max).len() >= before {
        return Ok(false);
    }
    let Some(p) = archiver.reduce(&m.content, |body, _| Some(preview_within(body, max)))? else {
        return Ok(false);
    };
    report.previewed = report.previewed.saturating_add(1);
    report.freed_bytes = report.freed_bytes.saturating_add(before.saturating_sub(p.len()) as u64);
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
    let mut i = 0usize;
    while let Some(m) = out.get(i) {
        if !m.has_tool_calls() {
            i = i.saturating_add(1);
            continue;
        }
        // The group: the tool messages right after the call.
        let start = i.saturating_add(1);
        let end = start.saturating_add(out.iter().skip(start).take_while(|m| m.role == Role::Tool).count());
        let Some(group) = out.get_mut(start..end) else { break };
        for m in group.iter_mut() {
            if !m.meta.preserve_verbatim && m.content.len() > limits.per_result {
                cut(m, limits.per_result, archiver, &mut report)?;
            }
        }
        loop {
            let total = group.iter().map(|m| m.content.len()).fold(0, usize::saturating_add);
            if total <= limits.per_turn {
                break;
            }
            // Largest first (first on ties), among results that can still be cut.
            let mut order: Vec<(usize, usize)> = group
                .iter()
                .enumerate()
                .filter(|(_, m)| !m.meta.preserve_verbatim)
                .map(|(j, m)| (j, m.content.len()))
                .collect();
            order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut progressed = false;
            for (j, _) in order {
                let Some(m) = group.get_mut(j) else { continue };
                if cut(m, limits.per_result, archiver, &mut report)? {
                    progressed = true;
                    break;
                }
            }
            if !progressed {
                break;
            }
        }
        i = end.max(i.saturating_add(1));
    }
    Ok((out, report))
}
