//! The recovery ladder (behaviour spec section 4): three rungs of ever harder compaction, chosen
//! by the attempt number, each repairing pairing and archiving what it drops or cuts.

use crate::archive::{ArchiveError, Archiver};
use crate::pairing::{repair_tracked, PairingReport, Tracked};
use crate::shrink::{shrink, ShrinkReport};
use crate::task::task_index;
use crate::tool_budget::{self, BudgetReport, Limits};
use salvage_types::ccr_key::{marker_for, own_archive_key};
use salvage_types::message::{Message, Role};
use salvage_types::truncate::preserve_end;
use salvage_types::weight::{history_weight, message_weight};
use serde::Serialize;

pub use crate::notices::COMPACTION_NOTICE;
/// Rung 1 cuts assistant messages over this.
pub const RUNG1_ASSISTANT_MAX: usize = 5_000;
/// Rung 3 keeps this many non-system messages.
pub const RUNG3_KEEP: usize = 4;
/// Rung 3 caps each kept message at this.
pub const RUNG3_MESSAGE_MAX: usize = 4_000;

/// The second notice line, naming the archive of the dropped messages.
pub fn dropped_line(marker: &str) -> String {
    format!("[full transcript of the messages dropped by context recovery recoverable via @recall {marker}]")
}

/// A rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    /// Aggressive budget: halved tool-result budget, assistant messages over 5 000 bytes cut.
    Aggressive,
    /// Emergency truncate: keep the last N non-system messages.
    Emergency,
    /// Nuclear: the last 4, each capped at 4 000 bytes, then shrink to the payload budget.
    Nuclear,
}

impl Rung {
    /// The rung for a (1-based) attempt number: 1, 2, then 3 for every later attempt.
    pub fn for_attempt(attempt: u32) -> Rung {
        match attempt {
            0 | 1 => Rung::Aggressive,
            2 => Rung::Emergency,
            _ => Rung::Nuclear,
        }
    }

    /// 1, 2 or 3.
    pub fn number(self) -> u8 {
        match self {
            Rung::Aggressive => 1,
            Rung::Emergency => 2,
            Rung::Nuclear => 3,
        }
    }
}

/// What a rung is given besides the history.
pub struct RungContext<'a> {
    /// Where originals go (CCR on) or `None` (CCR off).
    pub archiver: Archiver<'a>,
    /// Messages rung 2 keeps (`CHATCLI_EMERGENCY_KEEP_MESSAGES`).
    pub keep: usize,
    /// The tool-result limits in force (rung 1 halves them).
    pub limits: Limits,
    /// The payload budget rung 3 shrinks to, if a cap is known.
    pub payload_budget: Option<u64>,
    /// Messages rung 3 keeps ([`RUNG3_KEEP`]; other values are fault injection for testing the
    /// replay checks).
    pub rung3_keep: usize,
}

/// What a rung did: everything the journal records and the CLI prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RungReport {
    /// 1, 2 or 3.
    pub rung: u8,
    /// True when the history came out identical: not a recovery.
    pub no_op: bool,
    /// Weight before.
    pub before_bytes: u64,
    /// Weight after.
    pub after_bytes: u64,
    /// Messages before.
    pub before_messages: usize,
    /// Messages after.
    pub after_messages: usize,
    /// Non-system messages dropped.
    pub dropped: usize,
    /// Messages whose content was cut in place.
    pub cut: usize,
    /// Short keys of everything archived, in order.
    pub archived: Vec<String>,
    /// The marker of the dropped-messages transcript, if any.
    pub dropped_marker: Option<String>,
    /// The pairing repair of the output.
    pub pairing: PairingReport,
    /// The tool-result budget (rung 1).
    pub budget: Option<BudgetReport>,
    /// Shrinking (rung 3).
    pub shrink: Option<ShrinkReport>,
    /// Whether the task message was kept (always true; reported for the journal).
    pub task_kept: bool,
}

impl RungReport {
    /// A one-line summary, e.g. `rung 2: 4.2 MB → 1.1 MB, 31 → 12 messages, 3 archived`.
    pub fn summary(&self) -> String {
        if self.no_op {
            return format!("rung {}: no-op (nothing to compact)", self.rung);
        }
        format!(
            "rung {}: {} → {}, {} → {} messages, {} archived",
            self.rung,
            salvage_types::format_bytes(self.before_bytes),
            salvage_types::format_bytes(self.after_bytes),
            self.before_messages,
            self.after_messages,
            self.archived.len()
        )
    }
}

/// A rung's result.
#[derive(Debug, Clone, PartialEq)]
pub struct RungOutcome {
    /// The new history.
    pub history: Vec<Message>,
    /// What was done.
    pub report: RungReport,
}

