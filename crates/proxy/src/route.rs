//! Which provider API a request speaks (from its path or `--provider`), its history as salvage's
//! message model (through the importers of `salvage-wire`), and the body to send for a rewritten
//! history with every other field of the original kept in place.

use salvage_types::capture::RequestFormat;
use salvage_types::message::{Message, Role, ToolCall};
use salvage_types::History;
use serde_json::{json, Map, Value};

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

    /// The top-level fields of a body that hold the messages (rebuilt from a history).
    pub fn message_fields(self) -> &'static [&'static str] {
        match self {
            Api::AnthropicMessages => &["system", "messages"],
            Api::OpenaiChat => &["messages"],
            Api::OpenaiResponses => &["instructions", "input"],
        }
    }
}

/// A request body read as a history.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The history the body carries.
    pub history: History,
    /// The model it names.
    pub model: Option<String>,
    /// Whether it asks for a stream.
    pub stream: bool,
    /// Every top-level field besides the messages, in order.
    pub fields: Map<String, Value>,
}

/// Reads a request body of `api`; the error names the JSON path that is wrong.
pub fn parse(api: Api, body: &[u8]) -> Result<Parsed, String> {
    let value = salvage_wire::parse_json(body, "request").map_err(|e| e.to_string())?;
    let Value::Object(top) = &value else { return Err("request: expected a JSON object".into()) };
    let (history, model) = match api {
        Api::AnthropicMessages => {
            let i = salvage_wire::import(salvage_wire::Source::Anthropic, body, "request")
                .map_err(|e| e.to_string())?;
            (i.history, i.model)
        }
        Api::OpenaiChat => {
            let i = salvage_wire::import(salvage_wire::Source::Openai, body, "request")
                .map_err(|e| e.to_string())?;
            (i.history, i.model)
        }
        Api::OpenaiResponses => {
            (responses_history(top)?, top.get("model").and_then(Value::as_str).map(str::to_string))
        }
    };
    let fields: Map<String, Value> = top
        .iter()
        .filter(|(k, _)| !api.message_fields().contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Parsed { history, model, stream: top.get("stream").and_then(Value::as_bool).unwrap_or(false), fields })
}

/// The history of a Responses body: `instructions` as the system message, then `input` (a string,
/// or message items, `function_call` and `function_call_output` items) through the chat importer's
/// message model.
fn responses_history(top: &Map<String, Value>) -> Result<History, String> {
    let mut h = History::new();
    if let Some(s) = top.get("instructions").and_then(Value::as_str) {
        h.push(Message::system(s));
    }
    match top.get("input") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => h.push(Message::user(s.clone())),
        Some(Value::Array(items)) => {
            let mut chat = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let o = item.as_object().ok_or_else(|| format!("request: input[{i}]: expected an object"))?;
                match o.get("type").and_then(Value::as_str) {
                    Some("function_call") => chat.push(json!({
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [{"id": o.get("call_id").cloned().unwrap_or(Value::Null), "type": "function",
                            "function": {"name": o.get("name").cloned().unwrap_or(json!("")),
                                         "arguments": o.get("arguments").cloned().unwrap_or(json!("{}"))}}]
                    })),
                    Some("function_call_output") => chat.push(json!({
                        "role": "tool",
                        "tool_call_id": o.get("call_id").cloned().unwrap_or(Value::Null),
                        "content": match o.get("output") { Some(Value::String(s)) => json!(s), Some(v) => json!(v.to_string()), None => json!("") },
                    })),
                    Some("message") | None => chat.push(json!({
                        "role": o.get("role").cloned().unwrap_or(json!("user")),
                        "content": o.get("content").cloned().unwrap_or(Value::Null),
                    })),
                    // Reasoning and other item kinds are not part of the history.
                    Some(_) => {}
                }
            }
            let bytes = serde_json::to_vec(&json!({ "messages": chat })).map_err(|e| e.to_string())?;
            let i = salvage_wire::import(salvage_wire::Source::Openai, &bytes, "request (input)")
                .map_err(|e| e.to_string())?;
            h.extend(i.history);
        }
        Some(_) => return Err("request: input: expected a string or an array".into()),
    }
    // Consecutive tool calls of one turn come as separate items: fold them into one message.
    let mut out: History = History::new();
    for m in h {
        if let Some(last) = out.last_mut() {
            if m.role == Role::Assistant
                && last.role == Role::Assistant
                && m.content.is_empty()
                && !last.tool_calls.is_empty()
            {
                last.tool_calls.extend(m.tool_calls);
                continue;
            }
        }
        out.push(m);
    }
    Ok(out)
}

