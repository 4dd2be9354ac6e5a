//! What the proxy writes: one [`Turn`] per client request (the history as the client sent it, every
//! attempt, error, rung and the reply), appended by a single writer thread that owns the journal,
//! so the request path never waits on SQLite; and the capture of a turn's first failure.
//!
//! The writer's queue is bounded in bytes ([`QUEUE_BYTES`]: the request bodies and rebuilt answers
//! of the turns waiting). A turn takes its share before it is queued; when the journal falls
//! behind, the end of the next response waits for room and new turns wait to start
//! (back-pressure on the clients) instead of the queue growing.

use crate::assemble::Assembler;
use crate::capture::{build_capture, CaptureInput};
use crate::route::{self, Api, Parsed};
use crate::spool::Kept;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use salvage_ccr::{Ccr, Clock};
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_recovery::classify::{classify, FailureInput};
use salvage_types::capture::{Failure, StopReason};
use salvage_types::event::EventBody;
use salvage_types::{history_weight, ErrorClass};
use salvage_types::{CcrKey, Message, Role};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{mpsc, Arc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The header a client sets to name its session.
pub const SESSION_HEADER: &str = "x-salvage-session";

/// The session a request belongs to: the `x-salvage-session` header, else a hash of the system
/// prompt and the first user message, so every turn of one conversation lands in one session.
pub fn session_id(header: Option<&str>, history: &[Message]) -> String {
    if let Some(h) = header.map(str::trim).filter(|h| !h.is_empty()) {
        return h.chars().filter(|c| c.is_ascii_graphic()).take(128).collect();
    }
    let mut hasher = blake3::Hasher::new();
    for m in history.iter().filter(|m| m.role == Role::System) {
        hasher.update(m.content.as_bytes());
        hasher.update(b"\0");
    }
    hasher.update(b"\x01");
    if let Some(u) = history.iter().find(|m| m.role == Role::User) {
        hasher.update(u.content.as_bytes());
    }
    let hex = hasher.finalize().to_hex();
    format!("proxy-{}", hex.as_str().get(..16).unwrap_or_default())
}

/// A session title: the start of its first user message.
pub fn title_of(history: &[Message]) -> String {
    let first = history.iter().find(|m| m.role == Role::User).map(|m| m.content.as_str()).unwrap_or("");
    let line = first.lines().next().unwrap_or("").trim();
    let mut t: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        t.push('…');
    }
    format!("proxy: {t}")
}

/// One event of a turn.
#[derive(Debug, Clone)]
pub struct Step {
    /// When it happened.
    pub ts: DateTime<Utc>,
    /// The event.
    pub body: EventBody,
    /// How it changes the history.
    pub change: HistoryChange,
    /// Blobs it references.
    pub blobs: Vec<CcrKey>,
}

/// Everything one client request produced, written in one batch by the writer thread (which
/// imports the request body and finishes the response parser there, off the request path).
#[derive(Debug)]
pub struct Turn {
    /// The API.
    pub api: Api,
    /// The `x-salvage-session` header.
    pub session_header: Option<String>,
    /// The client (its user agent's product).
    pub client: Option<String>,
    /// Where the request went (scheme and host, for capture titles).
    pub upstream: String,
    /// When the request arrived.
    pub started: DateTime<Utc>,
    /// The body as the client sent it (kept as it was relayed).
    pub body: Kept,
    /// The body read as a history, when the request path already did (a failure).
    pub parsed: Option<Parsed>,
    /// The events of the exchange, in order. A `request_sent` with an empty digest is attempt 0,
    /// completed from the parsed body by the writer.
    pub steps: Vec<Step>,
    /// Originals archived by recovery, stored in CCR before the events that reference them.
    pub blobs: Vec<(CcrKey, Vec<u8>)>,
    /// The first failure and its class: written as a capture when captures are on.
    pub failure: Option<(Failure, ErrorClass)>,
    /// The accepted response's parser, finished by the writer.
    pub response: Option<Assembler>,
    /// The accepted response broke off (upstream error mid-stream, or the client went away).
    pub cut: Option<Cut>,
}

/// How an accepted response broke off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// The upstream failed mid-stream: a failure.
    Upstream(String),
    /// The client went away before the end.
    Client,
}

