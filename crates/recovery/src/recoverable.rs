//! "Nothing is lost", as a checkable property (`capture.md` check 4): every input message's
//! content, and each of its tool calls (name and arguments), can be rebuilt from a later
//! history, in place or by following markers recursively through the archive (dropped-message
//! transcripts included). A call's id is not part of it: the pairing repair renames a reused id.

use salvage_types::ccr_key::{find_markers, is_cut, made_from, own_archive_key};
use salvage_types::Message;
use std::collections::HashSet;

/// One input message whose content cannot be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Its index in the input history.
    pub index: usize,
    /// Its role.
    pub role: String,
    /// The length in bytes of what is lost: its content, or the lost call's arguments.
    pub bytes: usize,
    /// The tool call that is lost (`name` and id), when its content is not.
    pub call: Option<String>,
}

/// Everything reachable from a history: its contents, and the archived originals its markers
/// lead to (recursively; a blob that is a JSON array of messages contributes each content).
///
/// Design note (issue #19, peak memory): a text is kept as its BLAKE3 hash, the identity CCR
/// itself relies on, not as the text: the check walks every archived original while the input
/// history is in memory, and keeping the texts held a second copy of all of them.
pub struct Reachable {
    texts: HashSet<[u8; 32]>,
    /// Tool calls, by [`call_key`].
    calls: HashSet<[u8; 32]>,
    /// Keys followed (16-hex short keys).
    pub keys: HashSet<String>,
    /// Markers that led nowhere (not in the archive).
    pub dangling: Vec<String>,
}

impl Reachable {
    /// Walks `history` and the archive behind its markers.
    pub fn from(history: &[Message], lookup: &dyn Fn(&str) -> Option<Vec<u8>>) -> Reachable {
        let mut r = Reachable {
            texts: HashSet::new(),
            calls: HashSet::new(),
            keys: HashSet::new(),
            dangling: Vec::new(),
        };
        let mut queue: Vec<String> = Vec::new();
        for m in history {
            queue.extend(find_markers(&m.content).into_iter().map(str::to_string));
            r.texts.insert(text_key(&m.content));
            r.calls.extend(m.tool_calls.iter().map(call_key));
        }
        while let Some(k) = queue.pop() {
            if !r.keys.insert(k.clone()) {
                continue;
            }
            let Some(bytes) = lookup(&k) else {
                r.dangling.push(k);
                continue;
            };
            let Ok(text) = String::from_utf8(bytes) else { continue };
            if let Ok(msgs) = serde_json::from_str::<Vec<Message>>(&text) {
                for m in msgs {
                    queue.extend(find_markers(&m.content).into_iter().map(str::to_string));
                    r.texts.insert(text_key(&m.content));
                    r.calls.extend(m.tool_calls.iter().map(call_key));
                }
            }
            queue.extend(find_markers(&text).into_iter().map(str::to_string));
            r.texts.insert(text_key(&text));
        }
        r
    }

    /// True when `content` is reachable verbatim.
    pub fn contains(&self, content: &str) -> bool {
        self.texts.contains(&text_key(content))
    }
}

/// The identity a reachable tool call is kept by: its name and arguments (not its id).
fn call_key(c: &salvage_types::ToolCall) -> [u8; 32] {
    let mut bytes = (c.name.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(c.name.as_bytes());
    bytes.extend_from_slice(c.arguments.to_string().as_bytes());
    salvage_types::CcrKey::of(&bytes).0
}

/// The identity a reachable text is kept by.
fn text_key(text: &str) -> [u8; 32] {
    salvage_types::CcrKey::of(text.as_bytes()).0
}

/// The input messages whose content cannot be rebuilt from `output` and the archive. Content
/// that salvage itself had already cut (its own form, every piece in the original its key holds)
/// counts as rebuilt when its archived original is reachable.
pub fn lost(input: &[Message], output: &[Message], lookup: &dyn Fn(&str) -> Option<Vec<u8>>) -> Vec<Lost> {
    let reach = Reachable::from(output, lookup);
    let mut out = Vec::new();
    for (index, m) in input.iter().enumerate() {
        // A call the pairing repair pruned (an empty or repeated id) in a message it kept is
        // gone from the output although its message is not.
        if let Some(c) = m.tool_calls.iter().find(|c| !reach.calls.contains(&call_key(c))) {
            out.push(Lost {
                index,
                role: m.role.as_str().to_string(),
                bytes: usize::try_from(salvage_types::weight::compact_json_len(&c.arguments))
                    .unwrap_or(usize::MAX),
                call: Some(format!("`{}` {}", c.name, c.id)),
            });
            continue;
        }
        if m.content.is_empty() || reach.contains(&m.content) {
            continue;
        }
        // A cut of ours (every piece of it in the original its suffix names), that original
        // reachable: a pasted suffix naming another original does not count, nor does a text
        // that adds to the original, nor a stub (its words are in no original: a stub that is
        // gone was lost, unless it is reachable itself).
        let derived = is_cut(&m.content)
            && own_archive_key(&m.content)
                .and_then(lookup)
                .and_then(|b| String::from_utf8(b).ok())
                .is_some_and(|orig| made_from(&m.content, &orig) && reach.contains(&orig));
        if !derived {
            out.push(Lost { index, role: m.role.as_str().to_string(), bytes: m.content.len(), call: None });
        }
    }
    out
}
