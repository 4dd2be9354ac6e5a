//! Reading a capture: the bytes from disk under ceilings, UTF-8 and JSON checks, the format
//! probe, deserialization with JSON paths in errors, and the validation the types cannot express.

use super::schema::{Capture, KNOWN_FORMATS};
pub use crate::error::CaptureError;
use serde::Deserialize;
use std::path::Path;

/// Default ceiling on one message's weight (64 MiB): no single message can exhaust memory downstream.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;
/// Default ceiling on a history's weight (512 MiB).
pub const MAX_HISTORY_BYTES: u64 = 512 << 20;

/// Ceilings on what a capture may hold (`SALVAGE_MAX_CAPTURE`, `SALVAGE_MAX_MESSAGE`,
/// `SALVAGE_MAX_HISTORY` at the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The file.
    pub max_file_bytes: u64,
    /// One message's weight.
    pub max_message_bytes: u64,
    /// The history's weight.
    pub max_history_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: DEFAULT_MAX_CAPTURE_BYTES,
            max_message_bytes: MAX_MESSAGE_BYTES,
            max_history_bytes: MAX_HISTORY_BYTES,
        }
    }
}

/// Default ceiling on a capture file's size (1 GiB).
pub const DEFAULT_MAX_CAPTURE_BYTES: u64 = 1 << 30;

/// Reads and validates a capture file.
pub fn read_capture(path: &Path) -> Result<Capture, CaptureError> {
    read_capture_limited(path, DEFAULT_MAX_CAPTURE_BYTES)
}

/// Reads a capture file, refusing files larger than `max_bytes` before reading them.
pub fn read_capture_limited(path: &Path, max_bytes: u64) -> Result<Capture, CaptureError> {
    read_capture_with(path, &Limits { max_file_bytes: max_bytes, ..Limits::default() })
}

/// Reads a capture file under the given ceilings.
pub fn read_capture_with(path: &Path, limits: &Limits) -> Result<Capture, CaptureError> {
    let file = path.display().to_string();
    let bytes = crate::input::read_input(path, limits.max_file_bytes, false)?;
    let capture = parse_capture_with(&bytes, &file, limits);
    crate::input::release(bytes);
    capture
}

/// Checks that bytes are UTF-8, reporting the first bad byte and its line.
pub fn check_utf8<'a>(bytes: &'a [u8], file: &str) -> Result<&'a str, CaptureError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        let newlines = bytes.iter().take(offset).filter(|b| **b == b'\n').count();
        let line = newlines.saturating_add(1);
        CaptureError::InvalidUtf8 { file: file.to_string(), offset, line }
    })
}

/// Maps a serde_json error at a path to a [`CaptureError`].
pub fn json_error(file: &str, err: serde_path_to_error::Error<serde_json::Error>) -> CaptureError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    match inner.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => CaptureError::Syntax {
            file: file.to_string(),
            line: inner.line(),
            column: inner.column(),
            problem: strip_position(&inner.to_string()),
        },
        serde_json::error::Category::Io | serde_json::error::Category::Data => CaptureError::Field {
            file: file.to_string(),
            path: if path == "." { "(top level)".to_string() } else { path },
            problem: strip_position(&inner.to_string()),
        },
    }
}

fn strip_position(msg: &str) -> String {
    match msg.rsplit_once(" at line ") {
        Some((before, _)) => before.to_string(),
        None => msg.to_string(),
    }
}

/// `bytes` without a leading UTF-8 byte-order mark (an editor's, or PowerShell's `Out-File`):
/// every reader accepts one, as the importers did (review of the CLI, finding 13).
pub fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Deserializes JSON bytes into `T`, reporting errors by file and JSON path.
pub fn from_json_bytes<T: serde::de::DeserializeOwned>(bytes: &[u8], file: &str) -> Result<T, CaptureError> {
    from_json_bytes_counted(bytes, file).map(|(value, _)| value)
}

/// [`from_json_bytes`], with the number of JSON values the bytes hold (counted by the shape check
/// every read makes, so a caller that needs the count does not scan the bytes again).
///
/// The bytes are parsed once without tracking the JSON path (serde_path_to_error records every
/// key it passes, which cost a parse of a large body a fifth of its time); only bytes that fail
/// are parsed again with the path, for the error. Both parses are the same serde_json
/// deserializer, so they fail on the same bytes.
pub fn from_json_bytes_counted<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    file: &str,
) -> Result<(T, usize), CaptureError> {
    let bytes = without_bom(bytes);
    check_utf8(bytes, file)?;
    let values = crate::input::check_json_shape(bytes, file)?;
    // Deeply nested hostile input is refused by serde_json's recursion limit (128).
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok((value, values));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| json_error(file, e))?;
    de.end().map_err(|e| CaptureError::Syntax {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        problem: strip_position(&e.to_string()),
    })?;
    Ok((value, values))
}

