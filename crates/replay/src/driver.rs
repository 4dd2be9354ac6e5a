//! The turn driver: the order of `behavior.md` section 11 for a capture's failing turn, using
//! the recovery core and the compaction pipeline, with every step journaled.

use crate::held::Held;
use crate::upstream::{self, Simulated};
use chrono::{DateTime, Duration, Utc};
use salvage_ccr::Ccr;
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_recovery::archive::{Archive, ArchiveError};
use salvage_recovery::budget::{model_info, Surface};
use salvage_recovery::classify::{classify, FailureInput};
use salvage_recovery::compaction::{CompactionState, Hooks};
use salvage_recovery::context_edit;
use salvage_recovery::engine::{
    Action, Answer, Change, EngineError, EngineIo, Record, RequestParams, Turn, TurnInput, TurnMode, Wire,
};
use salvage_recovery::pairing;
use salvage_recovery::session::SessionState;
use salvage_recovery::summarizer::Summarizer;
use salvage_types::capture::{Capture, Outcome, RequestFormat};
use salvage_types::config::ContextEngine;
use salvage_types::event::{EventBody, StepOutcome};
use salvage_types::{history_weight, CcrKey, Clock, Config, ErrorClass, Message};
use std::cell::RefCell;

/// Why a replay could not run (the capture itself, or the journal).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// An original archived in memory during the run was gone when its event came to store it
    /// (the short key).
    #[error("blob {0} vanished")]
    Vanished(String),
    /// The turn engine stopped.
    #[error(transparent)]
    Engine(#[from] EngineError),
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
    /// Attempt 0 of a captured request, sent exactly as captured.
    pub as_sent: bool,
}

/// Everything a run observed; the checks read it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The journal session.
    pub session: String,
    /// The seq of the session's first event, whose history is the input history.
    pub started: u64,
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
    /// Tool uses the simulated provider cleared (call ids), by its own rule.
    pub provider_cleared: Vec<String>,
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
    /// The clock the archive dates blobs by (the driver never reads the wall clock itself).
    pub clock: &'a dyn Clock,
}

/// The archive a replay writes: originals land in memory first and move into the journal's CCR
/// with the event that references them ([`Held`]); reads see both.
struct ReplayArchive<'a> {
    mem: &'a RefCell<Held>,
    ccr: Ccr<'a>,
}

impl Archive for ReplayArchive<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError> {
        Ok(self.mem.borrow_mut().put(bytes.to_vec()))
    }
    fn put_owned(&mut self, bytes: Vec<u8>) -> Result<CcrKey, ArchiveError> {
        Ok(self.mem.borrow_mut().put(bytes))
    }
    fn get(&self, short: &str) -> Option<Vec<u8>> {
        let held = self.mem.borrow().get(short);
        held.or_else(|| self.ccr.get(short).ok())
    }
    fn holds(&self, short: &str) -> bool {
        self.mem.borrow().holds(short) || self.ccr.get(short).is_ok()
    }
}

/// The request-size model of a capture's wire format.
/// The capture and the model's default output limit (the engine's first `max_tokens`).
struct CaptureWire<'a>(&'a Capture, u64);

impl Wire for CaptureWire<'_> {
    fn request_bytes(&self, history: &[Message], params: &RequestParams) -> u64 {
        match &self.0.request {
            // A capture imported from a body: its format, tool definitions and parameters. Attempt 0
            // is the body as sent; later requests keep its fields, with `max_tokens` raised only by
            // an escalation and the editing field added only when the engine asks for it.
            Some(r) if r.format != RequestFormat::Chatcli => {
                if params.as_sent {
                    return salvage_wire::request_bytes(r, history);
                }
                let mut r = r.clone();
                // The body's own output-limit field (`max_tokens`, `max_output_tokens`,
                // `generationConfig.maxOutputTokens`…), written only when escalation raised it.
                let captured = salvage_wire::output_limit(&r).unwrap_or(0);
                if params.max_tokens > captured.max(self.1) {
                    salvage_wire::set_output_limit(&mut r, params.max_tokens);
                }
                if params.context_management && !r.fields.contains_key("context_management") {
                    let (_, field) = context_edit::request_fields(&context_edit::EditSettings::default());
                    r.fields.insert("context_management".into(), field);
                }
                salvage_wire::request_bytes(&r, history)
            }
            _ => body_bytes(self.0, history, params.max_tokens, params.context_management),
        }
    }
}

/// An original with its key ([`CcrKey::of`] of its bytes), as the journal archives it.
type Keyed = (CcrKey, Vec<u8>);

