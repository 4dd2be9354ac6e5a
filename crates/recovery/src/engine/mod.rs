//! The client's turn (behaviour spec section 11) as a sans-IO state machine.
//!
//! A [`Turn`] is fed the session state, the history and the configuration; [`Turn::next`] yields
//! [`Action`]s — a journal record (an event, with the history change and the archived blobs it
//! references), a line for people, a request to send, the final outcome — and
//! [`Turn::answer`] takes what the upstream said (accepted, rejected, cut off). The engine reads
//! no clock, no file, no environment and sends nothing: it reaches the outside only through the
//! traits in [`EngineIo`] (archive, summarizer, hooks, and the request-size model of the wire
//! format). The replay driver and the proxy are loops that execute its actions.
//!
//! Phases, one method each: `start` → `passes` (microcompact, dedup, skill aging, pre-flight,
//! compaction: only for a fresh turn) → `build` (pairing repair and tool budget on the outgoing
//! copy; attempt 0 of a captured request is sent exactly as captured) → await the answer →
//! `rejected` (classify, payload policy, floor) → `ladder` (rungs judged on the request they would
//! send: a no-op is not sent) or `accepted` (context-edit mirror, escalation, the answer appended).

mod answer;
mod passes;
mod recover;

use crate::archive::{Archive, Archiver};
use crate::budget::{Calibration, ModelInfo, Surface};
use crate::compaction::{CompactionState, Hooks};
use crate::escalation::Escalation;
use crate::session::SessionState;
use crate::summarizer::Summarizer;
use salvage_types::capture::{Failure, Outcome, StopReason};
use salvage_types::event::{EventBody, InvalidSetting};
use salvage_types::{CcrKey, Config, Message};
use std::collections::VecDeque;

/// The request-size model of the wire format in use (the body a client sends for a history).
pub trait Wire {
    /// The size in bytes of the request body for `history`.
    fn request_bytes(&self, history: &[Message], params: &RequestParams) -> u64;
}

/// What a request carries besides its messages that the engine decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestParams {
    /// `max_tokens` of the request.
    pub max_tokens: u64,
    /// Provider-side context editing is requested (`context_management`).
    pub context_management: bool,
    /// Attempt 0 of a captured request: the body exactly as it was sent.
    pub as_sent: bool,
}

/// Everything the engine reaches the outside through, lent for one [`Turn::next`] call.
pub struct EngineIo<'a> {
    /// Where originals go before they are cut or dropped.
    pub archive: &'a mut dyn Archive,
    /// Reads an archived original by short key (the same store as `archive`).
    pub lookup: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    /// The level-2 summarizer.
    pub summarizer: &'a mut dyn Summarizer,
    /// PreCompact/PostCompact hooks.
    pub hooks: &'a mut dyn Hooks,
    /// The request-size model.
    pub wire: &'a dyn Wire,
}

/// How the turn starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnMode {
    /// The history is a request as it was sent (a capture with a recorded failure): attempt 0
    /// sends it exactly, steps 4–5 are skipped for it.
    AsSent,
    /// The history is a session state: the turn starts with steps 1–3.
    Fresh,
}

/// What a turn is given.
#[derive(Debug, Clone)]
pub struct TurnInput {
    /// The history.
    pub history: Vec<Message>,
    /// The settings (built at the edge from the environment or a capture).
    pub config: Config,
    /// The model's window and output limits.
    pub model: ModelInfo,
    /// The provider's output cap for escalation.
    pub output_cap: u64,
    /// Chat, agent or coder (the compaction ratio).
    pub surface: Surface,
    /// Provider-side context editing applies (engine `provider` and an Anthropic-family provider).
    pub provider_edits: bool,
    /// Per-session recovery state.
    pub session: SessionState,
    /// Per-session compaction state.
    pub compaction: CompactionState,
    /// How the turn starts.
    pub mode: TurnMode,
    /// Messages rung 3 keeps ([`crate::ladder::RUNG3_KEEP`]; other values inject a fault).
    pub rung3_keep: usize,
    /// Provider and model, for the session-start record.
    pub provider: Option<String>,
    /// The model name.
    pub model_name: Option<String>,
    /// The settings as given (recorded with the session start).
    pub settings: std::collections::BTreeMap<String, String>,
}

/// A history change recorded with an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// No change.
    None,
    /// The history is replaced (a rewrite).
    Set(Vec<Message>),
    /// Messages are appended.
    Append(Vec<Message>),
    /// The engine's whole history is appended (the session's start), lent rather than copied:
    /// the engine takes it back at its next step, without a copy once the driver has dropped its
    /// handle (journaled it). Issue #19: a copy here was a second input history in memory.
    Lent(std::sync::Arc<Vec<Message>>),
}

