//! Provider-side context editing (behaviour spec section 9): the Anthropic request fields, and
//! the local mirror of the edits the provider applied.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use serde::Serialize;
use serde_json::{json, Value};

/// The beta the requests carry.
pub const BETA: &str = "context-management-2025-06-27";
/// The edit type.
pub const EDIT: &str = "clear_tool_uses_20250919";
const STUB_PREFIX: &str = "[Tool result cleared by provider context editing";

/// The edit's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EditSettings {
    /// Input tokens that trigger clearing.
    pub trigger_input_tokens: u64,
    /// Most recent tool uses kept.
    pub keep_tool_uses: u64,
    /// Clear at least this many input tokens.
    pub clear_at_least_tokens: u64,
}

impl Default for EditSettings {
    fn default() -> Self {
        EditSettings { trigger_input_tokens: 100_000, keep_tool_uses: 5, clear_at_least_tokens: 20_000 }
    }
}

/// The `anthropic-beta` header value and the `context_management` body field.
pub fn request_fields(s: &EditSettings) -> (&'static str, Value) {
    (
        BETA,
        json!({"edits": [{
            "type": EDIT,
            "trigger": {"type": "input_tokens", "value": s.trigger_input_tokens},
            "keep": {"type": "tool_uses", "value": s.keep_tool_uses},
            "clear_at_least": {"type": "input_tokens", "value": s.clear_at_least_tokens},
        }]}),
    )
}

/// What mirroring did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MirrorReport {
    /// Stubs written (counted in tool uses, **\[better\]** not in assistant messages).
    pub stubs: u64,
    /// Bytes freed locally.
    pub freed_bytes: u64,
}

/// Mirrors `cleared_tool_uses` applied edits: the oldest tool results not yet cleared become
/// stubs with a real `<<ccr:KEY>>` marker (originals archived).
pub fn mirror(
    history: &[Message],
    cleared_tool_uses: u64,
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, MirrorReport), ArchiveError> {
    let mut out = history.to_vec();
    let mut report = MirrorReport::default();
    for m in out.iter_mut() {
        if report.stubs >= cleared_tool_uses {
            break;
        }
        // A result already in the stub's form is not one the provider clears (its rule skips
        // them, as the count of live results below does), whoever wrote it: it stays as it is,
        // so nothing is lost, and it takes none of the `cleared_tool_uses` slots. Before, a stub
        // the input carried that salvage had not archived (a session exported and replayed) was
        // stubbed again and the mirror fell one result short of the provider (review, finding 5).
        if m.role != Role::Tool || m.content.starts_with(STUB_PREFIX) {
            continue;
        }
        let before = m.content.len();
        let mut stub = STUB_PREFIX.to_string();
        if let Some(k) = archiver.put(m.content.as_bytes())? {
            stub.push_str(&format!(" — recoverable via @recall {}", k.marker()));
        }
        stub.push(']');
        report.freed_bytes = report.freed_bytes.saturating_add(before.saturating_sub(stub.len()) as u64);
        m.content = stub;
        report.stubs = report.stubs.saturating_add(1);
    }
    Ok((out, report))
}

/// The `n` tool uses the provider clears for a history over the trigger: all but the most
/// recent `keep`.
pub fn tool_uses_to_clear(history: &[Message], s: &EditSettings, input_tokens: u64) -> u64 {
    if input_tokens < s.trigger_input_tokens {
        return 0;
    }
    let live =
        history.iter().filter(|m| m.role == Role::Tool && !m.content.starts_with(STUB_PREFIX)).count() as u64;
    live.saturating_sub(s.keep_tool_uses)
}
