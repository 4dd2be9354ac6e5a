//! Steps 1–3 of a fresh turn (microcompact, dedup, skill aging, pre-flight, compaction) and
//! steps 4–5 (the outgoing copy: pairing repair and the tool-result budget).

use super::{Change, EngineError, EngineIo, Phase, Request, RequestParams, Turn, TurnMode};
use crate::budget::{budget, needs_compaction, CHARS_PER_TOKEN};
use crate::compaction::{self, NoMemory, Plan};
use crate::summarizer::Cancel;
use crate::tool_budget::{self, Limits};
use crate::{dedup, microcompact, pairing, payload, skills};
use salvage_types::event::{EventBody, StepOutcome, Trigger};
use salvage_types::{history_weight, CcrKey, Message, Role};

impl Turn {
    /// Step 1–3: the per-turn passes with no model, pre-flight, and compaction when needed.
    pub(super) fn passes(&mut self, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        self.microcompact(io)?;
        let (h, r, keys) = {
            let mut a = Self::archiver(io);
            let (h, r) = dedup::dedup(&self.history, &mut a)?;
            (h, r, a.keys)
        };
        if h != self.history {
            self.record(
                EventBody::Dedup { stubbed: r.stubbed, freed_bytes: r.freed_bytes },
                Change::Set(h),
                keys,
            );
        }
        let (h, r, keys) = {
            let mut a = Self::archiver(io);
            let (h, r) = skills::age_skills(&self.history, self.input.config.skill_age_turns, &mut a)?;
            (h, r, a.keys)
        };
        if h != self.history {
            self.record(EventBody::SkillAging { collapsed: r.collapsed }, Change::Set(h), keys);
        }
        self.preflight();
        self.compact_if_needed(io)?;
        self.phase = Phase::Build;
        Ok(())
    }

