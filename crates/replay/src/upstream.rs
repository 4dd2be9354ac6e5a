//! The simulated upstream: a gateway with a body cap that rejects in each style of
//! `capture.md`, and a provider with a context window counted by a real BPE tokenizer
//! (`o200k_base`) that answers an overflow in its real wording, applies provider-side context
//! editing, and replies with scripted responses.

use crate::media::MAX_IMAGE_TOKENS;
use salvage_types::capture::{Failure, OverflowStyle, RejectStyle, ScriptedResponse, StopReason, Upstream};
use salvage_types::message::{Message, Role};

/// What the upstream answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The request was rejected.
    Rejected(Rejection),
    /// The request was accepted.
    Accepted(Reply),
}

/// A rejection as the client sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Status (`None` for transport failures), text, transport error, and the rejected size when
    /// the upstream annotates it.
    pub failure: Failure,
    /// Tokens the provider counted, when it got that far.
    pub counted_tokens: Option<u64>,
}

/// An accepted request's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// The text.
    pub content: String,
    /// Input tokens counted.
    pub input_tokens: u64,
    /// Tool uses the provider cleared (context editing), if any.
    pub cleared_tool_uses: u64,
    /// Input tokens the clearing saved.
    pub cleared_tokens: u64,
    /// The tool uses the provider cleared (call ids, oldest first), as the server decided them.
    pub cleared_ids: Vec<String>,
}

/// Provider-side `clear_tool_uses` settings as the simulated server applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EditRule {
    trigger_input_tokens: u64,
    keep_tool_uses: u64,
    clear_at_least_tokens: u64,
}

/// The server's editing rule (behaviour spec section 9), written here on its own — never by
/// calling the code under test: over the trigger, every tool result but the most recent `keep`
/// is cleared, oldest first, provided that clears at least `clear_at_least` tokens (else none).
/// Results the client already replaced by the provider's stub are not tool uses any more.
fn server_clears(history: &[Message], rule: &EditRule, input_tokens: u64) -> (Vec<String>, u64) {
    if input_tokens <= rule.trigger_input_tokens {
        return (Vec::new(), 0);
    }
    let live: Vec<&Message> = history
        .iter()
        .filter(|m| m.role == Role::Tool && !m.content.starts_with("[Tool result cleared by provider"))
        .collect();
    let keep = usize::try_from(rule.keep_tool_uses).unwrap_or(usize::MAX);
    let n = live.len().saturating_sub(keep);
    let cleared: Vec<&Message> = live.into_iter().take(n).collect();
    let tokens: u64 = cleared.iter().map(|m| count_tokens(std::slice::from_ref(*m)).saturating_sub(12)).sum();
    if cleared.is_empty() || tokens < rule.clear_at_least_tokens {
        return (Vec::new(), 0);
    }
    (cleared.iter().map(|m| m.tool_call_id.clone().unwrap_or_default()).collect(), tokens)
}

/// Counts tokens of a history with the real `o200k_base` BPE: message text, tool-call names and
/// arguments, plus a small per-message overhead as chat formats add.
pub fn count_tokens(history: &[Message]) -> u64 {
    count_tokens_until(history, u64::MAX).0
}

/// Counts tokens, stopping once the count passes `limit`: returns `(count, exact)`. When it
/// stops early the rest is extrapolated from the tokens per byte seen so far (the verdict —
/// over the window — is exact; only the number in the error text is an estimate).
pub fn count_tokens_until(history: &[Message], limit: u64) -> (u64, bool) {
    let mut n = 0u64;
    let mut seen_bytes = 0u64;
    // Counts saturate: a count past u64::MAX is over every window, which is all the verdict needs.
    let len = |s: &str| u64::try_from(s.len()).unwrap_or(u64::MAX);
    let tokens = crate::o200k::count;
    // The bytes a message's tokens come from: its text and what its wire template carries.
    let bytes_of = |m: &Message| {
        len(&m.content)
            .saturating_add(64)
            .saturating_add(m.wire.as_ref().map_or(0, salvage_types::weight::compact_json_len))
    };
    for (i, m) in history.iter().enumerate() {
        if n > limit {
            // The bytes not counted, measured only when the count stops early.
            let rest =
                history.get(i..).unwrap_or_default().iter().fold(0u64, |t, m| t.saturating_add(bytes_of(m)));
            let per_byte = n as f64 / seen_bytes.max(1) as f64;
            return (n.saturating_add((rest as f64 * per_byte) as u64), false);
        }
        seen_bytes = seen_bytes.saturating_add(bytes_of(m));
        n = n.saturating_add(4).saturating_add(tokens(&m.content));
        for c in &m.tool_calls {
            n = n.saturating_add(tokens(&c.name)).saturating_add(tokens(&c.arguments.to_string()));
        }
        // The parts of a system prompt sent in blocks are its content joined: only a part the
        // content does not hold is counted besides it (every part differs from the joined
        // content, and counting each again doubled a Claude Code system prompt: re-review,
        // finding 1).
        for p in &m.system_parts {
            if !m.content.contains(p.text.as_str()) {
                n = n.saturating_add(tokens(&p.text));
            }
        }
        for image in &m.images {
            // An image the capture holds by address only costs the most an image can: a lower
            // price could call a recovery converged that the provider rejects.
            let t = image.data.as_deref().map_or(MAX_IMAGE_TOKENS, crate::media::payload_tokens);
            n = n.saturating_add(t);
        }
        if let Some(w) = &m.wire {
            n = n.saturating_add(wire_tokens(w));
        }
    }
    (n, true)
}