struct Driver<'j> {
    journal: &'j mut Journal,
    clock: &'j dyn Clock,
    session: String,
    start: DateTime<Utc>,
    n: i64,
    version: u64,
    mem: RefCell<Held>,
    from_sim: bool,
    /// The digest of the history the journal holds at the head.
    digest: RunningDigest,
    run: Run,
}

impl Driver<'_> {
    fn ts(&mut self) -> DateTime<Utc> {
        // One millisecond per event from the run's start; past chrono's range (never, in a
        // replay) the stamps stay at the last representable instant rather than overflow.
        self.n = self.n.saturating_add(1);
        Duration::try_milliseconds(self.n)
            .and_then(|d| self.start.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The originals of blobs archived in memory that the journal does not hold yet, to be
    /// archived in the transaction of the event that references them (so `ccr gc` never sees
    /// them stored but unreferenced), and the keys to reference. The originals held in memory
    /// are handed over to the event, not copied: they leave memory with it.
    fn flush(&mut self, keys: &[CcrKey]) -> Result<(Vec<CcrKey>, Vec<Keyed>), ReplayError> {
        let ccr = Ccr::new(self.journal.conn(), self.clock);
        let mut out = Vec::new();
        let mut archive = Vec::new();
        for k in keys {
            if !self.mem.borrow().stored(k) {
                // An original already in the file (from another session) is archived again
                // too: the put is idempotent and restores it if a gc took it meanwhile.
                // Held in memory: taken by its full key, not hashed again (it was at put).
                let held = self.mem.borrow_mut().store(k);
                // By full key: a blob that merely shares the short key is not this original.
                let bytes = held.or_else(|| ccr.get_key(k).ok());
                match bytes {
                    // Either way the bytes hash to `k`: memory hashed them at put, CCR's read
                    // verified them; the journal does not hash them a third time.
                    Some(b) => archive.push((*k, b)),
                    None => return Err(ReplayError::Vanished(k.short())),
                }
            }
            out.push(*k);
        }
        Ok((out, archive))
    }

    /// Journals one record of the engine, keeping the driver's view of the run: the digest of
    /// the history, not a copy of it (the engine holds the live history; see [`RunningDigest`]).
    fn record(
        &mut self,
        r: Record,
        title: &str,
        capture_id: &str,
        request: Option<&salvage_types::capture::Request>,
    ) -> Result<(), ReplayError> {
        let (blobs, archive) = self.flush(&r.blobs)?;
        let before = self.digest.digest();
        let change = match r.change {
            Change::None => HistoryChange::None,
            Change::Set(h) => {
                self.digest = RunningDigest::of(&h);
                if self.digest.digest() != before {
                    self.run.rewrites.push((self.version.saturating_add(1), before));
                }
                HistoryChange::Set(h)
            }
            Change::Append(m) => {
                self.digest.extend(&m);
                HistoryChange::Append(m)
            }
            Change::Lent(h) => {
                self.digest.extend(&h);
                HistoryChange::AppendShared(h)
            }
        };
        self.observe(&r.event);
        let id = format!("{}#{}", self.session, self.n);
        let ts = self.ts();
        let mut e =
            NewEvent::new(id, ts, r.event).with_history(change).with_blobs(blobs).with_archive(archive);
        if let EventBody::SessionStarted { request: r, .. } = &mut e.body {
            // The capture's request part: an export of the session is the request as sent.
            *r = request.cloned().map(Box::new);
        }
        if matches!(e.body, EventBody::SessionStarted { .. }) {
            self.version = self.journal.start_session_from(&self.session, title, Some(capture_id), e)?.seq;
            self.run.started = self.version;
        } else {
            let a = self.journal.append(&self.session, Some(self.version), vec![e])?;
            self.version = a.first().map_or(self.version, |a| a.seq);
        }
        if let Some(seq) = self.run.skipped_compactions.last_mut().filter(|s| **s == 0) {
            *seq = self.version;
        }
        Ok(())
    }

    /// What the checks need from an event.
    fn observe(&mut self, e: &EventBody) {
        match e {
            EventBody::CapLearned { cap, .. } => self.run.caps.push(*cap),
            EventBody::NoticeInjected {} => self.run.notices = self.run.notices.saturating_add(1),
            EventBody::RecoveryAttempt { rung, outcome: StepOutcome::Applied, .. } => {
                self.run.rung = Some(*rung)
            }
            EventBody::Compaction { outcome: StepOutcome::Skipped, .. } => {
                self.run.skipped_compactions.push(0)
            }
            EventBody::ProviderError { class, .. } if self.run.first_class.is_none() => {
                self.run.first_class = Some((*class, self.from_sim));
            }
            _ => {}
        }
    }
}

fn is_anthropic(capture: &Capture) -> bool {
    matches!(capture.provider.as_deref(), Some("anthropic" | "bedrock" | "vertex"))
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
    salvage_types::ccr_key::hash_json_into(&mut hasher, h);
    *hasher.finalize().as_bytes()
}

/// [`history_digest`] kept as the history changes, without holding the history: the hasher has
/// seen the JSON array up to its closing bracket, so an append hashes only the new messages.
///
/// Design note (issue #19, peak memory): the driver used to keep its own copy of the history to
/// digest it before each rewrite, a third copy beside the capture's and the engine's while the
/// journal encoded a fourth. The engine's history is the run's final history.
#[derive(Clone)]
pub struct RunningDigest {
    hasher: blake3::Hasher,
    empty: bool,
}

impl RunningDigest {
    /// The digest state of `h`.
    pub fn of(h: &[Message]) -> RunningDigest {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"[");
        let mut d = RunningDigest { hasher, empty: true };
        d.extend(h);
        d
    }

    /// `messages` appended.
    pub fn extend(&mut self, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        // The JSON of the appended messages, continuing the array (a comma before each but the
        // first of all), hashed in large pieces (see `hash_json_into`).
        let empty = self.empty;
        salvage_types::ccr_key::hash_written(&mut self.hasher, |w| {
            for (i, m) in messages.iter().enumerate() {
                if i > 0 || !empty {
                    let _ = w.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *w, m);
            }
        });
        self.empty = false;
    }

    /// [`history_digest`] of the history so far.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = self.hasher.clone();
        h.update(b"]");
        *h.finalize().as_bytes()
    }
}

