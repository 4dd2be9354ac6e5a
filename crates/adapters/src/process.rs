//! Running a child process with input on stdin, output collected, and a hard timeout; and the
//! `cmd:PROGRAM` summarizer built on it.

use salvage_recovery::summarizer::{Cancel, SummarizeError, Summarizer, SummaryAnswer, SummaryRequest};
use salvage_types::event::Cost;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most a child's standard output may carry (64 MiB); beyond it the run fails instead of
/// holding it all in memory.
pub const MAX_STDOUT_BYTES: u64 = 64 << 20;
/// The most of a child's standard error kept for the message.
const MAX_STDERR_BYTES: u64 = 64 << 10;
/// How often a run waiting for its child looks at the cancellation flag.
const CANCEL_SLICE: Duration = Duration::from_millis(50);

/// How a bounded run ended.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started, or waiting for it failed.
    #[error("cannot start: {0}")]
    Spawn(#[source] std::io::Error),
    /// It ran past the timeout and was killed.
    #[error("timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    /// It exited unsuccessfully (its exit code, or none for a signal; the head of its stderr).
    #[error("exited with {}: {}", .0.map(|c| c.to_string()).unwrap_or_else(|| "a signal".into()), .1.trim())]
    Exit(Option<i32>, String),
    /// It wrote more than the limit on standard output.
    #[error("wrote more than {0} bytes on standard output")]
    OutputTooLarge(u64),
    /// Cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// Reads at most `limit` bytes of `r` and drains the rest (so the writer never blocks); the
/// second value is true when there was more.
fn read_bounded(r: Option<impl Read>, limit: u64) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let Some(mut r) = r else { return (buf, false) };
    let _ = r.by_ref().take(limit).read_to_end(&mut buf);
    let more = std::io::copy(&mut r, &mut std::io::sink()).map(|n| n > 0).unwrap_or(false);
    (buf, more)
}

/// Runs `sh -c command` with `stdin` piped in and `env` set, killing it after `timeout`. Its
/// standard output is bounded by [`MAX_STDOUT_BYTES`].
pub fn run_shell(
    command: &str,
    stdin: &[u8],
    env: &[(String, String)],
    timeout: Duration,
    cancel: Option<&Cancel>,
) -> Result<Vec<u8>, RunError> {
    use wait_timeout::ChildExt;
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let input = stdin.to_vec();
    let mut sin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(s) = sin.as_mut() {
            let _ = s.write_all(&input);
        }
    });
    let out = child.stdout.take();
    let err = child.stderr.take();
    let reader = std::thread::spawn(move || read_bounded(out, MAX_STDOUT_BYTES));
    let ereader = std::thread::spawn(move || read_bounded(err, MAX_STDERR_BYTES).0);
    let start = Instant::now();
    let stop = |child: &mut std::process::Child, e: RunError| {
        let _ = child.kill();
        let _ = child.wait();
        Err(e)
    };
    let status = loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return stop(&mut child, RunError::Timeout(timeout));
        }
        // Without a cancellation flag there is nothing to look at meanwhile: one wait.
        let slice = if cancel.is_some() { left.min(CANCEL_SLICE) } else { left };
        match child.wait_timeout(slice) {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return stop(&mut child, RunError::Spawn(e)),
        }
        if cancel.is_some_and(Cancel::is_cancelled) {
            return stop(&mut child, RunError::Cancelled);
        }
    };
    let _ = writer.join();
    let (stdout, more) = reader.join().unwrap_or_default();
    let stderr = ereader.join().unwrap_or_default();
    if !status.success() {
        return Err(RunError::Exit(status.code(), String::from_utf8_lossy(&stderr).to_string()));
    }
    if more {
        return Err(RunError::OutputTooLarge(MAX_STDOUT_BYTES));
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
