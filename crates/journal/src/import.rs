//! Journaling a whole client session read from its session file (a Claude Code transcript, a
//! Codex rollout): one event per step, so that `log` reads as the session happened and any
//! state before or after one of the client's compactions is restored exactly.
//!
//! Each step becomes an event with a writer-chosen id derived from the step's source id
//! (`import:<session>:<record id>`), so importing the same file twice appends nothing, and
//! importing a longer version of the file appends only the new steps. A step counts as journaled
//! only when the event named after it holds the step's messages and continues the step before
//! it: a file edited in place keeps its record ids, and its edited steps are new (their events
//! are named `import:<session>:<record id>@<digest>`, the digest chained over the file's steps up
//! to that one). When the file's active branch left what was journaled (a rewind in the client,
//! a response that was still being written, an edit), a `rewind` event to the last shared step
//! comes first: nothing is deleted, the abandoned branch stays auditable.
//!
//! Input steps are `message_appended`, responses `response_received`, the client's compactions
//! `compaction` events (version 2: `by`, `pre_tokens`, and the pre-compaction history archived in
//! CCR and referenced by the event) whose history change installs the post-compaction state, and
//! Codex rollbacks `rewind` events to the earlier state they return to.

use crate::{Appended, HistoryChange, Journal, JournalError, NewEvent};
use chrono::{DateTime, Utc};
use salvage_ccr::Ccr;
use salvage_types::capture::StopReason;
use salvage_types::event::{Cost, EventBody, StepOutcome, Trigger};
use salvage_types::timeline::{Change, Step};
use salvage_types::{CcrKey, History};

/// Who and what the imported session is.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The journal session id.
    pub session: String,
    /// Its title.
    pub title: String,
    /// The client (`claude-code`, `codex`), recorded as the compactions' `by`.
    pub client: String,
    /// Provider.
    pub provider: Option<String>,
    /// Model.
    pub model: Option<String>,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    /// The session started with this import.
    pub started: bool,
    /// Steps already journaled (a re-import).
    pub existing: u64,
    /// Events appended (steps, plus a rewind when the branch changed).
    pub appended: u64,
    /// The event a branch change rewound to.
    pub rewound_to: Option<u64>,
    /// Compactions whose pre-compaction history was archived.
    pub archived: u64,
    /// The session's latest event.
    pub head: u64,
}

fn event_id(session: &str, step: &str) -> String {
    format!("import:{session}:{step}")
}

/// The bytes a step is named by when its plain id is taken: its id, time and everything it does
/// to the history.
fn step_content(step: &Step) -> Result<Vec<u8>, serde_json::Error> {
    let (id, ts) = (&step.id, &step.ts);
    match &step.change {
        Change::Input(m) => serde_json::to_vec(&("input", id, ts, m)),
        Change::Response { messages, stop_reason, output_tokens } => {
            serde_json::to_vec(&("response", id, ts, messages, stop_reason, output_tokens))
        }
        Change::Compaction { trigger, pre_tokens, history, exact } => {
            serde_json::to_vec(&("compaction", id, ts, trigger, pre_tokens, history, exact))
        }
        Change::Rollback { turns, history } => serde_json::to_vec(&("rollback", id, ts, turns, history)),
    }
}

/// For each step, a BLAKE3 chained over the file's steps up to and including it (16 hex). It
/// names a step's event when the plain id (`import:<session>:<record id>`) already names an
/// event holding other content (the file was edited in place, or an earlier step was): the same
/// file gives the same names, and a step after an edit gets its own.
fn step_digests(steps: &[Step]) -> Result<Vec<String>, JournalError> {
    let mut prev = [0u8; 32];
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let bytes = step_content(step).map_err(|e| JournalError::Invalid(e.to_string()))?;
        let mut h = blake3::Hasher::new();
        h.update(b"salvage.import-step/1\0");
        h.update(&prev);
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
        prev = *h.finalize().as_bytes();
        out.push(prev[..8].iter().map(|b| format!("{b:02x}")).collect());
    }
    Ok(out)
}

