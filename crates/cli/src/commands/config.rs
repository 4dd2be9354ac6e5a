//! `salvage config`: the effective settings, the source of each, and invalid values named.

use crate::exit::{Failure, Outcome};
use crate::output::{table, Output};
use salvage_types::config::{Config, Source, SETTING_NAMES};
use serde_json::json;
use std::collections::BTreeMap;

/// Arguments of `salvage config`.
#[derive(clap::Args)]
#[command(
    after_help = "Exit 1 when a setting is invalid (its default then stands); the value is named in the output.\nExample: CHATCLI_MAX_PAYLOAD=512KB salvage config --json"
)]
pub struct Args {
    /// Print `{"settings": {...}, "max_payload_bytes": ...}` instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: Args, env: &BTreeMap<String, String>, out: &mut Output) -> Outcome {
    let config = Config::from_env(env);
    let unknown = Config::unknown_names(env);
    if args.json {
        let mut settings = serde_json::Map::new();
        for name in SETTING_NAMES {
            if let Some(r) = config.report.get(*name) {
                settings.insert(name.to_string(), json!(r));
            }
        }
        out.json(&json!({
            "settings": settings,
            "max_payload_bytes": config.max_payload,
            "unknown": unknown,
        }))?;
    } else {
        let mut rows = vec![vec!["SETTING".into(), "VALUE".into(), "SOURCE".into(), "NOTE".into()]];
        for name in SETTING_NAMES {
            let Some(r) = config.report.get(*name) else { continue };
            let value = match &r.value {
                serde_json::Value::Null => "unset".to_string(),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(o) => {
                    format!(
                        "{}:{}",
                        o.get("provider").and_then(|v| v.as_str()).unwrap_or(""),
                        o.get("model").and_then(|v| v.as_str()).unwrap_or("")
                    )
                }
                v => v.to_string(),
            };
            let value = match (*name, config.max_payload) {
                ("CHATCLI_MAX_PAYLOAD", Some(n)) => format!("{n} ({})", salvage_types::format_bytes(n)),
                _ => value,
            };
            let source = match r.source {
                Source::Env => "env",
                Source::Default => "default",
            };
            let note = match &r.error {
                Some(e) => format!("invalid: {e}"),
                None => String::new(),
            };
            rows.push(vec![name.to_string(), value, source.to_string(), note]);
        }
        out.put(&table(&rows))?;
        for u in &unknown {
            out.line(&format!("warning: {u} is not a setting salvage knows (a typo?)"))?;
        }
    }
    let errors = config.errors();
    if errors.is_empty() {
        Ok(())
    } else {
        let names: Vec<&str> = errors.iter().map(|(n, _)| *n).collect();
        Err(Failure::Problem(format!("invalid setting(s): {} (defaults stand)", names.join(", "))))
    }
}
