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

/// (kind, text planted, the secret bytes that must not survive).
fn planted() -> Vec<(&'static str, String, String)> {
    let mut g = Gen(0x1234_5678_9abc_def1);
    let mut v: Vec<(&'static str, String, String)> = Vec::new();
    let mut add = |kind: &'static str, text: String, secret: String| v.push((kind, text, secret));
    macro_rules! tok {
        ($kind:expr, $prefix:expr, $body:expr) => {{
            let s = format!("{}{}", $prefix, $body);
            add($kind, format!("use {s} for this"), s);
        }};
    }
    tok!("anthropic_key", "sk-ant-api03-", g.a(40));
    tok!("openai_key", "sk-proj-", g.a(40));
    let legacy = format!("sk-{}T3BlbkFJ{}", g.a(20), g.a(20));
    add("openai_key_legacy", format!("OPENAI={legacy} set"), legacy);
    tok!("xai_key", "xai-", g.a(40));
    tok!("groq_key", "gsk_", g.a(40));
    tok!("huggingface_token", "hf_", g.a(34));
    tok!("replicate_token", "r8_", g.a(37));
    tok!("google_api_key", "AIza", g.a(35));
    tok!("google_oauth_secret", "GOCSPX-", g.a(28));
    tok!("google_oauth_token", "ya29.", g.a(60));
    tok!("github_pat", "ghp_", g.a(36));
    tok!("github_oauth", "gho_", g.a(36));
    tok!("github_user_token", "ghu_", g.a(36));
    tok!("github_server_token", "ghs_", g.a(36));
    tok!("github_refresh_token", "ghr_", g.a(36));
    tok!("github_fine_grained_pat", "github_pat_", format!("{}_{}", g.a(22), g.a(59)));
    tok!("gitlab_token", "glpat-", g.a(20));
    tok!("npm_token", "npm_", g.a(36));
    tok!("pypi_token", "pypi-AgEIcHlwaS5vcmc", g.a(60));
    tok!("slack_bot_token", "xoxb-", format!("{}-{}-{}", g.s(12, DIGITS), g.s(12, DIGITS), g.a(24)));
    tok!(
        "slack_user_token",
        "xoxp-",
        format!("{}-{}-{}-{}", g.s(12, DIGITS), g.s(12, DIGITS), g.s(12, DIGITS), g.s(32, HEX))
    );
    tok!("slack_app_token", "xapp-1-A", format!("{}-{}-{}", g.s(10, UPPER), g.s(13, DIGITS), g.s(64, HEX)));
    let hook = g.a(24);
    add(
        "slack_webhook",
        format!("post to https://hooks.slack.com/services/T{}/B{}/{hook}", g.s(8, UPPER), g.s(10, UPPER)),
        hook,
    );
    let dh = g.a(68);
    add("discord_webhook", format!("https://discord.com/api/webhooks/{}/{dh}", g.s(18, DIGITS)), dh);
    tok!("discord_bot_token", "M", format!("{}.{}.{}", g.a(23), g.a(6), g.a(27)));
    tok!("telegram_bot_token", g.s(10, DIGITS), format!(":AA{}", g.a(33)));
    tok!("twilio_api_key", "SK", g.s(32, HEX));
    tok!("sendgrid_key", "SG.", format!("{}.{}", g.a(22), g.a(43)));
    tok!("mailgun_key", "key-", g.s(32, HEX));
    tok!("mailchimp_key", g.s(32, HEX), "-us12");
    tok!("stripe_secret_key", "sk_live_", g.a(24));
    tok!("stripe_restricted_key", "rk_live_", g.a(24));
    tok!("shopify_token", "shpat_", g.s(32, HEX));
    tok!("square_token", "sq0atp-", g.a(22));
    tok!("aws_access_key", "AKIA", g.s(16, UPPER));
    let aws_secret = format!("{}/{}+{}", g.a(13), g.a(13), g.a(12));
    add("aws_secret_key", format!("[default]\naws_secret_access_key = {aws_secret}\n"), aws_secret);
    let kid = g.s(40, HEX);
    add(
        "gcp_private_key_id",
        format!("{{\"type\": \"service_account\", \"private_key_id\": \"{kid}\"}}"),
        kid,
    );
    let sa = g.a(64);
    add(
        "gcp_service_account_key",
        format!("{{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{sa}\\n-----END PRIVATE KEY-----\\n\"}}"),
        sa,
    );
    let az = g.a(86);
    add("azure_storage_key", format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={az}==;EndpointSuffix=core.windows.net"), az);
    let sig = g.a(43);
    add(
        "azure_sas_signature",
        format!("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig={sig}%3D"),
        sig,
    );
    tok!("digitalocean_token", "dop_v1_", g.s(64, HEX));
    tok!("databricks_token", "dapi", g.s(32, HEX));
    tok!("vault_token", "hvs.", g.a(90));
    tok!("pulumi_token", "pul-", g.s(40, HEX));
    tok!("grafana_token", "glsa_", format!("{}_{}", g.a(32), g.s(8, HEX)));
    tok!("sentry_token", "sntrys_", g.a(60));
    tok!("flyio_token", "fo1_", g.a(43));
    tok!("doppler_token", "dp.pt.", g.a(43));
    tok!("postman_key", "PMAK-", format!("{}-{}", g.s(24, HEX), g.s(34, HEX)));
    tok!("newrelic_key", "NRAK-", g.s(27, UPPER));
    tok!("linear_key", "lin_api_", g.a(40));
    tok!("atlassian_token", "ATATT3", g.a(180));
    tok!("planetscale_token", "pscale_tkn_", g.a(43));
    tok!("age_secret_key", "AGE-SECRET-KEY-1", g.s(58, BECH32));
    tok!("dropbox_token", "sl.", g.a(130));
    tok!("facebook_token", "EAAC", g.a(120));
    tok!("heroku_key", "HRKU-", g.a(60));
    tok!("jwt", "eyJ", format!("{}.eyJ{}.{}", g.a(20), g.a(30), g.a(43)));
    let basic = format!("{}==", g.a(26));
    add("basic_auth", format!("curl -H 'Authorization: Basic {basic}' https://x"), basic);
    let bearer = g.a(40);
    add("bearer_token", format!("Authorization: Bearer {bearer}"), bearer);
    let xkey = g.a(32);
    add("api_key_header", format!("curl -H \"x-api-key: {xkey}\" https://api"), xkey);
    let pw = format!("p4ss/w0rd{}", g.a(8));
    add("url_password_with_slash", format!("REDIS_URL=redis://:{pw}@cache.internal:6379/0"), pw);
    let pw2 = g.a(16);
    add("url_password", format!("connect postgres://app:{pw2}@db:5432/prod now"), pw2);
    let q = g.a(32);
    add("url_query_secret", format!("GET https://api.example.com/v1/items?access_token={q}&page=2"), q);
    let jp = format!("{}!{}", g.a(10), g.a(4));
    add("json_secret_field", format!("{{\"user\": \"admin\", \"password\": \"{jp}\"}}"), jp);
    let env = g.a(40);
    add("env_secret_key", format!("# .env\nSECRET_KEY={env}\nDEBUG=false"), env);
    let envpw = format!("{}-{}", g.a(12), g.s(4, DIGITS));
    add("env_password", format!("export DB_PASSWORD={envpw}"), envpw);
    let envapi = g.a(32);
    add("env_api_key", format!("API_KEY=\"{envapi}\""), envapi);
    let yaml = g.a(32);
    add("yaml_secret", format!("service:\n  name: billing\n  api_key: {yaml}\n"), yaml);
    let rsa = g.a(64);
    add(
        "private_key",
        format!("-----BEGIN RSA PRIVATE KEY-----\n{rsa}\n{}\n-----END RSA PRIVATE KEY-----", g.a(64)),
        rsa,
    );
    let noend = g.a(64);
    add(
        "private_key_without_end",
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{noend}\n{}", g.a(40)),
        noend,
    );
    let after = g.a(64);
    add(
        "private_key_after_a_mention",
        format!("grep for -----BEGIN in the repo; found -----BEGIN EC PRIVATE KEY-----\n{after}\n-----END EC PRIVATE KEY-----"),
        after,
    );
    let underscore = format!("ghp_{}", g.a(36));
    add("github_pat_after_underscore", format!("MY_TOKEN_{underscore}"), underscore);
    v
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
