//! Property tests of the ladder over generated histories with native tool calls: after every
//! rung the pairing is valid, the task is kept, the history never grows (beyond its pairing repair
//! and the notice), and with an archive nothing is lost; and pairing repair is idempotent.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::next_call_ids;
use proptest::prelude::*;
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::pairing;
use salvage_recovery::task::{task_index, task_survives};
use salvage_recovery::tool_budget::Limits;
use salvage_types::message::{Message, Role, ToolCall};
use salvage_types::weight::{history_weight, message_weight};

fn content(len: usize, seed: u8) -> String {
    // Mixed ASCII and multi-byte text so that every cut must respect char boundaries.
    let units = ["line of output ", "olá ", "世界 ", "fn main() {}\n", "{\"k\": 1}\n", "é"];
    let mut s = String::with_capacity(len + 16);
    let mut i = usize::from(seed);
    while s.len() < len {
        s.push_str(units[i % units.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    s
}

#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    /// Calls with result sizes; `drop_result` loses one result, `orphan` adds a stray result,
    /// `reversed` answers the calls in the reverse order (still right after them: valid).
    Tools {
        results: Vec<usize>,
        drop_result: bool,
        orphan: bool,
        reversed: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..3_000).prop_map(Step::User),
        (0usize..12_000).prop_map(Step::Assistant),
        (
            prop::collection::vec(0usize..30_000, 1..4),
            any::<bool>(),
            prop::bool::weighted(0.1),
            any::<bool>()
        )
            .prop_map(|(results, d, o, reversed)| Step::Tools {
                results,
                drop_result: d && o,
                orphan: o,
                reversed
            }),
    ]
}

fn history() -> impl Strategy<Value = Vec<Message>> {
    (0usize..8_000, prop::collection::vec(step(), 1..30), any::<u8>()).prop_map(|(sys, steps, seed)| {
        let mut h =
            vec![Message::system(content(sys, seed)), Message::user(format!("task: {}", content(40, seed)))];
        let mut call = 0;
        for (n, s) in steps.into_iter().enumerate() {
            let seed = seed.wrapping_add(n as u8);
            match s {
                Step::User(len) => h.push(Message::user(content(len.max(1), seed))),
                Step::Assistant(len) => h.push(Message::assistant(content(len, seed))),
                Step::Tools { results, drop_result, orphan, reversed } => {
                    let mut a = Message::assistant("");
                    let ids = next_call_ids(&mut call, results.len());
                    a.tool_calls = ids
                        .iter()
                        .map(|id| ToolCall {
                            id: id.clone(),
                            kind: "function".into(),
                            name: "run".into(),
                            arguments: serde_json::json!({"cmd": id}),
                        })
                        .collect();
                    h.push(a);
                    let answers = h.len();
                    for (k, (id, len)) in ids.iter().zip(&results).enumerate() {
                        if drop_result && k == 0 {
                            continue;
                        }
                        h.push(Message::tool(id.clone(), content(*len, seed.wrapping_add(k as u8))));
                    }
                    if reversed {
                        h[answers..].reverse();
                    }
                    if orphan {
                        h.push(Message::tool("ghost", "stray result"));
                    }
                }
            }
        }
        h
    })
}

/// Every content the archive can give back: blobs themselves and the messages of transcripts.
fn archived_contents(mem: &MemoryArchive) -> std::collections::HashSet<String> {
    let mut set = std::collections::HashSet::new();
    for b in mem.blobs() {
        if let Ok(ms) = serde_json::from_slice::<Vec<Message>>(b) {
            set.extend(ms.into_iter().map(|m| m.content));
        }
        set.insert(String::from_utf8_lossy(b).to_string());
    }
    set
}

fn check(rung: Rung, h: &[Message], budget: Option<u64>) -> Result<(), TestCaseError> {
    let mut mem = MemoryArchive::new();
    let outcome = {
        let mut ctx = RungContext {
            archiver: Archiver::new(Some(&mut mem as &mut dyn Archive)),
            keep: 10,
            limits: Limits { per_result: 20_000, per_turn: 200_000 },
            payload_budget: budget,
            rung3_keep: ladder::RUNG3_KEEP,
        };
        ladder::apply(rung, h, &mut ctx).unwrap()
    };
    let out = &outcome.history;
    prop_assert!(pairing::is_valid(out), "pairing invalid after {rung:?}");
    let task = &h[task_index(h).unwrap()];
    prop_assert!(task_survives(task, out), "task lost after {rung:?}");
    let (repaired, _) = pairing::repair(h);
    let notice = out
        .iter()
        .find(|m| m.content.starts_with(ladder::COMPACTION_NOTICE))
        .map(message_weight)
        .unwrap_or(0);
    prop_assert_eq!(
        notice > 0,
        outcome.report.dropped > 0,
        "a notice exactly when a rung drops messages (rung 1: orphans)"
    );
    prop_assert!(history_weight(out) <= history_weight(&repaired) + notice, "{rung:?} grew the history");
    let archived = archived_contents(&mem);
    let kept: std::collections::HashSet<&str> = out.iter().map(|o| o.content.as_str()).collect();
    for m in h.iter().filter(|m| m.role != Role::System) {
        prop_assert!(
            kept.contains(m.content.as_str()) || archived.contains(&m.content),
            "{rung:?} lost a {} message of {} bytes",
            m.role.as_str(),
            m.content.len()
        );
    }
    for o in out {
        for k in salvage_types::ccr_key::find_markers(&o.content) {
            prop_assert!(mem.get(k).is_some(), "marker {k} does not resolve");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn rung1_invariants(h in history()) {
        check(Rung::Aggressive, &h, None)?;
    }

    #[test]
    fn rung2_invariants(h in history()) {
        check(Rung::Emergency, &h, None)?;
    }

    #[test]
    fn rung3_invariants(h in history(), budget in 2_000u64..60_000) {
        check(Rung::Nuclear, &h, Some(budget))?;
    }

    #[test]
    fn pairing_repair_is_idempotent_and_valid(h in history()) {
        let (once, _) = pairing::repair(&h);
        prop_assert!(pairing::is_valid(&once));
        let (twice, r) = pairing::repair(&once);
        prop_assert!(r.is_clean());
        prop_assert_eq!(&*once, &*twice);
    }

    /// `repair` hands a valid history back without copying it: that is only right because the
    /// full repair of a valid history changes nothing. Checked on the generated histories that are
    /// valid as generated and on every repaired one.
    #[test]
    fn the_full_repair_of_a_valid_history_changes_nothing(h in history()) {
        let (once, _) = pairing::repair(&h);
        let mut valid = vec![once.into_owned()];
        if pairing::is_valid(&h) {
            valid.push(h.clone());
        }
        for v in valid {
            let items = v.iter().cloned().enumerate().map(|(i, msg)| pairing::Tracked { origin: Some(i), msg }).collect();
            let (out, r) = pairing::repair_tracked(items);
            prop_assert!(r.is_clean(), "{:?}", r);
            prop_assert_eq!(out.iter().map(|t| t.origin).collect::<Vec<_>>(), (0..v.len()).map(Some).collect::<Vec<_>>());
            prop_assert_eq!(out.into_iter().map(|t| t.msg).collect::<Vec<_>>(), v.clone());
            prop_assert!(matches!(pairing::repair(&v).0, std::borrow::Cow::Borrowed(_)));
        }
    }
}
