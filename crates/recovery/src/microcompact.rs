//! Microcompact (behaviour spec section 7): old tool results become head+tail previews, then
//! one-line stubs, with no model and no network. Originals go to CCR first and markers survive
//! from the preview to the stub. Verbatim messages and real user text are never touched.

use crate::archive::{ArchiveError, Archiver};
use salvage_types::ccr_key::{archived_key, marker_for};
use salvage_types::message::{Message, Role};
use salvage_types::truncate::head;
use serde::Serialize;

/// Results smaller than this are not candidates (unless already a preview).
pub const MIN_CANDIDATE: usize = 3_000;
/// Preview head, before cutting back to a line break.
pub const HEAD: usize = 2_000;
/// A head line break is used only past this.
pub const HEAD_MIN_BREAK: usize = 1_000;
// The shared preview breaks the head at half its length.
const _: () = assert!(HEAD_MIN_BREAK == HEAD / 2);
/// Preview tail, before cutting forward past a line break.
pub const TAIL: usize = 500;
const PREVIEW_TAG: &str = " chars omitted from old tool result ...]";
const STUB_PREFIX: &str = "[Old tool result cleared — ";

/// The ages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ages {
    /// `CHATCLI_MICROCOMPACT_TRUNCATE_TURNS` (2).
    pub truncate: u32,
    /// `CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS` (4).
    pub summarize: u32,
}

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MicroReport {
    /// Results cut to a preview.
    pub truncated: u64,
    /// Results cleared to a one-line stub.
    pub summarized: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

impl MicroReport {
    /// `🗜 microcompact: 3 truncated, 2 summarized, 1.7 MB freed`.
    pub fn line(&self) -> String {
        format!(
            "🗜 microcompact: {} truncated, {} summarized, {} freed",
            self.truncated,
            self.summarized,
            salvage_types::format_bytes(self.freed_bytes)
        )
    }
}

/// The kind of content, for the stub.
pub fn kind_of(content: &str) -> &'static str {
    let t = content.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(content.trim()).is_ok()
    {
        return "JSON";
    }
    // The remaining heuristics look at the start of the content only.
    let t = head(t, 4096);
    if t.starts_with("diff --git") || t.starts_with("--- a/") || (t.contains("\n@@ ") && t.contains("\n+")) {
        return "diff";
    }
    if t.starts_with("commit ") && t.get(7..47).is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit())) {
        return "git log";
    }
    if t.starts_with("package ") && (t.contains("\nfunc ") || t.contains("\nimport")) {
        return "Go source";
    }
    if t.contains("\ndef ") || t.starts_with("def ") || t.starts_with("import ") && t.contains(":\n") {
        return "Python source";
    }
    if t.contains("function ") || t.contains("=> {") || t.starts_with("const ") || t.contains("\nconst ") {
        return "JavaScript source";
    }
    let braces = t.matches('{').count().saturating_add(t.matches(';').count());
    if braces.saturating_mul(40) > t.len().max(1) {
        return "source code";
    }
    "text"
}

/// The key of the original when `content` is a preview or stub salvage wrote for a key the
/// archive holds (content that merely quotes a marker or our wording is ordinary content).
fn own_key(
    content: &str,
    archiver: &Archiver<'_>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Option<String> {
    archived_key(content, |k| archiver.get(k).or_else(|| lookup(k))).map(str::to_string)
}

/// The head+tail preview of a long result.
pub fn preview(content: &str) -> String {
    // The head breaks at a line from HEAD_MIN_BREAK (half of HEAD); the tail at its first line.
    crate::preview::head_and_tail(content, HEAD, TAIL, usize::MAX, |omitted| {
        format!("\n[... {omitted}{PREVIEW_TAG}\n")
    })
}

/// `[Old tool result cleared — L lines, C chars, KIND]`.
pub fn stub_line(original: &str) -> String {
    let lines = original.bytes().filter(|b| *b == b'\n').count().saturating_add(1);
    format!("{STUB_PREFIX}{lines} lines, {} chars, {}]", original.chars().count(), kind_of(original))
}

