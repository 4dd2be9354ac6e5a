//! The turn engine on hostile histories and settings (issue #12, the generators of
//! `hostile_stages.rs`) against an upstream that rejects: the turn ends, nothing is lost, each
//! request keeps the task and (once recovering) a valid pairing, the same history is never sent
//! twice in a row, and nothing follows a skipped rung 3.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{bytes, count, engine_io, history, limit, nothing_lost, seeded, task_of, turn_input, turns};
use proptest::prelude::*;
use salvage_recovery::archive::{Archive, MemoryArchive};
use salvage_recovery::compaction::NoHooks;
use salvage_recovery::engine::{Action, Answer, Turn, TurnInput, TurnMode};
use salvage_recovery::pairing;
use salvage_recovery::summarizer::Builtin;
use salvage_recovery::task::task_survives;
use salvage_types::capture::{Failure, Outcome, StopReason};
use salvage_types::event::{EventBody, StepOutcome};
use salvage_types::message::Message;
use salvage_types::{CcrKey, Config};
use std::cell::RefCell;
use std::rc::Rc;
/// One archive behind both the engine's `archive` and its `lookup`.
#[derive(Clone)]
struct Shared(Rc<RefCell<MemoryArchive>>);
impl Archive for Shared {
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, salvage_recovery::archive::ArchiveError> {
        self.0.borrow_mut().put(bytes)
    }
    fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.0.borrow().get(short)
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    history: Vec<Message>,
    fresh: bool,
    rejections: usize,
    report_size: bool,
    status: u16,
    attempts: u32,
    keep: usize,
    per_result: usize,
    per_turn: usize,
    window: u64,
    cap: Option<u64>,
    ages: (u32, u32),
    /// The first accepted answers stop at the output limit (escalation appends and resends).
    cut_off: usize,
}

prop_compose! {
    fn scenario()(
        history in history(),
        fresh in any::<bool>(),
        rejections in 0usize..6,
        report_size in any::<bool>(),
        status in prop_oneof![Just(413u16), Just(400), Just(403)],
        attempts in prop_oneof![Just(0u32), Just(1), 2u32..6, Just(50), Just(1000)],
        keep in count(),
        (per_result, per_turn) in (limit(), limit()),
        window in prop_oneof![Just(0u64), Just(1), 500u64..50_000, Just(128_000), Just(u64::MAX / 8)],
        cap in prop::option::of(bytes()),
        (a, b, cut_off) in (turns(), turns(), 0usize..4),
    ) -> Scenario {
        let ages = (a, b);
        Scenario { history, fresh, rejections, report_size, status, attempts, keep, per_result, per_turn, window, cap, ages, cut_off }
    }
}

fn drive(s: &Scenario) -> Result<(), TestCaseError> {
    let config = Config {
        max_recovery_attempts: s.attempts,
        emergency_keep_messages: s.keep,
        tool_result_max_chars: s.per_result,
        tool_result_budget_chars: s.per_turn,
        microcompact_truncate_turns: s.ages.0,
        microcompact_summarize_turns: s.ages.1,
        ..Config::default()
    };
    let model = salvage_recovery::budget::ModelInfo {
        context_window: s.window,
        max_output: 8_192,
        default_output: 4_096,
    };
    let input = TurnInput {
        config,
        model,
        session: salvage_recovery::session::SessionState::with_cap(s.cap),
        mode: if s.fresh { TurnMode::Fresh } else { TurnMode::AsSent },
        ..turn_input(s.history.clone())
    };
    let shared = Shared(Rc::new(RefCell::new(seeded())));
    let reader = shared.clone();
    let lookup = move |k: &str| reader.0.borrow().get(k);
    let mut archive = shared.clone();
    let (mut summarizer, mut hooks) = (Builtin, NoHooks);
    let mut io = engine_io(&mut archive, &lookup, (&mut summarizer, &mut hooks));
    let task = task_of(&s.history);
    let mut turn = Turn::new(input);
    let mut rejected = 0;
    let mut accepted = 0;
    let mut previous: Option<Vec<Message>> = None;
    let mut done = false;
    // A skipped rung 3 (the last rung) ends the climb: nothing after it can change the request.
    let mut rung3_skipped = 0;
    for _ in 0..10_000 {
        match turn.next(&mut io).unwrap() {
            Action::Record(r) => {
                // Only the end of the run may follow a skipped rung 3.
                prop_assert!(
                    rung3_skipped == 0 || matches!(r.event, EventBody::RunEnded { .. }),
                    "the turn goes on after a skipped rung 3: {:?}",
                    r.event
                );
                if matches!(
                    r.event,
                    EventBody::RecoveryAttempt { rung: 3, outcome: StepOutcome::Skipped, .. }
                ) {
                    rung3_skipped += 1;
                }
            }
            Action::Say(_) => {}
            Action::Send(req) => {
                prop_assert!(rung3_skipped == 0, "attempt {} is sent after a skipped rung 3", req.attempt);
                if let Some(p) = &previous {
                    prop_assert!(
                        p != &req.history,
                        "attempt {} sends the previous history again",
                        req.attempt
                    );
                }
                if s.fresh || req.attempt > 0 {
                    prop_assert!(pairing::is_valid(&req.history), "pairing of attempt {}", req.attempt);
                }
                prop_assert!(task_survives(&task, &req.history), "task of attempt {}", req.attempt);
                {
                    // The live history loses nothing. (The request itself may leave out what
                    // its pairing repair drops, such as orphans: the history keeps them.)
                    let mem = shared.0.borrow();
                    nothing_lost(&s.history, turn.history(), &mem)?;
                }
                previous = Some(req.history.clone());
                let answer = if rejected < s.rejections {
                    rejected += 1;
                    Answer::Rejected {
                        failure: Failure {
                            status: Some(s.status),
                            message: "Request Entity Too Large: prompt is too long".into(),
                            transport: None,
                            rejected_request_bytes: s.report_size.then_some(req.bytes),
                        },
                        counted_tokens: None,
                    }
                } else {
                    accepted += 1;
                    Answer::Accepted {
                        stop_reason: if accepted <= s.cut_off {
                            StopReason::MaxTokens
                        } else {
                            StopReason::EndTurn
                        },
                        content: "done 🙂".into(),
                        input_tokens: req.estimated_tokens,
                        cleared_tool_uses: 0,
                        cleared_tokens: 0,
                    }
                };
                turn.answer(answer).unwrap();
            }
            Action::Done(_) => {
                done = true;
                break;
            }
        }
    }
    prop_assert!(done, "the turn ends");
    prop_assert!(turn.attempts() <= s.attempts);
    let mem = shared.0.borrow();
    nothing_lost(&s.history, turn.history(), &mem)?;
    Ok(())
}

