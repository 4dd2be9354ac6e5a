//! One turn made into journal events: the request read as a history (unless the request path
//! already did), attempt 0 completed from it, the response's events, the history spliced onto the
//! session's (or the session started), and the capture of its first failure. `batch.rs` appends
//! the events of the turns the writer has at hand.

use super::cache::{Read, Recent};
use super::{session_id, title_of, Cut, Keyed, Turn, WriterOptions};
use crate::assemble::Assembled;
use crate::capture::{build_capture, CaptureInput};
use crate::route::Parsed;
use chrono::{DateTime, Utc};
use salvage_ccr::{Ccr, Clock};
use salvage_journal::state::MsgHash;
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_recovery::classify::{classify, FailureInput};
use salvage_types::capture::{Failure, StopReason};
use salvage_types::event::EventBody;
use salvage_types::{history_weight, Message};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Journals one turn on its own (and writes its capture), returning its session and the capture's
/// path: the turn-by-turn path, every request read afresh.
pub fn write_turn(
    journal: &mut Journal,
    options: &WriterOptions,
    turn: Turn,
) -> Result<(String, Option<PathBuf>), WriteError> {
    super::batch::write_batch(journal, options, &mut Recent::off(), vec![turn])
        .pop()
        .unwrap_or_else(|| Err(WriteError::Body("no turn written".into())))
}

/// A turn made into events, before they are appended.
pub(super) struct Prepared {
    /// The session.
    pub session: String,
    /// The request as read.
    pub read: Read,
    /// The change that brings the session's history to the request's (none: it is there).
    pub history: Option<NewEvent>,
    /// The turn's own events.
    pub steps: Vec<NewEvent>,
    /// Which of `steps` is the first `provider_error`.
    pub error_step: Option<usize>,
    /// The rest of the turn (for its capture).
    pub turn: Turn,
}

/// Reads a turn's request (through `recent`) and makes its events, the history change against
/// `head` (the session's message keys; none: a new session, started here).
pub(super) fn prepare(
    journal: &mut Journal,
    options: &WriterOptions,
    recent: &mut Recent,
    heads: &mut std::collections::HashMap<String, Vec<MsgHash>>,
    mut turn: Turn,
) -> Result<Prepared, WriteError> {
    let read = match turn.parsed.take() {
        Some(p) => {
            let session = session_id(turn.session_header.as_deref(), &p.history);
            Read { session, keyed: Arc::new(Keyed::of(&p.history)), parsed: Arc::new(p) }
        }
        None => {
            // The body is handed over (the turn keeps its length): the writer holds its only copy
            // and frees it once parsed.
            let mut whole = turn.body.take_whole().map_err(|e| WriteError::Body(e.to_string()))?;
            if turn.coding != Some(crate::decode::Coding::Identity) {
                // An encoded body is read decoded.
                whole = crate::decode::decoded_request(turn.coding, whole).map_err(WriteError::Body)?;
            }
            recent.read_body(turn.api, turn.session_header.as_deref(), whole).map_err(WriteError::Body)?
        }
    };
    let read = continuing(recent, &turn, read);
    let (parsed, keyed) = (&read.parsed, &read.keyed);
    let session = read.session.clone();
    complete_attempt_zero(&mut turn, &parsed.history, keyed);
    if let Some(asm) = turn.response.take() {
        let a = asm.finish();
        let reply = a.response_id.clone().filter(|_| a.stream_error.is_none() && turn.cut.is_none());
        if let Some(id) = reply {
            recent.chains.keep(id, session.clone(), parsed.clone(), a.message.clone());
        }
        record_response(&mut turn, a, &parsed.history);
    }
    store_blobs(journal, &turn)?;
    let head = match heads.get(&session) {
        Some(h) => Some(h.clone()),
        None => head_of(journal, &session)?,
    };
    let history = match head {
        None => {
            start(journal, options, &session, &turn, parsed)?;
            None
        }
        Some(head) => history_event(&session, &turn, &parsed.history, keyed, &head),
    };
    let mut steps: Vec<NewEvent> = std::mem::take(&mut turn.steps)
        .into_iter()
        .enumerate()
        .map(|(i, st)| {
            NewEvent::new(event_id(&session, &st.ts, i.saturating_add(1)), st.ts, st.body)
                .with_history(st.change)
                .with_blobs(st.blobs)
        })
        .collect();
    // A turn is written whole, so its run ended: the `run_ended` the engine did not write (the
    // failure went back to the client, the retry was accepted, or nothing failed) is written
    // here. Only a run cut short reads `incomplete`.
    if let Some(outcome) = salvage_journal::lookup::unended_run(steps.iter().map(|e| &e.body)) {
        let ts = steps.last().map_or_else(|| turn.started, |e| e.ts);
        let id = event_id(&session, &ts, steps.len().saturating_add(1));
        steps.push(NewEvent::new(id, ts, EventBody::RunEnded { outcome }));
    }
    heads.insert(session.clone(), head_after(keyed, &steps));
    let error_step = steps.iter().position(|s| matches!(s.body, EventBody::ProviderError { .. }));
    Ok(Prepared { session, read, history, steps, error_step, turn })
}

