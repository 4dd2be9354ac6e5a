//! Points in a session that commands name: an event number, a checkpoint name, or `HEAD`; and
//! creating and listing checkpoints (`journal checkpoint`, `journal checkpoints`).

use crate::exit::Failure;
use salvage_journal::{Journal, NewEvent};
use salvage_types::event::EventBody;

/// A checkpoint as listed.
pub struct Point {
    /// Its name.
    pub name: String,
    /// Its event.
    pub seq: u64,
    /// On the live branch (false: a later rewind went back past it).
    pub live: bool,
}

fn journal(e: salvage_journal::JournalError) -> Failure {
    match e {
        salvage_journal::JournalError::NoSession(_) | salvage_journal::JournalError::NoEvent { .. } => {
            Failure::Input(e.to_string())
        }
        other => Failure::Problem(other.to_string()),
    }
}

/// Every checkpoint of the session, in order, whether or not a rewind abandoned it.
pub fn list(j: &Journal, session: &str) -> Result<Vec<Point>, Failure> {
    let events = j.events(session, 0, usize::MAX >> 1).map_err(journal)?;
    let head = j.version(session).map_err(journal)?;
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let live = salvage_journal::branches::live_branch(&links, head);
    Ok(events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Checkpoint { name } => {
                Some(Point { name: name.clone(), seq: e.seq, live: live.contains(&e.seq) })
            }
            _ => None,
        })
        .collect())
}

/// The event a person named: a number, `HEAD`, or a checkpoint name (its latest use).
pub fn event(j: &Journal, session: &str, text: &str) -> Result<u64, Failure> {
    let head = j.version(session).map_err(journal)?;
    if text.eq_ignore_ascii_case("head") {
        return Ok(head);
    }
    if let Ok(n) = text.parse::<u64>() {
        if n == 0 || n > head {
            return Err(Failure::Input(format!("session {session}: no event {n} (events are 1..={head})")));
        }
        return Ok(n);
    }
    let points = list(j, session)?;
    match points.iter().rev().find(|p| p.name == text) {
        Some(p) => Ok(p.seq),
        None => Err(Failure::Input(format!(
            "session {session}: {text:?} is neither an event number nor a checkpoint{}",
            if points.is_empty() {
                " (the session has no checkpoints)".to_string()
            } else {
                format!(
                    " (checkpoints: {})",
                    points.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                )
            }
        ))),
    }
}

/// Appends a checkpoint named `name` at the head; returns its event number.
pub fn checkpoint(
    j: &mut Journal,
    session: &str,
    name: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Failure> {
    let name = name.trim();
    if name.is_empty() || name.parse::<u64>().is_ok() || name.eq_ignore_ascii_case("head") {
        return Err(Failure::Input(format!(
            "--name: {name:?} cannot name a checkpoint (it must not be empty, a number or HEAD)"
        )));
    }
    let head = j.version(session).map_err(journal)?;
    let id = format!("checkpoint-{session}-{}", now.timestamp_nanos_opt().unwrap_or(0));
    let e = NewEvent::new(id, now, EventBody::Checkpoint { name: name.to_string() });
    let mut a = j.append(session, Some(head), vec![e]).map_err(journal)?;
    a.pop().map(|a| a.seq).ok_or_else(|| Failure::Problem("no event appended".into()))
}
