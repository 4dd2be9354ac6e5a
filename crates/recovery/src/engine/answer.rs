//! The answer to a request: the `request_sent` record, then a rejection (classification, payload
//! policy, floor) or an acceptance (context-edit mirror, escalation, the answer appended).

use super::{Answer, Change, EngineError, EngineIo, Phase, Turn};
use crate::classify::{classify, FailureInput};
use crate::context_edit;
use crate::escalation::CONTINUATION;
use crate::ladder::RUNG3_MESSAGE_MAX;
use crate::payload::{self, FloorParts, FloorVerdict};
use crate::task::task_index;
use salvage_types::capture::{Failure, Outcome, StopReason};
use salvage_types::ccr_key::find_markers;
use salvage_types::event::EventBody;
use salvage_types::truncate::preserve_end;
use salvage_types::{history_weight, CcrKey, Message, RecoveryPath, Role};

/// What a rejection carried.
struct Rejection {
    status: Option<u16>,
    message: String,
    transport: Option<String>,
    rejected_bytes: Option<u64>,
}

impl Turn {
    pub(super) fn answered(&mut self, answer: Answer, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        let Some(last) = self.last.as_ref() else {
            return Err(EngineError::Protocol("a request before its answer"));
        };
        let (accepted, real_tokens) = match &answer {
            Answer::Accepted { input_tokens, .. } => (true, Some(*input_tokens)),
            Answer::Rejected { counted_tokens, .. } => (false, *counted_tokens),
        };
        // Every original behind a marker the model was sent is referenced, so retention keeps it.
        let mut blobs: Vec<CcrKey> = Vec::new();
        for k in &last.markers {
            if let Some(key) = io.archive.resolve(k) {
                if !blobs.contains(&key) {
                    blobs.push(key);
                }
            }
        }
        let weight = last.weight;
        let event = EventBody::RequestSent {
            attempt: self.attempt,
            bytes: last.bytes,
            estimated_tokens: last.estimated,
            real_tokens,
            history_digest: last.digest.clone(),
            accepted,
        };
        self.record(event, Change::None, blobs);
        match answer {
            Answer::Rejected { status, message, transport, rejected_bytes, .. } => {
                self.rejected(Rejection { status, message, transport, rejected_bytes }, io);
            }
            Answer::Accepted { stop_reason, content, input_tokens, cleared_tool_uses, cleared_tokens } => {
                if cleared_tool_uses > 0 && self.input.provider_edits {
                    self.mirror_edits(cleared_tool_uses, cleared_tokens, io)?;
                }
                self.calibration.observe(weight, input_tokens);
                self.accepted(stop_reason, content);
            }
        }
        Ok(())
    }

    fn rejected(&mut self, r: Rejection, io: &mut EngineIo<'_>) {
        let c = classify(&FailureInput {
            failure: Failure {
                status: r.status,
                message: r.message.clone(),
                transport: r.transport.clone(),
                rejected_request_bytes: r.rejected_bytes,
            },
            history_bytes: history_weight(&self.history),
            payload_path_seen: self.payload_path,
        });
        self.rejected_once = true;
        let event = EventBody::ProviderError {
            status: r.status,
            message: r.message,
            transport: r.transport,
            rejected_bytes: r.rejected_bytes,
            class: c.class,
            reason: c.reason.clone(),
        };
        self.record(event, Change::None, Vec::new());
        if !c.recoverable {
            self.say(format!("✖ Not recoverable by compaction ({}): {}", c.describe(), c.reason));
            self.done(Outcome::NotRecoverable);
            return;
        }
        if c.path == Some(RecoveryPath::Payload) {
            self.payload_path = true;
            self.learn_cap(r.rejected_bytes);
            if let Some(rejected) = r.rejected_bytes {
                if self.floor(rejected, io) == FloorVerdict::FailFast {
                    self.done(Outcome::FailedFast);
                    return;
                }
            }
        }
        self.say(format!("⚠ Recoverable failure ({}) — compacting and retrying", c.describe()));
        self.class = Some(c);
        self.phase = Phase::Ladder;
    }

