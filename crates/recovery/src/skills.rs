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
    for m in out.iter_mut().rev() {
        if m.role == Role::Assistant {
            assistants_after = assistants_after.saturating_add(1);
            continue;
        }
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
            m.content = stub;
            m.meta.skill_collapsed = true;
            report.collapsed = report.collapsed.saturating_add(1);
            report.freed_bytes =
                report.freed_bytes.saturating_add(before.saturating_sub(m.content.len()) as u64);
        }
    }
    Ok((out, report))
}
