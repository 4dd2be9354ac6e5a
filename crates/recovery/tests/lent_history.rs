//! Peak memory (issue #19): the engine lends its input history to the session-start record
//! instead of copying it, and microcompact cuts a history it is given in place, with exactly the
//! result of the copying pass.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{engine_io, turn_input};
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::compaction::NoHooks;
use salvage_recovery::engine::{Action, Change, Turn};
use salvage_recovery::microcompact::{microcompact, microcompact_owned, Ages};
use salvage_recovery::summarizer::Builtin;
use salvage_types::{Message, ToolCall};

/// `turns` rounds of a tool call and its `bytes`-long result, then the task.
fn session(turns: usize, bytes: usize) -> Vec<Message> {
    let mut h = vec![Message::user("index the repository")];
    for n in 0..turns {
        let mut a = Message::assistant("");
        a.tool_calls.push(ToolCall {
            id: format!("c{n}"),
            kind: "function".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({ "path": format!("src/{n}.rs") }),
        });
        h.push(a);
        h.push(Message::tool(format!("c{n}"), format!("line {n}\n").repeat(bytes / 7)));
    }
    h.push(Message::user("now summarize it"));
    h
}

/// The session-start record lends the engine's history: once the driver has dropped the record,
/// the engine goes on with the very messages it lent (no copy was made, none is made).
#[test]
fn the_start_record_lends_the_history_and_the_engine_takes_it_back_uncopied() {
    let h = session(3, 4_000);
    let given = h.clone();
    // The messages the engine is given, by address: none of them is ever copied.
    let at = given.as_ptr();
    let mut archive = MemoryArchive::new();
    let lookup = |_: &str| None;
    let (mut summarizer, mut hooks) = (Builtin, NoHooks);
    let mut io = engine_io(&mut archive, &lookup, (&mut summarizer, &mut hooks));
    let mut turn = Turn::new(turn_input(given));
    let Action::Record(r) = turn.next(&mut io).unwrap() else { panic!("the turn starts with its record") };
    let Change::Lent(lent) = &r.change else { panic!("the start record lends the history: {:?}", r.change) };
    assert_eq!(**lent, h);
    assert_eq!(lent.as_ptr(), at, "the record holds the engine's own messages");
    assert_eq!(turn.history(), &h[..], "the lent history is the engine's meanwhile");
    drop(r);
    let Action::Send(req) = turn.next(&mut io).unwrap() else { panic!("attempt 0 follows") };
    assert_eq!(req.history, h);
    assert_eq!(turn.history().as_ptr(), at, "the engine took back the messages it lent, not a copy");
}

/// A driver that keeps the record: the engine still goes on with an equal history.
#[test]
fn a_history_still_lent_is_copied_back() {
    let h = session(2, 4_000);
    let mut archive = MemoryArchive::new();
    let lookup = |_: &str| None;
    let (mut summarizer, mut hooks) = (Builtin, NoHooks);
    let mut io = engine_io(&mut archive, &lookup, (&mut summarizer, &mut hooks));
    let mut turn = Turn::new(turn_input(h.clone()));
    let kept = turn.next(&mut io).unwrap();
    let Action::Send(req) = turn.next(&mut io).unwrap() else { panic!("attempt 0 follows") };
    assert_eq!((req.history.as_slice(), turn.history()), (&h[..], &h[..]));
    let Action::Record(r) = kept else { panic!("the record") };
    let Change::Lent(lent) = &r.change else { panic!("lent") };
    assert_ne!(turn.history().as_ptr(), lent.as_ptr(), "the record's messages are still the driver's");
}

/// The in-place pass equals the copying one: the same history, report and archived originals,
/// at ages that truncate some results and summarize others, and at a turn below the ages.
#[test]
fn microcompact_in_place_equals_the_copying_pass() {
    let h = session(8, 6_000);
    let ages = Ages { truncate: 2, summarize: 4 };
    for turn in [8, 1] {
        let (mut a, mut b) = (MemoryArchive::new(), MemoryArchive::new());
        let lookup = |_: &str| None;
        let (copied, report) =
            microcompact(&h, turn, ages, &mut Archiver::new(Some(&mut a as &mut dyn Archive)), &lookup)
                .unwrap();
        let given = h.clone();
        let at = given.as_ptr();
        let (cut, owned) = microcompact_owned(
            given,
            turn,
            ages,
            &mut Archiver::new(Some(&mut b as &mut dyn Archive)),
            &lookup,
        );
        let owned = owned.unwrap();
        assert_eq!(cut.as_ptr(), at, "cut in place, not copied");
        assert_eq!((&cut, &owned), (&copied, &report), "turn {turn}");
        assert_eq!(a.blobs().collect::<Vec<_>>(), b.blobs().collect::<Vec<_>>(), "turn {turn}");
        // An unchanged report is an unchanged history (the engine records a change by it).
        assert_eq!(owned.truncated + owned.summarized == 0, cut == h, "turn {turn}");
        if turn == 8 {
            assert!(owned.truncated > 0 && owned.summarized > 0, "both cuts are exercised: {owned:?}");
        }
    }
}
