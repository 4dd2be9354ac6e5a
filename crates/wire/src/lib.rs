//! Provider wire formats: importing real request bodies and session files into a history, and
//! rebuilding the request body of a history in a given format.
//!
//! Owns the mapping between salvage's message model and the OpenAI chat-completions body, the
//! Anthropic Messages body, the OpenAI Responses body, the Gemini `generateContent` body, the
//! Bedrock Converse body and the reference client's session file (version 2), the session files
//! of other clients (Claude Code transcripts, Codex CLI rollouts, Cline task histories; see
//! [`session`]), and the meaning of a message's `wire` value. It does not send anything.
//!
//! Design decisions: the importers read JSON as untyped values and walk them by hand, so every
//! error names the JSON path that is wrong (`messages[3].content[1].type`), not a serde type; and
//! import is lossless: what the message model has no field for is kept in the message's `wire`
//! template ([`shape`]) and the body's other fields in [`Request::fields`], so that
//! [`request_body`] rebuilds the body as sent (JSON-equal; [`request_bytes`] is its exact size)
//! and still builds a valid body after compaction rewrote the history.
//!
//! Round-trip normalisations (the only ways a rebuilt body differs from the file imported):
//! whitespace and indentation (`request.bytes` is the size of the compact serialization, not of
//! the file); string escapes written in their shortest form (`\u00e9` → `é`, `\/` → `/`);
//! numbers in serde_json's form (`1e3` → `1000.0`); the order of the top-level keys (the
//! message fields come last); of a duplicated key, the last value.

#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod anthropic;
mod arguments;
pub mod bedrock;
pub mod chatcli;
pub mod claude_code;
pub mod cline;
pub mod codex;
mod conv;
pub mod detect;
pub mod gemini;
pub mod gemini_cli;
pub mod openai;
mod par_list;
pub mod redact;
pub mod responses;
pub mod session;
pub mod shape;

use salvage_types::capture::{check_utf8, CaptureError, Request, RequestFormat};
use salvage_types::message::Message;
use salvage_types::History;
use serde_json::Value;

/// What an importer produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The history.
    pub history: History,
    /// The model named by the body, if any.
    pub model: Option<String>,
    /// The provider family the body belongs to.
    pub provider: Option<String>,
    /// The request as sent besides its messages (format, size, other fields).
    pub request: Option<Request>,
}

/// The source shapes an importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// OpenAI chat-completions request body.
    Openai,
    /// Anthropic Messages request body.
    Anthropic,
    /// Reference-client session file, version 2.
    Chatcli,
    /// OpenAI Responses API request body.
    OpenaiResponses,
    /// Gemini `generateContent` request body.
    Gemini,
    /// Bedrock Converse request body.
    Bedrock,
    /// Claude Code transcript (JSONL).
    ClaudeCode,
    /// Codex CLI rollout (JSONL).
    Codex,
    /// Cline / Roo Code `api_conversation_history.json`.
    Cline,
    /// Gemini CLI chat record or `/chat save` checkpoint.
    GeminiCli,
}

impl Source {
    /// The request format this source's importer writes.
    pub fn format(self) -> RequestFormat {
        match self {
            Source::Openai => RequestFormat::Openai,
            Source::Anthropic => RequestFormat::Anthropic,
            Source::Chatcli => RequestFormat::Chatcli,
            Source::OpenaiResponses => RequestFormat::OpenaiResponses,
            Source::Gemini => RequestFormat::Gemini,
            Source::Bedrock => RequestFormat::Bedrock,
            Source::ClaudeCode => RequestFormat::ClaudeCode,
            Source::Codex => RequestFormat::Codex,
            Source::Cline => RequestFormat::Cline,
            Source::GeminiCli => RequestFormat::GeminiCli,
        }
    }

    /// True for a client's session file (read with [`read_session`]), as opposed to a request
    /// body.
    pub fn is_session(self) -> bool {
        match self {
            Source::ClaudeCode | Source::Codex | Source::Cline | Source::GeminiCli => true,
            Source::Openai
            | Source::Anthropic
            | Source::Chatcli
            | Source::OpenaiResponses
            | Source::Gemini
            | Source::Bedrock => false,
        }
    }

