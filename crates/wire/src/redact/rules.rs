//! The detection rules: one table, applied in order, each naming the capture group that is the
//! secret and the edges that must not touch the match.

/// Which characters must not touch a match on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// Anything may.
    Any,
    /// No letter or digit (`_`, `-`, punctuation and space may): keeps `risk-…` from reading as
    /// `sk-…` while finding `MY_TOKEN_ghp_…`.
    NotAlnum,
}

/// One detection rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The kind named in the placeholder and the counts.
    pub kind: &'static str,
    /// The pattern (`regex` crate syntax).
    pub pattern: &'static str,
    /// A pattern every match of `pattern` contains (a part of it, with the same case rule):
    /// a text none of the rules' anchors match cannot hold a secret, and is not scanned further.
    /// Keep it a plain part of `pattern` (a literal, its case-insensitive form, a class run it
    /// requires), so that it is obviously implied by it.
    pub anchor: &'static str,
    /// The capture group that is the secret (0: the whole match).
    pub group: usize,
    /// Left edge of the whole match.
    pub left: Edge,
    /// Right edge of the whole match.
    pub right: Edge,
    /// What the captured value must be besides matching.
    pub check: Check,
}

/// What a rule's captured value must be to be redacted, beyond its pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing more.
    None,
    /// A literal that looks like a credential (assignment rules whose key names a secret but
    /// whose value may be prose, a placeholder, a number or code).
    SecretValue,
    /// HTTP Basic credentials: base64 of `user-id:password` (RFC 7617). "basic functionality"
    /// matched the pattern and was redacted in a real rollout.
    BasicCredentials,
}

const fn rule(kind: &'static str, pattern: &'static str, anchor: &'static str) -> Rule {
    Rule { kind, pattern, anchor, group: 0, left: Edge::NotAlnum, right: Edge::Any, check: Check::None }
}

const fn bounded(kind: &'static str, pattern: &'static str, anchor: &'static str) -> Rule {
    Rule { kind, pattern, anchor, group: 0, left: Edge::NotAlnum, right: Edge::NotAlnum, check: Check::None }
}

const fn keyed(kind: &'static str, pattern: &'static str, anchor: &'static str) -> Rule {
    Rule { kind, pattern, anchor, group: 1, left: Edge::Any, right: Edge::Any, check: Check::SecretValue }
}

const fn field(kind: &'static str, pattern: &'static str, anchor: &'static str) -> Rule {
    Rule { kind, pattern, anchor, group: 1, left: Edge::Any, right: Edge::Any, check: Check::None }
}

