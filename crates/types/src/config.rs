//! Configuration: every `CHATCLI_*` setting of behaviour spec section 10, built from an
//! environment map handed in by the caller. Nothing in the libraries reads the process environment.

use crate::bytesize::ByteSize;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The environment (or a capture's `settings`).
    Env,
    /// The built-in default.
    Default,
}

/// The context engine route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextEngine {
    /// The client's own pipeline.
    Builtin,
    /// Provider-side context editing (Anthropic `clear_tool_uses`).
    Provider,
    /// An MCP server's `context_compact` tool.
    Mcp(String),
}

/// What one setting resolved to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingReport {
    /// The effective value, parsed (null when unset).
    pub value: serde_json::Value,
    /// The text as given, if any.
    pub raw: Option<String>,
    /// Where the value came from.
    pub source: Source,
    /// Why the given text was refused (the default then stands).
    pub error: Option<String>,
}

/// Every setting, with its default.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `CHATCLI_CONTEXT_WINDOW`: global context window override in tokens.
    pub context_window: Option<u64>,
    /// `CHATCLI_MAX_RECOVERY_ATTEMPTS` (3).
    pub max_recovery_attempts: u32,
    /// `CHATCLI_MAX_TOKEN_ESCALATIONS` (2).
    pub max_token_escalations: u32,
    /// `CHATCLI_EMERGENCY_KEEP_MESSAGES` (10).
    pub emergency_keep_messages: usize,
    /// `CHATCLI_MAX_PAYLOAD`: the body cap in bytes.
    pub max_payload: Option<u64>,
    /// `CHATCLI_MICROCOMPACT_TRUNCATE_TURNS` (2).
    pub microcompact_truncate_turns: u32,
    /// `CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS` (4).
    pub microcompact_summarize_turns: u32,
    /// `CHATCLI_COMPACT_MODEL`: `PROVIDER:model` for level-2 summaries.
    pub compact_model: Option<(String, String)>,
    /// `CHATCLI_CONTEXT_ENGINE` (builtin).
    pub context_engine: ContextEngine,
    /// `CHATCLI_TOOL_RESULT_MAX_CHARS` (20 000).
    pub tool_result_max_chars: usize,
    /// `CHATCLI_TOOL_RESULT_BUDGET_CHARS` (200 000).
    pub tool_result_budget_chars: usize,
    /// `CHATCLI_SKILL_AGE_TURNS` (6).
    pub skill_age_turns: u32,
    /// Per-setting resolution, keyed by variable name.
    pub report: BTreeMap<String, SettingReport>,
}

/// The names of every setting, in the spec's order.
pub const SETTING_NAMES: &[&str] = &[
    "CHATCLI_CONTEXT_WINDOW",
    "CHATCLI_MAX_RECOVERY_ATTEMPTS",
    "CHATCLI_MAX_TOKEN_ESCALATIONS",
    "CHATCLI_EMERGENCY_KEEP_MESSAGES",
    "CHATCLI_MAX_PAYLOAD",
    "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS",
    "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS",
    "CHATCLI_COMPACT_MODEL",
    "CHATCLI_CONTEXT_ENGINE",
    "CHATCLI_TOOL_RESULT_MAX_CHARS",
    "CHATCLI_TOOL_RESULT_BUDGET_CHARS",
    "CHATCLI_SKILL_AGE_TURNS",
];

impl Default for Config {
    fn default() -> Self {
        Config::from_env(&BTreeMap::new())
    }
}

struct Builder<'a> {
    env: &'a BTreeMap<String, String>,
    report: BTreeMap<String, SettingReport>,
}

