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
    /// An earlier failure of the same turn took the payload path: a transport failure then stays
    /// on it whatever the weight (the gateway has already shown its hand).
    #[serde(default)]
    pub payload_path_seen: bool,
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

const TRANSPORT_SIGNALS: &[&str] = &[
    "unexpected eof",
    "connection reset",
    "broken pipe",
    "stream error",
    "econnreset",
    "socket hang up",
    "peer closed connection",
    "incomplete chunked read",
    "premature close",
    "socket closed unexpectedly",
];
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
    "tokens limit",
    "exceeds the available context size",
    "context size has been exceeded",
    "exceed_context_size_error",
    "max_tokens must be at least 1, got -",
];
/// Phrase pairs: both parts present, in order.
const OVERFLOW_PAIRS: &[(&str, &str)] = &[
    ("input token count", "exceeds"),
    ("too large for model with", "maximum context length"),
    ("max_tokens", "exceed"),
    ("max tokens", "exceed"),
    ("max_new_tokens`", "must be <="),
    ("`inputs`", "must have less than"),
];
const PAYLOAD_PHRASES: &[&str] = &[
    "payload too large",
    "request entity too large",
    "body too large",
    "content too large",
    "request body exceeded",
    "maximum request size",
    "request header fields too large",
    "failed to satisfy constraint: member must have length less than or equal to",
    "string too long. expected a string with maximum length",
];
const TOKEN_WORDS: &[&str] = &["token", "context", "prompt"];
const EXCESS_WORDS: &[&str] =
    &["exceed", "too long", "too large", "maximum", "limit", "less than", "must be <="];
/// A 403 that names a network access rule is an access problem compaction cannot fix.
const NETWORK_RULE_PHRASES: &[&str] = &["virtual network/firewall rules"];
const AUTH_PHRASES: &[&str] =
    &["unauthorized", "invalid api key", "invalid_api_key", "permission", "authentication"];
const RATE_PHRASES: &[&str] = &["rate limit", "rate_limit", "too many requests"];
const MODEL_PHRASES: &[&str] = &["model not found", "model_not_found"];
const SERVER_PHRASES: &[&str] =
    &["overloaded", "internal server error", "bad gateway", "service unavailable"];
const TIMEOUT_PHRASES: &[&str] = &["timeout", "timed out", "deadline exceeded"];

fn first_of<'a>(text: &str, phrases: &[&'a str]) -> Option<&'a str> {
    phrases.iter().copied().find(|p| find_word(text, p).is_some())
}

/// A word character for phrase matching: letters and digits (an underscore or punctuation
/// separates words, so `aws_waf` names the WAF but `waffles` does not).
fn is_word(c: char) -> bool {
    c.is_alphanumeric()
}

/// Suffixes that keep a word the same word (`exceeds`, `tokens`, `blocked`).
const INFLECTIONS: &[&str] = &["s", "es", "ed", "d", "ing"];

/// The first position where `phrase` occurs as words: not preceded by a word character, and
/// followed by a non-word character, the end, or an inflection and then one of those.
fn find_word(text: &str, phrase: &str) -> Option<usize> {
    let starts_word = phrase.chars().next().is_some_and(is_word);
    let ends_word = phrase.chars().last().is_some_and(is_word);
    let mut from = 0;
    while let Some(rel) = text.get(from..).and_then(|t| t.find(phrase)) {
        let at = from.saturating_add(rel);
        let end = at.saturating_add(phrase.len());
        let before_ok =
            !starts_word || text.get(..at).and_then(|t| t.chars().next_back()).is_none_or(|c| !is_word(c));
        let rest = text.get(end..).unwrap_or("");
        let after_ok = !ends_word
            || rest.chars().next().is_none_or(|c| !is_word(c))
            || INFLECTIONS.iter().any(|inf| {
                rest.strip_prefix(inf).is_some_and(|r| r.chars().next().is_none_or(|c| !is_word(c)))
            });
        if before_ok && after_ok {
            return Some(at);
        }
        from = at.saturating_add(phrase.chars().next().map_or(1, char::len_utf8));
    }
    None
}

