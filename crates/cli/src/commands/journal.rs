//! `salvage journal …`: audit and restore sessions.

use crate::db::WithDb;
use crate::exit::{Failure, Outcome};
use crate::output::{table, Output};
use crate::terminal::{escape, shell_quote};
use salvage_journal::lookup::SessionFilter;
use salvage_journal::{Journal, JournalError};
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `salvage journal`.
pub type Args = WithDb<Sub>;

/// The subcommands of `salvage journal`.
#[derive(clap::Subcommand)]
pub enum Sub {
    /// List sessions (oldest first), optionally filtered.
    Sessions {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Only sessions created since this time: RFC 3339, a date (2026-12-01) or an age (2h, 7d).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Only sessions that ended so: recovered, failed_fast, exhausted, not_recoverable, no_failure,
        /// or incomplete (a run cut short: the process stopped mid-recovery).
        #[arg(long, value_name = "OUTCOME")]
        outcome: Option<String>,
        /// Only sessions whose title contains this text (case-insensitive).
        #[arg(long, value_name = "TEXT")]
        title: Option<String>,
    },
    /// A session's timeline: time, kind and a one-line summary per event.
    Log {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The exact history at an event, as a JSON array of messages.
    Show {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// The event (default: the latest).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Print the whole state (cap, counters, undo stack, checkpoints) instead of the history.
        #[arg(long)]
        state: bool,
    },
    /// Append a rewind to an earlier event or checkpoint (nothing is deleted; undo it with another rewind).
    Rewind {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// The target: an event number or a checkpoint name (not the current head).
        #[arg(long, value_name = "SEQ|NAME")]
        to: String,
    },
    /// Append a named checkpoint at the session's head (a target for `rewind --to NAME`).
    Checkpoint {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// The checkpoint's name (not a number, not HEAD).
        #[arg(long)]
        name: String,
    },
    /// What changed between two events: messages dropped, added and stubbed, with sizes.
    Diff {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// The earlier event (number or checkpoint name).
        #[arg(long, value_name = "SEQ|NAME")]
        from: String,
        /// The later event (default: the head).
        #[arg(long, value_name = "SEQ|NAME")]
        to: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Delete whole sessions; `salvage ccr gc` then evicts the blobs no longer referenced.
    Delete {
        /// The sessions (ids, unique prefixes or `latest`).
        #[arg(required = true)]
        sessions: Vec<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Delete the sessions matching a filter (at least one of --before, --outcome, --title, --keep).
    Prune {
        /// Sessions created before this time: RFC 3339, a date or an age (30d: older than 30 days).
        #[arg(long, value_name = "WHEN")]
        before: Option<String>,
        /// Only sessions that ended so (as `sessions --outcome`; `incomplete` finds runs cut short,
        /// except those created in the last 10 minutes: a run may still be writing them).
        #[arg(long, value_name = "OUTCOME")]
        outcome: Option<String>,
        /// Only sessions whose title contains this text.
        #[arg(long, value_name = "TEXT")]
        title: Option<String>,
        /// Keep the newest N of the matching sessions.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// A session's checkpoints.
    Checkpoints {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Verify hash chains, sequences, parent links, messages and CCR references; exit 1 naming the first bad event.
    Verify {
        /// Only this session (id, unique prefix or `latest`).
        session: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Journal a whole client session from its session file: one event per turn, the client's
    /// compactions as compaction events (the pre-compaction history archived in CCR). Importing
    /// the same file again appends nothing; a longer version appends only what is new.
    #[command(
        after_help = "Files: Claude Code ~/.claude/projects/<project>/<session>.jsonl, Codex CLI ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl, Gemini CLI ~/.gemini/tmp/<project>/chats/session-*.json[l].\nExample:\n  salvage journal import --from claude-code ~/.claude/projects/-home-me-app/5c0375b4-….jsonl\n  salvage journal log 5c0375b4-…"
    )]
    Import {
        /// What FILE is.
        #[arg(long, value_enum)]
        from: SessionFrom,
        /// The session file.
        file: PathBuf,
        /// The journal session id (default: the file's session id, else the file name).
        #[arg(long)]
        session: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Export a session as a capture (default), as JSONL events, as a request body of a provider
    /// format (the history with the blocks its messages carry), or as OpenTelemetry spans (OTLP/JSON).
    Export {
        /// The session: its id, a unique prefix, its run stamp (after `@`), or `latest`.
        session: String,
        /// `capture`, `jsonl`, `otlp` (GenAI semantic-convention spans as OTLP/JSON), or a request
        /// body: `openai`, `anthropic`, `openai_responses`, `gemini`, `bedrock`, `chatcli` (a
        /// session file).
        #[arg(long, default_value = "capture", value_parser = ["capture", "jsonl", "otlp", "openai", "anthropic", "openai_responses", "gemini", "bedrock", "chatcli"])]
        format: String,
        /// The state after this event (number or checkpoint name) instead of the head (all but otlp).
        #[arg(long, value_name = "SEQ|NAME")]
        at: Option<String>,
        /// Write to this file (atomically) instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Keep likely secrets instead of replacing them with `[REDACTED:KIND:HASH]` placeholders.
        #[arg(long)]
        no_redact: bool,
    },
    /// Clear secrets from messages the journal stores: each chosen message's content is replaced
    /// (likely secrets by placeholders; with --whole, all its text), its old bytes are zeroed in
    /// the file, and a redaction event records it (the hash chain still verifies).
    #[command(group(clap::ArgGroup::new("which").required(true).args(["message", "at"])))]
    Redact {
        /// The session id.
        session: String,
        /// A message by its hash (64 hex, or a unique prefix of at least 8), as listed in the
        /// deltas of `journal export --format jsonl`; repeatable.
        #[arg(long, value_name = "HASH")]
        message: Vec<String>,
        /// The messages event SEQ inserted (with --index, the one message at that position of
        /// the history at SEQ, 0-based).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// With --at: the message at this position of the history at SEQ.
        #[arg(long, value_name = "I", requires = "at")]
        index: Option<usize>,
        /// Replace the whole text of each message, not only the secrets the rules find.
        #[arg(long)]
        whole: bool,
    },
}

/// Session files `journal import` reads.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SessionFrom {
    /// Claude Code transcript (JSONL).
    ClaudeCode,
    /// Codex CLI rollout (JSONL).
    Codex,
    /// Gemini CLI chat record (`chats/session-*.json[l]`).
    #[value(name = "gemini-cli", alias = "gemini_cli")]
    GeminiCli,
}

/// A journal error as the CLI reports it: the user's input (exit 2) or a problem (exit 1).
pub fn problem(e: JournalError) -> Failure {
    match e {
        JournalError::NoSession(_) | JournalError::NoEvent { .. } | JournalError::Invalid(_) => {
            Failure::Input(e.to_string())
        }
        other => crate::db::failure(other),
    }
}

/// Runs the command.
pub fn run(args: Args, clock: &dyn salvage_types::Clock, out: &mut Output) -> Outcome {
    let now = crate::commands::now(clock);
    if let Sub::Import { from, file, session, json } = args.command {
        return crate::commands::journal_export::import(&args.db, from, &file, session, json, now, out);
    }
    // Only rewind, checkpoint, delete, prune and redact write; every other subcommand opens the
    // file read-only.
    let store = match args.command {
        Sub::Rewind { .. }
        | Sub::Redact { .. }
        | Sub::Checkpoint { .. }
        | Sub::Delete { .. }
        | Sub::Prune { dry_run: false, .. } => args.db.open_existing()?,
        // A dry run only lists: it writes nothing, not even the schema into an empty file.
        _ => args.db.open_read()?,
    };
    let mut j = Journal::from_store(store);
    let resolve = |j: &Journal, s: &str| j.resolve_session(s).map_err(problem);
    match args.command {
        Sub::Sessions { json, since, outcome, title } => sessions(&j, json, since, outcome, title, now, out)?,
        Sub::Log { session, json } => log(&j, &resolve(&j, &session)?, json, out)?,
        Sub::Show { session, at, state } => show(&j, &resolve(&j, &session)?, at, state, out)?,
        Sub::Rewind { session, to } => {
            let session = resolve(&j, &session)?;
            rewind(&mut j, &session, &to, now, out)?;
        }
        Sub::Checkpoint { session, name } => {
            let session = resolve(&j, &session)?;
            let seq = crate::commands::journal_points::checkpoint(&mut j, &session, &name, now)?;
            out.line(&format!(
                "event {seq}: checkpoint {name:?} (rewind to it with `salvage journal rewind {} --to {}`)",
                escape(&shell_quote(&session)),
                escape(&shell_quote(&name))
            ))?;
        }
        Sub::Checkpoints { session, json } => checkpoints(&j, &resolve(&j, &session)?, json, out)?,
        Sub::Diff { session, from, to, json } => {
            let session = resolve(&j, &session)?;
            crate::commands::journal_diff::run(&j, &session, &from, to.as_deref(), json, out)?;
        }
        Sub::Delete { sessions, json } => {
            let ids = sessions.iter().map(|s| resolve(&j, s)).collect::<Result<Vec<_>, _>>()?;
            crate::commands::journal_delete::delete(&mut j, &ids, "delete", now, json, out)?;
        }
        Sub::Prune { before, outcome, title, keep, dry_run, json } => {
            if before.is_none() && outcome.is_none() && title.is_none() && keep.is_none() {
                return Err(Failure::Input(
                    "journal prune: give at least one of --before, --outcome, --title, --keep".into(),
                ));
            }
            let plan = crate::commands::journal_delete::PrunePlan {
                before: before.as_deref().map(|w| when("--before", w, now)).transpose()?,
                outcome: outcome.map(|o| checked_outcome(&o)).transpose()?,
                title,
                keep,
                dry_run,
            };
            crate::commands::journal_delete::prune(&mut j, &plan, now, json, out)?;
        }
        Sub::Verify { session, json } => {
            let session = session.map(|s| resolve(&j, &s)).transpose()?;
            verify(&j, session, json, out)?;
        }
        Sub::Import { .. } => {}
        Sub::Export { session, format, at, output, no_redact } => {
            let session = resolve(&j, &session)?;
            crate::commands::journal_export::export(&j, &session, &format, at, output, no_redact, out)?;
        }
        Sub::Redact { session, message, at, index, whole } => {
            crate::commands::journal_redact::redact(
                &mut j,
                &session,
                &message,
                at.map(|a| (a, index)),
                whole,
                now,
                out,
            )?;
        }
    }
    Ok(())
}

/// `salvage journal show`: the history (or the state) at an event, the head by default.
fn show(j: &Journal, session: &str, at: Option<u64>, state: bool, out: &mut Output) -> Outcome {
    let seq = match at {
        Some(s) => s,
        None => j.version(session).map_err(problem)?,
    };
    let v = j.view_at(session, seq).map_err(problem)?;
    if state {
        let mut s = serde_json::to_value(&v.state).map_err(|e| Failure::Problem(e.to_string()))?;
        s["history"] = json!(v.history.len());
        out.json(&s)?;
    } else {
        out.json(&json!(v.history))?;
    }
    Ok(())
}

/// `salvage journal rewind`: appends a rewind to an earlier event or checkpoint.
fn rewind(
    j: &mut Journal,
    session: &str,
    to: &str,
    now: chrono::DateTime<chrono::Utc>,
    out: &mut Output,
) -> Outcome {
    let head = j.version(session).map_err(problem)?;
    if to.eq_ignore_ascii_case("head") {
        return Err(Failure::Input(format!(
            "--to HEAD: session {session} is already at its head (event {head}); name an earlier event or checkpoint"
        )));
    }
    let target = crate::commands::journal_points::event(j, session, to)?;
    if target == head {
        return Err(Failure::Input(format!(
            "--to {to}: event {head} is the current head of session {session}; a rewind to it changes nothing"
        )));
    }
    let id = format!("rewind-{}-{}", session, now.timestamp_nanos_opt().unwrap_or(0));
    let a = j.rewind(session, target, "rewind", &id, now).map_err(problem)?;
    out.line(&format!(
        "event {}: rewound to event {target} (undo with `salvage journal rewind {} --to {}`)",
        a.seq,
        escape(&shell_quote(session)),
        a.seq - 1
    ))?;
    Ok(())
}

/// `salvage journal checkpoints`.
fn checkpoints(j: &Journal, session: &str, json: bool, out: &mut Output) -> Outcome {
    let c = crate::commands::journal_points::list(j, session)?;
    if json {
        // `checkpoints` are those in the head's state; a rewind back past one moves it
        // to `abandoned` (still a target for `rewind --to NAME`).
        let pick = |live: bool| -> Vec<serde_json::Value> {
            c.iter().filter(|p| p.live == live).map(|p| json!({"name": p.name, "seq": p.seq})).collect()
        };
        out.json(&json!({ "checkpoints": pick(true), "abandoned": pick(false) }))?;
    } else if c.is_empty() {
        out.line(&format!(
            "no checkpoints in {} (create one with `salvage journal checkpoint {} --name NAME`)",
            escape(session),
            escape(&shell_quote(session))
        ))?;
    } else {
        for p in &c {
            let note = if p.live { "" } else { "  (on an abandoned branch)" };
            out.line(&format!("{:>4}  {}{note}", p.seq, escape(&p.name)))?;
        }
    }
    Ok(())
}

/// `salvage journal sessions`.
fn sessions(
    j: &Journal,
    json: bool,
    since: Option<String>,
    outcome: Option<String>,
    title: Option<String>,
    now: chrono::DateTime<chrono::Utc>,
    out: &mut Output,
) -> Outcome {
    let filter = SessionFilter {
        since: since.as_deref().map(|w| when("--since", w, now)).transpose()?,
        outcome: outcome.map(|o| checked_outcome(&o)).transpose()?,
        title,
    };
    let s = j.sessions_filtered(&filter).map_err(problem)?;
    if json {
        let v: Vec<_> = s
            .iter()
            .map(|(x, o)| {
                json!({"id": x.id, "title": x.title, "events": x.events, "created_at": x.created_at, "outcome": o, "capture": x.capture})
            })
            .collect();
        out.json(&json!({ "sessions": v }))?;
    } else {
        let mut rows = vec![vec![
            "SESSION".to_string(),
            "EVENTS".into(),
            "CREATED".into(),
            "OUTCOME".into(),
            "TITLE".into(),
        ]];
        rows.extend(s.iter().map(|(x, o)| {
            vec![
                x.id.clone(),
                x.events.to_string(),
                x.created_at.clone(),
                o.unwrap_or("-").to_string(),
                x.title.clone(),
            ]
        }));
        out.put(&table(&rows))?;
    }

    Ok(())
}

/// `salvage journal log`.
fn log(j: &Journal, session: &str, json: bool, out: &mut Output) -> Outcome {
    let events = j.events(session, 0, usize::MAX >> 1).map_err(problem)?;
    let head = j.version(session).map_err(problem)?;
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let abandoned = salvage_journal::branches::abandoned(&links, head);
    if json {
        let v: Vec<_> = events.iter().map(|e| json!({"seq": e.seq, "kind": e.kind, "ts": e.ts, "summary": e.body.summary(), "parent": e.parent, "abandoned": abandoned.contains(&e.seq)})).collect();
        out.json(&json!({ "events": v }))?;
    } else {
        let mut rows = Vec::new();
        for e in &events {
            let branch = match e.parent {
                Some(p) if p + 1 != e.seq => format!("(from {p}) "),
                _ => String::new(),
            };
            let mark = if abandoned.contains(&e.seq) { "✗" } else { " " };
            rows.push(vec![
                format!("{:>4}{mark}", e.seq),
                e.ts.clone(),
                e.kind.clone(),
                format!("{branch}{}", e.body.summary()),
            ]);
        }
        out.put(&table(&rows))?;
        if !abandoned.is_empty() {
            out.line(&format!(
                "✗ {} event(s) on abandoned branches (rewound past; kept, not part of the head's state)",
                abandoned.len()
            ))?;
        }
    }

    Ok(())
}

/// `salvage journal verify`: exit 1 on the first bad event.
fn verify(j: &Journal, session: Option<String>, json: bool, out: &mut Output) -> Outcome {
    let r = j.verify(session.as_deref()).map_err(problem)?;
    if json {
        out.json(&json!(r))?;
    } else {
        for b in &r.bad {
            out.line(&format!(
                "BAD  session {} event {}: {}",
                escape(&b.session),
                b.seq,
                escape(&b.problem)
            ))?;
        }
        for s in &r.incomplete {
            out.line(&format!(
                "NOTE session {}: its last recovery run was cut short (a request after its last run_ended); its outcome is unknown",
                escape(s)
            ))?;
        }
        let incomplete = if r.incomplete.is_empty() {
            String::new()
        } else {
            format!(", {} incomplete", r.incomplete.len())
        };
        out.line(&format!(
            "{} session(s), {} event(s) checked, {} bad{incomplete}",
            r.sessions,
            r.events,
            r.bad.len()
        ))?;
    }
    if let Some(b) = r.bad.first() {
        return Err(Failure::Problem(format!("session {} event {}: {}", b.session, b.seq, b.problem)));
    }

    Ok(())
}

/// A time given as RFC 3339, a date (`2026-12-01`), or an age (`90m`, `2h`, `7d`, `2w`) counted
/// back from now, as the RFC 3339 text the journal stores.
pub fn when(flag: &str, text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, Failure> {
    let t = text.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(salvage_journal::rfc3339(&d.with_timezone(&chrono::Utc)));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(format!("{d}T00:00:00.000Z"));
    }
    let not_a_time = || {
        Failure::Input(format!(
            "{flag}: {text:?} is not a time (RFC 3339, a date such as 2026-12-01, or an age such as 2h or 7d)"
        ))
    };
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let unit_secs: i64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(not_a_time()),
    };
    if num.is_empty() {
        return Err(not_a_time());
    }
    // All digits: a parse failure is a number too large for i64, an age as out of range as any
    // other whose start chrono cannot represent (before year -262143); `now - Duration` panics on
    // those, so the subtraction is checked.
    let start = num
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_secs))
        .and_then(chrono::TimeDelta::try_seconds)
        .and_then(|age| now.checked_sub_signed(age));
    match start {
        Some(s) => Ok(salvage_journal::rfc3339(&s)),
        None => Err(Failure::Input(format!(
            "{flag}: the age {text:?} reaches back further than any time that can be represented; \
             give a smaller age or a date such as 2026-12-01"
        ))),
    }
}

/// An outcome in the one spelling of `replay --json`, or `incomplete` (a run cut short).
pub fn checked_outcome(o: &str) -> Result<String, Failure> {
    use salvage_journal::lookup::INCOMPLETE;
    match salvage_types::capture::Outcome::parse(o) {
        Some(x) => Ok(x.as_str().to_string()),
        None if o == INCOMPLETE => Ok(INCOMPLETE.to_string()),
        None => Err(Failure::Input(format!(
            "--outcome: {o:?} is not an outcome ({}, {INCOMPLETE})",
            salvage_types::capture::Outcome::ALL.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}
