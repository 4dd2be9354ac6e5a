//! Failure classes (behaviour spec section 2): one vocabulary for recovery and provider fallback.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The class of a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The model's context window overflowed.
    ContextOverflow,
    /// A gateway or provider refused the body size (413, 431, phrases).
    PayloadTooLarge,
    /// A firewall block (403 with a firewall signal or an HTML block page).
    WafRejection,
    /// A transport failure on a large history (silent reset or EOF).
    LikelyPayload,
    /// Credentials were refused.
    Auth,
    /// Too many requests.
    RateLimit,
    /// The request timed out.
    Timeout,
    /// The provider failed (5xx, overloaded).
    Server,
    /// The model does not exist.
    ModelNotFound,
    /// A network blip on a small history.
    TransientNetwork,
    /// Nothing matched.
    Unknown,
}

/// Which recovery path a recoverable class takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryPath {
    /// The model's window: compaction by tokens.
    Context,
    /// The request body: payload policy (learned cap, floor) then the ladder.
    Payload,
}

/// What a provider fallback chain does with a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackAction {
    /// Compact and retry the same provider (never switch providers for a size problem).
    Compact,
    /// Refresh credentials and retry once.
    RefreshCredentials,
    /// Back off, then retry.
    BackOff,
    /// Retry (possibly on the next provider).
    Retry,
    /// Do not retry.
    GiveUp,
}

impl ErrorClass {
    /// Every class, in the spec's order.
    pub const ALL: [ErrorClass; 11] = [
        ErrorClass::ContextOverflow,
        ErrorClass::PayloadTooLarge,
        ErrorClass::WafRejection,
        ErrorClass::LikelyPayload,
        ErrorClass::Auth,
        ErrorClass::RateLimit,
        ErrorClass::Timeout,
        ErrorClass::Server,
        ErrorClass::ModelNotFound,
        ErrorClass::TransientNetwork,
        ErrorClass::Unknown,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::ContextOverflow => "context_overflow",
            ErrorClass::PayloadTooLarge => "payload_too_large",
            ErrorClass::WafRejection => "waf_rejection",
            ErrorClass::LikelyPayload => "likely_payload",
            ErrorClass::Auth => "auth",
            ErrorClass::RateLimit => "rate_limit",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Server => "server",
            ErrorClass::ModelNotFound => "model_not_found",
            ErrorClass::TransientNetwork => "transient_network",
            ErrorClass::Unknown => "unknown",
        }
    }

    /// The recovery path, or `None` when compaction cannot fix this class.
    pub fn path(self) -> Option<RecoveryPath> {
        match self {
            ErrorClass::ContextOverflow => Some(RecoveryPath::Context),
            ErrorClass::PayloadTooLarge | ErrorClass::WafRejection | ErrorClass::LikelyPayload => {
                Some(RecoveryPath::Payload)
            }
            ErrorClass::Auth
            | ErrorClass::RateLimit
            | ErrorClass::Timeout
            | ErrorClass::Server
            | ErrorClass::ModelNotFound
            | ErrorClass::TransientNetwork
            | ErrorClass::Unknown => None,
        }
    }

    /// True when compaction can fix this class.
    pub fn recoverable(self) -> bool {
        self.path().is_some()
    }

    /// What a provider fallback chain does: the same class decides recovery and fallback.
    pub fn fallback(self) -> FallbackAction {
        match self {
            ErrorClass::ContextOverflow
            | ErrorClass::PayloadTooLarge
            | ErrorClass::WafRejection
            | ErrorClass::LikelyPayload => FallbackAction::Compact,
            ErrorClass::Auth => FallbackAction::RefreshCredentials,
            ErrorClass::RateLimit => FallbackAction::BackOff,
            ErrorClass::Timeout | ErrorClass::Server | ErrorClass::TransientNetwork => FallbackAction::Retry,
            ErrorClass::ModelNotFound | ErrorClass::Unknown => FallbackAction::GiveUp,
        }
    }

    /// Parses the snake_case name.
    pub fn parse(name: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for c in ErrorClass::ALL {
            let s = serde_json::to_string(&c).unwrap();
            assert_eq!(s, format!("\"{}\"", c.as_str()));
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
        }
    }

    #[test]
    fn a_size_problem_never_sends_the_provider_into_auth_cooldown() {
        assert_eq!(ErrorClass::WafRejection.fallback(), FallbackAction::Compact);
        assert_eq!(ErrorClass::PayloadTooLarge.fallback(), FallbackAction::Compact);
        assert_eq!(ErrorClass::Auth.fallback(), FallbackAction::RefreshCredentials);
    }
}
