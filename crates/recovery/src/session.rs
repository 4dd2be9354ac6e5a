//! Per-session recovery state, owned by the caller (and recorded by the journal), never global.

use serde::{Deserialize, Serialize};

/// What the recovery remembers across turns of one session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The payload cap in force (configured or learned); only ever tightens.
    pub cap: Option<u64>,
    /// The payload notice was injected (or found in the history).
    pub notice_injected: bool,
    /// Rung 1 halved the tool-result budget for this session.
    pub tool_budget_halved: bool,
    /// Pre-flight already warned that no cap is set.
    pub no_cap_warned: bool,
}

impl SessionState {
    /// A session starting with the configured cap.
    pub fn with_cap(cap: Option<u64>) -> SessionState {
        SessionState { cap, ..SessionState::default() }
    }
}
