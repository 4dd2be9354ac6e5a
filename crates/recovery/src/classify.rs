//! The one failure classifier (behaviour spec section 2). Its class decides both recovery and the
//! provider fallback chain.

use salvage_types::class::{ErrorClass, RecoveryPath};
use serde::{Deserialize, Serialize};

/// History weight at or above which a bare transport failure is taken as a silent payload rejection.
pub const EOF_HEURISTIC_BYTES: u64 = 500_000;

/// What the client saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailureInput {
    /// The HTTP status field, if any.
    #[serde(default)]
    pub status: Option<u16>,
    /// The error text or body.
    #[serde(default)]
    pub message: String,
    /// A transport error, if any.
    #[serde(default)]
    pub transport: Option<String>,
    /// The history weight at the time.
    #[serde(default)]
    pub history_bytes: u64,
    /// The rejected request's size, when annotated.
    #[serde(default)]
    pub rejected_request_bytes: Option<u64>,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    /// The class.
    pub class: ErrorClass,
    /// Whether compaction can fix it.
    pub recoverable: bool,
    /// Which recovery path, if recoverable.
    pub path: Option<RecoveryPath>,
    /// Why, in a few words.
    pub reason: String,
}

impl Classification {
    fn new(class: ErrorClass, reason: String) -> Classification {
        Classification { class, recoverable: class.recoverable(), path: class.path(), reason }
    }

    /// The seed's wording of the class for people.
    pub fn describe(&self) -> &'static str {
        match self.class {
            ErrorClass::ContextOverflow => "context window exceeded",
            ErrorClass::PayloadTooLarge => "request body too large for the gateway",
            ErrorClass::WafRejection => "proxy/WAF rejection (403 + security signals)",
            ErrorClass::LikelyPayload => "connection dropped on a large request (likely a body-size limit)",
            ErrorClass::Auth => "authentication failure",
            ErrorClass::RateLimit => "rate limited",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Server => "provider server error",
            ErrorClass::ModelNotFound => "model not found",
            ErrorClass::TransientNetwork => "transient network error",
            ErrorClass::Unknown => "unrecognised error",
        }
    }
}

const TRANSPORT_SIGNALS: &[&str] = &["unexpected eof", "connection reset", "broken pipe", "stream error"];
const FIREWALL_SIGNALS: &[&str] = &[
    "firewall",
    "waf",
    "security policy",
    "security rule",
    "blocked by",
    "cloudflare",
    "cf-ray",
    "mod_security",
    "akamai",
    "proxy denied",
    "policy violation",
    "request blocked",
];
const HTML_FINGERPRINTS: &[&str] =
    &["invalid character '<'", "deserialization failed", "failed to decode response body"];
const OVERFLOW_PHRASES: &[&str] = &[
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "maximum prompt length",
    "reduce the length of the messages",
    "input is too long",
    "too many input tokens",
    "context length",
    "request too large",
    "input too long",
    "token limit",
];
/// Phrase pairs: both parts present, in order.
const OVERFLOW_PAIRS: &[(&str, &str)] = &[
    ("input token count", "exceeds"),
    ("too large for model with", "maximum context length"),
    ("max_tokens", "exceed"),
    ("max tokens", "exceed"),
];
const PAYLOAD_PHRASES: &[&str] = &[
    "payload too large",
    "request entity too large",
    "body too large",
    "content too large",
    "request body exceeded",
    "maximum request size",
    "request header fields too large",
];
const TOKEN_WORDS: &[&str] = &["token", "context", "prompt"];
const EXCESS_WORDS: &[&str] = &["exceed", "too long", "too large", "maximum", "limit"];
const AUTH_PHRASES: &[&str] =
    &["unauthorized", "invalid api key", "invalid_api_key", "permission", "authentication"];
const RATE_PHRASES: &[&str] = &["rate limit", "rate_limit", "too many requests"];
const MODEL_PHRASES: &[&str] = &["model not found", "model_not_found"];
const SERVER_PHRASES: &[&str] =
    &["overloaded", "internal server error", "bad gateway", "service unavailable"];
const TIMEOUT_PHRASES: &[&str] = &["timeout", "timed out", "deadline exceeded"];

fn first_of<'a>(text: &str, phrases: &[&'a str]) -> Option<&'a str> {
    phrases.iter().copied().find(|p| text.contains(p))
}

fn is_delim(c: char) -> bool {
    c.is_whitespace() || "()[]{},;:\"'=".contains(c)
}

