//! Live recovery of one turn: on a recoverable rejection, the payload policy (learned cap, floor
//! diagnosis) and the next rung of the ladder, as the replay driver runs them, then the body to
//! retry. Pure logic over the turn's history; the caller sends and journals.

use crate::record::Turn;
use crate::route::{self, Api};
use salvage_journal::HistoryChange;
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::budget::{budget, model_info, Surface, CHARS_PER_TOKEN};
use salvage_recovery::classify::Classification;
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::payload::{self, FloorVerdict};
use salvage_recovery::session::SessionState;
use salvage_recovery::tool_budget::{self, Limits};
use salvage_types::event::{EventBody, StepOutcome};
use salvage_types::{history_weight, CcrKey, Config, Message, RecoveryPath, Role};
use serde_json::{Map, Value};

/// A rejection as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// HTTP status (`None` for a transport failure).
    pub status: Option<u16>,
    /// The body (or the transport error's text).
    pub message: String,
    /// The transport error.
    pub transport: Option<String>,
    /// The rejected size, when the upstream reported it.
    pub rejected_bytes: Option<u64>,
}

/// What to do after a rejection.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Send this body.
    Retry(Vec<u8>),
    /// Stop: pass the rejection to the client.
    GiveUp(String),
}

/// The recovery of one turn.
pub struct Recovery {
    api: Api,
    fields: Map<String, Value>,
    /// The live history (rewritten by rungs).
    pub history: Vec<Message>,
    config: Config,
    /// The session's recovery state (cap, notice, halved budget).
    pub session: SessionState,
    attempt: u32,
    mem: MemoryArchive,
    task: Option<Message>,
}

impl Recovery {
    /// Starts with the history the client sent.
    pub fn new(
        api: Api,
        fields: Map<String, Value>,
        history: Vec<Message>,
        config: Config,
        session: SessionState,
    ) -> Recovery {
        let task = salvage_recovery::task::task_index(&history).map(|i| history[i].clone());
        Recovery { api, fields, history, config, session, attempt: 0, mem: MemoryArchive::new(), task }
    }

    /// Recovery attempts made.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    fn blobs(&self, turn: &mut Turn, keys: &[CcrKey]) {
        for k in keys {
            if turn.blobs.iter().any(|(have, _)| have == k) {
                continue;
            }
            if let Some(b) = self.mem.get(&k.short()) {
                turn.blobs.push((*k, b));
            }
        }
    }

    fn body_bytes(&self, history: &[Message]) -> u64 {
        route::body_for(self.api, &self.fields, history).len() as u64
    }

    /// After a recoverable rejection classified `c`: journal the policy and the rung into `turn`
    /// and return the body to retry, or why to stop.
    pub fn next(&mut self, r: &Rejection, c: &Classification, turn: &mut Turn) -> Result<Next, String> {
        let model = self.fields.get("model").and_then(Value::as_str).map(str::to_string);
        let info = model_info(model.as_deref(), self.config.context_window);
        if c.path == Some(RecoveryPath::Payload) {
            let decision = payload::learn_cap(r.rejected_bytes, self.session.cap);
            if decision.changed || self.session.cap != Some(decision.cap) {
                turn.step(
                    EventBody::CapLearned {
                        cap: decision.cap,
                        previous: decision.previous,
                        rejected: r.rejected_bytes,
                        message: decision.message.clone(),
                    },
                    HistoryChange::None,
                    Vec::new(),
                );
            }
            self.session.cap = Some(decision.cap);
            if let Some(rej) = r.rejected_bytes {
                let mut base: Vec<Message> =
                    self.history.iter().filter(|m| m.role == Role::System).cloned().collect();
                if let Some(t) = &self.task {
                    base.push(t.clone());
                }
                let floor_bytes = self.body_bytes(&base);
                let diag = payload::floor(floor_bytes, rej);
                let verdict = match diag.verdict {
                    FloorVerdict::Ok => "ok",
                    FloorVerdict::Warn => "warn",
                    FloorVerdict::FailFast => "fail_fast",
                };
                turn.step(
                    EventBody::FloorDiagnosis { verdict: verdict.into(), floor_bytes, rejected: rej },
                    HistoryChange::None,
                    Vec::new(),
                );
                if diag.verdict == FloorVerdict::FailFast {
                    return Ok(Next::GiveUp(diag.message));
                }
            }
        }
        let limits = Limits {
            per_result: self.config.tool_result_max_chars,
            per_turn: self.config.tool_result_budget_chars,
        };
        loop {
            if self.attempt >= self.config.max_recovery_attempts {
                return Ok(Next::GiveUp(format!("recovery attempts exhausted ({})", self.attempt)));
            }
            self.attempt += 1;
            let rung = Rung::for_attempt(self.attempt);
            if rung == Rung::Aggressive {
                self.session.tool_budget_halved = true;
            }
            let payload_budget =
                budget(info.context_window, Surface::Chat.ratio(), CHARS_PER_TOKEN, self.session.cap);
            let (o, keys) = {
                let mut ctx = RungContext {
                    archiver: Archiver::new(Some(&mut self.mem as &mut dyn Archive)),
                    keep: self.config.emergency_keep_messages,
                    limits,
                    payload_budget: Some(payload_budget),
                    rung3_keep: ladder::RUNG3_KEEP,
                };
                let o = ladder::apply(rung, &self.history, &mut ctx).map_err(|e| e.0)?;
                (o, ctx.archiver.keys)
            };
            self.blobs(turn, &keys);
            let rep = &o.report;
            let body = EventBody::RecoveryAttempt {
                attempt: self.attempt,
                rung: rep.rung,
                outcome: if rep.no_op { StepOutcome::Skipped } else { StepOutcome::Applied },
                before_bytes: rep.before_bytes,
                after_bytes: rep.after_bytes,
                before_messages: rep.before_messages as u64,
                after_messages: rep.after_messages as u64,
                archived: rep.archived.clone(),
            };
            if rep.no_op {
                turn.step(body, HistoryChange::None, keys);
                continue;
            }
            self.history = o.history.clone();
            turn.step(body, HistoryChange::Set(o.history), keys);
            if c.path == Some(RecoveryPath::Payload)
                && !self.session.notice_injected
                && !payload::notice_already_injected(&self.history)
            {
                self.session.notice_injected = true;
                let notice = payload::notice_message();
                self.history.push(notice.clone());
                turn.step(EventBody::NoticeInjected {}, HistoryChange::Append(vec![notice]), Vec::new());
            }
            // The outgoing copy: pairing repaired, tool results within the session's budget.
            let (outgoing, _) = salvage_recovery::pairing::repair(&self.history);
            let lim = if self.session.tool_budget_halved { limits.halved() } else { limits };
            let (outgoing, keys) = {
                let mut a = Archiver::new(Some(&mut self.mem as &mut dyn Archive));
                let (h, _) = tool_budget::apply(&outgoing, lim, &mut a).map_err(|e| e.0)?;
                (h, a.keys)
            };
            self.blobs(turn, &keys);
            return Ok(Next::Retry(route::body_for(self.api, &self.fields, &outgoing)));
        }
    }

    /// The estimated tokens of the live history.
    pub fn estimated_tokens(history: &[Message]) -> u64 {
        (history_weight(history) as f64 / CHARS_PER_TOKEN).ceil() as u64
    }
}
