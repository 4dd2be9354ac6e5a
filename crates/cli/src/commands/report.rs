//! `salvage report SESSION... -o FILE`: the self-contained HTML audit of journaled sessions (the
//! same page as `salvage replay --html`, with the corpus table built from the journal).

use crate::db::DbArgs;
use crate::exit::{Failure, Outcome};
use crate::output::{write_atomic, Output};
use salvage_journal::Journal;
use std::path::PathBuf;

/// Arguments of `salvage report`.
#[derive(clap::Args)]
#[command(
    after_help = "One HTML file, no network and no external assets: a table of the sessions, then per session a chart of\nrequest size and tokens per attempt against the cap and the window, and a timeline with rewrites as diffs,\nmarkers expandable to their archived content, and rewinds as branches.\nExample: salvage report latest -o target/audit.html"
)]
pub struct Args {
    /// Sessions: ids, unique prefixes, run stamps, or `latest`.
    #[arg(required = true, value_name = "SESSION")]
    sessions: Vec<String>,
    /// The HTML file to write (atomically); `-` for stdout.
    #[arg(long, short, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs the command.
pub fn run(args: Args, clock: &dyn salvage_types::Clock, out: &mut Output) -> Outcome {
    crate::output::check_output("--output", Some(&args.output))?;
    // A report reads the journal: the file is not changed.
    let j = Journal::from_store(args.db.open_read()?);
    let mut rows = Vec::new();
    for s in &args.sessions {
        let id = j.resolve_session(s).map_err(Failure::input)?;
        rows.push(crate::html::session_row(&j, &id).map_err(Failure::Problem)?);
    }
    let title = if rows.len() == 1 {
        format!("salvage audit: {}", rows[0].id)
    } else {
        format!("salvage audit: {} sessions", rows.len())
    };
    let html = crate::html::render(&title, &rows, Some(&j), clock).map_err(Failure::Problem)?;
    if args.output.as_os_str() == "-" {
        out.put(&html)?;
    } else {
        write_atomic(&args.output, html.as_bytes())
            .map_err(|e| Failure::Input(format!("{}: cannot write: {e}", args.output.display())))?;
        eprintln!("wrote {} ({} session(s))", args.output.display(), rows.len());
    }
    Ok(())
}
