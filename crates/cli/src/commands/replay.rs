//! `salvage replay PATH...`: re-run the recovery over captured failures, check it, journal it.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{table, write_atomic, Output};
use crate::terminal::escape;
use salvage_replay::corpus::{discover, load_all_with, run_all, CaptureReport, Target};
use salvage_types::format_bytes;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `salvage replay`.
#[derive(clap::Args)]
#[command(
    after_help = "Each capture is replayed against its simulated gateway and provider; every step is a journal event\n(see `salvage journal log SESSION`). Checks on every capture: fidelity, convergence, task kept, pairing,\nmarkers resolve, rewind accounting, notice at most once, cap only tightens.\nExit 1 when a capture misses its `expect` or fails a check; 2 when a capture cannot be read.\nExample: salvage replay testdata/corpus --jobs 2"
)]
pub struct Args {
    /// Capture files or folders (searched recursively for *.json).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write the observed outcome into each capture's `expect`.
    #[arg(long)]
    bless: bool,
    /// Captures replayed in parallel (output order stays the input order).
    #[arg(long, default_value_t = 1, value_name = "N")]
    jobs: usize,
    /// Level-2 summarizer: builtin, recorded (the capture's recorded summaries), cmd:PROGRAM, mcp:SERVER.
    #[arg(long, default_value = "recorded", value_name = "ROUTE")]
    summarizer: String,
    /// Journal in memory only (nothing is written to the database).
    #[arg(long)]
    no_journal: bool,
    /// Fault injection for testing the checks: make rung 3 keep N messages instead of 4.
    #[arg(long, hide = true, value_name = "N")]
    fault_rung3_keep: Option<usize>,
    #[command(flatten)]
    db: DbArgs,
}

fn failed_checks(r: &CaptureReport) -> Vec<String> {
    let mut v: Vec<String> =
        r.checks.iter().filter(|c| !c.ok).map(|c| format!("{}: {}", c.name, c.detail)).collect();
    v.extend(r.expect_diffs.iter().map(|d| format!("expect {d}")));
    v
}

/// Runs the command.
pub fn run(args: Args, env: &std::collections::BTreeMap<String, String>, out: &mut Output) -> Outcome {
    let files = discover(&args.paths).map_err(Failure::Input)?;
    if files.is_empty() {
        return Err(Failure::Input(format!(
            "no *.json captures under {}",
            args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    let limits = crate::db::ceilings(env)?;
    let captures = load_all_with(&files, &limits.capture).map_err(Failure::input)?;
    let target = if args.no_journal {
        Target::Memory
    } else {
        // Create and migrate the file once, before the workers open it.
        args.db.open()?;
        Target::File(args.db.db.clone())
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let home = env.get("HOME").map(PathBuf::from);
    let route = args.summarizer.clone();
    crate::summarizers::build(&route, &cwd, home.as_deref(), &[]).map_err(Failure::Input)?;
    let make = |c: &salvage_types::Capture| {
        crate::summarizers::build(&route, &cwd, home.as_deref(), &c.recorded.summaries)
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = |n: usize, total: usize, id: &str| {
        if tty {
            let width = 30;
            let filled = n * width / total.max(1);
            let id = crate::terminal::escape(id);
            eprint!("\r[{}{}] {n}/{total} {id:<40.40}", "#".repeat(filled), " ".repeat(width - filled));
            let _ = std::io::stderr().flush();
        }
    };
    let reports = run_all(
        &captures,
        &target,
        args.jobs.max(1),
        &make,
        &progress,
        args.fault_rung3_keep.unwrap_or(salvage_recovery::ladder::RUNG3_KEEP),
    )
    .map_err(Failure::Problem)?;
    if tty {
        eprint!("\r{}\r", " ".repeat(80));
    }
    if args.bless {
        for ((file, capture), r) in captures.iter().zip(&reports) {
            let mut c = capture.clone();
            // --bless records the outcome fields only: expected events are written by hand.
            c.expect = r.blessed.clone().map(|mut b| {
                b.events = capture.expect.as_ref().map(|e| e.events.clone()).unwrap_or_default();
                b
            });
            write_atomic(file, c.to_json_pretty().as_bytes())
                .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", file.display())))?;
        }
    }
    let passed = reports.iter().filter(|r| r.passed()).count();
    if args.json {
        out.json(&json!({
            "captures": reports,
            "summary": {"total": reports.len(), "passed": passed, "failed": reports.len() - passed},
        }))?;
    } else {
        let mut rows =
            vec![["CAPTURE", "OUTCOME", "ATTEMPTS", "RUNG", "BYTES", "TOKENS (est/real)", "CHECKS"]
                .map(String::from)
                .to_vec()];
        for r in &reports {
            let (first, last) =
                (r.request_bytes.first().copied().unwrap_or(0), r.request_bytes.last().copied().unwrap_or(0));
            let tok = |i: usize| {
                format!(
                    "{}/{}",
                    r.estimated_tokens.get(i).copied().unwrap_or(0),
                    r.real_tokens
                        .get(i)
                        .copied()
                        .flatten()
                        .map(|t| t.to_string())
                        .unwrap_or_else(|| "-".into())
                )
            };
            let n = r.request_bytes.len().saturating_sub(1);
            let ok = r.checks.iter().filter(|c| c.ok).count();
            let verdict = if r.passed() {
                format!("{ok}/{} ok", r.checks.len())
            } else {
                format!(
                    "FAIL {}",
                    failed_checks(r)
                        .iter()
                        .map(|f| f.split(':').next().unwrap_or("").to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            };
            rows.push(vec![
                r.id.clone(),
                format!("{:?}", r.outcome).to_lowercase(),
                r.attempts.to_string(),
                r.rung.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
                format!("{} → {}", format_bytes(first), format_bytes(last)),
                format!("{} → {}", tok(0), tok(n)),
                verdict,
            ]);
        }
        out.put(&table(&rows))?;
        for r in reports.iter().filter(|r| !r.passed()) {
            out.line(&format!("\n{} ({}):", escape(&r.id), escape(&r.file)))?;
            for f in failed_checks(r) {
                out.line(&format!("  ✖ {}", escape(&f)))?;
            }
        }
        out.line(&format!(
            "\n{} captures: {passed} passed, {} failed{}",
            reports.len(),
            reports.len() - passed,
            match &target {
                Target::File(p) => format!(" — journaled in {}", escape(&p.display().to_string())),
                Target::Memory => " — not journaled (--no-journal)".to_string(),
            }
        ))?;
    }
    if passed == reports.len() {
        Ok(())
    } else {
        Err(Failure::Problem(format!("{} of {} captures failed", reports.len() - passed, reports.len())))
    }
}