fn failure_is_empty(c: &Capture) -> bool {
    c.failure.status.is_none() && c.failure.message.trim().is_empty() && c.failure.transport.is_none()
}

/// How attempt 0 starts. A capture holds a request as it was sent when it records a failure or
/// the size of the body as sent (`request.bytes`, written by an importer): attempt 0 sends it
/// exactly (fidelity, `capture.md` check 0), whether or not it failed. Only a history with
/// neither (a session state) starts a fresh turn with the per-turn passes. Before, a body
/// imported without a failure ran the passes on attempt 0, and its fidelity check failed
/// (adversarial review of the checks, finding 8).
fn turn_mode(capture: &Capture) -> TurnMode {
    let as_sent = capture.request.as_ref().is_some_and(|r| r.bytes.is_some());
    if failure_is_empty(capture) && !as_sent {
        TurnMode::Fresh
    } else {
        TurnMode::AsSent
    }
}

/// The engine's input for a capture's failing turn, `history` being its history.
fn turn_input(capture: &Capture, history: Vec<Message>, rung3_keep: usize) -> TurnInput {
    let config = Config::from_env(&capture.settings);
    let model = model_info(capture.model.as_deref(), config.context_window);
    let sim = Simulated::for_capture(capture);
    let surface = capture
        .client
        .as_ref()
        .and_then(|c| c.surface.as_deref())
        .map(Surface::parse)
        .unwrap_or(Surface::Chat);
    // Section 9: only with the provider engine, and only for the Anthropic family.
    let provider_edits = config.context_engine == ContextEngine::Provider && is_anthropic(capture);
    TurnInput {
        history,
        session: SessionState::with_cap(config.max_payload),
        compaction: CompactionState::default(),
        model,
        output_cap: sim.max_output_tokens().unwrap_or(model.max_output),
        surface,
        provider_edits,
        mode: turn_mode(capture),
        rung3_keep,
        provider: capture.provider.clone(),
        model_name: capture.model.clone(),
        settings: capture.settings.clone(),
        config,
    }
}

/// Replays one capture, journaling every step under `opts.session`: a loop that executes the
/// turn engine's actions against the simulated upstream and the journal.
pub fn replay(capture: &Capture, journal: &mut Journal, opts: Options<'_>) -> Result<Run, ReplayError> {
    replay_history(capture, capture.history.clone(), journal, opts)
}