/// Runs microcompact. `current_turn` only gates the pass (no-op below the truncate age).
pub fn microcompact(
    history: &[Message],
    current_turn: u32,
    ages: Ages,
    archiver: &mut Archiver<'_>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<(Vec<Message>, MicroReport), ArchiveError> {
    let mut out = history.to_vec();
    let report = compact_in_place(&mut out, current_turn, ages, archiver, lookup)?;
    Ok((out, report))
}

/// [`microcompact`] of a history the caller gives up (the engine's): each content it cuts leaves
/// memory as soon as its original is archived, so the pass never holds the history beside the
/// archived copies of its contents (issue #19, peak memory). The history comes back with the
/// result; on an error it is cut up to the message that failed (each cut content's original was
/// archived before the cut).
pub fn microcompact_owned(
    mut history: Vec<Message>,
    current_turn: u32,
    ages: Ages,
    archiver: &mut Archiver<'_>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> (Vec<Message>, Result<MicroReport, ArchiveError>) {
    let report = compact_in_place(&mut history, current_turn, ages, archiver, lookup);
    (history, report)
}

/// Cuts `out` in place; every content it changes is counted in the report (truncated or
/// summarized), so an unchanged report means an unchanged history.
fn compact_in_place(
    out: &mut [Message],
    current_turn: u32,
    ages: Ages,
    archiver: &mut Archiver<'_>,
    lookup: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<MicroReport, ArchiveError> {
    let mut report = MicroReport::default();
    if current_turn < ages.truncate {
        return Ok(report);
    }
    let mut assistants_after = 0u32;
    for m in out.iter_mut().rev() {
        let age = assistants_after;
        if m.role == Role::Assistant {
            assistants_after = assistants_after.saturating_add(1);
            continue;
        }
        let own = own_key(&m.content, archiver, lookup);
        let is_stub = own.is_some() && m.content.starts_with(STUB_PREFIX);
        if !m.is_tool_output() || m.meta.preserve_verbatim || is_stub {
            continue;
        }
        let preview_already = own.is_some() && m.content.contains(PREVIEW_TAG);
        if m.content.len() < MIN_CANDIDATE && !preview_already {
            continue;
        }
        let before = m.content.len();
        if age >= ages.summarize {
            // Counted from the original: recalled through the preview's marker when there is one.
            // Only a cut of it (a preview) stands for its original; any other text of ours (a
            // stub of another pass) has words of its own and is archived before it is replaced
            // (review of the cut rule, finding 2).
            let existing = own.filter(|_| salvage_types::ccr_key::is_cut(&m.content));
            let original = existing.as_deref().and_then(lookup).and_then(|b| String::from_utf8(b).ok());
            let (text, marker) = match (original, existing) {
                (Some(orig), Some(k)) => (stub_line(&orig), Some(marker_for(&k))),
                (None, Some(k)) => (stub_line(&m.content), Some(marker_for(&k))),
                (_, None) => {
                    let k = archiver.put(m.content.as_bytes())?;
                    (stub_line(&m.content), k.map(|k| k.marker()))
                }
            };
            let new = match marker {
                Some(mk) => format!("{text} {mk}"),
                None => text,
            };
            if new.len() < before {
                report.summarized = report.summarized.saturating_add(1);
                report.freed_bytes =
                    report.freed_bytes.saturating_add(before.saturating_sub(new.len()) as u64);
                m.content = new;
            }
        } else if age >= ages.truncate && !preview_already {
            let reduced = archiver.reduce(&m.content, |body, _| Some(preview(body)))?;
            if let Some(p) = reduced {
                report.truncated = report.truncated.saturating_add(1);
                report.freed_bytes = report.freed_bytes.saturating_add(before.saturating_sub(p.len()) as u64);
                m.content = p;
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind_of("{\"a\": 1}"), "JSON");
        assert_eq!(kind_of("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"), "diff");
        assert_eq!(kind_of(&format!("commit {}\nAuthor: x\n", "a".repeat(40))), "git log");
        assert_eq!(kind_of("package main\n\nfunc main() {}\n"), "Go source");
        assert_eq!(kind_of("import os\n\ndef main():\n    pass\n"), "Python source");
        assert_eq!(kind_of("const x = () => {\n  return 1;\n};\n"), "JavaScript source");
        assert_eq!(kind_of("int main() { return 0; }\nint f() { x; y; z; }"), "source code");
        assert_eq!(kind_of("just some words here"), "text");
    }
}