/// `testdata/corpus/no-op-rungs-are-not-sent`: a history no rung can shrink, an upstream that
/// rejects everything and 1000 attempts. Each rung is a no-op once; after rung 3 (the last)
/// nothing can change the request, so the turn ends instead of counting through 997 more
/// skipped rung-3 attempts.
#[test]
fn a_no_op_rung_3_ends_the_climb_whatever_the_attempts_left() {
    for attempts in [3u32, 4, 1000, u32::MAX] {
        let input = TurnInput {
            config: Config { max_recovery_attempts: attempts, ..Config::default() },
            model: salvage_recovery::budget::ModelInfo {
                context_window: 4_000_000,
                max_output: 8_192,
                default_output: 4_096,
            },
            ..turn_input(vec![
                Message::system("You are a coding agent."),
                Message::user("Summarize the failing test in crates/store in one line."),
            ])
        };
        let mut archive = MemoryArchive::new();
        let lookup = |_: &str| None;
        let (mut summarizer, mut hooks) = (Builtin, NoHooks);
        let mut io = engine_io(&mut archive, &lookup, (&mut summarizer, &mut hooks));
        let mut turn = Turn::new(input);
        let (mut sent, mut attempts_seen, mut outcome) = (0, Vec::new(), None);
        for _ in 0..10_000 {
            match turn.next(&mut io).unwrap() {
                Action::Record(r) => {
                    if let EventBody::RecoveryAttempt { rung, outcome, .. } = r.event {
                        attempts_seen.push((rung, outcome));
                    }
                }
                Action::Say(_) => {}
                Action::Send(_) => {
                    sent += 1;
                    turn.answer(Answer::Rejected {
                        failure: Failure {
                            status: Some(400),
                            message: "prompt is too long: 300000 tokens > 200000 maximum".into(),
                            transport: None,
                            rejected_request_bytes: None,
                        },
                        counted_tokens: None,
                    })
                    .unwrap();
                }
                Action::Done(o) => {
                    outcome = Some(o);
                    break;
                }
            }
        }
        assert_eq!(outcome, Some(Outcome::Exhausted), "attempts = {attempts}");
        assert_eq!(sent, 1, "only the captured request is sent (attempts = {attempts})");
        assert_eq!(
            attempts_seen,
            vec![(1, StepOutcome::Skipped), (2, StepOutcome::Skipped), (3, StepOutcome::Skipped)],
            "one skipped attempt per rung (attempts = {attempts})"
        );
        assert_eq!(turn.attempts(), 3, "attempts = {attempts}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 250, ..ProptestConfig::default() })]

    #[test]
    fn the_turn_engine_against_a_rejecting_upstream(s in scenario()) {
        drive(&s)?;
    }
}
