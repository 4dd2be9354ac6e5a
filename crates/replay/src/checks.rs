//! The checks of `capture.md` on every run, and the comparison with the capture's `expect`.

use crate::driver::Run;
use salvage_ccr::Ccr;
use salvage_journal::Journal;
use salvage_recovery::payload::NOTICE_MARKER;
use salvage_types::capture::{Capture, Expect, Outcome};
use salvage_types::{CcrKey, Clock};
use serde::Serialize;

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Its name.
    pub name: String,
    /// Whether it holds.
    pub ok: bool,
    /// What was seen.
    pub detail: String,
}

fn check(name: &str, ok: bool, detail: String) -> Check {
    Check { name: name.to_string(), ok, detail }
}

/// Check 0, fidelity: attempt 0 is the captured request as sent, its simulated size is the size
/// the capture recorded, and a request the capture's own upstream must reject is rejected; and a
/// context overflow is not judged on a count that leaves out content the request refers to but
/// the capture does not hold ([`crate::unheld`]). Any such reference is named in the detail.
fn fidelity(run: &Run, capture: &Capture) -> Check {
    let refs = crate::unheld::unheld(capture);
    if refs.is_empty() {
        return fidelity_of_sizes(run, capture);
    }
    let named: Vec<String> = refs.iter().take(4).map(|u| format!("{} at {}", u.what, u.path)).collect();
    let more = refs.len().saturating_sub(named.len());
    let list = if more > 0 { format!("{} and {more} more", named.join("; ")) } else { named.join("; ") };
    if run.captured_class == Some(salvage_types::ErrorClass::ContextOverflow) {
        return check(
            "fidelity",
            false,
            format!(
                "the request refers to content the capture does not hold ({list}): the provider counted it, the \
                 simulation cannot, so this context overflow is not reproduced and no verdict on its recovery \
                 holds; capture the content itself (the whole conversation, the file's bytes) to replay it"
            ),
        );
    }
    let mut c = fidelity_of_sizes(run, capture);
    c.detail = format!("{}; not counted, the capture does not hold it: {list}", c.detail);
    c
}

/// Check 0 on what the capture holds: the request as sent, its size, the upstream's rejection.
fn fidelity_of_sizes(run: &Run, capture: &Capture) -> Check {
    let Some(first) = run.sent.first() else {
        return check("fidelity", true, "no request was sent".into());
    };
    let captured_failure = run.captured_class.is_some();
    if captured_failure && !first.as_sent {
        return check("fidelity", false, "attempt 0 was not the captured request as sent".into());
    }
    if let Some(want) = capture.request.as_ref().and_then(|r| r.bytes) {
        if first.bytes != want {
            return check(
                "fidelity",
                false,
                format!(
                    "attempt 0 weighs {} B in the replay but the request as sent was {want} B",
                    first.bytes
                ),
            );
        }
    }
    let must_reject = capture
        .upstream
        .gateway
        .as_ref()
        .and_then(|g| g.max_body_bytes)
        .is_some_and(|max| capture.request.as_ref().and_then(|r| r.bytes).unwrap_or(first.bytes) > max);
    if must_reject && first.accepted {
        return check(
            "fidelity",
            false,
            "the capture's gateway must reject attempt 0 but the simulation accepted it".into(),
        );
    }
    match (run.first_class, run.captured_class) {
        (Some((sim, true)), Some(captured)) => check(
            "fidelity",
            sim == captured,
            if sim == captured {
                format!("simulated rejection is {sim}, as captured")
            } else {
                format!("simulated rejection is {sim} but the capture says {captured}")
            },
        ),
        (Some((_, false)), _) if must_reject => check(
            "fidelity",
            false,
            "the capture's gateway must reject attempt 0 but the simulation accepted it".into(),
        ),
        (Some((_, false)), _) => check(
            "fidelity",
            true,
            "the simulation accepts attempt 0: the captured failure was replayed as recorded".into(),
        ),
        _ => check("fidelity", true, "no rejection to compare".into()),
    }
}

