//! Live recovery of one turn: the turn engine of `salvage-recovery` (classification, payload
//! policy, floor, ladder, notice — the same state machine the replay driver executes) driven by
//! the proxy. The proxy answers the engine's requests with what the upstream said and records what
//! it asks to record; the body of a retry is the client's body with its messages rebuilt.

use crate::record::Turn;
use crate::route::{self, Api};
use salvage_journal::HistoryChange;
use salvage_recovery::archive::{Archive, MemoryArchive};
use salvage_recovery::budget::{model_info, Surface, CHARS_PER_TOKEN};
use salvage_recovery::compaction::{CompactionState, NoHooks};
use salvage_recovery::engine::{self, Action, Change, EngineIo, RequestParams, TurnInput, TurnMode, Wire};
use salvage_recovery::session::SessionState;
use salvage_recovery::summarizer::Builtin;
use salvage_types::capture::Request;
use salvage_types::event::EventBody;
use salvage_types::{history_weight, Config, Message};
use serde_json::Value;
use std::collections::BTreeMap;

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
    /// Send this body (the engine's request `attempt`).
    Retry(Vec<u8>),
    /// Stop: pass the rejection to the client.
    GiveUp(String),
}

/// The request-size model: the client's body with its messages rebuilt, exactly as it would go out.
struct ProxyWire<'a>(&'a Request);

impl Wire for ProxyWire<'_> {
    fn request_bytes(&self, history: &[Message], _: &RequestParams) -> u64 {
        salvage_wire::request_bytes(self.0, history)
    }
}

/// The recovery of one turn.
pub struct Recovery {
    request: Request,
    engine: engine::Turn,
    archive: MemoryArchive,
    last: Option<engine::Request>,
}

impl Recovery {
    /// A recovery of the turn whose request (as the client sent it) carried `history`.
    pub fn new(
        api: Api,
        request: Request,
        history: Vec<Message>,
        config: Config,
        session: SessionState,
        settings: BTreeMap<String, String>,
    ) -> Recovery {
        let model_name = request.fields.get("model").and_then(Value::as_str).map(str::to_string);
        let model = model_info(model_name.as_deref(), config.context_window);
        let input = TurnInput {
            history,
            config,
            model,
            output_cap: model.max_output,
            surface: Surface::Chat,
            provider_edits: false,
            session,
            compaction: CompactionState::default(),
            mode: TurnMode::AsSent,
            rung3_keep: salvage_recovery::ladder::RUNG3_KEEP,
            provider: Some(api.provider().to_string()),
            model_name,
            settings,
        };
        Recovery { request, engine: engine::Turn::new(input), archive: MemoryArchive::new(), last: None }
    }

    /// Recovery attempts made.
    pub fn attempts(&self) -> u32 {
        self.engine.attempts()
    }

    /// The session's recovery state as the engine left it (cap, notice, halved budget).
    pub fn session(&self) -> SessionState {
        self.engine.session().clone()
    }

    /// The `request_sent` of the last request, for the proxy to journal when it is accepted (the
    /// answer streams to the client; the writer completes it).
    pub fn sent_step(&self, bytes: u64) -> Option<EventBody> {
        self.last.as_ref().map(|r| EventBody::RequestSent {
            attempt: r.attempt,
            bytes,
            estimated_tokens: r.estimated_tokens,
            real_tokens: None,
            history_digest: crate::record::digest(&r.history),
            accepted: false,
        })
    }

    /// The estimated tokens of a history (the client's estimate).
    pub fn estimated_tokens(history: &[Message]) -> u64 {
        (history_weight(history) as f64 / CHARS_PER_TOKEN).ceil() as u64
    }

    /// Runs the engine to its next action that needs the outside: records go into `turn`, lines
    /// to `say`; returns the request it sends, or the outcome.
    fn run(
        &mut self,
        turn: &mut Turn,
        say: &dyn Fn(&str),
    ) -> Result<Result<engine::Request, String>, String> {
        let wire = ProxyWire(&self.request);
        let snapshot = self.archive.clone();
        let lookup = move |k: &str| snapshot.get(k);
        let mut summarizer = Builtin;
        let mut hooks = NoHooks;
        loop {
            let action = {
                let mut io = EngineIo {
                    archive: &mut self.archive,
                    lookup: &lookup,
                    summarizer: &mut summarizer,
                    hooks: &mut hooks,
                    wire: &wire,
                };
                self.engine.next(&mut io).map_err(|e| e.to_string())?
            };
            match action {
                Action::Record(r) => {
                    // The writer journals the session start and the client's history itself.
                    if matches!(r.event, EventBody::SessionStarted { .. }) {
                        continue;
                    }
                    for k in &r.blobs {
                        if !turn.blobs.iter().any(|(have, _)| have == k) {
                            // By full key, without hashing it again (it was at put).
                            if let Some(b) = self.archive.original(k) {
                                turn.blobs.push((*k, b.to_vec()));
                            }
                        }
                    }
                    let change = match r.change {
                        Change::None => HistoryChange::None,
                        Change::Set(h) => HistoryChange::Set(h),
                        Change::Append(m) => HistoryChange::Append(m),
                        Change::Lent(h) => HistoryChange::AppendShared(h),
                    };
                    turn.step(r.event, change, r.blobs);
                }
                Action::Say(line) => say(&line),
                Action::Send(req) => return Ok(Ok(*req)),
                Action::Done(outcome) => return Ok(Err(outcome.as_str().to_string())),
            }
        }
    }

    /// After the rejection of the last request (attempt 0, the client's, first): the engine's
    /// records go into `turn`; returns the body to retry, or why to stop.
    pub fn next(&mut self, r: &Rejection, turn: &mut Turn, say: &dyn Fn(&str)) -> Result<Next, String> {
        if self.last.is_none() {
            // The engine's attempt 0 is the request the client already sent.
            match self.run(turn, say)? {
                Ok(req) => self.last = Some(req),
                Err(outcome) => return Ok(Next::GiveUp(outcome)),
            }
        }
        let counted_tokens = crate::capture::overflow_numbers(&r.message).map(|(n, _)| n);
        self.engine
            .answer(engine::Answer::Rejected {
                failure: salvage_types::capture::Failure {
                    status: r.status,
                    message: r.message.clone(),
                    transport: r.transport.clone(),
                    rejected_request_bytes: r.rejected_bytes,
                },
                counted_tokens,
            })
            .map_err(|e| e.to_string())?;
        match self.run(turn, say)? {
            Ok(req) => {
                let body = route::body_for(&self.request, &req.history);
                self.last = Some(req);
                Ok(Next::Retry(body))
            }
            Err(outcome) => Ok(Next::GiveUp(outcome)),
        }
    }
}
