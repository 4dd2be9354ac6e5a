//! The compaction pipeline (behaviour spec section 7): trim, summarize, emergency truncate then
//! shrink, with the lifecycle guarantees — undo snapshot only for a real rewrite, hooks before
//! and after, memory flushed before the rewrite, counters, phase status and cancellation that
//! leaves the history untouched. Every step is returned as journal events.

use crate::archive::{ArchiveError, Archiver};
use crate::gate;
use crate::ladder::{cap_verbatim, downgrade_orphan_verbatim, keep_last};
use crate::pairing::{repair_tracked, Tracked};
use crate::shrink::shrink;
use crate::summarizer::{Cancel, SummarizeError, Summarizer, SummaryRequest};
use crate::task::task_index;
use crate::trim::trim;
use salvage_types::ccr_key::own_archive_key;
use salvage_types::event::{Cost, EventBody, StepOutcome, Trigger};
use salvage_types::format_bytes;
use salvage_types::message::{Message, Role};
use salvage_types::weight::history_weight;
use serde::{Deserialize, Serialize};

/// Messages kept verbatim at the end by levels 2 and 3.
pub const MIN_KEEP_RECENT: usize = 6;
/// Level 2 needs at least this many messages in the segment.
pub const MIN_SEGMENT: usize = 4;
/// The summarizer input floor.
pub const SUMMARIZER_INPUT_FLOOR: usize = 20_000;
/// Each message's share of the summarizer input is at least this.
pub const MIN_SHARE: usize = 600;
/// Compactions skipped at level 2 after a summary that did not fit.
pub const BACKOFF: u8 = 2;
/// Prefix of the summary message.
pub fn summary_header(n: usize) -> String {
    format!("[STRUCTURED SUMMARY — covering {n} earlier messages]")
}

/// State that persists with the session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionState {
    /// Compactions left that skip level 2.
    pub backoff: u8,
    /// Applied compactions.
    pub compactions: u64,
    /// Applied compactions that reached level 3.
    pub level3: u64,
    /// Summarizer usage.
    pub cost: Cost,
    /// Undo snapshots: the history before each applied rewrite, most recent last.
    pub undo: Vec<Vec<Message>>,
}

/// A compaction phase, for status callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Starting.
    Start,
    /// Level 1.
    Trim,
    /// Level 2.
    Summarize,
    /// Level 3.
    Emergency,
    /// Finished.
    Done,
}

/// A hook invocation (`PreCompact` / `PostCompact`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookCall {
    /// `PreCompact` or `PostCompact`.
    pub event: &'static str,
    /// auto, manual or recovery.
    pub trigger: Trigger,
    /// applied or skipped (PostCompact only).
    pub outcome: Option<StepOutcome>,
}

/// How one hook ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookResult {
    /// The hook's name.
    pub name: String,
    /// Ran (applied), failed or timed out.
    pub outcome: StepOutcome,
    /// What went wrong.
    pub error: Option<String>,
    /// How long it took.
    pub millis: u64,
}

/// Runs the configured hooks for an event. A failing or slow hook is reported, never fatal.
pub trait Hooks {
    /// Fires every hook configured for `call.event`.
    fn fire(&mut self, call: &HookCall) -> Vec<HookResult>;
}

/// Where the not-yet-extracted segment goes before it is replaced.
pub trait MemorySink {
    /// Takes the messages about to be summarized away.
    fn flush(&mut self, segment: &[Message]);
}

/// No hooks.
pub struct NoHooks;
impl Hooks for NoHooks {
    fn fire(&mut self, _call: &HookCall) -> Vec<HookResult> {
        Vec::new()
    }
}

/// No memory worker.
pub struct NoMemory;
impl MemorySink for NoMemory {
    fn flush(&mut self, _segment: &[Message]) {
        // Nothing takes the segment.
    }
}

/// Everything the pipeline reaches the outside through.
pub struct Io<'a> {
    /// Where originals go.
    pub archiver: Archiver<'a>,
    /// Recovers an archived original by short key (to restore stubs for the summarizer).
    pub lookup: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    /// The level-2 summarizer.
    pub summarizer: &'a mut dyn Summarizer,
    /// Hooks.
    pub hooks: &'a mut dyn Hooks,
    /// The memory worker.
    pub memory: &'a mut dyn MemorySink,
    /// Phase status, in the seed's wording.
    pub status: &'a mut dyn FnMut(Phase, &str),
    /// Cancellation.
    pub cancel: &'a Cancel,
}

/// What to compact to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// The byte budget (history weight).
    pub budget: u64,
    /// What started it.
    pub trigger: Trigger,
    /// Messages kept at the end.
    pub min_keep_recent: usize,
    /// The summarizer model's window in chars (its input is budgeted to half, floor 20 000).
    pub summarizer_window_chars: usize,
}

