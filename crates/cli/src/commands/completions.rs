//! `salvage completions SHELL` and `salvage man`: generated from the clap definitions, so they
//! never drift from the real flags.

use crate::exit::{Failure, Outcome};
use crate::output::Output;

/// Arguments of `salvage completions`.
#[derive(clap::Args)]
#[command(
    after_help = "Example: salvage completions bash > ~/.local/share/bash-completion/completions/salvage"
)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Arguments of `salvage man`.
#[derive(clap::Args)]
#[command(after_help = "Example: salvage man > salvage.1 && man ./salvage.1")]
pub struct ManArgs {}

/// Prints the completion script.
pub fn run(args: Args, mut cmd: clap::Command, out: &mut Output) -> Outcome {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "salvage", &mut buf);
    out.put_bytes(&buf)?;
    Ok(())
}

/// Prints the man page (roff): synopsis, options, every subcommand, exit codes.
pub fn man(_args: ManArgs, cmd: clap::Command, out: &mut Output) -> Outcome {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).map_err(|e| Failure::Problem(e.to_string()))?;
    out.put_bytes(&buf)?;
    Ok(())
}
