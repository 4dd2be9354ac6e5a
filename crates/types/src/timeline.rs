//! A session as it happened: the ordered steps an importer read from a client's session file
//! (Claude Code, Codex CLI, …), which the journal turns into events.
//!
//! This is the vocabulary shared by `salvage-wire` (which reads session files into steps) and
//! `salvage-journal` (which appends one event per step). It is an in-memory shape, never
//! persisted as such: what is persisted are the journal's events.

use crate::message::{History, Message};

/// One thing that happened in a session, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// A stable identifier from the source file (a record uuid, or a line number with a digest
    /// of the line), the same each time the same file is read: it makes journal imports
    /// idempotent. A step made of several records takes the id of its last record, so a step
    /// that grew (a response whose remaining blocks were written later) gets a new id.
    pub id: String,
    /// When it happened (RFC 3339, as the file wrote it), if the file says.
    pub ts: Option<String>,
    /// What it did to the history.
    pub change: Change,
}

/// How a step changed the history.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Input appended: a user message, tool results, developer/system context.
    Input(History),
    /// A model response appended.
    Response {
        /// The message(s) of the response (one assistant message in practice).
        messages: History,
        /// Why it stopped, when the file recorded it.
        stop_reason: Option<String>,
        /// Output tokens, when the file recorded them.
        output_tokens: Option<u64>,
    },
    /// The client compacted the history: everything before is replaced by `history`.
    Compaction {
        /// `auto` or `manual`, when the file says.
        trigger: Option<String>,
        /// The client's token count before compacting, when the file says.
        pre_tokens: Option<u64>,
        /// The history right after the compaction (e.g. the summary message).
        history: History,
        /// False when the file does not record the replacement and the importer rebuilt it
        /// (e.g. an old Codex rollout whose `compacted` record has no `replacement_history`).
        exact: bool,
    },
    /// The client dropped its newest turns (Codex `thread_rolled_back`): the history is now
    /// `history`, a state the session had before.
    Rollback {
        /// User turns dropped.
        turns: u64,
        /// The history after the rollback.
        history: History,
    },
}

impl Step {
    /// The history after this step, given the history before it.
    pub fn apply(&self, history: &mut History) {
        match &self.change {
            Change::Input(msgs) | Change::Response { messages: msgs, .. } => {
                history.extend(msgs.iter().cloned())
            }
            Change::Compaction { history: after, .. } | Change::Rollback { history: after, .. } => {
                history.clone_from(after)
            }
        }
    }

    /// The messages this step adds or installs.
    pub fn messages(&self) -> &[Message] {
        match &self.change {
            Change::Input(m)
            | Change::Response { messages: m, .. }
            | Change::Compaction { history: m, .. }
            | Change::Rollback { history: m, .. } => m,
        }
    }
}

/// The history after all steps.
pub fn fold(steps: &[Step]) -> History {
    let mut h = History::new();
    for s in steps {
        s.apply(&mut h);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_appends_and_replaces() {
        let steps = vec![
            Step { id: "1".into(), ts: None, change: Change::Input(vec![Message::user("a")]) },
            Step {
                id: "2".into(),
                ts: None,
                change: Change::Response {
                    messages: vec![Message::assistant("b")],
                    stop_reason: None,
                    output_tokens: None,
                },
            },
            Step {
                id: "3".into(),
                ts: None,
                change: Change::Compaction {
                    trigger: Some("auto".into()),
                    pre_tokens: None,
                    history: vec![Message::user("summary")],
                    exact: true,
                },
            },
            Step { id: "4".into(), ts: None, change: Change::Input(vec![Message::user("c")]) },
        ];
        assert_eq!(fold(&steps), vec![Message::user("summary"), Message::user("c")]);
        assert_eq!(fold(&steps[..2]).len(), 2);
    }
}
