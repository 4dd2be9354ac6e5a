//! The compaction pipeline on a realistic 200-message agent session and on small crafted ones:
//! within budget, pairing valid, task kept, every marker resolving; no-op, failed and cancelled
//! compactions leave no undo snapshot and fire PostCompact with outcome=skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, ArchiveError, Archiver, MemoryArchive};
use salvage_recovery::compaction::{
    compact, CompactError, CompactionState, HookCall, HookResult, Hooks, Io, MemorySink, Plan,
};
use salvage_recovery::pairing;
use salvage_recovery::summarizer::{
    Builtin, Cancel, Recorded, SummarizeError, Summarizer, SummaryAnswer, SummaryRequest,
};
use salvage_types::ccr_key::find_markers;
use salvage_types::event::{EventBody, StepOutcome, Trigger};
use salvage_types::{history_weight, CcrKey, Message};

fn session() -> Vec<Message> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sessions/agent-200.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[derive(Default)]
struct RecordingHooks(Vec<(String, Option<StepOutcome>)>);
impl Hooks for RecordingHooks {
    fn fire(&mut self, call: &HookCall) -> Vec<HookResult> {
        self.0.push((call.event.to_string(), call.outcome));
        vec![HookResult { name: "audit".into(), outcome: StepOutcome::Applied, error: None, millis: 1 }]
    }
}

#[derive(Default)]
struct Memory(usize);
impl MemorySink for Memory {
    fn flush(&mut self, segment: &[Message]) {
        self.0 += segment.len();
    }
}

struct Run {
    out: Result<salvage_recovery::compaction::Outcome, CompactError>,
    hooks: Vec<(String, Option<StepOutcome>)>,
    memory: usize,
    phases: Vec<String>,
}

fn run(
    h: &[Message],
    budget: u64,
    state: &mut CompactionState,
    archive: &mut dyn Archive,
    summarizer: &mut dyn Summarizer,
    cancel: &Cancel,
) -> Run {
    let mut hooks = RecordingHooks::default();
    let mut memory = Memory::default();
    let mut phases = Vec::new();
    let mut status = |_: salvage_recovery::compaction::Phase, s: &str| phases.push(s.to_string());
    let lookup = |_: &str| None;
    let out = {
        let mut io = Io {
            archiver: Archiver::new(Some(archive)),
            lookup: &lookup,
            summarizer,
            hooks: &mut hooks,
            memory: &mut memory,
            status: &mut status,
            cancel,
        };
        compact(
            h,
            &Plan { budget, trigger: Trigger::Auto, min_keep_recent: 6, summarizer_window_chars: 400_000 },
            state,
            &mut io,
        )
    };
    Run { out, hooks: hooks.0, memory: memory.0, phases }
}

fn check_guarantees(input: &[Message], out: &[Message], budget: u64, mem: &MemoryArchive) {
    assert!(history_weight(out) <= budget, "{} > {budget}", history_weight(out));
    assert!(pairing::is_valid(out));
    let task = &input[salvage_recovery::task::task_index(input).unwrap()];
    assert!(out.iter().any(|m| m.content == task.content), "task kept");
    let mut n = 0;
    for m in out {
        for k in find_markers(&m.content) {
            let b = mem.get(k).unwrap_or_else(|| panic!("marker {k} resolves"));
            assert_eq!(CcrKey::of(&b).short(), k);
            n += 1;
        }
    }
    assert!(n > 0, "markers present");
}

#[test]
fn builtin_brings_a_200_message_session_within_budget() {
    let h = session();
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let r = run(&h, 120_000, &mut state, &mut mem, &mut Builtin, &Cancel::new());
    let o = r.out.unwrap();
    assert_eq!(o.outcome, StepOutcome::Applied);
    check_guarantees(&h, &o.history, 120_000, &mem);
    let summary = o.history.iter().find(|m| m.meta.is_summary).expect("a level-2 summary");
    assert!(summary.content.starts_with("[STRUCTURED SUMMARY — covering "));
    assert!(summary.content.contains("## Files read") && summary.content.contains("crates/store"));
    assert_eq!(state.undo.len(), 1);
    assert_eq!(state.undo[0], h, "the undo snapshot is the history before the rewrite");
    assert_eq!(state.compactions, 1);
    assert!(r.memory > 0, "the segment went to memory before the rewrite");
    assert_eq!(
        r.hooks,
        vec![("PreCompact".to_string(), None), ("PostCompact".to_string(), Some(StepOutcome::Applied))]
    );
    assert!(r.phases[0].starts_with("📦 Compacting history (200 msgs"));
    assert!(r.phases.iter().any(|p| p.starts_with("🧠 Summarizing")));
    assert!(o
        .events
        .iter()
        .any(|e| matches!(e, EventBody::Compaction { outcome: StepOutcome::Applied, .. })));
}

#[test]
fn recorded_summaries_replay_exactly() {
    let h = session();
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let text = "## Task\n- fix the flaky two_openers test\n## Findings\n- journal_mode=WAL raced before busy_timeout was set\n## Done\n- moved busy_timeout before WAL; migrations under BEGIN IMMEDIATE";
    let r = run(&h, 150_000, &mut state, &mut mem, &mut Recorded::new(vec![text.into()]), &Cancel::new());
    let o = r.out.unwrap();
    check_guarantees(&h, &o.history, 150_000, &mem);
    assert!(o.history.iter().any(|m| m.meta.is_summary && m.content.contains(text)));
    assert!(o
        .events
        .iter()
        .any(|e| matches!(e, EventBody::Compaction { route: Some(r), .. } if r == "recorded")));
}

