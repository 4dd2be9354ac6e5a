//! `salvage apply STAGE`: what-if, one stage on a history, the result on stdout, a report on stderr.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{write_atomic, Output};
use salvage_adapters::CcrArchive;
use salvage_ccr::Ccr;
use salvage_recovery::archive::{Archive, Archiver};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::tool_budget::Limits;
use salvage_recovery::{pairing, shrink, tool_budget};
use salvage_types::Clock;
use salvage_types::{ByteSize, Config, History};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The stage to run.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// Ladder rung 1: halved tool-result budget, assistant messages over 5 000 bytes cut.
    Rung1,
    /// Ladder rung 2: keep the last CHATCLI_EMERGENCY_KEEP_MESSAGES non-system messages.
    Rung2,
    /// Ladder rung 3: keep the last 4, each capped at 4 000 bytes, then shrink to the payload budget.
    Rung3,
    /// Tool-call pairing repair.
    Pairing,
    /// The tool-result budget (CHATCLI_TOOL_RESULT_MAX_CHARS / _BUDGET_CHARS).
    Budget,
    /// Shrink content to --budget BYTES.
    Shrink,
    /// Microcompact old tool results (--turn N: the current turn; default: assistant messages so far).
    Microcompact,
    /// Stub earlier reads of a file covered by a later read.
    Dedup,
    /// Compaction level 1 only: strip reasoning, compact tool markup, shorten feedback.
    Trim,
    /// The full compaction pipeline (trim, summarize, emergency truncate) to --budget or the model's budget.
    Compact,
}

/// Arguments of `salvage apply`.
#[derive(clap::Args)]
#[command(
    after_help = "The history is a JSON array of messages, or a capture (its history is used).\nOriginals of dropped or cut messages are archived in the database's CCR (--no-ccr to skip) so every marker in the output resolves with `salvage recall`.\nExample: salvage apply rung3 --budget 90KB history.json > smaller.json"
)]
pub struct Args {
    /// The stage.
    #[arg(value_enum)]
    stage: Stage,
    /// History JSON file ('-' or absent for stdin).
    file: Option<PathBuf>,
    /// Byte budget for `shrink` and `rung3` (e.g. 90KB); default for rung3: payload cap × 0.7.
    #[arg(long, value_name = "SIZE")]
    budget: Option<String>,
    /// Level-2 summarizer for `compact`: builtin, cmd:PROGRAM or mcp:SERVER (default: CHATCLI_CONTEXT_ENGINE).
    #[arg(long, value_name = "ROUTE")]
    summarizer: Option<String>,
    /// The current turn, for `microcompact`.
    #[arg(long, value_name = "N")]
    turn: Option<u32>,
    /// The model, for the budget of `compact` (its window from the catalog unless CHATCLI_CONTEXT_WINDOW).
    #[arg(long)]
    model: Option<String>,
    /// Do not archive originals (markers are then not written).
    #[arg(long)]
    no_ccr: bool,
    /// Write the report JSON to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    #[command(flatten)]
    db: DbArgs,
}

/// The history in FILE (or stdin), read as a capture is: a regular file, at most `limit` bytes
/// (SALVAGE_MAX_CAPTURE), stdin bounded the same way.
fn read_history(file: &Option<PathBuf>, limit: u64) -> Result<History, Failure> {
    let path = match file {
        Some(p) if p.as_os_str() != "-" => p.as_path(),
        _ => {
            crate::output::stdin_hint("a history JSON array or a capture");
            std::path::Path::new("-")
        }
    };
    let (bytes, name) = crate::commands::read_input_file(path, limit)?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'{') {
        let c = salvage_types::capture::parse_capture(&bytes, &name).map_err(Failure::input)?;
        Ok(c.history)
    } else {
        salvage_types::capture::from_json_bytes::<History>(&bytes, &name).map_err(Failure::input)
    }
}

/// `--budget`, parsed.
fn budget(args: &Args) -> Result<Option<u64>, Failure> {
    match &args.budget {
        None => Ok(None),
        Some(t) => Ok(Some(
            ByteSize::parse(t)
                .ok_or_else(|| Failure::Input(format!("--budget: {t:?} is not a size such as 90KB")))?
                .0,
        )),
    }
}

fn archive_failure(e: salvage_recovery::archive::ArchiveError) -> Failure {
    Failure::Problem(e.to_string())
}

