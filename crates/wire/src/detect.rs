//! Which format a file is in, from its shape (`salvage import --from auto`).
//!
//! [`detect`] looks at the bytes once: JSON Lines first (a session transcript), then the JSON
//! value's top-level keys and, where two formats share them (`messages`), at the messages
//! themselves. To add a format: add its rule to [`detect_value`] (JSON) or [`detect_jsonl`]
//! (JSON Lines), before any rule that would also match it, and its name to [`SUPPORTED`].

use salvage_types::capture::RequestFormat;
use serde_json::{Map, Value};

/// The formats `--from auto` recognises, for the message naming them.
pub const SUPPORTED: &str = "openai (chat completions), anthropic (Messages), openai_responses, gemini \
(generateContent), bedrock (Converse), chatcli (session file v2), claude_code (JSONL transcript), \
codex (JSONL rollout), cline (api_conversation_history.json), gemini_cli (chat record or /chat save \
checkpoint)";

/// What the detector decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The format.
    pub format: RequestFormat,
    /// Why, in a few words (for the line the CLI prints).
    pub because: String,
}

/// A file whose shape fits no format: what it looks like, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{looks_like}; not a format salvage recognises (supported: {SUPPORTED})")]
pub struct Unrecognized {
    /// A short description of the file's shape.
    pub looks_like: String,
}

fn found(format: RequestFormat, because: impl Into<String>) -> Result<Detected, Unrecognized> {
    Ok(Detected { format, because: because.into() })
}

/// Detects the format of a file's bytes.
///
/// It parses them: untrusted bytes go through
/// [`salvage_types::input::check_json_shape`] first (as the importers do), or a JSON bomb is
/// built in memory here.
pub fn detect(bytes: &[u8]) -> Result<Detected, Unrecognized> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(_) => return Err(Unrecognized { looks_like: "not UTF-8 text".into() }),
    };
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(Unrecognized { looks_like: "an empty file".into() });
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => detect_value(&v),
        Err(whole) => {
            let lines: Vec<Value> = trimmed
                .lines()
                .filter(|l| !l.trim().is_empty())
                .take(50)
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect();
            // One line read is JSON Lines when it is the only line, or when the only other is
            // the file's last and unterminated: a writer's half-written record (a session
            // file read while its client still writes it). The readers skip that line and say so.
            let one_then_partial = || {
                let mut rest = trimmed.lines().filter(|l| !l.trim().is_empty());
                let (first, second) = (rest.next(), rest.next());
                // No line break after the last line's text (whatever blanks follow it).
                let unterminated = !text.get(text.trim_end().len()..).unwrap_or_default().contains('\n');
                rest.next().is_none()
                    && unterminated
                    && first.is_some_and(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.is_object()))
                    && second.is_some()
            };
            if lines.len() >= 2 || (lines.len() == 1 && (trimmed.lines().count() == 1 || one_then_partial()))
            {
                detect_jsonl(&lines)
            } else {
                // Where the document stops being JSON (a number out of range, a lone surrogate,
                // a stray byte): the one fact a person needs to fix the file.
                Err(Unrecognized { looks_like: format!("neither JSON nor JSON Lines (as JSON: {whole})") })
            }
        }
    }
}

/// JSON Lines: a Claude Code transcript or a Codex rollout, by the fields of their lines.
pub fn detect_jsonl(lines: &[Value]) -> Result<Detected, Unrecognized> {
    let has = |f: &dyn Fn(&Map<String, Value>) -> bool| lines.iter().filter_map(Value::as_object).any(f);
    if has(&|o| {
        (o.contains_key("sessionId") && o.contains_key("projectHash"))
            || o.contains_key("$set")
            || o.contains_key("$rewindTo")
    }) {
        return found(
            RequestFormat::GeminiCli,
            "JSON Lines with a sessionId/projectHash header or $set lines",
        );
    }
    if has(&|o| o.contains_key("sessionId") && (o.contains_key("uuid") || o.contains_key("message"))) {
        return found(RequestFormat::ClaudeCode, "JSON Lines with sessionId/uuid entries");
    }
    if has(&|o| {
        o.contains_key("payload")
            && matches!(
                o.get("type").and_then(Value::as_str),
                Some("session_meta" | "response_item" | "event_msg" | "turn_context")
            )
    }) {
        return found(RequestFormat::Codex, "JSON Lines with session_meta/response_item entries");
    }
    let header = lines
        .first()
        .and_then(Value::as_object)
        .is_some_and(|o| o.contains_key("id") && o.contains_key("timestamp"));
    if header
        && has(&|o| {
            matches!(
                o.get("type").and_then(Value::as_str),
                Some("message" | "function_call" | "function_call_output" | "reasoning")
            )
        })
    {
        return found(
            RequestFormat::Codex,
            "JSON Lines of bare response items after an id/timestamp header (older rollouts)",
        );
    }
    Err(Unrecognized {
        looks_like: format!("JSON Lines ({} lines read) of no known transcript shape", lines.len()),
    })
}