/// Cuts content with preserve-end truncation, archiving the original first when CCR is on.
fn cut_preserve_end(m: &mut Message, max: usize, archiver: &mut Archiver<'_>) -> Result<bool, ArchiveError> {
    if m.content.len() <= max || m.meta.preserve_verbatim {
        return Ok(false);
    }
    match archiver.reduce(&m.content, |body, room| preserve_end(body, max.saturating_sub(room)))? {
        Some(cut) => {
            m.content = cut;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// What a rung made of the history, before it is reported.
struct Shaped {
    out: Vec<Message>,
    dropped: usize,
    cut: usize,
    dropped_marker: Option<String>,
    pairing: PairingReport,
    budget: Option<BudgetReport>,
    shrink: Option<ShrinkReport>,
}

/// Applies a rung to a history (the input is not mutated).
pub fn apply(
    rung: Rung,
    history: &[Message],
    ctx: &mut RungContext<'_>,
) -> Result<RungOutcome, ArchiveError> {
    let task = task_index(history).and_then(|i| history.get(i)).cloned();
    let shaped = match rung {
        Rung::Aggressive => aggressive(history, ctx)?,
        Rung::Emergency | Rung::Nuclear => truncate(rung, history, ctx)?,
    };
    let task_kept = match &task {
        Some(t) => crate::task::task_survives(t, &shaped.out),
        None => true,
    };
    let report = RungReport {
        rung: rung.number(),
        no_op: shaped.out == history,
        before_bytes: history_weight(history),
        after_bytes: history_weight(&shaped.out),
        before_messages: history.len(),
        after_messages: shaped.out.len(),
        dropped: shaped.dropped,
        cut: shaped.cut,
        archived: ctx.archiver.keys.iter().map(|k| k.short()).collect(),
        dropped_marker: shaped.dropped_marker,
        pairing: shaped.pairing,
        budget: shaped.budget,
        shrink: shaped.shrink,
        task_kept,
    };
    Ok(RungOutcome { history: shaped.out, report })
}

/// Rung 1: pairing repair (orphans archived behind a notice), the halved tool-result budget,
/// assistant messages over [`RUNG1_ASSISTANT_MAX`] cut.
fn aggressive(history: &[Message], ctx: &mut RungContext<'_>) -> Result<Shaped, ArchiveError> {
    let items: Vec<Tracked> =
        history.iter().cloned().enumerate().map(|(i, msg)| Tracked { origin: Some(i), msg }).collect();
    let (items, pairing) = repair_tracked(items);
    // Orphans the repair removes are archived too, and so is the original of a message it
    // pruned a call from: nothing is lost.
    let kept = origins(&items, history.len());
    let whole = kept_whole(&items, history);
    let orphans = kept.iter().filter(|k| !**k).count();
    let archived: Vec<&Message> = history.iter().zip(&whole).filter(|(_, k)| !**k).map(|(m, _)| m).collect();
    let mut dropped_marker = None;
    let mut repaired: Vec<Message> = items.into_iter().map(|t| t.msg).collect();
    if !archived.is_empty() {
        // The orphans are dropped: the notice carries the marker of their archive so they stay
        // recallable (section 6).
        let (notice, marker) = dropped_notice(&archived, &mut ctx.archiver)?;
        dropped_marker = marker;
        let at = repaired.iter().take_while(|m| m.role == Role::System).count();
        repaired.insert(at, notice);
    }
    let (mut out, budget) = tool_budget::apply(&repaired, ctx.limits.halved(), &mut ctx.archiver)?;
    let mut cut = budget.previewed;
    for m in out.iter_mut().filter(|m| m.role == Role::Assistant) {
        if cut_preserve_end(m, RUNG1_ASSISTANT_MAX, &mut ctx.archiver)? {
            cut = cut.saturating_add(1);
        }
    }
    Ok(Shaped { out, dropped: orphans, cut, dropped_marker, pairing, budget: Some(budget), shrink: None })
}

/// Rungs 2 and 3: keep the last messages (verbatim ones within the quarter-budget rule); rung 3
/// also caps each kept message and shrinks to the payload budget.
fn truncate(rung: Rung, history: &[Message], ctx: &mut RungContext<'_>) -> Result<Shaped, ArchiveError> {
    let keep = if rung == Rung::Emergency { ctx.keep.max(1) } else { ctx.rung3_keep.max(1) };
    // Verbatim messages are kept as by compaction level 3, within the quarter-budget rule.
    let (mut out, dropped, dropped_marker, pairing) = keep_last(history, keep, true, &mut ctx.archiver)?;
    if let Some(budget) = ctx.payload_budget {
        cap_verbatim(&mut out, budget, &mut ctx.archiver)?;
    }
    let mut cut: usize = 0;
    let mut shrink_report = None;
    if rung == Rung::Nuclear {
        for m in out.iter_mut().filter(|m| m.role != Role::System && !is_notice(m)) {
            if cut_preserve_end(m, RUNG3_MESSAGE_MAX, &mut ctx.archiver)? {
                cut = cut.saturating_add(1);
            }
        }
        if let Some(budget) = ctx.payload_budget {
            let (shrunk, r) = shrink(&out, budget, &mut ctx.archiver)?;
            cut = cut.saturating_add(r.cuts);
            out = shrunk;
            shrink_report = Some(r);
        }
    }
    Ok(Shaped { out, dropped, cut, dropped_marker, pairing, budget: None, shrink: shrink_report })
}

/// The notice that stands for dropped messages, carrying the marker of their archived
/// transcript (CCR on), and that marker.
fn dropped_notice(
    dropped: &[&Message],
    archiver: &mut Archiver<'_>,
) -> Result<(Message, Option<String>), ArchiveError> {
    let mut notice = COMPACTION_NOTICE.to_string();
    let marker = archiver.put_transcript(dropped)?;
    if let Some(m) = &marker {
        notice.push('\n');
        notice.push_str(&dropped_line(m));
    }
    Ok((Message::user(notice), marker))
}

fn is_notice(m: &Message) -> bool {
    m.role == Role::User && m.content.starts_with(COMPACTION_NOTICE)
}

/// Keeps every system message (moved to the front) and the last `keep` non-system messages; the
/// kept part starts with a user message, and the task is kept before the window when it lies
/// outside it. Everything dropped (including orphans the pairing repair removes) is archived as
/// one JSON transcript, and the notice carries its marker.
#[allow(clippy::type_complexity)]
pub(crate) fn keep_last(
    history: &[Message],
    keep: usize,
    keep_verbatim: bool,
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, usize, Option<String>, PairingReport), ArchiveError> {
    let mut system = Vec::new();
    let mut rest = Vec::with_capacity(history.len());
    for (i, m) in history.iter().enumerate() {
        if m.role == Role::System {
            system.push(i)
        } else {
            rest.push(i)
        }
    }
    let mut window = kept_window(history, &rest, keep);
    if keep_verbatim {
        // Verbatim messages (recall results asked for in full) are kept at level 3, in order.
        let before: Vec<usize> = rest
            .iter()
            .copied()
            .filter(|i| history.get(*i).is_some_and(|m| m.meta.preserve_verbatim) && !window.contains(i))
            .collect();
        for (n, i) in before.into_iter().enumerate() {
            window.insert(n, i);
        }
        window.sort_unstable();
        // A verbatim tool result kept without its call becomes a user message below.
    }
    let items: Vec<Tracked> = system
        .iter()
        .chain(window.iter())
        .filter_map(|&i| Some(Tracked { origin: Some(i), msg: history.get(i)?.clone() }))
        .collect();
    let items = if keep_verbatim { downgrade_orphan_verbatim(items) } else { items };
    let (items, pairing) = repair_tracked(items);
    let kept = origins(&items, history.len());
    let whole = kept_whole(&items, history);
    let dropped = rest.iter().filter(|&&i| !kept.get(i).copied().unwrap_or(false)).count();
    // What was dropped, and the originals of kept messages the repair pruned a call from.
    let mut dropped_msgs: Vec<&Message> = Vec::with_capacity(dropped);
    dropped_msgs
        .extend(history.iter().zip(&whole).filter(|(m, w)| !**w && m.role != Role::System).map(|(m, _)| m));
    let n_system = items.iter().take_while(|t| t.msg.role == Role::System).count();
    let mut out: Vec<Message> = items.into_iter().map(|t| t.msg).collect();
    let mut marker = None;
    if !dropped_msgs.is_empty() {
        let (notice, m) = dropped_notice(&dropped_msgs, archiver)?;
        marker = m;
        out.insert(n_system, notice);
    }
    Ok((out, dropped, marker, pairing))
}

/// Which of `history`'s messages the tracked items kept whole: kept, with every tool call. A call
/// the pairing repair pruned (an empty or repeated id) from a message it kept is content the
/// output no longer holds: its message's original is archived with what was dropped.
pub(crate) fn kept_whole(items: &[Tracked], history: &[Message]) -> Vec<bool> {
    let mut whole = vec![false; history.len()];
    for t in items {
        let Some(o) = t.origin else { continue };
        if let (Some(w), Some(m)) = (whole.get_mut(o), history.get(o)) {
            *w = t.msg.tool_calls.len() >= m.tool_calls.len();
        }
    }
    whole
}

/// Which of a history's `len` messages the tracked items came from, by index (a flag per message:
/// truncation runs on every recovery attempt, and hashing each index cost a third of rung 2).
fn origins(items: &[Tracked], len: usize) -> Vec<bool> {
    let mut kept = vec![false; len];
    for o in items.iter().filter_map(|t| t.origin) {
        if let Some(k) = kept.get_mut(o) {
            *k = true;
        }
    }
    kept
}

/// The indices of the last `keep` non-system messages (`rest`), adjusted so the kept part starts
/// with a user message, or with the task placed before it when the task lies outside.
fn kept_window(history: &[Message], rest: &[usize], keep: usize) -> Vec<usize> {
    let role = |i: usize| history.get(i).map(|m| m.role);
    let start = rest.len().saturating_sub(keep);
    let mut window: Vec<usize> = rest.iter().skip(start).copied().collect();
    match task_index(history) {
        Some(t) if window.contains(&t) => {
            // The task is inside: start the kept part at the first user message.
            while let Some(&first) = window.first() {
                if role(first) == Some(Role::User) {
                    break;
                }
                window.remove(0);
            }
        }
        Some(t) => {
            // [better] The task lies before the window (native tool-call chains): keep it, placed
            // before the window, instead of dropping everything up to the next user message.
            while window.first().is_some_and(|&f| role(f) == Some(Role::Tool)) {
                window.remove(0);
            }
            window.insert(0, t);
        }
        None => {
            while window.first().is_some_and(|&f| role(f) != Some(Role::User)) && window.len() > 1 {
                window.remove(0);
            }
        }
    }
    window
}

/// A verbatim tool result whose call is gone becomes a user message, so pairing repair keeps it.
pub(crate) fn downgrade_orphan_verbatim(mut items: Vec<Tracked>) -> Vec<Tracked> {
    let ids: std::collections::HashSet<String> =
        items.iter().flat_map(|t| t.msg.tool_calls.iter().map(|c| c.id.clone())).collect();
    for t in items.iter_mut() {
        let m = &mut t.msg;
        if m.role == Role::Tool
            && m.meta.preserve_verbatim
            && !m.tool_call_id.as_ref().is_some_and(|id| ids.contains(id))
        {
            m.role = Role::User;
            m.tool_call_id = None;
            m.meta.agent_feedback = true;
        }
    }
    items
}

/// The verdict of one recovery attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// Attempts are used up: no rung ran.
    Exhausted {
        /// Attempts used.
        used: u32,
    },
    /// A rung ran (its report says whether it was a no-op).
    Ran(Box<RungOutcome>),
}

/// Runs recovery attempt `attempt` (1-based) of at most `max_attempts`.
pub fn attempt(
    attempt: u32,
    max_attempts: u32,
    history: &[Message],
    ctx: &mut RungContext<'_>,
) -> Result<Attempt, ArchiveError> {
    if attempt == 0 || attempt > max_attempts {
        return Ok(Attempt::Exhausted { used: attempt.saturating_sub(1).min(max_attempts) });
    }
    apply(Rung::for_attempt(attempt), history, ctx).map(|o| Attempt::Ran(Box::new(o)))
}

/// Keeps the ¼-budget cap on verbatim messages: beyond it the oldest are re-archived, become a
/// stub with a marker and lose the flag, so compaction always converges.
pub(crate) fn cap_verbatim(
    h: &mut [Message],
    budget: u64,
    archiver: &mut Archiver<'_>,
) -> Result<u64, ArchiveError> {
    let cap = budget / 4;
    let mut total: u64 = h.iter().filter(|m| m.meta.preserve_verbatim).map(message_weight).sum();
    let mut aged: u64 = 0;
    for m in h.iter_mut() {
        if total <= cap {
            break;
        }
        if !m.meta.preserve_verbatim {
            continue;
        }
        let w = message_weight(m);
        let marker = match archiver.put(m.content.as_bytes())? {
            Some(k) => format!(" {}", k.marker()),
            None => own_archive_key(&m.content).map(|k| format!(" {}", marker_for(k))).unwrap_or_default(),
        };
        m.content = format!(
            "[Recalled content aged out of the window — {} chars{marker}]",
            m.content.chars().count()
        );
        m.meta.preserve_verbatim = false;
        total = total.saturating_sub(w);
        aged = aged.saturating_add(1);
    }
    Ok(aged)
}