impl Builder<'_> {
    fn raw(&self, name: &str) -> Option<String> {
        self.env.get(name).filter(|v| !v.trim().is_empty()).cloned()
    }

    fn record(&mut self, name: &str, value: serde_json::Value, source: Source, error: Option<String>) {
        let raw = self.env.get(name).cloned();
        self.report.insert(name.to_string(), SettingReport { value, raw, source, error });
    }

    /// `CHATCLI_MAX_PAYLOAD`: a size, else no cap.
    fn max_payload(&mut self) -> Option<u64> {
        match self.raw("CHATCLI_MAX_PAYLOAD") {
            None => {
                self.record("CHATCLI_MAX_PAYLOAD", serde_json::Value::Null, Source::Default, None);
                None
            }
            Some(text) => match ByteSize::parse(&text) {
                Some(ByteSize(n)) => {
                    self.record("CHATCLI_MAX_PAYLOAD", serde_json::json!(n), Source::Env, None);
                    Some(n)
                }
                None => {
                    let why = format!(
                        "{text:?} is not a positive size such as 5MB, 512KB, 2.5MB, 1G or 1024B; no cap is set"
                    );
                    self.record("CHATCLI_MAX_PAYLOAD", serde_json::Value::Null, Source::Default, Some(why));
                    None
                }
            },
        }
    }

    /// `CHATCLI_COMPACT_MODEL`: `PROVIDER:model`, else the session model.
    fn compact_model(&mut self) -> Option<(String, String)> {
        match self.raw("CHATCLI_COMPACT_MODEL") {
            None => {
                self.record("CHATCLI_COMPACT_MODEL", serde_json::Value::Null, Source::Default, None);
                None
            }
            Some(text) => match text.trim().split_once(':') {
                Some((p, m)) if !p.is_empty() && !m.is_empty() => {
                    self.record(
                        "CHATCLI_COMPACT_MODEL",
                        serde_json::json!({"provider": p, "model": m}),
                        Source::Env,
                        None,
                    );
                    Some((p.to_string(), m.to_string()))
                }
                _ => {
                    let why = format!("{text:?} must be PROVIDER:model (e.g. anthropic:claude-haiku-4); using the session model");
                    self.record("CHATCLI_COMPACT_MODEL", serde_json::Value::Null, Source::Default, Some(why));
                    None
                }
            },
        }
    }

    /// `CHATCLI_CONTEXT_ENGINE`: builtin, provider or `mcp:<server>`, else builtin.
    fn context_engine(&mut self) -> ContextEngine {
        match self.raw("CHATCLI_CONTEXT_ENGINE") {
            None => {
                self.record("CHATCLI_CONTEXT_ENGINE", serde_json::json!("builtin"), Source::Default, None);
                ContextEngine::Builtin
            }
            Some(text) => {
                let t = text.trim();
                let parsed = match t {
                    "builtin" => Some(ContextEngine::Builtin),
                    "provider" => Some(ContextEngine::Provider),
                    _ => t
                        .strip_prefix("mcp:")
                        .filter(|s| !s.trim().is_empty())
                        .map(|s| ContextEngine::Mcp(s.trim().to_string())),
                };
                match parsed {
                    Some(e) => {
                        self.record("CHATCLI_CONTEXT_ENGINE", serde_json::json!(t), Source::Env, None);
                        e
                    }
                    None => {
                        let why =
                            format!("{text:?} must be builtin, provider or mcp:<server>; using builtin");
                        self.record(
                            "CHATCLI_CONTEXT_ENGINE",
                            serde_json::json!("builtin"),
                            Source::Default,
                            Some(why),
                        );
                        ContextEngine::Builtin
                    }
                }
            }
        }
    }

    /// A positive integer setting; anything else is reported and the default stands.
    fn positive(&mut self, name: &str, default: Option<u64>) -> Option<u64> {
        match self.raw(name) {
            None => {
                self.record(name, serde_json::json!(default), Source::Default, None);
                default
            }
            Some(text) => match text.trim().parse::<i128>() {
                Ok(n) if n > 0 && n <= i128::from(u32::MAX) => {
                    let n = u64::try_from(n).unwrap_or(u64::MAX);
                    self.record(name, serde_json::json!(n), Source::Env, None);
                    Some(n)
                }
                Ok(_) => {
                    let why =
                        format!("{text:?} must be a whole number from 1 to {}; using the default", u32::MAX);
                    self.record(name, serde_json::json!(default), Source::Default, Some(why));
                    default
                }
                Err(_) => {
                    let why = format!("{text:?} is not a whole number; using the default");
                    self.record(name, serde_json::json!(default), Source::Default, Some(why));
                    default
                }
            },
        }
    }
}

fn narrow<T: TryFrom<u64>>(v: Option<u64>, default: T) -> T {
    v.and_then(|v| T::try_from(v).ok()).unwrap_or(default)
}

