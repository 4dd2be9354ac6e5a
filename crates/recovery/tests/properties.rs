//! Property tests over generated histories with native tool calls: after every rung the pairing
//! is valid, the task is kept, the history never grows (beyond its pairing repair and the notice),
//! and with an archive nothing is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

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
    /// Calls with result sizes; `drop_result` loses one result, `orphan` adds a stray result.
    Tools {
        results: Vec<usize>,
        drop_result: bool,
        orphan: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..3_000).prop_map(Step::User),
        (0usize..12_000).prop_map(Step::Assistant),
        (prop::collection::vec(0usize..30_000, 1..4), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(results, d, o)| Step::Tools { results, drop_result: d && o, orphan: o }),
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
                Step::Tools { results, drop_result, orphan } => {
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
                    for (k, (id, len)) in ids.iter().zip(&results).enumerate() {
                        if drop_result && k == 0 {
                            continue;
                        }
                        h.push(Message::tool(id.clone(), content(*len, seed.wrapping_add(k as u8))));
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

/// The ids of the next `n` tool calls of a generated history: `call_1`, `call_2`, … counted by
/// `call` across the history.
fn next_call_ids(call: &mut usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            *call += 1;
            format!("call_{call}")
        })
        .collect()
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
        prop_assert_eq!(once, twice);
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile content and settings (issue #12): contents that quote markers of blobs the archive
// holds and of blobs it does not, salvage's own suffix pasted by a user, emoji and CJK where the
// cuts fall, and settings at 0, 1 and huge values, through every stage and the turn engine.
// Properties: nothing lost (`recoverable::lost`), no panic, pairing valid after every rung, the
// task survives, and the engine never sends the same history twice in a row.
// ---------------------------------------------------------------------------------------------

mod hostile {
    use super::*;
    use proptest::collection::vec;
    use salvage_recovery::compaction::{self, CompactionState, NoHooks, NoMemory, Plan};
    use salvage_recovery::engine::{
        Action, Answer, EngineIo, RequestParams, Turn, TurnInput, TurnMode, Wire,
    };
    use salvage_recovery::recoverable::lost;
    use salvage_recovery::summarizer::{Builtin, Cancel};
    use salvage_recovery::{dedup, microcompact, shrink, tool_budget, trim};
    use salvage_types::capture::{Failure, Outcome, StopReason};
    use salvage_types::ccr_key::marker_for;
    use salvage_types::event::{EventBody, StepOutcome};
    use salvage_types::{CcrKey, Config};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::LazyLock;

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

    fn seeded() -> MemoryArchive {
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
                2 => {
                    s = format!(
                        "[Old tool result cleared — 3 lines, 20 chars, text] {}",
                        marker_for(&HELD[h])
                    )
                }
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

    pub(super) fn history() -> impl Strategy<Value = Vec<Message>> {
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

    fn count() -> impl Strategy<Value = usize> {
        prop_oneof![Just(0), Just(1), Just(2), 3usize..12, Just(usize::MAX)]
    }

    fn limit() -> impl Strategy<Value = usize> {
        prop_oneof![Just(0), Just(1), 2usize..300, 4_900usize..5_200, Just(20_000), Just(usize::MAX)]
    }

    fn bytes() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0), Just(1), 2u64..3_000, 3_000u64..120_000, Just(u64::MAX)]
    }

    fn turns() -> impl Strategy<Value = u32> {
        prop_oneof![Just(0), Just(1), 2u32..8, Just(u32::MAX)]
    }

    fn nothing_lost(input: &[Message], output: &[Message], mem: &MemoryArchive) -> Result<(), TestCaseError> {
        let lookup = |k: &str| mem.get(k);
        let l = lost(input, output, &lookup);
        prop_assert!(l.is_empty(), "lost: {l:?}");
        Ok(())
    }

    fn task_of(h: &[Message]) -> Message {
        h[task_index(h).unwrap()].clone()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn every_rung_on_hostile_content_and_settings(
            h in history(),
            keep in count(),
            rung3_keep in count(),
            per_result in limit(),
            per_turn in limit(),
            payload_budget in prop::option::of(bytes()),
        ) {
            let task = task_of(&h);
            for rung in [Rung::Aggressive, Rung::Emergency, Rung::Nuclear] {
                let mut mem = seeded();
                let out = {
                    let mut ctx = RungContext {
                        archiver: Archiver::new(Some(&mut mem as &mut dyn Archive)),
                        keep,
                        limits: Limits { per_result, per_turn },
                        payload_budget,
                        rung3_keep,
                    };
                    ladder::apply(rung, &h, &mut ctx).unwrap()
                };
                prop_assert!(pairing::is_valid(&out.history), "pairing after {rung:?}");
                prop_assert!(task_survives(&task, &out.history), "task after {rung:?}");
                nothing_lost(&h, &out.history, &mem)?;
                // Everything a rung drops or cuts goes through the archive: with CCR off nothing
                // panics either.
                let mut ctx = RungContext {
                    archiver: Archiver::new(None),
                    keep,
                    limits: Limits { per_result, per_turn },
                    payload_budget,
                    rung3_keep,
                };
                let off = ladder::apply(rung, &h, &mut ctx).unwrap();
                prop_assert!(pairing::is_valid(&off.history));
                prop_assert!(task_survives(&task, &off.history));
            }
        }

        #[test]
        fn shrink_loses_nothing_and_never_grows(h in history(), budget in bytes()) {
            let mut mem = seeded();
            let (out, r) = shrink::shrink(&h, budget, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
            nothing_lost(&h, &out, &mem)?;
            prop_assert!(history_weight(&out) <= history_weight(&h));
            prop_assert_eq!(r.fits, history_weight(&out) <= budget);
            prop_assert_eq!(out.len(), h.len());
        }

        #[test]
        fn tool_budget_applies_any_limit(h in history(), per_result in limit(), per_turn in limit()) {
            let (h, _) = pairing::repair(&h);
            for ccr in [true, false] {
                let mut mem = seeded();
                let out = {
                    let mut a = if ccr { Archiver::new(Some(&mut mem as &mut dyn Archive)) } else { Archiver::new(None) };
                    tool_budget::apply(&h, Limits { per_result, per_turn }, &mut a).unwrap().0
                };
                if ccr {
                    nothing_lost(&h, &out, &mem)?;
                }
                prop_assert!(pairing::is_valid(&out));
                let room = if ccr { salvage_recovery::archive::SUFFIX_LEN } else { 0 };
                for (before, after) in h.iter().zip(&out) {
                    prop_assert!(after.content.len() <= before.content.len(), "never heavier");
                    if before.role == Role::Tool && !before.meta.preserve_verbatim && before.content.len() > per_result {
                        prop_assert!(
                            after.content.len() <= per_result.saturating_add(room),
                            "a result over the limit {per_result}: {} -> {} bytes",
                            before.content.len(),
                            after.content.len()
                        );
                    }
                }
            }
        }

        #[test]
        fn microcompact_twice_loses_nothing(
            h in history(),
            turn in turns(),
            truncate in turns(),
            summarize in turns(),
            later in turns(),
        ) {
            let mut mem = seeded();
            let first = {
                let lookup_mem = mem.clone();
                let lookup = |k: &str| lookup_mem.get(k);
                let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
                microcompact::microcompact(&h, turn, microcompact::Ages { truncate, summarize }, &mut a, &lookup).unwrap().0
            };
            nothing_lost(&h, &first, &mem)?;
            prop_assert!(history_weight(&first) <= history_weight(&h));
            // Later, older: previews become stubs; the markers lead back to the originals.
            let second = {
                let lookup_mem = mem.clone();
                let lookup = |k: &str| lookup_mem.get(k);
                let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
                let ages = microcompact::Ages { truncate: 0, summarize: later };
                microcompact::microcompact(&first, u32::MAX, ages, &mut a, &lookup).unwrap().0
            };
            nothing_lost(&h, &second, &mem)?;
            prop_assert!(history_weight(&second) <= history_weight(&first));
        }

        #[test]
        fn trim_and_dedup_lose_nothing(h in history()) {
            let mut mem = seeded();
            let (t, _) = trim::trim(&h, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
            nothing_lost(&h, &t, &mem)?;
            prop_assert!(history_weight(&t) <= history_weight(&h));
            let (again, _) = trim::trim(&t, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
            prop_assert_eq!(&again, &t, "trim is idempotent");
            let (d, _) = dedup::dedup(&h, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
            nothing_lost(&h, &d, &mem)?;
            prop_assert!(history_weight(&d) <= history_weight(&h));
            prop_assert_eq!(pairing::is_valid(&d), pairing::is_valid(&h));
        }

        #[test]
        fn the_compaction_pipeline_on_hostile_plans(
            h in history(),
            budget in bytes(),
            min_keep_recent in count(),
            window in prop_oneof![Just(0usize), Just(1), 1_000usize..500_000, Just(usize::MAX)],
            recorded in any::<bool>(),
        ) {
            let valid = pairing::is_valid(&h);
            let task = task_of(&h);
            let mut mem = seeded();
            let mut state = CompactionState::default();
            let o = {
                let lookup_mem = mem.clone();
                let lookup = |k: &str| lookup_mem.get(k);
                let mut status = |_: compaction::Phase, _: &str| {};
                // A summary that passes the quality gate, so level 2 runs to the end.
                let mut summary = salvage_recovery::summarizer::Recorded::new(vec![
                    "## Task\n- the task as asked 🙂, kept with paths a.rs and b.rs\n## Done\n- read both files; ran the commands\n".repeat(3),
                ]);
                let mut io = compaction::Io {
                    archiver: Archiver::new(Some(&mut mem as &mut dyn Archive)),
                    lookup: &lookup,
                    summarizer: if recorded { &mut summary } else { &mut Builtin },
                    hooks: &mut NoHooks,
                    memory: &mut NoMemory,
                    status: &mut status,
                    cancel: &Cancel::new(),
                };
                let plan = Plan { budget, trigger: salvage_types::event::Trigger::Manual, min_keep_recent, summarizer_window_chars: window };
                compaction::compact(&h, &plan, &mut state, &mut io).unwrap()
            };
            // Levels 2 and 3 repair pairing; level 1 keeps a valid pairing valid.
            prop_assert!(
                pairing::is_valid(&o.history) || (!valid && o.level < 2),
                "pairing after level {}",
                o.level
            );
            prop_assert!(task_survives(&task, &o.history), "task after level {}", o.level);
            nothing_lost(&h, &o.history, &mem)?;
        }
    }

    /// The request-size model: the compact JSON of the history.
    struct JsonWire;
    impl Wire for JsonWire {
        fn request_bytes(&self, history: &[Message], _: &RequestParams) -> u64 {
            serde_json::to_vec(history).map_or(0, |v| v.len() as u64)
        }
    }

    /// One archive behind both the engine's `archive` and its `lookup`.
    #[derive(Clone)]
    struct Shared(Rc<RefCell<MemoryArchive>>);
    impl Archive for Shared {
        fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, salvage_recovery::archive::ArchiveError> {
            self.0.borrow_mut().put(bytes)
        }
        fn get(&self, short: &str) -> Option<Vec<u8>> {
            self.0.borrow().get(short)
        }
    }

    #[derive(Debug, Clone)]
    struct Scenario {
        history: Vec<Message>,
        fresh: bool,
        rejections: usize,
        report_size: bool,
        status: u16,
        attempts: u32,
        keep: usize,
        per_result: usize,
        per_turn: usize,
        window: u64,
        cap: Option<u64>,
        ages: (u32, u32),
        /// The first accepted answers stop at the output limit (escalation appends and resends).
        cut_off: usize,
    }

    fn scenario() -> impl Strategy<Value = Scenario> {
        (
            history(),
            any::<bool>(),
            0usize..6,
            any::<bool>(),
            prop_oneof![Just(413u16), Just(400), Just(403)],
            prop_oneof![Just(0u32), Just(1), 2u32..6, Just(50), Just(1000)],
            count(),
            (limit(), limit()),
            prop_oneof![Just(0u64), Just(1), 500u64..50_000, Just(128_000), Just(u64::MAX / 8)],
            prop::option::of(bytes()),
            (turns(), turns(), 0usize..4),
        )
            .prop_map(
                |(
                    history,
                    fresh,
                    rejections,
                    report_size,
                    status,
                    attempts,
                    keep,
                    (per_result, per_turn),
                    window,
                    cap,
                    (a, b, cut_off),
                )| {
                    Scenario {
                        history,
                        fresh,
                        rejections,
                        report_size,
                        status,
                        attempts,
                        keep,
                        per_result,
                        per_turn,
                        window,
                        cap,
                        ages: (a, b),
                        cut_off,
                    }
                },
            )
    }

    fn drive(s: &Scenario) -> Result<(), TestCaseError> {
        let config = Config {
            max_recovery_attempts: s.attempts,
            emergency_keep_messages: s.keep,
            tool_result_max_chars: s.per_result,
            tool_result_budget_chars: s.per_turn,
            microcompact_truncate_turns: s.ages.0,
            microcompact_summarize_turns: s.ages.1,
            ..Config::default()
        };
        let model = salvage_recovery::budget::ModelInfo {
            context_window: s.window,
            max_output: 8_192,
            default_output: 4_096,
        };
        let input = TurnInput {
            history: s.history.clone(),
            config,
            model,
            output_cap: 8_192,
            surface: salvage_recovery::budget::Surface::Agent,
            provider_edits: false,
            session: salvage_recovery::session::SessionState::with_cap(s.cap),
            compaction: CompactionState::default(),
            mode: if s.fresh { TurnMode::Fresh } else { TurnMode::AsSent },
            rung3_keep: ladder::RUNG3_KEEP,
            provider: None,
            model_name: None,
            settings: Default::default(),
        };
        let shared = Shared(Rc::new(RefCell::new(seeded())));
        let reader = shared.clone();
        let lookup = move |k: &str| reader.0.borrow().get(k);
        let mut archive = shared.clone();
        let mut summarizer = Builtin;
        let mut hooks = NoHooks;
        let mut io = EngineIo {
            archive: &mut archive,
            lookup: &lookup,
            summarizer: &mut summarizer,
            hooks: &mut hooks,
            wire: &JsonWire,
        };
        let task = task_of(&s.history);
        let mut turn = Turn::new(input);
        let mut rejected = 0;
        let mut accepted = 0;
        let mut previous: Option<Vec<Message>> = None;
        let mut done = false;
        // A skipped rung 3 (the last rung) ends the climb: nothing after it can change the request.
        let mut rung3_skipped = 0;
        for _ in 0..10_000 {
            match turn.next(&mut io).unwrap() {
                Action::Record(r) => {
                    prop_assert!(
                        rung3_skipped == 0,
                        "the turn goes on after a skipped rung 3: {:?}",
                        r.event
                    );
                    if matches!(
                        r.event,
                        EventBody::RecoveryAttempt { rung: 3, outcome: StepOutcome::Skipped, .. }
                    ) {
                        rung3_skipped += 1;
                    }
                }
                Action::Say(_) => {}
                Action::Send(req) => {
                    prop_assert!(
                        rung3_skipped == 0,
                        "attempt {} is sent after a skipped rung 3",
                        req.attempt
                    );
                    if let Some(p) = &previous {
                        prop_assert!(
                            p != &req.history,
                            "attempt {} sends the previous history again",
                            req.attempt
                        );
                    }
                    if s.fresh || req.attempt > 0 {
                        prop_assert!(pairing::is_valid(&req.history), "pairing of attempt {}", req.attempt);
                    }
                    prop_assert!(task_survives(&task, &req.history), "task of attempt {}", req.attempt);
                    {
                        // The live history loses nothing. (The request itself may leave out what
                        // its pairing repair drops, such as orphans: the history keeps them.)
                        let mem = shared.0.borrow();
                        nothing_lost(&s.history, turn.history(), &mem)?;
                    }
                    previous = Some(req.history.clone());
                    let answer = if rejected < s.rejections {
                        rejected += 1;
                        Answer::Rejected {
                            failure: Failure {
                                status: Some(s.status),
                                message: "Request Entity Too Large: prompt is too long".into(),
                                transport: None,
                                rejected_request_bytes: s.report_size.then_some(req.bytes),
                            },
                            counted_tokens: None,
                        }
                    } else {
                        accepted += 1;
                        Answer::Accepted {
                            stop_reason: if accepted <= s.cut_off {
                                StopReason::MaxTokens
                            } else {
                                StopReason::EndTurn
                            },
                            content: "done 🙂".into(),
                            input_tokens: req.estimated_tokens,
                            cleared_tool_uses: 0,
                            cleared_tokens: 0,
                        }
                    };
                    turn.answer(answer).unwrap();
                }
                Action::Done(_) => {
                    done = true;
                    break;
                }
            }
        }
        prop_assert!(done, "the turn ends");
        prop_assert!(turn.attempts() <= s.attempts);
        let mem = shared.0.borrow();
        nothing_lost(&s.history, turn.history(), &mem)?;
        Ok(())
    }

    /// `testdata/corpus/no-op-rungs-are-not-sent`: a history no rung can shrink, an upstream that
    /// rejects everything and 1000 attempts. Each rung is a no-op once; after rung 3 (the last)
    /// nothing can change the request, so the turn ends instead of counting through 997 more
    /// skipped rung-3 attempts.
    #[test]
    fn a_no_op_rung_3_ends_the_climb_whatever_the_attempts_left() {
        for attempts in [3u32, 4, 1000, u32::MAX] {
            let input = TurnInput {
                history: vec![
                    Message::system("You are a coding agent."),
                    Message::user("Summarize the failing test in crates/store in one line."),
                ],
                config: Config { max_recovery_attempts: attempts, ..Config::default() },
                model: salvage_recovery::budget::ModelInfo {
                    context_window: 4_000_000,
                    max_output: 8_192,
                    default_output: 4_096,
                },
                output_cap: 8_192,
                surface: salvage_recovery::budget::Surface::Agent,
                provider_edits: false,
                session: salvage_recovery::session::SessionState::with_cap(None),
                compaction: CompactionState::default(),
                mode: TurnMode::AsSent,
                rung3_keep: ladder::RUNG3_KEEP,
                provider: None,
                model_name: None,
                settings: Default::default(),
            };
            let mut archive = MemoryArchive::new();
            let lookup = |_: &str| None;
            let (mut summarizer, mut hooks) = (Builtin, NoHooks);
            let mut io = EngineIo {
                archive: &mut archive,
                lookup: &lookup,
                summarizer: &mut summarizer,
                hooks: &mut hooks,
                wire: &JsonWire,
            };
            let mut turn = Turn::new(input);
            let (mut sent, mut attempts_seen, mut outcome) = (0, Vec::new(), None);
            for _ in 0..10_000 {
                match turn.next(&mut io).unwrap() {
                    Action::Record(r) => {
                        if let EventBody::RecoveryAttempt { rung, outcome, .. } = r.event {
                            attempts_seen.push((rung, outcome));
                        }
                    }
                    Action::Say(_) => {}
                    Action::Send(_) => {
                        sent += 1;
                        turn.answer(Answer::Rejected {
                            failure: Failure {
                                status: Some(400),
                                message: "prompt is too long: 300000 tokens > 200000 maximum".into(),
                                transport: None,
                                rejected_request_bytes: None,
                            },
                            counted_tokens: None,
                        })
                        .unwrap();
                    }
                    Action::Done(o) => {
                        outcome = Some(o);
                        break;
                    }
                }
            }
            assert_eq!(outcome, Some(Outcome::Exhausted), "attempts = {attempts}");
            assert_eq!(sent, 1, "only the captured request is sent (attempts = {attempts})");
            assert_eq!(
                attempts_seen,
                vec![(1, StepOutcome::Skipped), (2, StepOutcome::Skipped), (3, StepOutcome::Skipped)],
                "one skipped attempt per rung (attempts = {attempts})"
            );
            assert_eq!(turn.attempts(), 3, "attempts = {attempts}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 250, ..ProptestConfig::default() })]

        #[test]
        fn the_turn_engine_against_a_rejecting_upstream(s in scenario()) {
            drive(&s)?;
        }
    }
}
