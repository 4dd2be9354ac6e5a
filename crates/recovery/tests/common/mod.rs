//! What the recovery property tests share: the tool-call ids of generated histories, and the
//! hostile generators (contents that quote markers of blobs the archive holds and of blobs it
//! does not, salvage's own suffix pasted by a user, emoji and CJK where the cuts fall; settings
//! at 0, 1 and huge values) with the seeded archive and the checks they are run against.

// Each test binary uses its own subset.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use proptest::collection::vec;
use proptest::prelude::*;
use salvage_recovery::archive::{Archive, MemoryArchive};
use salvage_recovery::ladder;
use salvage_recovery::recoverable::lost;
use salvage_recovery::task::task_index;
use salvage_types::ccr_key::marker_for;
use salvage_types::message::{Message, ToolCall};
use salvage_types::CcrKey;
use std::sync::LazyLock;

/// The request-size model of the engine tests: the compact JSON of the history.
pub struct JsonWire;
impl salvage_recovery::engine::Wire for JsonWire {
    fn request_bytes(&self, history: &[Message], _: &salvage_recovery::engine::RequestParams) -> u64 {
        serde_json::to_vec(history).map_or(0, |v| v.len() as u64)
    }
}

/// The engine's world in these tests: `archive` and `lookup`, the built-in summarizer, no hooks
/// and the [`JsonWire`] size model.
pub fn engine_io<'a>(
    archive: &'a mut dyn Archive,
    lookup: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    (summarizer, hooks): (
        &'a mut salvage_recovery::summarizer::Builtin,
        &'a mut salvage_recovery::compaction::NoHooks,
    ),
) -> salvage_recovery::engine::EngineIo<'a> {
    salvage_recovery::engine::EngineIo { archive, lookup, summarizer, hooks, wire: &JsonWire }
}

/// A turn of `history` as sent, with the default settings, a 200 000-token window and no learned
/// cap (tests change what they need with struct update syntax).
pub fn turn_input(history: Vec<Message>) -> salvage_recovery::engine::TurnInput {
    salvage_recovery::engine::TurnInput {
        history,
        config: salvage_types::Config::default(),
        model: salvage_recovery::budget::ModelInfo {
            context_window: 200_000,
            max_output: 8_192,
            default_output: 4_096,
        },
        output_cap: 8_192,
        surface: salvage_recovery::budget::Surface::Agent,
        provider_edits: false,
        session: salvage_recovery::session::SessionState::with_cap(None),
        compaction: salvage_recovery::compaction::CompactionState::default(),
        mode: salvage_recovery::engine::TurnMode::AsSent,
        rung3_keep: ladder::RUNG3_KEEP,
        provider: None,
        model_name: None,
        settings: Default::default(),
    }
}

/// The ids of the next `n` tool calls of a generated history: `call_1`, `call_2`, … counted by
/// `call` across the history.
pub fn next_call_ids(call: &mut usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            *call += 1;
            format!("call_{call}")
        })
        .collect()
}

/// Blobs the seeded archive holds before the stage runs: a log and a transcript.
fn seed_blobs() -> Vec<Vec<u8>> {
    let log = "an old log archived earlier: 世界 🙂 é\n".repeat(40).into_bytes();
    let transcript = serde_json::to_vec(&vec![
        Message::user("an earlier question <<ccr:0123456789abcdef>>"),
        Message::assistant("an earlier answer 日本語"),
    ])
    .unwrap();
    vec![log, transcript]
}

static HELD: LazyLock<Vec<String>> =
    LazyLock::new(|| seed_blobs().iter().map(|b| CcrKey::of(b).short()).collect());

pub fn seeded() -> MemoryArchive {
    let mut mem = MemoryArchive::new();
    for b in seed_blobs() {
        mem.put(&b).unwrap();
    }
    mem
}

fn suffix(key: &str) -> String {
    format!("\n[full content recoverable via @recall {}]", marker_for(key))
}

