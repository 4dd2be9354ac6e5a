//! `salvage`: keep long LLM agent sessions alive and make their failures reproducible.
//!
//! The binary is thin: it parses arguments with clap, builds the configuration from the process
//! environment (the only place that reads it), and hands each subcommand a plan and an output
//! handle. Exit codes: 0 success, 1 the command ran and found a problem, 2 usage or unreadable input.

mod atomic_file;
mod commands;
mod db;
mod exit;
mod html;
mod junit;
mod markup;
mod output;
mod summarizers;
mod terminal;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Keep long LLM agent sessions alive and make their failures reproducible.
///
/// salvage re-implements the context-recovery system of an LLM client (classify the failure,
/// learn the gateway's cap, climb a bounded compaction ladder, archive everything dropped in a
/// verified compressed store) and records every step in an event-sourced SQLite journal.
#[derive(Parser)]
#[command(name = "salvage", version, about, long_about = None, propagate_version = true)]
#[command(
    after_help = "Exit codes: 0 success, 1 a problem was found, 2 usage or unreadable input.\nDatabase: --db PATH, else SALVAGE_DB, else .salvage/salvage.db."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay captured failures against their simulated upstream, check and journal them (the main job).
    Replay(commands::replay::Args),
    /// Print the effective CHATCLI_* settings, their source, and any invalid value.
    Config(commands::config::Args),
    /// Build a capture from a real request body or session file (capture JSON to stdout).
    Import(Box<commands::import::Args>),
    /// Print archived originals by key or marker (@recall).
    Recall(commands::recall::Args),
    /// The compressed archive: stats, verify, gc, put, redact.
    Ccr(commands::ccr::Args),
    /// Audit and restore sessions: sessions, log, show, rewind, checkpoints, verify, export.
    Journal(commands::journal::Args),
    /// Generate a large synthetic capture (benchmarks, soak runs).
    Generate(commands::generate::Args),
    /// Classify one failure (stdin JSON or flags).
    Classify(commands::classify::Args),
    /// What-if: run one stage on a history JSON and print the result.
    Apply(commands::apply::Args),
    /// Write a self-contained HTML audit of journaled sessions.
    Report(commands::report::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(commands::completions::Args),
    /// Print the man page (roff), generated from these definitions.
    Man(commands::completions::ManArgs),
    /// Record (and with --recover, recover) any client's sessions live: a reverse proxy to the provider.
    Proxy(Box<commands::proxy::Args>),
}

fn main() -> ExitCode {
    // An empty SALVAGE_DB means unset (clap would otherwise report a missing --db value).
    if std::env::var_os("SALVAGE_DB").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("SALVAGE_DB");
    }
    // A setting of ours whose value is not UTF-8 is refused by name: dropped, it read as unset
    // and its default stood unseen (review of the CLI, finding 12). Other variables are not ours.
    for (k, v) in std::env::vars_os() {
        let ours = k.to_str().is_some_and(|k| k.starts_with("CHATCLI_") || k.starts_with("SALVAGE_"));
        if ours && v.to_str().is_none() {
            eprintln!(
                "salvage: error: {}: the value is not UTF-8 text ({})",
                k.to_string_lossy(),
                terminal::escape(&v.to_string_lossy())
            );
            return ExitCode::from(2);
        }
    }
    let cli = Cli::parse();
    let env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let mut out = output::Output::stdout();
    // The one wall clock; every command that needs "now" is handed it.
    let clock = salvage_types::SystemClock;
    let result = match cli.command {
        Command::Replay(a) => commands::replay::run(a, &env, &clock, &mut out),
        Command::Config(a) => commands::config::run(a, &env, &mut out),
        Command::Import(a) => commands::import::run(*a, &env, &mut out),
        Command::Recall(a) => commands::recall::run(a, &env, &clock, &mut out),
        Command::Ccr(a) => commands::ccr::run(a, &env, &clock, &mut out),
        Command::Journal(a) => commands::journal::run(a, &clock, &mut out),
        Command::Generate(a) => commands::generate::run(a, &mut out),
        Command::Classify(a) => commands::classify::run(a, &env, &mut out),
        Command::Apply(a) => commands::apply::run(a, &env, &clock, &mut out),
        Command::Report(a) => commands::report::run(a, &clock, &mut out),
        Command::Completions(a) => commands::completions::run(a, Cli::command(), &mut out),
        Command::Man(a) => commands::completions::man(a, Cli::command(), &mut out),
        Command::Proxy(a) => commands::proxy::run(*a, &env, &mut out),
    };
    exit::finish(result, &mut out)
}
