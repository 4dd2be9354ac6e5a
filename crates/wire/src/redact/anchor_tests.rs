//! The anchors' prefilter ([`super::Rule::anchor`]) against the rules it stands for: every match
//! of a rule holds its anchor, and redaction with the prefilter equals redaction without it.

use super::*;

/// Texts of every rule (each rule must match at least one), several where an anchor could be
/// too narrow: Unicode case folding (`K` is U+212A KELVIN SIGN, `ſ` U+017F LONG S, both matched
/// by the `(?i)` rules), a keyword split by a separator, a secret at a text's start and end.
const SAMPLES: &[&str] = &[
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx",
    "key sk-proj-1234567890abcdefghijABCD,",
    "sk-abcdefghij0123456789T3BlbkFJabcdefghij0123456789",
    "sk-abcdefghij0123456789abcdefghij0123",
    "xai-abcdefghij0123456789abcd gsk_abcdefghij0123456789abcd",
    "hf_abcdefghij0123456789abcdefghij01 api_org_abcdefghij0123456789abcdefghij01",
    "r8_abcdefghij0123456789abcdefghij0123456 AIzaSyA1234567890abcdefghijklmnopqrstu",
    "GOCSPX-abcdefghij0123456789abcdefgh ya29.abcdefghij0123456789abcd",
    "ghp_abcdefghij0123456789abcdefghij012345 gho_abcdefghij0123456789abcdefghij012345",
    "ghu_abcdefghij0123456789abcdefghij012345 ghs_abcdefghij0123456789abcdefghij012345",
    "MY_TOKEN_ghr_abcdefghij0123456789abcdefghij012345",
    "github_pat_abcdefghij0123456789_abcdefghij0123456789abcdefghij",
    "glpat-abcdefghij0123456789 npm_abcdefghij0123456789abcdefghij012345",
    "pypi-AgEIcHlwaS5vcmcabcdefghij0123456789abcdefghij0123456789",
    "xoxb-123456789012-abcdefghij0123 xoxp-123456789012-abcdefghij0123",
    "xapp-1-A0123456789-abcdefghij0123",
    "https://hooks.slack.com/services/T0000/B0000/abcdefghij0123456789abcd",
    "https://discord.com/api/webhooks/123456789012345678/abcdefghij0123456789abcdefghij0123456789abcdefghij0123",
    "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "OTk4NjIyNDgzNDcxOTI1MjQ4MT.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs-abcdefghij",
    "1234567890:AAabcdefghij0123456789abcdefghij012",
    "SK0123456789abcdef0123456789abcdef",
    "SG.abcdefghij0123456789ab.abcdefghij0123456789abcdefghij0123456789abc",
    "key-0123456789abcdef0123456789abcdef 0123456789abcdef0123456789abcdef-us12",
    "sk_live_abcdefghij0123456789 rk_test_abcdefghij0123456789",
    "shpat_0123456789abcdef0123456789abcdef sq0atp-abcdefghij0123456789ab",
    "AKIAZ3MDNB2QYX7TKPLE",
    "[default]\naws_secret_access_key = abcdefghij0123456789abcdefghij0123456789\n",
    "aWſ_secret_access_key = abcdefghij0123456789abcdefghij0123456789",
    r#"{"type": "service_account", "private_key_id": "0123456789abcdef0123456789abcdef01234567"}"#,
    r#"{"private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCabcdefghij0123456789"}"#,
    "DefaultEndpointsProtocol=https;AccountKey=abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdef==;",
    "Account\u{212A}ey=abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdef==",
    "https://acct.blob.core.windows.net/c/b?sv=2022&sig=abcdefghij0123456789abcdefghij0123%3D",
    "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "dapi0123456789abcdef0123456789abcdef hvs.abcdefghij0123456789abcdef",
    "pul-0123456789abcdef0123456789abcdef01234567",
    "glsa_abcdefghij0123456789abcdefghij01_0123abcd glc_abcdefghij0123456789abcdefghij012345==",
    "sntrys_abcdefghij0123456789abcdefghij0123456789abcdefghij",
    "fo1_abcdefghij0123456789abcdefghij0123456789abc dp.pt.abcdefghij0123456789abcdefghij0123456789abc",
    "PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01",
    "NRAK-ABCDEFGHIJ0123456789ABCDEFG lin_api_abcdefghij0123456789abcdefghij0123456789",
    "ATATT3abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789",
    "pscale_tkn_abcdefghij0123456789abcdefghij0123456789",
    "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3",
    "sl.abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdef",
    "EAACabcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdef",
    "HRKU-abcdefghij0123456789abcdefghij0123456789abcdef",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghij0123",
    "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA==' https://x",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "Authorization: BEARER abcdefghij0123456789",
    "curl -H \"x-api-key: abcdefghij0123456789\" https://api",
    "X-Access-To\u{212A}en: abcdefghij0123456789",
    "db postgres://admin:hunter2secret@db.internal:5432/app",
    "GET https://api.example.com/v1/items?access_token=abcdefghij0123&page=2",
    r#"{"user": "admin", "password": "Sup3rS3cret!"}"#,
    r#"{"db.Api_Key" : "abcdefghij0123"}"#,
    "# .env\nSECRET_KEY=abcdefghij0123456789\nDEBUG=false",
    "export DB_PASSWORD=s3cr3t-Passw0rd",
    "PAſſWORD=s3cr3t-Passw0rd",
    "TO\u{212A}EN=abcdefghij0123",
    "service:\n  name: billing\n  api_key: abcdefghij0123456789\n",
    "  - \"private_key\": abcdefghij0123456789",
];

