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
#[command(
    after_help = "Example: salvage man > salvage.1 && man ./salvage.1\n         salvage man --dir target/man   (salvage.1, salvage-replay.1, salvage-journal-log.1, …)"
)]
pub struct ManArgs {
    /// Write one page per command and subcommand into this existing folder instead.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

/// Prints the completion script.
pub fn run(args: Args, mut cmd: clap::Command, out: &mut Output) -> Outcome {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "salvage", &mut buf);
    out.put_bytes(&buf)?;
    Ok(())
}

/// Prints the man page (roff): synopsis, options, every subcommand, exit codes.
pub fn man(args: ManArgs, cmd: clap::Command, out: &mut Output) -> Outcome {
    if let Some(dir) = args.dir {
        if !dir.is_dir() {
            return Err(Failure::Input(format!("--dir: {} is not a folder", dir.display())));
        }
        clap_mangen::generate_to(cmd, &dir)
            .map_err(|e| Failure::Problem(format!("{}: cannot write: {e}", dir.display())))?;
        out.line(&format!("man pages written to {}", dir.display()))?;
        return Ok(());
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).map_err(|e| Failure::Problem(e.to_string()))?;
    out.put_bytes(&buf)?;
    Ok(())
}
