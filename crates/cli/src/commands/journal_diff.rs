//! `salvage journal diff SESSION --from A --to B`: the messages a stretch of events dropped,
//! added and stubbed, with their sizes.

use crate::exit::{Failure, Outcome};
use crate::output::Output;
use salvage_journal::history_diff::diff_histories;
use salvage_journal::Journal;
use salvage_types::format_bytes;
use serde_json::json;

/// Prints the diff between the histories after events `from` and `to` (default: the head).
pub fn run(
    j: &Journal,
    session: &str,
    from: &str,
    to: Option<&str>,
    as_json: bool,
    out: &mut Output,
) -> Outcome {
    let a = crate::commands::journal_points::event(j, session, from)?;
    let b = crate::commands::journal_points::event(j, session, to.unwrap_or("HEAD"))?;
    let err = |e: salvage_journal::JournalError| Failure::Problem(e.to_string());
    let old = j.view_at(session, a).map_err(err)?.history;
    let new = j.view_at(session, b).map_err(err)?.history;
    let d = diff_histories(&old, &new);
    if as_json {
        let mut v = serde_json::to_value(&d).map_err(|e| Failure::Problem(e.to_string()))?;
        v["session"] = json!(session);
        v["from"] = json!(a);
        v["to"] = json!(b);
        out.json(&v)?;
        return Ok(());
    }
    out.line(&format!(
        "session {session}: event {a} → {b}: {} → {} message(s), {} → {}",
        d.messages[0],
        d.messages[1],
        format_bytes(d.bytes[0]),
        format_bytes(d.bytes[1])
    ))?;
    if d.is_empty() {
        out.line("no change")?;
        return Ok(());
    }
    for m in &d.dropped {
        out.line(&format!("- [{}] {:<9} {:>9}  {}", m.index, m.role, format_bytes(m.bytes), m.preview))?;
    }
    for m in &d.stubbed {
        out.line(&format!(
            "~ [{}] {:<9} {:>9} → {}  {}",
            m.index,
            m.role,
            format_bytes(m.before_bytes),
            format_bytes(m.after_bytes),
            m.preview
        ))?;
    }
    for m in &d.added {
        out.line(&format!("+ [{}] {:<9} {:>9}  {}", m.index, m.role, format_bytes(m.bytes), m.preview))?;
    }
    out.line(&format!("{} dropped, {} stubbed, {} added", d.dropped.len(), d.stubbed.len(), d.added.len()))?;
    Ok(())
}