/// One journal record: an event, its history change and the blobs it references.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The event.
    pub event: EventBody,
    /// Its history change.
    pub change: Change,
    /// Archived originals the event references (kept by retention).
    pub blobs: Vec<CcrKey>,
}

/// A request to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// 0 for the first request, then the recovery attempt number.
    pub attempt: u32,
    /// The messages sent.
    pub history: Vec<Message>,
    /// Size and parameters.
    pub params: RequestParams,
    /// The body size by the wire model.
    pub bytes: u64,
    /// The client's token estimate.
    pub estimated_tokens: u64,
}

/// What the upstream said.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accepted.
    Accepted {
        /// Why the reply stopped.
        stop_reason: StopReason,
        /// The reply's text.
        content: String,
        /// The provider's input token count.
        input_tokens: u64,
        /// Tool uses the provider cleared (context editing).
        cleared_tool_uses: u64,
        /// Tokens it cleared.
        cleared_tokens: u64,
    },
    /// Rejected, by the provider, a gateway or the transport.
    Rejected {
        /// What the rejection carried: status, text, transport error, the rejected size when the
        /// upstream reported it (the one vocabulary of a recorded failure).
        failure: Failure,
        /// The provider's token count, when it got that far.
        counted_tokens: Option<u64>,
    },
}

/// What the engine asks its executor to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Journal this (the first record of a turn starts the session).
    Record(Box<Record>),
    /// Say this to people.
    Say(String),
    /// Send this request, then call [`Turn::answer`].
    Send(Box<Request>),
    /// The turn is over.
    Done(Outcome),
}

