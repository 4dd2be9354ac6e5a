//! The one head-and-tail preview of a long text, shared by the tool-result budget and
//! microcompaction (each has its own sizes and banner).

use salvage_types::truncate::{head, tail};

/// The head of `content` (at most `head_max` bytes, cut after a line break in its second half),
/// the `banner` for the bytes left out, and the tail of what follows the head (at most
/// `tail_max` bytes, starting after its first line break when that break lies within
/// `tail_break_within` bytes and something follows it). Head and tail never overlap.
pub fn head_and_tail(
    content: &str,
    head_max: usize,
    tail_max: usize,
    tail_break_within: usize,
    banner: impl FnOnce(usize) -> String,
) -> String {
    let mut h = head(content, head_max);
    if let Some(nl) = h.rfind('\n').filter(|&p| p >= head_max / 2) {
        h = h.get(..=nl).unwrap_or(h);
    }
    let rest = content.get(h.len()..).unwrap_or_default();
    let mut t = tail(rest, tail_max);
    if let Some(nl) = t.find('\n').filter(|&p| p.saturating_add(1) < t.len() && p < tail_break_within) {
        t = t.get(nl.saturating_add(1)..).unwrap_or(t);
    }
    let omitted = rest.len().saturating_sub(t.len());
    format!("{h}{}{t}", banner(omitted))
}
