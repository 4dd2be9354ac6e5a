//! Skill aging: skill blocks (`meta.skill_names`) older than `CHATCLI_SKILL_AGE_TURNS` become a
//! stub with a marker (originals archived first).

use crate::archive::{ArchiveError, Archiver};
use salvage_types::message::{Message, Role};
use serde::Serialize;

/// What skill aging did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkillReport {
    /// Skill blocks collapsed.
    pub collapsed: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

/// Collapses skill blocks older than `age_turns` assistant messages.
pub fn age_skills(
    history: &[Message],
    age_turns: u32,
    archiver: &mut Archiver<'_>,
) -> Result<(Vec<Message>, SkillReport), ArchiveError> {
    let mut out = history.to_vec();
    let mut report = SkillReport::default();
    let mut assistants_after = 0u32;
    for i in (0..out.len()).rev() {
        if out[i].role == Role::Assistant {
            assistants_after += 1;
            continue;
        }
        let m = &out[i];
        let Some(names) = m.meta.skill_names.clone() else { continue };
        if m.meta.skill_collapsed || m.meta.preserve_verbatim || assistants_after <= age_turns {
            continue;
        }
        let before = m.content.len();
        let mut stub = format!("[Skill block aged out — {names}");
        if let Some(k) = archiver.put(m.content.as_bytes())? {
            stub.push_str(&format!(" — recoverable via @recall {}", k.marker()));
        }
        stub.push(']');
        if stub.len() < before {
            out[i].content = stub;
            out[i].meta.skill_collapsed = true;
            report.collapsed += 1;
            report.freed_bytes += (before - out[i].content.len()) as u64;
        }
    }
    Ok((out, report))
}
