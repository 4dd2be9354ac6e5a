//! `salvage replay PATH...`: re-run the recovery over captured failures, check it, journal it.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::junit;
use crate::output::{table, write_atomic, Output};
use crate::terminal::escape;
use salvage_replay::baseline::Comparison;
use salvage_replay::corpus::{discover, run_all, CaptureReport, Target};
use salvage_replay::shard::Shard;
use salvage_types::format_bytes;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `salvage replay`.
#[derive(clap::Args)]
#[command(
    after_help = "Each capture is replayed against its simulated gateway and provider; every step is a journal event\n(see `salvage journal log SESSION`). Checks on every capture: fidelity, convergence, task kept, pairing,\nmarkers resolve, rewind accounting, notice at most once, cap only tightens.\nAn exhausted recovery fails convergence unless the capture expects it.\nExit 1 when a capture misses its `expect`, fails a check, cannot be read (inside a folder) or regresses\nagainst --baseline; 2 when a file named on the command line cannot be read.\nCI: --junit FILE for test reports, --shard I/N for a job matrix, --baseline PREV.json to catch regressions.\nExample: salvage replay testdata/corpus --junit target/replay.xml --shard 1/4"
)]
pub struct Args {
    /// Capture files or folders (searched recursively for *.json; links to folders inside them are
    /// not followed).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write the observed outcome into each capture's `expect`.
    #[arg(long)]
    bless: bool,
    /// Captures replayed in parallel (output order stays the input order); default: the number of cores.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Level-2 summarizer: builtin, recorded (the capture's recorded summaries), cmd:PROGRAM, mcp:SERVER.
    #[arg(long, default_value = "recorded", value_name = "ROUTE")]
    summarizer: String,
    /// Journal in memory only (nothing is written to the database).
    #[arg(long)]
    no_journal: bool,
    /// Also write a JUnit XML report (one testcase per capture, a failure per failed check).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also write a self-contained HTML audit report (corpus table, per-session timelines).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Replay only shard I of N (1-based; a stable partition by capture id, for a CI matrix).
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// Compare with a previous `--json` report: outcome changes, more attempts, or the accepted
    /// request's bytes or tokens up by more than --threshold are regressions (exit 1).
    #[arg(long, value_name = "PREV.json")]
    baseline: Option<PathBuf>,
    /// The growth in percent of bytes or tokens that --baseline flags.
    #[arg(long, default_value_t = 10.0, value_name = "PERCENT", requires = "baseline", value_parser = percent)]
    threshold: f64,
    /// Override a setting in every capture for a what-if run (repeatable), e.g.
    /// CHATCLI_EMERGENCY_KEEP_MESSAGES=6.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Fault injection for testing the checks: make rung 3 keep N messages instead of 4.
    #[arg(long, hide = true, value_name = "N")]
    fault_rung3_keep: Option<usize>,
    #[command(flatten)]
    db: DbArgs,
}

/// One row of the run: a replayed capture, or a file inside a folder that could not be read.
pub enum Row {
    /// Replayed.
    Done(Box<CaptureReport>),
    /// Not readable.
    Unreadable {
        /// Its name (the file stem).
        id: String,
        /// The file.
        file: String,
        /// Why.
        error: String,
    },
}

impl Row {
    fn passed(&self) -> bool {
        match self {
            Row::Done(r) => r.passed(),
            Row::Unreadable { .. } => false,
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Row::Done(r) => json!(r),
            Row::Unreadable { id, file, error } => json!({
                "id": id, "file": file, "outcome": "unreadable", "attempts": 0, "rung": null,
                "request_bytes": [], "expect_met": null,
                "checks": [{"name": "readable", "ok": false, "detail": error}],
                "session": null, "error": error,
            }),
        }
    }
}

fn failed_checks(r: &CaptureReport) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        r.checks.iter().filter(|c| !c.ok).map(|c| (c.name.clone(), c.detail.clone())).collect();
    v.extend(r.expect_diffs.iter().map(|d| ("expect".to_string(), d.clone())));
    v
}

/// A failed check or missed expectation for people: `pairing: …`, `expect outcome: …`.
fn line(check: &str, detail: &str) -> String {
    if check == "expect" {
        format!("expect {detail}")
    } else {
        format!("{check}: {detail}")
    }
}

