//! Tool-call pairing: validation and repair (behaviour spec section 6).

use salvage_types::message::{Message, Role, ToolCall};
use serde::Serialize;
use std::collections::HashSet;

/// The text of a synthetic result for a call whose result is missing.
pub const MISSING_RESULT_TEXT: &str = "[Tool result missing — the tool execution was interrupted or failed silently. Do NOT retry this tool call. Analyze what went wrong and try a different approach.]";
/// The `error_code` of a synthetic result.
pub const MISSING_RESULT_CODE: &str = "missing_result";

/// A message with the index it had in the input (`None` for one the repair made).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracked {
    /// Index in the input history.
    pub origin: Option<usize>,
    /// The message.
    pub msg: Message,
}

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PairingReport {
    /// Calls removed for an empty or duplicate id.
    pub pruned_calls: usize,
    /// Synthetic error results injected.
    pub synthetic: usize,
    /// Tool messages nobody claimed, removed.
    pub orphans: usize,
    /// Their call ids.
    pub orphan_ids: Vec<String>,
    /// Results moved to sit right after their call.
    pub relocated: usize,
    /// Results re-ordered into call order.
    pub reordered: usize,
}

impl PairingReport {
    /// True when the history needed no repair.
    pub fn is_clean(&self) -> bool {
        self.pruned_calls == 0
            && self.synthetic == 0
            && self.orphans == 0
            && self.relocated == 0
            && self.reordered == 0
    }
}

/// A synthetic error result for `call_id`.
pub fn synthetic_result(call_id: &str) -> Message {
    let mut m = Message::tool(call_id, MISSING_RESULT_TEXT);
    m.is_error = true;
    m.error_code = Some(MISSING_RESULT_CODE.to_string());
    m
}

/// Repairs pairing, tracking where each message came from.
pub fn repair_tracked(items: Vec<Tracked>) -> (Vec<Tracked>, PairingReport) {
    let mut report = PairingReport::default();
    let n = items.len();
    let mut claimed = vec![false; n];
    let mut out: Vec<Tracked> = Vec::with_capacity(n);
    for (i, item) in items.iter().enumerate() {
        let m = &item.msg;
        match m.role {
            // A result of a call the provider holds (a chained response) pairs upstream; one a
            // call of this history claimed was placed with that call already.
            Role::Tool if m.meta.call_held_upstream && claimed.get(i) != Some(&true) => {
                out.push(item.clone())
            }
            Role::Tool => {
                if claimed.get(i) != Some(&true) {
                    report.orphans = report.orphans.saturating_add(1);
                    report.orphan_ids.push(m.tool_call_id.clone().unwrap_or_default());
                }
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut asst = item.clone();
                let mut seen: HashSet<String> = HashSet::new();
                let before = asst.msg.tool_calls.len();
                asst.msg.tool_calls.retain(|c| !c.id.is_empty() && seen.insert(c.id.clone()));
                report.pruned_calls =
                    report.pruned_calls.saturating_add(before.saturating_sub(asst.msg.tool_calls.len()));
                let found = claim_results(&items, i, &asst.msg.tool_calls, &mut claimed);
                let calls = asst.msg.tool_calls.clone();
                out.push(asst);
                let k = found.len();
                let all_found = found.iter().all(Option::is_some);
                let adjacent = all_found && {
                    let mut idx: Vec<usize> = found.iter().flatten().copied().collect();
                    idx.sort_unstable();
                    idx.iter().enumerate().all(|(o, &x)| i.saturating_add(1).saturating_add(o) == x)
                };
                if adjacent && k > 0 {
                    // Results out of order but adjacent are valid: keep them as they are.
                    out.extend(items.iter().skip(i.saturating_add(1)).take(k).cloned());
                } else {
                    let mut prev: Option<usize> = None;
                    for (c, f) in calls.iter().zip(&found) {
                        match f.and_then(|x| Some((x, items.get(x)?))) {
                            Some((x, result)) => {
                                // Moved over a non-tool message to sit right after its call.
                                let mut between = items.iter().take(x).skip(i.saturating_add(1));
                                if between.any(|t| t.msg.role != Role::Tool) {
                                    report.relocated = report.relocated.saturating_add(1);
                                }
                                if prev.is_some_and(|p| x < p) {
                                    report.reordered = report.reordered.saturating_add(1);
                                }
                                prev = Some(x);
                                out.push(result.clone());
                            }
                            None => {
                                report.synthetic = report.synthetic.saturating_add(1);
                                out.push(Tracked { origin: None, msg: synthetic_result(&c.id) });
                            }
                        }
                    }
                }
            }
            _ => out.push(item.clone()),
        }
    }
    (out, report)
}

/// Claims the first unclaimed result of each of `calls` (the calls of the assistant message at
/// `i`) before the next assistant message: for each call, the index of its result, or `None`.
fn claim_results(
    items: &[Tracked],
    i: usize,
    calls: &[ToolCall],
    claimed: &mut [bool],
) -> Vec<Option<usize>> {
    let mut found: Vec<Option<usize>> = vec![None; calls.len()];
    let after = items.iter().enumerate().skip(i.saturating_add(1));
    for (j, t) in after.take_while(|(_, t)| t.msg.role != Role::Assistant) {
        if t.msg.role != Role::Tool || claimed.get(j) != Some(&false) {
            continue;
        }
        let Some(id) = t.msg.tool_call_id.as_deref() else { continue };
        let Some(k) = calls.iter().position(|c| c.id == id) else { continue };
        if let Some(slot @ None) = found.get_mut(k) {
            *slot = Some(j);
            if let Some(c) = claimed.get_mut(j) {
                *c = true;
            }
        }
    }
    found
}

/// Repairs pairing. A history that needs no repair comes back unchanged (and the report is clean).
pub fn repair(history: &[Message]) -> (Vec<Message>, PairingReport) {
    let items =
        history.iter().cloned().enumerate().map(|(i, msg)| Tracked { origin: Some(i), msg }).collect();
    let (out, report) = repair_tracked(items);
    (out.into_iter().map(|t| t.msg).collect(), report)
}

/// True when every call is answered right after it (in any order), no call id is empty or
/// repeated within a message, and no tool result is an orphan.
pub fn is_valid(history: &[Message]) -> bool {
    let mut messages = history.iter();
    while let Some(m) = messages.next() {
        match m.role {
            Role::Tool if !m.meta.call_held_upstream => return false,
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut ids: HashSet<&str> = HashSet::new();
                for c in &m.tool_calls {
                    if c.id.is_empty() || !ids.insert(c.id.as_str()) {
                        return false;
                    }
                }
                // The next `ids.len()` messages answer the calls, one each.
                for _ in 0..ids.len() {
                    match messages.next() {
                        Some(t) if t.role == Role::Tool => {
                            if !t.tool_call_id.as_deref().is_some_and(|id| ids.remove(id)) {
                                return false;
                            }
                        }
                        _ => return false,
                    }
                }
            }
            _ => {}
        }
    }
    true
}