/// Stages `rung1`..`rung3`: one rung of the ladder.
fn rung(
    stage: Stage,
    history: &History,
    config: &Config,
    budget: Option<u64>,
    limits: Limits,
    archiver: Archiver<'_>,
) -> Result<(History, serde_json::Value), Failure> {
    let rung = match stage {
        Stage::Rung1 => Rung::Aggressive,
        Stage::Rung2 => Rung::Emergency,
        _ => Rung::Nuclear,
    };
    let payload_budget = budget.or(config.max_payload.map(|c| c.saturating_mul(7) / 10));
    let mut ctx = RungContext {
        archiver,
        keep: config.emergency_keep_messages,
        limits,
        payload_budget,
        rung3_keep: salvage_recovery::ladder::RUNG3_KEEP,
    };
    let o = ladder::apply(rung, history, &mut ctx).map_err(archive_failure)?;
    eprintln!("{}", o.report.summary());
    Ok((o.history, json!(o.report)))
}

/// The hooks configured for `apply`, load errors said as warnings.
fn load_hooks<'c>(
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
    clock: &'c dyn Clock,
) -> salvage_adapters::hooks::ConfiguredHooks<'c> {
    let hooks = salvage_adapters::hooks::ConfiguredHooks::load(
        &salvage_adapters::hooks::default_files(cwd, home),
        "apply",
        &cwd.display().to_string(),
        clock,
    );
    for e in &hooks.load_errors {
        eprintln!("warning: hooks: {e}");
    }
    hooks
}

/// A summarizer that failed is said in the human output, not only in the report.
fn warn_failed_summaries(route: &str, events: &[salvage_types::event::EventBody]) {
    for e in events {
        if let salvage_types::event::EventBody::SummaryAttempt { attempt, passed: false, reason, .. } = e {
            eprintln!(
                "│ ⚠ summarizer {route} attempt {attempt} failed: {}",
                reason.as_deref().unwrap_or("no reason given")
            );
        }
    }
}

/// Stage `compact`: a manual compaction with the chosen summarizer and the configured hooks
/// (`clock` dates their payloads).
#[allow(clippy::too_many_arguments)]
fn compact(
    args: &Args,
    env: &BTreeMap<String, String>,
    config: &Config,
    history: &History,
    budget: Option<u64>,
    archive: Option<&mut dyn Archive>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
    clock: &dyn Clock,
) -> Result<(History, serde_json::Value), Failure> {
    let info = salvage_recovery::budget::model_info(args.model.as_deref(), config.context_window);
    let budget = budget.unwrap_or_else(|| {
        salvage_recovery::budget::budget(
            info.context_window,
            salvage_recovery::budget::Surface::Manual.ratio(),
            salvage_recovery::budget::CHARS_PER_TOKEN,
            config.max_payload,
        )
    });
    let route = args.summarizer.clone().unwrap_or_else(|| match &config.context_engine {
        salvage_types::config::ContextEngine::Mcp(s) => format!("mcp:{s}"),
        _ => "builtin".into(),
    });
    let cwd = std::env::current_dir().unwrap_or_default();
    let home = env.get("HOME").map(PathBuf::from);
    let mut summarizer =
        crate::summarizers::build(&route, &cwd, home.as_deref(), &[]).map_err(Failure::Input)?;
    let mut hooks = load_hooks(&cwd, home.as_deref(), clock);
    let cancel = salvage_recovery::summarizer::Cancel::new();
    // Only a model-backed summarizer takes seconds: the built-in and recorded ones are local.
    let local = route == "builtin" || route == "recorded";
    let route_name = route.clone();
    let mut status = |phase: salvage_recovery::compaction::Phase, s: &str| {
        if local && phase == salvage_recovery::compaction::Phase::Summarize {
            eprintln!("│ 🧠 Summarizing older messages ({route_name} summarizer, no LLM)…");
        } else {
            eprintln!("│ {s}");
        }
    };
    let mut state = salvage_recovery::compaction::CompactionState::default();
    let plan = salvage_recovery::compaction::Plan {
        budget,
        trigger: salvage_types::event::Trigger::Manual,
        min_keep_recent: salvage_recovery::compaction::MIN_KEEP_RECENT,
        summarizer_window_chars: usize::try_from(info.context_window.saturating_mul(4)).unwrap_or(usize::MAX),
    };
    let mut io = salvage_recovery::compaction::Io {
        archiver: Archiver::new(archive.map(|a| a as &mut dyn Archive)),
        lookup,
        summarizer: summarizer.as_mut(),
        hooks: &mut hooks,
        memory: &mut salvage_recovery::compaction::NoMemory,
        status: &mut status,
        cancel: &cancel,
    };
    let o = salvage_recovery::compaction::compact(history, &plan, &mut state, &mut io)
        .map_err(|e| Failure::Problem(e.to_string()))?;
    warn_failed_summaries(&route, &o.events);
    Ok((o.history, json!({"outcome": o.outcome, "level": o.level, "budget": budget, "events": o.events})))
}

