//! The turn driver: the order of `behavior.md` section 11 for a capture's failing turn, using
//! the recovery core and the compaction pipeline, with every step journaled.

use crate::upstream::{Answer, Rejection, Simulated};
use chrono::{DateTime, Duration, Utc};
use salvage_ccr::Ccr;
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::budget::{budget, model_info, needs_compaction, Calibration, Surface, CHARS_PER_TOKEN};
use salvage_recovery::classify::{classify, FailureInput};
use salvage_recovery::compaction::{self, CompactionState, Hooks, Io, NoMemory, Plan};
use salvage_recovery::escalation::{Escalation, CONTINUATION};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::payload::{self, FloorVerdict};
use salvage_recovery::session::SessionState;
use salvage_recovery::summarizer::{Cancel, Summarizer};
use salvage_recovery::tool_budget::{self, Limits};
use salvage_recovery::{context_edit, dedup, microcompact, pairing, skills};
use salvage_types::capture::{Capture, Outcome};
use salvage_types::event::{EventBody, StepOutcome};
use salvage_types::{history_weight, CcrKey, Config, ErrorClass, Message, RecoveryPath, Role};

/// Why a replay could not run (the capture itself, or the journal).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Archiving failed.
    #[error("{0}")]
    Archive(String),
}

/// One request the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// Attempt number (0 first).
    pub attempt: u32,
    /// Body bytes.
    pub bytes: u64,
    /// The client's token estimate.
    pub estimated_tokens: u64,
    /// The provider's count (real BPE), when it got that far.
    pub real_tokens: Option<u64>,
    /// Accepted.
    pub accepted: bool,
    /// Pairing was valid in the request.
    pub pairing_ok: bool,
    /// The canonical markers in the request (short keys, distinct).
    pub markers: Vec<String>,
    /// The task (the input's last real user request) was in the request.
    pub task_kept: bool,
}

/// Everything a run observed; the checks read it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The journal session.
    pub session: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Recovery attempts after the first rejection.
    pub attempts: u32,
    /// The rung of the last applied attempt.
    pub rung: Option<u8>,
    /// Every request.
    pub sent: Vec<Sent>,
    /// The class of the first rejection, and whether the simulation produced it.
    pub first_class: Option<(ErrorClass, bool)>,
    /// The class of the captured failure.
    pub captured_class: Option<ErrorClass>,
    /// `(event seq, BLAKE3 of the JSON of the history before it)` for every rewrite.
    pub rewrites: Vec<(u64, [u8; 32])>,
    /// Seqs of compactions that were skipped.
    pub skipped_compactions: Vec<u64>,
    /// The compaction state the run kept.
    pub compaction: CompactionState,
    /// Cap values in order.
    pub caps: Vec<u64>,
    /// Notices injected.
    pub notices: u32,
    /// The final history.
    pub history: Vec<Message>,
    /// Messages for people, in order.
    pub messages: Vec<String>,
    /// The task of the input.
    pub task: Option<Message>,
}

/// Options of a run.
pub struct Options<'a> {
    /// The summarizer for level 2.
    pub summarizer: &'a mut dyn Summarizer,
    /// Hooks.
    pub hooks: &'a mut dyn Hooks,
    /// The first event's time; later events follow it by a millisecond each.
    pub start: DateTime<Utc>,
    /// The session id to journal under.
    pub session: String,
    /// Messages rung 3 keeps: [`salvage_recovery::ladder::RUNG3_KEEP`] except when injecting a
    /// fault to show that the checks catch a broken ladder.
    pub rung3_keep: usize,
}

struct Driver<'j> {
    journal: &'j mut Journal,
    session: String,
    start: DateTime<Utc>,
    n: i64,
    version: u64,
    mem: MemoryArchive,
    flushed: std::collections::HashSet<CcrKey>,
    run: Run,
}

