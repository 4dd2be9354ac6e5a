//! Corpus replay with two jobs against one, and peak memory replaying a 10 MB-history capture.

use crate::harness::interleave;
use crate::{Plan, Row};
use salvage_recovery::summarizer::{Builtin, Summarizer};
use salvage_replay::corpus::{discover, load_all, run_all, Target};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus")
}

/// Runs the replay workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let files = discover(&[corpus_dir()]).map_err(anyhow::Error::msg)?;
    let captures = load_all(&files)?;
    let dir = tempfile::tempdir()?;
    let make = |_: &salvage_types::Capture| -> Result<Box<dyn Summarizer>, String> { Ok(Box::new(Builtin)) };
    let quiet = |_: usize, _: usize, _: &str| {};
    // Every run journals into a fresh file, so neither side reads the other's database.
    let fresh = |tag: &str, n: &mut u32| {
        *n += 1;
        Target::File(dir.path().join(format!("{tag}{n}.db")))
    };
    let (mut na, mut nb) = (0, 0);
    let pair = interleave(
        plan.rounds.clamp(3, 5) - 1,
        || {
            let _ = run_all(
                &captures,
                &fresh("one", &mut na),
                1,
                &make,
                &quiet,
                salvage_recovery::ladder::RUNG3_KEEP,
                &salvage_types::SystemClock,
            );
        },
        || {
            let _ = run_all(
                &captures,
                &fresh("two", &mut nb),
                2,
                &make,
                &quiet,
                salvage_recovery::ladder::RUNG3_KEEP,
                &salvage_types::SystemClock,
            );
        },
    );
    let mut rows = vec![Row::at_least(
        "corpus replay, --jobs 2",
        "--jobs 1",
        pair.speed_ratio(),
        1.6,
        format!(
            "{:.0} ms vs {:.0} ms for {} captures",
            pair.ours.as_secs_f64() * 1e3,
            pair.baseline.as_secs_f64() * 1e3,
            captures.len()
        ),
    )];
    // Peak memory: a child process replays a 10 MB-history capture and reports its high-water mark.
    let size = 10 << 20;
    let file = dir.path().join("big.json");
    std::fs::write(
        &file,
        salvage_replay::synth::large_capture(size, 5, salvage_types::capture::RejectStyle::WafHtml403)
            .to_json_pretty(),
    )?;
    let out = std::process::Command::new(std::env::current_exe()?).arg("--child-peak").arg(&file).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let peak: u64 = text.trim().parse().unwrap_or(0);
    let history_bytes = salvage_types::history_weight(&salvage_types::capture::read_capture(&file)?.history);
    rows.push(Row::at_most(
        "peak memory replaying a 10 MB-history capture",
        "history size",
        peak as f64 / history_bytes.max(1) as f64,
        6.0,
        format!(
            "{} peak RSS for a {} history",
            salvage_types::format_bytes(peak),
            salvage_types::format_bytes(history_bytes)
        ),
    ));
    Ok(rows)
}

/// The child side of the peak-memory workload: replay the capture in memory, print VmHWM bytes.
pub fn child_peak(file: &std::path::Path) -> anyhow::Result<()> {
    let captures = load_all(&[file.to_path_buf()])?;
    let make = |_: &salvage_types::Capture| -> Result<Box<dyn Summarizer>, String> { Ok(Box::new(Builtin)) };
    let dir = tempfile::tempdir()?;
    let reports = run_all(
        &captures,
        &Target::File(dir.path().join("p.db")),
        1,
        &make,
        &|_, _, _| {},
        salvage_recovery::ladder::RUNG3_KEEP,
        &salvage_types::SystemClock,
    )
    .map_err(anyhow::Error::msg)?;
    drop(reports);
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    println!("{}", kb * 1024);
    Ok(())
}
