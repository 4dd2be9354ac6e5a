//! `PreCompact` / `PostCompact` hooks in the reference client's shape:
//! `{"hooks":[{"name","event","type":"command"|"http","command"|"url","timeout" (ms, default
//! 10000),"enabled" (default true)}]}`, read from `.chatcli/hooks.json` in the working directory
//! and `~/.chatcli/hooks.json` (both apply). A hook that fails or times out is reported, never
//! fatal.

use crate::process::{run_shell, RunError};
use salvage_recovery::compaction::{HookCall, HookResult, Hooks};
use salvage_types::event::StepOutcome;
use salvage_types::Clock;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One configured hook.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Hook {
    /// Its name.
    pub name: String,
    /// The event it runs on.
    pub event: String,
    /// `command` or `http`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The command line (command hooks).
    #[serde(default)]
    pub command: Option<String>,
    /// The URL (http hooks).
    #[serde(default)]
    pub url: Option<String>,
    /// Milliseconds (default 10 000).
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn default_timeout() -> u64 {
    10_000
}
fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct HooksFile {
    #[serde(default)]
    hooks: Vec<Hook>,
}

/// The default hook files.
pub fn default_files(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut v = vec![cwd.join(".chatcli/hooks.json")];
    if let Some(h) = home {
        v.push(h.join(".chatcli/hooks.json"));
    }
    v
}

/// Hooks loaded from files, run for real; `clock` dates each call's payload.
pub struct ConfiguredHooks<'c> {
    /// The hooks.
    pub hooks: Vec<Hook>,
    /// Session id passed to hooks.
    pub session: String,
    /// Working directory passed to hooks.
    pub working_dir: String,
    /// Problems reading the files.
    pub load_errors: Vec<String>,
    /// The source of the payload's `timestamp`.
    pub clock: &'c dyn Clock,
}

impl<'c> ConfiguredHooks<'c> {
    /// Loads every file that exists (all apply).
    pub fn load(
        files: &[PathBuf],
        session: &str,
        working_dir: &str,
        clock: &'c dyn Clock,
    ) -> ConfiguredHooks<'c> {
        let mut hooks = Vec::new();
        let mut load_errors = Vec::new();
        for f in files {
            let Ok(bytes) = std::fs::read(f) else { continue };
            match serde_json::from_slice::<HooksFile>(&bytes) {
                Ok(h) => hooks.extend(h.hooks),
                Err(e) => load_errors.push(format!("{}: {e}", f.display())),
            }
        }
        ConfiguredHooks {
            hooks,
            session: session.to_string(),
            working_dir: working_dir.to_string(),
            load_errors,
            clock,
        }
    }
}

impl Hooks for ConfiguredHooks<'_> {
    fn fire(&mut self, call: &HookCall) -> Vec<HookResult> {
        let payload = serde_json::json!({
            "type": call.event,
            "timestamp": chrono::DateTime::<chrono::Utc>::from(self.clock.now()).to_rfc3339(),
            "sessionId": self.session,
            "workingDir": self.working_dir,
            "trigger": call.trigger.as_str(),
            "outcome": call.outcome.map(|o| o.as_str()),
        });
        let body = payload.to_string();
        let mut out = Vec::new();
        for h in self.hooks.iter().filter(|h| h.enabled && h.event == call.event) {
            let start = Instant::now();
            let timeout = Duration::from_millis(h.timeout.max(1));
            let result: Result<(), String> = match h.kind.as_str() {
                "command" => match &h.command {
                    None => Err("command hook without a command".into()),
                    Some(c) => {
                        let env = vec![
                            ("CHATCLI_HOOK_EVENT".to_string(), call.event.to_string()),
                            ("CHATCLI_HOOK_SESSION".to_string(), self.session.clone()),
                            ("CHATCLI_HOOK_TRIGGER".to_string(), call.trigger.as_str().to_string()),
                            (
                                "CHATCLI_HOOK_OUTCOME".to_string(),
                                call.outcome.map(|o| o.as_str()).unwrap_or("").to_string(),
                            ),
                        ];
                        run_shell(c, body.as_bytes(), &env, timeout, None).map(drop).map_err(|e| match e {
                            RunError::Timeout(_) => format!("timed out after {} ms", h.timeout),
                            other => other.to_string(),
                        })
                    }
                },
                "http" => match &h.url {
                    None => Err("http hook without a url".into()),
                    Some(u) => post(u, &body, timeout),
                },
                other => Err(format!("unknown hook type {other:?}")),
            };
            let millis = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
            out.push(match result {
                Ok(()) => {
                    HookResult { name: h.name.clone(), outcome: StepOutcome::Applied, error: None, millis }
                }
                Err(e) => {
                    HookResult { name: h.name.clone(), outcome: StepOutcome::Failed, error: Some(e), millis }
                }
            });
        }
        out
    }
}

fn post(url: &str, body: &str, timeout: Duration) -> Result<(), String> {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(true).build().into();
    agent.post(url).header("Content-Type", "application/json").send(body).map(drop).map_err(|e| match e {
        ureq::Error::Timeout(_) => format!("timed out after {} ms", timeout.as_millis()),
        other => other.to_string(),
    })
}
