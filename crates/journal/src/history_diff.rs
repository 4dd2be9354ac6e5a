//! What changed between two histories: the messages a rewrite dropped, added and stubbed (a
//! message replaced in place by a smaller one of the same role), with their sizes. Used by
//! `journal diff` and by the audit report's rewrite views.

use salvage_types::{message_weight, Message};
use serde::Serialize;

/// One message in a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffMessage {
    /// Its index in the history it belongs to (the old one for dropped, the new one for added).
    pub index: usize,
    /// Its role.
    pub role: String,
    /// Its weight in bytes.
    pub bytes: u64,
    /// The first characters of its content, on one line.
    pub preview: String,
}

/// A message rewritten in place (a stub, a truncation, a summary at the same position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stubbed {
    /// Its index in the old history.
    pub index: usize,
    /// Its role.
    pub role: String,
    /// Bytes before.
    pub before_bytes: u64,
    /// Bytes after.
    pub after_bytes: u64,
    /// The new content's first characters.
    pub preview: String,
}

/// The difference between two histories.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HistoryDiff {
    /// Messages before and after.
    pub messages: [usize; 2],
    /// Weight before and after.
    pub bytes: [u64; 2],
    /// Messages of the old history that are gone.
    pub dropped: Vec<DiffMessage>,
    /// Messages of the new history that are new.
    pub added: Vec<DiffMessage>,
    /// Messages rewritten in place.
    pub stubbed: Vec<Stubbed>,
}

impl HistoryDiff {
    /// True when the histories are equal.
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty() && self.added.is_empty() && self.stubbed.is_empty()
    }
}

/// The first `n` characters of a message's content on one line (tool calls named when empty).
pub fn preview(m: &Message, n: usize) -> String {
    let text = if m.content.trim().is_empty() && !m.tool_calls.is_empty() {
        format!(
            "[tool calls: {}]",
            m.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
        )
    } else {
        m.content.clone()
    };
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > n {
        format!("{}…", one.chars().take(n).collect::<String>())
    } else {
        one
    }
}

fn item(index: usize, m: &Message) -> DiffMessage {
    DiffMessage { index, role: m.role.to_string(), bytes: message_weight(m), preview: preview(m, 100) }
}

/// Compares two histories: the common prefix and suffix are kept; inside the changed middle, a
/// message is "stubbed" when the message at the same offset from the start of the middle has
/// the same role and tool call id, and the rest are dropped or added. Messages that merely moved
/// are matched by equality first (so an insertion does not read as a rewrite of everything after it).
pub fn diff_histories(old: &[Message], new: &[Message]) -> HistoryDiff {
    let mut d = HistoryDiff {
        messages: [old.len(), new.len()],
        bytes: [old.iter().map(message_weight).sum(), new.iter().map(message_weight).sum()],
        ..HistoryDiff::default()
    };
    let p = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let max_s = old.len().min(new.len()).saturating_sub(p);
    let s = old.iter().rev().zip(new.iter().rev()).take(max_s).take_while(|(a, b)| a == b).count();
    // p + s ≤ both lengths, so the middles exist; indices below stay within them, so the
    // saturating steps never saturate.
    let om = old.get(p..old.len().saturating_sub(s)).unwrap_or_default();
    let nm = new.get(p..new.len().saturating_sub(s)).unwrap_or_default();
    // Match equal messages inside the middle in order (a greedy LCS), rewrite-pair the gaps.
    let mut i = 0usize;
    let mut j = 0usize;
    loop {
        let (a, b) = (om.get(i), nm.get(j));
        if a.is_none() && b.is_none() {
            break;
        }
        let rest = nm.get(j..).unwrap_or_default();
        let next_match = a.and_then(|a| rest.iter().position(|m| m == a)).map(|k| j.saturating_add(k));
        match (next_match, a, b) {
            (Some(k), _, _) => {
                for (jj, m) in nm.iter().enumerate().take(k).skip(j) {
                    d.added.push(item(p.saturating_add(jj), m));
                }
                i = i.saturating_add(1);
                j = k.saturating_add(1);
            }
            (None, Some(a), b) => {
                let same_slot = b.filter(|b| b.role == a.role && b.tool_call_id == a.tool_call_id);
                let later = om.get(i.saturating_add(1)..).unwrap_or_default();
                // A stub keeps the slot only when nothing later in the old middle equals it.
                match same_slot {
                    Some(b) if !later.contains(b) => {
                        d.stubbed.push(Stubbed {
                            index: p.saturating_add(i),
                            role: a.role.to_string(),
                            before_bytes: message_weight(a),
                            after_bytes: message_weight(b),
                            preview: preview(b, 100),
                        });
                        j = j.saturating_add(1);
                    }
                    _ => d.dropped.push(item(p.saturating_add(i), a)),
                }
                i = i.saturating_add(1);
            }
            (None, None, Some(b)) => {
                d.added.push(item(p.saturating_add(j), b));
                j = j.saturating_add(1);
            }
            (None, None, None) => break,
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_adds_and_stubs_are_told_apart() {
        let sys = Message::system("sys");
        let u1 = Message::user("first question");
        let big = Message::tool("c1", "x".repeat(5000));
        let stub = Message::tool("c1", "[cleared]");
        let u2 = Message::user("the task");
        let notice = Message::user("notice");
        let old = vec![sys.clone(), u1.clone(), big, u2.clone()];
        let new = vec![sys, stub, u2, notice];
        let d = diff_histories(&old, &new);
        assert_eq!(d.dropped.iter().map(|m| m.index).collect::<Vec<_>>(), vec![1]);
        assert_eq!(d.stubbed.len(), 1);
        assert!(d.stubbed[0].before_bytes > d.stubbed[0].after_bytes);
        assert_eq!(d.added.iter().map(|m| m.index).collect::<Vec<_>>(), vec![3]);
        assert!(diff_histories(&new, &new).is_empty());
    }
}