impl Turn {
    /// A turn for a request of `api` with this body.
    pub fn new(api: Api, body: Bytes, started: DateTime<Utc>) -> Turn {
        Turn::relayed(api, Kept::whole(body), started)
    }

    /// A turn for a request of `api` whose body is being relayed.
    pub fn relayed(api: Api, body: Kept, started: DateTime<Utc>) -> Turn {
        Turn {
            api,
            session_header: None,
            client: None,
            upstream: String::new(),
            started,
            body,
            parsed: None,
            steps: Vec::new(),
            blobs: Vec::new(),
            failure: None,
            response: None,
            cut: None,
        }
    }

    /// Adds an event.
    pub fn step(&mut self, body: EventBody, change: HistoryChange, blobs: Vec<CcrKey>) {
        self.steps.push(Step { ts: Utc::now(), body, change, blobs });
    }

    /// What the turn weighs in the writer's queue: its request body and the answer rebuilt.
    pub fn weight(&self) -> usize {
        self.body.len().saturating_add(self.response.as_ref().map_or(0, Assembler::held))
    }

    /// Marks the latest request as accepted, with the tokens the provider counted.
    pub fn accepted(&mut self, tokens: Option<u64>) {
        if let Some(Step { body: EventBody::RequestSent { accepted, real_tokens, .. }, .. }) =
            self.steps.iter_mut().rev().find(|s| matches!(s.body, EventBody::RequestSent { .. }))
        {
            *accepted = true;
            if tokens.is_some() {
                *real_tokens = tokens;
            }
        }
    }
}

/// BLAKE3 (16 hex) of a history, as `request_sent` records it.
pub fn digest(h: &[Message]) -> String {
    CcrKey::of(&serde_json::to_vec(h).unwrap_or_default()).short()
}

/// A history's messages as the journal keys them (BLAKE3 of each message's JSON) and its
/// [`digest`], from one serialization of each message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    /// The key of each message, in order.
    pub messages: Vec<[u8; 32]>,
    /// The history's digest.
    pub digest: String,
}

impl Keyed {
    /// Keys `h`.
    pub fn of(h: &[Message]) -> Keyed {
        // The JSON of a history is its messages' JSON between brackets, comma-separated.
        let mut whole = blake3::Hasher::new();
        whole.update(b"[");
        let mut messages = Vec::with_capacity(h.len());
        let mut json = Vec::new();
        for (i, m) in h.iter().enumerate() {
            json.clear();
            if serde_json::to_writer(&mut json, m).is_err() {
                json.clear();
            }
            if i > 0 {
                whole.update(b",");
            }
            whole.update(&json);
            messages.push(*blake3::hash(&json).as_bytes());
        }
        whole.update(b"]");
        Keyed { messages, digest: CcrKey(*whole.finalize().as_bytes()).short() }
    }
}

/// Where and how the writer writes.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Captures go here (none when `None`).
    pub captures: Option<PathBuf>,
    /// `CHATCLI_*` settings in force, recorded in sessions and captures.
    pub settings: BTreeMap<String, String>,
}

/// The bytes of turns the writer's queue holds at most (request bodies and rebuilt answers).
pub const QUEUE_BYTES: usize = 64 << 20;

enum Job {
    /// A turn and its share of the queue, given back once it is written.
    Turn(Box<Turn>, Option<OwnedSemaphorePermit>),
    Flush(mpsc::Sender<()>),
}

/// The handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
    room: Arc<Semaphore>,
    capacity: u32,
}

/// Room in the writer's queue, being waited for.
pub type Reserve = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// What the writer did, for the proxy's log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A turn was journaled.
    Turn {
        /// The session.
        session: String,
        /// The capture written, if any.
        capture: Option<PathBuf>,
    },
    /// Writing failed.
    Failed(String),
}

impl Writer {
    /// Starts the writer thread with a queue of [`QUEUE_BYTES`]; `report` receives one line per
    /// turn written (or failed).
    pub fn start(
        journal: Journal,
        options: WriterOptions,
        report: Box<dyn Fn(Written) + Send>,
    ) -> Result<Writer, std::io::Error> {
        Writer::with_queue(journal, options, report, QUEUE_BYTES)
    }

