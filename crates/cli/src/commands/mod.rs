//! One module per subcommand, each with its `Args` and `run`.

pub mod apply;
pub mod ccr;
pub mod classify;
pub mod completions;
pub mod config;
pub mod generate;
pub mod import;
pub mod journal;
pub mod journal_delete;
pub mod journal_diff;
pub mod journal_export;
pub mod journal_points;
pub mod journal_redact;
pub mod proxy;
pub mod recall;
pub mod replay;
pub mod report;

use chrono::{DateTime, Utc};
use salvage_types::Clock;

/// "Now" from the injected clock (commands never read the wall clock themselves).
pub fn now(clock: &dyn Clock) -> DateTime<Utc> {
    DateTime::<Utc>::from(clock.now())
}

/// Reads an input file (`-` is standard input) the way `import` and `replay` do: a regular file
/// only (a device or a FIFO is refused before it is opened for reading, so nothing blocks or
/// reads forever), at most `limit` bytes, stdin bounded by the same limit. Returns the bytes and
/// the name errors use (`<stdin>` for standard input).
pub fn read_input_file(
    path: &std::path::Path,
    limit: u64,
) -> Result<(Vec<u8>, String), crate::exit::Failure> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin { "<stdin>".to_string() } else { path.display().to_string() };
    let bytes = salvage_types::input::read_input(path, limit, false).map_err(|e| match e {
        // These commands have no --allow-special: standard input is the way in for a stream.
        salvage_types::CaptureError::NotRegular { file, kind } => crate::exit::Failure::Input(format!(
            "{file}: {kind}, not a regular file: salvage reads regular files only (give `-` and redirect a stream to standard input)"
        )),
        e if stdin => crate::exit::Failure::input(e.to_string().replacen("-:", "<stdin>:", 1)),
        e => crate::exit::Failure::input(e),
    })?;
    Ok((bytes, name))
}
