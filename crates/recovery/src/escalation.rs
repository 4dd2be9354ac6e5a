//! Max-output escalation (behaviour spec section 8).

use serde::Serialize;

/// The message appended after a partial answer cut at the output limit.
pub const CONTINUATION: &str = "Your response was cut off at the token limit. Resume DIRECTLY from where you stopped — do not repeat any content. Continue the implementation or explanation from the exact point of interruption.";

/// Escalation state for one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Escalation {
    /// Escalations used so far.
    pub used: u32,
}

/// One escalation decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The `max_tokens` to send next.
    pub max_tokens: u64,
    /// Whether the limit was raised (an escalation consumed).
    pub escalated: bool,
}

impl Escalation {
    /// Doubles `max_tokens` up to the provider cap, at most `max_escalations` times.
    /// **\[better\]** never below the provider default, and a call that cannot raise the limit
    /// consumes no escalation.
    pub fn step(
        &mut self,
        current: Option<u64>,
        provider_default: u64,
        cap: u64,
        max_escalations: u32,
    ) -> Step {
        let base = current.unwrap_or(provider_default).max(provider_default);
        if self.used >= max_escalations {
            return Step { max_tokens: base, escalated: false };
        }
        let next = base.saturating_mul(2).min(cap);
        if next <= base {
            return Step { max_tokens: base, escalated: false };
        }
        self.used = self.used.saturating_add(1);
        Step { max_tokens: next, escalated: true }
    }
}
