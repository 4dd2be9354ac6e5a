//! Which provider API a request speaks (from its path or `--provider`), its history as salvage's
//! message model (through the importers of `salvage-wire`), and the body to send for a rewritten
//! history with every other field of the original kept in place.

use salvage_types::capture::{Request, RequestFormat};
use salvage_types::message::Message;
use salvage_types::History;
use salvage_wire::Source;
use serde_json::Value;

/// The provider APIs the proxy records and recovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages, `POST /v1/messages`.
    AnthropicMessages,
    /// OpenAI-compatible chat completions, `POST /v1/chat/completions`.
    OpenaiChat,
    /// OpenAI Responses, `POST /v1/responses`.
    OpenaiResponses,
}

impl Api {
    /// The API a request path speaks, if the proxy records it (other paths are relayed as they are).
    pub fn from_path(path: &str) -> Option<Api> {
        let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if path.ends_with("/messages") && !path.ends_with("/count_tokens") {
            Some(Api::AnthropicMessages)
        } else if path.ends_with("/chat/completions") {
            Some(Api::OpenaiChat)
        } else if path.ends_with("/responses") {
            Some(Api::OpenaiResponses)
        } else {
            None
        }
    }

    /// The API named by `--provider` (`anthropic`, `openai`, `openai-responses`).
    pub fn parse(name: &str) -> Option<Api> {
        match name {
            "anthropic" => Some(Api::AnthropicMessages),
            "openai" | "openai-chat" => Some(Api::OpenaiChat),
            "openai-responses" | "responses" => Some(Api::OpenaiResponses),
            _ => None,
        }
    }

    /// The provider name journaled and written into captures.
    pub fn provider(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic",
            Api::OpenaiChat | Api::OpenaiResponses => "openai",
        }
    }

    /// The capture's `request.format`.
    pub fn format(self) -> RequestFormat {
        match self {
            Api::AnthropicMessages => RequestFormat::Anthropic,
            Api::OpenaiChat => RequestFormat::Openai,
            Api::OpenaiResponses => RequestFormat::OpenaiResponses,
        }
    }
}

/// A request body read as a history, through the lossless importers of `salvage-wire`.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The history the body carries.
    pub history: History,
    /// The model it names.
    pub model: Option<String>,
    /// Whether it asks for a stream.
    pub stream: bool,
    /// The request besides its messages (format, size as sent, every other field), from which
    /// the body of any history is rebuilt.
    pub request: Request,
}

impl Api {
    /// The importer of the API's request bodies.
    pub fn source(self) -> Source {
        match self {
            Api::AnthropicMessages => Source::Anthropic,
            Api::OpenaiChat => Source::Openai,
            Api::OpenaiResponses => Source::OpenaiResponses,
        }
    }
}

/// Reads a request body of `api`; the error names the JSON path that is wrong.
pub fn parse(api: Api, body: &[u8]) -> Result<Parsed, String> {
    let i = salvage_wire::import(api.source(), body, "request").map_err(|e| e.to_string())?;
    let request = i.request.unwrap_or_else(|| salvage_wire::bare_request(api.format(), i.model.as_deref()));
    let stream = request.fields.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(Parsed { history: i.history, model: i.model, stream, request })
}

/// [`parse`] of a body handed over: its bytes are freed (without a copy when nothing else holds
/// them) before the history is built from the parsed tree, so the body, its tree and its history
/// are never held at once.
pub fn parse_owned(api: Api, body: bytes::Bytes) -> Result<Parsed, String> {
    let i =
        salvage_wire::import_owned(api.source(), Vec::from(body), "request").map_err(|e| e.to_string())?;
    let request = i.request.unwrap_or_else(|| salvage_wire::bare_request(api.format(), i.model.as_deref()));
    let stream = request.fields.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(Parsed { history: i.history, model: i.model, stream, request })
}

/// The body to send for `history`: the client's other fields and provider blocks kept, the
/// messages rebuilt (for the history as sent, JSON-equal to the client's body).
pub fn body_for(request: &Request, history: &[Message]) -> Vec<u8> {
    serde_json::to_vec(&salvage_wire::request_body(request, history)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_api() {
        assert_eq!(Api::from_path("/v1/messages"), Some(Api::AnthropicMessages));
        assert_eq!(Api::from_path("/v1/messages?beta=true"), Some(Api::AnthropicMessages));
        assert_eq!(Api::from_path("/v1/messages/count_tokens"), None);
        assert_eq!(Api::from_path("/openai/v1/chat/completions"), Some(Api::OpenaiChat));
        assert_eq!(Api::from_path("/v1/responses"), Some(Api::OpenaiResponses));
        assert_eq!(Api::from_path("/v1/models"), None);
    }

    #[test]
    fn the_body_as_sent_rebuilds_and_keeps_other_fields() {
        let body = br#"{"model":"claude-x","max_tokens":100,"system":"S","messages":[{"role":"user","content":"hi"}],"stream":true,"metadata":{"a":1}}"#;
        let p = parse(Api::AnthropicMessages, body).expect("parses");
        assert!(p.stream);
        assert_eq!(p.history.len(), 2);
        assert_eq!(p.request.bytes, Some(body.len() as u64));
        let out = body_for(&p.request, &p.history);
        let (a, b): (Value, Value) =
            (serde_json::from_slice(body).expect("json"), serde_json::from_slice(&out).expect("json"));
        assert_eq!(a, b);
        let shorter = body_for(&p.request, &p.history[..1]);
        let v: Value = serde_json::from_slice(&shorter).expect("json");
        assert_eq!(v["metadata"]["a"], 1);
    }

    #[test]
    fn responses_input_becomes_a_history() {
        let body = br#"{"model":"gpt-x","instructions":"be brief","input":[{"role":"user","content":"list files"},{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"a b"},{"role":"user","content":[{"type":"input_text","text":"thanks"}]}]}"#;
        let p = parse(Api::OpenaiResponses, body).expect("parses");
        let roles: Vec<&str> = p.history.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        let out = body_for(&p.request, &p.history);
        let again = parse(Api::OpenaiResponses, &out).expect("round trip");
        assert_eq!(again.history, p.history);
    }
}