/// Parses and validates capture bytes; `file` names the source in errors.
pub fn parse_capture(bytes: &[u8], file: &str) -> Result<Capture, CaptureError> {
    parse_capture_with(bytes, file, &Limits::default())
}

/// Parses and validates capture bytes under the given ceilings.
pub fn parse_capture_with(bytes: &[u8], file: &str, limits: &Limits) -> Result<Capture, CaptureError> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        format: Option<serde_json::Value>,
    }
    let bytes = without_bom(bytes);
    check_utf8(bytes, file)?;
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    let found = match first {
        Some(b'[') => Some("an array"),
        Some(b'"') => Some("a string"),
        Some(b'0'..=b'9' | b'-') => Some("a number"),
        Some(b't' | b'f') => Some("a boolean"),
        Some(b'n') => Some("null"),
        _ => None,
    };
    if let Some(found) = found {
        if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
            return Err(CaptureError::Field {
                file: file.to_string(),
                path: "(top level)".into(),
                problem: format!("a capture is a JSON object, found {found}"),
            });
        }
    }
    let probe: Probe = from_json_bytes(bytes, file).map_err(|e| match e {
        CaptureError::Field { file, path, problem } if path == "(top level)" => {
            CaptureError::Field { file, path, problem: format!("{problem} (a capture is a JSON object)") }
        }
        other => other,
    })?;
    match probe.format {
        Some(serde_json::Value::String(f)) if KNOWN_FORMATS.contains(&f.as_str()) => {}
        other => {
            let found = match other {
                None => "<missing>".to_string(),
                Some(serde_json::Value::String(s)) => s,
                Some(v) => v.to_string(),
            };
            return Err(CaptureError::UnknownFormat {
                file: file.to_string(),
                found,
                known: KNOWN_FORMATS.join(", "),
            });
        }
    }
    let capture: Capture = from_json_bytes(bytes, file)?;
    capture.validate_with(file, limits)?;
    Ok(capture)
}

impl Capture {
    /// Checks what the types cannot, under the default ceilings.
    pub fn validate(&self, file: &str) -> Result<(), CaptureError> {
        self.validate_with(file, &Limits::default())
    }

    /// Checks what the types cannot: a non-empty id and history, tool results naming their call,
    /// and the ceilings.
    pub fn validate_with(&self, file: &str, limits: &Limits) -> Result<(), CaptureError> {
        let field = |path: &str, problem: &str| CaptureError::Field {
            file: file.to_string(),
            path: path.to_string(),
            problem: problem.to_string(),
        };
        if self.id.trim().is_empty() {
            return Err(field("id", "must not be empty"));
        }
        if self.history.is_empty() {
            return Err(field("history", "is empty: a capture needs the history of the rejected request"));
        }
        // A result whose call the provider holds pairs upstream only in a Responses request
        // chained to an earlier response; anywhere else the flag would excuse an orphan the
        // provider rejects (adversarial review of the checks, finding 6).
        let chained = self.request.as_ref().is_some_and(|r| {
            r.format == super::RequestFormat::OpenaiResponses
                && r.fields.get("previous_response_id").is_some_and(serde_json::Value::is_string)
        });
        let mut total: u64 = 0;
        for (i, m) in self.history.iter().enumerate() {
            if m.meta.call_held_upstream && !chained {
                return Err(field(
                    &format!("history[{i}].meta.call_held_upstream"),
                    "only a tool result of an openai_responses request chained with previous_response_id answers a call the provider holds",
                ));
            }
            if m.role == crate::message::Role::Tool
                && m.tool_call_id.as_deref().is_none_or(|id| id.trim().is_empty())
            {
                return Err(field(
                    &format!("history[{i}].tool_call_id"),
                    "a tool result must name the call it answers",
                ));
            }
            let w = crate::weight::message_weight(m);
            if w > limits.max_message_bytes {
                return Err(field(
                    &format!("history[{i}]"),
                    &format!(
                        "message of {} is over the {} limit for one message",
                        crate::format_bytes(w),
                        crate::format_bytes(limits.max_message_bytes)
                    ),
                ));
            }
            total = total.saturating_add(w);
        }
        if total > limits.max_history_bytes {
            return Err(field(
                "history",
                &format!(
                    "{} of history is over the {} limit",
                    crate::format_bytes(total),
                    crate::format_bytes(limits.max_history_bytes)
                ),
            ));
        }
        Ok(())
    }

