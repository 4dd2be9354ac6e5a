//! The salvage side of `bench/peers/`: for each message of a history, append it to the journal
//! and restore the exact history at that event on a fresh read-only handle; and rung 2 on the
//! whole history. Prints JSON.

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_recovery::archive::Archiver;
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::tool_budget::Limits;
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::time::Instant;

/// Runs the peer workload on a history file.
pub fn run(file: &std::path::Path) -> anyhow::Result<()> {
    let history: Vec<Message> = serde_json::from_slice(&std::fs::read(file)?)?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("peer.db");
    let mut j = Journal::open(&db, &Options::default())?;
    let ts = |n: usize| Utc.timestamp_millis_opt(1_764_000_000_000 + n as i64).single().unwrap_or_default();
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 }))?;
    let (mut append, mut restore) = (0.0f64, 0.0f64);
    for (i, m) in history.iter().enumerate() {
        let t = Instant::now();
        let a = j.append(
            "s",
            None,
            vec![NewEvent::new(format!("m{i}"), ts(i + 1), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m.clone()]))],
        )?;
        append += t.elapsed().as_secs_f64();
        // Cold, as the peer's side: a fresh read-only handle, no cache the writer filled.
        let t = Instant::now();
        let v = Journal::open(&db, &Options::read_only())?.view_at("s", a[0].seq)?;
        restore += t.elapsed().as_secs_f64();
        anyhow::ensure!(v.history.len() == i + 1, "restore returned {} messages", v.history.len());
    }
    let mut best = f64::MAX;
    let mut kept = 0;
    for _ in 0..20 {
        let t = Instant::now();
        let mut ctx = RungContext {
            archiver: Archiver::new(None),
            keep: 10,
            limits: Limits { per_result: 20_000, per_turn: 200_000 },
            payload_budget: None,
            rung3_keep: ladder::RUNG3_KEEP,
        };
        let o = ladder::apply(Rung::Emergency, &history, &mut ctx)?;
        best = best.min(t.elapsed().as_secs_f64());
        kept = o.history.len();
    }
    println!(
        "{}",
        serde_json::json!({"append_s": append, "restore_s": restore, "rung2_s": best, "rung2_kept": kept})
    );
    Ok(())
}