    /// The source that imports a request format, when this build has an importer for it.
    pub fn of(format: RequestFormat) -> Option<Source> {
        match format {
            RequestFormat::Openai => Some(Source::Openai),
            RequestFormat::Anthropic => Some(Source::Anthropic),
            RequestFormat::Chatcli => Some(Source::Chatcli),
            RequestFormat::OpenaiResponses => Some(Source::OpenaiResponses),
            RequestFormat::Gemini => Some(Source::Gemini),
            RequestFormat::Bedrock => Some(Source::Bedrock),
            RequestFormat::ClaudeCode => Some(Source::ClaudeCode),
            RequestFormat::Codex => Some(Source::Codex),
            RequestFormat::Cline => Some(Source::Cline),
            RequestFormat::GeminiCli => Some(Source::GeminiCli),
        }
    }
}

/// Imports bytes of the given shape; `file` names the source in errors.
pub fn import(source: Source, bytes: &[u8], file: &str) -> Result<Imported, CaptureError> {
    let bytes = without_bom(bytes);
    if source.is_session() {
        return read_session(source, bytes, file).map(|s| s.imported());
    }
    let (value, used) = salvage_types::capture::from_json_bytes_counted(bytes, file)?;
    set_value_budget(bytes.len(), used);
    import_sized(source, &value, file, bytes.len() >= COUNT_BESIDE_FROM)
}

/// [`import`] of bytes it owns: a body is parsed once and its bytes are dropped before the
/// history is built from the parsed tree, so an import never holds the file, its tree and the
/// history at once (peak: the tree and the history, about twice the body).
pub fn import_owned(source: Source, mut bytes: Vec<u8>, file: &str) -> Result<Imported, CaptureError> {
    if bytes.starts_with(BOM) {
        bytes.drain(..BOM.len());
    }
    if source.is_session() {
        return read_session(source, &bytes, file).map(|s| s.imported());
    }
    let (value, used) = salvage_types::capture::from_json_bytes_counted(&bytes, file)?;
    import_tree(source, value, bytes, used, file)
}

/// Imports a body parsed from `bytes` (which held `used` values): the bytes are dropped before
/// the history is built from the tree.
fn import_tree(
    source: Source,
    value: Value,
    bytes: Vec<u8>,
    used: usize,
    file: &str,
) -> Result<Imported, CaptureError> {
    set_value_budget(bytes.len(), used);
    let big = bytes.len() >= COUNT_BESIDE_FROM;
    drop(bytes);
    let imported = import_sized(source, &value, file, big);
    if big {
        // Freeing a large tree (one allocation per value) is left to another thread while the
        // caller goes on with the history; a thread that cannot start hands it back to be freed
        // here.
        let _ = std::thread::Builder::new().name("free-tree".into()).spawn(move || drop(value));
    }
    imported
}

/// What [`import_auto_owned`] found.
pub enum Auto {
    /// A request body (or a reference-client session file), imported.
    Body {
        /// What detection said.
        detected: detect::Detected,
        /// The importer it chose.
        source: Source,
        /// What the importer produced.
        imported: Imported,
    },
    /// A client's session file: its bytes, for [`read_session`] (which reports what it skipped).
    Session {
        /// What detection said.
        detected: detect::Detected,
        /// The reader it chose.
        source: Source,
        /// The file's bytes.
        bytes: Vec<u8>,
    },
}

/// Why [`import_auto_owned`] imported nothing.
#[derive(Debug)]
pub enum AutoError {
    /// The bytes are hostile or broken (the shape check), or the importer refused them.
    Capture(CaptureError),
    /// Detection recognised no format.
    Unrecognized(detect::Unrecognized),
    /// A format this build has no importer for.
    NoImporter(detect::Detected),
}