    fn learn_cap(&mut self, rejected: Option<u64>) {
        let session = &mut self.input.session;
        let d = payload::learn_cap(rejected, session.cap);
        let record = d.changed || session.cap != Some(d.cap);
        session.cap = Some(d.cap);
        if record {
            let message = d.message.clone();
            self.record(
                EventBody::CapLearned { cap: d.cap, previous: d.previous, rejected, message },
                Change::None,
                Vec::new(),
            );
            self.say(format!("ℹ {}", d.message));
        }
    }

    /// The floor ([better] section 3): the smallest request the ladder could still send — the
    /// system messages and tool definitions as in the body, the envelope, and the task as rung 3
    /// would send it (capped at 4 000 bytes).
    fn floor(&mut self, rejected: u64, io: &mut EngineIo<'_>) -> FloorVerdict {
        let params = self.params(false);
        let system: Vec<Message> = self.history.iter().filter(|m| m.role == Role::System).cloned().collect();
        let envelope = io.wire.request_bytes(&[], &params);
        let with_system = io.wire.request_bytes(&system, &params);
        let mut base = system;
        if let Some(i) = task_index(&self.history) {
            if let Some(t) = self.history.get(i) {
                let mut t = t.clone();
                if let Some(cut) = preserve_end(&t.content, RUNG3_MESSAGE_MAX) {
                    t.content = cut;
                }
                base.push(t);
            }
        }
        let floor_bytes = io.wire.request_bytes(&base, &params);
        let parts = FloorParts {
            system_prompt: with_system.saturating_sub(envelope),
            tools_and_envelope: envelope,
            task: floor_bytes.saturating_sub(with_system),
        };
        let diag = payload::floor_of(&parts, floor_bytes, rejected);
        let event =
            EventBody::FloorDiagnosis { verdict: diag.verdict, floor_bytes, rejected, parts: parts.to_map() };
        self.record(event, Change::None, Vec::new());
        self.say(diag.message);
        diag.verdict
    }

    fn mirror_edits(&mut self, cleared: u64, tokens: u64, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        let (h, r, keys) = {
            let mut a = Self::archiver(io);
            let (h, r) = context_edit::mirror(&self.history, cleared, &mut a)?;
            (h, r, a.keys)
        };
        let event =
            EventBody::ContextEdit { cleared_tool_uses: cleared, cleared_tokens: tokens, stubs: r.stubs };
        self.record(event, Change::Set(h), keys);
        self.say(format!("provider cleared {cleared} tool use(s) ({tokens} tokens); mirrored locally"));
        Ok(())
    }

    fn accepted(&mut self, stop_reason: StopReason, content: String) {
        if stop_reason.is_output_limit() {
            let step = self.escalation.step(
                Some(self.max_tokens),
                self.input.model.default_output,
                self.input.output_cap,
                self.input.config.max_token_escalations,
            );
            if step.escalated {
                let event = EventBody::TokenEscalation {
                    from: self.max_tokens,
                    to: step.max_tokens,
                    used: self.escalation.used,
                };
                self.record(event, Change::None, Vec::new());
                self.max_tokens = step.max_tokens;
                let msgs = vec![Message::assistant(content), Message::user(CONTINUATION)];
                self.record(
                    EventBody::ResponseReceived { stop_reason, output_tokens: None },
                    Change::Append(msgs),
                    Vec::new(),
                );
                self.phase = Phase::Build;
                return;
            }
        }
        let msgs = vec![Message::assistant(content)];
        self.record(
            EventBody::ResponseReceived { stop_reason, output_tokens: None },
            Change::Append(msgs),
            Vec::new(),
        );
        self.done(if self.rejected_once { Outcome::Recovered } else { Outcome::NoFailure });
    }
}

/// The short key of a history's JSON (the `history_digest` of a `request_sent` record), hashed
/// as it is serialized (the JSON is never held).
pub fn digest(h: &[Message]) -> String {
    CcrKey::of_json(h).short()
}

/// The distinct CCR markers in the contents of `h`, in order of appearance.
pub(super) fn markers(h: &[Message]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in h {
        for k in find_markers(&m.content) {
            if !out.iter().any(|x| x == k) {
                out.push(k.to_string());
            }
        }
    }
    out
}