/// Runs every check of a run against the journal it wrote; `clock` dates the archive's reads.
pub fn run_checks(
    run: &Run,
    capture: &Capture,
    journal: &Journal,
    max_attempts: u32,
    clock: &dyn Clock,
) -> Vec<Check> {
    let rewind = rewind_check(run, journal);
    run_checks_with(run, capture, journal, max_attempts, clock, rewind)
}

/// Check 5 alone: it restores the journal's history before every rewrite and does not read the
/// capture, so a caller that lent the capture's history to the run (see
/// [`crate::corpus::run_one`]) runs it before taking the history back, and never holds a
/// restored history beside it (peak memory: one history fewer at once).
pub fn rewind_check(run: &Run, journal: &Journal) -> Check {
    rewind(run, journal)
}

/// [`run_checks`] with check 5 already run by [`rewind_check`] (it takes its place in the list).
pub fn run_checks_with(
    run: &Run,
    capture: &Capture,
    journal: &Journal,
    max_attempts: u32,
    clock: &dyn Clock,
    rewind: Check,
) -> Vec<Check> {
    let ccr = Ccr::new(journal.conn(), clock);
    let all = sent_markers(run, capture);
    vec![
        fidelity(run, capture),
        convergence(run, capture, max_attempts),
        task_kept(run),
        pairing(run),
        markers(&ccr, &all),
        // 4b. Nothing lost: every input message's content is rebuilt from the final history, in
        // place or through markers (transcripts included); every marker the model was sent is
        // referenced by a journal event, so retention keeps it.
        recoverable(run, capture, journal, &ccr, &all),
        // 4c. The local mirror of provider-side context editing stubs exactly what the provider
        // cleared (the simulated server decides on its own rule).
        context_edit_mirror(run, capture),
        rewind,
        notice_once(run, capture),
        cap_tightens(run),
    ]
}

/// Check 1, convergence: the run ended within the attempt budget, and it converged: a run that
/// used its attempts up without a request accepted (`exhausted`) did not recover, and says so —
/// unless the capture expects exactly that (a regression corpus may pin an exhaustion down).
/// Before, an exhausted run passed every check, so a capture without `expect` passed CI when its
/// recovery failed (adversarial review of the checks, finding 7).
fn convergence(run: &Run, capture: &Capture, max_attempts: u32) -> Check {
    let sizes: Vec<String> = run
        .sent
        .iter()
        .map(|s| {
            format!(
                "{}B/{}t est/{}t real",
                s.bytes,
                s.estimated_tokens,
                s.real_tokens.map(|t| t.to_string()).unwrap_or_else(|| "-".into())
            )
        })
        .collect();
    let expected_exhaustion = capture.expect.as_ref().is_some_and(|e| e.outcome == Outcome::Exhausted);
    let converged = run.outcome != Outcome::Exhausted || expected_exhaustion;
    let within = run.attempts <= max_attempts;
    let why = if !within {
        " — over the attempt budget"
    } else if !converged {
        " — the recovery did not converge: no request was accepted"
    } else {
        ""
    };
    check(
        "convergence",
        within && converged,
        format!(
            "{} after {} attempt(s) (max {max_attempts}){why}; requests: {}",
            run.outcome,
            run.attempts,
            sizes.join(", ")
        ),
    )
}

/// Check 2: the task survived into the accepted request.
fn task_kept(run: &Run) -> Check {
    match run.sent.iter().rev().find(|s| s.accepted) {
        Some(s) if run.task.is_some() => check(
            "task_kept",
            s.task_kept,
            if s.task_kept {
                "the last real user request is in the accepted request".into()
            } else {
                "the last real user request is missing from the accepted request".into()
            },
        ),
        _ => check("task_kept", true, "no accepted request".into()),
    }
}