/// A request that continues a response the writer journaled (`previous_response_id`): in that
/// response's session (unless the request names its own) with the history the model is given.
fn continuing(recent: &Recent, turn: &Turn, read: Read) -> Read {
    let previous = read.parsed.request.fields.get("previous_response_id").and_then(serde_json::Value::as_str);
    let Some((session, earlier)) = previous.and_then(|id| recent.chains.after(id)) else { return read };
    let history = super::chain::continued(&earlier, &read.parsed.history);
    let session = if turn.session_header.is_some() { read.session } else { session };
    let mut parsed = Parsed::clone(&read.parsed);
    parsed.history = history;
    Read { session, keyed: Arc::new(Keyed::of(&parsed.history)), parsed: Arc::new(parsed) }
}

/// The session's message keys after a turn: the request's history, then the turn's own changes.
fn head_after(keyed: &Keyed, steps: &[NewEvent]) -> Vec<MsgHash> {
    let key = |m: &Message| *blake3::hash(&serde_json::to_vec(m).unwrap_or_default()).as_bytes();
    let mut head = keyed.messages.clone();
    for s in steps {
        match &s.history {
            HistoryChange::None => {}
            HistoryChange::Append(ms) => head.extend(ms.iter().map(key)),
            HistoryChange::AppendShared(ms) => head.extend(ms.iter().map(key)),
            HistoryChange::Set(ms) => head = ms.iter().map(key).collect(),
        }
    }
    head
}

/// Attempt 0 is the body as sent: its size is the body's, its digest and estimate come from the
/// parsed history.
fn complete_attempt_zero(turn: &mut Turn, history: &[Message], keyed: &Keyed) {
    let sent = turn.body.len() as u64;
    for s in &mut turn.steps {
        if let EventBody::RequestSent { bytes, history_digest, estimated_tokens, .. } = &mut s.body {
            if history_digest.is_empty() {
                *bytes = sent;
                history_digest.clone_from(&keyed.digest);
                *estimated_tokens = crate::recover::Recovery::estimated_tokens(history);
            }
        }
    }
}

/// Records a failure the response carried (an error event in a 200 stream, a cut by the
/// upstream): its `provider_error`, and the turn's failure when it is the first.
fn record_failure(turn: &mut Turn, failure: Failure, history: &[Message]) {
    let c = classify(&FailureInput::new(failure.clone(), history_weight(history)));
    turn.step(
        EventBody::ProviderError {
            status: failure.status,
            message: failure.message.clone(),
            transport: failure.transport.clone(),
            rejected_bytes: None,
            class: c.class,
            reason: c.reason,
        },
        HistoryChange::None,
        Vec::new(),
    );
    if turn.failure.is_none() {
        turn.failure = Some((failure, c.class));
    }
}

