//! Running a child process with input on stdin, output collected, and a hard timeout; and the
//! `cmd:PROGRAM` summarizer built on it.

use salvage_recovery::summarizer::{Cancel, SummarizeError, Summarizer, SummaryAnswer, SummaryRequest};
use salvage_types::event::Cost;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a bounded run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The program could not be started.
    Spawn(String),
    /// It ran past the timeout and was killed.
    Timeout(Duration),
    /// It exited unsuccessfully.
    Exit(Option<i32>, String),
    /// Cancelled.
    Cancelled,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "cannot start: {e}"),
            RunError::Timeout(d) => write!(f, "timed out after {} ms", d.as_millis()),
            RunError::Exit(code, err) => write!(
                f,
                "exited with {}: {}",
                code.map(|c| c.to_string()).unwrap_or_else(|| "a signal".into()),
                err.trim()
            ),
            RunError::Cancelled => write!(f, "cancelled"),
        }
    }
}

/// Runs `sh -c command` with `stdin` piped in and `env` set, killing it after `timeout`.
pub fn run_shell(
    command: &str,
    stdin: &[u8],
    env: &[(String, String)],
    timeout: Duration,
    cancel: Option<&Cancel>,
) -> Result<Vec<u8>, RunError> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| RunError::Spawn(e.to_string()))?;
    let input = stdin.to_vec();
    let mut sin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(s) = sin.as_mut() {
            let _ = s.write_all(&input);
        }
    });
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    });
    let ereader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(64 * 1024).read_to_end(&mut buf);
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(RunError::Spawn(e.to_string())),
        }
        if cancel.is_some_and(Cancel::is_cancelled) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::Cancelled);
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let stdout = reader.join().unwrap_or_default();
    let stderr = ereader.join().unwrap_or_default();
    if !status.success() {
        return Err(RunError::Exit(status.code(), String::from_utf8_lossy(&stderr).to_string()));
    }
    Ok(stdout)
}

/// `cmd:PROGRAM`: the segment as JSON on stdin, the summary on stdout, with a timeout.
pub struct CommandSummarizer {
    /// The command line (run by `sh -c`).
    pub program: String,
    /// The timeout (default 3 minutes).
    pub timeout: Duration,
}

impl CommandSummarizer {
    /// A command summarizer with the default 3-minute timeout.
    pub fn new(program: impl Into<String>) -> CommandSummarizer {
        CommandSummarizer { program: program.into(), timeout: Duration::from_secs(180) }
    }
}

impl Summarizer for CommandSummarizer {
    fn route(&self) -> String {
        format!("cmd:{}", self.program)
    }

    fn summarize(&mut self, req: &SummaryRequest, cancel: &Cancel) -> Result<SummaryAnswer, SummarizeError> {
        let input = serde_json::json!({
            "segment": req.segment,
            "rendered": req.rendered,
            "budget_chars": req.budget_chars,
            "instruction": req.instruction,
        });
        let bytes = serde_json::to_vec(&input).map_err(|e| SummarizeError::Failed(e.to_string()))?;
        match run_shell(&self.program, &bytes, &[], self.timeout, Some(cancel)) {
            Ok(out) => Ok(SummaryAnswer {
                text: String::from_utf8_lossy(&out).trim().to_string(),
                cost: Cost {
                    calls: 1,
                    input_tokens: (req.rendered.len() / 4) as u64,
                    output_tokens: (out.len() / 4) as u64,
                },
            }),
            Err(RunError::Timeout(d)) => Err(SummarizeError::Timeout(d.as_secs())),
            Err(RunError::Cancelled) => Err(SummarizeError::Cancelled),
            Err(e) => Err(SummarizeError::Failed(format!("{}: {e}", self.program))),
        }
    }
}
