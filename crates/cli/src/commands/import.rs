//! `salvage import`: build a capture from a real request body or session file.

use crate::exit::{Failure, Outcome};
use crate::output::Output;
use salvage_types::capture::{
    Capture, ClientInfo, Failure as CapturedFailure, Gateway, ModelSpec, OverflowStyle, Recorded,
    RejectStyle, Upstream, CAPTURE_FORMAT,
};
use salvage_types::config::SETTING_NAMES;
use salvage_types::ErrorClass;
use salvage_wire::Source;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The source shape.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// Detect the format from the file's shape (says which on stderr).
    Auto,
    /// OpenAI chat-completions request body.
    Openai,
    /// Anthropic Messages request body.
    Anthropic,
    /// OpenAI Responses API request body.
    #[value(name = "openai_responses", alias = "openai-responses", alias = "responses")]
    OpenaiResponses,
    /// Gemini generateContent request body.
    Gemini,
    /// Bedrock Converse request body.
    Bedrock,
    /// Reference-client (ChatCLI) session file, version 2.
    Chatcli,
    /// Claude Code transcript: `~/.claude/projects/<project>/<session>.jsonl`.
    #[value(alias = "claude_code")]
    ClaudeCode,
    /// Codex CLI rollout: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`.
    Codex,
    /// Cline / Roo Code `tasks/<id>/api_conversation_history.json`.
    Cline,
    /// Gemini CLI chat record `~/.gemini/tmp/<project>/chats/session-*.json[l]`, or a
    /// `/chat save` checkpoint `checkpoint-<tag>.json`.
    #[value(name = "gemini-cli", alias = "gemini_cli")]
    GeminiCli,
}

