//! `salvage classify`: classify one failure.

use crate::exit::{Failure, Outcome};
use crate::output::Output;
use salvage_recovery::classify::{classify, FailureInput};
use serde_json::json;

/// Arguments of `salvage classify`.
#[derive(clap::Args)]
#[command(
    after_help = "Input JSON on stdin when no flag is given:\n  {\"status\":403,\"message\":\"...\",\"transport\":null,\"history_bytes\":0,\"rejected_request_bytes\":null}\nPrints {\"class\",\"recoverable\",\"path\",\"reason\"}.\nExample: salvage classify --status 413 --message '413 Payload Too Large'"
)]
pub struct Args {
    #[command(flatten)]
    failure: FailureFlags,
    /// History weight in bytes (for the EOF heuristic).
    #[arg(long, value_name = "BYTES")]
    history_bytes: Option<u64>,
}

/// The failure as the client saw it, as flags: shared by `classify` and `import`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FailureFlags {
    /// The HTTP status the client saw (omit for a transport failure).
    #[arg(long)]
    pub status: Option<u16>,
    /// The error text as printed by the client (or the error body).
    #[arg(long)]
    pub message: Option<String>,
    /// A transport error (e.g. "unexpected EOF", "connection reset by peer").
    #[arg(long)]
    pub transport: Option<String>,
}

impl FailureFlags {
    /// True when no flag was given (the failure then comes from elsewhere: stdin, the file).
    pub fn is_empty(&self) -> bool {
        self.status.is_none() && self.message.is_none() && self.transport.is_none()
    }
}

/// Runs the command.
pub fn run(args: Args, env: &std::collections::BTreeMap<String, String>, out: &mut Output) -> Outcome {
    let input = if args.failure.is_empty() {
        crate::output::stdin_hint("a failure JSON such as {\"status\":413,\"message\":\"...\"}");
        // Bounded by SALVAGE_MAX_CAPTURE, as every input is.
        let limit = crate::db::ceilings(env)?.capture.max_file_bytes;
        let (b, name) = crate::commands::read_input_file(std::path::Path::new("-"), limit)?;
        salvage_types::capture::from_json_bytes::<FailureInput>(&b, &name).map_err(Failure::input)?
    } else {
        let failure = salvage_types::capture::Failure {
            status: args.failure.status,
            message: args.failure.message.unwrap_or_default(),
            transport: args.failure.transport,
            rejected_request_bytes: None,
        };
        FailureInput::new(failure, args.history_bytes.unwrap_or(0))
    };
    let c = classify(&input);
    out.line(
        &serde_json::to_string(&json!({
            "class": c.class,
            "recoverable": c.recoverable,
            "path": c.path,
            "reason": c.reason,
            "fallback": c.class.fallback(),
        }))
        .map_err(|e| Failure::Problem(e.to_string()))?,
    )?;
    Ok(())
}