impl Driver<'_> {
    fn ts(&mut self) -> DateTime<Utc> {
        self.n += 1;
        self.start + Duration::milliseconds(self.n)
    }

    /// Moves blobs archived in memory into CCR (the journal's file), returning their keys.
    fn flush(&mut self, keys: &[CcrKey]) -> Result<Vec<CcrKey>, ReplayError> {
        // The archive's times are wall-clock times of the write, not the replay's injected
        // clock: retention (`ccr gc` in another process) measures each blob's grace period from
        // them, so a blob written late in a long replay is not already past its grace.
        let clock = salvage_ccr::SystemClock;
        let ccr = Ccr::new(self.journal.conn(), &clock);
        let mut out = Vec::new();
        for k in keys {
            if self.flushed.contains(k) {
                out.push(*k);
                continue;
            }
            let bytes = self
                .mem
                .get(&k.short())
                .ok_or_else(|| ReplayError::Archive(format!("blob {} vanished", k.short())))?;
            ccr.put(&bytes).map_err(|e| ReplayError::Archive(e.to_string()))?;
            self.flushed.insert(*k);
            out.push(*k);
        }
        Ok(out)
    }

    fn log(
        &mut self,
        body: EventBody,
        change: HistoryChange,
        blobs: Vec<CcrKey>,
    ) -> Result<u64, ReplayError> {
        let blobs = self.flush(&blobs)?;
        let id = format!("{}#{}", self.session, self.n + 1);
        let ts = self.ts();
        let e = NewEvent::new(id, ts, body).with_history(change).with_blobs(blobs);
        let a = self.journal.append(&self.session, Some(self.version), vec![e])?;
        self.version = a[0].seq;
        Ok(a[0].seq)
    }

    /// Journals a rewrite of the live history, remembering the history before it.
    fn rewrite(&mut self, body: EventBody, new: Vec<Message>, blobs: Vec<CcrKey>) -> Result<(), ReplayError> {
        let changed = new != self.run.history;
        let before = history_digest(&self.run.history);
        self.run.history = new.clone();
        let seq = self.log(body, HistoryChange::Set(new), blobs)?;
        if changed {
            self.run.rewrites.push((seq, before));
        }
        Ok(())
    }

    fn append(&mut self, body: EventBody, msgs: Vec<Message>) -> Result<(), ReplayError> {
        self.run.history.extend(msgs.iter().cloned());
        self.log(body, HistoryChange::Append(msgs), Vec::new())?;
        Ok(())
    }
}

fn is_anthropic(capture: &Capture) -> bool {
    matches!(capture.provider.as_deref(), Some("anthropic" | "bedrock"))
        || capture.model.as_deref().is_some_and(|m| m.contains("claude"))
}

/// The request body bytes a client would send for a history.
pub fn body_bytes(capture: &Capture, history: &[Message], max_tokens: u64, edits: bool) -> u64 {
    let model = capture.model.as_deref().unwrap_or("model");
    let mut body = if is_anthropic(capture) {
        salvage_wire::anthropic::request_body(history, model, max_tokens)
    } else {
        salvage_wire::openai::request_body(history, model, Some(max_tokens))
    };
    if edits {
        if let Some(o) = body.as_object_mut() {
            let (_, field) = context_edit::request_fields(&context_edit::EditSettings::default());
            o.insert("context_management".into(), field);
        }
    }
    salvage_types::weight::compact_json_len(&body)
}

/// BLAKE3 of a history's JSON: the rewind check compares restores by it, byte for byte.
pub fn history_digest(h: &[Message]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    let _ = serde_json::to_writer(&mut hasher, h);
    *hasher.finalize().as_bytes()
}

fn failure_is_empty(c: &Capture) -> bool {
    c.failure.status.is_none() && c.failure.message.trim().is_empty() && c.failure.transport.is_none()
}

fn digest(h: &[Message]) -> String {
    CcrKey::of(&serde_json::to_vec(h).unwrap_or_default()).short()
}

