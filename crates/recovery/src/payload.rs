//! The payload policy (behaviour spec section 3): learned cap, floor diagnosis, pre-flight and the
//! payload notice. All per-session state lives in [`crate::session::SessionState`].

use salvage_types::{format_bytes, Message};
use serde::Serialize;

/// The cap assumed when a payload rejection carries no size and no cap is set.
pub const FALLBACK_CAP: u64 = 4 * 1024 * 1024;
/// Pre-flight compacts when the history weight is over this share of the cap.
pub const PREFLIGHT_SHARE: f64 = 0.85;
/// The budget ratio pre-flight forces.
pub const PREFLIGHT_RATIO: f64 = 0.40;
/// With no cap, pre-flight warns once above this weight.
pub const NO_CAP_WARN_BYTES: u64 = 2_500_000;
/// The marker that opens the payload notice (and detects it anywhere in a history).
pub const NOTICE_MARKER: &str = "[SYSTEM NOTICE — PAYLOAD LIMIT HIT]";

/// The payload notice, in English on purpose (models follow English instructions best).
pub const PAYLOAD_NOTICE: &str = "[SYSTEM NOTICE — PAYLOAD LIMIT HIT] A proxy/gateway rejected the previous request due to body size. History was compacted to recover. Going forward:\n(1) When reading files, prefer targeted reads with line ranges (e.g. sed -n '100,200p' file, or read_file with offset+limit) instead of reading entire files.\n(2) Prefer grep/ripgrep with specific patterns over full-file reads.\n(3) If you previously read a large file, its full content is archived and recoverable with @recall <<ccr:KEY>> markers shown in the tool-result preview — re-read specific ranges rather than repeating the original read.\n(4) Summarize findings incrementally rather than accumulating raw tool output.";

/// What learning the cap decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapDecision {
    /// The session cap after the decision.
    pub cap: u64,
    /// The cap before.
    pub previous: Option<u64>,
    /// True when the cap changed.
    pub changed: bool,
    /// The message for the user (empty when nothing changed and nothing was assumed).
    pub message: String,
}

/// Learns the cap from a payload rejection: `rejected × 3/4`, only ever tightening; 4 MiB when
/// the size is unknown and no cap is set.
pub fn learn_cap(rejected: Option<u64>, current: Option<u64>) -> CapDecision {
    match (rejected, current) {
        (Some(r), cur) => {
            let learned = r.saturating_mul(3) / 4;
            match cur {
                Some(c) if c <= learned => CapDecision {
                    cap: c,
                    previous: cur,
                    changed: false,
                    message: format!(
                        "Gateway rejected a {} request — payload cap stays {} (already tighter)",
                        format_bytes(r),
                        format_bytes(c)
                    ),
                },
                _ => CapDecision {
                    cap: learned,
                    previous: cur,
                    changed: true,
                    message: format!(
                        "Gateway rejected a {} request — payload cap set to {} for this session (export CHATCLI_MAX_PAYLOAD to override)",
                        format_bytes(r),
                        format_bytes(learned)
                    ),
                },
            }
        }
        (None, Some(c)) => CapDecision { cap: c, previous: Some(c), changed: false, message: String::new() },
        (None, None) => CapDecision {
            cap: FALLBACK_CAP,
            previous: None,
            changed: true,
            message: "Assuming 4 MB payload cap — export CHATCLI_MAX_PAYLOAD (e.g. 5MB, 512KB) to adjust"
                .into(),
        },
    }
}

pub use salvage_types::event::FloorVerdict;

/// The floor diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorDiagnosis {
    /// The verdict.
    pub verdict: FloorVerdict,
    /// Bytes of the smallest request the ladder could still send.
    pub floor_bytes: u64,
    /// The rejected size.
    pub rejected: u64,
    /// The message for the user (empty when ok).
    pub message: String,
}

/// Diagnoses the non-compactable base against a rejected size. **\[better\]** `floor_bytes` is
/// the serialized size of the smallest request (system messages and tool definitions as sent,
/// the envelope, the latest user request), not the bare system text.
pub fn floor(floor_bytes: u64, rejected: u64) -> FloorDiagnosis {
    floor_of(&FloorParts { system_prompt: floor_bytes, ..FloorParts::default() }, floor_bytes, rejected)
}

/// What the non-compactable base of a request is made of, bytes each (\[better\] section 3): the
/// system messages as they appear in the body, the tool definitions with the rest of the request
/// envelope, and the task as rung 3 would send it (capped at 4 000 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FloorParts {
    /// The system prompt.
    pub system_prompt: u64,
    /// Tool definitions, parameters and the JSON envelope.
    pub tools_and_envelope: u64,
    /// The latest user request as rung 3 sends it.
    pub task: u64,
}

