//! `salvage journal export` and `salvage journal import`: a session out to a file format, and a
//! client's session file in.

use crate::commands::journal::{problem, SessionFrom};
use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{write_atomic, Output};
use salvage_journal::Journal;
use serde_json::json;
use std::path::PathBuf;

/// `salvage journal export`: the session as JSONL, OTLP, a capture or a provider body, redacted
/// unless `no_redact`.
pub fn export(
    j: &Journal,
    session: &str,
    format: &str,
    at: Option<String>,
    output: Option<PathBuf>,
    no_redact: bool,
    out: &mut Output,
) -> Outcome {
    crate::output::check_output("--output", output.as_deref())?;
    let at = at.map(|a| crate::commands::journal_points::event(j, session, &a)).transpose()?;
    let mut counts = salvage_wire::redact::Counts::new();
    let text = match format {
        "jsonl" => {
            let raw = j.export_jsonl_upto(session, at.unwrap_or(u64::MAX)).map_err(problem)?;
            if no_redact {
                raw
            } else {
                raw.lines().map(|l| salvage_wire::redact::redact_json_line(l, &mut counts) + "\n").collect()
            }
        }
        "otlp" => {
            if at.is_some() {
                return Err(Failure::Input(
                    "--at: not available with --format otlp (a trace covers the whole session)".into(),
                ));
            }
            let v = salvage_journal::otlp::session_traces(j, session).map_err(problem)?;
            let raw = serde_json::to_string(&v).map_err(|e| Failure::Problem(e.to_string()))? + "\n";
            if no_redact {
                raw
            } else {
                salvage_wire::redact::redact_text(&raw, &mut counts)
            }
        }
        _ => {
            let mut c = match at {
                Some(a) => j.export_capture_at(session, a),
                None => j.export_capture(session),
            }
            .map_err(problem)?;
            if !no_redact {
                counts = salvage_wire::redact::redact_capture(&mut c);
            }
            match salvage_types::capture::RequestFormat::parse(format) {
                Some(f) => {
                    let request = c
                        .request
                        .clone()
                        .filter(|r| r.format == f)
                        .unwrap_or_else(|| salvage_wire::bare_request(f, c.model.as_deref()));
                    let body = salvage_wire::request_body(&request, &c.history);
                    serde_json::to_string_pretty(&body).map_err(|e| Failure::Problem(e.to_string()))? + "\n"
                }
                None => c.to_json_pretty(),
            }
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

    Ok(())
}

/// `salvage journal import`: a client's session file, appended step by step (idempotent).
pub fn import(
    db: &DbArgs,
    from: SessionFrom,
    file: &std::path::Path,
    session: Option<String>,
    json: bool,
    now: chrono::DateTime<chrono::Utc>,
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
        SessionFrom::GeminiCli => salvage_wire::Source::GeminiCli,
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
    let done = j.import_steps(&src, &read.steps, now).map_err(problem)?;
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