    /// Serializes as pretty JSON with a trailing newline.
    pub fn to_json_pretty(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Upstream;

    const GOOD: &str = r#"{"format":"salvage.capture/1","id":"x","history":[{"role":"user","content":"hi"}],"failure":{"status":413,"message":"413 Payload Too Large"}}"#;

    #[test]
    fn reads_a_minimal_capture() {
        let c = parse_capture(GOOD.as_bytes(), "c.json").unwrap();
        assert_eq!(c.failure.status, Some(413));
        assert_eq!(c.upstream, Upstream::default());
    }

    /// Review finding: the flag excused an orphan in any format; it is only meaningful in a
    /// Responses request chained with `previous_response_id`.
    #[test]
    fn a_call_held_upstream_needs_a_chained_responses_request() {
        let orphan =
            r#"{"role":"tool","tool_call_id":"c9","content":"ok","meta":{"call_held_upstream":true}}"#;
        let bare = GOOD.replace(
            r#"{"role":"user","content":"hi"}"#,
            &format!(r#"{{"role":"user","content":"hi"}},{orphan}"#),
        );
        let e = parse_capture(bare.as_bytes(), "c.json").unwrap_err().to_string();
        assert!(e.starts_with("c.json: history[1].meta.call_held_upstream: only a tool result"), "{e}");
        let anthropic = bare.replace(
            r#""failure""#,
            r#""request":{"format":"anthropic","fields":{"previous_response_id":"r1"}},"failure""#,
        );
        assert!(parse_capture(anthropic.as_bytes(), "c.json").is_err());
        let unchained =
            bare.replace(r#""failure""#, r#""request":{"format":"openai_responses","fields":{}},"failure""#);
        assert!(parse_capture(unchained.as_bytes(), "c.json").is_err());
        let chained = bare.replace(
            r#""failure""#,
            r#""request":{"format":"openai_responses","fields":{"previous_response_id":"r1"}},"failure""#,
        );
        assert!(parse_capture(chained.as_bytes(), "c.json").is_ok());
    }

    #[test]
    fn a_byte_order_mark_is_accepted() {
        let with = [b"\xEF\xBB\xBF".as_slice(), GOOD.as_bytes()].concat();
        assert_eq!(
            parse_capture(&with, "c.json").unwrap(),
            parse_capture(GOOD.as_bytes(), "c.json").unwrap()
        );
        let v: serde_json::Value = from_json_bytes(&with, "c.json").unwrap();
        assert_eq!(v["id"], "x");
    }

    #[test]
    fn unknown_format_names_known_versions() {
        let bad = GOOD.replace("salvage.capture/1", "salvage.capture/9");
        let e = parse_capture(bad.as_bytes(), "c.json").unwrap_err().to_string();
        assert_eq!(
            e,
            r#"c.json: format: unknown capture format "salvage.capture/9" (this build reads salvage.capture/1)"#
        );
    }

    #[test]
    fn malformed_field_names_path() {
        let bad = GOOD.replace(r#""role":"user""#, r#""role":5"#);
        let e = parse_capture(bad.as_bytes(), "c.json").unwrap_err().to_string();
        assert!(e.starts_with("c.json: history[0].role: invalid type: integer `5`"), "{e}");
    }

    #[test]
    fn truncated_json_reports_position() {
        let e = parse_capture(&GOOD.as_bytes()[..40], "c.json").unwrap_err();
        assert!(matches!(e, CaptureError::Syntax { line: 1, .. }), "{e}");
    }

    #[test]
    fn invalid_utf8_reports_offset_and_line() {
        let mut b = GOOD.as_bytes().to_vec();
        b.insert(10, b'\n');
        b.insert(20, 0xff);
        let e = parse_capture(&b, "c.json").unwrap_err().to_string();
        assert_eq!(e, "c.json: invalid UTF-8 at byte 20 (line 2)");
    }

    #[test]
    fn empty_history_and_unknown_field_are_refused() {
        let empty = GOOD.replace(r#"[{"role":"user","content":"hi"}]"#, "[]");
        assert!(parse_capture(empty.as_bytes(), "c.json")
            .unwrap_err()
            .to_string()
            .contains("history: is empty"));
        let typo = GOOD.replace(r#""status":413"#, r#""statsu":413"#);
        let e = parse_capture(typo.as_bytes(), "c.json").unwrap_err().to_string();
        assert!(e.contains("failure.statsu") || e.contains("unknown field `statsu`"), "{e}");
    }
}