    /// Starts the writer thread with a queue holding turns of at most `queue_bytes` in all (a
    /// turn larger than that is queued alone).
    pub fn with_queue(
        mut journal: Journal,
        options: WriterOptions,
        report: Box<dyn Fn(Written) + Send>,
        queue_bytes: usize,
    ) -> Result<Writer, std::io::Error> {
        let capacity = u32::try_from(queue_bytes.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new().name("salvage-proxy-journal".into()).spawn(move || {
            for job in rx {
                match job {
                    Job::Turn(t, room) => {
                        match write_turn(&mut journal, &options, *t) {
                            Ok((session, capture)) => report(Written::Turn { session, capture }),
                            Err(e) => report(Written::Failed(e.to_string())),
                        }
                        drop(room);
                    }
                    Job::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        })?;
        Ok(Writer { tx, room: Arc::new(Semaphore::new(capacity as usize)), capacity })
    }

    fn share(&self, weight: usize) -> u32 {
        u32::try_from(weight).unwrap_or(u32::MAX).clamp(1, self.capacity)
    }

    /// Waits for room for a turn of `weight` bytes in the queue.
    pub fn reserve(&self, weight: usize) -> Reserve {
        let n = self.share(weight);
        let room = self.room.clone();
        Box::pin(async move { room.acquire_many_owned(n).await.ok() })
    }

    /// Waits while the queue is full (a new turn starts only when there is room for more).
    pub async fn not_full(&self) {
        drop(self.room.acquire().await);
    }

    /// Room for a turn of `weight` bytes, if there is some now.
    pub fn try_reserve(&self, weight: usize) -> Option<OwnedSemaphorePermit> {
        self.room.clone().try_acquire_many_owned(self.share(weight)).ok()
    }

    /// Queues a turn in the room reserved for it.
    pub fn send_reserved(&self, turn: Turn, room: Option<OwnedSemaphorePermit>) {
        let _ = self.tx.send(Job::Turn(Box::new(turn), room));
    }

    /// Queues a turn once there is room for it.
    pub async fn send(&self, turn: Turn) {
        let room = self.reserve(turn.weight()).await;
        self.send_reserved(turn, room);
    }

    /// The bytes of the turns queued and not yet written (at most the queue's size).
    pub fn queued_bytes(&self) -> usize {
        (self.capacity as usize).saturating_sub(self.room.available_permits())
    }

    /// Waits until every turn queued before this call is written.
    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

/// Why a turn could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The journal refused it.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The request body could not be read as a history.
    #[error("request body: {0}")]
    Body(String),
    /// An archived original could not be stored.
    #[error("archive: {0}")]
    Archive(String),
    /// The capture file could not be written.
    #[error("{file}: cannot write the capture: {source}")]
    Capture {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

struct NowClock;
impl Clock for NowClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

fn event_id(session: &str, ts: &DateTime<Utc>, i: usize) -> String {
    format!("{session}@{}-{i}", ts.timestamp_nanos_opt().unwrap_or(0))
}

/// Journals one turn (and writes its capture), returning the capture's path.
pub fn write_turn(
    journal: &mut Journal,
    options: &WriterOptions,
    mut turn: Turn,
) -> Result<(String, Option<PathBuf>), WriteError> {
    let parsed = match turn.parsed.take() {
        Some(p) => p,
        None => {
            let body = turn.body.complete().map_err(|e| WriteError::Body(e.to_string()))?;
            route::parse(turn.api, &body).map_err(WriteError::Body)?
        }
    };
    let history = parsed.history;
    let session = session_id(turn.session_header.as_deref(), &history);
    // Attempt 0 is the body as sent: its size is the body's, its digest and estimate come from
    // the parsed history.
    let sent = turn.body.len() as u64;
    let keyed = Keyed::of(&history);
    for s in &mut turn.steps {
        if let EventBody::RequestSent { bytes, history_digest, estimated_tokens, .. } = &mut s.body {
            if history_digest.is_empty() {
                *bytes = sent;
                history_digest.clone_from(&keyed.digest);
                *estimated_tokens = crate::recover::Recovery::estimated_tokens(&history);
            }
        }
    }
    if let Some(asm) = turn.response.take() {
        let a = asm.finish();
        if let Some(err) = &a.stream_error {
            let failure = Failure { message: err.clone(), ..Failure::default() };
            let c = classify(&FailureInput::new(failure, history_weight(&history)));
            turn.step(
                EventBody::ProviderError {
                    status: None,
                    message: err.clone(),
                    transport: None,
                    rejected_bytes: None,
                    class: c.class,
                    reason: c.reason,
                },
                HistoryChange::None,
                Vec::new(),
            );
            if turn.failure.is_none() {
                turn.failure = Some((Failure { message: err.clone(), ..Failure::default() }, c.class));
            }
        } else {
            turn.accepted(a.input_tokens);
        }
        match turn.cut.clone() {
            Some(Cut::Upstream(e)) => {
                let failure =
                    Failure { message: e.clone(), transport: Some(e.clone()), ..Failure::default() };
                let c = classify(&FailureInput::new(failure, history_weight(&history)));
                turn.step(
                    EventBody::ProviderError {
                        status: None,
                        message: e.clone(),
                        transport: Some(e.clone()),
                        rejected_bytes: None,
                        class: c.class,
                        reason: c.reason,
                    },
                    HistoryChange::None,
                    Vec::new(),
                );
                if turn.failure.is_none() {
                    turn.failure = Some((
                        Failure {
                            status: None,
                            message: e.clone(),
                            transport: Some(e.clone()),
                            rejected_request_bytes: None,
                        },
                        c.class,
                    ));
                }
            }
            Some(Cut::Client) | None => {}
        }
        // The journal's stop reasons are typed: the output limit as each provider says it, any
        // other stop (end_turn, tool_use, stop, completed) as end_turn. A cut-off answer is said
        // by its provider_error (upstream) or not at all (the client left).
        let stop = match a.stop_reason.as_deref() {
            Some("max_tokens" | "incomplete") => StopReason::MaxTokens,
            Some("length") => StopReason::Length,
            _ => StopReason::EndTurn,
        };
        let has_reply = !a.message.content.is_empty() || !a.message.tool_calls.is_empty();
        turn.step(
            EventBody::ResponseReceived { stop_reason: stop, output_tokens: a.output_tokens },
            if has_reply { HistoryChange::Append(vec![a.message]) } else { HistoryChange::None },
            Vec::new(),
        );
    }
    {
        let ccr = Ccr::new(journal.conn(), &NowClock);
        for (_, bytes) in &turn.blobs {
            ccr.put(bytes).map_err(|e| WriteError::Archive(e.to_string()))?;
        }
    }
    let s = session.as_str();
    let mut events = Vec::new();
    let version = match journal.version(s) {
        Ok(v) => Some(v),
        Err(JournalError::NoSession(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(version) = version {
        // The client resends the whole conversation: what is new is appended; a history that
        // does not continue the journaled one (the client compacted, or edited) is spliced. The
        // journaled history is compared by its messages' keys, which the journal keeps at hand.
        let head = journal.history_hashes(s, version)?;
        let change = if keyed.messages.starts_with(&head) {
            let new = history.get(head.len()..).unwrap_or_default().to_vec();
            (!new.is_empty()).then_some(HistoryChange::Append(new))
        } else {
            Some(HistoryChange::Set(history.clone()))
        };
        if let Some(change) = change {
            let count = match &change {
                HistoryChange::Append(m) | HistoryChange::Set(m) => m.len() as u64,
                HistoryChange::None => 0,
            };
            events.push(
                NewEvent::new(
                    event_id(s, &turn.started, 0),
                    turn.started,
                    EventBody::MessageAppended { count },
                )
                .with_history(change),
            );
        }
    } else {
        let first = NewEvent::new(
            event_id(s, &turn.started, 0),
            turn.started,
            EventBody::SessionStarted {
                provider: Some(turn.api.provider().to_string()),
                model: parsed.model.clone(),
                context_window: None,
                settings: options.settings.clone(),
                cap: None,
                invalid_settings: Vec::new(),
            },
        )
        .with_history(HistoryChange::Append(history.clone()));
        match journal.start_session(s, &title_of(&history), first) {
            Ok(_) | Err(JournalError::SessionExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut error_index = None;
    for (i, st) in turn.steps.into_iter().enumerate() {
        if error_index.is_none() && matches!(st.body, EventBody::ProviderError { .. }) {
            error_index = Some(events.len());
        }
        events.push(
            NewEvent::new(event_id(s, &st.ts, i.saturating_add(1)), st.ts, st.body)
                .with_history(st.change)
                .with_blobs(st.blobs),
        );
    }
    let appended = journal.append(s, None, events)?;
    let (Some(dir), Some((failure, class))) = (&options.captures, turn.failure) else {
        return Ok((session, None));
    };
    let seq = error_index.and_then(|i| appended.get(i)).map(|a| a.seq).unwrap_or(0);
    let input = CaptureInput {
        api: turn.api,
        client: turn.client,
        model: parsed.model,
        history,
        request: parsed.request,
        bytes: turn.body.len() as u64,
        failure,
        class,
        upstream: turn.upstream,
    };
    let capture = build_capture(&input, &format!("{s}-{seq}"), &options.settings);
    let file = dir.join(format!("{}.json", capture.id));
    write_atomic(&file, capture.to_json_pretty().as_bytes())
        .map_err(|source| WriteError::Capture { file: file.clone(), source })?;
    Ok((session, Some(file)))
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_follow_the_conversation() {
        let a = vec![Message::system("S"), Message::user("task")];
        let mut b = a.clone();
        b.push(Message::assistant("ok"));
        b.push(Message::user("more"));
        assert_eq!(session_id(None, &a), session_id(None, &b));
        assert_ne!(session_id(None, &a), session_id(None, &[Message::system("S"), Message::user("other")]));
        assert_eq!(session_id(Some(" mine "), &a), "mine");
    }

    #[test]
    fn a_keyed_history_has_the_digest_of_its_json() {
        let h =
            [Message::system("S"), Message::user("a \"quoted\" ünïcode task\n"), Message::assistant("ok")];
        for n in 0..=h.len() {
            assert_eq!(Keyed::of(&h[..n]).digest, digest(&h[..n]));
        }
        assert_ne!(Keyed::of(&h[..1]).messages, Keyed::of(&h[1..2]).messages);
    }

    #[test]
    fn consecutive_turns_append_to_one_session() {
        let mut j = Journal::in_memory().expect("journal");
        let opts = WriterOptions { captures: None, settings: BTreeMap::new() };
        let mk = |body: &str, reply: &str| {
            let mut t = Turn::new(Api::AnthropicMessages, Bytes::from(body.to_string()), Utc::now());
            t.step(
                EventBody::RequestSent {
                    attempt: 0,
                    bytes: body.len() as u64,
                    estimated_tokens: 0,
                    real_tokens: None,
                    history_digest: String::new(),
                    accepted: false,
                },
                HistoryChange::None,
                Vec::new(),
            );
            let mut a = Assembler::new(Api::AnthropicMessages, false);
            a.feed(format!(r#"{{"content":[{{"type":"text","text":"{reply}"}}],"stop_reason":"end_turn","usage":{{"input_tokens":7,"output_tokens":1}}}}"#).as_bytes());
            t.response = Some(a);
            t
        };
        let b1 = r#"{"model":"m","max_tokens":9,"system":"S","messages":[{"role":"user","content":"task"}]}"#;
        let (s1, _) = write_turn(&mut j, &opts, mk(b1, "one")).expect("turn 1");
        let b2 = r#"{"model":"m","max_tokens":9,"system":"S","messages":[{"role":"user","content":"task"},{"role":"assistant","content":"one"},{"role":"user","content":"next"}]}"#;
        let (s2, _) = write_turn(&mut j, &opts, mk(b2, "two")).expect("turn 2");
        assert_eq!(s1, s2);
        let head = j.head(&s1).expect("head");
        assert_eq!(head.history.len(), 5);
        // The writer compares histories by the keys the journal gives its messages.
        let v = j.version(&s1).expect("version");
        assert_eq!(j.history_hashes(&s1, v).expect("hashes"), Keyed::of(&head.history).messages);
        assert_eq!(head.history[4].content, "two");
        let kinds: Vec<String> = j.events(&s1, 0, 100).expect("events").into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                "session_started",
                "request_sent",
                "response_received",
                "message_appended",
                "request_sent",
                "response_received"
            ]
        );
        let events = j.events(&s1, 0, 100).expect("events");
        assert!(matches!(
            events[1].body,
            EventBody::RequestSent { accepted: true, real_tokens: Some(7), .. }
        ));
    }
}
