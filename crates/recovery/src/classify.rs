//! The one failure classifier (behaviour spec section 2). Its class decides both recovery and the
//! provider fallback chain.

use salvage_types::capture::Failure;
use salvage_types::class::{ErrorClass, RecoveryPath};
use serde::{Deserialize, Serialize};

/// History weight at or above which a bare transport failure is taken as a silent payload rejection.
pub const EOF_HEURISTIC_BYTES: u64 = 500_000;

/// The classifier's input: the one recorded [`Failure`] plus what the classifier also weighs.
///
/// It reads and writes the same flat JSON as before (`{"status","message","transport",
/// "rejected_request_bytes","history_bytes","payload_path_seen"}`, every field optional). It is
/// deserialized through a flat twin rather than `#[serde(flatten)]` so that a bad field keeps its
/// JSON path in errors (`<stdin>: status: invalid type ...`): a flattened field is buffered and
/// loses it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "FlatFailureInput")]
pub struct FailureInput {
    /// The failure as the client saw it.
    #[serde(flatten)]
    pub failure: Failure,
    /// The history weight at the time.
    pub history_bytes: u64,
    /// An earlier failure of the same turn took the payload path: a transport failure then stays
    /// on it whatever the weight (the gateway has already shown its hand).
    pub payload_path_seen: bool,
}

impl FailureInput {
    /// A first failure (no earlier payload-path failure in the turn) at the given history weight.
    pub fn new(failure: Failure, history_bytes: u64) -> Self {
        FailureInput { failure, history_bytes, payload_path_seen: false }
    }
}

/// The flat wire shape of [`FailureInput`].
#[derive(Deserialize)]
struct FlatFailureInput {
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    history_bytes: u64,
    #[serde(default)]
    rejected_request_bytes: Option<u64>,
    #[serde(default)]
    payload_path_seen: bool,
}

