//! How a command ends: its exit code and its one error line.

use crate::output::Output;
use std::process::ExitCode;

/// A command's failure, with the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// The command ran and found a problem (exit 1); the message is already printed or given here.
    Problem(String),
    /// Usage or unreadable input (exit 2): one line naming the file and the field.
    Input(String),
    /// Output could not be written because the reader went away: exit 0 quietly.
    BrokenPipe,
}

/// What a command returns.
pub type Outcome = Result<(), Failure>;

impl Failure {
    /// An input failure from anything displayable.
    pub fn input(e: impl std::fmt::Display) -> Failure {
        Failure::Input(e.to_string())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Problem(format!("cannot write output: {e}"))
        }
    }
}

/// Prints the error line (if any) and maps the result to an exit code.
pub fn finish(result: Outcome, out: &mut Output) -> ExitCode {
    let flushed = out.flush();
    match (result, flushed) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(Failure::BrokenPipe), _) => ExitCode::SUCCESS,
        (Ok(()), Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        (Ok(()), Err(e)) => {
            eprintln!("salvage: error: cannot write output: {e}");
            ExitCode::from(1)
        }
        (Err(Failure::Problem(msg)), _) => {
            if !msg.is_empty() {
                eprintln!("salvage: {}", crate::terminal::escape_block(&msg));
            }
            ExitCode::from(1)
        }
        (Err(Failure::Input(msg)), _) => {
            eprintln!("salvage: error: {}", crate::terminal::escape_block(&msg));
            ExitCode::from(2)
        }
    }
}