/// Detects the format of a file's bytes and imports them, parsing a JSON document once: the
/// detector reads the tree the importer then reads (detecting on the bytes and importing them
/// parsed a 50 MB body twice). A file that is not one JSON document (JSON Lines, or broken) is
/// detected as [`detect::detect`] does, with its errors. The bomb guard runs first, as for
/// every import.
pub fn import_auto_owned(mut bytes: Vec<u8>, file: &str) -> Result<Auto, AutoError> {
    if bytes.starts_with(BOM) {
        bytes.drain(..BOM.len());
    }
    let used = salvage_types::input::check_json_shape(&bytes, file).map_err(AutoError::Capture)?;
    // Not one JSON document (JSON Lines, or broken): detected on the bytes.
    let value = serde_json::from_slice::<Value>(&bytes).ok();
    let detected = match &value {
        Some(v) => detect::detect_value(v),
        None => detect::detect(&bytes),
    }
    .map_err(AutoError::Unrecognized)?;
    let source = Source::of(detected.format).ok_or_else(|| AutoError::NoImporter(detected.clone()))?;
    if source.is_session() {
        return Ok(Auto::Session { detected, source, bytes });
    }
    let imported = match value {
        Some(value) => import_tree(source, value, bytes, used, file),
        // Detection parses a document that is JSON: a body detected without a tree fails its
        // import as it did before.
        None => import_owned(source, bytes, file),
    };
    imported.map(|imported| Auto::Body { detected, source, imported }).map_err(AutoError::Capture)
}

/// The UTF-8 byte-order mark some editors write first: detection skips it, and so does reading.
const BOM: &[u8] = b"\xEF\xBB\xBF";

fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// From this many bytes, a body's size is counted on another thread while it is imported (and
/// its parsed tree freed on another thread after).
const COUNT_BESIDE_FROM: usize = 4 << 20;

/// What the importers may still build from argument strings: the file's value allowance (for
/// `len` bytes) less the `used` values the file itself holds (counted by the shape check the
/// read made, so the bytes are scanned once).
fn set_value_budget(len: usize, used: usize) {
    VALUE_BUDGET.with(|b| b.set(salvage_types::input::max_values(len).saturating_sub(used)));
}

/// Reads a client's session file: its steps as they happened, sidechains kept apart, and the
/// accounting of every record. A request body source is refused (use [`import`]).
pub fn read_session(source: Source, bytes: &[u8], file: &str) -> Result<session::Session, CaptureError> {
    let bytes = without_bom(bytes);
    check_utf8(bytes, file)?;
    let used = salvage_types::input::check_json_shape(bytes, file)?;
    set_value_budget(bytes.len(), used);
    let cx = Cx { file };
    match source {
        Source::ClaudeCode => claude_code::read(&cx, bytes),
        Source::Codex => codex::read(&cx, bytes),
        Source::Cline => cline::read(&cx, &parse_json(bytes, file)?),
        Source::GeminiCli => gemini_cli::read(&cx, bytes),
        Source::Openai
        | Source::Anthropic
        | Source::Chatcli
        | Source::OpenaiResponses
        | Source::Gemini
        | Source::Bedrock => {
            Err(cx.err("(top level)", "a request body is not a session file: import it instead"))
        }
    }
}

/// Imports an already parsed body of the given shape.
pub fn import_value(source: Source, value: &Value, file: &str) -> Result<Imported, CaptureError> {
    import_sized(source, value, file, false)
}

/// [`import_value`]; the request's `bytes` (a body's compact size) is counted on another thread
/// while the history is built when `big` holds (and a thread can be started), on this one after
/// it otherwise.
fn import_sized(source: Source, value: &Value, file: &str, big: bool) -> Result<Imported, CaptureError> {
    let sized = |mut imported: Imported, bytes: &dyn Fn() -> u64| {
        // The formats whose request is a body as sent (session files have no size).
        if let Some(r) = imported.request.as_mut().filter(|r| is_body_format(r.format)) {
            r.bytes = Some(bytes());
        }
        imported
    };
    let count = || salvage_types::weight::compact_json_len(value);
    if !big {
        return import_shape(source, value, file).map(|i| sized(i, &count));
    }
    std::thread::scope(|scope| {
        let counting = std::thread::Builder::new().name("body-size".into()).spawn_scoped(scope, count).ok();
        let imported = import_shape(source, value, file)?;
        let counted = counting.and_then(|h| h.join().ok());
        Ok(sized(imported, &|| counted.unwrap_or_else(count)))
    })
}

