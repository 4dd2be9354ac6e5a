//! Corpus replay with two jobs against one, and peak memory replaying a 10 MB-history capture
//! with `salvage replay` (a child process: its max RSS, its exit status read).

use crate::harness::try_interleave;
use crate::{Plan, Row};
use salvage_recovery::summarizer::{Recorded, Summarizer};
use salvage_replay::corpus::{discover, load_all, run_all, Target};
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus")
}

/// The `salvage` binary built beside this one (`cargo build --release -p salvage-cli`).
pub fn salvage_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?.with_file_name("salvage");
    anyhow::ensure!(
        exe.is_file(),
        "{} is missing: build it with `cargo build --release -p salvage-cli`",
        exe.display()
    );
    Ok(exe)
}

/// Runs the replay workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let mut rows = vec![corpus_jobs(plan)];
    rows.push(crate::memory::replay_peak(
        "peak memory replaying a 10 MB-history capture (salvage replay)",
        "history size",
        4.0,
        0,
        |dir: &Path| {
            let file = dir.join("big.json");
            let capture = salvage_replay::synth::large_capture(
                10 << 20,
                5,
                salvage_types::capture::RejectStyle::WafHtml403,
            );
            std::fs::write(&file, capture.to_json_pretty())?;
            Ok((file, salvage_types::history_weight(&capture.history)))
        },
    ));
    Ok(rows)
}

fn corpus_jobs(plan: &Plan) -> Row {
    let (workload, baseline, target) = ("corpus replay, --jobs 2", "--jobs 1", ">= 1.7x");
    let measured = (|| -> anyhow::Result<Row> {
        let files = discover(&[corpus_dir()]).map_err(anyhow::Error::msg)?;
        let mut captures = load_all(&files)?;
        let dir = tempfile::tempdir()?;
        // The summarizer `salvage replay` uses by default: the capture's recorded summaries.
        let make = |c: &salvage_types::Capture| -> Result<Box<dyn Summarizer>, String> {
            Ok(Box::new(Recorded::new(c.recorded.summaries.clone())))
        };
        let quiet = |_: usize, _: usize, _: &str| {};
        let mut n = 0;
        // Every run journals into a fresh file, so neither side reads the other's database; every
        // capture must pass, as in CI.
        let mut replay = |jobs: usize| -> anyhow::Result<()> {
            n += 1;
            let target = Target::File(dir.path().join(format!("run{n}.db")));
            let reports = run_all(
                &mut captures,
                &target,
                jobs,
                &make,
                &quiet,
                salvage_recovery::ladder::RUNG3_KEEP,
                &salvage_types::SystemClock,
            )
            .map_err(anyhow::Error::msg)?;
            let failed: Vec<&str> = reports.iter().filter(|r| !r.passed()).map(|r| r.id.as_str()).collect();
            anyhow::ensure!(failed.is_empty(), "captures failed: {}", failed.join(", "));
            Ok(())
        };
        let replay = std::cell::RefCell::new(&mut replay);
        let pair = try_interleave(
            plan.rounds.clamp(3, 5) - 1,
            || (replay.borrow_mut())(1),
            || (replay.borrow_mut())(2),
        )?;
        Ok(Row::at_least(
            workload,
            baseline,
            pair.speed_ratio(),
            1.7,
            format!(
                "{:.0} ms vs {:.0} ms for {} captures",
                pair.ours.as_secs_f64() * 1e3,
                pair.baseline.as_secs_f64() * 1e3,
                captures.len()
            ),
        ))
    })();
    measured.unwrap_or_else(|e| Row::failed(workload, baseline, target, &e))
}