/// Why the engine stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// Archiving failed: the rung fails instead of losing content.
    #[error(transparent)]
    Archive(#[from] crate::archive::ArchiveError),
    /// The compaction pipeline failed.
    #[error("compaction: {0}")]
    Compaction(#[from] crate::compaction::CompactError),
    /// [`Turn::next`] was called while a request awaits its answer, or the turn is over.
    #[error("the engine awaits {0}")]
    Protocol(&'static str),
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Start,
    Passes,
    Build,
    Await,
    Answered(Answer),
    Ladder,
    Over,
}

/// What the engine keeps of the last request sent: its figures, not its messages (the request
/// itself went to the driver), so a turn holds one history besides the one it sends.
#[derive(Debug, Clone)]
struct Sent {
    /// The key of the request's messages, notices aside, as JSON: the no-op rule's "byte-identical".
    stripped_key: CcrKey,
    stripped_bytes: u64,
    /// The `history_digest` of the request's messages.
    digest: String,
    /// Their weight (calibration).
    weight: u64,
    /// The distinct CCR markers their contents carry, in order.
    markers: Vec<String>,
    bytes: u64,
    estimated: u64,
    params: RequestParams,
}

/// One turn of a session.
pub struct Turn {
    input: TurnInput,
    history: Vec<Message>,
    phase: Phase,
    queue: VecDeque<Action>,
    attempt: u32,
    rejected_once: bool,
    payload_path: bool,
    class: Option<crate::classify::Classification>,
    ratio: f64,
    calibration: Calibration,
    escalation: Escalation,
    max_tokens: u64,
    last: Option<Sent>,
    /// The history while it is lent to the driver ([`Change::Lent`]); `history` is empty then.
    lent: Option<std::sync::Arc<Vec<Message>>>,
}

impl Turn {
    /// A turn over `input`.
    pub fn new(mut input: TurnInput) -> Turn {
        // The turn's history is the input's, moved (the input keeps no second copy).
        let history = std::mem::take(&mut input.history);
        // The notice is injected once per session (section 7): a copy the session already holds
        // counts as injected, even when a rung later drops it into a transcript.
        if crate::payload::notice_already_injected(&history) {
            input.session.notice_injected = true;
        }
        let ratio = input.surface.ratio();
        let max_tokens = input.model.default_output;
        Turn {
            input,
            history,
            phase: Phase::Start,
            queue: VecDeque::new(),
            attempt: 0,
            rejected_once: false,
            payload_path: false,
            class: None,
            ratio,
            calibration: Calibration::default(),
            escalation: Escalation::default(),
            max_tokens,
            last: None,
            lent: None,
        }
    }

    /// Starts the output limit at the request's own when it asks for more than the model default
    /// (an imported body's `max_tokens`): the output-limit escalation doubles from there and
    /// never lowers it (behaviour spec section 8). `None` or a smaller value changes nothing.
    pub fn with_output_limit(mut self, limit: Option<u64>) -> Turn {
        if let Some(n) = limit {
            self.max_tokens = self.max_tokens.max(n);
        }
        self
    }

    /// The live history (after every rewrite the engine asked to record).
    pub fn history(&self) -> &[Message] {
        self.lent.as_deref().map_or(&self.history, |h| h)
    }

    /// The per-session recovery state (cap, notice flag).
    pub fn session(&self) -> &SessionState {
        &self.input.session
    }

    /// The per-session compaction state (counters, back-off).
    pub fn compaction(&self) -> &CompactionState {
        &self.input.compaction
    }

    /// Recovery attempts used after the first rejection.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The next action.
    pub fn next(&mut self, io: &mut EngineIo<'_>) -> Result<Action, EngineError> {
        loop {
            if let Some(a) = self.queue.pop_front() {
                return Ok(a);
            }
            // Every record went out: a lent history comes back before any phase reads it.
            if let Some(lent) = self.lent.take() {
                self.history = std::sync::Arc::try_unwrap(lent).unwrap_or_else(|h| (*h).clone());
            }
            match std::mem::replace(&mut self.phase, Phase::Over) {
                Phase::Start => self.start(),
                Phase::Passes => self.passes(io)?,
                Phase::Build => self.build(io)?,
                Phase::Await => {
                    self.phase = Phase::Await;
                    return Err(EngineError::Protocol("the answer to the request it sent"));
                }
                Phase::Answered(a) => self.answered(a, io)?,
                Phase::Ladder => self.ladder(io)?,
                Phase::Over => return Err(EngineError::Protocol("nothing: the turn is over")),
            }
        }
    }

    /// Feeds the answer to the request the last [`Action::Send`] asked for.
    pub fn answer(&mut self, answer: Answer) -> Result<(), EngineError> {
        if self.phase != Phase::Await {
            return Err(EngineError::Protocol("no answer: no request is in flight"));
        }
        self.phase = Phase::Answered(answer);
        Ok(())
    }

    fn record(&mut self, event: EventBody, change: Change, blobs: Vec<CcrKey>) {
        match &change {
            Change::Set(h) => self.history = h.clone(),
            Change::Append(m) => self.history.extend(m.iter().cloned()),
            Change::Lent(h) => self.lent = Some(std::sync::Arc::clone(h)),
            Change::None => {}
        }
        self.queue.push_back(Action::Record(Box::new(Record { event, change, blobs })));
    }

    fn say(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !line.is_empty() {
            self.queue.push_back(Action::Say(line));
        }
    }

    /// Ends the run: its last record says how ([`EventBody::RunEnded`]), so a journal tells a run
    /// that ended from one cut short.
    fn done(&mut self, outcome: Outcome) {
        self.record(EventBody::RunEnded { outcome }, Change::None, Vec::new());
        self.queue.push_back(Action::Done(outcome));
        self.phase = Phase::Over;
    }

    /// Session start: the first record carries the input history; invalid settings are said and
    /// journaled once, naming the variable, the raw value and the default used.
    fn start(&mut self) {
        let invalid: Vec<InvalidSetting> = self
            .input
            .config
            .report
            .iter()
            .filter_map(|(name, r)| {
                r.error.as_ref().map(|why| InvalidSetting {
                    name: name.clone(),
                    raw: r.raw.clone().unwrap_or_default(),
                    why: why.clone(),
                })
            })
            .collect();
        for s in &invalid {
            self.say(format!("⚠ invalid setting {}={:?}: {}", s.name, s.raw, s.why));
        }
        let event = EventBody::SessionStarted {
            provider: self.input.provider.clone(),
            model: self.input.model_name.clone(),
            context_window: Some(self.input.model.context_window),
            settings: self.input.settings.clone(),
            cap: self.input.session.cap,
            invalid_settings: invalid,
            // The replay driver records the capture's request part here.
            request: None,
        };
        let history = std::sync::Arc::new(std::mem::take(&mut self.history));
        self.record(event, Change::Lent(history), Vec::new());
        self.phase = match self.input.mode {
            TurnMode::Fresh => Phase::Passes,
            TurnMode::AsSent => Phase::Build,
        };
    }

    /// An archiver over the engine's archive that records what it archived.
    fn archiver<'a>(io: &'a mut EngineIo<'_>) -> Archiver<'a> {
        Archiver::new(Some(&mut *io.archive as &mut dyn Archive))
    }
}

/// Messages that are notices (the payload notice and the compaction notice), which the no-op rule
/// leaves aside.
pub fn is_notice(m: &Message) -> bool {
    m.role == salvage_types::Role::User
        && (m.content.starts_with(crate::payload::NOTICE_MARKER)
            || m.content.starts_with(crate::notices::COMPACTION_NOTICE))
}