/// A JSON value: by its top-level keys, then by its messages.
pub fn detect_value(v: &Value) -> Result<Detected, Unrecognized> {
    let o = match v {
        Value::Object(o) => o,
        Value::Array(a) => {
            if is_contents(a) {
                return found(
                    RequestFormat::GeminiCli,
                    "a top-level array of role/parts contents (a /chat save checkpoint)",
                );
            }
            let roles = a.iter().filter(|m| m.get("role").is_some() && m.get("content").is_some()).count();
            if !a.is_empty() && roles == a.len() {
                return found(RequestFormat::Cline, "a top-level array of role/content messages");
            }
            return Err(Unrecognized { looks_like: format!("a JSON array of {} items", a.len()) });
        }
        other => return Err(Unrecognized { looks_like: format!("a JSON {}", crate::kind(other)) }),
    };
    if o.contains_key("sessionId") && o.contains_key("projectHash") {
        return found(RequestFormat::GeminiCli, "a sessionId/projectHash chat record");
    }
    if o.get("history").and_then(Value::as_array).is_some_and(|a| is_contents(a))
        && !o.contains_key("messages")
    {
        return found(RequestFormat::GeminiCli, "a history of role/parts contents (a /chat save checkpoint)");
    }
    if o.contains_key("chat_history") {
        return found(RequestFormat::Chatcli, "a chat_history array");
    }
    if o.contains_key("contents") {
        return found(RequestFormat::Gemini, "a contents array");
    }
    if o.contains_key("input") && !o.contains_key("messages") {
        return found(RequestFormat::OpenaiResponses, "an input field");
    }
    if let Some(msgs) = o.get("messages").and_then(Value::as_array) {
        return messages_format(o, msgs);
    }
    // A one-line transcript parses as a single JSON object.
    if let Ok(d) = detect_jsonl(std::slice::from_ref(v)) {
        return Ok(d);
    }
    let mut keys: Vec<&str> = o.keys().map(String::as_str).take(6).collect();
    if o.len() > 6 {
        keys.push("…");
    }
    Err(Unrecognized { looks_like: format!("a JSON object with keys {}", keys.join(", ")) })
}

/// A non-empty list of Gemini contents: every item has `role` and `parts`.
fn is_contents(a: &[Value]) -> bool {
    !a.is_empty() && a.iter().all(|c| c.get("role").is_some() && c.get("parts").is_some_and(Value::is_array))
}