/// Akamai's edge block page: `Access Denied` with a `Reference #18.ef3a2f17.…` dotted id.
fn akamai_reference(text: &str) -> bool {
    if find_word(text, "access denied").is_none() {
        return false;
    }
    let mut from = 0;
    while let Some(rel) = text.get(from..).and_then(|t| t.find("reference #")) {
        let at = from.saturating_add(rel).saturating_add("reference #".len());
        let id: String = text
            .get(at..)
            .unwrap_or("")
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        if id.chars().next().is_some_and(|c| c.is_ascii_digit()) && id.contains('.') {
            return true;
        }
        from = at;
    }
    false
}

/// Status codes written in the text as standalone 3-digit tokens (`HTTP 413`, `StatusCode: 403`,
/// `413 Payload`, `413.`, `(403)`), never touching a letter or a digit and never part of a dotted
/// or comma-grouped number (`1.413.2`, `40,413`) or of an identifier.
pub fn status_tokens(text: &str) -> Vec<u16> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = at(i) {
        if !c.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while at(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        let before = start.checked_sub(1).and_then(at);
        let before2 = start.checked_sub(2).and_then(at);
        let after = at(i);
        let after2 = at(i.saturating_add(1));
        let grouping = |c: Option<char>| matches!(c, Some('.' | ','));
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        let before_ok =
            before.is_none_or(|c| !c.is_alphanumeric() && c != '_') && !(grouping(before) && digit(before2));
        let after_ok =
            after.is_none_or(|c| !c.is_alphanumeric() && c != '_') && !(grouping(after) && digit(after2));
        if i - start == 3 && before_ok && after_ok {
            let s: String = chars.get(start..i).unwrap_or(&[]).iter().collect();
            if let Ok(n) = s.parse::<u16>() {
                if (100..=599).contains(&n) {
                    out.push(n);
                }
            }
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

    // 1. No HTTP status and a transport failure: the EOF rule. A transport phrase in the message
    // counts as the transport failure when the transport field is empty.
    if input.status.is_none() {
        let t = transport.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or(message.as_str());
        let signal = first_of(t, TRANSPORT_SIGNALS).map(str::to_string).or_else(|| {
            let bare_eof = find_word(t, "eof").is_some();
            (bare_eof && !text.contains("error sending request")).then(|| "eof".to_string())
        });
        {
            if let Some(signal) = signal {
                if input.payload_path_seen {
                    return Classification::new(
                        ErrorClass::LikelyPayload,
                        format!("transport '{signal}' after a payload rejection in the same turn"),
                    );
                }
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
    let is_403 = has_status(403) || find_word(&text, "forbidden").is_some();
    let network_rule = first_of(&text, NETWORK_RULE_PHRASES);
    let firewall = first_of(&text, FIREWALL_SIGNALS)
        .or_else(|| akamai_reference(&text).then_some("akamai reference id"));
    if let (true, Some(rule)) = (is_403, network_rule) {
        return Classification::new(ErrorClass::Auth, format!("403 naming a network access rule ('{rule}')"));
    }
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
        if let Some(i) = find_word(&text, a) {
            if text.get(i.saturating_add(a.len())..).and_then(|r| find_word(r, b)).is_some() {
                return Classification::new(ErrorClass::ContextOverflow, format!("phrase '{a} … {b}'"));
            }
        }
    }
    if let Some(s @ (400 | 413 | 422)) = status {
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
        assert_eq!(status_tokens("Request failed with status code 413."), vec![413]);
        assert_eq!(status_tokens("Error 403."), vec![403]);
        assert_eq!(status_tokens("v1.413.2 40,413 \"code\":40303 x_413"), Vec::<u16>::new());
        assert_eq!(status_tokens("403, then (404) and 500"), vec![403, 404, 500]);
    }

    #[test]
    fn phrases_match_as_words() {
        assert!(find_word("blocked by aws_waf rule", "waf").is_some());
        assert!(find_word("org waffles-inc", "waf").is_none());
        assert!(find_word("prompt tokens exceeded", "exceed").is_some());
        assert!(find_word("exceedingly", "exceed").is_none());
        assert!(find_word("the firewalls", "firewall").is_some());
    }
}
