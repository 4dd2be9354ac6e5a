//! Provider wire formats: importing real request bodies and session files into a history, and
//! building the request body a client would send for a history.
//!
//! Owns the mapping between salvage's message model and the OpenAI chat-completions body, the
//! Anthropic Messages body and the reference client's session file (version 2). It does not send
//! anything. Design decision: the importers read JSON as untyped values and walk them by hand, so
//! every error names the JSON path that is wrong (`messages[3].content[1].type`), not a serde type.

pub mod anthropic;
pub mod chatcli;
pub mod openai;
pub mod redact;

use salvage_types::capture::{check_utf8, CaptureError};
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
}

/// Imports bytes of the given shape; `file` names the source in errors.
pub fn import(source: Source, bytes: &[u8], file: &str) -> Result<Imported, CaptureError> {
    let value = parse_json(bytes, file)?;
    let (_, used) = salvage_types::input::json_shape(bytes, usize::MAX);
    VALUE_BUDGET.with(|b| b.set(salvage_types::input::max_values(bytes.len()).saturating_sub(used)));
    let cx = Cx { file };
    match source {
        Source::Openai => openai::import(&cx, &value),
        Source::Anthropic => anthropic::import(&cx, &value),
        Source::Chatcli => chatcli::import(&cx, &value),
    }
}

/// Parses JSON bytes, reporting invalid UTF-8 and syntax errors with their position.
pub fn parse_json(bytes: &[u8], file: &str) -> Result<Value, CaptureError> {
    check_utf8(bytes, file)?;
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

/// Parses tool-call arguments given as a JSON string; a string that is not JSON is kept as a string.
///
/// Values are built only within the import's budget ([`salvage_types::input::max_values`] of the
/// whole file, shared by every call's arguments): arguments past it (a JSON bomb of small objects
/// inside a string) are kept as their text, which costs what the file does.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    let left = VALUE_BUDGET.with(|b| b.get());
    let (depth, values) = salvage_types::input::json_shape(text.as_bytes(), left);
    if values > left || depth > salvage_types::input::MAX_DEPTH {
        return Value::String(text.to_string());
    }
    VALUE_BUDGET.with(|b| b.set(left - values));
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
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