impl Config {
    /// Builds the configuration from an environment map (the CLI passes the process environment;
    /// tests and captures pass their own). Invalid values are reported in [`Config::report`].
    pub fn from_env(env: &BTreeMap<String, String>) -> Config {
        let mut b = Builder { env, report: BTreeMap::new() };
        let context_window = b.positive("CHATCLI_CONTEXT_WINDOW", None);
        let max_recovery_attempts = narrow(b.positive("CHATCLI_MAX_RECOVERY_ATTEMPTS", Some(3)), 3u32);
        let max_token_escalations = narrow(b.positive("CHATCLI_MAX_TOKEN_ESCALATIONS", Some(2)), 2u32);
        let emergency_keep_messages =
            narrow(b.positive("CHATCLI_EMERGENCY_KEEP_MESSAGES", Some(10)), 10usize);
        let max_payload = b.max_payload();
        let microcompact_truncate_turns =
            narrow(b.positive("CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", Some(2)), 2u32);
        let microcompact_summarize_turns =
            narrow(b.positive("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", Some(4)), 4u32);
        let compact_model = b.compact_model();
        let context_engine = b.context_engine();
        let tool_result_max_chars =
            narrow(b.positive("CHATCLI_TOOL_RESULT_MAX_CHARS", Some(20_000)), 20_000usize);
        let tool_result_budget_chars =
            narrow(b.positive("CHATCLI_TOOL_RESULT_BUDGET_CHARS", Some(200_000)), 200_000usize);
        let skill_age_turns = narrow(b.positive("CHATCLI_SKILL_AGE_TURNS", Some(6)), 6u32);
        Config {
            context_window,
            max_recovery_attempts,
            max_token_escalations,
            emergency_keep_messages,
            max_payload,
            microcompact_truncate_turns,
            microcompact_summarize_turns,
            compact_model,
            context_engine,
            tool_result_max_chars,
            tool_result_budget_chars,
            skill_age_turns,
            report: b.report,
        }
    }

    /// The invalid settings: `(name, why)`.
    pub fn errors(&self) -> Vec<(&str, &str)> {
        self.report.iter().filter_map(|(k, r)| r.error.as_deref().map(|e| (k.as_str(), e))).collect()
    }

    /// `CHATCLI_*` variables in `env` that this build does not know (likely typos).
    pub fn unknown_names(env: &BTreeMap<String, String>) -> Vec<String> {
        env.keys()
            .filter(|k| k.starts_with("CHATCLI_") && !SETTING_NAMES.contains(&k.as_str()))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults() {
        let c = Config::default();
        assert_eq!(c.max_recovery_attempts, 3);
        assert_eq!(c.max_token_escalations, 2);
        assert_eq!(c.emergency_keep_messages, 10);
        assert_eq!(c.max_payload, None);
        assert_eq!((c.microcompact_truncate_turns, c.microcompact_summarize_turns), (2, 4));
        assert_eq!((c.tool_result_max_chars, c.tool_result_budget_chars), (20_000, 200_000));
        assert_eq!(c.skill_age_turns, 6);
        assert_eq!(c.context_engine, ContextEngine::Builtin);
        assert_eq!(c.report.len(), SETTING_NAMES.len());
        assert!(c.errors().is_empty());
    }

    #[test]
    fn values_from_env_and_invalid_ones_named() {
        let c = Config::from_env(&env(&[
            ("CHATCLI_MAX_PAYLOAD", "512KB"),
            ("CHATCLI_MAX_RECOVERY_ATTEMPTS", "0"),
            ("CHATCLI_EMERGENCY_KEEP_MESSAGES", "ten"),
            ("CHATCLI_CONTEXT_ENGINE", "mcp:ctx"),
            ("CHATCLI_COMPACT_MODEL", "nocolon"),
            ("CHATCLI_CONTEXT_WINDOW", "128000"),
        ]));
        assert_eq!(c.max_payload, Some(524_288));
        assert_eq!(c.max_recovery_attempts, 3);
        assert_eq!(c.emergency_keep_messages, 10);
        assert_eq!(c.context_engine, ContextEngine::Mcp("ctx".into()));
        assert_eq!(c.context_window, Some(128_000));
        let errs: Vec<&str> = c.errors().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            errs,
            vec!["CHATCLI_COMPACT_MODEL", "CHATCLI_EMERGENCY_KEEP_MESSAGES", "CHATCLI_MAX_RECOVERY_ATTEMPTS"]
        );
        assert_eq!(c.report["CHATCLI_MAX_PAYLOAD"].source, Source::Env);
        assert_eq!(c.report["CHATCLI_MAX_RECOVERY_ATTEMPTS"].source, Source::Default);
    }

    #[test]
    fn invalid_payload_is_unset_and_reported() {
        let c = Config::from_env(&env(&[("CHATCLI_MAX_PAYLOAD", "-5")]));
        assert_eq!(c.max_payload, None);
        assert_eq!(c.errors().len(), 1);
        assert_eq!(
            Config::unknown_names(&env(&[("CHATCLI_MAX_PAYLAOD", "5MB")])),
            vec!["CHATCLI_MAX_PAYLAOD"]
        );
    }
}
