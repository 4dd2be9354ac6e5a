//! Tool-call pairing: validation and repair (behaviour spec section 6).

use salvage_types::message::{Message, Role, ToolCall};
use serde::Serialize;
use std::borrow::Cow;
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
    /// Calls (and their results) renamed `ID~2`, … because an earlier assistant message used
    /// their id (providers reject a repeated id anywhere in one request).
    pub renamed: usize,
}

impl PairingReport {
    /// True when the history needed no repair.
    pub fn is_clean(&self) -> bool {
        self.pruned_calls == 0
            && self.synthetic == 0
            && self.orphans == 0
            && self.relocated == 0
            && self.reordered == 0
            && self.renamed == 0
    }
}

/// A synthetic error result for `call_id`.
pub fn synthetic_result(call_id: &str) -> Message {
    let mut m = Message::tool(call_id, MISSING_RESULT_TEXT);
    m.is_error = true;
    m.error_code = Some(MISSING_RESULT_CODE.to_string());
    m
}

/// Repairs pairing, tracking where each message came from. Every message is moved, never
/// copied: a message's tool-call arguments can be the largest thing in a history (a JSON bomb
/// in one call), and each copy of the history made here used to stay alive beside the input.
pub fn repair_tracked(items: Vec<Tracked>) -> (Vec<Tracked>, PairingReport) {
    let mut report = PairingReport::default();
    let n = items.len();
    let mut claimed = vec![false; n];
    // A slot is emptied when its message moves to the output; the only messages moved ahead of
    // the walk are results claimed by an earlier call, so an empty slot is always a claimed result.
    let mut slots: Vec<Option<Tracked>> = items.into_iter().map(Some).collect();
    let mut out: Vec<Tracked> = Vec::with_capacity(n);
    // The call ids of the assistant messages placed so far (as renamed).
    let mut used: HashSet<String> = HashSet::new();
    for i in 0..n {
        let Some(item) = slots.get_mut(i).and_then(Option::take) else { continue };
        match item.msg.role {
            // A result of a call the provider holds (a chained response) pairs upstream; one a
            // call of this history claimed was placed with that call already.
            Role::Tool if item.msg.meta.call_held_upstream && claimed.get(i) != Some(&true) => out.push(item),
            Role::Tool => {
                if claimed.get(i) != Some(&true) {
                    report.orphans = report.orphans.saturating_add(1);
                    report.orphan_ids.push(item.msg.tool_call_id.unwrap_or_default());
                }
            }
            Role::Assistant if !item.msg.tool_calls.is_empty() => {
                place_calls(item, i, &mut slots, &mut claimed, &mut out, &mut report, &mut used);
            }
            _ => out.push(item),
        }
    }
    (out, report)
}

/// Places the assistant message `asst` (at `i`, with tool calls) and its results: its calls
/// without an id or with a repeated one pruned, a call whose id an earlier assistant message
/// used renamed with its result (`ID~2`, …; `used` holds those ids and takes this message's),
/// each result found after it moved right behind it (kept in their order when they already sit
/// there), a synthetic result for each missing one.
fn place_calls(
    mut asst: Tracked,
    i: usize,
    slots: &mut [Option<Tracked>],
    claimed: &mut [bool],
    out: &mut Vec<Tracked>,
    report: &mut PairingReport,
    used: &mut HashSet<String>,
) {
    let mut seen: HashSet<String> = HashSet::new();
    let before = asst.msg.tool_calls.len();
    asst.msg.tool_calls.retain(|c| !c.id.is_empty() && seen.insert(c.id.clone()));
    report.pruned_calls =
        report.pruned_calls.saturating_add(before.saturating_sub(asst.msg.tool_calls.len()));
    let found = claim_results(slots, i, &asst.msg.tool_calls, claimed);
    for (call, f) in asst.msg.tool_calls.iter_mut().zip(&found) {
        if !used.contains(&call.id) {
            continue;
        }
        let renamed = (2u32..)
            .map(|n| format!("{}~{n}", call.id))
            .find(|id| !used.contains(id) && !seen.contains(id))
            .unwrap_or_default();
        if let Some(result) = f.and_then(|x| slots.get_mut(x)).and_then(Option::as_mut) {
            result.msg.tool_call_id = Some(renamed.clone());
        }
        seen.insert(renamed.clone());
        call.id = renamed;
        report.renamed = report.renamed.saturating_add(1);
    }
    let ids: Vec<String> = asst.msg.tool_calls.iter().map(|c| c.id.clone()).collect();
    used.extend(ids.iter().cloned());
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
        let after = slots.iter_mut().skip(i.saturating_add(1)).take(k);
        out.extend(after.filter_map(Option::take));
        return;
    }
    let mut prev: Option<usize> = None;
    for (id, f) in ids.iter().zip(&found) {
        let Some(x) = *f else {
            report.synthetic = report.synthetic.saturating_add(1);
            out.push(Tracked { origin: None, msg: synthetic_result(id) });
            continue;
        };
        // Moved over a non-tool message to sit right after its call (an emptied slot between
        // was a result, placed already).
        let mut between = slots.iter().take(x).skip(i.saturating_add(1));
        if between.any(|t| t.as_ref().is_some_and(|t| t.msg.role != Role::Tool)) {
            report.relocated = report.relocated.saturating_add(1);
        }
        if prev.is_some_and(|p| x < p) {
            report.reordered = report.reordered.saturating_add(1);
        }
        prev = Some(x);
        if let Some(result) = slots.get_mut(x).and_then(Option::take) {
            out.push(result);
        }
    }
}

/// Claims the first unclaimed result of each of `calls` (the calls of the assistant message at
/// `i`) before the next assistant message: for each call, the index of its result, or `None`.
/// An emptied slot is a result placed already (claimed).
fn claim_results(
    slots: &[Option<Tracked>],
    i: usize,
    calls: &[ToolCall],
    claimed: &mut [bool],
) -> Vec<Option<usize>> {
    let mut found: Vec<Option<usize>> = vec![None; calls.len()];
    let after = slots.iter().enumerate().skip(i.saturating_add(1));
    let live = after.filter_map(|(j, t)| Some((j, t.as_ref()?)));
    for (j, t) in live.take_while(|(_, t)| t.msg.role != Role::Assistant) {
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

/// Repairs pairing. A history that needs no repair ([`is_valid`]) comes back borrowed, as it is
/// (and the report is clean): no copy of it is made.
pub fn repair(history: &[Message]) -> (Cow<'_, [Message]>, PairingReport) {
    if is_valid(history) {
        return (Cow::Borrowed(history), PairingReport::default());
    }
    let items =
        history.iter().cloned().enumerate().map(|(i, msg)| Tracked { origin: Some(i), msg }).collect();
    let (out, report) = repair_tracked(items);
    (Cow::Owned(out.into_iter().map(|t| t.msg).collect()), report)
}

/// True when every call is answered right after it (in any order), no call id is empty or
/// repeated (within a message or by a later one), and no tool result is an orphan.
pub fn is_valid(history: &[Message]) -> bool {
    let mut earlier: HashSet<&str> = HashSet::new();
    let mut messages = history.iter();
    while let Some(m) = messages.next() {
        match m.role {
            Role::Tool if !m.meta.call_held_upstream => return false,
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut ids: HashSet<&str> = HashSet::new();
                for c in &m.tool_calls {
                    if c.id.is_empty() || !ids.insert(c.id.as_str()) || !earlier.insert(c.id.as_str()) {
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
