//! Codex CLI rollout lines (the `.jsonl` session files under `~/.codex/sessions/`) for the
//! importers' tests: one record, and the message items records carry.

use serde_json::{json, Value};

/// One rollout record of `kind` (`session_meta`, `response_item`, `event_msg`, `compacted`, …)
/// carrying `payload`, stamped at second `ts` of a fixed minute.
pub fn record(ts: u32, kind: &str, payload: Value) -> Value {
    json!({"timestamp": format!("2026-01-02T03:04:{ts:02}.000Z"), "type": kind, "payload": payload})
}

/// A user message item (`input_text`).
pub fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// An assistant message item (`output_text`).
pub fn assistant(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
}

/// Two turns (`one` answered `1`, `two` answered `2`), a rollback of the last one, then a new
/// prompt `three`, at seconds 1 to 6: the rollout the rollback tests share.
pub fn rolled_back_turn() -> Vec<Value> {
    vec![
        record(1, "response_item", user("one")),
        record(2, "response_item", assistant("1")),
        record(3, "response_item", user("two")),
        record(4, "response_item", assistant("2")),
        record(5, "event_msg", json!({"type": "thread_rolled_back", "num_turns": 1})),
        record(6, "response_item", user("three")),
    ]
}