    fn microcompact(&mut self, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        let turn = u32::try_from(self.history.iter().filter(|m| m.role == Role::Assistant).count())
            .unwrap_or(u32::MAX);
        let ages = microcompact::Ages {
            truncate: self.input.config.microcompact_truncate_turns,
            summarize: self.input.config.microcompact_summarize_turns,
        };
        let lookup = io.lookup;
        // The history is handed to the pass and comes back cut (see `microcompact_owned`).
        let history = std::mem::take(&mut self.history);
        let (h, r, keys) = {
            let mut a = Self::archiver(io);
            let (h, r) = microcompact::microcompact_owned(history, turn, ages, &mut a, lookup);
            (h, r, a.keys)
        };
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                self.history = h;
                return Err(e.into());
            }
        };
        // Every change the pass makes is counted: no count, no change.
        if r.truncated == 0 && r.summarized == 0 {
            self.history = h;
        } else {
            self.say(r.line());
            let event = EventBody::Microcompact {
                truncated: r.truncated,
                summarized: r.summarized,
                freed_bytes: r.freed_bytes,
            };
            self.record(event, Change::Set(h), keys);
        }
        Ok(())
    }

    fn preflight(&mut self) {
        let weight = history_weight(&self.history);
        let s = &mut self.input.session;
        let pf = payload::preflight(s.cap, weight, s.no_cap_warned);
        if pf.warn_no_cap {
            s.no_cap_warned = true;
        }
        self.ratio = pf.forced_ratio.unwrap_or(self.input.surface.ratio());
        let event = EventBody::Preflight {
            history_bytes: weight,
            cap: s.cap,
            forced_ratio_percent: pf.forced_ratio.map(|r| (r * 100.0).round() as u64),
            warn_no_cap: pf.warn_no_cap,
        };
        self.record(event, Change::None, Vec::new());
        self.say(pf.message);
    }

    /// The compaction budget in force (ratio, calibration, cap).
    pub(super) fn budget(&self) -> u64 {
        let cpt =
            if self.calibration.samples > 0 { self.calibration.chars_per_token } else { CHARS_PER_TOKEN };
        budget(self.input.model.context_window, self.ratio, cpt, self.input.session.cap)
    }

    fn compact_if_needed(&mut self, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        let budget_bytes = self.budget();
        if !needs_compaction(history_weight(&self.history), budget_bytes) {
            return Ok(());
        }
        let plan = Plan {
            budget: budget_bytes,
            trigger: Trigger::Auto,
            min_keep_recent: compaction::MIN_KEEP_RECENT,
            summarizer_window_chars: usize::try_from(self.input.model.context_window.saturating_mul(4))
                .unwrap_or(usize::MAX),
        };
        let cancel = Cancel::new();
        let mut lines: Vec<String> = Vec::new();
        let lookup = io.lookup;
        let (o, keys) = {
            let mut status = |_: compaction::Phase, line: &str| lines.push(line.to_string());
            let mut c = compaction::Io {
                archiver: crate::archive::Archiver::new(Some(&mut *io.archive)),
                lookup,
                summarizer: &mut *io.summarizer,
                hooks: &mut *io.hooks,
                memory: &mut NoMemory,
                status: &mut status,
                cancel: &cancel,
            };
            let o = compaction::compact(&self.history, &plan, &mut self.input.compaction, &mut c)?;
            (o, c.archiver.keys)
        };
        for l in lines {
            self.say(l);
        }
        self.record_compaction(o.events, o.history, keys);
        Ok(())
    }

    /// Records a compaction's events; the `compaction` event carries the history change (the
    /// hooks' events around it carry none).
    pub(super) fn record_compaction(
        &mut self,
        events: Vec<EventBody>,
        history: Vec<Message>,
        keys: Vec<CcrKey>,
    ) {
        let mut keys = Some(keys);
        for e in events {
            match &e {
                EventBody::Compaction { outcome: StepOutcome::Applied, .. } => {
                    let h = history.clone();
                    self.record(e, Change::Set(h), keys.take().unwrap_or_default());
                }
                EventBody::Compaction { .. } => self.record(e, Change::None, keys.take().unwrap_or_default()),
                _ => self.record(e, Change::None, Vec::new()),
            }
        }
    }

    /// Steps 4–5: the outgoing copy of the history (pairing repair, tool-result budget at the
    /// session's normal limits), and the archive keys the budget produced.
    pub(super) fn outgoing(
        &self,
        history: &[Message],
        io: &mut EngineIo<'_>,
    ) -> Result<(Vec<Message>, Vec<CcrKey>), EngineError> {
        let (repaired, _) = pairing::repair(history);
        let limits = Limits {
            per_result: self.input.config.tool_result_max_chars,
            per_turn: self.input.config.tool_result_budget_chars,
        };
        let mut a = Self::archiver(io);
        let (out, _) = tool_budget::apply(&repaired, limits, &mut a)?;
        Ok((out, a.keys))
    }

    /// The request parameters of the next request.
    pub(super) fn params(&self, as_sent: bool) -> RequestParams {
        RequestParams { max_tokens: self.max_tokens, context_management: self.input.provider_edits, as_sent }
    }

    /// Builds and sends the next request. Attempt 0 of a captured request is the history exactly
    /// as captured: no pairing repair, no budget, nothing added.
    pub(super) fn build(&mut self, io: &mut EngineIo<'_>) -> Result<(), EngineError> {
        let as_sent = self.attempt == 0 && self.last.is_none() && self.input.mode == TurnMode::AsSent;
        // The budget's archived originals are referenced by the request_sent record, through the
        // markers of the request.
        let outgoing = if as_sent { self.history.clone() } else { self.outgoing(&self.history, io)?.0 };
        let params = self.params(as_sent);
        self.send(outgoing, params, io);
        Ok(())
    }

    /// Queues a request and remembers it for the no-op rule.
    pub(super) fn send(&mut self, outgoing: Vec<Message>, params: RequestParams, io: &mut EngineIo<'_>) {
        let bytes = io.wire.request_bytes(&outgoing, &params);
        let weight = history_weight(&outgoing);
        let estimated = self.calibration.tokens(weight);
        let (stripped_key, stripped_bytes) = stripped_figures(&outgoing, bytes, &params, io);
        self.last = Some(super::Sent {
            stripped_key,
            stripped_bytes,
            digest: super::answer::digest(&outgoing),
            weight,
            markers: super::answer::markers(&outgoing),
            bytes,
            estimated,
            params,
        });
        let request =
            Request { attempt: self.attempt, history: outgoing, params, bytes, estimated_tokens: estimated };
        self.queue.push_back(super::Action::Send(Box::new(request)));
        self.phase = Phase::Await;
    }
}

/// The key and request size of `outgoing` with the notices left out (the no-op rule compares
/// requests notices aside). Without a notice that is `outgoing` itself: nothing is copied.
pub(super) fn stripped_figures(
    outgoing: &[Message],
    bytes: u64,
    params: &RequestParams,
    io: &mut EngineIo<'_>,
) -> (CcrKey, u64) {
    if !outgoing.iter().any(super::is_notice) {
        return (CcrKey::of_json(outgoing), bytes);
    }
    let stripped: Vec<Message> = outgoing.iter().filter(|m| !super::is_notice(m)).cloned().collect();
    (CcrKey::of_json(&stripped), io.wire.request_bytes(&stripped, params))
}
