//! Rung 3 with shrink on a 10 MB history against serde_json parsing of that history.

use crate::harness::interleave;
use crate::{Plan, Row};
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::tool_budget::Limits;
use salvage_replay::synth::agent_history;
use salvage_types::Message;

/// Runs the ladder workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let size = (10.0 * 1024.0 * 1024.0 * plan.scale.max(0.5)) as usize;
    let history = agent_history(size, 42);
    let json = serde_json::to_vec(&history)?;
    let limits = Limits { per_result: 20_000, per_turn: 200_000 };
    let budget = Some(90 * 1024);
    let mut rows = Vec::new();
    for (label, ccr) in [
        ("rung 3 + shrink, 10 MB history, CCR off", false),
        ("rung 3 + shrink, 10 MB history, archiving what it drops", true),
    ] {
        let pair = interleave(
            plan.rounds,
            || {
                let parsed: Vec<Message> = serde_json::from_slice(&json).unwrap_or_default();
                std::hint::black_box(parsed);
            },
            || {
                let mut mem = MemoryArchive::new();
                let mut ctx = RungContext {
                    archiver: Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None }),
                    keep: 10,
                    limits,
                    payload_budget: budget,
                    rung3_keep: salvage_recovery::ladder::RUNG3_KEEP,
                };
                std::hint::black_box(ladder::apply(Rung::Nuclear, &history, &mut ctx).ok());
            },
        );
        let make =
            if ccr { Row::info } else { |w: &str, b: &str, r: f64, d: String| Row::at_most(w, b, r, 1.0, d) };
        rows.push(make(
            label,
            "serde_json parse of the history",
            pair.cost_ratio(),
            format!(
                "{:.1} ms vs {:.1} ms parse ({} MB)",
                pair.ours.as_secs_f64() * 1e3,
                pair.baseline.as_secs_f64() * 1e3,
                json.len() >> 20
            ),
        ));
    }
    Ok(rows)
}

/// The full compaction pipeline (microcompact, trim, level 3) on a 10 MB history.
pub fn pipeline(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    use salvage_recovery::compaction::{compact, CompactionState, Io, NoHooks, NoMemory, Plan as CPlan};
    use salvage_recovery::microcompact::{microcompact, Ages};
    use salvage_recovery::summarizer::{Builtin, Cancel};
    use salvage_types::event::Trigger;
    let size = (10.0 * 1024.0 * 1024.0 * plan.scale.max(0.5)) as usize;
    let history = agent_history(size, 43);
    let json = serde_json::to_vec(&history)?;
    let turn = history.iter().filter(|m| m.role == salvage_types::Role::Assistant).count() as u32;
    let mut rows = Vec::new();
    for (label, ccr) in [
        ("full pipeline (microcompact, trim, level 3), 10 MB, CCR off", false),
        ("full pipeline, 10 MB, archiving originals", true),
    ] {
        let pair = interleave(
            plan.rounds,
            || {
                let parsed: Vec<Message> = serde_json::from_slice(&json).unwrap_or_default();
                std::hint::black_box(parsed);
            },
            || {
                let mut mem = MemoryArchive::new();
                let lookup = |_: &str| None;
                let micro = {
                    let mut a = Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None });
                    microcompact(&history, turn, Ages { truncate: 2, summarize: 4 }, &mut a, &lookup).ok()
                };
                let Some((h, _)) = micro else { return };
                let mut state = CompactionState { backoff: 1, ..CompactionState::default() };
                let cancel = Cancel::new();
                let mut status = |_: salvage_recovery::compaction::Phase, _: &str| {};
                let mut summarizer = Builtin;
                let mut io = Io {
                    archiver: Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None }),
                    lookup: &lookup,
                    summarizer: &mut summarizer,
                    hooks: &mut NoHooks,
                    memory: &mut NoMemory,
                    status: &mut status,
                    cancel: &cancel,
                };
                let p = CPlan {
                    budget: 400_000,
                    trigger: Trigger::Auto,
                    min_keep_recent: 6,
                    summarizer_window_chars: 800_000,
                };
                std::hint::black_box(compact(&h, &p, &mut state, &mut io).ok());
            },
        );
        let make =
            if ccr { Row::info } else { |w: &str, b: &str, r: f64, d: String| Row::at_most(w, b, r, 2.0, d) };
        rows.push(make(
            label,
            "serde_json parse of the history",
            pair.cost_ratio(),
            format!(
                "{:.1} ms vs {:.1} ms parse ({} MB)",
                pair.ours.as_secs_f64() * 1e3,
                pair.baseline.as_secs_f64() * 1e3,
                json.len() >> 20
            ),
        ));
    }
    Ok(rows)
}