impl From<FlatFailureInput> for FailureInput {
    fn from(f: FlatFailureInput) -> Self {
        FailureInput {
            failure: Failure {
                status: f.status,
                message: f.message,
                transport: f.transport,
                rejected_request_bytes: f.rejected_request_bytes,
            },
            history_bytes: f.history_bytes,
            payload_path_seen: f.payload_path_seen,
        }
    }
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
            i = i.saturating_add(1);
            continue;
        }
        let start = i;
        while at(i).is_some_and(|c| c.is_ascii_digit()) {
            i = i.saturating_add(1);
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
        if i.checked_sub(start) == Some(3) && before_ok && after_ok {
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

/// A failure's text as the rules read it.
struct Seen<'a> {
    /// The failure.
    failure: &'a Failure,
    /// The message, lowercased.
    message: String,
    /// The transport error, lowercased.
    transport: Option<String>,
    /// The message and the transport error (when the message does not already say it), lowercased.
    text: String,
    /// The standalone status codes the message names.
    tokens: Vec<u16>,
    /// The status field, else the first status the message names.
    status: Option<u16>,
}

impl<'a> Seen<'a> {
    fn of(failure: &'a Failure) -> Self {
        let message = failure.message.to_lowercase();
        let transport = failure.transport.as_deref().map(str::to_lowercase);
        let text = match &transport {
            Some(t) if !message.contains(t.as_str()) => format!("{message} {t}"),
            _ => message.clone(),
        };
        let tokens = status_tokens(&failure.message);
        let status = failure.status.or_else(|| tokens.first().copied());
        Seen { failure, message, transport, text, tokens, status }
    }

    /// The status field is `s`, or there is none and the message names `s`.
    fn has_status(&self, s: u16) -> bool {
        self.failure.status == Some(s) || (self.failure.status.is_none() && self.tokens.contains(&s))
    }
}

/// Rule 1. No HTTP status and a transport failure: the EOF rule. A transport phrase in the
/// message counts as the transport failure when the transport field is empty.
fn transport_rule(input: &FailureInput, seen: &Seen<'_>) -> Option<Classification> {
    if seen.failure.status.is_some() {
        return None;
    }
    let t = seen.transport.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or(seen.message.as_str());
    let signal = first_of(t, TRANSPORT_SIGNALS).map(str::to_string).or_else(|| {
        let bare_eof = find_word(t, "eof").is_some();
        (bare_eof && !seen.text.contains("error sending request")).then(|| "eof".to_string())
    })?;
    if input.payload_path_seen {
        return Some(Classification::new(
            ErrorClass::LikelyPayload,
            format!("transport '{signal}' after a payload rejection in the same turn"),
        ));
    }
    Some(if input.history_bytes >= EOF_HEURISTIC_BYTES {
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
    })
}

/// Rule 2. WAF: a 403 (or "forbidden") plus a firewall signal, or plus an SDK decoding an HTML
/// page; a 403 naming a network access rule is auth.
fn waf_rule(seen: &Seen<'_>) -> Option<Classification> {
    let text = &seen.text;
    let is_403 = seen.has_status(403) || find_word(text, "forbidden").is_some();
    if !is_403 {
        return None;
    }
    if let Some(rule) = first_of(text, NETWORK_RULE_PHRASES) {
        return Some(Classification::new(
            ErrorClass::Auth,
            format!("403 naming a network access rule ('{rule}')"),
        ));
    }
    let firewall =
        first_of(text, FIREWALL_SIGNALS).or_else(|| akamai_reference(text).then_some("akamai reference id"));
    if let Some(sig) = firewall {
        return Some(Classification::new(ErrorClass::WafRejection, format!("403 + firewall signal '{sig}'")));
    }
    first_of(text, HTML_FINGERPRINTS).map(|fp| {
        Classification::new(
            ErrorClass::WafRejection,
            format!("403 + HTML block page decoded as JSON ('{fp}')"),
        )
    })
}

/// Rule 3. Context overflow: phrases, then the status rule.
fn overflow_rule(seen: &Seen<'_>) -> Option<Classification> {
    let text = &seen.text;
    if let Some(p) = first_of(text, OVERFLOW_PHRASES) {
        return Some(Classification::new(ErrorClass::ContextOverflow, format!("phrase '{p}'")));
    }
    for (a, b) in OVERFLOW_PAIRS {
        if let Some(i) = find_word(text, a) {
            if text.get(i.saturating_add(a.len())..).and_then(|r| find_word(r, b)).is_some() {
                return Some(Classification::new(ErrorClass::ContextOverflow, format!("phrase '{a} … {b}'")));
            }
        }
    }
    if let Some(s @ (400 | 413 | 422)) = seen.status {
        if let (Some(t), Some(e)) = (first_of(text, TOKEN_WORDS), first_of(text, EXCESS_WORDS)) {
            return Some(Classification::new(
                ErrorClass::ContextOverflow,
                format!("status {s} with '{t}' and '{e}'"),
            ));
        }
    }
    None
}

/// Rules 4 to 9, each a class by its statuses, then by its phrases, in this order.
fn status_and_phrase_rules(seen: &Seen<'_>) -> Option<Classification> {
    let rules: [(ErrorClass, &[u16], &[&str]); 6] = [
        // 4. Payload too large.
        (ErrorClass::PayloadTooLarge, &[413, 431], PAYLOAD_PHRASES),
        // 5. Auth: 401, a 403 without firewall signals (rule 2 took those), or the phrases.
        (ErrorClass::Auth, &[401, 403], AUTH_PHRASES),
        // 6. Rate limit.
        (ErrorClass::RateLimit, &[429], RATE_PHRASES),
        // 7. Model not found.
        (ErrorClass::ModelNotFound, &[404], MODEL_PHRASES),
        // 8. Server.
        (ErrorClass::Server, &[500, 502, 503, 504, 529], SERVER_PHRASES),
        // 9. Timeout: phrases only.
        (ErrorClass::Timeout, &[], TIMEOUT_PHRASES),
    ];
    for (class, statuses, phrases) in rules {
        if let Some(&s) = statuses.iter().find(|&&s| seen.has_status(s)) {
            let reason =
                if s == 403 { "403 without firewall signals".to_string() } else { format!("status {s}") };
            return Some(Classification::new(class, reason));
        }
        if let Some(p) = first_of(&seen.text, phrases) {
            return Some(Classification::new(class, format!("phrase '{p}'")));
        }
    }
    None
}

/// Classifies one failure: the rules of the behaviour spec, first match wins.
pub fn classify(input: &FailureInput) -> Classification {
    let seen = Seen::of(&input.failure);
    transport_rule(input, &seen)
        .or_else(|| waf_rule(&seen))
        .or_else(|| overflow_rule(&seen))
        .or_else(|| status_and_phrase_rules(&seen))
        .unwrap_or_else(|| {
            // A transport failure that matched nothing above is still a network problem.
            if seen.failure.status.is_none() && seen.transport.is_some() {
                Classification::new(ErrorClass::TransientNetwork, "transport failure".into())
            } else {
                Classification::new(ErrorClass::Unknown, "no rule matched".into())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_input_reads_flat_json_into_the_one_failure() {
        use salvage_types::capture::from_json_bytes;
        let flat = br#"{"status":413,"message":"m","transport":"eof","rejected_request_bytes":9,
            "history_bytes":7,"payload_path_seen":true}"#;
        let v: FailureInput = from_json_bytes(flat, "f.json").unwrap();
        let want = Failure {
            status: Some(413),
            message: "m".to_string(),
            transport: Some("eof".to_string()),
            rejected_request_bytes: Some(9),
        };
        assert_eq!(v, FailureInput { failure: want, history_bytes: 7, payload_path_seen: true });
        let back: FailureInput = serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
        assert_eq!(back, v);
        assert_eq!(from_json_bytes::<FailureInput>(b"{}", "f.json").unwrap(), FailureInput::default());
        // A bad field is reported at its own path, not at the top level.
        let e = from_json_bytes::<FailureInput>(br#"{"status":"403"}"#, "f.json").unwrap_err();
        assert!(e.to_string().starts_with("f.json: status: invalid type"), "{e}");
    }

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
