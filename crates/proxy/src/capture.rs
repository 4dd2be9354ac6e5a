//! The capture of a live failure: the request as the client sent it (as a history plus its other
//! fields and size), the failure as the upstream answered, and an `upstream` inferred from the
//! rejection, so that `salvage replay` reproduces it. Redacted like `salvage import`.

use crate::route::Api;
use salvage_types::capture::{
    Capture, ClientInfo, Failure, Gateway, ModelSpec, OverflowStyle, RejectStyle, Request, Upstream,
    CAPTURE_FORMAT,
};
use salvage_types::{ErrorClass, Message};
use std::collections::BTreeMap;

/// What a capture is built from (the writer thread builds it, off the request path).
#[derive(Debug, Clone)]
pub struct CaptureInput {
    /// The API.
    pub api: Api,
    /// The client (from its user agent).
    pub client: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The history as sent.
    pub history: Vec<Message>,
    /// The request besides its messages, as imported (size as sent, other fields).
    pub request: Request,
    /// The body's size as sent.
    pub bytes: u64,
    /// The failure as seen.
    pub failure: Failure,
    /// Its class.
    pub class: ErrorClass,
    /// Where it was sent (for the title).
    pub upstream: String,
    /// The sizes of later attempts of the same turn the upstream rejected for their size.
    pub rejected_retries: Vec<u64>,
}

/// A size the upstream reported in its rejection (`… 1234567 bytes …`, `request size: N`).
pub fn reported_size(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    if !["request", "body", "payload"].iter().any(|w| lower.contains(w)) {
        return None;
    }
    let words: Vec<&str> =
        lower.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')').collect();
    for (w, after) in words.iter().zip(words.iter().skip(1).copied().chain(std::iter::once(""))) {
        let digits = w.trim_matches(|c: char| !c.is_ascii_digit());
        if digits.is_empty() || !w.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        if after.starts_with("bytes") || after == "b" {
            return digits.parse().ok();
        }
    }
    None
}

/// `(tokens, window)` from an overflow message: Anthropic `prompt is too long: N tokens > M
/// maximum`, OpenAI `maximum context length is M tokens … resulted in N tokens`.
pub fn overflow_numbers(text: &str) -> Option<(u64, u64)> {
    let nums = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|d| !d.is_empty())
            .filter_map(|d| d.parse().ok())
            .collect()
    };
    if let Some((_, after)) = text.split_once("prompt is too long") {
        if let [tokens, window, ..] = *nums(after).as_slice() {
            return Some((tokens, window));
        }
    }
    if let Some((_, after)) = text.split_once("maximum context length is") {
        if let [window, tokens, ..] = *nums(after).as_slice() {
            return Some((tokens, window));
        }
    }
    None
}

