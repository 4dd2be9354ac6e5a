//! `salvage generate`: a large synthetic capture, for benchmarks and soak runs.

use crate::exit::{Failure, Outcome};
use crate::output::{write_atomic, Output};
use salvage_types::capture::RejectStyle;
use salvage_types::ByteSize;
use std::path::PathBuf;

/// Arguments of `salvage generate`.
#[derive(clap::Args)]
#[command(
    after_help = "Example: salvage generate --size 10MB --seed 7 -o /tmp/big.json && salvage replay /tmp/big.json --no-journal"
)]
pub struct Args {
    /// History size (e.g. 10MB; at most 512MB, what a capture's history may hold).
    #[arg(long, default_value = "10MB")]
    size: String,
    /// Seed (the same seed gives the same capture).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How the simulated gateway (capped at a quarter of the size) rejects.
    #[arg(long, default_value = "waf_html_403", value_parser = ["http_413", "http_431", "waf_403", "waf_html_403", "connection_reset", "eof"])]
    rejects_with: String,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args, out: &mut Output) -> Outcome {
    crate::output::check_output("--output", args.output.as_deref())?;
    let size = ByteSize::parse(&args.size)
        .ok_or_else(|| Failure::Input(format!("--size: {:?} is not a size such as 10MB", args.size)))?;
    // A history larger than a capture may hold would only be refused by `replay` after minutes
    // of generating it, in memory.
    let max = salvage_types::capture::MAX_HISTORY_BYTES;
    if size.0 > max {
        return Err(Failure::Input(format!(
            "--size: {} is over the {} MB a capture's history may hold",
            args.size,
            max >> 20
        )));
    }
    let bytes = usize::try_from(size.0).map_err(|_| Failure::Input("--size: too large".into()))?;
    let style = RejectStyle::parse(&args.rejects_with).unwrap_or(RejectStyle::WafHtml403);
    let c = salvage_replay::synth::large_capture(bytes, args.seed, style);
    let text = c.to_json_pretty();
    match args.output {
        Some(p) => write_atomic(&p, text.as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", p.display())))?,
        None => out.put(&text)?,
    }
    Ok(())
}
