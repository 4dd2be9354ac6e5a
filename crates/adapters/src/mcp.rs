//! `mcp:SERVER`: a real MCP client over stdio (newline-delimited JSON-RPC 2.0) that calls the
//! server's `context_compact(segment, budget_chars, instruction)` tool, with a 3-minute timeout,
//! falling back to the built-in summarizer on error, timeout or an empty answer.

use salvage_recovery::summarizer::{
    Builtin, Cancel, SummarizeError, Summarizer, SummaryAnswer, SummaryRequest,
};
use salvage_types::event::Cost;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The MCP protocol version this client speaks.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The tool called.
pub const TOOL: &str = "context_compact";

/// One server entry of an MCP configuration (`{"mcpServers": {"name": {...}}}`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ServerConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the folder of the configuration file).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(rename = "mcpServers", default)]
    servers: BTreeMap<String, ServerConfig>,
}

/// Finds `name` in the first configuration file that defines it (`.chatcli/mcp.json` in the
/// working directory, then `~/.chatcli/mcp.json`, or the files given).
pub fn find_server(name: &str, files: &[PathBuf]) -> Result<ServerConfig, String> {
    for f in files {
        let Ok(bytes) = std::fs::read(f) else { continue };
        let cfg: ConfigFile = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", f.display()))?;
        if let Some(mut s) = cfg.servers.get(name).cloned() {
            let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
            if s.cwd.is_none() {
                s.cwd = Some(dir);
            }
            return Ok(s);
        }
    }
    Err(format!(
        "MCP server {name:?} is not configured (looked in {})",
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    ))
}

/// The default configuration files.
pub fn default_config_files(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut v = vec![cwd.join(".chatcli/mcp.json")];
    if let Some(h) = home {
        v.push(h.join(".chatcli/mcp.json"));
    }
    v
}

struct Session {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Session {
    fn start(cfg: &ServerConfig) -> Result<Session, String> {
        let mut cmd = Command::new(&cfg.command);
        cmd.args(&cfg.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        if let Some(d) = &cfg.cwd {
            cmd.current_dir(d);
        }
        for (k, v) in &cfg.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", cfg.command))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Session { child, stdin, lines: rx, next_id: 1 })
    }

    fn send(&mut self, msg: &Value) -> Result<(), String> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("write to server: {e}"))
    }

    fn request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Value, SummarizeError> {
        let id = self.next_id;
        // Two requests per session: the id space does not run out; were it to, ids would repeat
        // rather than wrap to 0.
        self.next_id = self.next_id.saturating_add(1);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .map_err(SummarizeError::Failed)?;
        loop {
            if cancel.is_cancelled() {
                return Err(SummarizeError::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SummarizeError::Timeout(0));
            }
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => {
                    let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                    if v.get("id").and_then(Value::as_u64) != Some(id) {
                        continue; // notifications, logs, other ids
                    }
                    if let Some(e) = v.get("error") {
                        return Err(SummarizeError::Failed(format!("{method}: {e}")));
                    }
                    return Ok(v.get("result").cloned().unwrap_or(Value::Null));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(SummarizeError::Failed(format!("{method}: the server closed its output")))
                }
            }
        }
    }
}

/// The instant `timeout` from now. A timeout too long for the clock to represent (a configured
/// `Duration::MAX`) means "no practical limit": it waits a year rather than overflowing.
fn deadline_after(timeout: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(YEAR)).unwrap_or(now)
}

/// Calls `context_compact` on a server once: start, initialize, call, stop.
pub fn call_context_compact(
    cfg: &ServerConfig,
    req: &SummaryRequest,
    timeout: Duration,
    cancel: &Cancel,
) -> Result<String, SummarizeError> {
    let deadline = deadline_after(timeout);
    let mut s = Session::start(cfg).map_err(SummarizeError::Failed)?;
    let init = s.request(
        "initialize",
        json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "salvage", "version": env!("CARGO_PKG_VERSION")}}),
        deadline,
        cancel,
    );
    let init = match init {
        Err(SummarizeError::Timeout(_)) => return Err(SummarizeError::Timeout(timeout.as_secs())),
        other => other?,
    };
    if init.get("capabilities").and_then(|c| c.get("tools")).is_none() {
        return Err(SummarizeError::Failed("the server offers no tools".into()));
    }
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .map_err(SummarizeError::Failed)?;
    let result = s.request(
        "tools/call",
        json!({"name": TOOL, "arguments": {"segment": req.rendered, "budget_chars": req.budget_chars, "instruction": req.instruction}}),
        deadline,
        cancel,
    );
    let result = match result {
        Err(SummarizeError::Timeout(_)) => return Err(SummarizeError::Timeout(timeout.as_secs())),
        other => other?,
    };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("tool error");
        return Err(SummarizeError::Failed(format!("{TOOL}: {text}")));
    }
    let text: String = result
        .get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        })
        .unwrap_or_default();
    Ok(text)
}

/// The `mcp:SERVER` summarizer with its fallback.
pub struct McpSummarizer {
    /// The server's name.
    pub name: String,
    /// Its configuration (or why it could not be found).
    pub config: Result<ServerConfig, String>,
    /// The timeout (3 minutes by default).
    pub timeout: Duration,
    /// Why the last call fell back, if it did.
    pub last_fallback: Option<String>,
}

impl McpSummarizer {
    /// A summarizer for a configured server.
    pub fn new(name: &str, config: Result<ServerConfig, String>) -> McpSummarizer {
        McpSummarizer {
            name: name.to_string(),
            config,
            timeout: Duration::from_secs(180),
            last_fallback: None,
        }
    }
}

impl Summarizer for McpSummarizer {
    fn route(&self) -> String {
        match &self.last_fallback {
            None => format!("mcp:{}", self.name),
            Some(why) => format!("mcp:{} (fell back to builtin: {why})", self.name),
        }
    }

    fn summarize(&mut self, req: &SummaryRequest, cancel: &Cancel) -> Result<SummaryAnswer, SummarizeError> {
        let outcome = match &self.config {
            Ok(cfg) => call_context_compact(cfg, req, self.timeout, cancel),
            Err(e) => Err(SummarizeError::Failed(e.clone())),
        };
        match outcome {
            Ok(text) if !text.trim().is_empty() => {
                self.last_fallback = None;
                Ok(SummaryAnswer {
                    text,
                    cost: Cost { calls: 1, input_tokens: (req.rendered.len() / 4) as u64, output_tokens: 0 },
                })
            }
            Err(SummarizeError::Cancelled) => Err(SummarizeError::Cancelled),
            other => {
                let why = match other {
                    Ok(_) => "empty answer".to_string(),
                    Err(e) => e.to_string(),
                };
                self.last_fallback = Some(why);
                Builtin.summarize(req, cancel)
            }
        }
    }
}