fn gateway_style(failure: &Failure, class: ErrorClass) -> Option<RejectStyle> {
    let lower = failure.message.to_ascii_lowercase();
    match (failure.status, class) {
        (Some(413), _) if class != ErrorClass::ContextOverflow => Some(RejectStyle::Http413),
        (Some(431), _) => Some(RejectStyle::Http431),
        (Some(403), ErrorClass::WafRejection) => {
            if lower.contains("<html") || lower.contains("<!doctype") {
                Some(RejectStyle::WafHtml403)
            } else {
                Some(RejectStyle::Waf403)
            }
        }
        (None, _) => {
            let t = failure.transport.as_deref().unwrap_or(&failure.message).to_ascii_lowercase();
            if t.contains("reset") {
                Some(RejectStyle::ConnectionReset)
            } else if t.contains("eof") || t.contains("closed") || t.contains("incomplete") {
                Some(RejectStyle::Eof)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Builds the capture (redacted).
pub fn build_capture(input: &CaptureInput, id: &str, settings: &BTreeMap<String, String>) -> Capture {
    let mut capture = Capture {
        format: CAPTURE_FORMAT.to_string(),
        id: id.to_string(),
        title: None,
        client: input.client.as_ref().map(|c| ClientInfo { name: c.clone(), surface: None }),
        provider: Some(input.api.provider().to_string()),
        model: input.model.clone(),
        settings: settings.clone(),
        request: Some(input.request.clone()),
        history: input.history.clone(),
        failure: input.failure.clone(),
        upstream: Upstream::default(),
        recorded: Default::default(),
        expect: None,
    };
    let mut notes = Vec::new();
    // Redacted first: the gateway is modeled on the body the capture keeps (redaction changes
    // its size; a cap taken from the body as sent would let the replay's attempt 0 through).
    salvage_wire::redact::redact_capture(&mut capture);
    // A replay weighs attempt 0 as the body rebuilt from the capture's request and history: the
    // body as sent (the importers are lossless) less what redaction took, `request.bytes`.
    let rebuilt = capture
        .request
        .as_ref()
        .map(|r| salvage_wire::request_bytes(r, &capture.history))
        .unwrap_or(input.bytes);
    if rebuilt != input.bytes {
        notes.push(format!("the body as sent was {} bytes, {rebuilt} as kept", input.bytes));
    }
    capture.upstream.gateway = gateway(input, rebuilt, &mut notes);
    if input.class == ErrorClass::ContextOverflow {
        capture.upstream.model = Some(overflowing_model(input, &capture, &mut notes));
    }
    let what = match (input.failure.status, &input.failure.transport) {
        (Some(s), _) => format!("HTTP {s}"),
        (None, Some(t)) => t.clone(),
        (None, None) => "failure".into(),
    };
    capture.title = Some(format!(
        "Recorded by salvage proxy: {what} from {} ({}){}",
        input.upstream,
        input.class,
        if notes.is_empty() { String::new() } else { format!("; replayed with {}", notes.join(", ")) }
    ));
    capture
}

/// The gateway a rejection shows, if any: its style and the tightest cap consistent with what was
/// seen — one byte under the smallest of the reported size, the body as the capture keeps it and
/// every later attempt of the turn rejected for its size.
fn gateway(input: &CaptureInput, rebuilt: u64, notes: &mut Vec<String>) -> Option<Gateway> {
    let style = gateway_style(&input.failure, input.class)?;
    let first = input.failure.rejected_request_bytes.unwrap_or(u64::MAX).min(input.bytes).min(rebuilt);
    let smallest = input.rejected_retries.iter().copied().fold(first, u64::min);
    if smallest < first {
        notes.push(format!("a retry of {smallest} bytes rejected too"));
    }
    let max = smallest.saturating_sub(1);
    notes.push(format!("gateway {} at {max} bytes", style.as_str()));
    Some(Gateway {
        max_body_bytes: Some(max),
        rejects_with: style,
        reports_request_size: input.failure.rejected_request_bytes.is_some(),
    })
}

/// The model of an overflow: the provider's style and a window that reproduces it, scaled from
/// what the replay's simulation will count of `capture` (its kept, redacted history and its
/// request's tools and schemas) by the provider's reported excess (tokens/window), so the replay
/// is as far over as the provider said.
///
/// Re-review, findings 2 and 7: the window was scaled from the body before redaction (a log full
/// of tokens, 202 KB as sent and 12 KB as kept, replayed 94 % under its window and "recovered"
/// at once), and the provider's own window was kept whenever the simulation counted more than
/// it (25 % over at the provider, 2.4 % in the replay).
fn overflowing_model(input: &CaptureInput, capture: &Capture, notes: &mut Vec<String>) -> ModelSpec {
    let style = match input.api {
        Api::AnthropicMessages => OverflowStyle::Anthropic,
        Api::OpenaiChat | Api::OpenaiResponses => OverflowStyle::Openai,
    };
    let fields =
        capture.request.as_ref().map(|r| salvage_replay::upstream::request_tokens(&r.fields)).unwrap_or(0);
    let counted = salvage_replay::upstream::count_tokens(&capture.history).saturating_add(fields);
    let window = match overflow_numbers(&input.failure.message) {
        Some((n, m)) if n > 0 => u128::from(counted)
            .checked_mul(u128::from(m))
            .and_then(|x| x.checked_div(u128::from(n)))
            .and_then(|w| u64::try_from(w).ok())
            .unwrap_or(m)
            .min(counted.saturating_sub(1)),
        _ => counted.saturating_sub(1),
    }
    .max(1);
    notes.push(format!("context window {window} tokens ({})", style.as_str()));
    ModelSpec { context_window_tokens: Some(window), overflow_style: Some(style), max_output_tokens: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input of a capture of an Anthropic Messages `body` that failed so.
    fn anthropic_input(body: &[u8], failure: Failure, class: ErrorClass) -> CaptureInput {
        let parsed = crate::route::parse(Api::AnthropicMessages, body).unwrap();
        CaptureInput {
            api: Api::AnthropicMessages,
            client: None,
            model: parsed.model.clone(),
            history: parsed.history.clone(),
            request: parsed.request.clone(),
            bytes: body.len() as u64,
            failure,
            class,
            upstream: "http://127.0.0.1".into(),
            rejected_retries: Vec::new(),
        }
    }

    #[test]
    fn sizes_and_overflow_numbers() {
        assert_eq!(reported_size("request body of 129434 bytes exceeds the limit"), Some(129434));
        assert_eq!(reported_size("413 Payload Too Large"), None);
        assert_eq!(
            overflow_numbers("prompt is too long: 241300 tokens > 200000 maximum"),
            Some((241300, 200000))
        );
        assert_eq!(
            overflow_numbers("This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens."),
            Some((130001, 128000))
        );
    }

    /// A 413 body holding a secret: the cap is modeled on the body the capture keeps (redacted,
    /// smaller), so the capture's attempt 0 is still over it.
    #[test]
    fn the_cap_of_a_redacted_capture_is_under_its_kept_body() {
        let secret = format!("sk-ant-api03-{}", "AbCdEfGhIj".repeat(8));
        let body = serde_json::to_vec(&serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8,
            "messages": [{"role": "user", "content": format!("my key is {secret}, fix the build")}]}))
        .unwrap();
        let input = anthropic_input(
            &body,
            Failure {
                status: Some(413),
                message: "413 Payload Too Large".into(),
                transport: None,
                rejected_request_bytes: None,
            },
            ErrorClass::PayloadTooLarge,
        );
        let c = build_capture(&input, "t-1", &BTreeMap::new());
        let kept = c.request.as_ref().and_then(|r| r.bytes).unwrap();
        assert!(kept < body.len() as u64, "redacted");
        assert!(!c.to_json_pretty().contains(&secret));
        let max = c.upstream.gateway.as_ref().and_then(|g| g.max_body_bytes).unwrap();
        assert_eq!(max, kept - 1);
    }

    /// Review finding 8: the window of an overflow is scaled from what the simulation counts,
    /// tools included, so a request 2.5 % over reads 2.5 % over in the replay too.
    #[test]
    fn an_overflows_window_counts_the_tools_as_the_simulation_does() {
        let tools: Vec<serde_json::Value> = (0..40)
            .map(|i| serde_json::json!({"name": format!("tool_{i}"), "description": "does a thing to a file ".repeat(40),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}))
            .collect();
        let messages: Vec<serde_json::Value> = (0..20)
            .map(|i| {
                serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                "content": format!("step {i}: {}", "the build log says something ".repeat(60))})
            })
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8,
            "tools": tools, "messages": messages}))
        .unwrap();
        let input = anthropic_input(
            &body,
            Failure {
                status: Some(400),
                message: "prompt is too long: 205000 tokens > 200000 maximum".into(),
                transport: None,
                rejected_request_bytes: None,
            },
            ErrorClass::ContextOverflow,
        );
        let c = build_capture(&input, "t-2", &BTreeMap::new());
        let window = c.upstream.model.as_ref().and_then(|m| m.context_window_tokens).unwrap();
        let sim = salvage_replay::upstream::Simulated::for_capture(&c);
        let counted = match sim.judge(0, &c.history, false) {
            Err(r) => r.counted_tokens.unwrap(),
            Ok(v) => panic!("attempt 0 must overflow: {v:?}"),
        };
        // 205 000 / 200 000: the simulation's count is 2.5 % over the window, as the provider's.
        let over = counted as f64 / window as f64;
        assert!((over - 1.025).abs() < 0.002, "{counted} / {window} = {over}");
    }

    /// Re-review findings 2 and 7: the window is scaled from the capture as kept (redacted), and
    /// a provider's excess larger than the simulation's count is kept too.
    #[test]
    fn an_overflows_window_is_scaled_from_the_kept_capture_at_the_providers_excess() {
        let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
        let log: String = (0..400).map(|i| format!("GET /api/{i} Authorization: Bearer {jwt}\n")).collect();
        for (message, ratio) in [
            ("prompt is too long: 205000 tokens > 200000 maximum", 1.025),
            ("prompt is too long: 250000 tokens > 200000 maximum", 1.25),
        ] {
            let body = serde_json::to_vec(&serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 8,
                "messages": [{"role": "user", "content": format!("why do these fail?\n{log}")}]}))
            .unwrap();
            let input = anthropic_input(
                &body,
                Failure {
                    status: Some(400),
                    message: message.into(),
                    transport: None,
                    rejected_request_bytes: None,
                },
                ErrorClass::ContextOverflow,
            );
            let c = build_capture(&input, "t-3", &BTreeMap::new());
            assert!(!c.to_json_pretty().contains(jwt), "redacted");
            let window = c.upstream.model.as_ref().and_then(|m| m.context_window_tokens).unwrap();
            let counted =
                match salvage_replay::upstream::Simulated::for_capture(&c).judge(0, &c.history, false) {
                    Err(r) => r.counted_tokens.unwrap(),
                    Ok(v) => panic!("attempt 0 must overflow: {v:?}"),
                };
            let over = counted as f64 / window as f64;
            assert!((over - ratio).abs() < 0.01, "{message}: {counted} / {window} = {over}");
        }
    }
}
