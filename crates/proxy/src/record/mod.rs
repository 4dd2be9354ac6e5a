//! What the proxy writes: one [`Turn`] per client request (the history as the client sent it, every
//! attempt, error, rung and the reply), appended by a single writer thread that owns the journal,
//! so the request path never waits on SQLite; and the capture of a turn's first failure.
//!
//! The writer's queue is bounded in bytes ([`QUEUE_BYTES`]: the request bodies and rebuilt answers
//! of the turns waiting). A turn takes its share before it is queued; when the journal falls
//! behind, the end of the next response waits for room and new turns wait to start
//! (back-pressure on the clients) instead of the queue growing.
//!
//! This module holds the turn and how a session is named; `writer.rs` the thread and its queue;
//! `write.rs` how one turn becomes journal events (and a capture); `batch.rs` how the turns at hand
//! are appended together; `cache.rs` the requests read last, so a conversation's next turn is not
//! read again from its start; `retain.rs` how much an in-memory journal (`--no-journal`) keeps.

mod batch;
mod cache;
mod chain;
mod retain;
mod write;
mod writer;

pub use batch::{write_batch, TurnResult, BATCH_BYTES, BATCH_TURNS};
pub use cache::{Recent, CACHE_BYTES, CACHE_SESSIONS};
pub use chain::CHAINS;
pub use retain::{Held, Keep};
pub use write::{write_turn, WriteError};
pub use writer::{Reserve, Writer, WriterOptions, Written, QUEUE_BYTES};

use crate::assemble::Assembler;
use crate::route::{Api, Parsed};
use crate::spool::Kept;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use salvage_journal::HistoryChange;
use salvage_types::capture::Failure;
use salvage_types::event::EventBody;
use salvage_types::ErrorClass;
use salvage_types::{CcrKey, Message, Role};

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
    /// The body's content-coding (its `content-encoding`; none: one the proxy does not read).
    pub coding: Option<crate::decode::Coding>,
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
    /// The sizes of the turn's later attempts (recovery's retries) the upstream rejected for
    /// their size: the capture models the tightest cap all its rejections show.
    pub rejected_retries: Vec<u64>,
    /// The status of the response the upstream accepted the request with (what the client saw
    /// before a failure that came after it).
    pub accepted_status: Option<u16>,
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
            coding: Some(crate::decode::Coding::Identity),
            parsed: None,
            steps: Vec::new(),
            blobs: Vec::new(),
            failure: None,
            response: None,
            cut: None,
            rejected_retries: Vec::new(),
            accepted_status: None,
        }
    }

    /// Adds an event.
    pub fn step(&mut self, body: EventBody, change: HistoryChange, blobs: Vec<CcrKey>) {
        self.steps.push(Step { ts: Utc::now(), body, change, blobs });
    }

    /// Records attempt 0, the client's body as relayed: the writer completes it from the body (its
    /// size) and the parsed history (digest, estimate).
    pub fn attempt_zero(&mut self) {
        self.step(
            EventBody::RequestSent {
                attempt: 0,
                bytes: 0,
                estimated_tokens: 0,
                real_tokens: None,
                history_digest: String::new(),
                accepted: false,
            },
            HistoryChange::None,
            Vec::new(),
        );
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
#[derive(Debug, Clone)]
pub struct Keyed {
    /// The key of each message, in order.
    pub messages: Vec<[u8; 32]>,
    /// The history's digest.
    pub digest: String,
    /// The digest's hasher after the last message (before the closing bracket), from which the
    /// digest of a history that extends this one goes on.
    open: blake3::Hasher,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Keyed) -> bool {
        self.messages == other.messages && self.digest == other.digest
    }
}

impl Eq for Keyed {}

impl Keyed {
    /// Keys `h`.
    pub fn of(h: &[Message]) -> Keyed {
        // The JSON of a history is its messages' JSON between brackets, comma-separated.
        let mut open = blake3::Hasher::new();
        open.update(b"[");
        Keyed::extended(Vec::with_capacity(h.len()), open, h)
    }

    /// Keys `h` when it begins with `prefix`, keyed as `self`: only the messages after it are
    /// serialized and hashed (none, when `h` is `prefix`).
    pub fn extend(&self, prefix: &[Message], h: &[Message]) -> Keyed {
        match h.strip_prefix(prefix) {
            Some(tail) if prefix.len() == self.messages.len() => {
                Keyed::extended(self.messages.clone(), self.open.clone(), tail)
            }
            _ => Keyed::of(h),
        }
    }

    /// `messages` and `open` (the keys and hasher of a prefix) followed by `tail`.
    fn extended(mut messages: Vec<[u8; 32]>, mut open: blake3::Hasher, tail: &[Message]) -> Keyed {
        let mut json = Vec::new();
        for m in tail {
            json.clear();
            if serde_json::to_writer(&mut json, m).is_err() {
                json.clear();
            }
            if !messages.is_empty() {
                open.update(b",");
            }
            open.update(&json);
            messages.push(*blake3::hash(&json).as_bytes());
        }
        let mut whole = open.clone();
        whole.update(b"]");
        Keyed { messages, digest: CcrKey(*whole.finalize().as_bytes()).short(), open }
    }
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
    fn a_history_keyed_from_its_prefix_is_keyed_as_a_whole() {
        let h =
            [Message::system("S"), Message::user("a \"quoted\" ünïcode task\n"), Message::assistant("ok")];
        for p in 0..=h.len() {
            let prefix = Keyed::of(&h[..p]);
            for n in 0..=h.len() {
                // A history that does not begin with the prefix is keyed afresh.
                assert_eq!(prefix.extend(&h[..p], &h[..n]), Keyed::of(&h[..n]), "prefix {p}, history {n}");
                assert_eq!(prefix.extend(&h[..p], &h[..n]).digest, digest(&h[..n]));
            }
        }
        let edited = [Message::system("S"), Message::user("other"), Message::assistant("ok")];
        assert_eq!(Keyed::of(&h[..2]).extend(&h[..2], &edited), Keyed::of(&edited));
    }
}