/// True for the request formats that are bodies as sent.
fn is_body_format(format: RequestFormat) -> bool {
    match format {
        RequestFormat::Openai
        | RequestFormat::Anthropic
        | RequestFormat::OpenaiResponses
        | RequestFormat::Gemini
        | RequestFormat::Bedrock => true,
        RequestFormat::Chatcli
        | RequestFormat::ClaudeCode
        | RequestFormat::Codex
        | RequestFormat::Cline
        | RequestFormat::GeminiCli => false,
    }
}

/// The importer of `source` over a parsed value.
fn import_shape(source: Source, value: &Value, file: &str) -> Result<Imported, CaptureError> {
    let cx = Cx { file };
    match source {
        Source::Openai => openai::import(&cx, value),
        Source::Anthropic => anthropic::import(&cx, value),
        Source::Chatcli => chatcli::import(&cx, value),
        Source::OpenaiResponses => responses::import(&cx, value),
        Source::Gemini => gemini::import(&cx, value),
        Source::Bedrock => bedrock::import(&cx, value),
        Source::ClaudeCode | Source::Codex | Source::GeminiCli => {
            Err(cx.err("(top level)", "a JSON Lines session file: read it with read_session"))
        }
        Source::Cline => cline::read(&cx, value).map(|s| s.imported()),
    }
}

/// The request body for `history` in `request`'s format, with `request`'s other fields.
///
/// For a history as imported it is JSON-equal to the body imported (see the crate docs for the
/// normalisations). For a history rewritten by compaction (messages dropped, contents cut, new
/// messages without `wire`) it is a valid body of the format that carries the opaque blocks of
/// the surviving messages. Messages whose `wire` belongs to another format are built from the
/// modeled parts alone. The session formats (Claude Code, Codex, Cline) are written as
/// Anthropic Messages bodies, the API their clients send.
pub fn request_body(request: &Request, history: &[Message]) -> Value {
    match request.format {
        RequestFormat::Openai => openai::body(request, history),
        RequestFormat::Anthropic | RequestFormat::ClaudeCode | RequestFormat::Cline => {
            anthropic::body(request, history)
        }
        RequestFormat::OpenaiResponses | RequestFormat::Codex => responses::body(request, history),
        RequestFormat::Gemini | RequestFormat::GeminiCli => gemini::body(request, history),
        RequestFormat::Bedrock => bedrock::body(request, history),
        RequestFormat::Chatcli => chatcli::body(request, history),
    }
}

/// The size of [`request_body`] as compact JSON, without building the string. For a history as
/// imported from a body it equals `request.bytes` (a session file has no `bytes`: it is not a
/// body as sent).
pub fn request_bytes(request: &Request, history: &[Message]) -> u64 {
    salvage_types::weight::compact_json_len(&request_body(request, history))
}

/// Where a format's body asks for its output-token limit: a path of object keys from the top
/// level. OpenAI chat names it `max_completion_tokens` (or the older `max_tokens`); see
/// [`output_limit`].
fn output_limit_paths(format: RequestFormat) -> &'static [&'static [&'static str]] {
    match format {
        RequestFormat::Anthropic | RequestFormat::ClaudeCode | RequestFormat::Cline => &[&["max_tokens"]],
        RequestFormat::Openai => &[&["max_completion_tokens"], &["max_tokens"]],
        RequestFormat::OpenaiResponses | RequestFormat::Codex => &[&["max_output_tokens"]],
        RequestFormat::Gemini | RequestFormat::GeminiCli => &[&["generationConfig", "maxOutputTokens"]],
        RequestFormat::Bedrock => &[&["inferenceConfig", "maxTokens"]],
        RequestFormat::Chatcli => &[],
    }
}

fn field_at<'v>(fields: &'v serde_json::Map<String, Value>, path: &[&str]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(fields.get(*first)?, |v, k| v.get(k))
}

/// The output-token limit a request asks for, when its body names one: Anthropic (and the
/// sessions sent as Anthropic bodies) `max_tokens`, OpenAI chat `max_completion_tokens` or
/// `max_tokens`, Responses `max_output_tokens`, Gemini `generationConfig.maxOutputTokens`,
/// Bedrock `inferenceConfig.maxTokens`.
pub fn output_limit(request: &Request) -> Option<u64> {
    output_limit_paths(request.format).iter().find_map(|p| field_at(&request.fields, p)?.as_u64())
}

