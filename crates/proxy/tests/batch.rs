//! The writer's batches and its request cache record exactly what turn-by-turn writing records:
//! the same events, restoring the same history at every event, whatever turns share a batch.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{DateTime, TimeZone, Utc};
use salvage_journal::Journal;
use salvage_proxy::assemble::Assembler;
use salvage_proxy::record::{write_batch, write_turn, Recent, Turn, WriterOptions};
use salvage_proxy::route::Api;

fn options() -> WriterOptions {
    WriterOptions { captures: None, settings: Default::default(), keep: None }
}

/// An Anthropic Messages body: `system` and the `(role, content)` messages.
fn body(system: &str, messages: &[(&str, &str)]) -> Vec<u8> {
    let m: Vec<_> = messages.iter().map(|(r, c)| serde_json::json!({"role": r, "content": c})).collect();
    serde_json::to_vec(
        &serde_json::json!({"model": "claude-x", "max_tokens": 8, "system": system, "messages": m}),
    )
    .expect("json")
}

fn at(i: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + i, 0).single().expect("time")
}

/// A turn as the relay hands it over: attempt 0, and the JSON answer `reply`.
fn turn(i: i64, body: &[u8], reply: &str) -> Turn {
    let mut t = Turn::new(Api::AnthropicMessages, bytes::Bytes::copy_from_slice(body), at(i));
    t.attempt_zero();
    let mut a = Assembler::new(Api::AnthropicMessages, false);
    a.feed(
        serde_json::json!({"content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 2}})
            .to_string()
            .as_bytes(),
    );
    t.response = Some(a);
    t
}

/// Three requests of one conversation, each going on from the one before.
fn conversation_a() -> [Vec<u8>; 3] {
    let a1 = body("A", &[("user", "task a")]);
    let a2 = body("A", &[("user", "task a"), ("assistant", "a-1"), ("user", "more a")]);
    let a3 = body(
        "A",
        &[
            ("user", "task a"),
            ("assistant", "a-1"),
            ("user", "more a"),
            ("assistant", "a-2"),
            ("user", "last a"),
        ],
    );
    [a1, a2, a3]
}

/// Two conversations' turns, interleaved: a start, a request sent again (the reply dropped), the
/// conversation going on (the reply and a new message), a compacted history, an edited one.
fn turns() -> Vec<Turn> {
    let [a1, a2, a3] = conversation_a();
    let a_compacted = body("A", &[("user", "task a"), ("user", "last a")]);
    let b1 = body("B", &[("user", "task b")]);
    let b2 = body("B", &[("user", "task b"), ("assistant", "b-1"), ("user", "more b")]);
    let b_edited = body("B", &[("user", "task b"), ("assistant", "b-1 edited"), ("user", "more b")]);
    let order = [(&a1, "a-1"), (&b1, "b-1"), (&a1, "a-1"), (&a1, "a-1"), (&a2, "a-2"), (&b2, "b-2")];
    let then =
        [(&a2, "a-2"), (&a3, "a-3"), (&b_edited, "b-3"), (&a_compacted, "a-4"), (&a3, "a-5"), (&b2, "b-4")];
    order.into_iter().chain(then).zip(1..).map(|((b, reply), i)| turn(i, b, reply)).collect()
}

/// Every session's events (kind, body, parent, splice) and the history restored at each.
fn record(j: &Journal) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for s in j.sessions().expect("sessions") {
        let mut rows = Vec::new();
        for e in j.events(&s.id, 0, 10_000).expect("events") {
            let history = j.view_at(&s.id, e.seq).expect("view").history;
            rows.push(format!("{} {:?} {:?} {:?} {:?}", e.kind, e.body, e.parent, e.delta, history));
        }
        out.push((s.id, rows));
    }
    out.sort();
    out
}

fn journal(dir: &tempfile::TempDir, name: &str) -> Journal {
    Journal::open(&dir.path().join(name), &Default::default()).expect("journal")
}

#[test]
fn batched_turns_restore_the_histories_turn_by_turn_writing_restores() {
    let dir = tempfile::tempdir().expect("dir");
    let mut one_by_one = journal(&dir, "one.db");
    for t in turns() {
        write_turn(&mut one_by_one, &options(), t).expect("turn written");
    }
    let expected = record(&one_by_one);
    assert_eq!(expected.len(), 2, "two conversations");
    let events: usize = expected.iter().map(|(_, rows)| rows.len()).sum();
    assert!(events >= 2 * turns().len(), "every turn journaled ({events} events)");
    for size in [2, 3, 5, 12] {
        let mut batched = journal(&dir, &format!("batched-{size}.db"));
        let mut recent = Recent::default();
        let mut all = turns().into_iter().peekable();
        while all.peek().is_some() {
            let batch: Vec<Turn> = all.by_ref().take(size).collect();
            for r in write_batch(&mut batched, &options(), &mut recent, batch) {
                r.expect("turn written");
            }
        }
        let got = record(&batched);
        for ((s, rows), (_, want)) in got.iter().zip(&expected) {
            let differ = rows.iter().zip(want).position(|(a, b)| a != b);
            assert!(
                differ.is_none() && rows.len() == want.len(),
                "batches of {size}, session {s}: event {differ:?} differs"
            );
        }
        assert_eq!(got, expected, "batches of {size}");
        assert!(batched.verify(None).expect("verify").bad.is_empty());
    }
}

#[test]
fn a_turn_that_fails_in_a_batch_costs_only_itself() {
    let dir = tempfile::tempdir().expect("dir");
    let mut j = journal(&dir, "j.db");
    let [a1, a2, a3] = conversation_a();
    write_turn(&mut j, &options(), turn(1, &a1, "a-1")).expect("first turn");
    // The second turn of the batch arrived at the time of the first turn: its event id is taken,
    // so the batch's transaction fails; appended one by one, the turns around it are journaled,
    // the last one against the history the journal holds (not the failed turn's).
    let batch = vec![
        turn(2, &a1, "a-1"),
        turn(1, &a2, "a-2"),
        turn(4, &a3, "a-3"),
        turn(5, b"{\"messages\": 3}", "x"),
    ];
    let results = write_batch(&mut j, &options(), &mut Recent::default(), batch);
    let ok: Vec<bool> = results.iter().map(Result::is_ok).collect();
    assert_eq!(ok, [true, false, true, false], "{results:?}");
    let s = &j.sessions().expect("sessions")[0].id;
    let head = j.head(s).expect("head").history;
    let contents: Vec<&str> = head.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["A", "task a", "a-1", "more a", "a-2", "last a", "a-3"]);
    assert!(j.verify(None).expect("verify").bad.is_empty());
}
