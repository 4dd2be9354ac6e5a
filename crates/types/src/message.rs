//! Messages and histories in the reference client's JSON shape (behaviour spec section 1).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

crate::string_enum! {
    /// Who wrote a message.
    pub enum Role {
        /// The system prompt or an attached system context.
        System => "system",
        /// A person (or a user-role message carrying tool/worker output).
        User => "user",
        /// The model.
        Assistant => "assistant",
        /// A tool result answering a call.
        Tool => "tool",
    }
}

/// A native tool call on an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id that the tool result answers.
    #[serde(default, deserialize_with = "null_default")]
    pub id: String,
    /// Always `function` in practice.
    #[serde(rename = "type", default = "function_type", deserialize_with = "null_function")]
    pub kind: String,
    /// The tool's name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// The arguments as a JSON value (an object in practice).
    #[serde(default)]
    pub arguments: Value,
}

fn function_type() -> String {
    "function".to_string()
}

fn null_function<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(function_type))
}

/// One structured part of a system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemPart {
    /// Part type, e.g. `text`.
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
    /// The part's text.
    #[serde(default, deserialize_with = "null_default")]
    pub text: String,
    /// Provider cache-control hint, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
}

/// A vision input attached to a user turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// MIME type such as `image/png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Base64 image bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// A URL, for URL-only images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Flags that survive every rewrite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The message is a compaction summary.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub is_summary: bool,
    /// How many messages a summary covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_of: Option<u64>,
    /// The client mode (chat, agent, coder…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// A recall result the model asked for in full: never summarized, cut or shrunk.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub preserve_verbatim: bool,
    /// A user-role message that carries tool or worker output.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub agent_feedback: bool,
    /// Comma-separated names of the skills this message carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_names: Option<String>,
    /// The skill block was collapsed to a stub.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub skill_collapsed: bool,
    /// A tool result answering a call the provider holds, not the history: the call was made in
    /// an earlier response the request chains to (the Responses API's `previous_response_id`).
    /// Pairing repair keeps it; it is not an orphan.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub call_held_upstream: bool,
}

impl Meta {
    /// True when no flag is set (the field is then omitted from JSON).
    pub fn is_empty(&self) -> bool {
        self == &Meta::default()
    }
}

/// One message of a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Text; may be empty.
    #[serde(default, deserialize_with = "null_default")]
    pub content: String,
    /// Native tool calls (assistant messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Structured system prompt parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub system_parts: Vec<SystemPart>,
    /// Vision inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub images: Vec<Image>,
    /// The tool result reports a failure.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub is_error: bool,
    /// Failure code of an error result, e.g. `ENOENT`, `missing_result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Flags that survive rewrites.
    #[serde(default, skip_serializing_if = "Meta::is_empty", deserialize_with = "null_default")]
    pub meta: Meta,
    /// The provider's own shape of this message, kept by an importer so that the request as sent
    /// can be rebuilt exactly: blocks the model has no field for (thinking with its signature,
    /// documents, `cache_control` on a block, …) and the layout of the modeled parts. Its meaning
    /// belongs to `salvage-wire`; everything else carries it opaquely through every rewrite, weighs
    /// it (its compact JSON length) and archives it with the message. Absent for messages salvage
    /// wrote itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<Value>,
}

/// A history: messages in order.
pub type History = Vec<Message>;

impl Message {
    /// A plain message with text content.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            system_parts: Vec::new(),
            images: Vec::new(),
            is_error: false,
            error_code: None,
            meta: Meta::default(),
            wire: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result answering `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Self::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.into());
        m
    }

    /// True for an assistant message that carries native tool calls.
    pub fn has_tool_calls(&self) -> bool {
        self.role == Role::Assistant && !self.tool_calls.is_empty()
    }

    /// True when this message is a tool result, native (`role: tool`) or user-role feedback.
    pub fn is_tool_output(&self) -> bool {
        self.role == Role::Tool || self.meta.agent_feedback
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Deserializes `null` as the type's default (Go encodes nil slices and zero values as `null`).
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_nulls_load_as_defaults() {
        let m: Message = serde_json::from_str(
            r#"{"role":"assistant","content":null,"tool_calls":null,"images":null,"meta":null,"is_error":null}"#,
        )
        .unwrap();
        assert_eq!(m, Message::assistant(""));
    }

    #[test]
    fn empty_fields_are_omitted_and_round_trip() {
        let mut m = Message::tool("c1", "out");
        m.is_error = true;
        m.error_code = Some("ENOENT".into());
        m.meta.preserve_verbatim = true;
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(
            s,
            r#"{"role":"tool","content":"out","tool_call_id":"c1","is_error":true,"error_code":"ENOENT","meta":{"preserve_verbatim":true}}"#
        );
        let back: Message = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn unknown_role_is_an_error() {
        let e = serde_json::from_str::<Message>(r#"{"role":"robot","content":"x"}"#).unwrap_err();
        assert!(e.to_string().contains("robot"), "{e}");
    }
}
