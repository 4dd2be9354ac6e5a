//! The active branch of a transcript: the single-parent walk back from a leaf, across compaction
//! boundaries, and the parallel tool calls that walk leaves out, put back.

use super::Rec;
use crate::session::Report;
use std::collections::{HashMap, HashSet};

/// The root uuid of a record's chain (for grouping sidechain records without an agent id).
pub(super) fn root_of(recs: &[Rec], by_uuid: &HashMap<&str, usize>, mut i: usize) -> String {
    let mut seen = HashSet::new();
    while let Some(p) = recs.get(i).and_then(|r| r.parent.as_deref()).and_then(|p| by_uuid.get(p)) {
        if !seen.insert(*p) {
            break;
        }
        i = *p;
    }
    recs.get(i).and_then(|r| r.uuid.clone()).unwrap_or_default()
}

/// The chain ending at `leaf`, oldest first, continuing across compaction boundaries through
/// `logicalParentUuid`.
pub(super) fn active_chain(
    recs: &[Rec],
    by_uuid: &HashMap<&str, usize>,
    leaf: usize,
    report: &mut Report,
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = Some(leaf);
    while let Some((i, r)) = cur.and_then(|i| Some((i, recs.get(i)?))) {
        if !seen.insert(i) {
            report.note(format!("line {}: parentUuid cycle; the chain stops there", r.line));
            break;
        }
        out.push(i);
        let next = match (&r.parent, r.is_boundary()) {
            (Some(p), _) => Some(p.as_str()),
            (None, true) => r.str("logicalParentUuid"),
            (None, false) => None,
        };
        cur = match next {
            None => None,
            Some(p) => match by_uuid.get(p) {
                Some(&j) => Some(j),
                None if r.is_boundary() && r.parent.is_none() => match written_before(recs, i, r.side) {
                    // Claude Code 2.1 writes a boundary whose logicalParentUuid names a record it
                    // never wrote (anthropics/claude-code#46603): the conversation it compacted is
                    // the one written just before it, and stopping here lost it all (a real
                    // 2.1.53 session archived an empty transcript for its compaction).
                    Some(j) => {
                        report.note(format!(
                            "line {}: this compaction's logicalParentUuid {p} is not in the file (a Claude Code \
                             bug); the history before it continues from line {}, the last record written before it",
                            r.line,
                            recs.get(j).map_or(0, |x| x.line)
                        ));
                        Some(j)
                    }
                    None => {
                        report.note(format!(
                            "line {}: the history before this compaction is not in the file (logicalParentUuid {p})",
                            r.line
                        ));
                        None
                    }
                },
                None => {
                    report.note(format!(
                        "line {}: parent {p} is not in the file; the chain starts here",
                        r.line
                    ));
                    None
                }
            },
        };
    }
    out.reverse();
    out
}

/// The last conversation record (user, assistant or system, with a uuid) written before record `i`
/// on the same side (main chain or sidechain): what a compaction at `i` followed.
fn written_before(recs: &[Rec], i: usize, side: bool) -> Option<usize> {
    (0..i).rev().find(|&j| {
        recs.get(j).is_some_and(|x| {
            x.side == side && x.uuid.is_some() && matches!(x.kind.as_str(), "user" | "assistant" | "system")
        })
    })
}

/// Puts back what the single-parent walk leaves out after parallel tool calls: sibling
/// assistant records of a response on the chain (same `message.id`) and the tool results whose
/// parent is a member of that response. They go right after the response's last record on the
/// chain, siblings then results, each in timestamp order (file order on ties).
pub(super) fn recover_parallel(recs: &[Rec], chain: Vec<usize>, main: bool) -> Vec<usize> {
    let on: HashSet<usize> = chain.iter().copied().collect();
    // A line repeating a record (same uuid) is that record, read once: the chain links to the
    // last line of a uuid, and an earlier copy is no sibling of it.
    let last_of: HashMap<&str, usize> =
        recs.iter().enumerate().filter_map(|(i, r)| Some((r.uuid.as_deref()?, i))).collect();
    let on_uuids: HashSet<&str> = chain.iter().filter_map(|&i| recs.get(i)?.uuid.as_deref()).collect();
    let repeat = |i: usize, r: &Rec| {
        r.uuid
            .as_deref()
            .is_some_and(|u| last_of.get(u) != Some(&i) || (!on.contains(&i) && on_uuids.contains(u)))
    };
    let eligible = |i: usize| recs.get(i).is_some_and(|r| r.side != main && !repeat(i, r));
    let mut members: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut results_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if !eligible(i) {
            continue;
        }
        if r.kind == "assistant" {
            if let Some(mid) = r.message_id() {
                members.entry(mid).or_default().push(i);
            }
        } else if r.kind == "user" && r.has_tool_result() {
            if let Some(p) = r.parent.as_deref() {
                results_of.entry(p).or_default().push(i);
            }
        }
    }
    let mut anchor: HashMap<&str, usize> = HashMap::new();
    for &i in &chain {
        let Some(r) = recs.get(i) else { continue };
        if r.kind == "assistant" {
            if let Some(mid) = r.message_id() {
                anchor.insert(mid, i);
            }
        }
    }
    let mut added: HashSet<usize> = HashSet::new();
    let mut inserts: HashMap<usize, Vec<usize>> = HashMap::new();
    let ts = |i: usize| recs.get(i).and_then(|r| r.ts.as_deref());
    let by_time = |v: &mut Vec<usize>| v.sort_by(|a, b| ts(*a).cmp(&ts(*b)).then(a.cmp(b)));
    for (mid, &at) in &anchor {
        let group = members.get(mid).cloned().unwrap_or_default();
        let mut siblings: Vec<usize> =
            group.iter().copied().filter(|i| !on.contains(i) && !added.contains(i)).collect();
        let mut results: Vec<usize> = Vec::new();
        for m in &group {
            let Some(u) = recs.get(*m).and_then(|r| r.uuid.as_deref()) else { continue };
            for &t in results_of.get(u).map(Vec::as_slice).unwrap_or(&[]) {
                if !on.contains(&t) && !added.contains(&t) {
                    results.push(t);
                }
            }
        }
        if siblings.is_empty() && results.is_empty() {
            continue;
        }
        by_time(&mut siblings);
        by_time(&mut results);
        added.extend(siblings.iter().chain(&results));
        inserts.insert(at, siblings.into_iter().chain(results).collect());
    }
    if inserts.is_empty() {
        return chain;
    }
    let mut out = Vec::with_capacity(chain.len().saturating_add(added.len()));
    for i in chain {
        out.push(i);
        if let Some(v) = inserts.remove(&i) {
            out.extend(v);
        }
    }
    out
}