/// The events of the accepted response: a failure it carried, the acceptance of the request, the
/// reply appended with its stop reason. A failure after acceptance carries the status the client
/// saw (the accepted response's, 200 when a caller did not say): without one, a transport phrase
/// reads as a gateway that refused the request's size (the classifier's EOF rule), and the
/// capture would replay a cap that never was.
fn record_response(turn: &mut Turn, a: Assembled, history: &[Message]) {
    let accepted = Some(turn.accepted_status.unwrap_or(200));
    if let Some(err) = &a.stream_error {
        record_failure(
            turn,
            Failure { status: accepted, message: err.clone(), ..Failure::default() },
            history,
        );
    } else {
        turn.accepted(a.input_tokens);
    }
    if let Some(Cut::Upstream(e)) = turn.cut.clone() {
        let failure =
            Failure { status: accepted, message: e.clone(), transport: Some(e), ..Failure::default() };
        record_failure(turn, failure, history);
    }
    let stop = stop_reason(a.stop_reason.as_deref(), !a.message.tool_calls.is_empty());
    let has_reply = !a.message.content.is_empty() || !a.message.tool_calls.is_empty();
    turn.step(
        EventBody::ResponseReceived { stop_reason: stop, output_tokens: a.output_tokens },
        if has_reply { HistoryChange::Append(vec![a.message]) } else { HistoryChange::None },
        Vec::new(),
    );
}

/// The journal's stop reason for what the provider said: Anthropic's own words as they are,
/// OpenAI chat's `stop`, `tool_calls`, `length`, `content_filter` and a Responses status
/// (`completed`, with function calls a tool use; `incomplete`, the output limit) as their
/// equivalents. A response that ended without saying (cut off, or the client left) and a stop
/// the journal has no word for are unrecorded, never a complete answer.
fn stop_reason(said: Option<&str>, tool_calls: bool) -> StopReason {
    let Some(said) = said else { return StopReason::Unrecorded };
    StopReason::parse(said).unwrap_or(match said {
        "stop" | "completed" if tool_calls => StopReason::ToolUse,
        "stop" | "completed" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "incomplete" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        _ => StopReason::Unrecorded,
    })
}

/// Stores the originals recovery archived, before the events that reference them.
fn store_blobs(journal: &Journal, turn: &Turn) -> Result<(), WriteError> {
    let ccr = Ccr::new(journal.conn(), &NowClock);
    // One put of them all, compressed on every core; each came with the key the in-memory
    // archive computed when recovery archived it, so none is hashed again.
    ccr.put_all_keyed(&turn.blobs).map_err(|e| WriteError::Archive(e.to_string()))?;
    Ok(())
}

