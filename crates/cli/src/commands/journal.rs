//! `salvage journal …`: audit and restore sessions.

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{table, write_atomic, Output};
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
    let store = args.db.open_existing()?;
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
                "event {}: rewound to event {to} (undo with `salvage journal rewind {session} --to {}`)",
                a.seq,
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
                    out.line(&format!("{s:>4}  {n}"))?;
                }
            }
        }
        Sub::Verify { session, json } => {
            let r = j.verify(session.as_deref()).map_err(problem)?;
            if json {
                out.json(&json!(r))?;
            } else {
                for b in &r.bad {
                    out.line(&format!("BAD  session {} event {}: {}", b.session, b.seq, b.problem))?;
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
        Sub::Export { session, format, output, no_redact } => {
            let mut counts = salvage_wire::redact::Counts::new();
            let text = if format == "jsonl" {
                let raw = j.export_jsonl(&session).map_err(problem)?;
                if no_redact {
                    raw
                } else {
                    raw.lines().map(|l| salvage_wire::redact::redact_text(l, &mut counts) + "\n").collect()
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
    }
    Ok(())
}