fn overrides(set: &[String]) -> Result<Vec<(String, String)>, Failure> {
    let mut out = Vec::new();
    for kv in set {
        let (k, v) =
            kv.split_once('=').ok_or_else(|| Failure::Input(format!("--set: {kv:?} is not KEY=VALUE")))?;
        let k = k.trim();
        if !salvage_types::config::SETTING_NAMES.contains(&k) {
            return Err(Failure::Input(format!("--set: {k} is not a known setting (see `salvage config`)")));
        }
        let probe: std::collections::BTreeMap<String, String> = [(k.to_string(), v.to_string())].into();
        if let Some((_, why)) = salvage_types::Config::from_env(&probe).errors().first() {
            return Err(Failure::Input(format!("--set: {k}={v:?}: {why}")));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// The captures read from the command line, in discovery order.
#[derive(Default)]
struct Loaded {
    /// The readable captures with their files.
    captures: Vec<(PathBuf, salvage_types::Capture)>,
    /// Each readable capture's place in discovery order.
    capture_order: Vec<usize>,
    /// Unreadable files found in folders, with their place in discovery order.
    unreadable: Vec<(usize, Row)>,
}

impl Loaded {
    /// Keeps only what `shard` holds.
    fn keep_shard(&mut self, s: Shard) {
        let keep: Vec<bool> = self.captures.iter().map(|(_, c)| s.holds(&c.id)).collect();
        let mut k = keep.iter();
        self.captures.retain(|_| k.next().copied().unwrap_or(false));
        let mut k = keep.iter();
        self.capture_order.retain(|_| k.next().copied().unwrap_or(false));
        self.unreadable.retain(|(_, r)| match r {
            Row::Unreadable { id, .. } => s.holds(id),
            Row::Done(_) => true,
        });
    }

    /// Rows in discovery order: replayed captures and unreadable files interleaved as found.
    fn into_rows(self, reports: Vec<CaptureReport>) -> Vec<Row> {
        let mut ordered: Vec<(usize, Row)> =
            self.capture_order.into_iter().zip(reports).map(|(o, r)| (o, Row::Done(Box::new(r)))).collect();
        ordered.extend(self.unreadable);
        ordered.sort_by_key(|(o, _)| *o);
        ordered.into_iter().map(|(_, r)| r).collect()
    }
}

/// The previous run's report, when `--baseline` names one.
/// Read as a capture is: a regular file under SALVAGE_MAX_CAPTURE, its JSON's shape checked
/// before it is parsed.
fn read_baseline(args: &Args, limit: u64) -> Result<Option<BTreeMap<String, serde_json::Value>>, Failure> {
    let Some(p) = &args.baseline else { return Ok(None) };
    let (bytes, name) = crate::commands::read_input_file(p, limit)?;
    salvage_types::input::check_json_shape(&bytes, &name).map_err(Failure::input)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Failure::Input(format!("{name}: invalid UTF-8 at byte {}", e.valid_up_to())))?;
    Ok(Some(salvage_replay::baseline::read(&name, text).map_err(Failure::input)?))
}

/// Reads every capture under the paths, applying the `--set` overrides. Files named on the
/// command line must be readable (exit 2); files found in folders that are not become failed rows
/// and the run goes on.
fn load(
    args: &Args,
    set: &[(String, String)],
    limits: &salvage_types::capture::Limits,
) -> Result<Loaded, Failure> {
    let mut loaded = Loaded::default();
    let mut order = 0usize;
    for p in &args.paths {
        let in_folder = p.is_dir();
        let files = discover(std::slice::from_ref(p)).map_err(Failure::Input)?;
        for f in files {
            match salvage_types::capture::read_capture_with(&f, limits) {
                Ok(mut c) => {
                    for (k, v) in set {
                        c.settings.insert(k.clone(), v.clone());
                    }
                    loaded.captures.push((f, c));
                    loaded.capture_order.push(order);
                }
                Err(e) if in_folder => {
                    let id = f.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
                    loaded.unreadable.push((
                        order,
                        Row::Unreadable { id, file: f.display().to_string(), error: e.to_string() },
                    ));
                }
                Err(e) => return Err(Failure::input(e)),
            }
            order += 1;
        }
    }
    if loaded.captures.is_empty() && loaded.unreadable.is_empty() {
        return Err(Failure::Input(format!("no *.json captures under {}", paths_joined(args, ", "))));
    }
    Ok(loaded)
}

/// The command-line paths, joined.
fn paths_joined(args: &Args, sep: &str) -> String {
    args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(sep)
}

/// Where the run is journaled; a file is created and migrated once, before the workers open it.
fn target(args: &Args) -> Result<Target, Failure> {
    if args.no_journal {
        Ok(Target::Memory)
    } else {
        args.db.open()?;
        Ok(Target::File(args.db.db.clone()))
    }
}

/// Replays the captures on `--jobs` workers with the chosen summarizer, drawing a progress bar on
/// a terminal.
fn replay_all(
    args: &Args,
    env: &std::collections::BTreeMap<String, String>,
    captures: &mut [(PathBuf, salvage_types::Capture)],
    target: &Target,
    clock: &dyn salvage_types::Clock,
) -> Result<Vec<CaptureReport>, Failure> {
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
    let jobs =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let reports = run_all(
        captures,
        target,
        jobs.max(1),
        &make,
        &progress,
        args.fault_rung3_keep.unwrap_or(salvage_recovery::ladder::RUNG3_KEEP),
        clock,
    )
    .map_err(Failure::Problem)?;
    if tty {
        eprint!("\r{}\r", " ".repeat(80));
    }
    Ok(reports)
}

/// `--bless`: writes each observed outcome into its capture's `expect`.
fn bless(captures: &[(PathBuf, salvage_types::Capture)], reports: &[CaptureReport]) -> Result<(), Failure> {
    for ((file, capture), r) in captures.iter().zip(reports) {
        let mut c = capture.clone();
        // --bless records the outcome fields only: expected events are written by hand.
        c.expect = r.blessed.clone();
        write_atomic(file, c.to_json_pretty().as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", file.display())))?;
    }
    Ok(())
}

/// Writes the `--junit` and `--html` reports that were asked for.
fn write_reports(args: &Args, rows: &[Row], target: &Target, clock: &dyn salvage_types::Clock) -> Outcome {
    if let Some(path) = &args.junit {
        let cases: Vec<junit::Case> = rows.iter().map(junit_case).collect();
        let suite = paths_joined(args, " ");
        write_atomic(path, junit::render(&suite, &cases).as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    }
    if let Some(path) = &args.html {
        let corpus: Vec<crate::html::CorpusRow> = rows.iter().map(corpus_row).collect();
        let journal = match target {
            Target::File(p) => Some(salvage_journal::Journal::from_store(
                salvage_store::Store::open(p, &salvage_store::Options::default()).map_err(Failure::input)?,
            )),
            Target::Memory => None,
        };
        let title = format!("salvage replay {}", paths_joined(args, " "));
        let html = crate::html::render(&title, &corpus, journal.as_ref(), clock).map_err(Failure::Problem)?;
        write_atomic(path, html.as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    }
    Ok(())
}

/// Prints the run: JSON with `--json`, else the table, the baseline comparison and a summary line.
fn print_run(
    args: &Args,
    rows: &[Row],
    shard: Option<Shard>,
    comparison: Option<&Comparison>,
    target: &Target,
    out: &mut Output,
) -> Outcome {
    let passed = rows.iter().filter(|r| r.passed()).count();
    let failed = rows.len() - passed;
    if args.json {
        let mut v = json!({
            "captures": rows.iter().map(Row::json).collect::<Vec<_>>(),
            "summary": {"total": rows.len(), "passed": passed, "failed": failed},
        });
        if let Some(s) = shard {
            v["shard"] = json!({"index": s.index, "count": s.count});
        }
        if let Some(c) = comparison {
            v["baseline"] = json!(c);
        }
        out.json(&v)?;
    } else {
        print_table(rows, out)?;
        if let Some(c) = comparison {
            print_comparison(c, out)?;
        }
        out.line(&format!(
            "\n{} captures: {passed} passed, {failed} failed{}{}",
            rows.len(),
            shard.map(|s| format!(" (shard {}/{})", s.index, s.count)).unwrap_or_default(),
            match target {
                Target::File(p) => format!(" — journaled in {}", escape(&p.display().to_string())),
                Target::Memory => " — not journaled (--no-journal)".to_string(),
            }
        ))?;
    }
    Ok(())
}

/// The exit: 1 when a capture failed or regressed against the baseline.
fn verdict(rows: &[Row], comparison: Option<&Comparison>) -> Outcome {
    let failed = rows.iter().filter(|r| !r.passed()).count();
    let regressions = comparison.map(|c| c.regressions.len()).unwrap_or(0);
    match (failed, regressions) {
        (0, 0) => Ok(()),
        (0, r) => Err(Failure::Problem(format!("{r} regression(s) against the baseline"))),
        (f, 0) => Err(Failure::Problem(format!("{f} of {} captures failed", rows.len()))),
        (f, r) => Err(Failure::Problem(format!(
            "{f} of {} captures failed; {r} regression(s) against the baseline",
            rows.len()
        ))),
    }
}

/// Runs the command.
pub fn run(
    args: Args,
    env: &std::collections::BTreeMap<String, String>,
    clock: &dyn salvage_types::Clock,
    out: &mut Output,
) -> Outcome {
    // Outputs are checked first: a run that could not write its report changes nothing (no
    // `--bless`, no journal) before it says so.
    crate::output::check_output("--junit", args.junit.as_deref())?;
    crate::output::check_output("--html", args.html.as_deref())?;
    let shard = args.shard.as_deref().map(Shard::parse).transpose().map_err(Failure::Input)?;
    let set = overrides(&args.set)?;
    let limits = crate::db::ceilings(env)?;
    let baseline = read_baseline(&args, limits.capture.max_file_bytes)?;
    if args.bless && !set.is_empty() {
        return Err(Failure::Input(
            "--bless with --set would record a what-if run as the expectation".into(),
        ));
    }
    let mut loaded = load(&args, &set, &limits.capture)?;
    if let Some(s) = shard {
        loaded.keep_shard(s);
    }
    let target = target(&args)?;
    let mut reports = replay_all(&args, env, &mut loaded.captures, &target, clock)?;
    if args.bless {
        bless(&loaded.captures, &reports)?;
        reports.iter_mut().for_each(CaptureReport::accept_blessed);
    }
    let comparison =
        baseline.as_ref().map(|b| salvage_replay::baseline::compare(&reports, b, args.threshold));
    let rows = loaded.into_rows(reports);
    write_reports(&args, &rows, &target, clock)?;
    print_run(&args, &rows, shard, comparison.as_ref(), &target, out)?;
    verdict(&rows, comparison.as_ref())
}

fn junit_case(row: &Row) -> junit::Case {
    match row {
        Row::Done(r) => junit::Case {
            name: r.id.clone(),
            file: r.file.clone(),
            failures: failed_checks(r),
            error: None,
            output: format!(
                "outcome {}, {} attempt(s), requests {:?} bytes{}{}",
                r.outcome,
                r.attempts,
                r.request_bytes,
                r.session.as_deref().map(|s| format!(", journal session {s}")).unwrap_or_default(),
                // A setting of the capture the run could not use, as the table says it.
                r.messages
                    .iter()
                    .filter(|m| m.starts_with("⚠ invalid setting"))
                    .map(|m| format!("\n{m}"))
                    .collect::<String>()
            ),
        },
        Row::Unreadable { id, file, error } => junit::Case {
            name: id.clone(),
            file: file.clone(),
            failures: Vec::new(),
            error: Some(error.clone()),
            output: String::new(),
        },
    }
}

fn corpus_row(row: &Row) -> crate::html::CorpusRow {
    match row {
        Row::Done(r) => {
            let n = r.request_bytes.len().saturating_sub(1);
            crate::html::CorpusRow {
                id: r.id.clone(),
                file: Some(r.file.clone()),
                outcome: r.outcome.to_string(),
                attempts: r.attempts,
                bytes: (
                    r.request_bytes.first().copied().unwrap_or(0),
                    r.request_bytes.last().copied().unwrap_or(0),
                ),
                tokens: (
                    r.estimated_tokens.first().copied().unwrap_or(0),
                    r.estimated_tokens.get(n).copied().unwrap_or(0),
                ),
                real_tokens: (
                    r.real_tokens.first().copied().flatten(),
                    r.real_tokens.get(n).copied().flatten(),
                ),
                checks: Some((r.checks.iter().filter(|c| c.ok).count(), r.checks.len())),
                failed: failed_checks(r).into_iter().map(|(k, d)| line(&k, &d)).collect(),
                session: r.session.clone(),
                passed: r.passed(),
            }
        }
        Row::Unreadable { id, file, error } => crate::html::CorpusRow {
            id: id.clone(),
            file: Some(file.clone()),
            outcome: "unreadable".into(),
            attempts: 0,
            bytes: (0, 0),
            tokens: (0, 0),
            real_tokens: (None, None),
            checks: Some((0, 1)),
            failed: vec![format!("readable: {error}")],
            session: None,
            passed: false,
        },
    }
}

fn print_comparison(c: &salvage_replay::baseline::Comparison, out: &mut Output) -> std::io::Result<()> {
    out.line(&format!(
        "\nbaseline: {} regression(s), {} improvement(s), {} new, {} not in this run (threshold +{}%)",
        c.regressions.len(),
        c.improvements.len(),
        c.new.len(),
        c.missing.len(),
        c.threshold_percent
    ))?;
    for r in &c.regressions {
        out.line(&format!("  ✖ {}: {}", r.id, r.detail))?;
    }
    for r in &c.improvements {
        out.line(&format!("  ✔ {}: {}", r.id, r.detail))?;
    }
    Ok(())
}

fn print_table(rows_in: &[Row], out: &mut Output) -> std::io::Result<()> {
    let mut rows =
        vec![["CAPTURE", "OUTCOME", "ATTEMPTS", "RUNG", "BYTES", "TOKENS (est/real)", "CHECKS", "SESSION"]
            .map(String::from)
            .to_vec()];
    for row in rows_in {
        let r = match row {
            Row::Done(r) => r,
            Row::Unreadable { id, .. } => {
                rows.push(vec![
                    id.clone(),
                    "unreadable".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "FAIL readable".into(),
                    "-".into(),
                ]);
                continue;
            }
        };
        let (first, last) =
            (r.request_bytes.first().copied().unwrap_or(0), r.request_bytes.last().copied().unwrap_or(0));
        let tok = |i: usize| {
            format!(
                "{}/{}",
                r.estimated_tokens.get(i).copied().unwrap_or(0),
                r.real_tokens.get(i).copied().flatten().map(|t| t.to_string()).unwrap_or_else(|| "-".into())
            )
        };
        let n = r.request_bytes.len().saturating_sub(1);
        let ok = r.checks.iter().filter(|c| c.ok).count();
        let verdict = if r.passed() {
            format!("{ok}/{} ok", r.checks.len())
        } else {
            let mut names: Vec<String> = failed_checks(r).into_iter().map(|(k, _)| k).collect();
            names.dedup();
            format!("FAIL {}", names.join(","))
        };
        rows.push(vec![
            r.id.clone(),
            r.outcome.to_string(),
            r.attempts.to_string(),
            r.rung.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
            format!("{} → {}", format_bytes(first), format_bytes(last)),
            format!("{} → {}", tok(0), tok(n)),
            verdict,
            r.session.as_deref().map(crate::output::short_session).unwrap_or("-").to_string(),
        ]);
    }
    out.put(&table(&rows))?;
    for row in rows_in {
        match row {
            Row::Done(r) => {
                // What `--bless` replaced, for review, beside anything still failing.
                let blessed: Vec<&String> =
                    r.messages.iter().filter(|m| m.starts_with("blessed (was: ")).collect();
                // A capture's setting the run could not use (its default stood in): said here,
                // not only in --json, since it changes what the replay modeled.
                let invalid: Vec<&String> =
                    r.messages.iter().filter(|m| m.starts_with("⚠ invalid setting")).collect();
                if r.passed() && blessed.is_empty() && invalid.is_empty() {
                    continue;
                }
                out.line(&format!("\n{} ({}):", escape(&r.id), escape(&r.file)))?;
                for m in invalid {
                    out.line(&format!("  {}", escape(m)))?;
                }
                for m in blessed {
                    out.line(&format!("  ↻ {}", escape(m)))?;
                }
                for (k, d) in failed_checks(r) {
                    out.line(&format!("  ✖ {}", escape(&line(&k, &d))))?;
                }
            }
            Row::Unreadable { file, error, .. } => {
                out.line(&format!("\n{}:", escape(file)))?;
                out.line(&format!("  ✖ readable: {}", escape(error)))?;
            }
        }
    }
    Ok(())
}

/// A percentage for `--threshold`: finite and not negative (`nan` or `inf` would switch the
/// regression check off unseen).
fn percent(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a percentage (a finite number ≥ 0, e.g. 10 or 2.5)")),
    }
}
