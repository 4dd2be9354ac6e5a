//! Step 7's ladder: one rung per attempt, judged on the request it would send.

use super::{Change, EngineError, EngineIo, Turn};
use crate::archive::Archiver;
use crate::compaction::HookCall;
use crate::ladder::{self, Rung, RungContext};
use crate::payload;
use crate::tool_budget::Limits;
use salvage_types::capture::Outcome;
use salvage_types::event::{EventBody, StepOutcome, Trigger};
use salvage_types::{Message, RecoveryPath};

impl Turn {
    /// Climbs the ladder until a rung yields a request worth sending, or attempts run out, or the
    /// last rung is a no-op (nothing further can change the request).
    pub(super) fn ladder(&mut self, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        loop {
            if self.attempt >= self.input.config.max_recovery_attempts {
                self.say(format!("✖ Recovery attempts exhausted ({})", self.attempt));
                self.done(Outcome::Exhausted);
                return Ok(());
            }
            self.attempt = self.attempt.saturating_add(1);
            let rung = Rung::for_attempt(self.attempt);
            self.hooks(io, "PreCompact", None);
            let limits = Limits {
                per_result: self.input.config.tool_result_max_chars,
                per_turn: self.input.config.tool_result_budget_chars,
            };
            let (o, keys) = {
                let mut ctx = RungContext {
                    archiver: Archiver::new(Some(&mut *io.archive)),
                    keep: self.input.config.emergency_keep_messages,
                    limits,
                    payload_budget: Some(self.budget()),
                    rung3_keep: self.input.rung3_keep,
                };
                let o = ladder::apply(rung, &self.history, &mut ctx)?;
                (o, ctx.archiver.keys)
            };
            let (outgoing, _) = self.outgoing(&o.history, io)?;
            let no_op = o.report.no_op || self.same_or_heavier(&outgoing, io);
            let outcome = if no_op { StepOutcome::Skipped } else { StepOutcome::Applied };
            let r = &o.report;
            let event = EventBody::RecoveryAttempt {
                attempt: self.attempt,
                rung: r.rung,
                outcome,
                before_bytes: r.before_bytes,
                after_bytes: r.after_bytes,
                before_messages: r.before_messages as u64,
                after_messages: r.after_messages as u64,
                archived: r.archived.clone(),
            };
            if no_op {
                self.say(format!(
                    "rung {}: no-op — the request it would send is the previous one or heavier; not sent",
                    r.rung
                ));
                self.record(event, Change::None, keys);
                self.hooks(io, "PostCompact", Some(StepOutcome::Skipped));
                // Rung 3 is the last rung: every later attempt would run it again on this same
                // history and budget (a no-op changes neither), build this same request and be a
                // no-op by the same rule. Nothing left can change the request, so the climb ends
                // here rather than journaling one skipped attempt per remaining attempt. (With no
                // attempt left, the check at the top says so as usual.)
                if rung == Rung::Nuclear && self.attempt < self.input.config.max_recovery_attempts {
                    self.say(format!(
                        "✖ Recovery exhausted: rung 3, the last rung, leaves the request unchanged (attempt {} of {})",
                        self.attempt, self.input.config.max_recovery_attempts
                    ));
                    self.done(Outcome::Exhausted);
                    return Ok(());
                }
                continue;
            }
            self.say(r.summary());
            self.record(event, Change::Set(o.history), keys);
            self.hooks(io, "PostCompact", Some(StepOutcome::Applied));
            self.payload_notice();
            let (outgoing, _) = self.outgoing(&self.history, io)?;
            let params = self.params(false);
            self.send(outgoing, params, io);
            return Ok(());
        }
    }

    /// The no-op rule on the request: the outgoing request, notices aside, is byte-identical to the
    /// previous one or heavier than it.
    fn same_or_heavier(&self, outgoing: &[Message], io: &mut EngineIo<'_>) -> bool {
        let Some(last) = &self.last else { return false };
        // Byte-identical: the same JSON, compared by its key. The size is the request's in the
        // last request's parameters.
        let bytes = io.wire.request_bytes(outgoing, &last.params);
        let (key, stripped_bytes) = super::passes::stripped_figures(outgoing, bytes, &last.params, io);
        key == last.stripped_key || stripped_bytes > last.stripped_bytes
    }

    /// Step 7's payload notice: once per session, after a successful rung on the payload path.
    fn payload_notice(&mut self) {
        let payload_path = self.class.as_ref().is_some_and(|c| c.path == Some(RecoveryPath::Payload));
        if !payload_path || self.input.session.notice_injected {
            return;
        }
        self.input.session.notice_injected = true;
        if payload::notice_already_injected(&self.history) {
            return;
        }
        self.record(
            EventBody::NoticeInjected {},
            Change::Append(vec![payload::notice_message()]),
            Vec::new(),
        );
    }

    /// Fires the compaction hooks for a ladder attempt (trigger `recovery`), journaling each.
    fn hooks(&mut self, io: &mut EngineIo<'_>, event: &'static str, outcome: Option<StepOutcome>) {
        for r in io.hooks.fire(&HookCall { event, trigger: Trigger::Recovery, outcome }) {
            let e = EventBody::HookFired {
                name: r.name,
                event: event.to_string(),
                outcome: r.outcome,
                error: r.error,
                millis: r.millis,
            };
            self.record(e, Change::None, Vec::new());
        }
    }
}