/// The tokens of the blocks a message's `wire` template carries that the message model has no
/// field for (a text document, a thinking block, a code cell): their text, counted as the model
/// reads it. Placeholders of the modeled parts (objects with a `$` key) are counted with the
/// message. Binary content (a base64 or data-URL payload: a long run of base64 characters),
/// whatever its key (but in a block of `type: text`), is weighed by what its bytes are
/// ([`crate::media`]: an image by its size, a PDF by its pages, a text document by its text,
/// anything else by its size); identifiers, signatures and
/// encrypted blobs (`id`, `type`, `signature`, `encrypted_content`, …) count nothing. Before,
/// these blocks weighed nothing, and a request over the window with a 60 KB document in it was
/// accepted (review of the checks, finding 2); base64 under `data` was then read as text
/// (re-review, finding 4), and then every payload weighed 85 whatever it held.
pub fn wire_tokens(w: &serde_json::Value) -> u64 {
    use serde_json::Value;
    match w {
        Value::Array(a) => a.iter().map(wire_tokens).fold(0, u64::saturating_add),
        Value::Object(o) if o.contains_key("$") => 0,
        Value::Object(o) => {
            let kind = o.get("type").and_then(Value::as_str);
            let declared = ["media_type", "mimeType", "mime_type"]
                .iter()
                .find_map(|k| o.get(*k))
                .and_then(Value::as_str);
            if matches!(kind, Some("base64" | "image" | "input_image" | "image_url" | "image_file")) {
                // The payload inside, weighed by its bytes; an image by address or file id (the
                // capture does not hold it) at the most an image costs.
                return first_payload(w)
                    .map_or(MAX_IMAGE_TOKENS, |p| crate::media::payload_tokens_declared(p, declared));
            }
            // A block that says it is text (an Anthropic text document's source) holds text, even
            // a long run of base64's letters (a DNA sequence: review finding 5).
            let text = kind == Some("text");
            o.iter()
                .map(|(k, v)| match v {
                    Value::String(_) if OPAQUE_KEYS.contains(&k.as_str()) => 0,
                    Value::String(s) if !text && is_binary(s) => {
                        crate::media::payload_tokens_declared(s, declared)
                    }
                    Value::String(s) => crate::o200k::count(s),
                    // An image keyed by kind (Bedrock Converse): its bytes, or the most an image
                    // costs when it is in S3 (the capture does not hold it).
                    v @ Value::Object(_) if k == "image" => first_payload(v)
                        .map_or(MAX_IMAGE_TOKENS, |p| crate::media::payload_tokens_declared(p, declared)),
                    // A Gemini image by address (`fileData` of an image type): the most an image
                    // costs, not the tokens of its URI (a review's 30 photos by `fileUri` weighed 12
                    // tokens each and a recovery that kept them was accepted).
                    Value::Object(fd)
                        if matches!(k.as_str(), "fileData" | "file_data") && is_image_mime(fd) =>
                    {
                        MAX_IMAGE_TOKENS
                    }
                    v => wire_tokens(v),
                })
                .fold(0, u64::saturating_add)
        }
        _ => 0,
    }
}

