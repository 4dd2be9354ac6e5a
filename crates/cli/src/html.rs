//! The audit report: one self-contained HTML file (inline CSS, JS and SVG; a Content Security
//! Policy forbids every network fetch) with a corpus table and, per journaled session, a chart of
//! request size and tokens per attempt against the cap and the window, and a timeline where
//! rewrites show as diffs (messages dropped, stubbed, added, with sizes), markers expand to their
//! archived content, and rewinds show the branch they abandoned.

use salvage_ccr::Ccr;
use salvage_journal::history_diff::{diff_histories, HistoryDiff};
use salvage_journal::{Journal, StoredEvent};
use salvage_types::event::EventBody;
use salvage_types::Clock;
use salvage_types::{format_bytes, Message};
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;

/// Archived content shown per marker at most.
const MARKER_SHOW: usize = 16 * 1024;
/// Diff lines shown per rewrite at most.
const DIFF_ROWS: usize = 60;
/// Rewrites with at most this many lines are shown open.
const DIFF_OPEN: usize = 12;

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

struct Attempt {
    attempt: u32,
    bytes: u64,
    est: u64,
    real: Option<u64>,
    accepted: bool,
    cap: Option<u64>,
}

fn session_section(
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
    let links: Vec<(u64, Option<u64>)> = events.iter().map(|e| (e.seq, e.parent)).collect();
    let abandoned = salvage_journal::branches::abandoned(&links, head);
    let title =
        j.sessions().map_err(err)?.into_iter().find(|s| s.id == session).map(|s| s.title).unwrap_or_default();
    let mut window = None;
    let mut cap = None;
    let mut attempts = Vec::new();
    for e in &events {
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
    if !attempts.is_empty() {
        h.push_str("<div class=\"charts\">");
        h.push_str(&chart(
            "Request body per attempt",
            &attempts.iter().map(|a| vec![Some(a.bytes)]).collect::<Vec<_>>(),
            &["bytes"],
            attempts.last().and_then(|a| a.cap).map(|c| ("cap", c)),
            &attempts.iter().map(|a| a.cap).collect::<Vec<_>>(),
            &attempts,
            format_bytes,
        ));
        h.push_str(&chart(
            "Tokens per attempt",
            &attempts.iter().map(|a| vec![Some(a.est), a.real]).collect::<Vec<_>>(),
            &["estimated", "real"],
            window.map(|w| ("window", w)),
            &attempts.iter().map(|_| window).collect::<Vec<_>>(),
            &attempts,
            |t| t.to_string(),
        ));
        h.push_str("</div>\n");
    }
    h.push_str("<ol class=\"timeline\">\n");
    let ccr = Ccr::new(j.conn(), clock);
    for e in &events {
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
    h.push_str("</ol>\n</section>\n");
    Ok(())
}

fn rewrite(h: &mut String, j: &Journal, session: &str, e: &StoredEvent, ccr: &Ccr<'_>) -> Result<(), String> {
    let err = |e: salvage_journal::JournalError| e.to_string();
    let new = j.view_at(session, e.seq).map_err(err)?.history;
    let old: Vec<Message> = match e.parent {
        Some(p) => j.view_at(session, p).map_err(err)?.history,
        None => Vec::new(),
    };
    let d: HistoryDiff = diff_histories(&old, &new);
    if d.is_empty() {
        return Ok(());
    }
    let only_appended = d.dropped.is_empty() && d.stubbed.is_empty();
    let _ = write!(
        h,
        "<details class=\"diff\"{}><summary>history {}: {} → {} message(s), {} → {}</summary><table class=\"diff\">",
        if only_appended || d.dropped.len() + d.stubbed.len() + d.added.len() > DIFF_OPEN { "" } else { " open" },
        if only_appended {
            format!("+{} added", d.added.len())
        } else {
            format!("rewrite: −{} dropped, ~{} stubbed, +{} added", d.dropped.len(), d.stubbed.len(), d.added.len())
        },
        d.messages[0],
        d.messages[1],
        format_bytes(d.bytes[0]),
        format_bytes(d.bytes[1]),
    );
    let mut shown = 0usize;
    let mut more = 0usize;
    let mut line = |h: &mut String,
                    cls: &str,
                    sign: &str,
                    idx: usize,
                    role: &str,
                    size: String,
                    preview: &str| {
        if shown >= DIFF_ROWS {
            more += 1;
            return;
        }
        shown += 1;
        let _ = write!(
            h,
            "<tr class=\"{cls}\"><td class=\"sign\">{sign}</td><td class=\"num\">[{idx}]</td><td>{}</td><td class=\"num\">{size}</td><td class=\"preview\">{}</td></tr>",
            esc(role),
            esc(preview)
        );
    };
    // One list in history order (dropped and stubbed by their old index, added by their new one).
    struct Item<'a> {
        order: (usize, u8),
        cls: &'static str,
        sign: &'static str,
        role: &'a str,
        size: String,
        preview: &'a str,
    }
    let mut items: Vec<Item<'_>> = Vec::new();
    for m in &d.dropped {
        let size = format_bytes(m.bytes);
        items.push(Item {
            order: (m.index, 0),
            cls: "dropped",
            sign: "−",
            role: &m.role,
            size,
            preview: &m.preview,
        });
    }
    for m in &d.stubbed {
        let size = format!("{} → {}", format_bytes(m.before_bytes), format_bytes(m.after_bytes));
        items.push(Item {
            order: (m.index, 1),
            cls: "stubbed",
            sign: "~",
            role: &m.role,
            size,
            preview: &m.preview,
        });
    }
    for m in &d.added {
        let size = format_bytes(m.bytes);
        items.push(Item {
            order: (m.index, 2),
            cls: "added",
            sign: "+",
            role: &m.role,
            size,
            preview: &m.preview,
        });
    }
    items.sort_by_key(|x| x.order);
    for x in items {
        line(h, x.cls, x.sign, x.order.0, x.role, x.size, x.preview);
    }
    if more > 0 {
        let _ = write!(h, "<tr><td></td><td colspan=\"4\">… {more} more</td></tr>");
    }
    h.push_str("</table>");
    // Markers the rewrite introduced, expandable to what they archived.
    let before: HashSet<String> = old.iter().filter_map(|m| serde_json::to_string(m).ok()).collect();
    let mut seen = BTreeSet::new();
    for m in &new {
        if before.contains(&serde_json::to_string(m).unwrap_or_default()) {
            continue;
        }
        for k in salvage_types::ccr_key::find_markers(&m.content) {
            if !seen.insert(k.to_string()) {
                continue;
            }
            let (size, body) = match ccr.get(k) {
                Ok(b) => {
                    let text = String::from_utf8_lossy(&b).to_string();
                    let shown: String = text.chars().take(MARKER_SHOW).collect();
                    let cut = if shown.len() < text.len() {
                        format!(
                            "\n… ({} more; `salvage recall {k}` prints it all)",
                            format_bytes((text.len() - shown.len()) as u64)
                        )
                    } else {
                        String::new()
                    };
                    (format_bytes(b.len() as u64), format!("{shown}{cut}"))
                }
                Err(e) => ("?".into(), format!("not retrievable: {e}")),
            };
            let _ = write!(
                h,
                "<details class=\"marker\"><summary><code>&lt;&lt;ccr:{}&gt;&gt;</code> · {size} archived</summary><pre>{}</pre></details>",
                esc(k),
                esc(&body)
            );
        }
    }
    h.push_str("</details>");
    Ok(())
}

/// A grouped bar chart (one group per attempt, one bar per series) with a limit line.
fn chart(
    title: &str,
    groups: &[Vec<Option<u64>>],
    series: &[&str],
    limit: Option<(&str, u64)>,
    limits: &[Option<u64>],
    attempts: &[Attempt],
    fmt: fn(u64) -> String,
) -> String {
    let (w, hgt, left, right, top, bottom) = (460.0f64, 220.0f64, 64.0f64, 12.0f64, 28.0f64, 40.0f64);
    let vmax = groups.iter().flatten().flatten().copied().max().unwrap_or(1).max(1);
    let lmax = limits.iter().flatten().copied().max().unwrap_or(0);
    // A limit far above every bar (a 200k-token window over a 5k-token request) would flatten the
    // bars: it is then named at the top instead of drawn.
    let limit_on_scale = lmax <= vmax.saturating_mul(3);
    let max = if limit_on_scale { vmax.max(lmax) } else { vmax } as f64 * 1.1;
    let plot_w = w - left - right;
    let plot_h = hgt - top - bottom;
    let y = |v: f64| top + plot_h - v / max * plot_h;
    let mut s = String::new();
    let _ = write!(
        s,
        "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {hgt}\" width=\"{w}\" height=\"{hgt}\" role=\"img\" aria-label=\"{}\"><text x=\"{left}\" y=\"16\" class=\"t\">{}</text>",
        esc(title),
        esc(title)
    );
    for k in 0..=4 {
        let v = max / 1.1 * f64::from(k) / 4.0;
        let yy = y(v);
        let _ = write!(
            s,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"grid\"/><text x=\"{}\" y=\"{:.1}\" class=\"ax\" text-anchor=\"end\">{}</text>",
            w - right,
            left - 4.0,
            yy + 4.0,
            esc(&fmt(v as u64))
        );
    }
    let n = groups.len().max(1) as f64;
    let gw = plot_w / n;
    let bw = (gw * 0.7 / series.len().max(1) as f64).min(48.0);
    for (g, vals) in groups.iter().enumerate() {
        let x0 = left + gw * g as f64 + (gw - bw * series.len() as f64) / 2.0;
        let a = &attempts[g];
        for (k, v) in vals.iter().enumerate() {
            let Some(v) = v else { continue };
            let yy = y(*v as f64);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{yy:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" class=\"bar s{k} {}\"><title>attempt {}: {} {}</title></rect>",
                x0 + bw * k as f64,
                (top + plot_h - yy).max(0.5),
                if a.accepted { "acc" } else { "rej" },
                a.attempt,
                esc(series[k]),
                esc(&fmt(*v))
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"ax\" text-anchor=\"middle\">#{} {}</text>",
            left + gw * (g as f64 + 0.5),
            top + plot_h + 16.0,
            a.attempt,
            if a.accepted { "✓" } else { "✗" }
        );
    }
    // The limit in force at each attempt, as a step line.
    let mut path = String::new();
    for (g, l) in limits.iter().enumerate() {
        if let Some(l) = l {
            let yy = y(*l as f64);
            let (x1, x2) = (left + gw * g as f64, left + gw * (g as f64 + 1.0));
            let _ =
                write!(path, "{}{x1:.1},{yy:.1} L{x2:.1},{yy:.1} ", if path.is_empty() { "M" } else { "L" });
        }
    }
    if !path.is_empty() && limit_on_scale {
        let _ = write!(s, "<path d=\"{}\" class=\"limit\"/>", path.trim_end());
    }
    if let (Some((name, v)), false) = (limit, limit_on_scale) {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"16\" class=\"lim\" text-anchor=\"end\">{} {} (above the scale)</text>",
            w - right,
            esc(name),
            esc(&fmt(v))
        );
    } else if let Some((name, v)) = limit {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"lim\" text-anchor=\"end\">{} {}</text>",
            w - right,
            y(v as f64) - 4.0,
            esc(name),
            esc(&fmt(v))
        );
    }
    let mut lx = left;
    for (k, name) in series.iter().enumerate() {
        let _ = write!(
            s,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" class=\"bar s{k} acc\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"ax\">{}</text>",
            hgt - 14.0,
            lx + 14.0,
            hgt - 5.0,
            esc(name)
        );
        lx += 90.0;
    }
    s.push_str("</svg></figure>");
    s
}