/// Check 3: pairing valid in every request salvage built. The captured request itself (attempt 0
/// as sent) is what the client sent, valid or not.
fn pairing(run: &Run) -> Check {
    let built = run.sent.iter().filter(|s| !s.as_sent).count();
    let bad: Vec<usize> =
        run.sent.iter().enumerate().filter(|(_, s)| !s.as_sent && !s.pairing_ok).map(|(i, _)| i).collect();
    check(
        "pairing",
        bad.is_empty(),
        if bad.is_empty() {
            format!("valid in all {built} request(s) salvage built")
        } else {
            format!("invalid in request(s) {bad:?}")
        },
    )
}

/// The markers salvage wrote into the requests it sent, sorted and distinct: a marker the
/// captured history already quoted (a pasted log line, a marker of another tool's archive) is the
/// user's text, not a promise of this archive.
fn sent_markers<'r>(run: &'r Run, capture: &Capture) -> Vec<&'r str> {
    let quoted: std::collections::HashSet<&str> =
        capture.history.iter().flat_map(|m| salvage_types::ccr_key::find_markers(&m.content)).collect();
    let mut all: Vec<&str> = run
        .sent
        .iter()
        .flat_map(|s| s.markers.iter().map(String::as_str))
        .filter(|k| !quoted.contains(k))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Check 4: every marker resolves, with verified bytes.
fn markers(ccr: &Ccr<'_>, all: &[&str]) -> Check {
    let mut missing = Vec::new();
    for k in all {
        match ccr.get(k) {
            Ok(bytes) if CcrKey::of(&bytes).short() == *k => {}
            Ok(_) => missing.push(format!("{k} (bytes do not hash to the key)")),
            Err(e) => missing.push(format!("{k} ({e})")),
        }
    }
    check(
        "markers",
        missing.is_empty(),
        if missing.is_empty() {
            format!("{} marker(s) resolve", all.len())
        } else {
            format!("unresolved: {}", missing.join(", "))
        },
    )
}

/// Check 5: rewind accounting from the journal.
fn rewind(run: &Run, journal: &Journal) -> Check {
    let mut problems = Vec::new();
    for (seq, before) in &run.rewrites {
        let Some(prev) = seq.checked_sub(1) else {
            problems.push(format!("rewrite recorded at event {seq}, which has no event before it"));
            continue;
        };
        match journal.view_at(&run.session, prev) {
            Ok(v) if &crate::driver::history_digest(&v.history) == before => {}
            Ok(_) => problems.push(format!("restore before event {seq} differs from the driver's copy")),
            Err(e) => problems.push(format!("restore before event {seq}: {e}")),
        }
    }
    for seq in &run.skipped_compactions {
        let Some(prev) = seq.checked_sub(1) else {
            problems
                .push(format!("skipped compaction recorded at event {seq}, which has no event before it"));
            continue;
        };
        // A state that cannot be read is a failure: the accounting cannot be verified.
        // One restored state at a time: only the lengths of their undo stacks are compared.
        let undo_len = |at: u64| journal.state_at(&run.session, at).map(|s| s.undo.len());
        match (undo_len(prev), undo_len(*seq)) {
            (Ok(a), Ok(b)) => {
                if a != b {
                    problems.push(format!("skipped compaction {seq} left an undo entry"));
                }
            }
            (Err(e), _) => problems.push(format!("skipped compaction {seq}: state before it: {e}")),
            (_, Err(e)) => problems.push(format!("skipped compaction {seq}: state at it: {e}")),
        }
    }
    match journal.head(&run.session) {
        Ok(v) => {
            if v.history != run.history {
                problems.push("the journal's final history differs from the driver's".into());
            }
            let c = &run.compaction;
            if (v.state.compactions, v.state.level3, &v.state.summarizer)
                != (c.compactions, c.level3, &c.cost)
            {
                problems.push(format!(
                    "counters from events ({} compactions, {} level 3, {} summarizer calls) differ from the run's ({}, {}, {})",
                    v.state.compactions, v.state.level3, v.state.summarizer.calls, c.compactions, c.level3, c.cost.calls
                ));
            }
        }
        Err(e) => problems.push(format!("head: {e}")),
    }
    check(
        "rewind",
        problems.is_empty(),
        if problems.is_empty() {
            format!("{} rewrite(s) restore exactly; counters match", run.rewrites.len())
        } else {
            problems.join("; ")
        },
    )
}