/// The rule table, applied in order (more specific rules first, so `sk-ant-` is an Anthropic key
/// before the generic `sk-` rule sees it). Private key blocks are handled before the table.
pub const RULES: &[Rule] = &[
    // AI providers.
    rule("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}", r"sk-ant-"),
    rule(
        "openai_key",
        r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}",
        r"sk-(?:proj|svcacct|admin|None)-",
    ),
    rule("openai_key", r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", r"T3BlbkFJ"),
    rule("openai_key", r"sk-[A-Za-z0-9]{32,}", r"sk-"),
    rule("xai_key", r"xai-[A-Za-z0-9]{20,}", r"xai-"),
    rule("groq_key", r"gsk_[A-Za-z0-9]{20,}", r"gsk_"),
    rule("huggingface_token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", r"hf_|api_org_"),
    rule("replicate_token", r"r8_[A-Za-z0-9]{37,}", r"r8_"),
    rule("google_api_key", r"AIza[0-9A-Za-z_-]{30,}", r"AIza"),
    rule("google_oauth_secret", r"GOCSPX-[A-Za-z0-9_-]{28}", r"GOCSPX-"),
    rule("google_oauth_token", r"ya29\.[0-9A-Za-z_-]{20,}", r"ya29\."),
    // Code hosting and package registries.
    Rule { left: Edge::Any, ..rule("github_pat", r"ghp_[A-Za-z0-9]{36,}", r"ghp_") },
    Rule { left: Edge::Any, ..rule("github_oauth", r"gho_[A-Za-z0-9]{36,}", r"gho_") },
    Rule { left: Edge::Any, ..rule("github_user_token", r"ghu_[A-Za-z0-9]{36,}", r"ghu_") },
    Rule { left: Edge::Any, ..rule("github_server_token", r"ghs_[A-Za-z0-9]{36,}", r"ghs_") },
    Rule { left: Edge::Any, ..rule("github_refresh_token", r"ghr_[A-Za-z0-9]{36,}", r"ghr_") },
    Rule {
        left: Edge::Any,
        ..rule("github_fine_grained_pat", r"github_pat_[A-Za-z0-9_]{40,}", r"github_pat_")
    },
    rule("gitlab_token", r"gl(?:pat|dt|ptt|rt|oas)-[A-Za-z0-9_-]{20,}", r"gl(?:pat|dt|ptt|rt|oas)-"),
    rule("npm_token", r"npm_[A-Za-z0-9]{36,}", r"npm_"),
    rule("pypi_token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}", r"pypi-AgEIcHlwaS5vcmc"),
    // Chat and messaging.
    rule("slack_bot_token", r"xoxb-[0-9A-Za-z-]{20,}", r"xoxb-"),
    rule("slack_user_token", r"xox[pesar]-[0-9A-Za-z-]{20,}", r"xox[pesar]-"),
    rule("slack_app_token", r"xapp-[0-9A-Za-z-]{20,}", r"xapp-"),
    rule(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
        r"hooks\.slack\.com/",
    ),
    rule(
        "discord_webhook",
        r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{50,}",
        r"\.com/api/webhooks/",
    ),
    bounded(
        "discord_bot_token",
        r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}",
        r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.",
    ),
    bounded("telegram_bot_token", r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}", r"[0-9]:AA"),
    bounded("twilio_api_key", r"SK[0-9a-f]{32}", r"SK[0-9a-f]"),
    rule("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", r"SG\."),
    bounded("mailgun_key", r"key-[0-9a-f]{32}", r"key-[0-9a-f]"),
    bounded("mailchimp_key", r"[0-9a-f]{32}-us[0-9]{1,2}", r"[0-9a-f]-us[0-9]"),
    // Payments and commerce.
    rule("stripe_secret_key", r"sk_(?:live|test|prod)_[A-Za-z0-9]{20,}", r"sk_(?:live|test|prod)_"),
    rule("stripe_restricted_key", r"rk_(?:live|test|prod)_[A-Za-z0-9]{20,}", r"rk_(?:live|test|prod)_"),
    rule("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", r"shp(?:at|ca|pa|ss)_"),
    rule("square_token", r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}", r"sq0(?:atp|csp)-"),
    // Cloud and infrastructure.
    bounded(
        "aws_access_key",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA",
    ),
    Rule {
        right: Edge::NotAlnum,
        ..field(
            "aws_secret_key",
            r#"(?i)aws.{0,24}?(?:secret|sk|private)[a-z_ -]{0,20}["']?\s*[:=]+\s*["']?([A-Za-z0-9/+]{40})"#,
            r"(?i)aws",
        )
    },
    field("gcp_private_key_id", r#""private_key_id"\s*:\s*"([a-f0-9]{40})""#, r#""private_key_id""#),
    field("gcp_service_account_key", r#""private_key"\s*:\s*"([^"]{40,})""#, r#""private_key""#),
    field("azure_storage_key", r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)", r"(?i)AccountKey="),
    field("azure_sas_signature", r"[?&]sig=([A-Za-z0-9%+/=]{30,})", r"[?&]sig="),
    rule("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", r"do[opr]_v1_"),
    bounded("databricks_token", r"dapi[a-f0-9]{32}(?:-[0-9])?", r"dapi[a-f0-9]"),
    rule("vault_token", r"hv[sb]\.[A-Za-z0-9_-]{24,}", r"hv[sb]\."),
    rule("pulumi_token", r"pul-[a-f0-9]{40}", r"pul-"),
    rule(
        "grafana_token",
        r"(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
        r"glsa_|glc_",
    ),
    rule("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", r"sntry[su]_"),
    rule("flyio_token", r"fo1_[A-Za-z0-9_-]{40,}", r"fo1_"),
    rule(
        "doppler_token",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.",
    ),
    rule("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", r"PMAK-"),
    rule("newrelic_key", r"NR(?:AK|AA|II)-[A-Za-z0-9]{27}", r"NR(?:AK|AA|II)-"),
    rule("linear_key", r"lin_api_[A-Za-z0-9]{40}", r"lin_api_"),
    rule("atlassian_token", r"ATATT3[A-Za-z0-9_=-]{100,}", r"ATATT3"),
    rule("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}", r"pscale_(?:tkn|pw|oauth)_"),
    rule("age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", r"AGE-SECRET-KEY-1"),
    rule("dropbox_token", r"sl\.[A-Za-z0-9_-]{100,}", r"sl\.[A-Za-z0-9_-]{8}"),
    rule("facebook_token", r"EAA[MC][A-Za-z0-9]{100,}", r"EAA[MC]"),
    rule("heroku_key", r"HRKU-[A-Za-z0-9_-]{40,}", r"HRKU-"),
    // Generic shapes.
    rule("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", r"eyJ"),
    Rule {
        check: Check::BasicCredentials,
        ..field("basic_auth", r"(?i)\bbasic\s+([A-Za-z0-9+/]{8,}={0,2})", r"(?i)basic\s")
    },
    field("bearer_token", r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})", r"(?i)bearer\s"),
    keyed(
        "api_key_header",
        r#"(?i)\b(?:x-api-key|api-key|x-auth-token|x-goog-api-key|x-access-token|ocp-apim-subscription-key|private-token)["']?\s*[:=]\s*["']?([^\s"',;]{8,})"#,
        r#"(?i)(?:api-key|auth-token|access-token|subscription-key|private-token)["']?\s*[:=]"#,
    ),
    field("url_password", r"[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:([^\s@]+)@[A-Za-z0-9\[]", r"://"),
    keyed(
        "url_query_secret",
        r"[?&](?:access_token|api_key|apikey|token|secret|password|client_secret)=([^&\s#]{8,})",
        r"[?&](?:access_token|api_key|apikey|token|secret|password|client_secret)=",
    ),
    keyed(
        "json_secret_field",
        r#"(?i)"[a-z0-9_.-]*(?:password|passwd|secret|token|api_?key|apikey|access_?key|private_?key|credentials?)"\s*:\s*"([^"]{4,})""#,
        r#"(?i)(?:password|passwd|secret|token|api_?key|apikey|access_?key|private_?key|credentials?)"\s*:\s*""#,
    ),
    keyed(
        "env_secret",
        r#"(?i)(?:^|[^A-Za-z0-9])(?:export\s+)?[A-Z0-9_.-]*(?:password|passwd|pwd|secret|token|api_?key|apikey|access_?key|private_?key|auth_?key|credentials?)[A-Z0-9_.-]*\s*=\s*["']?([^\s"'`;&|]{4,})"#,
        r"(?i)(?:password|passwd|pwd|secret|token|api_?key|apikey|access_?key|private_?key|auth_?key|credentials?)[A-Z0-9_.-]*\s*=",
    ),
    keyed(
        "yaml_secret",
        r#"(?im)^[ \t-]*["']?[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api_?key|apikey|access_?key|private_?key)[A-Za-z0-9_.-]*["']?[ \t]*:[ \t]*["']?([^\s"'#]{4,})"#,
        r#"(?i)(?:password|passwd|secret|token|api_?key|apikey|access_?key|private_?key)[A-Za-z0-9_.-]*["']?[ \t]*:"#,
    ),
];