/// Status codes written in the text as standalone 3-digit tokens (`HTTP 413`, `StatusCode: 403`,
/// `413 Payload`), never digits inside other numbers or identifiers.
pub fn status_tokens(text: &str) -> Vec<u16> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].1.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].1.is_ascii_digit() {
                i += 1;
            }
            let before_ok = start == 0 || is_delim(chars[start - 1].1);
            let after_ok = i == chars.len() || is_delim(chars[i].1);
            if i - start == 3 && before_ok && after_ok {
                let s: String = chars[start..i].iter().map(|(_, c)| c).collect();
                if let Ok(n) = s.parse::<u16>() {
                    if (100..=599).contains(&n) {
                        out.push(n);
                    }
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Classifies one failure.
pub fn classify(input: &FailureInput) -> Classification {
    let message = input.message.to_lowercase();
    let transport = input.transport.as_deref().map(str::to_lowercase);
    let text = match &transport {
        Some(t) if !message.contains(t.as_str()) => format!("{message} {t}"),
        _ => message.clone(),
    };
    let tokens = status_tokens(&input.message);
    let has_status = |s: u16| input.status == Some(s) || (input.status.is_none() && tokens.contains(&s));
    let status = input.status.or_else(|| tokens.first().copied());

    // 1. No HTTP status and a transport failure: the EOF rule.
    if input.status.is_none() {
        if let Some(t) = &transport {
            let signal = first_of(t, TRANSPORT_SIGNALS).map(str::to_string).or_else(|| {
                let bare_eof = t.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "eof");
                (bare_eof && !text.contains("error sending request")).then(|| "eof".to_string())
            });
            if let Some(signal) = signal {
                return if input.history_bytes >= EOF_HEURISTIC_BYTES {
                    Classification::new(
                        ErrorClass::LikelyPayload,
                        format!(
                            "transport '{signal}' with history weight {} ≥ {EOF_HEURISTIC_BYTES}",
                            input.history_bytes
                        ),
                    )
                } else {
                    Classification::new(
                        ErrorClass::TransientNetwork,
                        format!(
                            "transport '{signal}' with history weight {} < {EOF_HEURISTIC_BYTES}",
                            input.history_bytes
                        ),
                    )
                };
            }
        }
    }

    // 2. WAF: a 403 (or "forbidden") plus a firewall signal, or plus an SDK decoding an HTML page.
    let is_403 = has_status(403) || text.contains("forbidden");
    let firewall = first_of(&text, FIREWALL_SIGNALS);
    if is_403 {
        if let Some(sig) = firewall {
            return Classification::new(ErrorClass::WafRejection, format!("403 + firewall signal '{sig}'"));
        }
        if let Some(fp) = first_of(&text, HTML_FINGERPRINTS) {
            return Classification::new(
                ErrorClass::WafRejection,
                format!("403 + HTML block page decoded as JSON ('{fp}')"),
            );
        }
    }

    // 3. Context overflow: phrases, then the status rule.
    if let Some(p) = first_of(&text, OVERFLOW_PHRASES) {
        return Classification::new(ErrorClass::ContextOverflow, format!("phrase '{p}'"));
    }
    for (a, b) in OVERFLOW_PAIRS {
        if let Some(i) = text.find(a) {
            if text[i + a.len()..].contains(b) {
                return Classification::new(ErrorClass::ContextOverflow, format!("phrase '{a} … {b}'"));
            }
        }
    }
    if let Some(s @ (400 | 413)) = status {
        if let (Some(t), Some(e)) = (first_of(&text, TOKEN_WORDS), first_of(&text, EXCESS_WORDS)) {
            return Classification::new(
                ErrorClass::ContextOverflow,
                format!("status {s} with '{t}' and '{e}'"),
            );
        }
    }

    // 4. Payload too large.
    for s in [413u16, 431] {
        if has_status(s) {
            return Classification::new(ErrorClass::PayloadTooLarge, format!("status {s}"));
        }
    }
    if let Some(p) = first_of(&text, PAYLOAD_PHRASES) {
        return Classification::new(ErrorClass::PayloadTooLarge, format!("phrase '{p}'"));
    }

    // 5. Auth: 401, a 403 without firewall signals, or the phrases.
    if has_status(401) {
        return Classification::new(ErrorClass::Auth, "status 401".into());
    }
    if has_status(403) {
        return Classification::new(ErrorClass::Auth, "403 without firewall signals".into());
    }
    if let Some(p) = first_of(&text, AUTH_PHRASES) {
        return Classification::new(ErrorClass::Auth, format!("phrase '{p}'"));
    }

    // 6. Rate limit.
    if has_status(429) {
        return Classification::new(ErrorClass::RateLimit, "status 429".into());
    }
    if let Some(p) = first_of(&text, RATE_PHRASES) {
        return Classification::new(ErrorClass::RateLimit, format!("phrase '{p}'"));
    }

    // 7. Model not found.
    if has_status(404) {
        return Classification::new(ErrorClass::ModelNotFound, "status 404".into());
    }
    if let Some(p) = first_of(&text, MODEL_PHRASES) {
        return Classification::new(ErrorClass::ModelNotFound, format!("phrase '{p}'"));
    }

    // 8. Server.
    for s in [500u16, 502, 503, 504, 529] {
        if has_status(s) {
            return Classification::new(ErrorClass::Server, format!("status {s}"));
        }
    }
    if let Some(p) = first_of(&text, SERVER_PHRASES) {
        return Classification::new(ErrorClass::Server, format!("phrase '{p}'"));
    }

    // 9. Timeout.
    if let Some(p) = first_of(&text, TIMEOUT_PHRASES) {
        return Classification::new(ErrorClass::Timeout, format!("phrase '{p}'"));
    }

    // A transport failure that matched nothing above is still a network problem.
    if input.status.is_none() && transport.is_some() {
        return Classification::new(ErrorClass::TransientNetwork, "transport failure".into());
    }
    Classification::new(ErrorClass::Unknown, "no rule matched".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_tokens_are_standalone() {
        assert_eq!(status_tokens("HTTP 413 Payload"), vec![413]);
        assert_eq!(status_tokens("StatusCode: 403, RequestID: 4031"), vec![403]);
        assert_eq!(status_tokens("prompt is too long: 241300 tokens"), Vec::<u16>::new());
        assert_eq!(status_tokens("req_4031337 / v1.403 / a403 / 403b"), Vec::<u16>::new());
        assert_eq!(status_tokens("(429)"), vec![429]);
        assert_eq!(status_tokens("999 and 042"), Vec::<u16>::new());
    }
}
