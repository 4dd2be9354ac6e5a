//! Summarizers behind one trait: `recorded` (answers from a list, for replay) and `builtin` (a
//! deterministic extractive summarizer with no model). Process and MCP summarizers live with the
//! other I/O adapters and implement the same trait.

use salvage_types::event::Cost;
use salvage_types::message::{Message, Role, ToolCall};
use std::sync::atomic::{AtomicBool, Ordering};

/// Cancellation, checked between phases and by long-running summarizers.
#[derive(Debug, Default)]
pub struct Cancel(AtomicBool);

impl Cancel {
    /// A token that is not cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a summarizer is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The segment's messages (as they are in the history).
    pub segment: Vec<Message>,
    /// The budgeted rendering of the segment the summarizer reads.
    pub rendered: String,
    /// The size the summary should stay within.
    pub budget_chars: usize,
    /// The instruction.
    pub instruction: String,
}

/// A summarizer's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryAnswer {
    /// The summary text.
    pub text: String,
    /// What it cost.
    pub cost: Cost,
}

/// Why a summarizer gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    /// It failed.
    #[error("summarizer failed: {0}")]
    Failed(String),
    /// It took too long.
    #[error("summarizer timed out after {0} s")]
    Timeout(u64),
    /// The compaction was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// Anything that turns a segment into a summary.
pub trait Summarizer {
    /// The route name for the journal (`builtin`, `recorded`, `cmd:…`, `mcp:…`).
    fn route(&self) -> String;
    /// Summarizes.
    fn summarize(&mut self, req: &SummaryRequest, cancel: &Cancel) -> Result<SummaryAnswer, SummarizeError>;
}

/// Answers taken from a list in call order (replays are exact); the built-in summarizer once the
/// list runs out.
pub struct Recorded {
    answers: std::collections::VecDeque<String>,
    fallback: Builtin,
}

impl Recorded {
    /// From recorded summaries.
    pub fn new(answers: Vec<String>) -> Recorded {
        Recorded { answers: answers.into(), fallback: Builtin }
    }
}

impl Summarizer for Recorded {
    fn route(&self) -> String {
        "recorded".into()
    }

    fn summarize(&mut self, req: &SummaryRequest, cancel: &Cancel) -> Result<SummaryAnswer, SummarizeError> {
        match self.answers.pop_front() {
            Some(text) => {
                Ok(SummaryAnswer { cost: Cost { calls: 1, input_tokens: 0, output_tokens: 0 }, text })
            }
            None => self.fallback.summarize(req, cancel),
        }
    }
}

/// The deterministic extractive summarizer: the task, files read and modified, commands run,
/// errors and progress, taken from tool calls, results and messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin;

const READ_TOOLS: &[&str] =
    &["read", "read_file", "view", "cat", "open", "grep", "glob", "search", "ls", "list_dir"];
const WRITE_TOOLS: &[&str] =
    &["write", "write_file", "edit", "edit_file", "apply_patch", "str_replace", "multiedit", "create_file"];
const RUN_TOOLS: &[&str] = &["bash", "run", "run_command", "shell", "exec", "terminal"];

fn arg_str(args: &serde_json::Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| args.get(*k).and_then(|v| v.as_str()).map(str::to_string))
}

fn one_line(s: &str, max: usize) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let cut = salvage_types::truncate::head(line, max);
    if cut.len() < line.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !s.is_empty() && !v.contains(&s) {
        v.push(s);
    }
}

impl Builtin {
    /// The extractive summary of a segment, within `budget` chars.
    pub fn extract(segment: &[Message], budget: usize) -> String {
        let mut facts = Facts::default();
        for m in segment {
            facts.note(m);
        }
        facts.render(segment.len(), budget)
    }
}

/// What the extractive summarizer gathers from a segment, section by section, in order of first
/// appearance (each entry once).
#[derive(Default)]
struct Facts {
    tasks: Vec<String>,
    read: Vec<String>,
    modified: Vec<String>,
    commands: Vec<String>,
    errors: Vec<String>,
    progress: Vec<String>,
    /// Tool names by call id, to name the tool of a result.
    calls: std::collections::HashMap<String, String>,
}

