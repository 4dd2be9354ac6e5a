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
    /// HTTP status.
    #[arg(long)]
    status: Option<u16>,
    /// Error text or body.
    #[arg(long)]
    message: Option<String>,
    /// Transport error text.
    #[arg(long)]
    transport: Option<String>,
    /// History weight in bytes (for the EOF heuristic).
    #[arg(long, value_name = "BYTES")]
    history_bytes: Option<u64>,
}

/// Runs the command.
pub fn run(args: Args, out: &mut Output) -> Outcome {
    let input = if args.status.is_none() && args.message.is_none() && args.transport.is_none() {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b)
            .map_err(|e| Failure::Input(format!("<stdin>: cannot read: {e}")))?;
        salvage_types::capture::from_json_bytes::<FailureInput>(&b, "<stdin>").map_err(Failure::input)?
    } else {
        FailureInput {
            status: args.status,
            message: args.message.unwrap_or_default(),
            transport: args.transport,
            history_bytes: args.history_bytes.unwrap_or(0),
            rejected_request_bytes: None,
            payload_path_seen: false,
        }
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