/// `messages` is shared by OpenAI chat, Anthropic and Bedrock: decided by the blocks and fields
/// only one of them has.
fn messages_format(o: &Map<String, Value>, msgs: &[Value]) -> Result<Detected, Unrecognized> {
    const BEDROCK_TOP: &[&str] =
        &["inferenceConfig", "toolConfig", "additionalModelRequestFields", "guardrailConfig", "modelId"];
    const ANTHROPIC_TOP: &[&str] = &[
        "anthropic_version",
        "system",
        "thinking",
        "context_management",
        "stop_sequences",
        "top_k",
        "mcp_servers",
    ];
    const OPENAI_TOP: &[&str] = &[
        "max_completion_tokens",
        "response_format",
        "n",
        "logprobs",
        "frequency_penalty",
        "presence_penalty",
        "functions",
        "function_call",
        "parallel_tool_calls",
        "stream_options",
        "reasoning_effort",
    ];
    let blocks = || {
        msgs.iter()
            .filter_map(|m| m.get("content"))
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_object)
    };
    if let Some(k) = BEDROCK_TOP.iter().find(|k| o.contains_key(**k)) {
        return found(RequestFormat::Bedrock, format!("messages with a top-level {k}"));
    }
    if blocks().any(|b| !b.contains_key("type")) {
        return found(RequestFormat::Bedrock, "messages whose content blocks have no type (Converse unions)");
    }
    if let Some(r) = msgs
        .iter()
        .filter_map(|m| m.get("role").and_then(Value::as_str))
        .find(|r| matches!(*r, "system" | "developer" | "tool" | "function"))
    {
        return found(RequestFormat::Openai, format!("messages with role {r}"));
    }
    if msgs.iter().any(|m| m.get("tool_calls").is_some()) {
        return found(RequestFormat::Openai, "messages with tool_calls");
    }
    const ANTHROPIC_BLOCKS: &[&str] =
        &["tool_use", "tool_result", "thinking", "redacted_thinking", "document", "image", "server_tool_use"];
    if let Some(t) =
        blocks().filter_map(|b| b.get("type").and_then(Value::as_str)).find(|t| ANTHROPIC_BLOCKS.contains(t))
    {
        return found(RequestFormat::Anthropic, format!("messages with {t} blocks"));
    }
    const OPENAI_PARTS: &[&str] = &["image_url", "input_audio", "file", "refusal"];
    if let Some(t) =
        blocks().filter_map(|b| b.get("type").and_then(Value::as_str)).find(|t| OPENAI_PARTS.contains(t))
    {
        return found(RequestFormat::Openai, format!("messages with {t} parts"));
    }
    if let Some(k) = ANTHROPIC_TOP.iter().find(|k| o.contains_key(**k)) {
        return found(RequestFormat::Anthropic, format!("messages with a top-level {k}"));
    }
    if let Some(k) = OPENAI_TOP.iter().find(|k| o.contains_key(**k)) {
        return found(RequestFormat::Openai, format!("messages with a top-level {k}"));
    }
    found(
        RequestFormat::Openai,
        "plain text messages (OpenAI and Anthropic read them alike; --from anthropic to choose it)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(s: &str) -> RequestFormat {
        detect(s.as_bytes()).unwrap().format
    }

    #[test]
    fn shapes() {
        assert_eq!(fmt(r#"{"version":2,"chat_history":[]}"#), RequestFormat::Chatcli);
        assert_eq!(fmt(r#"{"contents":[]}"#), RequestFormat::Gemini);
        assert_eq!(fmt(r#"{"model":"m","input":"hi"}"#), RequestFormat::OpenaiResponses);
        assert_eq!(fmt(r#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#), RequestFormat::Bedrock);
        assert_eq!(
            fmt(r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}"#),
            RequestFormat::Anthropic
        );
        assert_eq!(fmt(r#"{"messages":[{"role":"system","content":"x"}]}"#), RequestFormat::Openai);
        assert_eq!(
            fmt(r#"{"system":"s","messages":[{"role":"user","content":"x"}]}"#),
            RequestFormat::Anthropic
        );
        assert_eq!(fmt(r#"[{"role":"user","content":[{"type":"text","text":"x"}]}]"#), RequestFormat::Cline);
        assert_eq!(
            fmt("{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"u\"}\n{\"type\":\"assistant\",\"sessionId\":\"s\",\"uuid\":\"v\"}\n"),
            RequestFormat::ClaudeCode
        );
        assert_eq!(
            fmt("{\"type\":\"session_meta\",\"payload\":{}}\n{\"type\":\"response_item\",\"payload\":{}}\n"),
            RequestFormat::Codex
        );
        assert_eq!(
            fmt(r#"{"type":"user","sessionId":"s","uuid":"u"}"#),
            RequestFormat::ClaudeCode,
            "one line"
        );
        assert_eq!(
            fmt("{\"id\":\"x\",\"timestamp\":\"t\"}\n{\"type\":\"message\",\"role\":\"user\",\"content\":[]}\n"),
            RequestFormat::Codex,
            "older rollout"
        );
    }

    /// A session file read while its client writes it: one complete record and a half-written
    /// one (unterminated) is still that client's file; a second line that is complete but not
    /// JSON, or any line after a broken one, is not a half-written record.
    #[test]
    fn one_record_and_a_half_written_one_is_json_lines() {
        let one = "{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"u\"}\n";
        assert_eq!(fmt(&format!("{one}{{\"type\":\"assis")), RequestFormat::ClaudeCode);
        assert_eq!(
            fmt(&format!("{one}{{\"type\":\"assis  \t")),
            RequestFormat::ClaudeCode,
            "trailing blanks"
        );
        for not_partial in [
            format!("{one}{{\"type\":\"assis\n"),
            format!("{one}{{\"type\":\"assis\n{{\"x\":"),
            format!("not json\n{one}"),
            // Terminated, whatever blanks follow the line break.
            format!("{one}{{\"type\":\"assis\r\n"),
            format!("{one}{{\"type\":\"assis\n\r"),
            format!("{one}{{\"type\":\"assis\n\x0c"),
            // A record is an object: an array or a scalar first is no session file's record.
            "[{\"type\":\"user\"}]\n{\"type\":\"assis".to_string(),
            "5\n{\"type\":\"assis".to_string(),
        ] {
            let e = detect(not_partial.as_bytes()).unwrap_err().to_string();
            assert!(e.starts_with("neither JSON nor JSON Lines"), "{not_partial:?}: {e}");
        }
    }

    #[test]
    fn unrecognised_says_what_it_looks_like() {
        let e = detect(br#"{"foo":1,"bar":2}"#).unwrap_err().to_string();
        assert!(e.starts_with("a JSON object with keys foo, bar; not a format"), "{e}");
        assert!(e.contains("supported: openai"), "{e}");
        assert!(!e.contains('\n'));
        assert!(detect(b"hello\nworld").unwrap_err().to_string().starts_with("neither JSON nor JSON Lines"));
        // Where a JSON document goes wrong is said, with its line and column.
        let e = detect(b"{\"model\": \"m\",\n \"x\": 1.0e400}").unwrap_err().to_string();
        assert!(e.contains("number out of range at line 2 column"), "{e}");
        let e = detect(br#"{"messages": [{"role": "user", "content": "\ud800"}]}"#).unwrap_err().to_string();
        assert!(e.contains("hex escape") && e.contains("line 1 column"), "{e}");
    }
}
