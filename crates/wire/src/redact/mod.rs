//! Redaction of likely secrets in everything a user or a file supplies: provider and platform
//! tokens, cloud keys, private keys, credentials in URLs and headers, and secret-looking
//! assignments in `.env`, YAML, JSON and config text.
//!
//! Each secret becomes a stable placeholder `[REDACTED:KIND:HASH8]` (the same secret gives the
//! same placeholder, so a reader still sees that two places held the same value); counts are
//! reported per kind. The rules are one table ([`RULES`]); the coverage follows the classes of
//! public secret scanners (gitleaks' rule set was the reference), written afresh here.
//!
//! Decisions a reader must know:
//! - A rule names the capture group that is the secret; boundary checks around the match are
//!   done in code (the `regex` crate has no look-around), so a key right after `_` is found while
//!   `task-…` never reads as an `sk-` key.
//! - Placeholders, not secrets, are left alone: `${var.x}`, `$VAR`, `<your-key>`, `{{ x }}`,
//!   `xxxx`/`****`, and values that name themselves as examples. The AWS documentation's example
//!   keys (`AKIAIOSFODNN7EXAMPLE`, `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`, anything ending in
//!   `EXAMPLE`) are published, so they are not redacted; real AWS keys never end that way.
//! - Base64 images (`data:…;base64,…` and `data` fields beside a `media_type`) are skipped: their
//!   payload is binary, and scanning it would only find look-alikes.
//! - Structured values are walked string by string ([`redact_value`]), so JSON stays valid and
//!   every field (titles, settings, a message's provider shape) is covered.

use regex::{Regex, RegexSet};
use salvage_types::Message;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

#[cfg(test)]
mod anchor_tests;
mod history;
mod rules;
pub use history::redact_history;
pub use rules::{Check, Edge, Rule, RULES};

/// Secrets replaced, by kind.
pub type Counts = BTreeMap<String, u64>;

struct Compiled {
    /// Every rule's [`Rule::anchor`] in one pattern: the cheap test a text must pass before the
    /// set of rules looks at it.
    anchors: Regex,
    set: RegexSet,
    rules: Vec<(Rule, Regex)>,
    pem_header: Regex,
    data_url: Regex,
}

static COMPILED: LazyLock<Option<Compiled>> = LazyLock::new(|| {
    let rules: Vec<(Rule, Regex)> =
        RULES.iter().map(|r| Regex::new(r.pattern).map(|re| (*r, re))).collect::<Result<_, _>>().ok()?;
    let anchors = RULES.iter().map(|r| format!("(?:{})", r.anchor)).collect::<Vec<_>>().join("|");
    Some(Compiled {
        anchors: Regex::new(&anchors).ok()?,
        // The lazy DFA of an overlapping search over every rule outgrows the default 2 MiB cache
        // on long mixed text and rebuilds its states over and over (a 50 MB body took 30 s);
        // a larger cache keeps them.
        set: regex::RegexSetBuilder::new(RULES.iter().map(|r| r.pattern))
            .dfa_size_limit(64 << 20)
            .build()
            .ok()?,
        rules,
        pem_header: Regex::new(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----").ok()?,
        data_url: Regex::new(r"data:[A-Za-z0-9/+.-]+;base64,[A-Za-z0-9+/=]+").ok()?,
    })
});

/// Compiles the rules now (about 10 ms), so that a caller can have it done on another thread
/// while it reads its input; redaction compiles them at first use otherwise.
pub fn prepare() {
    LazyLock::force(&COMPILED);
}

/// `text[range]`, or `""` off a char boundary. Every offset used here comes from a regex match or
/// from stepping over ASCII bytes, so it is always on one; no cut can panic.
fn part<R: std::slice::SliceIndex<str, Output = str>>(text: &str, range: R) -> &str {
    text.get(range).unwrap_or_default()
}

/// Adds `n` to a count (counts of replacements: far below u64::MAX).
fn add(counts: &mut Counts, kind: String, n: u64) {
    let e = counts.entry(kind).or_insert(0);
    *e = e.saturating_add(n);
}

fn placeholder(kind: &str, secret: &str) -> String {
    let h = blake3::hash(secret.as_bytes()).to_hex();
    format!("[REDACTED:{kind}:{}]", part(h.as_str(), ..8))
}

fn bump(counts: &mut Counts, kind: &str) {
    add(counts, kind.to_string(), 1);
}

fn alnum_at(text: &str, i: usize, before: bool) -> bool {
    let c = if before { part(text, ..i).chars().next_back() } else { part(text, i..).chars().next() };
    c.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// True for a value that is a placeholder or prose rather than a credential: `${var.x}`,
/// `$VAR`, `<your-key>`, `{{ x }}`, `%(x)s`, masks, examples, booleans and empty-ish words.
pub fn is_placeholder(v: &str) -> bool {
    let l = v.to_ascii_lowercase();
    let masked = v.len() >= 3 && v.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '#' | '-' | '_'));
    v.starts_with('$')
        || v.starts_with('<')
        || v.starts_with("{{")
        || v.starts_with("%(")
        || v.starts_with("[REDACTED")
        || v.starts_with("process.env")
        || v.starts_with("os.environ")
        || masked
        || l.ends_with("example")
        || l.contains("example_")
        || l.contains("your_")
        || l.contains("your-")
        || l.contains("placeholder")
        || l.contains("changeme")
        || l.contains("redacted")
        || matches!(
            l.as_str(),
            "true" | "false" | "null" | "none" | "required" | "optional" | "string" | "undefined"
        )
}

