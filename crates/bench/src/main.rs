//! `salvage-bench`: every performance target of `guide/performance.md` as a ratio against a raw
//! baseline doing the same bytes with the same library, interleaved in one process run.

mod ccr;
mod harness;
mod journal;
mod ladder;
mod memory;
mod peer;
mod proxy;
mod replay;
mod scaling;

use clap::Parser;
use serde_json::json;

/// Run the benchmark suite and print one table (or JSON).
#[derive(Parser)]
#[command(name = "salvage-bench", version)]
struct Args {
    /// Fewer rounds and smaller data: a run under a minute.
    #[arg(long)]
    quick: bool,
    /// Print `{"results": [...]}` instead of a table.
    #[arg(long)]
    json: bool,
    /// Only workloads whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// The salvage side of bench/peers/: time journal append+restore and rung 2 on a history file.
    #[arg(long, value_name = "HISTORY_JSON")]
    peer: Option<std::path::PathBuf>,
    /// Internal: the child process of the proxy memory workload.
    #[arg(long, hide = true)]
    child_proxy_memory: bool,
}

/// One measured target.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub workload: String,
    /// What it was compared with.
    pub baseline: String,
    /// The measured ratio.
    pub ratio: f64,
    /// The target, as text (e.g. `>= 0.7x`).
    pub target: String,
    /// Whether the target is met.
    pub met: bool,
    /// Absolute figures for people.
    pub detail: String,
}

impl Row {
    /// A throughput row: met when `ratio >= min`.
    pub fn at_least(workload: &str, baseline: &str, ratio: f64, min: f64, detail: String) -> Row {
        Row {
            workload: workload.into(),
            baseline: baseline.into(),
            ratio,
            target: format!(">= {min}x"),
            met: ratio >= min,
            detail,
        }
    }

    /// A cost row: met when `ratio <= max`.
    pub fn at_most(workload: &str, baseline: &str, ratio: f64, max: f64, detail: String) -> Row {
        Row {
            workload: workload.into(),
            baseline: baseline.into(),
            ratio,
            target: format!("<= {max}x"),
            met: ratio <= max,
            detail,
        }
    }

    /// A row whose measurement failed: not met, with the error as its detail.
    pub fn failed(workload: &str, baseline: &str, target: &str, err: &anyhow::Error) -> Row {
        Row {
            workload: workload.into(),
            baseline: baseline.into(),
            ratio: f64::NAN,
            target: target.into(),
            met: false,
            detail: format!("FAILED: {err:#}"),
        }
    }

    /// An informational figure with no target.
    pub fn info(workload: &str, baseline: &str, ratio: f64, detail: String) -> Row {
        Row {
            workload: workload.into(),
            baseline: baseline.into(),
            ratio,
            target: "(info)".into(),
            met: true,
            detail,
        }
    }
}

/// Settings shared by the workloads.
pub struct Plan {
    /// Interleaved rounds.
    pub rounds: usize,
    /// Scale factor for data sizes (1.0 full, smaller for --quick).
    pub scale: f64,
}

/// Adds a group's rows; a group that fails before producing them is one failed row, and the
/// run goes on.
fn collect(rows: &mut Vec<Row>, group: &str, got: anyhow::Result<Vec<Row>>) {
    match got {
        Ok(r) => rows.extend(r),
        Err(e) => rows.push(Row::failed(&format!("{group} (every row of the group)"), "-", "-", &e)),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(f) = &args.peer {
        return peer::run(f);
    }
    if args.child_proxy_memory {
        return proxy::child_memory();
    }
    let plan = if args.quick { Plan { rounds: 7, scale: 0.5 } } else { Plan { rounds: 11, scale: 1.0 } };
    let wanted = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));
    let mut rows: Vec<Row> = Vec::new();
    if wanted("ccr") {
        collect(&mut rows, "ccr::run", ccr::run(&plan));
    }
    if wanted("journal") || wanted("restore") {
        collect(&mut rows, "journal::run", journal::run(&plan));
    }
    if wanted("ladder") || wanted("rung") {
        collect(&mut rows, "ladder::run", ladder::run(&plan));
    }
    if wanted("replay") || wanted("memory") {
        collect(&mut rows, "replay::run", replay::run(&plan));
    }
    if wanted("import") || wanted("memory") {
        collect(&mut rows, "memory::run", memory::run(&plan));
    }
    if wanted("pipeline") || wanted("compaction") {
        collect(&mut rows, "ladder::pipeline", ladder::pipeline(&plan));
    }
    if wanted("proxy") {
        collect(&mut rows, "proxy::run", proxy::run(&plan));
    }
    if wanted("scaling") {
        collect(&mut rows, "scaling::run", scaling::run(&plan));
    }
    if args.json {
        let results: Vec<_> = rows
            .iter()
            .map(|r| json!({"workload": r.workload, "baseline": r.baseline, "ratio": r.ratio, "target": r.target, "met": r.met, "detail": r.detail}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "results": results }))?);
    } else {
        let mut table =
            vec![["workload", "baseline", "ratio", "target", "met", "detail"].map(String::from).to_vec()];
        for r in &rows {
            table.push(vec![
                r.workload.clone(),
                r.baseline.clone(),
                format!("{:.2}x", r.ratio),
                r.target.clone(),
                if r.met { "yes".into() } else { "NO".into() },
                r.detail.clone(),
            ]);
        }
        let widths: Vec<usize> =
            (0..6).map(|i| table.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        for r in &table {
            let line: Vec<String> =
                r.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
            println!("{}", line.join("  ").trim_end());
        }
        let missed = rows.iter().filter(|r| !r.met).count();
        println!("\n{} targets, {} met, {} missed", rows.len(), rows.len() - missed, missed);
    }
    Ok(())
}
