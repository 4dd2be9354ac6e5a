//! Shrinking content to a budget (behaviour spec section 5).

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use salvage_types::truncate::structure_preserving;
use salvage_types::weight::{history_weight, message_weight};
use serde::Serialize;

/// Content at or below this is never shrunk.
pub const MIN_SHRINK: usize = 400;
/// Slack left for the banner when computing the cut.
pub const BANNER_SLACK: u64 = 96;

/// What shrinking did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShrinkReport {
    /// Cuts made (a message may be cut more than once).
    pub cuts: usize,
    /// Weight before.
    pub before_bytes: u64,
    /// Weight after.
    pub after_bytes: u64,
    /// Whether the result fits the budget.
    pub fits: bool,
}

/// Shrinks the largest non-system, non-verbatim content over 400 bytes (first on ties), again
/// and again, until the history weight fits `budget` or nothing shrinks. The input is not mutated.
pub fn shrink(
    history: &[Message],
    budget: u64,
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, ShrinkReport), ArchiveError> {
    let mut out = history.to_vec();
    let mut weights: Vec<u64> = out.iter().map(message_weight).collect();
    let mut total: u64 = weights.iter().sum();
    let mut report = ShrinkReport { before_bytes: total, ..ShrinkReport::default() };
    let mut stuck = vec![false; out.len()];
    while total > budget {
        let mut best: Option<usize> = None;
        for (i, m) in out.iter().enumerate() {
            if stuck[i] || m.role == Role::System || m.meta.preserve_verbatim || m.content.len() <= MIN_SHRINK
            {
                continue;
            }
            if best.is_none_or(|b| m.content.len() > out[b].content.len()) {
                best = Some(i);
            }
        }
        let Some(i) = best else { break };
        let len = out[i].content.len() as u64;
        let target = len.saturating_sub(total - budget).saturating_sub(BANNER_SLACK).max(MIN_SHRINK as u64);
        let target = usize::try_from(target).unwrap_or(MIN_SHRINK);
        let Some(cut) = archiver.reduce(&out[i].content, |body, room| {
            structure_preserving(body, target.saturating_sub(room).max(MIN_SHRINK))
        })?
        else {
            stuck[i] = true;
            continue;
        };
        out[i].content = cut;
        report.cuts += 1;
        let w = message_weight(&out[i]);
        total = total - weights[i] + w;
        weights[i] = w;
    }
    report.after_bytes = history_weight(&out);
    report.fits = report.after_bytes <= budget;
    Ok((out, report))
}
