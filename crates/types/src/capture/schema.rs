//! The shape of a capture: every field of `salvage.capture/1` and its meaning (`spec/capture.md`).

use crate::message::History;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The one format version this build reads and writes.
pub const CAPTURE_FORMAT: &str = "salvage.capture/1";
/// Every format version this build reads.
pub const KNOWN_FORMATS: &[&str] = &[CAPTURE_FORMAT];

/// One captured failing session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capture {
    /// Always [`CAPTURE_FORMAT`].
    pub format: String,
    /// A stable identifier (file names and reports use it).
    pub id: String,
    /// One line for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The client that saw the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
    /// Provider name (`anthropic`, `openai`, `bedrock`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The `CHATCLI_*` settings in force, as strings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// What the request carried besides the messages (written by importers), so that attempt 0 is
    /// the request as sent and a history can be exported back as a body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Request>,
    /// The history of the rejected request.
    pub history: History,
    /// What the client saw.
    pub failure: Failure,
    /// The simulated world for replay.
    #[serde(default)]
    pub upstream: Upstream,
    /// Recorded model outputs replayed exactly.
    #[serde(default)]
    pub recorded: Recorded,
    /// What the corpus asserts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
}

/// The request as sent, besides its messages (`spec/capture.md`, field `request`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The wire format the body was in.
    pub format: RequestFormat,
    /// The size of the body as sent (compact JSON), when it is known: attempt 0 of a replay must
    /// weigh exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Every top-level field of the body except the messages (model, tools, parameters, thinking,
    /// `context_management`, unknown fields…), verbatim and in order; `salvage-wire` owns which
    /// fields count as "the messages" for each format.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

crate::string_enum! {
    /// The wire format of an imported request body or session file.
    pub enum RequestFormat {
        /// OpenAI chat-completions request body.
        Openai => "openai",
        /// Anthropic Messages request body.
        Anthropic => "anthropic",
        /// OpenAI Responses API request body.
        OpenaiResponses => "openai_responses",
        /// Gemini `generateContent` request body.
        Gemini => "gemini",
        /// Bedrock Converse request body.
        Bedrock => "bedrock",
        /// The reference client's session file, version 2.
        Chatcli => "chatcli",
        /// A Claude Code transcript (JSONL).
        ClaudeCode => "claude_code",
        /// A Codex CLI rollout (JSONL).
        Codex => "codex",
        /// A Cline or Roo Code `api_conversation_history.json`.
        Cline => "cline",
        /// A Gemini CLI chat record (`chats/session-*.json[l]`) or `/chat save` checkpoint.
        GeminiCli => "gemini_cli",
    }
}

/// The client that produced the capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientInfo {
    /// Client name, e.g. `chatcli`.
    pub name: String,
    /// `chat`, `agent`, `coder`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
}

/// The failure as the client saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// HTTP status; null for transport failures.
    #[serde(default)]
    pub status: Option<u16>,
    /// The error text as printed.
    #[serde(default)]
    pub message: String,
    /// The transport error, if any.
    #[serde(default)]
    pub transport: Option<String>,
    /// The byte size of the rejected request, when the provider annotated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_request_bytes: Option<u64>,
}

/// The simulated upstream; every part optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// A gateway with a body cap.
    #[serde(default)]
    pub gateway: Option<Gateway>,
    /// The model's window and output cap.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    /// Provider-side context editing (behaviour spec section 9).
    #[serde(default)]
    pub context_editing: Option<ContextEditing>,
    /// Scripted replies for successive accepted requests.
    #[serde(default)]
    pub responses: Vec<ScriptedResponse>,
}

/// A gateway or proxy that caps the request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    /// A body larger than this is rejected.
    #[serde(default)]
    pub max_body_bytes: Option<u64>,
    /// How it rejects.
    #[serde(default = "RejectStyle::default_style")]
    pub rejects_with: RejectStyle,
    /// The rejection carries the request's byte size.
    #[serde(default)]
    pub reports_request_size: bool,
}

crate::string_enum! {
    /// How a gateway rejects an oversized body.
    pub enum RejectStyle {
        /// A plain `413 Payload Too Large`.
        Http413 => "http_413",
        /// `431 Request Header Fields Too Large`.
        Http431 => "http_431",
        /// 403 with a firewall signal in the body.
        Waf403 => "waf_403",
        /// An HTML block page, seen by the client as the SDK's JSON-decode error.
        WafHtml403 => "waf_html_403",
        /// The connection is reset.
        ConnectionReset => "connection_reset",
        /// The stream ends early.
        Eof => "eof",
    }
}

impl RejectStyle {
    fn default_style() -> RejectStyle {
        RejectStyle::Http413
    }
}

/// The model's limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The context window in tokens.
    #[serde(default)]
    pub context_window_tokens: Option<u64>,
    /// Which provider's overflow wording to answer with.
    #[serde(default)]
    pub overflow_style: Option<OverflowStyle>,
    /// The provider's output-token cap (for escalation).
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
}

