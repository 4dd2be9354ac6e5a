//! Rung 3 with shrink on a 10 MB history against serde_json parsing of that history.

use crate::data::agent_history;
use crate::harness::interleave;
use crate::{Plan, Row};
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::tool_budget::Limits;
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