/// The hashes the journal stores `msgs` under.
fn hashes(msgs: &[salvage_types::Message]) -> Result<Vec<crate::state::MsgHash>, JournalError> {
    msgs.iter().map(|m| crate::messages::stage_message(m).map(|(h, _)| h)).collect()
}

/// The trigger a client's compaction is journaled with.
fn trigger_of(trigger: Option<&str>) -> Trigger {
    match trigger {
        Some("manual") => Trigger::Manual,
        _ => Trigger::Auto,
    }
}

fn parse_ts(ts: Option<&str>) -> Option<DateTime<Utc>> {
    ts.and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc))
}

impl Journal {
    /// The seq of an event id in a session, if it is stored there.
    fn seq_of(&self, session: &str, event_id: &str) -> Result<Option<u64>, JournalError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .prepare_cached("SELECT seq FROM events WHERE event_id = ?1 AND session_id = ?2")
            .and_then(|mut st| {
                st.query_row(rusqlite::params![event_id, session], |r| r.get::<_, i64>(0)).optional()
            })
            .map_err(crate::error::sql("import"))?
            .map(|v| crate::error::stored_u64(session, 0, "seq", v))
            .transpose()
    }

    /// The session's start event, appending it when the session is new.
    fn start_imported(
        &mut self,
        src: &Source,
        first_ts: DateTime<Utc>,
        out: &mut Imported,
    ) -> Result<u64, JournalError> {
        let session = src.session.as_str();
        let start_id = event_id(session, "start");
        if let Some(seq) = self.seq_of(session, &start_id)? {
            return Ok(seq);
        }
        if self.version(session).is_ok() {
            return Err(JournalError::Invalid(format!(
                "session {session}: already exists and was not imported from a session file (choose another --session)"
            )));
        }
        let body = EventBody::session_started(src.provider.clone(), src.model.clone());
        let a = self.start_session(session, &src.title, NewEvent::new(start_id, first_ts, body))?;
        out.started = true;
        Ok(a.seq)
    }

    /// How many leading steps are journaled already, and the seq of the last of them. A step is
    /// journaled when an event named after it (its plain id, or the one its digest names) holds
    /// its content and continues the step before it: an id alone is not enough, since a file
    /// edited in place keeps its record ids (review finding 09).
    fn journaled_prefix(
        &self,
        session: &str,
        steps: &[Step],
        digests: &[String],
        start_seq: u64,
    ) -> Result<(usize, u64), JournalError> {
        let mut last_seq = start_seq;
        for (k, (step, digest)) in steps.iter().zip(digests).enumerate() {
            let mut found = None;
            for id in [event_id(session, &step.id), event_id(session, &format!("{}@{digest}", step.id))] {
                if let Some(seq) = self.seq_of(session, &id)? {
                    if self.holds(session, seq, last_seq, step)? {
                        found = Some(seq);
                        break;
                    }
                }
            }
            match found {
                Some(seq) => last_seq = seq,
                None => return Ok((k, last_seq)),
            }
        }
        Ok((steps.len(), last_seq))
    }

    /// Whether event `seq` is `step` continuing event `last`: same kind, and the same messages
    /// (appended, or the whole history a compaction or rollback installs).
    fn holds(&self, session: &str, seq: u64, last: u64, step: &Step) -> Result<bool, JournalError> {
        let Some(e) = self.event_at(session, seq)? else {
            return Ok(false);
        };
        let continues = |parent: Option<u64>| -> Result<bool, JournalError> {
            Ok(match parent {
                Some(p) if p == last => true,
                // After a branch change the next event continues the rewind to `last`. (Not any
                // event with the same history: two branches can reach one history, as two
                // compactions do, and then each step must stay on its own.)
                Some(p) => self
                    .event_at(session, p)?
                    .is_some_and(|r| matches!(r.body, EventBody::Rewind { .. }) && r.parent == Some(last)),
                None => false,
            })
        };
        // The time the step names, as the event was stamped with it (a step without one was
        // stamped with the time before it: nothing to compare).
        if let Some(t) = parse_ts(step.ts.as_deref()) {
            if e.ts != crate::event::rfc3339(&t) {
                return Ok(false);
            }
        }
        let appended = |msgs: &History| -> Result<bool, JournalError> {
            Ok(match &e.delta {
                Some(d) => d.remove == 0 && d.hashes(session, seq)? == hashes(msgs)?,
                None => msgs.is_empty(),
            })
        };
        Ok(match (&step.change, &e.body) {
            (Change::Input(msgs), EventBody::MessageAppended { .. }) => {
                appended(msgs)? && continues(e.parent)?
            }
            (
                Change::Response { messages, stop_reason, output_tokens },
                EventBody::ResponseReceived { stop_reason: stored, output_tokens: tokens },
            ) => {
                let reason =
                    stop_reason.as_deref().and_then(StopReason::parse).unwrap_or(StopReason::Unrecorded);
                reason == *stored && output_tokens == tokens && appended(messages)? && continues(e.parent)?
            }
            (
                Change::Compaction { trigger, pre_tokens, history, .. },
                EventBody::Compaction { trigger: stored, pre_tokens: tokens, .. },
            ) => {
                trigger_of(trigger.as_deref()) == *stored
                    && pre_tokens == tokens
                    && continues(e.parent)?
                    && self.history_hashes(session, seq)? == hashes(history)?
            }
            // A rollback's rewind names the earlier state as its parent: it continues `last` by
            // following it in the journal (right after it, or after the branch change to it).
            (Change::Rollback { history, .. }, EventBody::Rewind { .. }) => {
                continues(seq.checked_sub(1))? && self.history_hashes(session, seq)? == hashes(history)?
            }
            _ => false,
        })
    }

    /// Archives the pre-compaction history and builds the compaction event installing `after`.
    fn compaction_event(
        &self,
        src: &Source,
        id: String,
        ts: DateTime<Utc>,
        (trigger, pre_tokens, after): (Option<&str>, Option<u64>, &History),
        before: &History,
    ) -> Result<NewEvent, JournalError> {
        let json = serde_json::to_vec(before).map_err(|e| JournalError::Invalid(e.to_string()))?;
        let key: CcrKey = Ccr::new(self.conn(), self.clock.as_ref())
            .put(&json)
            .map_err(|e| JournalError::Invalid(format!("archiving the pre-compaction history: {e}")))?
            .key;
        let body = EventBody::Compaction {
            trigger: trigger_of(trigger),
            level: 2,
            outcome: StepOutcome::Applied,
            backoff_skip: false,
            route: None,
            cost: Cost::default(),
            by: Some(src.client.clone()),
            pre_tokens,
            archived: Some(key.short()),
        };
        Ok(NewEvent::new(id, ts, body).with_history(HistoryChange::Set(after.clone())).with_blobs(vec![key]))
    }

    /// Journals a session's steps (see the module docs). `now` stamps events whose step has no
    /// time of its own and is not after a step that has one.
    pub fn import_steps(
        &mut self,
        src: &Source,
        steps: &[Step],
        now: DateTime<Utc>,
    ) -> Result<Imported, JournalError> {
        let session = src.session.as_str();
        let mut out = Imported::default();
        let first_ts = steps.iter().find_map(|s| parse_ts(s.ts.as_deref())).unwrap_or(now);
        let start_seq = self.start_imported(src, first_ts, &mut out)?;
        let digests = step_digests(steps)?;
        let (k, last_seq) = self.journaled_prefix(session, steps, &digests, start_seq)?;
        let (done, todo) = steps.split_at(k);
        out.existing = u64::try_from(k).unwrap_or(u64::MAX);
        // The branch the file holds continues `last_seq`; rewind there when the head moved on.
        let head = self.version(session)?;
        // Not when the head continues `last_seq` with the same history (a branch change already
        // rewound there); but when it only reached the same history another way (a compaction
        // after an edited step), the file's own events become the head's lineage again.
        if head != last_seq
            && (self.state_at(session, head)?.history != self.state_at(session, last_seq)?.history
                || !self.descends_from(session, head, last_seq)?)
        {
            let id = event_id(session, &format!("rewind:{last_seq}:from:{head}"));
            let ts = todo.first().and_then(|s| parse_ts(s.ts.as_deref())).unwrap_or(now);
            self.rewind(session, last_seq, "branch", &id, ts)?;
            out.appended = out.appended.saturating_add(1);
            out.rewound_to = Some(last_seq);
        }
        // The history at each step, to archive what a compaction replaces.
        let mut history: History = salvage_types::timeline::fold(done);
        let mut ts = done.iter().rev().find_map(|s| parse_ts(s.ts.as_deref())).unwrap_or(first_ts);
        let mut batch: Vec<NewEvent> = Vec::new();
        for (step, digest) in todo.iter().zip(digests.iter().skip(k)) {
            if let Some(t) = parse_ts(step.ts.as_deref()) {
                ts = t;
            }
            // The plain id, unless an event of an earlier version of the file holds it.
            let mut id = event_id(session, &step.id);
            if self.seq_of(session, &id)?.is_some() {
                id = event_id(session, &format!("{}@{digest}", step.id));
            }
            match &step.change {
                Change::Input(msgs) => batch.push(
                    NewEvent::new(
                        id,
                        ts,
                        EventBody::MessageAppended { count: u64::try_from(msgs.len()).unwrap_or(u64::MAX) },
                    )
                    .with_history(HistoryChange::Append(msgs.clone())),
                ),
                Change::Response { messages, stop_reason, output_tokens } => {
                    let stop_reason =
                        stop_reason.as_deref().and_then(StopReason::parse).unwrap_or(StopReason::Unrecorded);
                    let body = EventBody::ResponseReceived { stop_reason, output_tokens: *output_tokens };
                    batch.push(
                        NewEvent::new(id, ts, body).with_history(HistoryChange::Append(messages.clone())),
                    );
                }
                Change::Compaction { trigger, pre_tokens, history: after, .. } => {
                    batch.push(self.compaction_event(
                        src,
                        id,
                        ts,
                        (trigger.as_deref(), *pre_tokens, after),
                        &history,
                    )?);
                    out.archived = out.archived.saturating_add(1);
                }
                Change::Rollback { turns, history: after } => {
                    let flushed = self.flush(session, &mut batch)?;
                    let target = self.earlier_state(session, after)?.ok_or_else(|| {
                        JournalError::Invalid(format!(
                            "session {session}: step {}: the rollback of {turns} turn(s) returns to no earlier state of the session",
                            step.id
                        ))
                    })?;
                    self.rewind(session, target, "thread_rolled_back", &id, ts)?;
                    out.appended = out.appended.saturating_add(flushed).saturating_add(1);
                }
            }
            step.apply(&mut history);
        }
        out.appended = out.appended.saturating_add(self.flush(session, &mut batch)?);
        out.head = self.version(session)?;
        Ok(out)
    }

    fn flush(&mut self, session: &str, batch: &mut Vec<NewEvent>) -> Result<u64, JournalError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let v = self.version(session)?;
        let appended: Vec<Appended> = self.append(session, Some(v), std::mem::take(batch))?;
        Ok(u64::try_from(appended.iter().filter(|a| a.inserted).count()).unwrap_or(u64::MAX))
    }

    /// Whether `ancestor` is on the parent chain of event `seq`.
    fn descends_from(&self, session: &str, seq: u64, ancestor: u64) -> Result<bool, JournalError> {
        let mut cur = Some(seq);
        while let Some(s) = cur.filter(|s| *s > ancestor) {
            cur = self.event_at(session, s)?.and_then(|e| e.parent);
        }
        Ok(cur == Some(ancestor))
    }

    /// The latest event on the head's parent chain whose history is exactly `history`.
    fn earlier_state(&self, session: &str, history: &History) -> Result<Option<u64>, JournalError> {
        let want = hashes(history)?;
        let mut cur = Some(self.version(session)?);
        while let Some(seq) = cur {
            if self.state_at(session, seq)?.history == want {
                return Ok(Some(seq));
            }
            cur = self.event_at(session, seq)?.and_then(|e| e.parent);
        }
        Ok(None)
    }

    /// Event `seq` of the session, if it is stored.
    fn event_at(&self, session: &str, seq: u64) -> Result<Option<crate::StoredEvent>, JournalError> {
        Ok(self.events(session, seq.saturating_sub(1), 1)?.into_iter().next().filter(|e| e.seq == seq))
    }
}