/// The texts the properties are checked on: the samples, each inside prose and run together.
fn corpus() -> Vec<String> {
    let mut all: Vec<String> = SAMPLES.iter().map(|s| s.to_string()).collect();
    for s in SAMPLES {
        all.push(format!("see {s}"));
        all.push(format!("{s} was pasted here."));
        all.push(format!("a\n{s}\nb"));
    }
    all.push(SAMPLES.join(" "));
    all.push(SAMPLES.concat());
    all
}

fn compiled() -> &'static Compiled {
    COMPILED.as_ref().unwrap()
}

#[test]
fn every_match_of_a_rule_holds_its_anchor() {
    for rule in RULES {
        let re = Regex::new(rule.pattern).unwrap();
        let anchor = Regex::new(rule.anchor).unwrap();
        let mut matched = 0;
        for text in corpus() {
            for m in re.find_iter(&text) {
                matched += 1;
                assert!(
                    anchor.is_match(m.as_str()),
                    "{}: {:?} has no {:?}",
                    rule.kind,
                    m.as_str(),
                    rule.anchor
                );
            }
        }
        assert!(matched > 0, "{}: no sample matches {}", rule.kind, rule.pattern);
    }
}

/// Redaction as it was before the anchors: private key blocks, then the set alone.
fn without_anchors(c: &Compiled, text: &str, counts: &mut Counts) -> Option<String> {
    if text.len() < 8 {
        return None;
    }
    let mut out = redact_pem(c, text, counts);
    if !c.set.is_match(out.as_deref().unwrap_or(text)) {
        return out;
    }
    let hits: Vec<usize> = c.set.matches(out.as_deref().unwrap_or(text)).into_iter().collect();
    for i in hits {
        let (rule, re) = &c.rules[i];
        if let Some(next) = apply(rule, re, out.as_deref().unwrap_or(text), counts) {
            out = Some(next);
        }
    }
    out
}

#[test]
fn the_anchors_skip_only_texts_no_rule_matches() {
    let c = compiled();
    let mut texts = corpus();
    texts.extend(
        [
            "the tokens returns",
            "task-runner risk-assessment",
            "a.b.c.d",
            "password",
            "M.abcdef.",
            "plain text",
        ]
        .map(String::from),
    );
    for text in &texts {
        assert!(c.anchors.is_match(text) || !c.set.is_match(text), "{text:?}");
        let (mut with, mut without) = (Counts::new(), Counts::new());
        assert_eq!(redact_plain(c, text, &mut with), without_anchors(c, text, &mut without), "{text:?}");
        assert_eq!(with, without, "{text:?}");
        assert!(!SAMPLES.contains(&text.as_str()) || !with.is_empty(), "nothing found in {text:?}");
    }
}

#[test]
fn secrets_where_a_naive_prefilter_would_miss_them() {
    // In a JSON body: split by an escape (the scan sees the decoded string), a whole string, at
    // a string's end, after a key naming it, deep in a tool call's nested arguments, spelled
    // with a Kelvin sign.
    let body = r#"{
        "a": "\u0073k-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx",
        "b": "ghp_abcdefghij0123456789abcdefghij012345",
        "c": "the key is AKIAZ3MDNB2QYX7TKPLE",
        "d": "{\"db_password\": \"hunter2-Secret\"}",
        "e": {"args": [{"deep": [{"env": "API_\u212AEY=abcdefghij0123456789"}]}]}
    }"#;
    let mut v: Value = serde_json::from_str(body).unwrap();
    let mut counts = Counts::new();
    redact_value(&mut v, &mut counts);
    let out = v.to_string();
    for secret in [
        "AbCdEfGhIjKlMnOp",
        "abcdefghij0123456789abcdefghij012345",
        "AKIAZ3MDNB2QYX7TKPLE",
        "hunter2-Secret",
        "abcdefghij0123456789",
    ] {
        assert!(!out.contains(secret), "{secret} survived in {out}");
    }
    assert_eq!(counts.values().sum::<u64>(), 5, "{counts:?}");
}

#[test]
fn secrets_in_object_keys_are_redacted_and_no_value_is_lost() {
    // An environment dump keyed by tokens, beside ordinary keys that must stay as they are.
    let body = r#"{
        "role": "tool",
        "ghp_abcdefghij0123456789abcdefghij012345": "first",
        "tokens": {"AKIAZ3MDNB2QYX7TKPLE": 1, "AKIAZ3MDNB2QYX7TKPLF": 2, "region": "eu"},
        "ghp_abcdefghij0123456789abcdefghij099999": "second",
        "password_hint": "ask the admin"
    }"#;
    let mut v: Value = serde_json::from_str(body).unwrap();
    let mut counts = Counts::new();
    redact_value(&mut v, &mut counts);
    let out = v.to_string();
    for secret in ["ghp_abcdefghij", "AKIAZ3MDNB2QYX7TKPL"] {
        assert!(!out.contains(secret), "{secret} survived in {out}");
    }
    assert_eq!(counts.values().sum::<u64>(), 4, "{counts:?}");
    let top = v.as_object().unwrap();
    // Order kept, every value kept (two keys redacting to one text both stay), others untouched.
    let keys: Vec<&str> = top.keys().map(String::as_str).collect();
    assert_eq!(keys[0], "role");
    assert_eq!(keys[4], "password_hint");
    assert_eq!(top.len(), 5);
    let values: Vec<&Value> = top.values().collect();
    assert_eq!((values[1], values[3]), (&Value::from("first"), &Value::from("second")));
    assert_ne!(keys[1], keys[3]);
    let tokens = top["tokens"].as_object().unwrap();
    assert_eq!(tokens.len(), 3);
    assert_eq!(
        tokens.values().cloned().collect::<Vec<_>>(),
        vec![Value::from(1), Value::from(2), Value::from("eu")]
    );
    assert_eq!(tokens.keys().next_back().map(String::as_str), Some("region"));
}
