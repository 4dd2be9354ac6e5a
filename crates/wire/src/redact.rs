//! Redaction of likely secrets in captures: API keys of the major providers, bearer tokens, AWS
//! access keys, private key blocks and passwords in URLs. Each secret becomes a stable
//! placeholder `[REDACTED:KIND:HASH8]` (the same secret gives the same placeholder, so a reader can
//! still see that two places held the same value); counts are reported per kind.

use salvage_types::Message;
use serde_json::Value;
use std::collections::BTreeMap;

/// Secrets replaced, by kind.
pub type Counts = BTreeMap<String, u64>;

const PREFIXES: &[(&str, &str)] = &[
    ("sk-ant-", "anthropic_key"),
    ("sk-proj-", "openai_key"),
    ("sk-", "openai_key"),
    ("xai-", "xai_key"),
    ("gsk_", "groq_key"),
    ("AIza", "google_key"),
    ("github_pat_", "github_token"),
    ("ghp_", "github_token"),
    ("glpat-", "gitlab_token"),
    ("xoxb-", "slack_token"),
];

fn placeholder(kind: &str, secret: &str) -> String {
    let h = blake3::hash(secret.as_bytes()).to_hex();
    format!("[REDACTED:{kind}:{}]", &h[..8])
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn boundary_before(s: &[u8], i: usize) -> bool {
    i == 0 || !token_char(s[i - 1])
}

/// Redacts one text.
pub fn redact_text(text: &str, counts: &mut Counts) -> String {
    let mut out = redact_pem(text, counts);
    out = redact_prefixed(&out, counts);
    out = redact_aws(&out, counts);
    out = redact_bearer(&out, counts);
    redact_url_passwords(&out, counts)
}

fn bump(counts: &mut Counts, kind: &str) {
    *counts.entry(kind.to_string()).or_insert(0) += 1;
}

fn redact_pem(text: &str, counts: &mut Counts) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("-----BEGIN ") {
        let after = &rest[i..];
        let Some(hdr_end) = after[11..].find("-----").map(|j| j + 11 + 5) else { break };
        if !after[..hdr_end].contains("PRIVATE KEY") {
            out.push_str(&rest[..i + hdr_end]);
            rest = &rest[i + hdr_end..];
            continue;
        }
        let Some(end) = after[hdr_end..].find("-----END ") else { break };
        let tail = &after[hdr_end + end + 9..];
        let close = tail.find("-----").map(|j| hdr_end + end + 9 + j + 5).unwrap_or(after.len());
        out.push_str(&rest[..i]);
        out.push_str(&placeholder("private_key", &after[..close]));
        bump(counts, "private_key");
        rest = &after[close..];
    }
    out.push_str(rest);
    out
}

fn redact_prefixed(text: &str, counts: &mut Counts) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        let mut hit = None;
        if boundary_before(b, i) {
            for (p, kind) in PREFIXES {
                if b[i..].starts_with(p.as_bytes()) {
                    let mut j = i + p.len();
                    while j < b.len() && token_char(b[j]) {
                        j += 1;
                    }
                    if j - i - p.len() >= 20 {
                        hit = Some((j, *kind));
                    }
                    break;
                }
            }
        }
        match hit {
            Some((j, kind)) => {
                out.push_str(&text[last..i]);
                out.push_str(&placeholder(kind, &text[i..j]));
                bump(counts, kind);
                i = j;
                last = j;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[last..]);
    out
}