/// Check 6a: the payload notice at most once.
/// Check 6a: the payload notice is in the session at most once: in the final history, and over
/// the session — a notice the input already held (injected in an earlier turn) and one injected by
/// this run are two, even when a rung dropped the first into a transcript (adversarial review of
/// the checks, finding 3).
fn notice_once(run: &Run, capture: &Capture) -> Check {
    let count = |h: &[salvage_types::Message]| {
        h.iter()
            .filter(|m| m.role == salvage_types::Role::User && m.content.starts_with(NOTICE_MARKER))
            .count()
    };
    let notices = count(&run.history);
    let earlier = count(&capture.history);
    let ok = notices <= 1 && run.notices <= 1 && (earlier == 0 || run.notices == 0);
    check(
        "notice_once",
        ok,
        format!(
            "{notices} payload notice(s) in the history; {earlier} in the input, {} injected by this run",
            run.notices
        ),
    )
}

/// Check 6b: the cap only tightens.
fn cap_tightens(run: &Run) -> Check {
    let tightening = run.caps.iter().zip(run.caps.iter().skip(1)).all(|(earlier, later)| later <= earlier);
    check("cap_tightens", tightening, format!("caps {:?}", run.caps))
}

/// Check 4c: the client stubbed exactly the tool results the provider cleared during this run.
/// Stubs the input already carried (a session exported from an earlier run, replayed again) are
/// neither the provider's nor the client's doing here: they are left out of both sides (the
/// simulated provider does not clear a result already stubbed).
fn context_edit_mirror(run: &Run, capture: &Capture) -> Check {
    let stubbed_ids = |h: &[salvage_types::Message]| -> Vec<String> {
        h.iter()
            .filter(|m| m.role == salvage_types::Role::Tool && m.content.starts_with(PROVIDER_STUB))
            .filter_map(|m| m.tool_call_id.clone())
            .collect()
    };
    // Ids compared as multisets (a reused id stubbed twice counts twice), and the provider's as
    // the history names them: the pairing repair sends a reused id as `ID~N` (review of the cut
    // rule, finding 5).
    let mut stubbed = stubbed_ids(&run.history);
    for id in stubbed_ids(&capture.history) {
        if let Some(at) = stubbed.iter().position(|s| *s == id) {
            stubbed.swap_remove(at);
        }
    }
    let mut cleared: Vec<String> = run.provider_cleared.iter().map(|id| as_named(id).to_string()).collect();
    stubbed.sort();
    cleared.sort();
    let ok = stubbed == cleared;
    check(
        "context_edit",
        ok,
        if ok {
            format!("{} tool use(s) cleared by the provider, the same mirrored locally", cleared.len())
        } else {
            format!("the provider cleared {cleared:?} but the client stubbed {stubbed:?}")
        },
    )
}

/// A call id as the history names it: the pairing repair sends the n-th reuse of an id as
/// `ID~N`.
fn as_named(id: &str) -> &str {
    match id.rsplit_once('~') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => id,
    }
}

/// The start of the stub the client writes for a tool result the provider cleared.
const PROVIDER_STUB: &str = "[Tool result cleared by provider context editing";