/// The body to send for `history`: the original's other fields in place, the message fields rebuilt.
pub fn body_for(api: Api, original: &Map<String, Value>, history: &[Message]) -> Vec<u8> {
    let model = original.get("model").and_then(Value::as_str).unwrap_or("model");
    let rebuilt: Map<String, Value> = match api {
        Api::AnthropicMessages => {
            let max = original.get("max_tokens").and_then(Value::as_u64).unwrap_or(4096);
            match salvage_wire::anthropic::request_body(history, model, max) {
                Value::Object(o) => o,
                _ => Map::new(),
            }
        }
        Api::OpenaiChat => match salvage_wire::openai::request_body(history, model, None) {
            Value::Object(o) => o,
            _ => Map::new(),
        },
        Api::OpenaiResponses => responses_fields(history),
    };
    let mut out = Map::new();
    // The message fields go where the original had them (after `model` otherwise).
    let mut placed = false;
    for (k, v) in original {
        out.insert(k.clone(), v.clone());
        if k == "model" && !placed {
            for f in api.message_fields() {
                if let Some(v) = rebuilt.get(*f) {
                    out.insert((*f).to_string(), v.clone());
                }
            }
            placed = true;
        }
    }
    if !placed {
        for f in api.message_fields() {
            if let Some(v) = rebuilt.get(*f) {
                out.insert((*f).to_string(), v.clone());
            }
        }
    }
    serde_json::to_vec(&Value::Object(out)).unwrap_or_default()
}

fn responses_fields(history: &[Message]) -> Map<String, Value> {
    let mut o = Map::new();
    let system: Vec<&str> =
        history.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
    if !system.is_empty() {
        o.insert("instructions".into(), json!(system.join("\n\n")));
    }
    let mut input = Vec::new();
    for m in history.iter().filter(|m| m.role != Role::System) {
        match m.role {
            Role::Tool => input.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.clone().unwrap_or_default(),
                "output": m.content,
            })),
            Role::Assistant => {
                if !m.content.is_empty() {
                    input.push(
                        json!({"role": "assistant", "content": [{"type": "output_text", "text": m.content}]}),
                    );
                }
                for c in &m.tool_calls {
                    input.push(call_item(c));
                }
            }
            Role::User | Role::System => {
                input.push(json!({"role": "user", "content": [{"type": "input_text", "text": m.content}]}))
            }
        }
    }
    o.insert("input".into(), Value::Array(input));
    o
}

fn call_item(c: &ToolCall) -> Value {
    let args = match &c.arguments {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": args})
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
    fn rebuilt_body_keeps_other_fields_in_order() {
        let body = br#"{"model":"claude-x","max_tokens":100,"system":"S","messages":[{"role":"user","content":"hi"}],"stream":true,"metadata":{"a":1}}"#;
        let p = parse(Api::AnthropicMessages, body).expect("parses");
        assert!(p.stream);
        assert_eq!(p.history.len(), 2);
        let out = body_for(Api::AnthropicMessages, &p.fields, &p.history);
        let v: Value = serde_json::from_slice(&out).expect("json");
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["model", "system", "messages", "max_tokens", "stream", "metadata"]);
        assert_eq!(v["messages"][0]["content"][0]["text"], "hi");
    }

    #[test]
    fn responses_input_becomes_a_history() {
        let body = br#"{"model":"gpt-x","instructions":"be brief","input":[{"role":"user","content":"list files"},{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"a b"},{"role":"user","content":[{"type":"input_text","text":"thanks"}]}]}"#;
        let p = parse(Api::OpenaiResponses, body).expect("parses");
        let roles: Vec<&str> = p.history.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        let out = body_for(Api::OpenaiResponses, &p.fields, &p.history);
        let again = parse(Api::OpenaiResponses, &out).expect("round trip");
        assert_eq!(again.history, p.history);
    }
}