/// True for a block (a Gemini `fileData`, a part) whose `mimeType`/`mime_type` is an image type.
pub(crate) fn is_image_mime(fd: &serde_json::Map<String, serde_json::Value>) -> bool {
    fd.get("mimeType")
        .or_else(|| fd.get("mime_type"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|m| m.trim().to_ascii_lowercase().starts_with("image/"))
}

/// The first binary payload (base64 or a data URL) inside a block, depth first.
fn first_payload(w: &serde_json::Value) -> Option<&str> {
    use serde_json::Value;
    match w {
        Value::String(s) if is_binary(s) => Some(s),
        Value::Array(a) => a.iter().find_map(first_payload),
        Value::Object(o) => o.values().find_map(first_payload),
        _ => None,
    }
}

/// Keys whose strings are identifiers or metadata, not text the model reads.
const OPAQUE_KEYS: &[&str] = &[
    "type",
    "id",
    "call_id",
    "tool_use_id",
    "name",
    "signature",
    "media_type",
    "mime_type",
    "mimeType",
    "format",
    "cache_control",
    "role",
    "f",
    "status",
    "encrypted_content",
    "url",
    "file_id",
    "detail",
];

/// True when `s` is a binary payload: a data URL, or a long run of base64 characters, also
/// wrapped in lines as MIME writes it (76 to a line; lines of 60 or more on average: a document
/// sent so weighed nothing, re-review finding 5).
fn is_binary(s: &str) -> bool {
    if s.starts_with("data:") && s.contains(";base64,") {
        return true;
    }
    let breaks = s.bytes().filter(|b| *b == b'\n').count();
    s.len() >= 256
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_' | b'\r' | b'\n')
        })
        && breaks.saturating_mul(60) <= s.len()
}

/// The wording of an overflow, per provider.
pub fn overflow_message(style: OverflowStyle, tokens: u64, window: u64) -> (u16, String) {
    match style {
        OverflowStyle::Anthropic => (400, format!("{{\"type\":\"error\",\"error\":{{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: {tokens} tokens > {window} maximum\"}}}}")),
        OverflowStyle::Openai => (400, format!("Error code: 400 - {{'error': {{'message': \"This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens.\", 'type': 'invalid_request_error', 'code': 'context_length_exceeded'}}}}")),
        OverflowStyle::Gemini => (400, format!("The input token count ({tokens}) exceeds the maximum number of tokens allowed ({window}).")),
        OverflowStyle::Xai => (400, format!("This model's maximum prompt length is {window} but the request contains {tokens} tokens.")),
        OverflowStyle::Mistral => (400, format!("Prompt contains {tokens} tokens and 0 draft tokens, too large for model with {window} maximum context length")),
        OverflowStyle::Bedrock => (400, "ValidationException: Input is too long for requested model.".to_string()),
    }
}

/// The gateway's rejection of a `size`-byte body.
pub fn gateway_rejection(style: RejectStyle, size: u64, annotate: bool) -> Rejection {
    let rejected_bytes = annotate.then_some(size);
    let (status, message, transport) = match style {
        RejectStyle::Http413 => (Some(413), "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>".to_string(), None),
        RejectStyle::Http431 => (Some(431), "431 Request Header Fields Too Large".to_string(), None),
        RejectStyle::Waf403 => (Some(403), "403 Forbidden: Request blocked by security policy (WAF rule 949110)".to_string(), None),
        RejectStyle::WafHtml403 => (
            Some(403),
            "operation error Bedrock Runtime: InvokeModel, https response error StatusCode: 403, RequestID: , deserialization failed, failed to decode response body, invalid character '<' looking for beginning of value".to_string(),
            None,
        ),
        RejectStyle::ConnectionReset => (None, "read tcp 127.0.0.1:51234->127.0.0.1:443: read: connection reset by peer".to_string(), Some("connection reset by peer".to_string())),
        RejectStyle::Eof => (None, "unexpected EOF".to_string(), Some("unexpected EOF".to_string())),
    };
    Rejection {
        failure: Failure { status, message, transport, rejected_request_bytes: rejected_bytes },
        counted_tokens: None,
    }
}

/// The simulated upstream of one capture.
pub struct Simulated {
    spec: Upstream,
    responses: std::collections::VecDeque<ScriptedResponse>,
    edits: Option<EditRule>,
    /// Tokens every request carries besides its messages ([`request_tokens`]).
    fixed_tokens: u64,
}

/// The request fields the model reads as input besides the messages, as paths from the top
/// level: tool definitions (every format's spelling), structured-output schemas (chat's
/// `response_format`, the Responses API's `text.format`, Gemini's `generationConfig` schemas),
/// and instructions a format keeps outside its messages when the importer could not model them
/// as one. Sampling parameters, the model id, metadata and flags count nothing.
pub const INPUT_FIELDS: &[&[&str]] = &[
    &["tools"],
    &["functions"],
    &["toolConfig"],
    &["instructions"],
    &["system"],
    &["systemInstruction"],
    &["response_format"],
    &["text", "format"],
    &["generationConfig", "responseSchema"],
    &["generationConfig", "responseJsonSchema"],
    &["generationConfig", "response_schema"],
];

