//! Secrets through the real binary: planted in a request body (and the `--title`), carried by
//! `import` → `replay` (journal and archive) → `journal export`; every place is searched for each
//! secret's bytes and the survivors are counted per kind (the goal is none). Look-alikes that
//! are not secrets (placeholders, documentation examples, UUIDs, git SHAs, base64 images) must
//! come through unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::salvage;

use std::collections::BTreeMap;

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const HEX: &str = "0123456789abcdef";
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const DIGITS: &str = "0123456789";
const BECH32: &str = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

struct Gen(u64);
impl Gen {
    fn s(&mut self, n: usize, set: &str) -> String {
        let b = set.as_bytes();
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                b[(self.0 % b.len() as u64) as usize] as char
            })
            .collect()
    }
    fn a(&mut self, n: usize) -> String {
        self.s(n, ALNUM)
    }
}

/// A planted secret: its kind, and (drawn from the generator) the text planted and the secret
/// bytes in it that must not survive.
type Plant = (&'static str, fn(&mut Gen) -> (String, String));

/// A token in a sentence: `prefix` then `body` is the secret.
fn tok(prefix: impl std::fmt::Display, body: impl std::fmt::Display) -> (String, String) {
    let s = format!("{prefix}{body}");
    (format!("use {s} for this"), s)
}

/// A secret in a text: `$S` in `text` stands for it (drawn from the generator before the rest of
/// the text).
fn planted_in(secret: String, text: &str) -> (String, String) {
    (text.replace("$S", &secret), secret)
}

/// Every secret planted, drawn in this order from one generator.
const PLANTS: &[Plant] = &[
    ("anthropic_key", |g| tok("sk-ant-api03-", g.a(40))),
    ("openai_key", |g| tok("sk-proj-", g.a(40))),
    ("openai_key_legacy", |g| planted_in(format!("sk-{}T3BlbkFJ{}", g.a(20), g.a(20)), "OPENAI=$S set")),
    ("xai_key", |g| tok("xai-", g.a(40))),
    ("groq_key", |g| tok("gsk_", g.a(40))),
    ("huggingface_token", |g| tok("hf_", g.a(34))),
    ("replicate_token", |g| tok("r8_", g.a(37))),
    ("google_api_key", |g| tok("AIza", g.a(35))),
    ("google_oauth_secret", |g| tok("GOCSPX-", g.a(28))),
    ("google_oauth_token", |g| tok("ya29.", g.a(60))),
    ("github_pat", |g| tok("ghp_", g.a(36))),
    ("github_oauth", |g| tok("gho_", g.a(36))),
    ("github_user_token", |g| tok("ghu_", g.a(36))),
    ("github_server_token", |g| tok("ghs_", g.a(36))),
    ("github_refresh_token", |g| tok("ghr_", g.a(36))),
    ("github_fine_grained_pat", |g| tok("github_pat_", format!("{}_{}", g.a(22), g.a(59)))),
    ("gitlab_token", |g| tok("glpat-", g.a(20))),
    ("npm_token", |g| tok("npm_", g.a(36))),
    ("pypi_token", |g| tok("pypi-AgEIcHlwaS5vcmc", g.a(60))),
    ("slack_bot_token", |g| tok("xoxb-", format!("{}-{}-{}", g.s(12, DIGITS), g.s(12, DIGITS), g.a(24)))),
    ("slack_user_token", |g| {
        tok("xoxp-", format!("{}-{}-{}-{}", g.s(12, DIGITS), g.s(12, DIGITS), g.s(12, DIGITS), g.s(32, HEX)))
    }),
    ("slack_app_token", |g| {
        tok("xapp-1-A", format!("{}-{}-{}", g.s(10, UPPER), g.s(13, DIGITS), g.s(64, HEX)))
    }),
    ("slack_webhook", |g| {
        planted_in(
            g.a(24),
            &format!("post to https://hooks.slack.com/services/T{}/B{}/$S", g.s(8, UPPER), g.s(10, UPPER)),
        )
    }),
    ("discord_webhook", |g| {
        planted_in(g.a(68), &format!("https://discord.com/api/webhooks/{}/$S", g.s(18, DIGITS)))
    }),
    ("discord_bot_token", |g| tok("M", format!("{}.{}.{}", g.a(23), g.a(6), g.a(27)))),
    ("telegram_bot_token", |g| tok(g.s(10, DIGITS), format!(":AA{}", g.a(33)))),
    ("twilio_api_key", |g| tok("SK", g.s(32, HEX))),
    ("sendgrid_key", |g| tok("SG.", format!("{}.{}", g.a(22), g.a(43)))),
    ("mailgun_key", |g| tok("key-", g.s(32, HEX))),
    ("mailchimp_key", |g| tok(g.s(32, HEX), "-us12")),
    ("stripe_secret_key", |g| tok("sk_live_", g.a(24))),
    ("stripe_restricted_key", |g| tok("rk_live_", g.a(24))),
    ("shopify_token", |g| tok("shpat_", g.s(32, HEX))),
    ("square_token", |g| tok("sq0atp-", g.a(22))),
    ("aws_access_key", |g| tok("AKIA", g.s(16, UPPER))),
    ("aws_secret_key", |g| {
        planted_in(format!("{}/{}+{}", g.a(13), g.a(13), g.a(12)), "[default]\naws_secret_access_key = $S\n")
    }),
    ("gcp_private_key_id", |g| {
        planted_in(g.s(40, HEX), "{\"type\": \"service_account\", \"private_key_id\": \"$S\"}")
    }),
    ("gcp_service_account_key", |g| {
        planted_in(
            g.a(64),
            "{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n$S\\n-----END PRIVATE KEY-----\\n\"}",
        )
    }),
    ("azure_storage_key", |g| {
        planted_in(
            g.a(86),
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=$S==;EndpointSuffix=core.windows.net",
        )
    }),
    ("azure_sas_signature", |g| {
        planted_in(g.a(43), "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=$S%3D")
    }),
    ("digitalocean_token", |g| tok("dop_v1_", g.s(64, HEX))),
    ("databricks_token", |g| tok("dapi", g.s(32, HEX))),
    ("vault_token", |g| tok("hvs.", g.a(90))),
    ("pulumi_token", |g| tok("pul-", g.s(40, HEX))),
    ("grafana_token", |g| tok("glsa_", format!("{}_{}", g.a(32), g.s(8, HEX)))),
    ("sentry_token", |g| tok("sntrys_", g.a(60))),
    ("flyio_token", |g| tok("fo1_", g.a(43))),
    ("doppler_token", |g| tok("dp.pt.", g.a(43))),
    ("postman_key", |g| tok("PMAK-", format!("{}-{}", g.s(24, HEX), g.s(34, HEX)))),
    ("newrelic_key", |g| tok("NRAK-", g.s(27, UPPER))),
    ("linear_key", |g| tok("lin_api_", g.a(40))),
    ("atlassian_token", |g| tok("ATATT3", g.a(180))),
    ("planetscale_token", |g| tok("pscale_tkn_", g.a(43))),
    ("age_secret_key", |g| tok("AGE-SECRET-KEY-1", g.s(58, BECH32))),
    ("dropbox_token", |g| tok("sl.", g.a(130))),
    ("facebook_token", |g| tok("EAAC", g.a(120))),
    ("heroku_key", |g| tok("HRKU-", g.a(60))),
    ("jwt", |g| tok("eyJ", format!("{}.eyJ{}.{}", g.a(20), g.a(30), g.a(43)))),
    // HTTP Basic credentials are base64 of `user-id:password` (RFC 7617).
    ("basic_auth", |g| {
        use base64::Engine;
        let pair = format!("{}:{}", g.a(8), g.a(18));
        planted_in(
            base64::engine::general_purpose::STANDARD.encode(pair),
            "curl -H 'Authorization: Basic $S' https://x",
        )
    }),
    ("bearer_token", |g| planted_in(g.a(40), "Authorization: Bearer $S")),
    ("api_key_header", |g| planted_in(g.a(32), "curl -H \"x-api-key: $S\" https://api")),
    ("url_password_with_slash", |g| {
        planted_in(format!("p4ss/w0rd{}", g.a(8)), "REDIS_URL=redis://:$S@cache.internal:6379/0")
    }),
    ("url_password", |g| planted_in(g.a(16), "connect postgres://app:$S@db:5432/prod now")),
    ("url_query_secret", |g| {
        planted_in(g.a(32), "GET https://api.example.com/v1/items?access_token=$S&page=2")
    }),
    ("json_secret_field", |g| {
        planted_in(format!("{}!{}", g.a(10), g.a(4)), "{\"user\": \"admin\", \"password\": \"$S\"}")
    }),
    ("env_secret_key", |g| planted_in(g.a(40), "# .env\nSECRET_KEY=$S\nDEBUG=false")),
    ("env_password", |g| planted_in(format!("{}-{}", g.a(12), g.s(4, DIGITS)), "export DB_PASSWORD=$S")),
    ("env_api_key", |g| planted_in(g.a(32), "API_KEY=\"$S\"")),
    ("yaml_secret", |g| planted_in(g.a(32), "service:\n  name: billing\n  api_key: $S\n")),
    ("private_key", |g| {
        planted_in(
            g.a(64),
            &format!("-----BEGIN RSA PRIVATE KEY-----\n$S\n{}\n-----END RSA PRIVATE KEY-----", g.a(64)),
        )
    }),
    ("private_key_without_end", |g| {
        planted_in(g.a(64), &format!("-----BEGIN OPENSSH PRIVATE KEY-----\n$S\n{}", g.a(40)))
    }),
    ("private_key_after_a_mention", |g| {
        planted_in(g.a(64), "grep for -----BEGIN in the repo; found -----BEGIN EC PRIVATE KEY-----\n$S\n-----END EC PRIVATE KEY-----")
    }),
    ("github_pat_after_underscore", |g| planted_in(format!("ghp_{}", g.a(36)), "MY_TOKEN_$S")),
];

/// (kind, text planted, the secret bytes that must not survive).
fn planted() -> Vec<(&'static str, String, String)> {
    let mut g = Gen(0x1234_5678_9abc_def1);
    PLANTS
        .iter()
        .map(|(kind, plant)| {
            let (text, secret) = plant(&mut g);
            (*kind, text, secret)
        })
        .collect()
}

fn look_alikes() -> Vec<String> {
    [
        "password = \"${var.db_password}\"",
        "export API_KEY=$API_KEY",
        "token: <your-token-here>",
        "aws key AKIAIOSFODNN7EXAMPLE from the AWS docs",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "request 550e8400-e29b-41d4-a716-446655440000 failed",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
        "image sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "![chart](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
        "see https://example.com/a:b@c for the format",
        "the password is required and the token expires hourly",
        "a risk-assessment-document-template-v2 and task-runner_name",
        "secret_santa = true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

#[test]
fn planted_secrets_do_not_survive_import_journal_archive_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secrets = planted();
    let kinds: std::collections::BTreeSet<&str> = secrets.iter().map(|s| s.0).collect();
    assert!(secrets.len() >= 57 && kinds.len() >= 55, "{} secrets of {} kinds", secrets.len(), kinds.len());
    let looks = look_alikes();
    let mut messages = vec![serde_json::json!({"role": "system", "content": "You are a coding agent."})];
    for (i, (_, text, _)) in secrets.iter().enumerate() {
        messages.push(serde_json::json!({"role": "user", "content": format!("note {i}:\n{text}\nthanks")}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!("noted {i}")}));
    }
    for l in &looks {
        messages.push(serde_json::json!({"role": "user", "content": l}));
        messages.push(serde_json::json!({"role": "assistant", "content": "ok"}));
    }
    messages.push(serde_json::json!({"role": "user", "content": "now fix the build"}));
    let body = serde_json::json!({"model": "gpt-4o", "messages": messages});
    std::fs::write(d.join("body.json"), serde_json::to_vec(&body).unwrap()).unwrap();
    let title_secret = secrets.iter().find(|s| s.0 == "github_pat").unwrap().2.clone();
    let o = salvage(
        d,
        &[
            "import",
            "--from",
            "openai",
            "body.json",
            "--status",
            "413",
            "--gateway-max-bytes",
            "6000",
            "--gateway-rejects-with",
            "http_413",
            "--title",
            &format!("deploy with {title_secret}"),
            "-o",
            "cap.json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = salvage(d, &["replay", "cap.json", "--db", "s.db"]);
    assert!(o.status.code() != Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let list: serde_json::Value =
        serde_json::from_slice(&salvage(d, &["journal", "sessions", "--json", "--db", "s.db"]).stdout)
            .unwrap();
    let id = list["sessions"][0]["id"].as_str().unwrap().to_string();
    let o = salvage(d, &["journal", "export", &id, "-o", "export.json", "--db", "s.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o =
        salvage(d, &["journal", "export", &id, "--format", "jsonl", "-o", "export.jsonl", "--db", "s.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every archived original, as recall returns it.
    let conn = rusqlite::Connection::open(d.join("s.db")).unwrap();
    let keys: Vec<String> = conn
        .prepare("SELECT short FROM ccr_blobs")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    drop(conn);
    let mut archived = Vec::new();
    for k in &keys {
        archived.extend(salvage(d, &["recall", k, "--db", "s.db"]).stdout);
    }
    let mut places: Vec<(&str, Vec<u8>)> = vec![
        ("import output", std::fs::read(d.join("cap.json")).unwrap()),
        ("export capture", std::fs::read(d.join("export.json")).unwrap()),
        ("export jsonl", std::fs::read(d.join("export.jsonl")).unwrap()),
        ("archive (recalled)", archived),
    ];
    let mut db = std::fs::read(d.join("s.db")).unwrap();
    db.extend(std::fs::read(d.join("s.db-wal")).unwrap_or_default());
    places.push(("database file", db));
    let mut survivors: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (kind, _, secret) in &secrets {
        for (place, bytes) in &places {
            if count(bytes, secret.as_bytes()) > 0 {
                survivors.entry(kind).or_default().push(place);
            }
        }
    }
    let import = String::from_utf8_lossy(&places[0].1).to_string();
    let wrongly: Vec<&String> = looks
        .iter()
        .filter(|l| {
            let as_json = serde_json::to_string(l.as_str()).unwrap();
            !import.contains(&as_json[1..as_json.len() - 1])
        })
        .collect();
    eprintln!(
        "{} secrets of {} kinds planted; {} kind(s) survive: {survivors:?}; {} of {} look-alikes wrongly redacted: {wrongly:?}",
        secrets.len(),
        kinds.len(),
        survivors.len(),
        wrongly.len(),
        looks.len()
    );
    assert!(survivors.is_empty(), "secrets survived: {survivors:?}");
    assert!(wrongly.is_empty(), "look-alikes redacted: {wrongly:?}");
    assert!(!import.contains(&title_secret) && import.contains("deploy with [REDACTED:github_pat:"));
}

/// A 413 body holding secrets, imported with redaction on and no `--gateway-max-bytes`: the
/// modeled cap is taken from the body the capture keeps (redacted, smaller), so the replay's
/// attempt 0 is rejected as the real one was (adversarial review, finding 05: the cap was the
/// unredacted size − 1 and the simulation accepted attempt 0 while fidelity said ok).
#[test]
fn the_modeled_cap_of_a_redacted_body_still_rejects_attempt_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Gen(7);
    let env_paste: String = (0..20).map(|i| format!("TOKEN_{i}=ghp_{}\n", g.a(36))).collect();
    let messages: Vec<serde_json::Value> = (0..8)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i}: {}", "context ".repeat(400))})
        })
        .chain([serde_json::json!({"role": "user", "content": format!("here is my .env:\n{env_paste}fix the build")})])
        .collect();
    let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages});
    std::fs::write(dir.path().join("body.json"), serde_json::to_vec(&body).unwrap()).unwrap();
    let out = salvage(
        dir.path(),
        &["import", "body.json", "--status", "413", "--message", "413 Payload Too Large", "-o", "cap.json"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cap: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("cap.json")).unwrap()).unwrap();
    let bytes = cap["request"]["bytes"].as_u64().unwrap();
    let max = cap["upstream"]["gateway"]["max_body_bytes"].as_u64().unwrap();
    let sent = std::fs::metadata(dir.path().join("body.json")).unwrap().len();
    assert!(bytes < sent, "redaction shortened the body ({bytes} vs {sent})");
    assert_eq!(max, bytes - 1, "the cap is one byte under the body the capture keeps");
    let out = salvage(dir.path(), &["replay", "cap.json", "--no-journal", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fidelity = report["captures"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fidelity")
        .cloned()
        .unwrap();
    assert_eq!(fidelity["ok"], true, "{fidelity}");
    let detail = fidelity["detail"].as_str().unwrap();
    assert!(!detail.contains("replayed as recorded"), "attempt 0 was rejected by the simulation: {detail}");
}