/// Why a compaction did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// Cancelled: the history is untouched.
    #[error("compaction cancelled; history untouched")]
    Cancelled,
    /// Archiving failed (nothing is dropped without its original archived).
    #[error(transparent)]
    Archive(#[from] ArchiveError),
}

/// A compaction's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The new history (equal to the input when skipped).
    pub history: Vec<Message>,
    /// Applied (rewritten) or skipped.
    pub outcome: StepOutcome,
    /// The highest level that ran (0 when nothing was needed).
    pub level: u8,
    /// Events for the journal, in order.
    pub events: Vec<EventBody>,
}

fn leading_system(h: &[Message]) -> usize {
    h.iter().take_while(|m| m.role == Role::System).count()
}

/// The summarizer's budgeted view of a segment: a fair share per message, stubs restored from
/// CCR when the original fits, long content kept head and tail 3:1, native calls named.
pub fn render_segment(
    segment: &[Message],
    window_chars: usize,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> String {
    let budget = (window_chars / 2).max(SUMMARIZER_INPUT_FLOOR);
    let share = budget.checked_div(segment.len()).unwrap_or(budget).max(MIN_SHARE);
    let mut out = String::new();
    for m in segment {
        let mut content = m.content.clone();
        // Only a stub or cut salvage wrote stands for an archived original: a note that merely
        // quotes a marker is shown as written.
        if let Some(k) = own_archive_key(&m.content) {
            let orig = lookup(k).and_then(|b| String::from_utf8(b).ok());
            if let Some(orig) = orig.filter(|o| salvage_types::ccr_key::made_from(&m.content, o)) {
                if orig.len() <= share && !orig.trim_start().starts_with("[{") {
                    content = orig;
                }
            }
        }
        if content.len() > share {
            let h = salvage_types::truncate::head(&content, share.saturating_mul(3) / 4);
            let t = salvage_types::truncate::tail(&content, share / 4);
            content = format!("{h}\n…\n{t}");
        }
        out.push_str(&format!("[{}] {content}\n", m.role.as_str()));
        for c in &m.tool_calls {
            let args = c.arguments.to_string();
            out.push_str(&format!("  → calls {}({})\n", c.name, salvage_types::truncate::head(&args, 200)));
        }
    }
    out
}

/// The instruction handed to model and MCP summarizers.
pub fn instruction(budget_chars: usize) -> String {
    format!(
        "Summarize the conversation segment into a structured summary in English with sections: current task, files read, files modified, commands run and their results, errors, decisions, and what remains to do. Keep paths, identifiers and numbers exact. Stay under {budget_chars} characters. Output only the summary."
    )
}

/// Runs the pipeline on a history. The input is never mutated; a cancelled or failed run leaves
/// nothing behind (no undo snapshot, `PostCompact` with `outcome=skipped`).
pub fn compact(
    history: &[Message],
    plan: &Plan,
    state: &mut CompactionState,
    io: &mut Io<'_>,
) -> Result<Outcome, CompactError> {
    let mut events = Vec::new();
    let before_w = history_weight(history);
    (io.status)(
        Phase::Start,
        &format!(
            "📦 Compacting history ({} msgs, {} → target {})",
            history.len(),
            format_bytes(before_w),
            format_bytes(plan.budget)
        ),
    );
    for r in io.hooks.fire(&HookCall { event: "PreCompact", trigger: plan.trigger, outcome: None }) {
        events.push(EventBody::HookFired {
            name: r.name,
            event: "PreCompact".into(),
            outcome: r.outcome,
            error: r.error,
            millis: r.millis,
        });
    }
    let result = run_levels(history, plan, state, io, &mut events);
    let (final_history, level, backoff_skip, cost) = match result {
        Ok(v) => v,
        Err(e) => {
            finish(
                history,
                history,
                plan,
                state,
                io,
                &mut events,
                0,
                false,
                Cost::default(),
                StepOutcome::Skipped,
            );
            return Err(e);
        }
    };
    let outcome = if final_history == history { StepOutcome::Skipped } else { StepOutcome::Applied };
    finish(history, &final_history, plan, state, io, &mut events, level, backoff_skip, cost, outcome);
    Ok(Outcome { history: final_history, outcome, level, events })
}

#[allow(clippy::too_many_arguments)]
fn finish(
    before: &[Message],
    after: &[Message],
    plan: &Plan,
    state: &mut CompactionState,
    io: &mut Io<'_>,
    events: &mut Vec<EventBody>,
    level: u8,
    backoff_skip: bool,
    cost: Cost,
    outcome: StepOutcome,
) {
    state.cost.add(&cost);
    if outcome == StepOutcome::Applied {
        // The undo snapshot exists only for a real rewrite.
        state.undo.push(before.to_vec());
        state.compactions = state.compactions.saturating_add(1);
        if level >= 3 {
            state.level3 = state.level3.saturating_add(1);
        }
    }
    events.push(EventBody::Compaction {
        trigger: plan.trigger,
        level,
        outcome,
        backoff_skip,
        route: (level >= 2 || cost.calls > 0).then(|| io.summarizer.route()),
        cost,
        by: None,
        pre_tokens: None,
        archived: None,
    });
    for r in io.hooks.fire(&HookCall { event: "PostCompact", trigger: plan.trigger, outcome: Some(outcome) })
    {
        events.push(EventBody::HookFired {
            name: r.name,
            event: "PostCompact".into(),
            outcome: r.outcome,
            error: r.error,
            millis: r.millis,
        });
    }
    let msg = match outcome {
        StepOutcome::Applied => format!(
            "✓ Compaction applied ({} → {} msgs, {} → {})",
            before.len(),
            after.len(),
            format_bytes(history_weight(before)),
            format_bytes(history_weight(after))
        ),
        StepOutcome::Skipped | StepOutcome::Failed => "✓ Nothing to compact (history unchanged)".to_string(),
    };
    (io.status)(Phase::Done, &msg);
}

#[allow(clippy::type_complexity)]
fn run_levels(
    history: &[Message],
    plan: &Plan,
    state: &mut CompactionState,
    io: &mut Io<'_>,
    events: &mut Vec<EventBody>,
) -> Result<(Vec<Message>, u8, bool, Cost), CompactError> {
    let mut cost = Cost::default();
    if io.cancel.is_cancelled() {
        return Err(CompactError::Cancelled);
    }
    // Level 1: trim.
    (io.status)(Phase::Trim, "🧹 Trim: removing reasoning/dedup (no LLM)…");
    let (mut h, _) = trim(history, &mut io.archiver)?;
    cap_verbatim(&mut h, plan.budget, &mut io.archiver)?;
    if history_weight(&h) <= plan.budget {
        return Ok((h, 1, false, cost));
    }
    // Level 2: summarize the middle.
    let mut backoff_skip = false;
    if state.backoff > 0 {
        state.backoff = state.backoff.saturating_sub(1);
        backoff_skip = true;
    } else if let Some(summarized) = summarize(&h, plan, io, events, &mut cost)? {
        h = summarized;
        if history_weight(&h) <= plan.budget {
            return Ok((h, 2, false, cost));
        }
        state.backoff = BACKOFF;
    }
    if io.cancel.is_cancelled() {
        return Err(CompactError::Cancelled);
    }
    // Level 3: emergency truncate, notice with marker, then shrink.
    (io.status)(
        Phase::Emergency,
        "⚠ Emergency truncate: keeping the most recent messages (originals archived)…",
    );
    let (t, _, _, _) = keep_last(&h, plan.min_keep_recent, true, &mut io.archiver)?;
    let (mut s, _) = shrink(&t, plan.budget, &mut io.archiver)?;
    cap_verbatim(&mut s, plan.budget, &mut io.archiver)?;
    Ok((s, 3, backoff_skip, cost))
}

/// Level 2. Returns `None` when there is no segment or both tries were rejected.
fn summarize(
    h: &[Message],
    plan: &Plan,
    io: &mut Io<'_>,
    events: &mut Vec<EventBody>,
    cost: &mut Cost,
) -> Result<Option<Vec<Message>>, CompactError> {
    let (start, cut) = segment_bounds(h, plan.min_keep_recent);
    let segment = h.get(start..cut).unwrap_or_default();
    if segment.len() < MIN_SEGMENT {
        return Ok(None);
    }
    (io.status)(Phase::Summarize, "🧠 Summarizing older messages via LLM (may take 30-90s — ESC cancels)…");
    let Some(text) = ask_summary(segment, plan, io, events, cost)? else { return Ok(None) };
    // The not-yet-extracted segment goes to memory before it is replaced.
    io.memory.flush(segment);
    replace_segment(h, start, cut, &text, &mut io.archiver).map(Some)
}

/// The segment to summarize, `start..cut`: after the leading system block, before the
/// `min_keep_recent` last messages, never splitting a tool block.
fn segment_bounds(h: &[Message], min_keep_recent: usize) -> (usize, usize) {
    let start = leading_system(h);
    let mut cut = h.len().saturating_sub(min_keep_recent).max(start);
    // Snap the cut so a tool block is never split: results stay with their call.
    // With nothing kept at the end (`min_keep_recent` 0) the cut is the history's end: no block
    // to split.
    while cut > start && h.get(cut).is_some_and(|m| m.role == Role::Tool) {
        cut = cut.saturating_sub(1);
    }
    (start, cut)
}

/// Asks the summarizer, at most twice, for a summary that passes the gate; every attempt is an
/// event. `None` when both were rejected.
fn ask_summary(
    segment: &[Message],
    plan: &Plan,
    io: &mut Io<'_>,
    events: &mut Vec<EventBody>,
    cost: &mut Cost,
) -> Result<Option<String>, CompactError> {
    let rendered = render_segment(segment, plan.summarizer_window_chars, io.lookup);
    let seg_chars: usize = segment.iter().map(|m| m.content.len()).sum();
    let budget_chars = (plan.budget as usize / 8).clamp(800, 8_000);
    let req = SummaryRequest {
        segment: segment.to_vec(),
        rendered,
        budget_chars,
        instruction: instruction(budget_chars),
    };
    for attempt in 1..=2u32 {
        match io.summarizer.summarize(&req, io.cancel) {
            Ok(a) => {
                cost.add(&a.cost);
                let verdict = gate::check(&a.text, seg_chars);
                events.push(EventBody::SummaryAttempt {
                    attempt,
                    passed: verdict.is_ok(),
                    reason: verdict.as_ref().err().cloned(),
                    chars: a.text.chars().count() as u64,
                });
                if verdict.is_ok() {
                    return Ok(Some(a.text));
                }
            }
            Err(SummarizeError::Cancelled) => return Err(CompactError::Cancelled),
            Err(e) => events.push(EventBody::SummaryAttempt {
                attempt,
                passed: false,
                reason: Some(e.to_string()),
                chars: 0,
            }),
        }
        if io.cancel.is_cancelled() {
            return Err(CompactError::Cancelled);
        }
    }
    Ok(None)
}

/// The history with `start..cut` replaced by the summary `text` (its transcript archived), the
/// verbatim messages and the task of the segment re-attached after it, pairing repaired.
fn replace_segment(
    h: &[Message],
    start: usize,
    cut: usize,
    text: &str,
    archiver: &mut Archiver<'_>,
) -> Result<Vec<Message>, CompactError> {
    let segment = h.get(start..cut).unwrap_or_default();
    let mut content = format!("{}\n\n{}", summary_header(segment.len()), text.trim());
    if let Some(marker) = archiver.put_transcript(segment)? {
        content.push_str(&format!(
            "\n\n[full transcript of the summarized messages recoverable via @recall {marker}]"
        ));
    }
    let kept = kept_after_summary(h, start, cut);
    let items: Vec<Tracked> =
        kept.iter().filter_map(|&i| Some(Tracked { origin: Some(i), msg: h.get(i)?.clone() })).collect();
    let items = downgrade_orphan_verbatim(items);
    let (mut items, _) = repair_tracked(items);
    // Removed by the repair, or kept with a call it pruned: their originals are archived.
    let whole = crate::ladder::kept_whole(&items, h);
    let removed: Vec<&Message> =
        kept.iter().filter(|&&i| !whole.get(i).copied().unwrap_or(false)).filter_map(|&i| h.get(i)).collect();
    if !removed.is_empty() {
        // Orphans the repair removes stay recallable (section 6): the summary carries the marker
        // of their transcript.
        if let Some(marker) = archiver.put_transcript(&removed)? {
            content.push('\n');
            content.push_str(&crate::ladder::dropped_line(&marker));
        }
    }
    let mut summary = Message::user(content);
    summary.meta.is_summary = true;
    summary.meta.summary_of = Some(segment.len() as u64);
    // The summary goes right after the leading system block (the repair keeps it as it is).
    let at = items.iter().take_while(|t| t.origin.is_some_and(|o| o < start)).count();
    items.insert(at, Tracked { origin: None, msg: summary });
    Ok(items.into_iter().map(|t| t.msg).collect())
}

/// The indices kept around a summary of `start..cut`: the leading system block; verbatim
/// messages, re-attached right after the summary, and so is the task when it was in the segment;
/// the recent tail. Each keeps its index so that what the pairing repair removes (orphans) is
/// known, and archived.
fn kept_after_summary(h: &[Message], start: usize, cut: usize) -> Vec<usize> {
    let segment = h.get(start..cut).unwrap_or_default();
    let task = task_index(h).filter(|&t| t >= start && t < cut);
    let reattached = segment.iter().enumerate().filter_map(|(i, m)| {
        let at = start.saturating_add(i);
        (m.meta.preserve_verbatim || Some(at) == task).then_some(at)
    });
    (0..start).chain(reattached).chain(cut..h.len()).collect()
}
