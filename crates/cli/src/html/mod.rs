//! The audit report: one self-contained HTML file (inline CSS, JS and SVG; a Content Security
//! Policy forbids every network fetch) with a corpus table and, per journaled session, a chart of
//! request size and tokens per attempt against the cap and the window, and a timeline where
//! rewrites show as diffs (messages dropped, stubbed, added, with sizes), markers expand to their
//! archived content, and rewinds show the branch they abandoned.

mod assets;
mod chart;
mod rewrite;
mod session;

use assets::{CSS, JS};
use salvage_journal::Journal;
use salvage_types::event::EventBody;
use salvage_types::format_bytes;
use salvage_types::Clock;
use session::session_section;
use std::fmt::Write as _;

/// One row of the corpus table.
pub struct CorpusRow {
    /// Capture (or session) id.
    pub id: String,
    /// The capture file.
    pub file: Option<String>,
    /// Outcome in the JSON spelling.
    pub outcome: String,
    /// Recovery attempts.
    pub attempts: u32,
    /// Bytes of the first and the last request.
    pub bytes: (u64, u64),
    /// Estimated tokens of the first and the last request.
    pub tokens: (u64, u64),
    /// Real tokens of the first and the last request.
    pub real_tokens: (Option<u64>, Option<u64>),
    /// Checks passed and total (`None` when not checked, e.g. a session report).
    pub checks: Option<(usize, usize)>,
    /// Failed checks, as `name: detail`.
    pub failed: Vec<String>,
    /// The journal session.
    pub session: Option<String>,
    /// Passed.
    pub passed: bool,
}

/// Escapes text for HTML; control characters other than newline and tab become visible `\u{…}`.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn anchor(i: usize) -> String {
    format!("s{i}")
}

/// A corpus row built from a journal session (for `salvage report SESSION…`).
pub fn session_row(j: &Journal, session: &str) -> Result<CorpusRow, String> {
    let events = j.events(session, 0, usize::MAX >> 1).map_err(|e| e.to_string())?;
    let sent: Vec<(u64, u64, Option<u64>)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::RequestSent { bytes, estimated_tokens, real_tokens, .. } => {
                Some((*bytes, *estimated_tokens, *real_tokens))
            }
            _ => None,
        })
        .collect();
    let outcome = salvage_journal::lookup::outcome_of(&events).unwrap_or("-").to_string();
    let first = sent.first().copied().unwrap_or((0, 0, None));
    let last = sent.last().copied().unwrap_or((0, 0, None));
    Ok(CorpusRow {
        id: session.to_string(),
        file: None,
        passed: matches!(outcome.as_str(), "recovered" | "no_failure"),
        outcome,
        attempts: u32::try_from(
            events.iter().filter(|e| matches!(e.body, EventBody::RecoveryAttempt { .. })).count(),
        )
        .unwrap_or(u32::MAX),
        bytes: (first.0, last.0),
        tokens: (first.1, last.1),
        real_tokens: (first.2, last.2),
        checks: None,
        failed: Vec::new(),
        session: Some(session.to_string()),
    })
}

/// The whole page.
pub fn render(
    title: &str,
    rows: &[CorpusRow],
    journal: Option<&Journal>,
    clock: &dyn Clock,
) -> Result<String, String> {
    let mut h = String::new();
    let passed = rows.iter().filter(|r| r.passed).count();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"salvage {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title)
    );
    let _ = writeln!(
        h,
        "<header><h1>{}</h1><p class=\"summary\" id=\"summary\">{} row(s): <b class=\"ok\">{passed} passed</b>, <b class=\"bad\">{} failed</b>{}</p>\
         <p class=\"tools\"><button type=\"button\" id=\"expand\">expand all</button> <label><input type=\"checkbox\" id=\"show-abandoned\" checked> show abandoned branches</label></p></header>",
        esc(title),
        rows.len(),
        rows.len() - passed,
        if journal.is_none() { " — not journaled: no timelines (run without --no-journal)" } else { "" }
    );
    h.push_str("<main>\n<h2>Corpus</h2>\n<table class=\"corpus\" id=\"corpus\">\n<thead><tr><th>capture</th><th>outcome</th><th>attempts</th><th>bytes before → after</th><th>tokens est (real) before → after</th><th>checks</th><th>session</th></tr></thead>\n<tbody>\n");
    for (i, r) in rows.iter().enumerate() {
        let tok = |e: u64, real: Option<u64>| match real {
            Some(t) => format!("{e} ({t})"),
            None => e.to_string(),
        };
        let checks = match r.checks {
            Some((ok, n)) if r.failed.is_empty() => format!("{ok}/{n} ok"),
            Some(_) | None if !r.failed.is_empty() => {
                format!(
                    "<span class=\"bad\">FAIL</span><ul>{}</ul>",
                    r.failed.iter().map(|f| format!("<li>{}</li>", esc(f))).collect::<String>()
                )
            }
            _ => "-".into(),
        };
        let (bytes, tokens) = if r.outcome == "unreadable" {
            ("-".to_string(), "-".to_string())
        } else {
            (
                format!("{} → {}", format_bytes(r.bytes.0), format_bytes(r.bytes.1)),
                format!("{} → {}", tok(r.tokens.0, r.real_tokens.0), tok(r.tokens.1, r.real_tokens.1)),
            )
        };
        let session = match (&r.session, journal) {
            (Some(s), Some(_)) => format!(
                "<a href=\"#{}\" title=\"{}\">{}</a>",
                anchor(i),
                esc(s),
                esc(crate::commands::replay::short_session(s))
            ),
            (Some(s), None) => esc(s),
            (None, _) => "-".into(),
        };
        let _ = writeln!(
            h,
            "<tr class=\"capture {}\" data-id=\"{}\" data-outcome=\"{}\"><td title=\"{}\">{}</td><td><span class=\"outcome o-{}\">{}</span></td><td class=\"num\">{}</td><td class=\"num\">{bytes}</td><td class=\"num\">{tokens}</td><td>{checks}</td><td>{session}</td></tr>",
            if r.passed { "pass" } else { "fail" },
            esc(&r.id),
            esc(&r.outcome),
            esc(r.file.as_deref().unwrap_or("")),
            esc(&r.id),
            esc(&r.outcome),
            esc(&r.outcome),
            r.attempts,
        );
    }
    h.push_str("</tbody>\n</table>\n");
    if let Some(j) = journal {
        for (i, r) in rows.iter().enumerate() {
            if let Some(s) = &r.session {
                session_section(&mut h, j, s, &anchor(i), r, clock)?;
            }
        }
    }
    let _ = write!(h, "</main>\n<script>{JS}</script>\n</body>\n</html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'\u{1b}"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\u{1b}");
    }
}