impl Facts {
    /// Gathers what one message says.
    fn note(&mut self, m: &Message) {
        match m.role {
            Role::User if crate::task::is_real_user(m) => {
                push_unique(&mut self.tasks, one_line(&m.content, 300))
            }
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    push_unique(&mut self.progress, one_line(&m.content, 200));
                }
                for c in &m.tool_calls {
                    self.note_call(c);
                }
            }
            Role::Tool | Role::User => self.note_result(m),
            Role::System => {}
        }
    }

    /// A tool call: a file modified, a command run, a file read, or another call.
    fn note_call(&mut self, c: &ToolCall) {
        let name = c.name.to_ascii_lowercase();
        self.calls.insert(c.id.clone(), c.name.clone());
        let path = arg_str(&c.arguments, &["path", "file_path", "file", "filename"]);
        let cmd = arg_str(&c.arguments, &["command", "cmd"]);
        if WRITE_TOOLS.iter().any(|t| name.contains(t)) {
            push_unique(&mut self.modified, path.unwrap_or_else(|| c.name.clone()));
        } else if RUN_TOOLS.iter().any(|t| name == *t || name.ends_with(t)) || cmd.is_some() {
            push_unique(
                &mut self.commands,
                format!("`{}`", one_line(&cmd.unwrap_or_else(|| c.arguments.to_string()), 160)),
            );
        } else if READ_TOOLS.iter().any(|t| name.contains(t)) || path.is_some() {
            push_unique(
                &mut self.read,
                path.unwrap_or_else(|| format!("{}({})", c.name, one_line(&c.arguments.to_string(), 80))),
            );
        } else {
            push_unique(
                &mut self.commands,
                format!("{}({})", c.name, one_line(&c.arguments.to_string(), 120)),
            );
        }
    }

    /// A tool result (or a user message that is not the task): an error when it says so.
    fn note_result(&mut self, m: &Message) {
        let tool = m
            .tool_call_id
            .as_ref()
            .and_then(|id| self.calls.get(id))
            .cloned()
            .unwrap_or_else(|| "tool".into());
        if m.is_error {
            push_unique(&mut self.errors, format!("{tool}: {}", one_line(&m.content, 200)));
        } else if let Some(l) = m.content.lines().find(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("error") || l.contains("failed") || l.contains("panic") || l.contains("exception")
        }) {
            push_unique(&mut self.errors, format!("{tool}: {}", one_line(l, 200)));
        }
    }

    /// The sections as Markdown, each keeping its most recent entries, within `budget` chars.
    fn render(&self, messages: usize, budget: usize) -> String {
        let mut out = String::new();
        section(&mut out, "Current task", &self.tasks, 3);
        section(&mut out, "Files read", &self.read, 30);
        section(&mut out, "Files modified", &self.modified, 30);
        section(&mut out, "Commands run", &self.commands, 20);
        section(&mut out, "Errors", &self.errors, 10);
        section(&mut out, "Progress", &self.progress, 8);
        if out.is_empty() {
            out = format!("## Conversation\n- {messages} earlier messages with no tool activity\n");
        }
        let cut = salvage_types::truncate::head(&out, budget.max(200));
        cut.trim_end().to_string()
    }
}

/// One section: its title and its last `max` items, with a line counting the earlier ones.
fn section(out: &mut String, title: &str, items: &[String], max: usize) {
    if items.is_empty() {
        return;
    }
    out.push_str(&format!("## {title}\n"));
    let skip = items.len().saturating_sub(max);
    if skip > 0 {
        out.push_str(&format!("- … {skip} earlier\n"));
    }
    for i in items.iter().skip(skip) {
        out.push_str(&format!("- {i}\n"));
    }
    out.push('\n');
}

impl Summarizer for Builtin {
    fn route(&self) -> String {
        "builtin".into()
    }

    fn summarize(&mut self, req: &SummaryRequest, cancel: &Cancel) -> Result<SummaryAnswer, SummarizeError> {
        if cancel.is_cancelled() {
            return Err(SummarizeError::Cancelled);
        }
        let text = Builtin::extract(&req.segment, req.budget_chars);
        Ok(SummaryAnswer { cost: Cost { calls: 1, input_tokens: 0, output_tokens: 0 }, text })
    }
}