#[test]
fn a_rejected_summary_is_retried_once_then_level_3_and_backoff() {
    let h = session();
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let mut s = Recorded::new(vec!["I'm sorry, I cannot help with that.".into(), "".into()]);
    let r = run(&h, 60_000, &mut state, &mut mem, &mut s, &Cancel::new());
    let o = r.out.unwrap();
    assert_eq!(o.level, 3);
    let attempts: Vec<bool> = o
        .events
        .iter()
        .filter_map(|e| match e {
            EventBody::SummaryAttempt { passed, .. } => Some(*passed),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![false, false]);
    check_guarantees(&h, &o.history, 60_000, &mem);
    assert_eq!(state.level3, 1);
    // A summary that does not fit sets the back-off: the next two compactions skip level 2.
    let mut state = CompactionState::default();
    let huge =
        "## Files\n".to_string() + &"- crates/store/src/lib.rs was read and analysed in depth\n".repeat(2000);
    let o =
        run(&h, 60_000, &mut state, &mut mem, &mut Recorded::new(vec![huge]), &Cancel::new()).out.unwrap();
    assert_eq!((o.level, state.backoff), (3, 2));
    for left in [1, 0] {
        let o = run(&h, 60_000, &mut state, &mut mem, &mut Builtin, &Cancel::new()).out.unwrap();
        assert!(o.events.iter().any(|e| matches!(e, EventBody::Compaction { backoff_skip: true, .. })));
        assert!(!o.events.iter().any(|e| matches!(e, EventBody::SummaryAttempt { .. })), "level 2 skipped");
        assert_eq!(state.backoff, left);
    }
}

#[test]
fn no_op_failed_and_cancelled_leave_no_undo_snapshot() {
    let small = vec![Message::system("S"), Message::user("hi"), Message::assistant("hello")];
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let r = run(&small, 1_000_000, &mut state, &mut mem, &mut Builtin, &Cancel::new());
    let o = r.out.unwrap();
    assert_eq!(o.outcome, StepOutcome::Skipped);
    assert_eq!(o.history, small);
    assert!(state.undo.is_empty() && state.compactions == 0);
    assert_eq!(r.hooks.last().unwrap(), &("PostCompact".to_string(), Some(StepOutcome::Skipped)));

    struct Broken;
    impl Archive for Broken {
        fn put(&mut self, _: &[u8]) -> Result<CcrKey, ArchiveError> {
            Err(ArchiveError::store(std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full")))
        }
        fn get(&self, _: &str) -> Option<Vec<u8>> {
            None
        }
    }
    let h = session();
    let r = run(&h, 60_000, &mut state, &mut Broken, &mut Builtin, &Cancel::new());
    let Err(CompactError::Archive(e)) = &r.out else { panic!("{:?}", r.out) };
    // The store's error is the source, not a copy of its text.
    let source = std::error::Error::source(e).expect("the store error is the source");
    assert_eq!(
        source.downcast_ref::<std::io::Error>().map(std::io::Error::kind),
        Some(std::io::ErrorKind::StorageFull)
    );
    assert_eq!(e.to_string(), "archive: disk full");
    assert!(state.undo.is_empty());
    assert_eq!(r.hooks.last().unwrap(), &("PostCompact".to_string(), Some(StepOutcome::Skipped)));

    struct CancelsMidway<'a>(&'a Cancel);
    impl Summarizer for CancelsMidway<'_> {
        fn route(&self) -> String {
            "test".into()
        }
        fn summarize(&mut self, _: &SummaryRequest, _: &Cancel) -> Result<SummaryAnswer, SummarizeError> {
            self.0.cancel();
            Err(SummarizeError::Cancelled)
        }
    }
    let cancel = Cancel::new();
    let r = run(&h, 60_000, &mut state, &mut mem, &mut CancelsMidway(&cancel), &cancel);
    assert_eq!(r.out.unwrap_err(), CompactError::Cancelled);
    assert!(state.undo.is_empty(), "cancellation leaves the history untouched and no snapshot");
    assert_eq!(r.hooks.last().unwrap(), &("PostCompact".to_string(), Some(StepOutcome::Skipped)));
}

#[test]
fn verbatim_messages_are_reattached_and_downgraded_when_their_call_is_summarized() {
    let mut h = vec![Message::system("S"), Message::user("investigate the crash")];
    for i in 0..20 {
        let mut a = Message::assistant("");
        a.tool_calls.push(salvage_types::ToolCall {
            id: format!("c{i}"),
            kind: "function".into(),
            name: if i == 2 { "recall".into() } else { "read_file".into() },
            arguments: serde_json::json!({"path": format!("f{i}.rs")}),
        });
        h.push(a);
        let mut t = Message::tool(format!("c{i}"), format!("content of f{i}\n").repeat(600));
        if i == 2 {
            t.meta.preserve_verbatim = true;
            t.content = "recalled original, needed in full\n".repeat(50);
        }
        h.push(t);
    }
    let mut mem = MemoryArchive::new();
    let mut state = CompactionState::default();
    let o = run(&h, 40_000, &mut state, &mut mem, &mut Builtin, &Cancel::new()).out.unwrap();
    assert_eq!(o.level, 2, "{:?}", o.events);
    let v = o.history.iter().position(|m| m.meta.preserve_verbatim).expect("verbatim kept");
    assert!(
        o.history[v - 1].meta.is_summary || o.history[v - 1].content == "investigate the crash",
        "re-attached right after the summary"
    );
    assert_eq!(o.history[v].role.as_str(), "user", "downgraded: its call was summarized away");
    assert_eq!(o.history[v].content, h[7].content, "never cut");
    assert!(pairing::is_valid(&o.history));
}