/// Runs the command.
pub fn run(args: Args, env: &BTreeMap<String, String>, clock: &dyn Clock, out: &mut Output) -> Outcome {
    crate::output::check_output("--report", args.report.as_deref())?;
    let config = Config::from_env(env);
    for (name, why) in config.errors() {
        eprintln!("warning: {name}: {why}");
    }
    let budget = budget(&args)?;
    if args.stage == Stage::Shrink && budget.is_none() {
        return Err(Failure::Input("shrink needs --budget SIZE".into()));
    }
    let history = read_history(&args.file, crate::db::ceilings(env)?.capture.max_file_bytes)?;
    let store = if args.no_ccr { None } else { Some(args.db.open()?) };
    let mut adapter = store.as_ref().map(|s| CcrArchive { ccr: Ccr::new(s.conn(), clock) });
    let reader = store.as_ref().map(|s| Ccr::new(s.conn(), clock));
    let lookup = |k: &str| reader.as_ref().and_then(|r| r.get(k).ok());
    // Where the stage's originals go; each stage makes its archiver of it.
    let archive = adapter.as_mut().map(|a| a as &mut dyn Archive);
    let limits =
        Limits { per_result: config.tool_result_max_chars, per_turn: config.tool_result_budget_chars };
    let (result, report) = match args.stage {
        Stage::Rung1 | Stage::Rung2 | Stage::Rung3 => {
            rung(args.stage, &history, &config, budget, limits, Archiver::new(archive))?
        }
        Stage::Pairing => {
            let (h, r) = pairing::repair(&history);
            (h.into_owned(), json!(r))
        }
        Stage::Budget => {
            let mut archiver = Archiver::new(archive);
            let (h, r) = tool_budget::apply(&history, limits, &mut archiver).map_err(archive_failure)?;
            let keys: Vec<String> = archiver.keys.iter().map(|k| k.short()).collect();
            (h, json!({"previewed": r.previewed, "freed_bytes": r.freed_bytes, "archived": keys}))
        }
        Stage::Shrink => {
            let mut archiver = Archiver::new(archive);
            let (h, r) =
                shrink::shrink(&history, budget.unwrap_or(0), &mut archiver).map_err(archive_failure)?;
            let keys: Vec<String> = archiver.keys.iter().map(|k| k.short()).collect();
            (
                h,
                json!({"cuts": r.cuts, "before_bytes": r.before_bytes, "after_bytes": r.after_bytes, "fits": r.fits, "archived": keys}),
            )
        }
        Stage::Microcompact => microcompact(&args, &history, &config, archive, &lookup)?,
        Stage::Dedup => {
            let (h, r) = salvage_recovery::dedup::dedup(&history, &mut Archiver::new(archive))
                .map_err(archive_failure)?;
            (h, json!(r))
        }
        Stage::Trim => {
            let (h, r) = salvage_recovery::trim::trim(&history, &mut Archiver::new(archive))
                .map_err(archive_failure)?;
            (h, json!(r))
        }
        Stage::Compact => compact(&args, env, &config, &history, budget, archive, &lookup, clock)?,
    };
    write_report(args.report.as_deref(), &report)?;
    out.json(&json!(result))?;
    Ok(())
}

/// The stage's report, pretty JSON, to `--report FILE` or else to stderr.
fn write_report(path: Option<&std::path::Path>, report: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(report).map_err(|e| Failure::Problem(e.to_string()))?;
    match path {
        Some(p) => write_atomic(p, text.as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", p.display())))?,
        None => eprintln!("{text}"),
    }
    Ok(())
}

/// The `microcompact` stage at `--turn` (else the number of assistant messages).
fn microcompact(
    args: &Args,
    history: &History,
    config: &Config,
    archive: Option<&mut dyn Archive>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<(History, serde_json::Value), Failure> {
    let turn = args.turn.unwrap_or_else(|| {
        history.iter().filter(|m| m.role == salvage_types::Role::Assistant).count() as u32
    });
    let ages = salvage_recovery::microcompact::Ages {
        truncate: config.microcompact_truncate_turns,
        summarize: config.microcompact_summarize_turns,
    };
    let (h, r) = salvage_recovery::microcompact::microcompact(
        history,
        turn,
        ages,
        &mut Archiver::new(archive),
        lookup,
    )
    .map_err(archive_failure)?;
    eprintln!("{}", r.line());
    Ok((h, json!(r)))
}
