//! `salvage journal …`: audit and restore sessions.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{table, write_atomic, Output};
use crate::terminal::{escape, shell_quote};
use salvage_journal::{Journal, JournalError};
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `salvage journal`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// List sessions.
    Sessions {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// A session's timeline: time, kind and a one-line summary per event.
    Log {
        /// The session id.
        session: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The exact history at an event, as a JSON array of messages.
    Show {
        /// The session id.
        session: String,
        /// The event (default: the latest).
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Print the whole state (cap, counters, undo stack, checkpoints) instead of the history.
        #[arg(long)]
        state: bool,
    },
    /// Append a rewind to an earlier event (nothing is deleted; undo it with another rewind).
    Rewind {
        /// The session id.
        session: String,
        /// The target event.
        #[arg(long, value_name = "SEQ")]
        to: u64,
    },
    /// A session's checkpoints.
    Checkpoints {
        /// The session id.
        session: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Verify hash chains, sequences, parent links, messages and CCR references; exit 1 naming the first bad event.
    Verify {
        /// Only this session.
        session: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Journal a whole client session from its session file: one event per turn, the client's
    /// compactions as compaction events (the pre-compaction history archived in CCR). Importing
    /// the same file again appends nothing; a longer version appends only what is new.
    #[command(
        after_help = "Files: Claude Code ~/.claude/projects/<project>/<session>.jsonl, Codex CLI ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl.\nExample:\n  salvage journal import --from claude-code ~/.claude/projects/-home-me-app/5c0375b4-….jsonl\n  salvage journal log 5c0375b4-…"
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
    /// Export a session as a capture (default), as JSONL events, or as a request body of a
    /// provider format (the history with the blocks its messages carry).
    Export {
        /// The session id.
        session: String,
        /// `capture`, `jsonl`, or a request body: `openai`, `anthropic`, `openai_responses`,
        /// `gemini`, `bedrock`, `chatcli` (a session file).
        #[arg(long, default_value = "capture", value_parser = ["capture", "jsonl", "openai", "anthropic", "openai_responses", "gemini", "bedrock", "chatcli"])]
        format: String,
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
enum SessionFrom {
    /// Claude Code transcript (JSONL).
    ClaudeCode,
    /// Codex CLI rollout (JSONL).
    Codex,
}

fn problem(e: JournalError) -> Failure {
    match e {
        JournalError::NoSession(_) | JournalError::NoEvent { .. } | JournalError::Invalid(_) => {
            Failure::Input(e.to_string())
        }
        other => Failure::Problem(other.to_string()),
    }
}

/// Runs the command.
pub fn run(args: Args, out: &mut Output) -> Outcome {
    if let Sub::Import { from, file, session, json } = args.command {
        return import(&args.db, from, &file, session, json, out);
    }
    // Only rewind and redact write; every other subcommand opens the file read-only.
    let store = match args.command {
        Sub::Rewind { .. } | Sub::Redact { .. } => args.db.open_existing()?,
        _ => args.db.open_read()?,
    };
    let mut j = Journal::from_store(store);
    match args.command {
        Sub::Sessions { json } => {
            let s = j.sessions().map_err(problem)?;
            if json {
                out.json(&json!({ "sessions": s }))?;
            } else {
                let mut rows =
                    vec![vec!["SESSION".to_string(), "EVENTS".into(), "CREATED".into(), "TITLE".into()]];
                rows.extend(s.iter().map(|x| {
                    vec![x.id.clone(), x.events.to_string(), x.created_at.clone(), x.title.clone()]
                }));
                out.put(&table(&rows))?;
            }
        }
        Sub::Log { session, json } => {
            let events = j.events(&session, 0, usize::MAX >> 1).map_err(problem)?;
            if json {
                let v: Vec<_> = events.iter().map(|e| json!({"seq": e.seq, "kind": e.kind, "ts": e.ts, "summary": e.body.summary(), "parent": e.parent})).collect();
                out.json(&json!({ "events": v }))?;
            } else {
                let mut rows = Vec::new();
                for e in &events {
                    let branch = match e.parent {
                        Some(p) if p + 1 != e.seq => format!("(from {p}) "),
                        _ => String::new(),
                    };
                    rows.push(vec![
                        format!("{:>4}", e.seq),
                        e.ts.clone(),
                        e.kind.clone(),
                        format!("{branch}{}", e.body.summary()),
                    ]);
                }
                out.put(&table(&rows))?;
            }
        }
        Sub::Show { session, at, state } => {
            let seq = match at {
                Some(s) => s,
                None => j.version(&session).map_err(problem)?,
            };
            let v = j.view_at(&session, seq).map_err(problem)?;
            if state {
                let mut s = serde_json::to_value(&v.state).map_err(|e| Failure::Problem(e.to_string()))?;
                s["history"] = json!(v.history.len());
                out.json(&s)?;
            } else {
                out.json(&json!(v.history))?;
            }
        }
        Sub::Rewind { session, to } => {
            let id = format!("rewind-{}-{}", session, chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0));
            let a = j.rewind(&session, to, "rewind", &id, chrono::Utc::now()).map_err(problem)?;
            out.line(&format!(
                "event {}: rewound to event {to} (undo with `salvage journal rewind {} --to {}`)",
                a.seq,
                escape(&shell_quote(&session)),
                a.seq - 1
            ))?;
        }
        Sub::Checkpoints { session, json } => {
            let v = j.version(&session).map_err(problem)?;
            let st = j.state_at(&session, v).map_err(problem)?;
            if json {
                let c: Vec<_> = st.checkpoints.iter().map(|(n, s)| json!({"name": n, "seq": s})).collect();
                out.json(&json!({ "checkpoints": c }))?;
            } else {
                for (n, s) in &st.checkpoints {
                    out.line(&format!("{s:>4}  {}", escape(n)))?;
                }
            }
        }
        Sub::Verify { session, json } => {
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
                out.line(&format!(
                    "{} session(s), {} event(s) checked, {} bad",
                    r.sessions,
                    r.events,
                    r.bad.len()
                ))?;
            }
            if let Some(b) = r.bad.first() {
                return Err(Failure::Problem(format!(
                    "session {} event {}: {}",
                    b.session, b.seq, b.problem
                )));
            }
        }
        Sub::Import { .. } => {}
        Sub::Export { session, format, output, no_redact } => {
            let mut counts = salvage_wire::redact::Counts::new();
            let text = if format == "jsonl" {
                let raw = j.export_jsonl(&session).map_err(problem)?;
                if no_redact {
                    raw
                } else {
                    raw.lines()
                        .map(|l| salvage_wire::redact::redact_json_line(l, &mut counts) + "\n")
                        .collect()
                }
            } else {
                let mut c = j.export_capture(&session).map_err(problem)?;
                if !no_redact {
                    counts = salvage_wire::redact::redact_capture(&mut c);
                }
                match salvage_types::capture::RequestFormat::parse(&format) {
                    Some(f) => {
                        let request = c
                            .request
                            .clone()
                            .filter(|r| r.format == f)
                            .unwrap_or_else(|| salvage_wire::bare_request(f, c.model.as_deref()));
                        let body = salvage_wire::request_body(&request, &c.history);
                        serde_json::to_string_pretty(&body).map_err(|e| Failure::Problem(e.to_string()))?
                            + "\n"
                    }
                    None => c.to_json_pretty(),
                }
            };
            if !counts.is_empty() {
                eprintln!("redacted {} (--no-redact keeps them)", salvage_wire::redact::describe(&counts));
            }
            match output {
                Some(p) => write_atomic(&p, text.as_bytes())
                    .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", p.display())))?,
                None => out.put(&text)?,
            }
        }
        Sub::Redact { session, message, at, index, whole } => {
            redact(&mut j, &session, &message, at, index, whole, out)?;
        }
    }
    Ok(())
}

/// `salvage journal redact`: picks the messages, builds their replacements, commits them with a
/// redaction event, then checkpoints the write-ahead log so the old bytes leave it too.
fn redact(
    j: &mut Journal,
    session: &str,
    message: &[String],
    at: Option<u64>,
    index: Option<usize>,
    whole: bool,
    out: &mut Output,
) -> Outcome {
    use salvage_journal::state::hex;
    let head = j.version(session).map_err(problem)?;
    let mut chosen: Vec<[u8; 32]> = Vec::new();
    if let Some(seq) = at {
        let picked = match index {
            Some(i) => {
                let h = j.history_hashes(session, seq).map_err(problem)?;
                vec![*h.get(i).ok_or_else(|| {
                    Failure::Input(format!(
                        "--index {i}: the history at event {seq} has {} message(s)",
                        h.len()
                    ))
                })?]
            }
            None => j.inserted_hashes(session, seq).map_err(problem)?,
        };
        if picked.is_empty() {
            return Err(Failure::Input(format!("--at {seq}: event {seq} inserted no message")));
        }
        chosen.extend(picked);
    }
    if !message.is_empty() {
        let all: Vec<[u8; 32]> = j.history_hashes_all(session).map_err(problem)?;
        for m in message {
            let m = m.trim().to_ascii_lowercase();
            if m.len() < 8 || !m.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Failure::Input(format!(
                    "--message {}: a message hash is 8 to 64 hex characters",
                    escape(&m)
                )));
            }
            let hits: Vec<&[u8; 32]> = all.iter().filter(|h| hex(h).starts_with(&m)).collect();
            match hits.as_slice() {
                [h] => chosen.push(**h),
                [] => {
                    return Err(Failure::Input(format!(
                        "--message {m}: no message of session {} has this hash",
                        escape(session)
                    )))
                }
                _ => {
                    return Err(Failure::Input(format!("--message {m}: ambiguous, give more hex characters")))
                }
            }
        }
    }
    chosen.sort_unstable();
    chosen.dedup();
    let current = j.messages_by_hash(session, head, &chosen).map_err(problem)?;
    let mut counts = salvage_wire::redact::Counts::new();
    let mut redactions = Vec::with_capacity(chosen.len());
    for (h, mut m) in chosen.iter().zip(current) {
        let before = counts.values().sum::<u64>();
        salvage_wire::redact::redact_message(&mut m, &mut counts);
        if whole || counts.values().sum::<u64>() == before {
            // Nothing the rules know, or asked to: the whole text goes.
            m.content = format!("[REDACTED:message:{}]", &hex(h)[..8]);
            m.system_parts.iter_mut().for_each(|p| p.text = m.content.clone());
            m.tool_calls.iter_mut().for_each(|c| c.arguments = serde_json::json!({}));
            m.images.clear();
            m.wire = None;
            *counts.entry("message".into()).or_insert(0) += 1;
        }
        redactions.push((*h, m));
    }
    let now = chrono::Utc::now();
    let body = salvage_types::event::EventBody::Redaction {
        keys: chosen.iter().map(|h| format!("message:{}", hex(h))).collect(),
        counts: counts.clone(),
    };
    let id = format!("redact-{session}-{}", now.timestamp_nanos_opt().unwrap_or(0));
    let a = j
        .redact_messages(session, &redactions, salvage_journal::NewEvent::new(id, now, body))
        .map_err(problem)?;
    // The old page images stay in the write-ahead log until a checkpoint copies the zeroed pages
    // back and truncates it.
    let busy: i64 = j
        .conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .map_err(|e| Failure::Problem(format!("checkpoint: {e}")))?;
    out.line(&format!(
        "event {}: redacted {} message(s) of session {} ({})",
        a.seq,
        chosen.len(),
        escape(session),
        salvage_wire::redact::describe(&counts)
    ))?;
    if busy != 0 {
        eprintln!("warning: another process holds the database open: the old bytes leave the write-ahead log at its next checkpoint");
    }
    Ok(())
}

fn import(
    db: &DbArgs,
    from: SessionFrom,
    file: &std::path::Path,
    session: Option<String>,
    json: bool,
    out: &mut Output,
) -> Outcome {
    let name = file.display().to_string();
    // The shared bounded reader: regular files only, the capture ceiling enforced while reading.
    let bytes =
        salvage_types::input::read_input(file, salvage_types::capture::DEFAULT_MAX_CAPTURE_BYTES, false)
            .map_err(Failure::input)?;
    let source = match from {
        SessionFrom::ClaudeCode => salvage_wire::Source::ClaudeCode,
        SessionFrom::Codex => salvage_wire::Source::Codex,
    };
    let read = salvage_wire::read_session(source, &bytes, &name).map_err(Failure::input)?;
    let id = session
        .or_else(|| read.id.clone())
        .or_else(|| file.file_stem().map(|s| s.to_string_lossy().to_string()))
        .unwrap_or_else(|| "imported".into());
    let src = salvage_journal::import::Source {
        session: id.clone(),
        title: format!(
            "{} {}",
            read.client,
            file.file_name().map(|f| f.to_string_lossy()).unwrap_or_default()
        ),
        client: read.client.to_string(),
        provider: read.provider.clone(),
        model: read.model.clone(),
    };
    let mut j = Journal::from_store(db.open()?);
    let done = j.import_steps(&src, &read.steps, chrono::Utc::now()).map_err(problem)?;
    if json {
        out.json(&json!({"session": id, "import": done, "report": read.report}))?;
    } else {
        eprint!("{name}: {}", read.report.describe());
        out.line(&format!(
            "session {id}: {} event(s) appended, {} step(s) already journaled{}{}; head at event {}",
            done.appended,
            done.existing,
            done.rewound_to
                .map(|t| format!(", rewound to event {t} (the file's branch changed)"))
                .unwrap_or_default(),
            if done.archived > 0 {
                format!(", {} compaction(s) archived", done.archived)
            } else {
                String::new()
            },
            done.head
        ))?;
    }
    Ok(())
}