const CSS: &str = r#"
:root{--fg:#1d2330;--muted:#5b6578;--line:#d8dde6;--ok:#17803d;--bad:#c0262d;--warn:#a45c00;--bg:#fff;--alt:#f5f7fa}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:16px 24px;background:#14213d;color:#fff}header h1{margin:0 0 4px;font-size:20px}header .summary{margin:0}
header .ok{color:#7ee2a0}header .bad{color:#ff9a9e}header button{font:inherit;padding:2px 10px}
main{padding:8px 24px 48px}h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse}table.corpus{width:100%}table.corpus th,table.corpus td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
table.corpus th{background:var(--alt);cursor:pointer;user-select:none}table.corpus tr.fail{background:#fff3f3}table.corpus td:first-child,table.corpus td:last-child{white-space:nowrap}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td ul{margin:2px 0;padding-left:18px}.bad{color:var(--bad)}.ok{color:var(--ok)}
.outcome{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;background:#e8ecf2}.o-recovered,.o-no_failure{background:#dcf5e3;color:var(--ok)}
.o-exhausted,.o-failed_fast,.o-unreadable{background:#fde2e2;color:var(--bad)}.o-not_recoverable{background:#fff0d6;color:var(--warn)}
section.session{border-top:2px solid var(--line);margin-top:24px}.meta{color:var(--muted);margin:0 0 8px}
.charts{display:flex;flex-wrap:wrap;gap:16px}figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px}
svg .t{font-size:13px;font-weight:600;fill:var(--fg)}svg .ax{font-size:10px;fill:var(--muted)}svg .grid{stroke:#eceff4}
svg .bar.s0.acc{fill:#2f6fdb}svg .bar.s1.acc{fill:#86a9f0}svg .bar.s0.rej{fill:#d9534f}svg .bar.s1.rej{fill:#efa09d}
svg .limit{fill:none;stroke:#222;stroke-width:1.5;stroke-dasharray:5 4}svg .lim{font-size:11px;fill:#222}
ol.timeline{list-style:none;padding:0;margin:12px 0;border-left:3px solid #2f6fdb}
li.ev{padding:3px 8px 3px 12px;margin:0;position:relative}li.ev:before{content:"";position:absolute;left:-7px;top:9px;width:9px;height:9px;border-radius:50%;background:#2f6fdb}
li.ev .seq{display:inline-block;min-width:2.5em;color:var(--muted);text-align:right;font-variant-numeric:tabular-nums}li.ev .kind{font-family:ui-monospace,monospace;font-size:12px;background:var(--alt);padding:0 4px;border-radius:3px}
li.abandoned{margin-left:28px;border-left:3px dashed #b0b8c6;opacity:.75}li.abandoned:before{background:#b0b8c6}.branch{color:var(--warn);font-size:12px}
li.k-rewind:before{background:var(--warn)}.rewind{color:var(--warn);margin-left:3em}
body.hide-abandoned li.abandoned{display:none}
details.diff{margin:4px 0 4px 3em}details summary{cursor:pointer;color:var(--muted)}table.diff td{padding:1px 6px;border-bottom:1px solid #f0f2f5;font-size:13px}
tr.dropped{background:#fdecec}tr.stubbed{background:#fff6e0}tr.added{background:#e9f8ee}td.sign{font-weight:700;width:1.5em}td.preview{color:#333;max-width:60em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details.marker{margin:4px 0 4px 1em}details.marker pre{max-height:24em;overflow:auto;background:var(--alt);padding:8px;white-space:pre-wrap;word-break:break-word;font-size:12px}
"#;

const JS: &str = r#"
(function(){
  "use strict";
  var expand = document.getElementById("expand");
  if (expand) expand.addEventListener("click", function(){
    var all = document.querySelectorAll("details");
    var open = expand.textContent === "expand all";
    for (var i = 0; i < all.length; i++) all[i].open = open;
    expand.textContent = open ? "collapse all" : "expand all";
  });
  var ab = document.getElementById("show-abandoned");
  if (ab) ab.addEventListener("change", function(){
    document.body.classList.toggle("hide-abandoned", !ab.checked);
  });
  var table = document.getElementById("corpus");
  if (table) {
    var heads = table.tHead.rows[0].cells;
    for (var c = 0; c < heads.length; c++) (function(col){
      heads[col].addEventListener("click", function(){
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = heads[col].getAttribute("data-sort") !== "asc";
        rows.sort(function(a, b){
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          return (asc ? 1 : -1) * x.localeCompare(y, undefined, {numeric: true});
        });
        for (var i = 0; i < rows.length; i++) body.appendChild(rows[i]);
        heads[col].setAttribute("data-sort", asc ? "asc" : "desc");
      });
    })(c);
  }
  document.body.setAttribute("data-ready", "1");
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'\u{1b}"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\\u{1b}");
    }
}