/// Mixed text of about `len` bytes whose characters are 1 to 4 bytes wide (and a ZWJ emoji
/// sequence), so any byte offset may fall inside a character.
fn filler(len: usize, seed: u8) -> String {
    let units = ["output line ", "\n", "🙂", "世界", "é", "👨‍👩‍👧", "x", "{\"k\": 1};\n", "ção "];
    let mut s = String::with_capacity(len.saturating_add(32));
    let mut i = usize::from(seed);
    while s.len() < len {
        s.push_str(units[i % units.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    s
}

fn unheld_key() -> impl Strategy<Value = String> {
    "[0-9a-f]{16}"
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z ]{1,30}",
        2 => (1usize..30).prop_map(|n| "🙂".repeat(n)),
        2 => (1usize..30).prop_map(|n| "世界".repeat(n)),
        1 => (1usize..30).prop_map(|n| "é".repeat(n)),
        1 => Just("\n".to_string()),
        1 => (0usize..2).prop_map(|i| format!("see {} here", marker_for(&HELD[i]))),
        1 => unheld_key().prop_map(|k| marker_for(&k)),
        1 => (0usize..2).prop_map(|i| suffix(&HELD[i])),
        1 => unheld_key().prop_map(|k| suffix(&k)),
        3 => (100usize..12_000, any::<u8>()).prop_map(|(n, s)| filler(n, s)),
        1 => Just(ladder::COMPACTION_NOTICE.to_string()),
        1 => Just(salvage_recovery::payload::NOTICE_MARKER.to_string()),
    ]
}

/// A content: pieces, sometimes ending with our suffix (of a held or an unheld key) or being
/// one of our stubs, as a user pasting them would write.
fn text() -> impl Strategy<Value = String> {
    (vec(piece(), 0..8), 0u8..10, unheld_key(), 0usize..2).prop_map(|(pieces, end, k, h)| {
        let mut s = pieces.concat();
        match end {
            0 => s.push_str(&suffix(&HELD[h])),
            1 => s.push_str(&suffix(&k)),
            2 => s = format!("[Old tool result cleared — 3 lines, 20 chars, text] {}", marker_for(&HELD[h])),
            _ => {}
        }
        s
    })
}

#[derive(Debug, Clone)]
enum Step {
    User(String),
    Feedback(String),
    Assistant(String),
    Tools { results: Vec<(String, bool)>, read: Option<(u8, u8)>, drop_result: bool, orphan: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => text().prop_map(Step::User),
        1 => text().prop_map(Step::Feedback),
        2 => text().prop_map(Step::Assistant),
        3 => (
            vec((text(), prop::bool::weighted(0.1)), 1..4),
            prop::option::of((0u8..2, 0u8..3)),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(results, read, drop_result, orphan)| Step::Tools { results, read, drop_result, orphan }),
    ]
}

pub fn history() -> impl Strategy<Value = Vec<Message>> {
    (text(), text(), vec(step(), 0..24)).prop_map(|(sys, task, steps)| {
        let mut h = vec![Message::system(sys), Message::user(format!("task: {task}"))];
        let mut call = 0;
        for s in steps {
            match s {
                Step::User(t) => h.push(Message::user(t)),
                Step::Feedback(t) => {
                    let mut m = Message::user(t);
                    m.meta.agent_feedback = true;
                    h.push(m);
                }
                Step::Assistant(t) => h.push(Message::assistant(t)),
                Step::Tools { results, read, drop_result, orphan } => {
                    let mut a = Message::assistant("");
                    let ids = next_call_ids(&mut call, results.len());
                    for id in &ids {
                        let (name, arguments) = match read {
                            Some((path, range)) => {
                                let path = ["a.rs", "b.rs"][usize::from(path)];
                                let args = match range {
                                    0 => serde_json::json!({"path": path}),
                                    1 => serde_json::json!({"path": path, "offset": 1, "limit": 50}),
                                    _ => {
                                        serde_json::json!({"path": path, "offset": u64::MAX, "limit": 9})
                                    }
                                };
                                ("read_file", args)
                            }
                            None => ("run", serde_json::json!({"cmd": id})),
                        };
                        a.tool_calls.push(ToolCall {
                            id: id.clone(),
                            kind: "function".into(),
                            name: name.into(),
                            arguments,
                        });
                    }
                    h.push(a);
                    for (k, (id, (content, verbatim))) in ids.iter().zip(results).enumerate() {
                        if drop_result && k == 0 {
                            continue;
                        }
                        let mut t = Message::tool(id.clone(), content);
                        t.meta.preserve_verbatim = verbatim;
                        h.push(t);
                    }
                    if orphan {
                        h.push(Message::tool("ghost", "stray result 🙂"));
                    }
                }
            }
        }
        h
    })
}

pub fn count() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), Just(1), Just(2), 3usize..12, Just(usize::MAX)]
}

pub fn limit() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), Just(1), 2usize..300, 4_900usize..5_200, Just(20_000), Just(usize::MAX)]
}

pub fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(1), 2u64..3_000, 3_000u64..120_000, Just(u64::MAX)]
}

pub fn turns() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0), Just(1), 2u32..8, Just(u32::MAX)]
}

pub fn nothing_lost(input: &[Message], output: &[Message], mem: &MemoryArchive) -> Result<(), TestCaseError> {
    let lookup = |k: &str| mem.get(k);
    let l = lost(input, output, &lookup);
    prop_assert!(l.is_empty(), "lost: {l:?}");
    Ok(())
}

pub fn task_of(h: &[Message]) -> Message {
    h[task_index(h).unwrap()].clone()
}