/// The message keys of a session's history as journaled (none: no such session).
pub(super) fn head_of(journal: &Journal, s: &str) -> Result<Option<Vec<MsgHash>>, WriteError> {
    match journal.version(s) {
        // The journaled history is compared by its messages' keys, which the journal keeps at hand.
        Ok(v) => Ok(Some(journal.history_hashes(s, v)?)),
        Err(JournalError::NoSession(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Starts the session with the client's history.
fn start(
    journal: &mut Journal,
    options: &WriterOptions,
    s: &str,
    turn: &Turn,
    parsed: &Parsed,
) -> Result<(), WriteError> {
    let history = &parsed.history;
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
            // What the first request carried besides its messages: an export is the request.
            request: Some(Box::new(parsed.request.clone())),
        },
    )
    .with_history(HistoryChange::Append(history.clone()));
    match journal.start_session(s, &title_of(history), first) {
        Ok(_) | Err(JournalError::SessionExists(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The client's history onto a session whose history has the keys `head`: what is new is
/// appended, and a history that does not continue the journaled one (the client compacted, or
/// edited, or sent an earlier request again) is spliced; none when it is the journaled one.
pub(super) fn history_event(
    s: &str,
    turn: &Turn,
    history: &[Message],
    keyed: &Keyed,
    head: &[MsgHash],
) -> Option<NewEvent> {
    let change = if keyed.messages.starts_with(head) {
        let new = history.get(head.len()..).unwrap_or_default().to_vec();
        if new.is_empty() {
            return None;
        }
        HistoryChange::Append(new)
    } else {
        HistoryChange::Set(history.to_vec())
    };
    let count = match &change {
        HistoryChange::Append(m) | HistoryChange::Set(m) => m.len() as u64,
        HistoryChange::AppendShared(m) => m.len() as u64,
        HistoryChange::None => 0,
    };
    let event =
        NewEvent::new(event_id(s, &turn.started, 0), turn.started, EventBody::MessageAppended { count })
            .with_history(change);
    Some(event)
}

/// Writes the capture of the turn's first failure, when captures are on and there was one.
/// `seq` is the event of its `provider_error` (0 when none was appended).
pub(super) fn write_capture(
    options: &WriterOptions,
    s: &str,
    turn: Turn,
    parsed: &Parsed,
    seq: u64,
) -> Result<Option<PathBuf>, WriteError> {
    let (Some(dir), Some((failure, class))) = (&options.captures, turn.failure) else {
        return Ok(None);
    };
    let input = CaptureInput {
        api: turn.api,
        client: turn.client,
        model: parsed.model.clone(),
        history: parsed.history.clone(),
        request: parsed.request.clone(),
        bytes: turn.body.len() as u64,
        failure,
        class,
        upstream: turn.upstream,
        rejected_retries: turn.rejected_retries,
    };
    // A capture is never replaced: a session that starts again (a restarted proxy, or one the
    // in-memory journal let go of) counts its events from 1 again, and its failure gets the
    // next free name instead of the earlier failure's.
    for n in 1..=MAX_NAME_TRIES {
        let id = if n == 1 { format!("{s}-{seq}") } else { format!("{s}-{seq}-{n}") };
        let capture = build_capture(&input, &id, &options.settings);
        let file = dir.join(format!("{id}.json"));
        match write_new(&file, capture.to_json_pretty().as_bytes()) {
            Ok(true) => return Ok(Some(file)),
            Ok(false) => continue,
            Err(source) => return Err(WriteError::Capture { file, source }),
        }
    }
    let file = dir.join(format!("{s}-{seq}.json"));
    let source =
        std::io::Error::new(std::io::ErrorKind::AlreadyExists, "every name for this capture is taken");
    Err(WriteError::Capture { file, source })
}

/// Names a capture may take before the writer gives up (`ID.json`, `ID-2.json`, …).
const MAX_NAME_TRIES: u32 = 1000;

/// Writes `bytes` to `path` whole, readable by its owner only (folders created 0700), unless
/// `path` exists: `false` then, and nothing is written. The file appears complete or not at all
/// (a temporary file beside it, hard-linked into place, which fails rather than replacing).
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir)?;
    }
    if path.symlink_metadata().is_ok() {
        return Ok(false);
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let written = o.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_data()
    });
    let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
        // A file system without hard links: the check above stands for the no-clobber link.
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists && path.symlink_metadata().is_err() => {
            std::fs::rename(&tmp, path)
        }
        r => r,
    });
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic
    use super::*;

    #[test]
    fn a_capture_file_is_never_replaced_and_is_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("captures/s-3.json");
        assert!(write_new(&file, b"first").unwrap());
        assert!(!write_new(&file, b"second").unwrap(), "an existing capture is left alone");
        assert_eq!(std::fs::read(&file).unwrap(), b"first");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&file), 0o600);
            assert_eq!(mode(&dir.path().join("captures")), 0o700);
        }
        // No temporary file is left behind either way.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("captures")).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }
}