/// [`replay`] with the capture's history handed over by value (`capture.history` itself is not
/// read; the caller may have taken it out), so that the engine's copy is the only one in memory
/// during the run instead of a second one beside the capture's. The journal's first event
/// (`Run::started`) holds it again afterwards.
pub fn replay_history(
    capture: &Capture,
    history: Vec<Message>,
    journal: &mut Journal,
    opts: Options<'_>,
) -> Result<Run, ReplayError> {
    let task = salvage_recovery::task::task_index(&history).and_then(|i| history.get(i)).cloned();
    let captured_class = (!failure_is_empty(capture))
        .then(|| classify(&FailureInput::new(capture.failure.clone(), history_weight(&history))).class);
    let input = turn_input(capture, history, opts.rung3_keep);
    let mut d = Driver {
        journal,
        clock: opts.clock,
        session: opts.session.clone(),
        start: opts.start,
        n: 0,
        version: 0,
        mem: RefCell::new(Held::default()),
        from_sim: true,
        digest: RunningDigest::of(&[]),
        run: Run {
            session: opts.session.clone(),
            started: 0,
            outcome: Outcome::Exhausted,
            attempts: 0,
            rung: None,
            sent: Vec::new(),
            first_class: None,
            captured_class,
            rewrites: Vec::new(),
            skipped_compactions: Vec::new(),
            compaction: CompactionState::default(),
            caps: input.config.max_payload.into_iter().collect(),
            notices: 0,
            history: Vec::new(),
            messages: Vec::new(),
            task,
            provider_cleared: Vec::new(),
        },
    };
    let title = capture.title.clone().unwrap_or_else(|| capture.id.clone());
    let mut sim = Simulated::for_capture(capture);
    let wire = CaptureWire(capture, input.model.default_output);
    // Escalation starts from the captured body's output limit when it is above the default.
    let mut turn =
        Turn::new(input).with_output_limit(capture.request.as_ref().and_then(salvage_wire::output_limit));
    let (summarizer, hooks) = (opts.summarizer, opts.hooks);
    loop {
        let action = {
            let mut archive = ReplayArchive { mem: &d.mem, ccr: Ccr::new(d.journal.conn(), d.clock) };
            let reader = ReplayArchive { mem: &d.mem, ccr: Ccr::new(d.journal.conn(), d.clock) };
            let lookup = |k: &str| reader.get(k);
            let mut io = EngineIo { archive: &mut archive, lookup: &lookup, summarizer, hooks, wire: &wire };
            turn.next(&mut io)?
        };
        match action {
            Action::Record(r) => d.record(*r, &title, &capture.id, capture.request.as_ref())?,
            Action::Say(line) => d.run.messages.push(line),
            Action::Send(req) => {
                let answer = d.send(capture, &mut sim, &req);
                turn.answer(answer)?;
            }
            Action::Done(outcome) => {
                d.run.outcome = outcome;
                break;
            }
        }
    }
    // The final history is the engine's: it applied every change the driver journaled.
    d.run.history = turn.history().to_vec();
    d.run.attempts = turn.attempts();
    d.run.compaction = turn.compaction().clone();
    Ok(d.run)
}

impl Driver<'_> {
    /// Sends a request to the simulated upstream. When the simulation accepts attempt 0 of a
    /// captured failure, the failure is one it does not model: the captured one stands.
    fn send(
        &mut self,
        capture: &Capture,
        sim: &mut Simulated,
        req: &salvage_recovery::engine::Request,
    ) -> Answer {
        let simulated = sim.send(req.bytes, &req.history, req.params.context_management);
        let first = self.run.sent.is_empty() && !failure_is_empty(capture);
        let (answer, from_sim) = match simulated {
            upstream::Answer::Accepted(_) if first => {
                (Answer::Rejected { failure: capture.failure.clone(), counted_tokens: None }, false)
            }
            upstream::Answer::Accepted(r) => (
                {
                    self.run.provider_cleared.extend(r.cleared_ids.iter().cloned());
                    Answer::Accepted {
                        stop_reason: r.stop_reason,
                        content: r.content,
                        input_tokens: r.input_tokens,
                        cleared_tool_uses: r.cleared_tool_uses,
                        cleared_tokens: r.cleared_tokens,
                    }
                },
                true,
            ),
            upstream::Answer::Rejected(r) => {
                (Answer::Rejected { failure: r.failure, counted_tokens: r.counted_tokens }, true)
            }
        };
        if self.run.first_class.is_none() {
            self.from_sim = from_sim;
        }
        let (accepted, real_tokens) = match &answer {
            Answer::Accepted { input_tokens, .. } => (true, Some(*input_tokens)),
            Answer::Rejected { counted_tokens, .. } => (false, *counted_tokens),
        };
        // The request's markers, each once, in the order they appear (a set beside the list: a
        // request after microcompact carries a marker per cleared result, thousands in a long one).
        let mut markers: Vec<String> = Vec::new();
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for m in &req.history {
            for k in salvage_types::ccr_key::find_markers(&m.content) {
                if seen.insert(k) {
                    markers.push(k.to_string());
                }
            }
        }
        let task_kept =
            self.run.task.as_ref().is_none_or(|t| salvage_recovery::task::task_survives(t, &req.history));
        self.run.sent.push(Sent {
            attempt: req.attempt,
            bytes: req.bytes,
            estimated_tokens: req.estimated_tokens,
            real_tokens,
            accepted,
            pairing_ok: pairing::is_valid(&req.history),
            markers,
            task_kept,
            as_sent: req.params.as_sent,
        });
        answer
    }
}
