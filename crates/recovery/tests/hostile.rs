//! Hostile settings and content (issue #12): each case here panicked, or silently did nothing,
//! before its fix. The property tests in `hostile_stages.rs` and `hostile_engine.rs` search the
//! same space at random; the minimal inputs they found are kept here as plain regression tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, Archiver, MemoryArchive, SUFFIX_LEN};
use salvage_recovery::compaction::{compact, CompactionState, Io, NoHooks, NoMemory, Outcome, Plan};
use salvage_recovery::pairing;
use salvage_recovery::recoverable::lost;
use salvage_recovery::summarizer::{Builtin, Cancel, Recorded, Summarizer};
use salvage_recovery::task::{task_index, task_survives};
use salvage_recovery::tool_budget::{self, Limits};
use salvage_types::event::Trigger;
use salvage_types::{Message, ToolCall};

fn call(ids: &[&str]) -> Message {
    let mut a = Message::assistant("");
    for id in ids {
        a.tool_calls.push(ToolCall {
            id: (*id).into(),
            kind: "function".into(),
            name: "run".into(),
            arguments: serde_json::json!({"cmd": id}),
        });
    }
    a
}

fn output(n: usize) -> String {
    (0..n).map(|i| format!("line {i}: 日本語 output 🙂\n")).collect()
}

/// `CHATCLI_TOOL_RESULT_MAX_CHARS` below the preview's head + tail (4 000 + 1 000) underflowed
/// in debug; in release the limit was silently not applied. A result over the limit now becomes
/// at most the limit plus the archive suffix (left whole when that would not be shorter).
#[test]
fn a_per_result_limit_below_the_preview_is_applied() {
    for limit in [0, 1, 10, 63, 64, 65, 100, 200, 1_000, 4_999, 5_000, 5_100, 20_000] {
        for len_lines in [1, 3, 20, 200, 2_000] {
            let result = output(len_lines);
            let h = vec![
                Message::system("sys"),
                Message::user("run it"),
                call(&["c1"]),
                Message::tool("c1", result.clone()),
                Message::assistant("done"),
            ];
            for ccr in [true, false] {
                let mut mem = MemoryArchive::new();
                let (out, _) = {
                    let mut a = if ccr {
                        Archiver::new(Some(&mut mem as &mut dyn Archive))
                    } else {
                        Archiver::new(None)
                    };
                    tool_budget::apply(&h, Limits { per_result: limit, per_turn: usize::MAX }, &mut a)
                        .unwrap()
                };
                let cut = &out[3].content;
                let room = if ccr { SUFFIX_LEN } else { 0 };
                if result.len() <= limit {
                    assert_eq!(cut, &result, "within the limit: untouched");
                } else if limit.saturating_add(room) >= result.len() {
                    // Cutting to the limit and adding the suffix would not make it shorter.
                    assert!(cut.len() <= result.len(), "never heavier");
                } else {
                    assert!(
                        cut.len() <= limit + room,
                        "limit {limit}, {} bytes became {} bytes (ccr {ccr})",
                        result.len(),
                        cut.len()
                    );
                }
                if ccr {
                    let lookup = |k: &str| mem.get(k);
                    assert_eq!(lost(&h, &out, &lookup), vec![], "limit {limit}");
                }
            }
        }
    }
}

/// A tiny per-turn limit cut results shorter than head + tail: the same underflow.
#[test]
fn a_per_turn_limit_below_short_results_does_not_panic() {
    let h = vec![
        Message::user("run both"),
        call(&["a", "b"]),
        Message::tool("a", "x".repeat(60)),
        Message::tool("b", "y".repeat(3_000)),
    ];
    for per_turn in [0, 1, 100] {
        let mut mem = MemoryArchive::new();
        let (out, _) = {
            let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
            tool_budget::apply(&h, Limits { per_result: 20_000, per_turn }, &mut a).unwrap()
        };
        let lookup = |k: &str| mem.get(k);
        assert_eq!(lost(&h, &out, &lookup), vec![]);
        assert!(pairing::is_valid(&out));
    }
}