fn redact_aws(text: &str, counts: &mut Counts) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut last) = (0, 0);
    while i + 20 <= b.len() {
        let starts = (b[i..].starts_with(b"AKIA") || b[i..].starts_with(b"ASIA")) && boundary_before(b, i);
        let body_ok = starts && b[i + 4..i + 20].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let end_ok = body_ok && (i + 20 == b.len() || !token_char(b[i + 20]));
        if end_ok {
            out.push_str(&text[last..i]);
            out.push_str(&placeholder("aws_access_key", &text[i..i + 20]));
            bump(counts, "aws_access_key");
            i += 20;
            last = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

fn redact_bearer(text: &str, counts: &mut Counts) -> String {
    let lower = text.to_ascii_lowercase();
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut from = 0;
    while let Some(k) = lower[from..].find("bearer ") {
        let start = from + k + 7;
        let mut j = start;
        while j < b.len() && (token_char(b[j]) || b".~+/=".contains(&b[j])) {
            j += 1;
        }
        if j - start >= 16 && !text[start..j].starts_with("[REDACTED") {
            out.push_str(&text[last..start]);
            out.push_str(&placeholder("bearer_token", &text[start..j]));
            bump(counts, "bearer_token");
            last = j;
        }
        from = j.max(start);
    }
    out.push_str(&text[last..]);
    out
}

fn redact_url_passwords(text: &str, counts: &mut Counts) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let auth_start = i + 3;
        let after = &rest[auth_start..];
        let end = after
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let authority = &after[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon))
                if colon < at
                    && colon > 0
                    && at > colon + 1
                    && !authority[colon + 1..at].starts_with("[REDACTED") =>
            {
                let pass = &authority[colon + 1..at];
                out.push_str(&rest[..auth_start + colon + 1]);
                out.push_str(&placeholder("url_password", pass));
                bump(counts, "url_password");
                rest = &rest[auth_start + at..];
            }
            _ => {
                out.push_str(&rest[..auth_start]);
                rest = &rest[auth_start..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn redact_value(v: &mut Value, counts: &mut Counts) {
    match v {
        Value::String(s) => *s = redact_text(s, counts),
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, counts)),
        Value::Object(o) => o.values_mut().for_each(|x| redact_value(x, counts)),
        _ => {}
    }
}

/// Redacts every message: content (text slot by text slot, so the provider template still
/// splits it), system parts, tool-call arguments and the blocks its `wire` carries.
pub fn redact_history(history: &mut [Message], counts: &mut Counts) {
    for m in history {
        crate::shape::map_segments(m, |seg| redact_text(seg, counts));
        for p in &mut m.system_parts {
            p.text = redact_text(&p.text, counts);
        }
        for c in &mut m.tool_calls {
            redact_value(&mut c.arguments, counts);
        }
        if let Some(w) = &mut m.wire {
            redact_value(w, counts);
        }
    }
}

/// Redacts a capture: its history, the request's other fields, failure text and settings
/// values. When anything in the history or the fields was replaced, `request.bytes` becomes the
/// size of the redacted body (what a replay of this capture sends).
pub fn redact_capture(c: &mut salvage_types::Capture) -> Counts {
    let mut counts = Counts::new();
    redact_history(&mut c.history, &mut counts);
    if let Some(r) = &mut c.request {
        for v in r.fields.values_mut() {
            redact_value(v, &mut counts);
        }
        if !counts.is_empty() && r.bytes.is_some() {
            r.bytes = Some(crate::request_bytes(r, &c.history));
        }
    }
    c.failure.message = redact_text(&c.failure.message, &mut counts);
    if let Some(t) = &c.failure.transport {
        c.failure.transport = Some(redact_text(t, &mut counts));
    }
    counts
}

/// `3 secrets (2 openai_key, 1 aws_access_key)`.
pub fn describe(counts: &Counts) -> String {
    let total: u64 = counts.values().sum();
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "{total} secret(s){}",
        if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_replaced_with_a_stable_placeholder() {
        let text = "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and again sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx\n\
            openai sk-proj-1234567890abcdefghijABCD, aws AKIAIOSFODNN7EXAMPLE, google AIzaSyA1234567890abcdefghijklmnopqrstu\n\
            Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\n\
            db postgres://admin:hunter2secret@db.internal:5432/app\n\
            -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nend";
        let mut counts = Counts::new();
        let out = redact_text(text, &mut counts);
        for secret in [
            "AbCdEfGhIjKlMnOpQrStUvWx",
            "1234567890abcdefghijABCD",
            "AKIAIOSFODNN7EXAMPLE",
            "AIzaSyA1234567890",
            "eyJhbGciOiJIUzI1NiJ9",
            "hunter2secret",
            "MIIEowIBAAKCAQEA",
        ] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert_eq!(counts["anthropic_key"], 2);
        for k in ["openai_key", "aws_access_key", "google_key", "bearer_token", "url_password", "private_key"]
        {
            assert_eq!(counts[k], 1, "{k}: {out}");
        }
        let first = out.find("[REDACTED:anthropic_key:").unwrap();
        let p = &out[first..first + 33];
        assert_eq!(out.matches(p).count(), 2, "the same secret gives the same placeholder");
        assert!(out.contains("postgres://admin:[REDACTED:url_password:") && out.ends_with("end"));
        // Idempotent, and ordinary text is left alone.
        let mut again = Counts::new();
        assert_eq!(redact_text(&out, &mut again), out);
        assert!(again.is_empty(), "{again:?}");
        let plain = "sk-short AKIA123 https://example.com/a:b@c the task-runner_name";
        assert_eq!(redact_text(plain, &mut Counts::new()), plain);
    }
}
