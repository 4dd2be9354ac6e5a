//! Property tests of every rung and compaction stage on hostile content and settings (issue
//! #12): contents that quote markers of blobs the archive holds and of blobs it does not,
//! salvage's own suffix pasted by a user, emoji and CJK where the cuts fall, and settings at 0, 1
//! and huge values. Properties: nothing lost (`recoverable::lost`), no panic, pairing valid after
//! every rung, the task survives. (`hostile_engine.rs` runs the same space through the turn
//! engine; `hostile.rs` keeps the minimal cases they found.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{bytes, count, history, limit, nothing_lost, seeded, task_of, turns};
use proptest::prelude::*;
use salvage_recovery::archive::{Archive, Archiver};
use salvage_recovery::compaction::{self, CompactionState, NoHooks, NoMemory, Plan};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::pairing;
use salvage_recovery::summarizer::{Builtin, Cancel};
use salvage_recovery::task::task_survives;
use salvage_recovery::tool_budget::Limits;
use salvage_recovery::{dedup, microcompact, shrink, tool_budget, trim};
use salvage_types::message::Role;
use salvage_types::weight::history_weight;

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