crate::string_enum! {
    /// A provider's overflow wording.
    pub enum OverflowStyle {
        /// `prompt is too long: N tokens > M maximum`.
        Anthropic => "anthropic",
        /// `context_length_exceeded`.
        Openai => "openai",
        /// `The input token count (N) exceeds the maximum number of tokens allowed (M).`
        Gemini => "gemini",
        /// `This model's maximum prompt length is M but the request contains N tokens.`
        Xai => "xai",
        /// `… too large for model with M maximum context length`.
        Mistral => "mistral",
        /// `Input is too long for requested model.`
        Bedrock => "bedrock",
    }
}

/// Provider-side `clear_tool_uses` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextEditing {
    /// Input tokens that trigger clearing (default 100 000).
    #[serde(default = "default_trigger")]
    pub trigger_input_tokens: u64,
    /// Most recent tool uses kept (default 5).
    #[serde(default = "default_keep")]
    pub keep_tool_uses: u64,
    /// Clear at least this many tokens (default 20 000).
    #[serde(default = "default_clear")]
    pub clear_at_least_tokens: u64,
}

fn default_trigger() -> u64 {
    100_000
}
fn default_keep() -> u64 {
    5
}
fn default_clear() -> u64 {
    20_000
}

/// A scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedResponse {
    /// Why the reply stopped.
    #[serde(default = "StopReason::end_turn")]
    pub stop_reason: StopReason,
    /// The reply's text.
    #[serde(default)]
    pub content: String,
    /// Provider usage block, kept as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
}

crate::string_enum! {
    /// Why a reply stopped.
    pub enum StopReason {
        /// A complete answer.
        EndTurn => "end_turn",
        /// Anthropic's output-limit stop.
        MaxTokens => "max_tokens",
        /// OpenAI's output-limit stop.
        Length => "length",
        /// The response ends with tool calls (Anthropic `tool_use`).
        ToolUse => "tool_use",
        /// A stop sequence was hit.
        StopSequence => "stop_sequence",
        /// A long server-tool turn was paused (Anthropic `pause_turn`).
        PauseTurn => "pause_turn",
        /// The model declined (Anthropic `refusal`).
        Refusal => "refusal",
        /// The source did not record why the response stopped (a session file read by an
        /// importer).
        Unrecorded => "unrecorded",
    }
}

impl StopReason {
    fn end_turn() -> StopReason {
        StopReason::EndTurn
    }

    /// True when the reply was cut at the output limit.
    pub fn is_output_limit(self) -> bool {
        matches!(self, StopReason::MaxTokens | StopReason::Length)
    }
}

/// Recorded model outputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// Summarizer outputs in call order.
    #[serde(default)]
    pub summaries: Vec<String>,
}

/// What a corpus capture asserts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The outcome.
    pub outcome: Outcome,
    /// Recovery attempts used, at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The rung that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    /// Whether the payload notice was injected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice_injected: Option<bool>,
    /// The learned cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_learned_bytes: Option<u64>,
    /// Events the run must journal (written by hand from the spec; `--bless` keeps them as they are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<ExpectEvent>,
}

/// An event a capture's run must journal: its kind, how many (exactly, at least, at most; at least
/// one when none is given), and fields its body must have (`where`, compared as JSON values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectEvent {
    /// The event kind, e.g. `compaction`.
    pub kind: String,
    /// Exactly this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// At least this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// At most this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// Fields the event's body must carry with these values.
    #[serde(default, rename = "where", skip_serializing_if = "serde_json::Map::is_empty")]
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// The spec rule the expectation comes from (documentation for reviewers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl ExpectEvent {
    /// `compaction{level=3} × ≥1`.
    pub fn describe(&self) -> String {
        let fields: Vec<String> = self.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let sel = if fields.is_empty() { String::new() } else { format!("{{{}}}", fields.join(", ")) };
        let n = match (self.count, self.min, self.max) {
            (Some(c), _, _) => format!("= {c}"),
            (None, Some(a), Some(b)) => format!("{a}..={b}"),
            (None, Some(a), None) => format!("≥ {a}"),
            (None, None, Some(b)) => format!("≤ {b}"),
            (None, None, None) => "≥ 1".to_string(),
        };
        format!("{}{sel} × {n}", self.kind)
    }

    /// Whether `n` matching events satisfy the expectation.
    pub fn holds(&self, n: u64) -> bool {
        match (self.count, self.min, self.max) {
            (Some(c), _, _) => n == c,
            (None, min, max) => {
                n >= min.unwrap_or(if max.is_some() { 0 } else { 1 }) && max.is_none_or(|m| n <= m)
            }
        }
    }
}

crate::string_enum! {
    /// How a replay ended.
    pub enum Outcome {
        /// A request was accepted after recovery.
        Recovered => "recovered",
        /// The floor diagnosis stopped it.
        FailedFast => "failed_fast",
        /// Attempts were used up.
        Exhausted => "exhausted",
        /// Compaction cannot fix the failure's class.
        NotRecoverable => "not_recoverable",
        /// The first request was accepted.
        NoFailure => "no_failure",
    }
}