/// Replays one capture, journaling every step under `opts.session`.
pub fn replay(capture: &Capture, journal: &mut Journal, opts: Options<'_>) -> Result<Run, ReplayError> {
    let config = Config::from_env(&capture.settings);
    let task = salvage_recovery::task::task_index(&capture.history).map(|i| capture.history[i].clone());
    let captured_class = (!failure_is_empty(capture)).then(|| {
        classify(&FailureInput {
            status: capture.failure.status,
            message: capture.failure.message.clone(),
            transport: capture.failure.transport.clone(),
            history_bytes: history_weight(&capture.history),
            rejected_request_bytes: capture.failure.rejected_request_bytes,
        })
        .class
    });
    let mut d = Driver {
        journal,
        session: opts.session.clone(),
        start: opts.start,
        n: 0,
        version: 0,
        mem: MemoryArchive::new(),
        flushed: Default::default(),
        run: Run {
            session: opts.session.clone(),
            outcome: Outcome::Exhausted,
            attempts: 0,
            rung: None,
            sent: Vec::new(),
            first_class: None,
            captured_class,
            rewrites: Vec::new(),
            skipped_compactions: Vec::new(),
            compaction: CompactionState::default(),
            caps: Vec::new(),
            notices: 0,
            // Filled once the first event is journaled, so its copy of the history and this one
            // are not both alive while the journal serializes it.
            history: Vec::new(),
            messages: Vec::new(),
            task,
        },
    };
    let info = model_info(capture.model.as_deref(), config.context_window);
    let mut sim = Simulated::new(&capture.upstream);
    let edits_on = capture.upstream.context_editing.is_some() && is_anthropic(capture);
    let surface = capture
        .client
        .as_ref()
        .and_then(|c| c.surface.as_deref())
        .map(Surface::parse)
        .unwrap_or(Surface::Chat);
    let mut session = SessionState::with_cap(config.max_payload);
    if let Some(c) = config.max_payload {
        d.run.caps.push(c);
    }
    let ts = d.ts();
    let first = NewEvent::new(
        format!("{}#0", d.session),
        ts,
        EventBody::SessionStarted {
            provider: capture.provider.clone(),
            model: capture.model.clone(),
            context_window: Some(info.context_window),
            settings: capture.settings.clone(),
            cap: config.max_payload,
        },
    )
    .with_history(HistoryChange::Append(capture.history.clone()));
    let title = capture.title.clone().unwrap_or_else(|| capture.id.clone());
    d.version = d.journal.start_session_from(&d.session, &title, Some(&capture.id), first)?.seq;
    d.run.history = capture.history.clone();

    let limits =
        Limits { per_result: config.tool_result_max_chars, per_turn: config.tool_result_budget_chars };
    let mut calibration = Calibration::default();
    let mut escalation = Escalation::default();
    let mut max_tokens = info.default_output;
    let output_cap = sim.max_output_tokens().unwrap_or(info.max_output);
    let mut attempt: u32 = 0;
    let mut rejected_once = false;
    let cancel = Cancel::new();
    // A capture with a recorded failure holds the request as it was sent: attempt 0 sends it as
    // is (steps 4-5 only). A capture with no failure holds a session state: its turn starts with
    // the per-turn passes, pre-flight and compaction (steps 1-3).
    let fresh_turn = failure_is_empty(capture);
    let mut ratio = surface.ratio();
    for _guard in 0..64 {
        if fresh_turn && d.run.sent.is_empty() {
            // 1. Per-turn passes with no model.
            let turn = d.run.history.iter().filter(|m| m.role == Role::Assistant).count() as u32;
            let ages = microcompact::Ages {
                truncate: config.microcompact_truncate_turns,
                summarize: config.microcompact_summarize_turns,
            };
            let snapshot = d.mem.clone();
            let lookup = |k: &str| snapshot.get(k);
            let (h, r, keys) = {
                let mut a = Archiver::new(Some(&mut d.mem as &mut dyn Archive));
                let (h, r) = microcompact::microcompact(&d.run.history, turn, ages, &mut a, &lookup)
                    .map_err(|e| ReplayError::Archive(e.0))?;
                (h, r, a.keys)
            };
            if h != d.run.history {
                d.run.messages.push(r.line());
                d.rewrite(
                    EventBody::Microcompact {
                        truncated: r.truncated,
                        summarized: r.summarized,
                        freed_bytes: r.freed_bytes,
                    },
                    h,
                    keys,
                )?;
            }
            let (h, r, keys) = {
                let mut a = Archiver::new(Some(&mut d.mem as &mut dyn Archive));
                let (h, r) = dedup::dedup(&d.run.history, &mut a).map_err(|e| ReplayError::Archive(e.0))?;
                (h, r, a.keys)
            };
            if h != d.run.history {
                d.rewrite(EventBody::Dedup { stubbed: r.stubbed, freed_bytes: r.freed_bytes }, h, keys)?;
            }
            let (h, r, keys) = {
                let mut a = Archiver::new(Some(&mut d.mem as &mut dyn Archive));
                let (h, r) = skills::age_skills(&d.run.history, config.skill_age_turns, &mut a)
                    .map_err(|e| ReplayError::Archive(e.0))?;
                (h, r, a.keys)
            };
            if h != d.run.history {
                d.rewrite(EventBody::SkillAging { collapsed: r.collapsed }, h, keys)?;
            }
            // 2. Pre-flight.
            let weight = history_weight(&d.run.history);
            let pf = payload::preflight(session.cap, weight, session.no_cap_warned);
            if pf.warn_no_cap {
                session.no_cap_warned = true;
            }
            if !pf.message.is_empty() {
                d.run.messages.push(pf.message.clone());
            }
            ratio = pf.forced_ratio.unwrap_or(surface.ratio());
            let cpt = if calibration.samples > 0 { calibration.chars_per_token } else { CHARS_PER_TOKEN };
            let budget_bytes = budget(info.context_window, ratio, cpt, session.cap);
            // 3. Compaction if needed.
            if needs_compaction(weight, budget_bytes) {
                let snapshot = d.mem.clone();
                let lookup = |k: &str| snapshot.get(k);
                let mut status = |_: compaction::Phase, _: &str| {};
                let plan = Plan {
                    budget: budget_bytes,
                    trigger: salvage_types::event::Trigger::Auto,
                    min_keep_recent: compaction::MIN_KEEP_RECENT,
                    summarizer_window_chars: usize::try_from(info.context_window.saturating_mul(4))
                        .unwrap_or(usize::MAX),
                };
                let (o, keys) = {
                    let mut io = Io {
                        archiver: Archiver::new(Some(&mut d.mem as &mut dyn Archive)),
                        lookup: &lookup,
                        summarizer: &mut *opts.summarizer,
                        hooks: &mut *opts.hooks,
                        memory: &mut NoMemory,
                        status: &mut status,
                        cancel: &cancel,
                    };
                    let o = compaction::compact(&d.run.history, &plan, &mut d.run.compaction, &mut io);
                    (o, io.archiver.keys)
                };
                let o = o.map_err(|e| ReplayError::Archive(e.to_string()))?;
                let n = o.events.len();
                for (i, e) in o.events.into_iter().enumerate() {
                    if i + 1 == n {
                        // The compaction event carries the history change.
                        let skipped =
                            matches!(e, EventBody::Compaction { outcome: StepOutcome::Skipped, .. });
                        if skipped {
                            let seq = d.log(e, HistoryChange::None, keys.clone())?;
                            d.run.skipped_compactions.push(seq);
                        } else {
                            d.rewrite(e, o.history.clone(), keys.clone())?;
                        }
                    } else {
                        d.log(e, HistoryChange::None, Vec::new())?;
                    }
                }
            }
        }
        let cpt = if calibration.samples > 0 { calibration.chars_per_token } else { CHARS_PER_TOKEN };
        // 4-5. Pairing repair and the tool-result budget on the outgoing copy.
        // A history that needs no repair is not copied for it (a copy of a 60 MB history is
        // 60 MB of peak memory).
        let repaired =
            if pairing::is_valid(&d.run.history) { None } else { Some(pairing::repair(&d.run.history).0) };
        let lim = if session.tool_budget_halved { limits.halved() } else { limits };
        let (outgoing, keys) = {
            let mut a = Archiver::new(Some(&mut d.mem as &mut dyn Archive));
            let (h, _) = tool_budget::apply(repaired.as_deref().unwrap_or(&d.run.history), lim, &mut a)
                .map_err(|e| ReplayError::Archive(e.0))?;
            (h, a.keys)
        };
        drop(repaired);
        d.flush(&keys)?;
        let bytes = body_bytes(capture, &outgoing, max_tokens, edits_on);
        // 6. Send.
        let simulated = sim.send(bytes, &outgoing);
        let estimated = calibration.tokens(history_weight(&outgoing));
        let (answer, from_sim) = match simulated {
            Answer::Accepted(_) if attempt == 0 && !rejected_once && !failure_is_empty(capture) => (
                Answer::Rejected(Rejection {
                    status: capture.failure.status,
                    message: capture.failure.message.clone(),
                    transport: capture.failure.transport.clone(),
                    rejected_bytes: capture.failure.rejected_request_bytes,
                    counted_tokens: None,
                }),
                false,
            ),
            other => (other, true),
        };
        let real_tokens = match &answer {
            Answer::Accepted(r) => Some(r.input_tokens),
            Answer::Rejected(r) => r.counted_tokens,
        };
        let accepted = matches!(answer, Answer::Accepted(_));
        d.log(
            EventBody::RequestSent {
                attempt,
                bytes,
                estimated_tokens: estimated,
                real_tokens,
                history_digest: digest(&outgoing),
                accepted,
            },
            HistoryChange::None,
            Vec::new(),
        )?;
        let mut markers: Vec<String> = Vec::new();
        for m in &outgoing {
            for k in salvage_types::ccr_key::find_markers(&m.content) {
                if !markers.iter().any(|x| x == k) {
                    markers.push(k.to_string());
                }
            }
        }
        let task_kept =
            d.run.task.as_ref().is_none_or(|t| salvage_recovery::task::task_survives(t, &outgoing));
        d.run.sent.push(Sent {
            attempt,
            bytes,
            estimated_tokens: estimated,
            real_tokens,
            accepted,
            pairing_ok: pairing::is_valid(&outgoing),
            markers,
            task_kept,
        });
        match answer {
            Answer::Rejected(r) => {
                let weight = history_weight(&d.run.history);
                let c = classify(&FailureInput {
                    status: r.status,
                    message: r.message.clone(),
                    transport: r.transport.clone(),
                    history_bytes: weight,
                    rejected_request_bytes: r.rejected_bytes,
                });
                if !rejected_once {
                    d.run.first_class = Some((c.class, from_sim));
                }
                rejected_once = true;
                d.log(
                    EventBody::ProviderError {
                        status: r.status,
                        message: r.message.clone(),
                        transport: r.transport.clone(),
                        rejected_bytes: r.rejected_bytes,
                        class: c.class,
                        reason: c.reason.clone(),
                    },
                    HistoryChange::None,
                    Vec::new(),
                )?;
                if !c.recoverable {
                    d.run.outcome = Outcome::NotRecoverable;
                    d.run.messages.push(format!(
                        "✖ Not recoverable by compaction ({}): {}",
                        c.describe(),
                        c.reason
                    ));
                    break;
                }
                if c.path == Some(RecoveryPath::Payload) {
                    let decision = payload::learn_cap(r.rejected_bytes, session.cap);
                    if decision.changed || session.cap != Some(decision.cap) {
                        d.log(
                            EventBody::CapLearned {
                                cap: decision.cap,
                                previous: decision.previous,
                                rejected: r.rejected_bytes,
                                message: decision.message.clone(),
                            },
                            HistoryChange::None,
                            Vec::new(),
                        )?;
                        d.run.messages.push(format!("ℹ {}", decision.message));
                    }
                    session.cap = Some(decision.cap);
                    d.run.caps.push(decision.cap);
                    if let Some(rej) = r.rejected_bytes {
                        let mut base: Vec<Message> =
                            d.run.history.iter().filter(|m| m.role == Role::System).cloned().collect();
                        if let Some(t) = &d.run.task {
                            base.push(t.clone());
                        }
                        let floor_bytes = body_bytes(capture, &base, max_tokens, edits_on);
                        let diag = payload::floor(floor_bytes, rej);
                        let verdict = match diag.verdict {
                            FloorVerdict::Ok => "ok",
                            FloorVerdict::Warn => "warn",
                            FloorVerdict::FailFast => "fail_fast",
                        };
                        d.log(
                            EventBody::FloorDiagnosis { verdict: verdict.into(), floor_bytes, rejected: rej },
                            HistoryChange::None,
                            Vec::new(),
                        )?;
                        if !diag.message.is_empty() {
                            d.run.messages.push(diag.message.clone());
                        }
                        if diag.verdict == FloorVerdict::FailFast {
                            d.run.outcome = Outcome::FailedFast;
                            break;
                        }
                    }
                }
                d.run
                    .messages
                    .push(format!("⚠ Recoverable failure ({}) — compacting and retrying", c.describe()));
                // Climb the ladder; a rung that changes nothing is reported as a no-op and the next
                // attempt follows at once (an identical request is never re-sent).
                let mut exhausted = false;
                loop {
                    if attempt >= config.max_recovery_attempts {
                        exhausted = true;
                        break;
                    }
                    attempt += 1;
                    d.run.attempts = attempt;
                    let rung = Rung::for_attempt(attempt);
                    if rung == Rung::Aggressive {
                        session.tool_budget_halved = true;
                    }
                    let payload_budget = budget(info.context_window, ratio, cpt, session.cap);
                    let (o, keys) = {
                        let mut ctx = RungContext {
                            archiver: Archiver::new(Some(&mut d.mem as &mut dyn Archive)),
                            keep: config.emergency_keep_messages,
                            limits,
                            payload_budget: Some(payload_budget),
                            rung3_keep: opts.rung3_keep,
                        };
                        let o = ladder::apply(rung, &d.run.history, &mut ctx)
                            .map_err(|e| ReplayError::Archive(e.0))?;
                        (o, ctx.archiver.keys)
                    };
                    let rep = &o.report;
                    let body = EventBody::RecoveryAttempt {
                        attempt,
                        rung: rep.rung,
                        outcome: if rep.no_op { StepOutcome::Skipped } else { StepOutcome::Applied },
                        before_bytes: rep.before_bytes,
                        after_bytes: rep.after_bytes,
                        before_messages: rep.before_messages as u64,
                        after_messages: rep.after_messages as u64,
                        archived: rep.archived.clone(),
                    };
                    d.run.messages.push(rep.summary());
                    if rep.no_op {
                        d.log(body, HistoryChange::None, keys)?;
                        continue;
                    }
                    d.run.rung = Some(rep.rung);
                    d.rewrite(body, o.history.clone(), keys)?;
                    if c.path == Some(RecoveryPath::Payload)
                        && !session.notice_injected
                        && !payload::notice_already_injected(&d.run.history)
                    {
                        session.notice_injected = true;
                        d.run.notices += 1;
                        d.append(EventBody::NoticeInjected {}, vec![payload::notice_message()])?;
                    }
                    break;
                }
                if exhausted {
                    d.run.outcome = Outcome::Exhausted;
                    d.run.messages.push(format!("✖ Recovery attempts exhausted ({attempt})"));
                    break;
                }
            }
            Answer::Accepted(reply) => {
                if reply.cleared_tool_uses > 0 {
                    let (h, r, keys) = {
                        let mut a = Archiver::new(Some(&mut d.mem as &mut dyn Archive));
                        let (h, r) = context_edit::mirror(&d.run.history, reply.cleared_tool_uses, &mut a)
                            .map_err(|e| ReplayError::Archive(e.0))?;
                        (h, r, a.keys)
                    };
                    d.rewrite(
                        EventBody::ContextEdit {
                            cleared_tool_uses: reply.cleared_tool_uses,
                            cleared_tokens: reply.cleared_tokens,
                            stubs: r.stubs,
                        },
                        h,
                        keys,
                    )?;
                    d.run.messages.push(format!(
                        "provider cleared {} tool use(s) ({} tokens); mirrored locally",
                        reply.cleared_tool_uses, reply.cleared_tokens
                    ));
                }
                calibration.observe(history_weight(&outgoing), reply.input_tokens);
                if reply.stop_reason.is_output_limit() {
                    let step = escalation.step(
                        Some(max_tokens),
                        info.default_output,
                        output_cap,
                        config.max_token_escalations,
                    );
                    if step.escalated {
                        d.log(
                            EventBody::TokenEscalation {
                                from: max_tokens,
                                to: step.max_tokens,
                                used: escalation.used,
                            },
                            HistoryChange::None,
                            Vec::new(),
                        )?;
                        max_tokens = step.max_tokens;
                        d.append(
                            EventBody::ResponseReceived {
                                stop_reason: "max_tokens".into(),
                                output_tokens: None,
                            },
                            vec![Message::assistant(reply.content.clone()), Message::user(CONTINUATION)],
                        )?;
                        continue;
                    }
                }
                let stop = match reply.stop_reason {
                    salvage_types::capture::StopReason::EndTurn => "end_turn",
                    salvage_types::capture::StopReason::MaxTokens => "max_tokens",
                    salvage_types::capture::StopReason::Length => "length",
                };
                d.append(
                    EventBody::ResponseReceived { stop_reason: stop.into(), output_tokens: None },
                    vec![Message::assistant(reply.content)],
                )?;
                d.run.outcome = if rejected_once { Outcome::Recovered } else { Outcome::NoFailure };
                break;
            }
        }
    }
    Ok(d.run)
}
