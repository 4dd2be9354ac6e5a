//! A session driven through appends, in-place stubs, repeats, a compaction, an undo and two
//! rewinds: `state_at` at every event equals the history kept alongside, byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::{Cost, EventBody, StepOutcome, Trigger};
use salvage_types::Message;
use std::collections::BTreeMap;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap() * 1000).unwrap()
}

struct Driver {
    j: Journal,
    n: u64,
    /// The expected history after every event, indexed by seq.
    expected: BTreeMap<u64, Vec<Message>>,
    live: Vec<Message>,
    compactions: u64,
}

impl Driver {
    fn push(&mut self, body: EventBody, change: HistoryChange) -> u64 {
        self.n += 1;
        match &change {
            HistoryChange::None => {}
            HistoryChange::Append(m) => self.live.extend(m.iter().cloned()),
            HistoryChange::AppendShared(m) => self.live.extend(m.iter().cloned()),
            HistoryChange::Set(h) => self.live = h.clone(),
        }
        let e = NewEvent::new(format!("ev-{}", self.n), ts(self.n), body).with_history(change);
        let v = self.j.version("s").unwrap();
        let a = self.j.append("s", Some(v), vec![e]).unwrap();
        self.expected.insert(a[0].seq, self.live.clone());
        a[0].seq
    }

    fn rewind(&mut self, target: u64, reason: &str) -> u64 {
        self.n += 1;
        let a = self.j.rewind("s", target, reason, &format!("ev-{}", self.n), ts(self.n)).unwrap();
        self.live = self.expected[&target].clone();
        self.expected.insert(a.seq, self.live.clone());
        a.seq
    }
}

fn stubbed(h: &[Message], i: usize, stub: &str) -> Vec<Message> {
    let mut out = h.to_vec();
    out[i].content = stub.to_string();
    out
}