/// A value after a secret-naming key that looks like a credential: no placeholder, at least
/// 6 characters, not a plain lowercase word (prose such as `token: the next one`), not a number
/// (`max_tokens=200_000`), not code (`PROMPT_TOKENS = encode(chatSettings.prompt).length`, a
/// call or an index) and not an attribute path (`token=settings.slack_bot_token`): a real
/// session's code and prose were redacted by all three.
fn secretish(v: &str) -> bool {
    let v = v.trim_end_matches([',', '.', ')', ']', '}']);
    if v.len() < 6 || is_placeholder(v) {
        return false;
    }
    let lower_word = v.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == '_');
    let number =
        v.chars().all(|c| c.is_ascii_digit() || matches!(c, '_' | '.' | ',' | '-' | '+' | 'e' | 'E'))
            && v.chars().any(|c| c.is_ascii_digit());
    let code = v.contains(['(', '[', '{']) || v.contains("=>") || v.contains("->");
    !(lower_word || number || code || attribute_path(v))
}

/// `a.b`, `settings.slack_bot_token`, `self.config.api_key`: identifiers joined by dots, one of
/// them a lowercase word of three letters or more (a module or object name, not a password's
/// piece).
fn attribute_path(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    let ident = |p: &&str| {
        let mut c = p.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
    };
    parts.len() >= 2
        && parts.iter().all(ident)
        && parts.iter().any(|p| p.len() >= 3 && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
}

/// A captured value up to the first JSON-style escape inside it (`\n`, `\t`, `\"`…): in text
/// that holds escaped JSON, the literal ends there (a redaction ran on over `\n\n` into the next
/// line of code).
fn literal(v: &str) -> &str {
    let b = v.as_bytes();
    let cut = b.windows(2).position(|w| {
        w.first() == Some(&b'\\') && matches!(w.get(1), Some(b'n' | b'r' | b't' | b'"' | b'\\'))
    });
    cut.map_or(v, |i| part(v, ..i))
}

/// HTTP Basic credentials (RFC 7617): base64 that decodes to UTF-8 text holding the `:` between
/// user-id and password.
fn basic_credentials(v: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(v)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .is_some_and(|t| t.contains(':') && !t.chars().any(char::is_control))
}

/// Private key blocks: the header names a private key; the block runs to its END line, or, when
/// that is missing, over the base64 body that follows (real newlines or `\n` escapes). A header
/// that is only mentioned ("grep -----BEGIN") is not a block and does not hide a later key.
/// `None` when the text holds no header (nothing to cut).
fn redact_pem(c: &Compiled, text: &str, counts: &mut Counts) -> Option<String> {
    if !text.contains("-----BEGIN ") {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut from = 0;
    while let Some(m) = c.pem_header.find_at(text, from) {
        let start = m.start();
        let body_start = m.end();
        // Offsets within `text` (at most its length plus a few ASCII bytes): no overflow.
        let end = match part(text, body_start..).find("-----END ") {
            Some(j) => {
                let tail = body_start.saturating_add(j).saturating_add(9);
                match part(text, tail..).find("-----") {
                    Some(k) if k <= 40 => tail.saturating_add(k).saturating_add(5),
                    _ => tail,
                }
            }
            None => {
                let mut e = body_start;
                let b = text.as_bytes();
                while let Some(&ch) = b.get(e) {
                    if ch.is_ascii_alphanumeric() || b"+/=\r\n\t :,-".contains(&ch) {
                        e = e.saturating_add(1);
                    } else if ch == b'\\' && matches!(b.get(e.saturating_add(1)), Some(b'n' | b'r' | b't')) {
                        e = e.saturating_add(2);
                    } else {
                        break;
                    }
                }
                e
            }
        };
        out.push_str(part(text, last..start));
        out.push_str(&placeholder("private_key", part(text, start..end)));
        bump(counts, "private_key");
        last = end;
        from = end.max(start.saturating_add(1));
        if from >= text.len() {
            break;
        }
    }
    out.push_str(part(text, last..));
    Some(out)
}

/// Applies one rule to `text`, returning the new text when something was replaced.
fn apply(rule: &Rule, re: &Regex, text: &str, counts: &mut Counts) -> Option<String> {
    let mut out = String::new();
    let mut last = 0;
    let mut at = 0;
    let mut changed = false;
    while at <= text.len() {
        let Some(caps) = re.captures_at(text, at) else { break };
        let Some(whole) = caps.get(0) else { break };
        let next = |i: usize| {
            part(text, i..).chars().next().map_or(i.saturating_add(1), |c| i.saturating_add(c.len_utf8()))
        };
        let left_ok = rule.left == Edge::Any || !alnum_at(text, whole.start(), true);
        let right_ok = rule.right == Edge::Any || !alnum_at(text, whole.end(), false);
        let secret = caps.get(rule.group);
        let ok = left_ok
            && right_ok
            && secret.is_some_and(|s| {
                let v = s.as_str();
                !v.starts_with("[REDACTED")
                    && !v.ends_with("EXAMPLE")
                    && !v.ends_with("EXAMPLEKEY")
                    && match rule.check {
                        Check::None => true,
                        Check::SecretValue => secretish(literal(v)),
                        Check::BasicCredentials => basic_credentials(v),
                    }
            });
        match (ok, secret) {
            (true, Some(s)) => {
                let v = literal(s.as_str()).trim_end_matches([',', '.', ')', ']', '}']);
                let end = s.start().saturating_add(v.len());
                out.push_str(part(text, last..s.start()));
                out.push_str(&placeholder(rule.kind, v));
                bump(counts, rule.kind);
                last = end;
                changed = true;
                at = if whole.end() > whole.start() { whole.end().max(end) } else { next(whole.start()) };
            }
            _ => at = next(whole.start()),
        }
    }
    changed.then(|| {
        out.push_str(part(text, last..));
        out
    })
}

/// Redacts one text: private key blocks, then every rule of the table. Base64 data URLs are
/// left as they are.
pub fn redact_text(text: &str, counts: &mut Counts) -> String {
    redacted(text, counts).unwrap_or_else(|| text.to_string())
}

/// [`redact_text`], `None` when nothing was cut: a text without secrets (nearly every one) is
/// neither copied nor compared.
fn redacted(text: &str, counts: &mut Counts) -> Option<String> {
    let c = COMPILED.as_ref()?;
    if text.contains(";base64,") {
        // Redact the gaps between data URLs only.
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in c.data_url.find_iter(text) {
            let gap = part(text, last..m.start());
            out.push_str(redact_plain(c, gap, counts).as_deref().unwrap_or(gap));
            out.push_str(m.as_str());
            last = m.end();
        }
        let gap = part(text, last..);
        out.push_str(redact_plain(c, gap, counts).as_deref().unwrap_or(gap));
        return (out != text).then_some(out);
    }
    redact_plain(c, text, counts)
}

/// Design note (issue #19, import time): the overlapping search that names every rule a text
/// matches runs only on a text some rule matches; the plain search that answers "any?" runs
/// only on a text some rule's anchor matches. Every text pays the anchors' search alone: one
/// small automaton without the rules' counted repetitions, whose states the set's lazy DFA
/// multiplies (the set ran at about 200 MB/s on an agent's history, the anchors at several
/// times that). An anchor is a part of its rule's pattern, so a text no anchor matches is a
/// text no rule matches: skipping it cuts nothing the set would have cut.
fn redact_plain(c: &Compiled, text: &str, counts: &mut Counts) -> Option<String> {
    if text.len() < 8 {
        return None;
    }
    let mut out = redact_pem(c, text, counts);
    let now = out.as_deref().unwrap_or(text);
    if !c.anchors.is_match(now) || !c.set.is_match(now) {
        return out;
    }
    let hits: Vec<usize> = c.set.matches(out.as_deref().unwrap_or(text)).into_iter().collect();
    for i in hits {
        let Some((rule, re)) = c.rules.get(i) else { continue };
        if let Some(next) = apply(rule, re, out.as_deref().unwrap_or(text), counts) {
            out = Some(next);
        }
    }
    out
}

/// Redacts every string inside a JSON value, object keys included (a file may key a map by a
/// token), skipping base64 image payloads (a `data` field beside a `media_type`).
pub fn redact_value(v: &mut Value, counts: &mut Counts) {
    match v {
        Value::String(s) => {
            if let Some(r) = redacted(s, counts) {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, counts)),
        Value::Object(o) => {
            let image = o.get("type").and_then(Value::as_str) == Some("base64")
                || o.get("media_type").and_then(Value::as_str).is_some_and(|m| m.starts_with("image/"));
            for (k, x) in o.iter_mut() {
                if image && k == "data" {
                    continue;
                }
                redact_value(x, counts);
            }
            redact_keys(o, counts);
        }
        _ => {}
    }
}

/// Redacts the keys of an object in place, its order kept. Two keys that redact to the same
/// text both stay: the later ones get ` #2`, ` #3`… so no value is lost to a collision.
fn redact_keys(o: &mut serde_json::Map<String, Value>, counts: &mut Counts) {
    let renamed: Vec<(usize, String)> =
        o.keys().enumerate().filter_map(|(i, k)| redacted(k, counts).map(|r| (i, r))).collect();
    if renamed.is_empty() {
        return;
    }
    let mut names = renamed.into_iter().peekable();
    let old = std::mem::take(o);
    for (i, (k, x)) in old.into_iter().enumerate() {
        let mut key = match names.next_if(|(at, _)| *at == i) {
            Some((_, r)) => r,
            None => k,
        };
        let base = key.clone();
        let mut n = 1u32;
        while o.contains_key(&key) {
            n = n.saturating_add(1);
            key = format!("{base} #{n}");
        }
        o.insert(key, x);
    }
}

/// Redacts one message: content, system parts, tool-call names, ids and arguments, image URLs,
/// error codes and the provider's own shape of the message (`wire`). Image data is binary and is
/// left alone.
pub fn redact_message(m: &mut Message, counts: &mut Counts) {
    // Text slot by text slot, so the provider template still splits the content.
    crate::shape::map_segments(m, |seg| redacted(seg, counts));
    for p in &mut m.system_parts {
        p.text = redact_text(&p.text, counts);
    }
    for c in &mut m.tool_calls {
        c.name = redact_text(&c.name, counts);
        c.id = redact_text(&c.id, counts);
        redact_value(&mut c.arguments, counts);
    }
    if let Some(id) = &m.tool_call_id {
        m.tool_call_id = Some(redact_text(id, counts));
    }
    for i in &mut m.images {
        if let Some(u) = &i.url {
            i.url = Some(redact_text(u, counts));
        }
    }
    if let Some(e) = &m.error_code {
        m.error_code = Some(redact_text(e, counts));
    }
    if let Some(w) = &mut m.wire {
        redact_value(w, counts);
    }
}

/// Redacts a capture: every string a user or a file supplied (id, title, provider, model,
/// settings, the request's other fields, the history, the failure, the upstream and recorded
/// outputs). The capture is walked as JSON, so a field added later is covered too.
pub fn redact_capture(c: &mut salvage_types::Capture) -> Counts {
    let mut counts = Counts::new();
    let history = std::mem::take(&mut c.history);
    let mut rest = match serde_json::to_value(&*c) {
        Ok(v) => v,
        Err(_) => {
            c.history = history;
            redact_history(&mut c.history, &mut counts);
            return counts;
        }
    };
    c.history = history;
    redact_history(&mut c.history, &mut counts);
    let mut sub = Counts::new();
    redact_value(&mut rest, &mut sub);
    if !sub.is_empty() {
        if let Value::Object(o) = &mut rest {
            o.insert("history".into(), Value::Array(Vec::new()));
        }
        if let Ok(mut back) = serde_json::from_value::<salvage_types::Capture>(rest) {
            back.history = std::mem::take(&mut c.history);
            *c = back;
            for (k, n) in sub {
                add(&mut counts, k, n);
            }
        }
    }
    // The body as sent changed: a replay of this capture sends the redacted one.
    if let Some(r) = &mut c.request {
        if !counts.is_empty() && r.bytes.is_some() {
            r.bytes = Some(crate::request_bytes(r, &c.history));
        }
    }
    counts
}

/// Redacts one line of JSON (a JSONL export) as a value, so the line stays valid JSON; a line
/// that is not JSON is redacted as text.
pub fn redact_json_line(line: &str, counts: &mut Counts) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(mut v) => {
            let mut sub = Counts::new();
            redact_value(&mut v, &mut sub);
            if sub.is_empty() {
                return line.to_string();
            }
            for (k, n) in sub {
                add(counts, k, n);
            }
            serde_json::to_string(&v).unwrap_or_else(|_| redact_text(line, counts))
        }
        Err(_) => redact_text(line, counts),
    }
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
    fn every_rule_compiles() {
        assert!(COMPILED.is_some());
        for r in RULES {
            assert!(Regex::new(r.pattern).is_ok(), "{}", r.kind);
        }
    }

    #[test]
    fn every_kind_is_replaced_with_a_stable_placeholder() {
        let text = "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx and again sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx\n\
            openai sk-proj-1234567890abcdefghijABCD, aws AKIAZ3MDNB2QYX7TKPLE, google AIzaSyA1234567890abcdefghijklmnopqrstu\n\
            Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\n\
            db postgres://admin:hunter2secret@db.internal:5432/app\n\
            -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nend";
        let mut counts = Counts::new();
        let out = redact_text(text, &mut counts);
        for secret in [
            "AbCdEfGhIjKlMnOpQrStUvWx",
            "1234567890abcdefghijABCD",
            "AKIAZ3MDNB2QYX7TKPLE",
            "AIzaSyA1234567890",
            "eyJhbGciOiJIUzI1NiJ9",
            "hunter2secret",
            "MIIEowIBAAKCAQEA",
        ] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert_eq!(counts["anthropic_key"], 2);
        for k in
            ["openai_key", "aws_access_key", "google_api_key", "bearer_token", "url_password", "private_key"]
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
        let plain = "sk-short AKIA123 https://example.com/a:b@c the task-runner_name risk-assessment-document-template-v2";
        assert_eq!(redact_text(plain, &mut Counts::new()), plain);
    }

    #[test]
    fn hard_cases() {
        let cases = [
            ("redis://:pa/ss%2Fw0rd@cache:6379/0", "pa/ss%2Fw0rd"),
            ("MY_TOKEN_ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "ghp_abcdefghij"),
            ("see -----BEGIN in the docs; -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7", "MIIEvQIBADANBgkq"),
            ("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\nabc\"}", "MIIEvQIBADANBgkq"),
            ("DB_PASSWORD=s3cr3t-Passw0rd", "s3cr3t-Passw0rd"),
            ("password: Sup3rS3cret!", "Sup3rS3cret!"),
            // RFC 7617's example: base64 of `Aladdin:open sesame`.
            ("Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "QWxhZGRpbjpvcGVu"),
            ("curl -H 'authorization: basic dXNlcjpodW50ZXIy'", "dXNlcjpodW50ZXIy"),
            ("API_TOKEN=Xk9fQ2wLr7TzPq", "Xk9fQ2wLr7TzPq"),
            // Escaped JSON: the literal ends at the escape, and is still redacted.
            ("\"env\": \"DB_PASSWORD=s3cr3t-Passw0rd\\nNEXT=1\"", "s3cr3t-Passw0rd"),
        ];
        for (text, secret) in cases {
            let mut c = Counts::new();
            let out = redact_text(text, &mut c);
            assert!(!out.contains(secret), "{secret} survived in {out}");
        }
    }

    #[test]
    fn look_alikes_are_left_alone() {
        for text in [
            "password = \"${var.db_password}\"",
            "export API_KEY=$API_KEY",
            "token: <your-token-here>",
            "aws key AKIAIOSFODNN7EXAMPLE from the docs",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "request 550e8400-e29b-41d4-a716-446655440000 failed",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
            "![img](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
            "the token: next one please",
            "secret_santa = true",
            "?author=JaneDoe42&page=2",
            // Found redacted in real sessions (a helper's sweep of public Claude Code and Codex
            // files): prose after "basic", a token count, code, an attribute path.
            "The basic functionality, which the tests cover, works.",
            "### Basic Annotation Types",
            "client.messages.create(max_tokens=200_000, model=m)",
            "const PROMPT_TOKENS = encode(chatSettings.prompt).length\\n\\n  let rest = 1",
            "app = AsyncApp(token=settings.slack_bot_token)",
            "MAX_TOKENS=4096",
            "token = tokens[0]",
        ] {
            let mut c = Counts::new();
            assert_eq!(redact_text(text, &mut c), text, "{c:?}");
        }
    }
}