/// Sets the output-token limit of a request, every other field kept: in the field the body
/// already uses, else in the format's own (a nested object is created when missing). A format
/// without such a field (ChatCLI session files) is left as it is.
pub fn set_output_limit(request: &mut Request, limit: u64) {
    let paths = output_limit_paths(request.format);
    let Some(path) = paths.iter().find(|p| field_at(&request.fields, p).is_some()).or(paths.first()) else {
        return;
    };
    let Some((last, parents)) = path.split_last() else { return };
    let mut obj = &mut request.fields;
    for k in parents {
        let slot = obj.entry(k.to_string()).or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !slot.is_object() {
            // A parameter object of another type: the body is not the format's; left alone.
            return;
        }
        let Value::Object(next) = slot else { return };
        obj = next;
    }
    obj.insert(last.to_string(), Value::from(limit));
}

/// A request of `format` with only a model (for exporting a history that was not imported from a
/// body): the fields a valid body of that format needs besides the messages.
pub fn bare_request(format: RequestFormat, model: Option<&str>) -> Request {
    let mut fields = serde_json::Map::new();
    match format {
        RequestFormat::Openai
        | RequestFormat::OpenaiResponses
        | RequestFormat::Anthropic
        | RequestFormat::ClaudeCode
        | RequestFormat::Codex
        | RequestFormat::Cline => {
            fields.insert("model".into(), Value::String(model.unwrap_or("model").into()));
        }
        RequestFormat::Gemini | RequestFormat::GeminiCli | RequestFormat::Bedrock => {}
        RequestFormat::Chatcli => {
            fields.insert("version".into(), Value::from(2));
            if let Some(m) = model {
                fields.insert("model".into(), Value::String(m.into()));
            }
        }
    }
    if matches!(format, RequestFormat::Anthropic | RequestFormat::ClaudeCode | RequestFormat::Cline) {
        // The Messages API requires it; the value the reference client uses.
        fields.insert("max_tokens".into(), Value::from(8192));
    }
    Request { format, bytes: None, fields }
}

/// Parses JSON bytes, reporting invalid UTF-8 and syntax errors with their position.
pub fn parse_json(bytes: &[u8], file: &str) -> Result<Value, CaptureError> {
    salvage_types::capture::from_json_bytes(bytes, file)
}

/// Error context: the file being read.
pub(crate) struct Cx<'a> {
    pub file: &'a str,
}

impl Cx<'_> {
    pub fn err(&self, path: &str, problem: impl Into<String>) -> CaptureError {
        CaptureError::Field { file: self.file.to_string(), path: path.to_string(), problem: problem.into() }
    }

    pub fn obj<'v>(
        &self,
        v: &'v Value,
        path: &str,
    ) -> Result<&'v serde_json::Map<String, Value>, CaptureError> {
        v.as_object().ok_or_else(|| self.err(path, format!("expected an object, found {}", kind(v))))
    }

    pub fn arr<'v>(&self, v: &'v Value, path: &str) -> Result<&'v Vec<Value>, CaptureError> {
        v.as_array().ok_or_else(|| self.err(path, format!("expected an array, found {}", kind(v))))
    }

    pub fn str<'v>(&self, v: &'v Value, path: &str) -> Result<&'v str, CaptureError> {
        v.as_str().ok_or_else(|| self.err(path, format!("expected a string, found {}", kind(v))))
    }

    /// A required string field.
    pub fn req_str<'v>(
        &self,
        o: &'v serde_json::Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<&'v str, CaptureError> {
        match o.get(key) {
            Some(v) => self.str(v, &format!("{path}.{key}")),
            None => Err(self.err(&format!("{path}.{key}"), "missing")),
        }
    }

    /// An optional string field (null counts as absent).
    pub fn opt_str<'v>(
        &self,
        o: &'v serde_json::Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<&'v str>, CaptureError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.str(v, &format!("{path}.{key}")).map(Some),
        }
    }
}

