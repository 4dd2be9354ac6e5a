//! The task: the latest real user request, which survives every rung.

use crate::escalation::CONTINUATION;
use crate::notices::COMPACTION_NOTICE;
use crate::payload::NOTICE_MARKER;
use salvage_types::message::{Message, Role};

/// Prefix of a level-2 summary message.
pub const SUMMARY_PREFIX: &str = "[STRUCTURED SUMMARY";

/// True for a user message a person wrote: not a summary, a notice, tool feedback or a
/// continuation prompt.
pub fn is_real_user(m: &Message) -> bool {
    m.role == Role::User
        && !m.meta.is_summary
        && !m.meta.agent_feedback
        && !m.meta.preserve_verbatim
        && !m.content.starts_with(COMPACTION_NOTICE)
        && !m.content.starts_with(NOTICE_MARKER)
        && !m.content.starts_with(SUMMARY_PREFIX)
        && m.content != CONTINUATION
}

/// Index of the latest real user request.
pub fn task_index(history: &[Message]) -> Option<usize> {
    history.iter().rposition(is_real_user)
}

/// True when `task` (the input's task message) is still in `history`, whole or cut by
/// preserve-end truncation (its head survives).
pub fn task_survives(task: &Message, history: &[Message]) -> bool {
    let probe = salvage_types::truncate::head(&task.content, 200);
    history.iter().any(|m| {
        m.role == Role::User
            && (m.content == task.content || (!probe.is_empty() && m.content.starts_with(probe)))
    })
}