impl FloorParts {
    /// `system prompt: 131.2 KB, tool definitions and request envelope: 3.0 KB, task as rung 3 sends it: 3.9 KB`.
    pub fn describe(&self) -> String {
        format!(
            "system prompt: {}, tool definitions and request envelope: {}, task as rung 3 sends it: {}",
            format_bytes(self.system_prompt),
            format_bytes(self.tools_and_envelope),
            format_bytes(self.task)
        )
    }

    /// The parts as the journal records them.
    pub fn to_map(&self) -> std::collections::BTreeMap<String, u64> {
        [
            ("system_prompt".to_string(), self.system_prompt),
            ("tool_definitions_and_envelope".to_string(), self.tools_and_envelope),
            ("task".to_string(), self.task),
        ]
        .into()
    }
}

/// The floor diagnosis of a request base of `floor_bytes` (made of `parts`) against the size the
/// gateway rejected.
pub fn floor_of(parts: &FloorParts, floor_bytes: u64, rejected: u64) -> FloorDiagnosis {
    let (verdict, message) = if floor_bytes >= rejected {
        (
            FloorVerdict::FailFast,
            format!(
                "✖ The non-compactable request base ({} — {}; personas, skills, MCP tool docs) meets or exceeds the size the gateway rejected ({}). Compaction cannot help: reduce MCP servers, skills or personas, or raise the proxy body limit.",
                format_bytes(floor_bytes),
                parts.describe(),
                format_bytes(rejected)
            ),
        )
    } else if floor_bytes.saturating_mul(4) >= rejected.saturating_mul(3) {
        (
            FloorVerdict::Warn,
            format!(
                "⚠ The system prompt alone is {} — close to the gateway's rejection threshold ({}); compaction may not be enough. Consider fewer MCP servers, skills or personas.",
                format_bytes(floor_bytes),
                parts.describe()
            ),
        )
    } else {
        (FloorVerdict::Ok, String::new())
    };
    FloorDiagnosis { verdict, floor_bytes, rejected, message }
}

/// What pre-flight decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preflight {
    /// The budget ratio to force (0.40), if any.
    pub forced_ratio: Option<f64>,
    /// Warn once that no cap is set.
    pub warn_no_cap: bool,
    /// The message for the user.
    pub message: String,
}

/// Pre-flight, every turn before the request.
pub fn preflight(cap: Option<u64>, history_bytes: u64, already_warned: bool) -> Preflight {
    match cap {
        Some(c) if (history_bytes as f64) > (c as f64) * PREFLIGHT_SHARE => Preflight {
            forced_ratio: Some(PREFLIGHT_RATIO),
            warn_no_cap: false,
            message: format!(
                "pre-flight: history {} ≈ {}% of configured cap ({}) — compacting",
                format_bytes(history_bytes),
                history_bytes.saturating_mul(100).checked_div(c.max(1)).unwrap_or_default(),
                format_bytes(c)
            ),
        },
        Some(_) => Preflight { forced_ratio: None, warn_no_cap: false, message: String::new() },
        None if history_bytes > NO_CAP_WARN_BYTES && !already_warned => Preflight {
            forced_ratio: None,
            warn_no_cap: true,
            message: format!(
                "pre-flight: history is {} and no payload cap is set — export CHATCLI_MAX_PAYLOAD (e.g. 5MB) if a proxy limits request bodies",
                format_bytes(history_bytes)
            ),
        },
        None => Preflight { forced_ratio: None, warn_no_cap: false, message: String::new() },
    }
}

/// True when the payload notice already appears in the history: the notice itself, or a summary
/// a copy was folded into ([`is_notice_copy`]).
///
/// Design decision (a copy, not a quote): the spec says "anywhere in the history, even inside a
/// summary". The notice and the summaries are `user` messages salvage writes into the history;
/// a tool result, an answer or a user's question that quotes the marker (a file of source code
/// that defines it, a log line) is the conversation's content, not a copy of the notice.
/// Counting quotes made the session flag depend on what the agent happened to read: a quote in
/// the input suppressed the notice for the whole session.
pub fn notice_already_injected(history: &[Message]) -> bool {
    history.iter().any(is_notice_copy)
}

/// True when `m` is a copy of the payload notice: a `user` message salvage wrote that holds its
/// marker — the notice itself (it starts with the marker) or a summary a copy was folded into.
/// A user's own message that mentions the marker (a question about it) is no copy: counting it
/// suppressed the notice for the session (review of the cut rule, finding 6).
pub fn is_notice_copy(m: &Message) -> bool {
    let summary = m.meta.is_summary || m.content.starts_with(crate::task::SUMMARY_PREFIX);
    m.role == salvage_types::Role::User
        && (m.content.starts_with(NOTICE_MARKER) || (summary && m.content.contains(NOTICE_MARKER)))
}

/// The payload notice as a user message.
pub fn notice_message() -> Message {
    Message::user(PAYLOAD_NOTICE)
}