/// The tokens a captured request's fields carry besides its messages ([`INPUT_FIELDS`]'s
/// paths): a string as its text, anything else (a tool's JSON schema, names and descriptions
/// included) as its compact JSON. Providers count tool definitions and output schemas as input
/// tokens; before, the simulation counted only the messages, so a request whose tools (or, in
/// the review, whose Responses or Gemini schema) filled the window was accepted and its recovery
/// called converged.
pub fn request_tokens(fields: &serde_json::Map<String, serde_json::Value>) -> u64 {
    use serde_json::Value;
    INPUT_FIELDS
        .iter()
        .filter_map(|path| {
            let (first, rest) = path.split_first()?;
            rest.iter().try_fold(fields.get(*first)?, |v, k| v.get(*k))
        })
        .map(|v| match v {
            Value::String(s) => crate::o200k::count(s),
            Value::Null => 0,
            Value::Array(a) if a.is_empty() => 0,
            Value::Object(o) if o.is_empty() => 0,
            v => crate::o200k::count(&v.to_string()),
        })
        .fold(0, u64::saturating_add)
}

impl Simulated {
    /// From a capture's `upstream`.
    pub fn new(spec: &Upstream) -> Simulated {
        let edits = spec.context_editing.as_ref().map(|e| EditRule {
            trigger_input_tokens: e.trigger_input_tokens,
            keep_tool_uses: e.keep_tool_uses,
            clear_at_least_tokens: e.clear_at_least_tokens,
        });
        Simulated { spec: spec.clone(), responses: spec.responses.clone().into(), edits, fixed_tokens: 0 }
    }

    /// The simulated upstream of a capture: its `upstream`, and the tokens its request's fields
    /// carry besides the messages ([`request_tokens`]), counted in every request it judges.
    pub fn for_capture(capture: &salvage_types::capture::Capture) -> Simulated {
        let mut sim = Simulated::new(&capture.upstream);
        sim.fixed_tokens = capture.request.as_ref().map_or(0, |r| request_tokens(&r.fields));
        sim
    }

    /// The model's output cap, if the capture gives one.
    pub fn max_output_tokens(&self) -> Option<u64> {
        self.spec.model.as_ref().and_then(|m| m.max_output_tokens)
    }

    /// The provider's window, if the capture gives one.
    pub fn window(&self) -> Option<u64> {
        self.spec.model.as_ref().and_then(|m| m.context_window_tokens)
    }

    /// Whether a request would be rejected, without consuming a scripted response.
    pub fn judge(
        &self,
        body_bytes: u64,
        history: &[Message],
        context_management: bool,
    ) -> Result<(u64, Vec<String>, u64), Rejection> {
        if let Some(g) = &self.spec.gateway {
            if let Some(max) = g.max_body_bytes {
                if body_bytes > max {
                    return Err(gateway_rejection(g.rejects_with, body_bytes, g.reports_request_size));
                }
            }
        }
        let window = self.spec.model.as_ref().and_then(|m| m.context_window_tokens);
        // The provider edits only a request that asks for it (the beta field).
        let edits = self.edits.as_ref().filter(|_| context_management);
        let edit_trigger = edits.map(|e| e.trigger_input_tokens);
        // Counting can stop past the window unless context editing may clear part of it.
        let limit = match (window, edit_trigger) {
            (Some(w), None) => w,
            _ => u64::MAX,
        };
        let (messages, _) = count_tokens_until(history, limit.saturating_sub(self.fixed_tokens));
        let tokens = messages.saturating_add(self.fixed_tokens);
        let (cleared_ids, cleared_tokens) = match edits {
            Some(rule) => server_clears(history, rule, tokens),
            None => (Vec::new(), 0),
        };
        let effective = tokens.saturating_sub(cleared_tokens);
        if let Some(m) = &self.spec.model {
            if let Some(w) = m.context_window_tokens {
                if effective > w {
                    let (status, message) =
                        overflow_message(m.overflow_style.unwrap_or(OverflowStyle::Anthropic), effective, w);
                    return Err(Rejection {
                        failure: Failure {
                            status: Some(status),
                            message,
                            transport: None,
                            rejected_request_bytes: None,
                        },
                        counted_tokens: Some(effective),
                    });
                }
            }
        }
        Ok((effective, cleared_ids, cleared_tokens))
    }

    /// Sends a request: judged, and when accepted answered with the next scripted reply.
    pub fn send(&mut self, body_bytes: u64, history: &[Message], context_management: bool) -> Answer {
        match self.judge(body_bytes, history, context_management) {
            Err(r) => Answer::Rejected(r),
            Ok((input_tokens, cleared_ids, cleared_tokens)) => {
                let r = self.responses.pop_front().unwrap_or(ScriptedResponse {
                    stop_reason: StopReason::EndTurn,
                    content: "OK — continuing with the task.".into(),
                    usage: None,
                });
                Answer::Accepted(Reply {
                    stop_reason: r.stop_reason,
                    content: r.content,
                    input_tokens,
                    cleared_tool_uses: cleared_ids.len() as u64,
                    cleared_tokens,
                    cleared_ids,
                })
            }
        }
    }
}
