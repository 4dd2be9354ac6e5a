//! Client session files (Claude Code transcripts, Codex CLI rollouts, Cline task histories) read
//! into a [`Session`]: the steps as they happened, the subagent sidechains kept apart, and a
//! [`Report`] that accounts for every record and block of the file.
//!
//! # Opaque blocks (`Message.wire`)
//!
//! A session file holds the messages its client sends to a provider API, so each importer reads
//! them with that API's body reader and keeps what the message model has no field for the same
//! way a body import does: in the message's `wire` template ([`crate::shape`]), in place. Claude
//! Code and Cline messages are Anthropic Messages (`thinking` with its signature,
//! `redacted_thinking`, documents, server tool blocks, `cache_control`…); Codex response items are
//! OpenAI Responses input items (`reasoning` with its `encrypted_content`, web search calls,
//! `compaction`…, and a `developer` message's role). One convention, one reader: the body
//! rebuilt for the session's API ([`crate::request_body`]) sends every such block back verbatim
//! and in order, and its size counts them. The modeled text is never stored twice.
//!
//! # What a session file is not
//!
//! A session file is not a request body: it does not hold the tool definitions, the parameters
//! or (for Claude Code) the system prompt a request carried, so an imported capture's
//! `request.bytes` is unknown (`None`) and its history weighs only what the file holds.

use crate::Imported;
use salvage_types::capture::{Request, RequestFormat};
use salvage_types::timeline::{self, Step};
use salvage_types::History;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A session file as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The source format.
    pub format: RequestFormat,
    /// The client's session id, when the file names one.
    pub id: Option<String>,
    /// The client that wrote the file (`claude-code`, `codex`, `cline`).
    pub client: &'static str,
    /// The model last named by the file.
    pub model: Option<String>,
    /// The provider family.
    pub provider: Option<String>,
    /// What happened, in order (the active branch only).
    pub steps: Vec<Step>,
    /// Subagent conversations, kept apart from the main history.
    pub sidechains: Vec<Sidechain>,
    /// Request-level fields the file records (e.g. Codex's base instructions), for
    /// `Capture.request.fields`.
    pub fields: Map<String, Value>,
    /// Every record and block of the file, accounted for.
    pub report: Report,
    /// Errors the client recorded in the file in place of a response (Claude Code's
    /// `isApiErrorMessage` records): the failures it saw, in order.
    pub errors: Vec<SeenError>,
}

/// A failure the client wrote into its session file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenError {
    /// How many steps came before it: equal to the number of steps when nothing followed it,
    /// i.e. the session ended on this failure.
    pub after_steps: usize,
    /// When, as the file wrote it.
    pub ts: Option<String>,
    /// The HTTP status, when the file says.
    pub status: Option<u16>,
    /// The text the client showed.
    pub message: String,
}

/// A subagent's conversation (Claude Code `isSidechain` records).
#[derive(Debug, Clone, PartialEq)]
pub struct Sidechain {
    /// The agent id, or the uuid of the sidechain's first record.
    pub id: String,
    /// Its history.
    pub history: History,
}

impl Session {
    /// The history after the last step: what the client's next request would carry.
    pub fn history(&self) -> History {
        timeline::fold(&self.steps)
    }

    /// The session as an importer result (its final history).
    pub fn imported(&self) -> Imported {
        Imported {
            history: self.history(),
            model: self.model.clone(),
            provider: self.provider.clone(),
            request: Some(self.request()),
        }
    }

    /// The failure the session ended on, if the client recorded one after its last step.
    pub fn final_error(&self) -> Option<&SeenError> {
        self.errors.last().filter(|e| e.after_steps == self.steps.len())
    }

    /// The capture's request part: the format and the fields the file records. `bytes` is
    /// `None`: a session file is not the body that was sent.
    pub fn request(&self) -> Request {
        Request { format: self.format, bytes: None, fields: self.fields.clone() }
    }
}

/// What became of one record or block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Represented in the session's steps (a message, a tool call, a compaction…).
    History,
    /// Carried verbatim in a message's `wire`.
    Opaque,
    /// Part of a sidechain (a subagent's conversation), kept apart.
    Apart,
    /// Deliberately left out, with the reason.
    Skipped(String),
}

impl Disposition {
    /// What a block's template made of it: a slot is modeled (in the history), a verbatim copy
    /// is carried opaquely.
    pub(crate) fn of_template(template: &Value) -> Disposition {
        if crate::shape::is_slot(template) {
            Disposition::History
        } else {
            Disposition::Opaque
        }
    }
}

/// The counts of one kind of record or block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// How many the file holds.
    pub seen: u64,
    /// Represented in the steps.
    pub history: u64,
    /// Carried opaquely.
    pub opaque: u64,
    /// In a sidechain.
    pub apart: u64,
    /// Left out, by reason.
    pub skipped: BTreeMap<String, u64>,
}

impl Tally {
    /// Everything accounted for: `seen` equals the sum of the dispositions.
    pub fn balanced(&self) -> bool {
        let mut parts =
            [self.history, self.opaque, self.apart].into_iter().chain(self.skipped.values().copied());
        parts.try_fold(0u64, u64::checked_add) == Some(self.seen)
    }
}

/// Every record (`record:TYPE`), block (`block:TYPE`) and notable field (`field:NAME`) of a
/// session file, counted by what became of it. Nothing is dropped silently.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Counts by kind.
    pub kinds: BTreeMap<String, Tally>,
    /// Things a reader should know (an approximation, a broken chain, a truncated last line).
    pub notes: Vec<String>,
}

