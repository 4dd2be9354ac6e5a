//! A session's derived outcome tells a run that ended from one cut short: a run that stopped
//! after a rejection without its `run_ended` (a killed process, a full disk) reads `incomplete`,
//! never `exhausted`, while a session of an earlier version (no `run_ended` at all) reads as it
//! always did.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::lookup::{outcome_of, INCOMPLETE};
use salvage_journal::{Journal, NewEvent, StoredEvent};
use salvage_types::capture::Outcome;
use salvage_types::event::EventBody;
use salvage_types::ErrorClass;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap()).unwrap()
}

fn sent(attempt: u32, accepted: bool) -> EventBody {
    EventBody::RequestSent {
        attempt,
        bytes: 1000,
        estimated_tokens: 250,
        real_tokens: None,
        history_digest: "d74981efa70a0c88".into(),
        accepted,
    }
}

fn rejected_413() -> EventBody {
    EventBody::ProviderError {
        status: Some(413),
        message: "Request Entity Too Large".into(),
        transport: None,
        rejected_bytes: None,
        class: ErrorClass::PayloadTooLarge,
        reason: "413".into(),
    }
}

/// A journal holding a session that sent attempt 0, was rejected, and sent attempt 1, rejected
/// too: where a run stops when its process is killed before it decides.
fn cut_short() -> Journal {
    let mut j = Journal::in_memory().unwrap();
    j.start_session("s", "", NewEvent::new("s0", ts(0), EventBody::session_started(None, None))).unwrap();
    let body = [sent(0, false), rejected_413(), sent(1, false), rejected_413()];
    let events =
        body.into_iter().enumerate().map(|(i, b)| NewEvent::new(format!("s{}", i + 1), ts(i as u64 + 1), b));
    j.append("s", None, events.collect()).unwrap();
    j
}

#[test]
fn a_run_cut_short_after_a_rejection_is_incomplete_not_exhausted() {
    let j = cut_short();
    assert_eq!(j.session_outcome("s").unwrap(), Some(INCOMPLETE));
}

#[test]
fn a_session_reads_as_its_last_run_ended() {
    let end = |o| EventBody::RunEnded { outcome: o };
    let mut j = cut_short();
    j.append("s", None, vec![NewEvent::new("end", ts(9), end(Outcome::Exhausted))]).unwrap();
    assert_eq!(j.session_outcome("s").unwrap(), Some("exhausted"));
    // A second run that recovers: the session reads as that run ended.
    let run = vec![
        NewEvent::new("r0", ts(10), sent(0, false)),
        NewEvent::new("r1", ts(11), sent(1, true)),
        NewEvent::new("r2", ts(12), end(Outcome::Recovered)),
    ];
    j.append("s", None, run).unwrap();
    assert_eq!(j.session_outcome("s").unwrap(), Some("recovered"));
    // Review finding 1: a third run that fails for good is not hidden by the earlier recovery.
    let run = vec![
        NewEvent::new("t0", ts(13), sent(0, false)),
        NewEvent::new("t1", ts(14), end(Outcome::NotRecoverable)),
    ];
    j.append("s", None, run).unwrap();
    assert_eq!(j.session_outcome("s").unwrap(), Some("not_recoverable"));
}

/// The outcome `run_ended` records is the run's, even where the requests alone would say
/// otherwise (review finding 1: an answer accepted at the output limit, its continuation
/// rejected until the attempts ran out, read `recovered`).
#[test]
fn the_outcome_run_ended_records_is_the_runs() {
    let mut j = cut_short();
    let run = vec![
        NewEvent::new("a", ts(9), sent(2, true)),
        NewEvent::new("b", ts(10), sent(3, false)),
        NewEvent::new("c", ts(11), EventBody::RunEnded { outcome: Outcome::Exhausted }),
    ];
    j.append("s", None, run).unwrap();
    assert_eq!(j.session_outcome("s").unwrap(), Some("exhausted"));
}

/// Review finding 7: an accepted answer does not end a run (one cut at the output limit is
/// escalated), so a run killed after it is incomplete too, not `no_failure`.
#[test]
fn a_run_cut_short_after_an_accepted_answer_is_incomplete() {
    let mut j = Journal::in_memory().unwrap();
    j.start_session("s", "", NewEvent::new("s0", ts(0), EventBody::session_started(None, None))).unwrap();
    j.append("s", None, vec![NewEvent::new("s1", ts(1), sent(0, true))]).unwrap();
    assert_eq!(j.session_outcome("s").unwrap(), Some(INCOMPLETE));
}

/// A writer of whole turns (the proxy) closes each turn's run with the outcome its requests give.
#[test]
fn a_whole_turn_is_closed_with_the_outcome_of_its_requests() {
    use salvage_journal::lookup::unended_run;
    let turn = [sent(0, false), rejected_413(), sent(1, true)];
    assert_eq!(unended_run(&turn), Some(Outcome::Recovered));
    assert_eq!(unended_run(&[sent(0, true)]), Some(Outcome::NoFailure));
    assert_eq!(unended_run(&[sent(0, false), rejected_413()]), Some(Outcome::Exhausted));
    let closed = [sent(0, false), EventBody::RunEnded { outcome: Outcome::Exhausted }];
    assert_eq!(unended_run(&closed), None);
    assert_eq!(unended_run(&[EventBody::MessageAppended { count: 1 }]), None);
}

/// The sessions of a journal written before `run_ended` existed (their `session_started` is of
/// version 3) have none: their outcome stays the one their requests give.
#[test]
fn a_session_of_an_earlier_version_reads_as_before() {
    let j = cut_short();
    let mut events: Vec<StoredEvent> = j.events("s", 0, usize::MAX).unwrap();
    assert_eq!(outcome_of(&events), Some(INCOMPLETE));
    let start = events.iter_mut().find(|e| e.kind == "session_started").unwrap();
    assert_eq!(start.kind_version, 4, "the stored version is read");
    start.kind_version = 3;
    assert_eq!(outcome_of(&events), Some("exhausted"));
}
