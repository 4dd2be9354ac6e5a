//! A capture lends its history to its run (the engine holds the only copy during the replay, for
//! peak memory) and holds it again, exactly, once its report is in: the checks and `--bless` read
//! the capture's history after the run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::summarizer::{Recorded, Summarizer};
use salvage_replay::corpus::{load_all, run_all, Target};
use salvage_types::capture::{read_capture, Capture};
use salvage_types::FixedClock;
use std::path::PathBuf;

static CLOCK: FixedClock = FixedClock::at_ms(1_700_000_000_000);

fn corpus(ids: &[&str]) -> Vec<PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus");
    ids.iter().map(|id| dir.join(format!("{id}.json"))).collect()
}

fn replay_all(captures: &mut [(PathBuf, Capture)], jobs: usize, target: &Target) {
    let make = |c: &Capture| -> Result<Box<dyn Summarizer>, String> {
        Ok(Box::new(Recorded::new(c.recorded.summaries.clone())))
    };
    let quiet = |_: usize, _: usize, _: &str| {};
    let reports =
        run_all(captures, target, jobs, &make, &quiet, salvage_recovery::ladder::RUNG3_KEEP, &CLOCK).unwrap();
    for r in &reports {
        assert!(
            r.passed(),
            "{}: {:?} {:?}",
            r.id,
            r.checks.iter().filter(|c| !c.ok).collect::<Vec<_>>(),
            r.expect_diffs
        );
    }
}

/// Captures whose runs rewrite the history (rungs, compaction, imported wire shapes, images,
/// non-ASCII text): after the run each capture holds exactly the history of its file, not the
/// engine's final one and not nothing.
#[test]
fn every_capture_holds_its_history_again_after_its_run() {
    let files = corpus(&[
        "gateway-http413-reported",
        "rung3-keep-four",
        "microcompact-old-results",
        "imported-anthropic-overflow-pasted-context",
        "images-in-history",
        "non-ascii-text",
        "no-failure",
    ]);
    let db = std::env::temp_dir().join(format!("salvage-lent-history-{}.db", std::process::id()));
    for (jobs, target) in [(1, Target::Memory), (2, Target::Memory), (2, Target::File(db.clone()))] {
        let mut captures = load_all(&files).unwrap();
        replay_all(&mut captures, jobs, &target);
        for (file, c) in &captures {
            let fresh = read_capture(file).unwrap();
            assert!(!c.history.is_empty(), "{}: history left empty", file.display());
            assert_eq!(c.history, fresh.history, "{} (jobs {jobs})", file.display());
            assert_eq!(c.to_json_pretty(), fresh.to_json_pretty(), "{}", file.display());
        }
        // A second run over the same captures (as the benchmark does) sees the same input.
        replay_all(&mut captures, jobs, &target);
        for (file, c) in &captures {
            assert_eq!(c.history, read_capture(file).unwrap().history, "{} (second run)", file.display());
        }
    }
    for ext in ["", "-wal", "-shm"] {
        let _ignored = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
}