#[test]
fn state_at_every_event_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    j.start_session(
        "s",
        "exactness",
        NewEvent::new(
            "ev-0",
            ts(0),
            EventBody::SessionStarted {
                provider: Some("anthropic".into()),
                model: None,
                context_window: Some(200_000),
                settings: BTreeMap::new(),
                cap: None,
                invalid_settings: Vec::new(),
                request: None,
            },
        )
        .with_history(HistoryChange::Append(vec![
            Message::system("You are an agent."),
            Message::user("fix the build — olá 世界"),
        ])),
    )
    .unwrap();
    let mut d = Driver {
        j,
        n: 0,
        expected: BTreeMap::new(),
        live: vec![Message::system("You are an agent."), Message::user("fix the build — olá 世界")],
        compactions: 0,
    };
    d.expected.insert(1, d.live.clone());
    // Turns with tool results, and repeated identical messages ("ok", "next").
    for t in 0..12 {
        let mut call = Message::assistant("");
        call.tool_calls.push(salvage_types::ToolCall {
            id: format!("c{t}"),
            kind: "function".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": format!("src/{t}.rs")}),
        });
        d.push(
            EventBody::MessageAppended { count: 2 },
            HistoryChange::Append(vec![call, Message::tool(format!("c{t}"), "line\n".repeat(300 + t))]),
        );
        d.push(
            EventBody::MessageAppended { count: 2 },
            HistoryChange::Append(vec![Message::assistant("ok"), Message::user("next")]),
        );
    }
    // In-place stubs that leave the last message unchanged (microcompact, dedup, server edit).
    let before_micro = d.n + 1;
    let h = stubbed(
        &d.live,
        3,
        "[Old tool result cleared — 301 lines, 1505 chars, text] <<ccr:0123456789abcdef>>",
    );
    d.push(EventBody::Microcompact { truncated: 0, summarized: 1, freed_bytes: 1400 }, HistoryChange::Set(h));
    let h = stubbed(&d.live, 7, "[earlier read of src/2.rs superseded]");
    d.push(EventBody::Dedup { stubbed: 1, freed_bytes: 1400 }, HistoryChange::Set(h));
    let h = stubbed(&stubbed(&d.live, 11, "[cleared by provider]"), 15, "[cleared by provider]");
    d.push(
        EventBody::ContextEdit { cleared_tool_uses: 2, cleared_tokens: 800, stubs: 2 },
        HistoryChange::Set(h),
    );
    // A compaction replacing the middle with a summary.
    let mut compacted = vec![
        d.live[0].clone(),
        Message::user("[STRUCTURED SUMMARY — covering 40 earlier messages]\n- read files"),
    ];
    compacted.extend(d.live[d.live.len() - 6..].iter().cloned());
    let compaction = d.push(
        EventBody::Compaction {
            trigger: Trigger::Auto,
            level: 2,
            outcome: StepOutcome::Applied,
            backoff_skip: false,
            route: Some("builtin".into()),
            cost: Cost { calls: 1, input_tokens: 900, output_tokens: 80 },
            by: None,
            pre_tokens: None,
            archived: None,
        },
        HistoryChange::Set(compacted),
    );
    d.compactions += 1;
    // A no-op compaction: no history change, so no undo entry.
    d.push(
        EventBody::Compaction {
            trigger: Trigger::Auto,
            level: 1,
            outcome: StepOutcome::Skipped,
            backoff_skip: false,
            route: None,
            cost: Cost::default(),
            by: None,
            pre_tokens: None,
            archived: None,
        },
        HistoryChange::None,
    );
    d.push(EventBody::MessageAppended { count: 1 }, HistoryChange::Append(vec![Message::assistant("ok")]));
    // Undo the compaction: the state before it returns.
    let undo_target = d.j.state_at("s", d.j.version("s").unwrap()).unwrap().undo.last().copied().unwrap();
    assert_eq!(undo_target, compaction - 1, "undo restores the state just before the compaction");
    d.n += 1;
    let undo = d.j.undo("s", &format!("ev-{}", d.n), ts(d.n)).unwrap().unwrap();
    d.live = d.expected[&undo_target].clone();
    d.expected.insert(undo.seq, d.live.clone());
    // Two rewinds: back before the microcompact, then forward again to the compaction (an undo
    // of a rewind is another rewind).
    let r1 = d.rewind(before_micro - 1, "rewind");
    d.push(
        EventBody::MessageAppended { count: 1 },
        HistoryChange::Append(vec![Message::user("a new branch")]),
    );
    let r2 = d.rewind(compaction, "rewind");
    assert!(r2 > r1);
    d.push(EventBody::Checkpoint { name: "after".into() }, HistoryChange::None);

    let head = d.j.version("s").unwrap();
    assert_eq!(head, d.n + 1);
    for seq in 1..=head {
        let v = d.j.view_at("s", seq).unwrap();
        let want = &d.expected[&seq];
        assert_eq!(&v.history, want, "history at event {seq}");
        assert_eq!(
            serde_json::to_vec(&v.history).unwrap(),
            serde_json::to_vec(want).unwrap(),
            "byte-identical at {seq}"
        );
    }
    // Counters recomputed from events: one applied compaction on the current branch (the
    // rewind to the compaction brings its count back), summarizer cost counted.
    let st = d.j.state_at("s", head).unwrap();
    assert_eq!(st.compactions, 1);
    assert_eq!(st.summarizer.calls, 1);
    assert_eq!(st.context_edits, 2);
    assert_eq!(st.checkpoints, vec![("after".to_string(), head)]);
    // A fresh journal on the same file (no in-memory head) restores the same.
    drop(d.j);
    let j2 = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    for seq in 1..=head {
        assert_eq!(&j2.view_at("s", seq).unwrap().history, &d.expected[&seq], "reopened, event {seq}");
    }
    assert!(j2.verify(None).unwrap().bad.is_empty());
    // Abandoned branches stay auditable: every event is still there.
    assert_eq!(j2.events("s", 0, 10_000).unwrap().len() as u64, head);
}

/// A session `s` in a fresh file whose events 2..=n+1 each append the message `message(n)`; the
/// messages appended, in order.
fn appended_session(path: &std::path::Path, n: u64, message: impl Fn(u64) -> Message) -> Vec<Message> {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    j.start_session("s", "", NewEvent::new("e0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let mut live = Vec::new();
    for i in 1..=n {
        let m = message(i);
        live.push(m.clone());
        j.append(
            "s",
            None,
            vec![NewEvent::new(format!("e{i}"), ts(i), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m]))],
        )
        .unwrap();
    }
    live
}