/// Arguments of `salvage import`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  salvage import --from anthropic body.json --status 413 --message '413 Payload Too Large' \\\n      --rejected-bytes 129434 --gateway-max-bytes 131072 --gateway-rejects-with http_413 > testdata/corpus/my-413.json\n\nThe CHATCLI_* settings of the environment are recorded in the capture's `settings`."
)]
pub struct Args {
    /// What FILE is (default: detected from its shape).
    #[arg(long, value_enum, default_value = "auto")]
    from: From,
    /// The request body or session file ('-' for stdin).
    file: PathBuf,
    #[command(flatten)]
    failure: crate::commands::classify::FailureFlags,
    /// Byte size of the rejected request, when the provider annotated it.
    #[arg(long, value_name = "BYTES")]
    rejected_bytes: Option<u64>,
    /// Simulated gateway: reject bodies larger than this.
    #[arg(long, value_name = "BYTES")]
    gateway_max_bytes: Option<u64>,
    /// Simulated gateway: how it rejects.
    #[arg(long, value_name = "STYLE", value_parser = ["http_413", "http_431", "waf_403", "waf_html_403", "connection_reset", "eof"])]
    gateway_rejects_with: Option<String>,
    /// Simulated gateway: the rejection carries the request's byte size.
    #[arg(long)]
    reports_request_size: bool,
    /// Simulated model: context window in tokens.
    #[arg(long, value_name = "TOKENS")]
    context_window: Option<u64>,
    /// Simulated model: overflow wording.
    #[arg(long, value_parser = ["anthropic", "openai", "gemini", "xai", "mistral", "bedrock"])]
    overflow_style: Option<String>,
    /// Capture id (default: the file name without extension).
    #[arg(long)]
    id: Option<String>,
    /// A one-line title.
    #[arg(long)]
    title: Option<String>,
    /// Provider name (default: from the body's shape).
    #[arg(long)]
    provider: Option<String>,
    /// Write the capture to this file (atomically) instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Keep likely secrets (API keys, bearer tokens, AWS keys, private keys, URL passwords); by
    /// default each is replaced with a stable `[REDACTED:KIND:HASH]` placeholder.
    #[arg(long)]
    no_redact: bool,
    /// Read FILE even when it is a pipe or a device (still bounded by SALVAGE_MAX_CAPTURE).
    #[arg(long)]
    allow_special: bool,
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// The gateway a payload-class failure implies when none was given (`spec/capture.md` check 0):
/// the loosest cap that still rejects what was seen — one byte under the reported size (or
/// under the body's size, when that is smaller or nothing was reported) — in the style the
/// failure shows. `None` when the failure is not payload-class.
fn modeled_gateway(capture: &Capture, args: &Args, sent: Option<u64>) -> Option<(Gateway, String)> {
    let f = &capture.failure;
    let weight = salvage_types::history_weight(&capture.history);
    let input = salvage_recovery::classify::FailureInput::new(f.clone(), weight);
    let class = salvage_recovery::classify::classify(&input).class;
    let text = format!("{} {}", f.message, f.transport.as_deref().unwrap_or_default()).to_lowercase();
    let style = match class {
        ErrorClass::PayloadTooLarge if f.status == Some(431) => RejectStyle::Http431,
        ErrorClass::PayloadTooLarge => RejectStyle::Http413,
        ErrorClass::WafRejection
            if ["invalid character '<'", "deserialization failed", "failed to decode response body"]
                .iter()
                .any(|p| text.contains(p)) =>
        {
            RejectStyle::WafHtml403
        }
        ErrorClass::WafRejection => RejectStyle::Waf403,
        ErrorClass::LikelyPayload if text.contains("reset") => RejectStyle::ConnectionReset,
        ErrorClass::LikelyPayload => RejectStyle::Eof,
        ErrorClass::ContextOverflow
        | ErrorClass::Auth
        | ErrorClass::RateLimit
        | ErrorClass::Timeout
        | ErrorClass::Server
        | ErrorClass::ModelNotFound
        | ErrorClass::TransientNetwork
        | ErrorClass::Unknown => return None,
    };
    // Under the body as the capture keeps it and as it was sent (redaction changes its size).
    let body = body_size(capture).min(sent.unwrap_or(u64::MAX));
    let (cap, why) = match f.rejected_request_bytes {
        Some(r) if r <= body => (r.saturating_sub(1), format!("the rejected size ({r} bytes) − 1")),
        Some(r) => (
            body.saturating_sub(1),
            format!("the body size ({body} bytes) − 1, as the reported size ({r} bytes) is larger"),
        ),
        None => (body.saturating_sub(1), format!("the body size ({body} bytes) − 1, no size was reported")),
    };
    let style = args.gateway_rejects_with.as_deref().and_then(RejectStyle::parse).unwrap_or(style);
    let reports = args.reports_request_size || f.rejected_request_bytes.is_some();
    let gateway = Gateway { max_body_bytes: Some(cap), rejects_with: style, reports_request_size: reports };
    let note = format!(
        "{} failure and no --gateway-max-bytes: modeling a gateway that rejects bodies over {cap} bytes ({why}) with {}{}",
        class.as_str(),
        style.as_str(),
        if reports { ", reporting the request size" } else { "" }
    );
    Some((gateway, note))
}

/// The size of a capture's body as a replay weighs it: exact for a body (`request.bytes`); for
/// a session file, the request the replay builds from it.
fn body_size(capture: &Capture) -> u64 {
    match capture.request.as_ref().filter(|r| r.format != salvage_types::capture::RequestFormat::Chatcli) {
        Some(r) => r.bytes,
        None => None,
    }
    .unwrap_or_else(|| {
        let info = salvage_recovery::budget::model_info(capture.model.as_deref(), None);
        salvage_replay::driver::body_bytes(capture, &capture.history, info.default_output, false)
    })
}

/// The input's name in messages and its bytes, read under the capture ceiling
/// (SALVAGE_MAX_CAPTURE).
fn read_bytes(args: &Args, env: &BTreeMap<String, String>) -> Result<(String, Vec<u8>), Failure> {
    let limit = crate::db::ceilings(env)?.capture.max_file_bytes;
    let name =
        if args.file.as_os_str() == "-" { "<stdin>".to_string() } else { args.file.display().to_string() };
    let bytes = salvage_types::input::read_input(&args.file, limit, args.allow_special).map_err(|e| {
        // Only import reads a pipe or device, and only when told to.
        let hint = if matches!(e, salvage_types::CaptureError::NotRegular { .. }) {
            " (give --allow-special to read a pipe or device)"
        } else {
            ""
        };
        Failure::input(if args.file.as_os_str() == "-" {
            e.to_string().replacen("-:", "<stdin>:", 1) + hint
        } else {
            e.to_string() + hint
        })
    })?;
    Ok((name, bytes))
}

/// The source shape `--from` names (`None`: detect it).
fn named_source(args: &Args) -> Option<Source> {
    Some(match args.from {
        From::Auto => return None,
        From::Openai => Source::Openai,
        From::Anthropic => Source::Anthropic,
        From::OpenaiResponses => Source::OpenaiResponses,
        From::Gemini => Source::Gemini,
        From::Bedrock => Source::Bedrock,
        From::Chatcli => Source::Chatcli,
        From::ClaudeCode => Source::ClaudeCode,
        From::Codex => Source::Codex,
        From::Cline => Source::Cline,
        From::GeminiCli => Source::GeminiCli,
    })
}

/// What an import read: its source, what it produced, and the error a session ended on.
type Read = (Source, salvage_wire::Imported, Option<salvage_wire::session::SeenError>);

/// Reads `bytes` as `source`. The bytes are moved into the import and dropped as soon as they
/// are parsed: the capture is built without the file held beside it.
fn read_as(source: Source, bytes: Vec<u8>, name: &str) -> Result<Read, Failure> {
    if source.is_session() {
        let session = salvage_wire::read_session(source, &bytes, name).map_err(Failure::input)?;
        drop(bytes);
        eprint!("{name}: {}", session.report.describe());
        let imported = session.imported();
        // What the capture holds of the session, when a compaction or a mid-call end makes it
        // less than the report's counts suggest.
        let compactions = session
            .steps
            .iter()
            .filter(|s| matches!(s.change, salvage_types::timeline::Change::Compaction { .. }))
            .count();
        if compactions > 0 {
            eprintln!(
                "{name}: the capture holds the history after the session's last compaction ({} messages; {compactions} \
                 compaction(s) in the file: `salvage journal import` keeps what came before)",
                imported.history.len()
            );
        }
        let answered: std::collections::HashSet<&str> =
            imported.history.iter().filter_map(|m| m.tool_call_id.as_deref()).collect();
        let open = imported
            .history
            .iter()
            .flat_map(|m| &m.tool_calls)
            .filter(|c| !answered.contains(c.id.as_str()))
            .count();
        if open > 0 {
            eprintln!("{name}: {open} tool call(s) have no result in the file (it was written mid-call, or the call was cut)");
        }
        Ok((source, imported, session.final_error().cloned()))
    } else {
        Ok((source, salvage_wire::import_owned(source, bytes, name).map_err(Failure::input)?, None))
    }
}

/// Detects the shape and reads the bytes as it. The detector parses the text (the whole of it
/// when it is one JSON value: that tree is the one imported, not parsed again); the bomb guard
/// the importers run comes first, so detection never builds more values than a file of this
/// size may hold (JSON Lines included).
fn read_detected(bytes: Vec<u8>, name: &str) -> Result<Read, Failure> {
    use salvage_wire::{Auto, AutoError};
    let said = |d: &salvage_wire::detect::Detected| {
        eprintln!("{name}: detected {} ({})", d.format.as_str(), d.because);
    };
    match salvage_wire::import_auto_owned(bytes, name) {
        Ok(Auto::Body { detected, source, imported }) => {
            said(&detected);
            Ok((source, imported, None))
        }
        Ok(Auto::Session { detected, source, bytes }) => {
            said(&detected);
            read_as(source, bytes, name)
        }
        Err(AutoError::Capture(e)) => Err(Failure::input(e)),
        Err(AutoError::Unrecognized(e)) => Err(Failure::input(format!("{name}: {e}"))),
        Err(AutoError::NoImporter(d)) => Err(Failure::input(format!(
            "{name}: looks like a {} file ({}), which this build cannot import",
            d.format.as_str(),
            d.because
        ))),
    }
}

/// The client a source names.
fn client_name(source: Source) -> String {
    match source {
        Source::Chatcli => "chatcli".into(),
        Source::ClaudeCode => "claude-code".into(),
        Source::Codex => "codex".into(),
        Source::Cline => "cline".into(),
        Source::GeminiCli => "gemini-cli".into(),
        Source::Openai | Source::Anthropic | Source::OpenaiResponses | Source::Gemini | Source::Bedrock => {
            "unknown".into()
        }
    }
}

/// The capture's id: `--id`, else the file's stem.
fn capture_id(args: &Args) -> String {
    args.id.clone().unwrap_or_else(|| {
        args.file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .filter(|s| s != "-")
            .unwrap_or_else(|| "imported".into())
    })
}

/// The failure: the error the session ended on, else the flags (a bare status gets its reason
/// phrase as the message).
fn failure(args: &Args, seen: Option<salvage_wire::session::SeenError>) -> CapturedFailure {
    let status = seen.as_ref().map_or(args.failure.status, |e| e.status);
    let message =
        seen.map(|e| e.message).or_else(|| args.failure.message.clone()).unwrap_or_else(|| {
            match (args.failure.status, &args.failure.transport) {
                (Some(s), _) => format!("{s} {}", reason_phrase(s)).trim().to_string(),
                (None, Some(t)) => t.clone(),
                (None, None) => String::new(),
            }
        });
    CapturedFailure {
        status,
        message,
        transport: args.failure.transport.clone(),
        rejected_request_bytes: args.rejected_bytes,
    }
}

/// The simulated upstream the flags describe.
fn upstream(args: &Args) -> Upstream {
    let gateway =
        (args.gateway_max_bytes.is_some() || args.gateway_rejects_with.is_some()).then(|| Gateway {
            max_body_bytes: args.gateway_max_bytes,
            rejects_with: args
                .gateway_rejects_with
                .as_deref()
                .and_then(RejectStyle::parse)
                .unwrap_or(RejectStyle::Http413),
            reports_request_size: args.reports_request_size,
        });
    let model = (args.context_window.is_some() || args.overflow_style.is_some()).then(|| ModelSpec {
        context_window_tokens: args.context_window,
        overflow_style: args.overflow_style.as_deref().and_then(OverflowStyle::parse),
        max_output_tokens: None,
    });
    Upstream { gateway, model, context_editing: None, responses: Vec::new() }
}

/// Writes the capture to `--output`, or to stdout. Streamed: the capture is never held a second
/// time as its text.
fn write(args: &Args, capture: &Capture, out: &mut Output) -> Outcome {
    match &args.output {
        Some(path) => {
            crate::atomic_file::write_with(path, |w| write_pretty(w, capture))
                .map_err(|e| Failure::input(format!("{}: cannot write: {e}", path.display())))?;
            eprintln!(
                "wrote {} ({} messages)",
                crate::terminal::escape(&path.display().to_string()),
                capture.history.len()
            );
        }
        None => write_pretty(out.writer(), capture)?,
    }
    Ok(())
}

/// Runs the command.
pub fn run(args: Args, env: &BTreeMap<String, String>, out: &mut Output) -> Outcome {
    crate::output::check_output("--output", args.output.as_deref())?;
    if !args.no_redact {
        // The rules compile on the other core while the input is read and parsed (a thread that
        // cannot start leaves it to the first redaction).
        let _ = std::thread::Builder::new().name("redact-rules".into()).spawn(salvage_wire::redact::prepare);
    }
    let (name, bytes) = read_bytes(&args, env)?;
    let (source, imported, seen) = match named_source(&args) {
        Some(source) => read_as(source, bytes, &name)?,
        None => read_detected(bytes, &name)?,
    };
    // A session that ended on an error the client recorded: that is the failure, unless the
    // command line says otherwise.
    let seen = seen.filter(|_| args.failure.is_empty());
    if let Some(e) = &seen {
        eprintln!("{name}: the session ended on an error the client recorded: {}", e.message);
    }
    if imported.history.is_empty() {
        return Err(Failure::input(format!("{name}: the history is empty: nothing to capture")));
    }
    let settings: BTreeMap<String, String> = env
        .iter()
        .filter(|(k, _)| SETTING_NAMES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut capture = Capture {
        format: CAPTURE_FORMAT.to_string(),
        id: capture_id(&args),
        title: args.title.clone(),
        client: Some(ClientInfo { name: client_name(source), surface: None }),
        provider: args.provider.clone().or(imported.provider),
        model: imported.model,
        settings,
        request: imported.request,
        history: imported.history,
        failure: failure(&args, seen),
        upstream: upstream(&args),
        recorded: Recorded::default(),
        expect: None,
    };
    // Measured only when there is a cap to model (a session file's body is built to weigh it).
    let unmodeled = capture.upstream.gateway.as_ref().is_none_or(|g| g.max_body_bytes.is_none());
    let sent = (unmodeled && !args.no_redact).then(|| body_size(&capture));
    if !args.no_redact {
        let counts = salvage_wire::redact::redact_capture(&mut capture);
        if !counts.is_empty() {
            eprintln!("redacted {} (--no-redact keeps them)", salvage_wire::redact::describe(&counts));
        }
    }
    // Modeled on the body as the capture keeps it and as it was sent, under both: redaction
    // changes its size, and a cap taken from the body as sent alone would let a redacted,
    // smaller attempt 0 through.
    if unmodeled {
        if let Some((gateway, note)) = modeled_gateway(&capture, &args, sent) {
            eprintln!("{name}: {note}");
            capture.upstream.gateway = Some(gateway);
        }
    }
    // Content the request names but does not carry: the replay cannot count it. One line, the
    // first three named.
    let refs = salvage_replay::unheld::unheld(&capture);
    if !refs.is_empty() {
        let named: Vec<String> = refs.iter().take(3).map(|u| format!("{} ({})", u.what, u.path)).collect();
        let more = match refs.len().saturating_sub(3) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let input = salvage_recovery::classify::FailureInput::new(
            capture.failure.clone(),
            salvage_types::history_weight(&capture.history),
        );
        let overflow =
            salvage_recovery::classify::classify(&input).class == salvage_types::ErrorClass::ContextOverflow;
        let consequence = if overflow {
            "its context overflow cannot be replayed: fidelity fails and names them"
        } else {
            "the replay cannot count it (its fidelity check lists it)"
        };
        eprintln!(
            "{name}: note: the request refers to content it does not carry: {}{more}; {consequence}",
            named.join("; ")
        );
    }
    write(&args, &capture, out)
}

/// The capture as [`Capture::to_json_pretty`] writes it (pretty JSON and a newline), streamed.
fn write_pretty(w: &mut dyn std::io::Write, capture: &Capture) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, capture).map_err(|e| match e.io_error_kind() {
        // Keep the kind, so a closed pipe still exits 0.
        Some(kind) => std::io::Error::new(kind, e),
        None => std::io::Error::other(e),
    })?;
    w.write_all(b"\n")
}
