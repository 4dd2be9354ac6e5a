//! One rewrite in a session's timeline: the diff of the history (messages dropped, stubbed,
//! added, with sizes) and the archived content behind each new marker.

use super::esc;
use salvage_ccr::Ccr;
use salvage_journal::history_diff::{diff_histories, DiffMessage, HistoryDiff, Stubbed};
use salvage_journal::{Journal, StoredEvent};
use salvage_types::{format_bytes, Message};
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;

/// Archived content shown per marker at most.
const MARKER_SHOW: usize = 16 * 1024;
/// Diff lines shown per rewrite at most.
const DIFF_ROWS: usize = 60;
/// Rewrites with at most this many lines are shown open.
const DIFF_OPEN: usize = 12;

/// Writes one rewrite event: the diff of the history before and after it, and its new markers.
pub(super) fn rewrite(
    h: &mut String,
    j: &Journal,
    session: &str,
    e: &StoredEvent,
    ccr: &Ccr<'_>,
) -> Result<(), String> {
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
    diff_summary(h, &d);
    diff_rows(h, &d);
    h.push_str("</table>");
    new_markers(h, &old, &new, ccr);
    h.push_str("</details>");
    Ok(())
}

/// Opens the diff: its summary line (open when it is a short rewrite) and the table.
fn diff_summary(h: &mut String, d: &HistoryDiff) {
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
}

/// One row per dropped, stubbed and added message, in history order (dropped and stubbed by
/// their old index, added by their new one), at most [`DIFF_ROWS`].
fn diff_rows(h: &mut String, d: &HistoryDiff) {
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
    let mut items: Vec<Item<'_>> = d
        .dropped
        .iter()
        .map(|m| Item::whole(m, 0, "dropped", "−"))
        .chain(d.stubbed.iter().map(Item::stubbed))
        .chain(d.added.iter().map(|m| Item::whole(m, 2, "added", "+")))
        .collect();
    items.sort_by_key(|x| x.order);
    for x in items {
        line(h, x.cls, x.sign, x.order.0, x.role, x.size, x.preview);
    }
    if more > 0 {
        let _ = write!(h, "<tr><td></td><td colspan=\"4\">… {more} more</td></tr>");
    }
}

/// One row of [`diff_rows`]: its place (the index, then dropped before stubbed before added),
/// class, sign, role, size and preview.
struct Item<'a> {
    order: (usize, u8),
    cls: &'static str,
    sign: &'static str,
    role: &'a str,
    size: String,
    preview: &'a str,
}

impl<'a> Item<'a> {
    /// A dropped (`rank` 0) or added (`rank` 2) message: its size is its weight.
    fn whole(m: &'a DiffMessage, rank: u8, cls: &'static str, sign: &'static str) -> Self {
        let size = format_bytes(m.bytes);
        Item { order: (m.index, rank), cls, sign, role: &m.role, size, preview: &m.preview }
    }

    /// A message stubbed in place: its size before and after.
    fn stubbed(m: &'a Stubbed) -> Self {
        let size = format!("{} → {}", format_bytes(m.before_bytes), format_bytes(m.after_bytes));
        Item { order: (m.index, 1), cls: "stubbed", sign: "~", role: &m.role, size, preview: &m.preview }
    }
}

/// The markers the rewrite introduced, expandable to what they archived.
fn new_markers(h: &mut String, old: &[Message], new: &[Message], ccr: &Ccr<'_>) {
    let before: HashSet<String> = old.iter().filter_map(|m| serde_json::to_string(m).ok()).collect();
    let mut seen = BTreeSet::new();
    for m in new {
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
}
