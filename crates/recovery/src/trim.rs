//! Level 1, trim (no model): strips reasoning blocks from assistant text, compacts inline tool
//! markup, shortens injected context and tool feedback (originals archived). System, summary,
//! verbatim and real user text are untouched. Idempotent.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use serde::Serialize;

/// Tool feedback and injected context longer than this are cut to a preview.
pub const FEEDBACK_MAX: usize = 8_000;
/// Inline tool markup blocks longer than this are compacted.
pub const MARKUP_MAX: usize = 400;

const REASONING: &[(&str, &str)] =
    &[("<thinking>", "</thinking>"), ("<think>", "</think>"), ("<reasoning>", "</reasoning>")];
const MARKUP: &[(&str, &str)] =
    &[("<tool_call>", "</tool_call>"), ("<function_calls>", "</function_calls>"), ("<invoke", "</invoke>")];

/// What trim did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrimReport {
    /// Reasoning blocks removed.
    pub reasoning: u64,
    /// Markup blocks compacted.
    pub markup: u64,
    /// Feedback or context messages shortened.
    pub shortened: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

fn strip_blocks(s: &str, pairs: &[(&str, &str)], replace: impl Fn(&str) -> Option<String>) -> (String, u64) {
    if !pairs.iter().any(|(open, _)| s.contains(open)) {
        return (s.to_string(), 0);
    }
    let mut out = s.to_string();
    let mut n = 0;
    for (open, close) in pairs {
        let mut from = 0;
        while let Some(i) = out[from..].find(open) {
            let start = from + i;
            let Some(j) = out[start..].find(close) else { break };
            let end = start + j + close.len();
            match replace(&out[start..end]) {
                Some(r) => {
                    out.replace_range(start..end, &r);
                    from = start + r.len();
                    n += 1;
                }
                None => from = end,
            }
        }
    }
    (out, n)
}

fn is_summary(m: &Message) -> bool {
    m.meta.is_summary || m.content.starts_with(crate::task::SUMMARY_PREFIX)
}

/// Runs trim.
pub fn trim(
    history: &[Message],
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, TrimReport), ArchiveError> {
    let mut out = history.to_vec();
    let mut r = TrimReport::default();
    for m in out.iter_mut() {
        if m.role == Role::System || m.meta.preserve_verbatim || is_summary(m) {
            continue;
        }
        let before = m.content.len();
        match m.role {
            Role::Assistant if m.content.contains('<') => {
                let (mut n1, mut n2) = (0, 0);
                let reduced = archiver.reduce(&m.content, |body, _| {
                    let (a, s1) = strip_blocks(body, REASONING, |_| Some(String::new()));
                    let (b, s2) = strip_blocks(&a, MARKUP, |block| {
                        (block.len() > MARKUP_MAX && !block.contains("[tool markup compacted")).then(|| {
                            format!(
                                "{}…[tool markup compacted, {} chars]",
                                salvage_types::truncate::head(block, 120),
                                block.len()
                            )
                        })
                    });
                    (n1, n2) = (s1, s2);
                    (b.len() < body.len()).then(|| b.trim().to_string())
                })?;
                if let Some(c) = reduced {
                    m.content = c;
                    r.reasoning += n1;
                    r.markup += n2;
                }
            }
            Role::Assistant => {}
            Role::Tool | Role::User => {
                let feedback = m.role == Role::Tool || m.meta.agent_feedback;
                if feedback
                    && m.content.len() > FEEDBACK_MAX
                    && archiver.archived_original(&m.content).is_none()
                {
                    if let Some(p) =
                        archiver.reduce(&m.content, |body, _| Some(crate::tool_budget::preview(body)))?
                    {
                        m.content = p;
                        r.shortened += 1;
                    }
                }
            }
            Role::System => {}
        }
        r.freed_bytes += before.saturating_sub(m.content.len()) as u64;
    }
    Ok((out, r))
}