impl Report {
    /// Counts one item of `kind`.
    pub fn count(&mut self, kind: &str, d: Disposition) {
        let t = self.kinds.entry(kind.to_string()).or_default();
        // Counts of a file's records and blocks: far below u64::MAX; saturating all the same.
        t.seen = t.seen.saturating_add(1);
        let n = match d {
            Disposition::History => &mut t.history,
            Disposition::Opaque => &mut t.opaque,
            Disposition::Apart => &mut t.apart,
            Disposition::Skipped(reason) => t.skipped.entry(reason).or_insert(0),
        };
        *n = n.saturating_add(1);
    }

    /// Adds a note (once).
    pub fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !self.notes.contains(&text) {
            self.notes.push(text);
        }
    }

    /// The tally of a kind (zero when absent).
    pub fn get(&self, kind: &str) -> Tally {
        self.kinds.get(kind).cloned().unwrap_or_default()
    }

    /// Sums over kinds with a prefix (`record:`, `block:`).
    pub fn total(&self, prefix: &str) -> Tally {
        let mut out = Tally::default();
        for (k, t) in &self.kinds {
            if k.starts_with(prefix) {
                out.seen = out.seen.saturating_add(t.seen);
                out.history = out.history.saturating_add(t.history);
                out.opaque = out.opaque.saturating_add(t.opaque);
                out.apart = out.apart.saturating_add(t.apart);
                for (r, n) in &t.skipped {
                    let e = out.skipped.entry(r.clone()).or_insert(0);
                    *e = e.saturating_add(*n);
                }
            }
        }
        out
    }

    /// A few lines for people: records and blocks by disposition, skip reasons, notes.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (label, prefix) in [("records", "record:"), ("blocks", "block:")] {
            let t = self.total(prefix);
            out.push_str(&format!(
                "{} {label}: {} in the history, {} carried opaquely, {} in sidechains, {} skipped\n",
                t.seen,
                t.history,
                t.opaque,
                t.apart,
                t.skipped.values().sum::<u64>()
            ));
        }
        for (k, t) in &self.kinds {
            for (reason, n) in &t.skipped {
                out.push_str(&format!("  skipped {n} {k}: {reason}\n"));
            }
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        out
    }
}

/// A stable step id for a record without a uuid: its 1-based line and a digest of the line.
pub(crate) fn line_id(line: usize, text: &str) -> String {
    let h = blake3::hash(text.as_bytes()).to_hex();
    // A hex digest is ASCII: any cut is a char boundary.
    format!("L{line}-{}", h.as_str().get(..12).unwrap_or(h.as_str()))
}

/// Splits JSONL into `(line number, text)` of non-blank lines. A line that holds several JSON
/// values written without a newline between them (`…}{…`: two writers racing, as a real Claude
/// Code transcript showed) is split into them, each under the same line number
/// ([`note_joined`] says so).
pub(crate) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, l)| (i.saturating_add(1), l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .flat_map(|(n, l)| split_joined(l).into_iter().map(move |p| (n, p)))
}

/// The JSON values one line holds, when it holds several and nothing else; the line itself
/// otherwise (a single value, or text that is not JSON: the reader reports it).
fn split_joined(line: &str) -> Vec<&str> {
    use serde::de::IgnoredAny;
    if !line.contains("}{") || serde_json::from_str::<IgnoredAny>(line).is_ok() {
        return vec![line];
    }
    let mut out = Vec::new();
    let mut values = serde_json::Deserializer::from_str(line).into_iter::<IgnoredAny>();
    let mut start = 0usize;
    while let Some(v) = values.next() {
        let end = values.byte_offset();
        match (v, line.get(start..end)) {
            (Ok(_), Some(piece)) => out.push(piece.trim()),
            _ => return vec![line],
        }
        start = end;
    }
    if out.len() < 2 || !line.get(start..).unwrap_or_default().trim().is_empty() {
        return vec![line];
    }
    out
}

/// Notes each line [`lines`] split into several records.
pub(crate) fn note_joined(all: &[(usize, &str)], report: &mut Report) {
    for w in all.windows(2) {
        if let (Some(a), Some(b)) = (w.first(), w.get(1)) {
            if a.0 == b.0 {
                report.note(format!(
                    "line {}: several records written without a newline between them; each is read",
                    a.0
                ));
            }
        }
    }
}

/// Parses one JSONL line into an object. A malformed last line (a file still being written) is
/// `Ok(None)` and noted; a malformed line elsewhere is an error naming the line.
pub(crate) fn parse_line(
    cx: &crate::Cx<'_>,
    line: usize,
    text: &str,
    is_last: bool,
    report: &mut Report,
) -> Result<Option<Map<String, Value>>, salvage_types::capture::CaptureError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        Ok(other) => Err(cx.err(
            &format!("line {line}"),
            format!("expected a JSON object per line, found {}", crate::kind(&other)),
        )),
        Err(_) if is_last => {
            report.count(
                "record:(malformed)",
                Disposition::Skipped("truncated last line (the file is still being written)".into()),
            );
            report.note(format!(
                "line {line} is not complete JSON and was skipped (the file is still being written)"
            ));
            Ok(None)
        }
        Err(e) => Err(cx.err(&format!("line {line}"), format!("malformed JSON: {e}"))),
    }
}