/// Compacts `h` into an in-memory archive, with no hooks and no memory worker; the outcome and
/// the archive.
fn compact_in_memory(
    h: &[Message],
    plan: &Plan,
    summarizer: &mut dyn Summarizer,
) -> (Outcome, MemoryArchive) {
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let o = {
        let lookup = |_: &str| None;
        let mut status = |_: salvage_recovery::compaction::Phase, _: &str| {};
        let mut io = Io {
            archiver: Archiver::new(Some(&mut mem as &mut dyn Archive)),
            lookup: &lookup,
            summarizer,
            hooks: &mut NoHooks,
            memory: &mut NoMemory,
            status: &mut status,
            cancel: &Cancel::new(),
        };
        compact(h, plan, &mut state, &mut io).unwrap()
    };
    (o, mem)
}

/// `min_keep_recent = 0` indexed one past the end of the history when snapping the cut.
#[test]
fn compaction_with_min_keep_recent_zero() {
    let mut h = vec![Message::system("sys"), Message::user("the task: fix the build")];
    for i in 0..8 {
        let id = format!("c{i}");
        h.push(call(&[&id]));
        h.push(Message::tool(id, output(300)));
    }
    let task = h[task_index(&h).unwrap()].clone();
    for budget in [0, 500, 20_000] {
        let plan =
            Plan { budget, trigger: Trigger::Manual, min_keep_recent: 0, summarizer_window_chars: 100_000 };
        let (o, mem) = compact_in_memory(&h, &plan, &mut Builtin);
        assert!(pairing::is_valid(&o.history));
        assert!(task_survives(&task, &o.history));
        let lookup = |k: &str| mem.get(k);
        assert_eq!(lost(&h, &o.history, &lookup), vec![], "budget {budget}");
    }
}

/// A read call whose `offset` + `limit` overflow (hostile arguments) overflowed computing the
/// range's last line. Found by `clippy::arithmetic_side_effects`.
#[test]
fn a_read_range_at_the_end_of_u64_does_not_overflow() {
    use salvage_recovery::dedup::{dedup, read_of};
    let args = serde_json::json!({"path": "a.rs", "offset": u64::MAX, "limit": 10});
    let (_, range) = read_of("read_file", &args).unwrap();
    assert_eq!(range.lines, Some((u64::MAX, u64::MAX)));
    let mut first = call(&["r1"]);
    first.tool_calls[0].name = "read_file".into();
    first.tool_calls[0].arguments = args.clone();
    let mut second = first.clone();
    second.tool_calls[0].id = "r2".into();
    let body = "fn a() {}\n".repeat(100);
    let h = vec![
        Message::user("read it twice"),
        first,
        Message::tool("r1", body.clone()),
        second,
        Message::tool("r2", body.clone()),
    ];
    let mut mem = MemoryArchive::new();
    let (out, report) = dedup(&h, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
    assert_eq!(report.stubbed, 1);
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out, &lookup), vec![]);
}

const SUMMARY: &str =
    "## Task\n- tidy up the repository: files, README, changelog\n## Done\n- ran c0 to c3, all fine";

/// Found by the property `the_turn_engine_against_a_rejecting_upstream`: level 2's pairing
/// repair removed an orphan tool result in the kept tail without archiving it, so it was lost.
/// Orphans are archived first and the summary carries their marker (behaviour spec section 6).
#[test]
fn level_2_archives_the_orphans_its_pairing_repair_removes() {
    let mut h = vec![Message::system("sys"), Message::user(format!("task: tidy up\n{}", output(20)))];
    for i in 0..4 {
        let id = format!("c{i}");
        h.push(call(&[&id]));
        h.push(Message::tool(id, output(40)));
    }
    h.push(Message::user("and then? the README and the changelog too"));
    h.push(call(&["last"]));
    h.push(Message::tool("last", "ok"));
    h.push(Message::tool("ghost", "stray result 🙂"));
    for budget in [0, 2_000] {
        let plan =
            Plan { budget, trigger: Trigger::Auto, min_keep_recent: 6, summarizer_window_chars: 100_000 };
        let (o, mem) = compact_in_memory(&h, &plan, &mut Recorded::new(vec![SUMMARY.into()]));
        assert!(pairing::is_valid(&o.history));
        let lookup = |k: &str| mem.get(k);
        assert_eq!(lost(&h, &o.history, &lookup), vec![], "budget {budget}, level {}", o.level);
    }
}
