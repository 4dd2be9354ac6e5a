//! One journaled session's section: its charts and its timeline.

use super::chart::chart;
use super::rewrite::rewrite;
use super::{esc, CorpusRow};
use salvage_ccr::Ccr;
use salvage_journal::{Journal, StoredEvent};
use salvage_types::event::EventBody;
use salvage_types::format_bytes;
use salvage_types::Clock;
use std::fmt::Write as _;

/// One attempt of a session as its events tell it.
pub(super) struct Attempt {
    pub(super) attempt: u32,
    pub(super) bytes: u64,
    pub(super) est: u64,
    pub(super) real: Option<u64>,
    pub(super) accepted: bool,
    pub(super) cap: Option<u64>,
}

/// Writes one journaled session's section: its charts, then its timeline of events.
pub(super) fn session_section(
    h: &mut String,
    j: &Journal,
    session: &str,
    id: &str,
    row: &CorpusRow,
    clock: &dyn Clock,
) -> Result<(), String> {
    let err = |e: salvage_journal::JournalError| e.to_string();
    let events = j.events(session, 0, usize::MAX >> 1).map_err(err)?;
    let head = j.version(session).map_err(err)?;
    let title =
        j.sessions().map_err(err)?.into_iter().find(|s| s.id == session).map(|s| s.title).unwrap_or_default();
    let (window, attempts) = attempts_of(&events);
    let _ = write!(
        h,
        "<section class=\"session\" id=\"{id}\" data-session=\"{}\">\n<h2>{} <span class=\"outcome o-{}\">{}</span></h2>\n<p class=\"meta\">session <code>{}</code> · {} event(s){} · <a href=\"#corpus\">back to the corpus</a></p>\n",
        esc(session),
        esc(&row.id),
        esc(&row.outcome),
        esc(&row.outcome),
        esc(session),
        events.len(),
        if title.is_empty() { String::new() } else { format!(" · {}", esc(&title)) },
    );
    charts(h, &attempts, window);
    timeline(h, j, session, id, &events, head, clock)?;
    h.push_str("</ol>\n</section>\n");
    Ok(())
}

/// The context window the session started with, and every attempt with the cap known at the time.
fn attempts_of(events: &[StoredEvent]) -> (Option<u64>, Vec<Attempt>) {
    let mut window = None;
    let mut cap = None;
    let mut attempts = Vec::new();
    for e in events {
        match &e.body {
            EventBody::SessionStarted { context_window, cap: c, .. } => {
                window = *context_window;
                cap = *c;
            }
            EventBody::CapLearned { cap: c, .. } => cap = Some(*c),
            EventBody::RequestSent { attempt, bytes, estimated_tokens, real_tokens, accepted, .. } => {
                attempts.push(Attempt {
                    attempt: *attempt,
                    bytes: *bytes,
                    est: *estimated_tokens,
                    real: *real_tokens,
                    accepted: *accepted,
                    cap,
                })
            }
            _ => {}
        }
    }
    (window, attempts)
}

/// The two charts: request body per attempt against the cap, tokens per attempt against the window.
fn charts(h: &mut String, attempts: &[Attempt], window: Option<u64>) {
    if !attempts.is_empty() {
        h.push_str("<div class=\"charts\">");
        h.push_str(&chart(
            "Request body per attempt",
            &attempts.iter().map(|a| vec![Some(a.bytes)]).collect::<Vec<_>>(),
            &["bytes"],
            attempts.last().and_then(|a| a.cap).map(|c| ("cap", c)),
            &attempts.iter().map(|a| a.cap).collect::<Vec<_>>(),
            attempts,
            format_bytes,
        ));
        h.push_str(&chart(
            "Tokens per attempt",
            &attempts.iter().map(|a| vec![Some(a.est), a.real]).collect::<Vec<_>>(),
            &["estimated", "real"],
            window.map(|w| ("window", w)),
            &attempts.iter().map(|_| window).collect::<Vec<_>>(),
            attempts,
            |t| t.to_string(),
        ));
        h.push_str("</div>\n");
    }
}

/// The timeline: one item per event, abandoned branches marked, rewinds linked to their target,
/// rewrites shown as diffs.
fn timeline(
    h: &mut String,
    j: &Journal,
    session: &str,
    id: &str,
    events: &[StoredEvent],
    head: u64,
    clock: &dyn Clock,
) -> Result<(), String> {
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let abandoned = salvage_journal::branches::abandoned(&links, head);
    h.push_str("<ol class=\"timeline\">\n");
    let ccr = Ccr::new(j.conn(), clock);
    for e in events {
        let dead = abandoned.contains(&e.seq);
        let _ = write!(
            h,
            "<li class=\"ev k-{}{}\" id=\"{id}-e{}\"><span class=\"seq\">{}</span> <span class=\"kind\">{}</span> <span class=\"what\">{}</span>",
            esc(&e.kind),
            if dead { " abandoned" } else { "" },
            e.seq,
            e.seq,
            esc(&e.kind),
            esc(&e.body.summary())
        );
        if dead {
            h.push_str(" <span class=\"branch\">⎇ abandoned branch</span>");
        }
        if let EventBody::Rewind { target, .. } = &e.body {
            let lost: Vec<u64> = ((*target + 1)..e.seq).filter(|s| abandoned.contains(s)).collect();
            let _ = write!(
                h,
                "<div class=\"rewind\">↩ back to <a href=\"#{id}-e{target}\">event {target}</a>{}</div>",
                match (lost.first(), lost.last()) {
                    (Some(a), Some(b)) => format!("; events {a}–{b} form an abandoned branch"),
                    _ => String::new(),
                }
            );
        }
        if e.delta.is_some() {
            rewrite(h, j, session, e, &ccr)?;
        }
        h.push_str("</li>\n");
    }
    Ok(())
}
