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