/// A short name of a JSON value's type, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// True when a JSON text (tool-call arguments inside a string) fits in what the current import
/// may still build, which it then spends. The budget is [`salvage_types::input::max_values`] of
/// the whole file, shared by every argument string: arguments past it (a JSON bomb of small
/// objects inside a string) are kept as their text, which costs what the file does.
pub(crate) fn within_value_budget(text: &str) -> bool {
    let left = VALUE_BUDGET.with(|b| b.get());
    let (depth, values) = salvage_types::input::json_shape(text.as_bytes(), left);
    if values > left || depth > salvage_types::input::MAX_DEPTH {
        return false;
    }
    // `values <= left` here (checked above).
    VALUE_BUDGET.with(|b| b.set(left.saturating_sub(values)));
    true
}

/// What is left of this thread's value budget (see [`within_value_budget`]).
pub(crate) fn value_budget() -> usize {
    VALUE_BUDGET.with(|b| b.get())
}

/// Sets what is left of this thread's value budget (a thread that converts part of a body
/// starts from what the body's own thread had left).
pub(crate) fn set_value_budget_left(left: usize) {
    VALUE_BUDGET.with(|b| b.set(left));
}

thread_local! {
    /// JSON values the current import may still build from argument strings.
    static VALUE_BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Splits a `data:` URL into media type and base64 data.
pub(crate) fn split_data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (media, data) = rest.split_once(";base64,")?;
    Some((media.to_string(), data.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(format: RequestFormat, fields: Value) -> Request {
        Request { format, bytes: None, fields: fields.as_object().cloned().unwrap_or_default() }
    }

    #[test]
    fn output_limit_reads_each_formats_own_field() {
        let cases = [
            (RequestFormat::Anthropic, json!({"max_tokens": 32000})),
            (RequestFormat::ClaudeCode, json!({"max_tokens": 32000})),
            (RequestFormat::Openai, json!({"max_tokens": 32000})),
            (RequestFormat::Openai, json!({"max_completion_tokens": 32000, "max_tokens": 5})),
            (RequestFormat::OpenaiResponses, json!({"max_output_tokens": 32000})),
            (RequestFormat::Codex, json!({"max_output_tokens": 32000})),
            (RequestFormat::Gemini, json!({"generationConfig": {"maxOutputTokens": 32000}})),
            (RequestFormat::Bedrock, json!({"inferenceConfig": {"maxTokens": 32000}})),
        ];
        for (f, fields) in cases {
            assert_eq!(output_limit(&req(f, fields.clone())), Some(32000), "{f:?} {fields}");
        }
        assert_eq!(output_limit(&req(RequestFormat::Gemini, json!({"maxOutputTokens": 9}))), None);
        assert_eq!(output_limit(&req(RequestFormat::Anthropic, json!({"max_output_tokens": 9}))), None);
    }

    #[test]
    fn set_output_limit_keeps_the_other_fields_and_the_bodys_own_key() {
        let mut r = req(RequestFormat::Openai, json!({"model": "m", "max_tokens": 100, "temperature": 0.2}));
        set_output_limit(&mut r, 400);
        assert_eq!(Value::Object(r.fields), json!({"model": "m", "max_tokens": 400, "temperature": 0.2}));
        let mut r = req(RequestFormat::Openai, json!({"model": "m"}));
        set_output_limit(&mut r, 400);
        assert_eq!(Value::Object(r.fields), json!({"model": "m", "max_completion_tokens": 400}));
        let mut r = req(RequestFormat::Gemini, json!({"generationConfig": {"temperature": 1}}));
        set_output_limit(&mut r, 400);
        assert_eq!(
            Value::Object(r.fields),
            json!({"generationConfig": {"temperature": 1, "maxOutputTokens": 400}})
        );
        let mut r = req(RequestFormat::Bedrock, json!({}));
        set_output_limit(&mut r, 400);
        assert_eq!(Value::Object(r.fields), json!({"inferenceConfig": {"maxTokens": 400}}));
        let mut r = req(RequestFormat::Chatcli, json!({"version": 2}));
        set_output_limit(&mut r, 400);
        assert_eq!(Value::Object(r.fields), json!({"version": 2}));
    }
}
