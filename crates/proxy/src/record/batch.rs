//! The turns the writer has at hand, appended together: each session's turns in one transaction.
//!
//! Design decision: the writer takes every turn already queued (up to [`BATCH_TURNS`] turns or
//! [`BATCH_BYTES`]), makes each
//! into events in queue order (`write.rs`), then appends the events of each session's turns in
//! one `append` — one transaction, where one turn each cost a commit. A turn's history change is
//! worked out against the session's head as the turns before it in the batch leave it (their
//! message keys, followed here), so the journal records exactly what turn-by-turn writing would:
//! the same events, in the same order, restoring the same histories. If a session's transaction
//! fails, its turns are appended again one by one, each against the journal's own head, so one
//! bad turn costs only itself. Sessions are still one transaction each: one transaction across
//! sessions needs the journal's append to take several sessions.

use super::cache::Recent;
use super::write::{head_of, history_event, prepare, write_capture, Prepared, WriteError};
use super::{Turn, WriterOptions};
use salvage_journal::{Appended, Journal, NewEvent};
use std::collections::HashMap;
use std::path::PathBuf;

/// The turns the writer appends together at most.
pub const BATCH_TURNS: usize = 256;

/// A batch takes no more turns once they weigh this much (request bodies and answers): a batch's
/// turns are held until it is written (their answers twice, for a retry one by one, and the
/// transaction's pages in SQLite's cache), so this bounds what batching adds to the writer's
/// memory; past a few dozen turns a commit is a small share of a batch anyway.
pub const BATCH_BYTES: usize = 2 << 20;

/// What writing one turn came to: its session and capture, or why it failed.
pub type TurnResult = Result<(String, Option<PathBuf>), WriteError>;

/// Journals `turns` (in order; each session's in one transaction) and writes their captures,
/// reading requests through `recent`. One result per turn, in order.
pub fn write_batch(
    journal: &mut Journal,
    options: &WriterOptions,
    recent: &mut Recent,
    turns: Vec<Turn>,
) -> Vec<TurnResult> {
    let mut results: Vec<Option<TurnResult>> = turns.iter().map(|_| None).collect();
    let mut heads = HashMap::new();
    // Each session's prepared turns (with their place in the batch), sessions in order of arrival.
    let mut groups: Vec<(String, Vec<(usize, Prepared)>)> = Vec::new();
    for (i, turn) in turns.into_iter().enumerate() {
        match prepare(journal, options, recent, &mut heads, turn) {
            Ok(p) => match groups.iter_mut().find(|(s, _)| *s == p.session) {
                Some((_, g)) => g.push((i, p)),
                None => groups.push((p.session.clone(), vec![(i, p)])),
            },
            Err(e) => {
                if let Some(r) = results.get_mut(i) {
                    *r = Some(Err(e));
                }
            }
        }
    }
    for (session, group) in groups {
        for (i, r) in append_group(journal, options, &session, group) {
            if let Some(slot) = results.get_mut(i) {
                *slot = Some(r);
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(WriteError::Body("turn not written".into()))))
        .collect()
}

/// The events of a prepared turn, in the order they are appended.
fn events_of(p: &mut Prepared) -> Vec<NewEvent> {
    let mut events: Vec<NewEvent> = p.history.take().into_iter().collect();
    events.append(&mut p.steps);
    events
}

/// Appends one session's turns in one transaction; on failure, one by one.
fn append_group(
    journal: &mut Journal,
    options: &WriterOptions,
    session: &str,
    mut group: Vec<(usize, Prepared)>,
) -> Vec<(usize, TurnResult)> {
    if group.len() > 1 {
        // The turns' own events are kept for a retry one by one (their history change is worked
        // out again then, against the journal's head).
        let kept: Vec<Vec<NewEvent>> = group.iter().map(|(_, p)| p.steps.clone()).collect();
        let mut events = Vec::new();
        let mut counts = Vec::with_capacity(group.len());
        for (_, p) in &mut group {
            let before = events.len();
            let hist = usize::from(p.history.is_some());
            events.extend(events_of(p));
            counts.push((before, hist));
        }
        match journal.append(session, None, events) {
            Ok(appended) => {
                return group
                    .into_iter()
                    .zip(counts)
                    .map(|((i, p), (at, hist))| (i, finish(options, p, &appended, at.saturating_add(hist))))
                    .collect();
            }
            Err(_) => {
                for ((_, p), steps) in group.iter_mut().zip(kept) {
                    p.steps = steps;
                }
            }
        }
    }
    let again = group.len() > 1;
    group.into_iter().map(|(i, p)| (i, append_alone(journal, options, session, p, again))).collect()
}

/// Appends one turn in its own transaction; `again` (after its batch failed): its history change
/// worked out anew against the journal's head.
fn append_alone(
    journal: &mut Journal,
    options: &WriterOptions,
    session: &str,
    mut p: Prepared,
    again: bool,
) -> TurnResult {
    if again {
        let head = head_of(journal, session)?.unwrap_or_default();
        p.history = history_event(session, &p.turn, &p.read.parsed.history, &p.read.keyed, &head);
    }
    let hist = usize::from(p.history.is_some());
    let appended = journal.append(session, None, events_of(&mut p))?;
    finish(options, p, &appended, hist)
}

/// A turn appended (its steps from `appended[steps_at]` on): its capture written.
fn finish(options: &WriterOptions, p: Prepared, appended: &[Appended], steps_at: usize) -> TurnResult {
    let seq = p.error_step.and_then(|e| appended.get(steps_at.saturating_add(e))).map(|a| a.seq).unwrap_or(0);
    let capture = write_capture(options, &p.session, p.turn, &p.read.parsed, seq)?;
    Ok((p.session, capture))
}