#[test]
fn many_events_use_snapshots_and_stay_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let live = appended_session(&path, 400, |n| {
        Message::user(if n % 3 == 0 { "same".to_string() } else { format!("m{n}") })
    });
    let j = Journal::open(&path, &Options::default()).unwrap();
    let snaps: i64 = j.conn().query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0)).unwrap();
    assert!(snaps >= 6, "{snaps} snapshots");
    drop(j);
    let j = Journal::open(&path, &Options::default()).unwrap();
    for seq in [1u64, 2, 64, 65, 66, 129, 200, 401] {
        let want = &live[..usize::try_from(seq - 1).unwrap()];
        assert_eq!(j.view_at("s", seq).unwrap().history, want, "event {seq}");
    }
    // Snapshots are disposable: without them the fold gives the same answer.
    j.conn().execute("DELETE FROM snapshots", []).unwrap();
    assert_eq!(j.view_at("s", 401).unwrap().history, live);
}

/// BLAKE3 of a restored view's history and state as JSON.
fn view_digest(j: &Journal, seq: u64) -> [u8; 32] {
    let v = j.view_at("s", seq).unwrap();
    let mut h = blake3::Hasher::new();
    h.update(&serde_json::to_vec(&v.history).unwrap());
    h.update(&serde_json::to_vec(&v.state).unwrap());
    *h.finalize().as_bytes()
}

#[test]
fn restore_at_every_event_is_the_same_with_and_without_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let j = Journal::open(&path, &Options::default()).unwrap();
    let mut d = Driver { j, n: 0, expected: BTreeMap::new(), live: Vec::new(), compactions: 0 };
    d.j.start_session("s", "", NewEvent::new("ev-0", ts(0), EventBody::MessageAppended { count: 0 }))
        .unwrap();
    d.expected.insert(1, Vec::new());
    d.n = 1;
    // Appends (repeats included), in-place stubs, rewrites that shorten, rewinds onto older
    // branches and events that leave the history alone, across several snapshot intervals.
    for k in 1..=520u64 {
        if k % 97 == 0 {
            let target = d.j.version("s").unwrap() - 70;
            d.rewind(target, "test");
        } else if k % 13 == 0 && d.live.len() > 4 {
            let i = usize::try_from(k).unwrap() % (d.live.len() - 1);
            let h = stubbed(&d.live, i, &format!("[stub {k}]"));
            d.push(EventBody::MessageAppended { count: 0 }, HistoryChange::Set(h));
        } else if k % 61 == 0 {
            let keep = d.live[d.live.len() / 2..].to_vec();
            d.push(EventBody::MessageAppended { count: 0 }, HistoryChange::Set(keep));
        } else if k % 3 == 0 {
            d.push(EventBody::NoticeInjected {}, HistoryChange::None);
        } else {
            let m = if k % 5 == 0 { Message::user("same") } else { Message::user(format!("m{k}")) };
            d.push(EventBody::MessageAppended { count: 1 }, HistoryChange::Append(vec![m]));
        }
    }
    let head = d.j.version("s").unwrap();
    drop(d.j);
    let j = Journal::open(&path, &Options::default()).unwrap();
    let with: i64 = j.conn().query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0)).unwrap();
    assert!(with >= 6, "{with} snapshots");
    let snapped: Vec<[u8; 32]> = (1..=head).map(|seq| view_digest(&j, seq)).collect();
    for seq in 1..=head {
        assert_eq!(&j.view_at("s", seq).unwrap().history, &d.expected[&seq], "event {seq}");
    }
    j.conn().execute("DELETE FROM snapshots", []).unwrap();
    let folded: Vec<[u8; 32]> = (1..=head).map(|seq| view_digest(&j, seq)).collect();
    for (k, (a, b)) in snapped.iter().zip(&folded).enumerate() {
        assert_eq!(a, b, "event {}", k + 1);
    }
    assert!(j.verify(None).unwrap().bad.is_empty());
}

#[test]
fn a_snapshot_of_a_large_history_restores_exactly() {
    // ~1.3 MB of history in one snapshot blob.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let live = appended_session(&path, 300, |n| {
        Message::user(format!("{n} {}", "x".repeat(4000 + usize::try_from(n).unwrap())))
    });
    let j = Journal::open(&path, &Options::default()).unwrap();
    let big: i64 =
        j.conn().query_row("SELECT count(*) FROM snapshots WHERE seq = 257", [], |r| r.get(0)).unwrap();
    assert_eq!(big, 1, "a snapshot at depth 256");
    for seq in [257u64, 260, 301] {
        let want = &live[..usize::try_from(seq - 1).unwrap()];
        assert_eq!(j.view_at("s", seq).unwrap().history, want, "event {seq}");
    }
    assert!(j.verify(None).unwrap().bad.is_empty());
}