fn recoverable(run: &Run, capture: &Capture, journal: &Journal, ccr: &Ccr<'_>, sent: &[&str]) -> Check {
    let lookup = |k: &str| ccr.get(k).ok();
    let lost = salvage_recovery::recoverable::lost(&capture.history, &run.history, &lookup);
    let mut problems: Vec<String> = lost
        .iter()
        .take(5)
        .map(|l| match &l.call {
            Some(call) => format!(
                "input message {} ({}): tool call {call} ({} B of arguments) cannot be rebuilt",
                l.index, l.role, l.bytes
            ),
            None => format!("input message {} ({}, {} B) cannot be rebuilt", l.index, l.role, l.bytes),
        })
        .collect();
    let more = lost.len().saturating_sub(5);
    if more > 0 {
        problems.push(format!("and {more} more"));
    }
    match journal.referenced_blobs(&run.session) {
        Ok(refs) => {
            // Each reference's short form once, not once per marker sent (that was quadratic in
            // the archive's size: thousands of archived results, thousands of markers).
            let shorts: std::collections::HashSet<String> = refs.iter().map(|r| r.short()).collect();
            let unreferenced: Vec<&&str> = sent.iter().filter(|k| !shorts.contains(**k)).collect();
            if !unreferenced.is_empty() {
                problems.push(format!(
                    "marker(s) sent to the model but referenced by no event: {}",
                    unreferenced.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Err(e) => problems.push(format!("cannot read the session's references: {e}")),
    }
    check(
        "recoverable",
        problems.is_empty(),
        if problems.is_empty() {
            format!(
                "all {} input message(s) rebuild from the final history and the archive",
                capture.history.len()
            )
        } else {
            problems.join("; ")
        },
    )
}

/// Compares the run with `expect`: `(met, what differs)`. `expect.events` are counted in the
/// session's journal.
pub fn compare(expect: &Expect, run: &Run, journal: &Journal) -> (bool, Vec<String>) {
    let mut diffs = if expect.events.is_empty() { Vec::new() } else { event_diffs(expect, run, journal) };
    if expect.outcome != run.outcome {
        diffs.push(format!("outcome: expected {}, got {}", expect.outcome, run.outcome));
    }
    if let Some(m) = expect.max_attempts {
        if run.attempts > m {
            diffs.push(format!("attempts: expected at most {m}, used {}", run.attempts));
        }
    }
    if let Some(l) = expect.level {
        if run.rung != Some(l) {
            diffs.push(format!(
                "level: expected rung {l}, got {}",
                run.rung.map(|r| format!("rung {r}")).unwrap_or_else(|| "no rung".into())
            ));
        }
    }
    if let Some(n) = expect.notice_injected {
        if n != (run.notices > 0) {
            diffs.push(format!("notice_injected: expected {n}"));
        }
    }
    if let Some(c) = expect.cap_learned_bytes {
        if run.caps.last() != Some(&c) {
            diffs.push(format!(
                "cap_learned_bytes: expected {c}, got {}",
                run.caps.last().map(|x| x.to_string()).unwrap_or_else(|| "none".into())
            ));
        }
    }
    (diffs.is_empty(), diffs)
}

/// What differs from `expect.events`, counted in the session's journal. A journal or an event
/// that cannot be read is a difference: the count would be wrong.
fn event_diffs(expect: &Expect, run: &Run, journal: &Journal) -> Vec<String> {
    let events = match journal.events(&run.session, 0, usize::MAX) {
        Ok(events) => events,
        Err(e) => return vec![format!("events: cannot read the journal: {e}")],
    };
    let mut diffs = Vec::new();
    let mut bodies: Vec<(String, serde_json::Value)> = Vec::with_capacity(events.len());
    for e in &events {
        match serde_json::to_value(&e.body) {
            Ok(b) => bodies.push((e.kind.clone(), b)),
            Err(err) => diffs.push(format!("events: cannot read event {}: {err}", e.seq)),
        }
    }
    for want in &expect.events {
        if !salvage_types::event::EventBody::KINDS.contains(&want.kind.as_str()) {
            diffs.push(format!("events: unknown kind {:?}", want.kind));
            continue;
        }
        let n = bodies
            .iter()
            .filter(|(k, b)| *k == want.kind && want.fields.iter().all(|(f, v)| b.get(f) == Some(v)))
            .count() as u64;
        if !want.holds(n) {
            diffs.push(format!("events: expected {}, the journal has {n}", want.describe()));
        }
    }
    diffs
}

/// The expectation a run would bless.
pub fn observed(run: &Run) -> Expect {
    Expect {
        outcome: run.outcome,
        max_attempts: Some(run.attempts),
        level: run.rung,
        notice_injected: Some(run.notices > 0),
        cap_learned_bytes: if run.outcome == Outcome::NoFailure { None } else { run.caps.last().copied() },
        events: Vec::new(),
    }
}
