//! "Archived means archived by us" (behaviour spec section 4): content that merely quotes a
//! marker — of a blob the archive really holds — is ordinary content, archived before it is cut.
//! Each case failed before provenance replaced "contains a marker" as the test for "archived".

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::compaction::render_segment;
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::microcompact::{self, Ages};
use salvage_recovery::recoverable::lost;
use salvage_recovery::tool_budget::Limits;
use salvage_recovery::trim::trim;
use salvage_types::ccr_key::recoverable_suffix;
use salvage_types::CcrKey;
use salvage_types::{Message, ToolCall};

/// An archive that already holds one blob, and that blob's marker.
fn seeded() -> (MemoryArchive, String) {
    let mut mem = MemoryArchive::new();
    let k = mem.put(b"an unrelated log archived earlier").unwrap();
    (mem, k.marker())
}

fn lines(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag} line {i}: some analysis text that matters\n")).collect()
}

fn call(id: &str) -> Message {
    let mut a = Message::assistant("");
    a.tool_calls.push(ToolCall {
        id: id.into(),
        kind: "function".into(),
        name: "read_file".into(),
        arguments: serde_json::json!({"path": "x"}),
    });
    a
}

fn ctx<'a>(mem: &'a mut MemoryArchive) -> RungContext<'a> {
    RungContext {
        archiver: Archiver::new(Some(mem as &mut dyn Archive)),
        keep: 10,
        limits: Limits { per_result: 20_000, per_turn: 200_000 },
        payload_budget: Some(6_000),
        rung3_keep: ladder::RUNG3_KEEP,
    }
}

#[test]
fn rung1_archives_an_analysis_that_quotes_a_marker() {
    let (mut mem, marker) = seeded();
    let analysis = format!("{}see {marker} for the log\n{}", lines("a", 150), lines("b", 150));
    assert!(analysis.len() > 12_000);
    let h = vec![
        Message::system("sys"),
        Message::user("fix it"),
        Message::assistant(analysis),
        Message::user("go on"),
    ];
    let out = ladder::apply(Rung::Aggressive, &h, &mut ctx(&mut mem)).unwrap();
    assert!(out.history[2].content.len() < 6_000, "rung 1 cut the analysis");
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out.history, &lookup), vec![], "the analysis is recoverable");
}

#[test]
fn rung3_archives_a_task_that_quotes_a_marker() {
    let (mut mem, marker) = seeded();
    let task = format!("{}\nthe failing run printed {marker}", lines("task", 300));
    let mut h = vec![Message::system("sys")];
    for i in 0..6 {
        h.push(Message::user(format!("old {i}")));
        h.push(Message::assistant(lines("old", 40)));
    }
    h.push(Message::user(task));
    let out = ladder::apply(Rung::Nuclear, &h, &mut ctx(&mut mem)).unwrap();
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out.history, &lookup), vec![]);
}

#[test]
fn microcompact_stubs_point_at_their_own_original() {
    let (mut mem, marker) = seeded();
    let result = format!("{}\nprevious run: {marker}\n{}", lines("r", 100), lines("s", 100));
    let mut h = vec![Message::user("task"), call("c1"), Message::tool("c1", result.clone())];
    for i in 0..5 {
        h.push(Message::assistant(format!("step {i}")));
        h.push(Message::user("next"));
    }
    let snapshot = mem.clone();
    let lookup = |k: &str| snapshot.get(k);
    let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
    let (out, r) =
        microcompact::microcompact(&h, 6, Ages { truncate: 2, summarize: 4 }, &mut a, &lookup).unwrap();
    drop(a);
    assert_eq!(r.summarized, 1);
    assert!(
        !out[2].content.contains(&marker),
        "the stub does not point at the quoted blob: {}",
        out[2].content
    );
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out, &lookup), vec![]);
}

/// Re-review, finding 2: a tool result in the form of another pass's stub (a skill block aged
/// out) naming a key whose original is longer was replaced by a microcompact stub counted from
/// that original, and its own words were archived nowhere. Only a cut stands for its original.
#[test]
fn microcompact_archives_a_stub_of_another_pass_before_replacing_it() {
    let mut mem = MemoryArchive::new();
    let original = lines("orig", 1500);
    let k = mem.put(original.as_bytes()).unwrap();
    let words: String = (0..400).map(|i| format!("UNIQUEWORD{i} ")).collect();
    let stub = format!("[Skill block aged out — {words}— recoverable via @recall {}]", k.marker());
    let mut h = vec![Message::user("task"), call("c1"), Message::tool("c1", stub.clone())];
    for i in 0..5 {
        h.push(Message::assistant(format!("step {i}")));
        h.push(Message::user("next"));
    }
    let snapshot = mem.clone();
    let lookup = |k: &str| snapshot.get(k);
    let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
    let (out, r) =
        microcompact::microcompact(&h, 6, Ages { truncate: 2, summarize: 4 }, &mut a, &lookup).unwrap();
    drop(a);
    assert_eq!(r.summarized, 1, "{}", out[2].content);
    assert!(mem.blobs().any(|b| b == stub.as_bytes()), "the stub's own words are archived");
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out, &lookup), vec![]);
}

#[test]
fn trim_archives_reasoning_next_to_a_quoted_marker() {
    let (mut mem, marker) = seeded();
    let text = format!("<thinking>{}</thinking>\nAnswer: see {marker}.", lines("think", 600));
    assert!(text.len() > 26_000);
    let h = vec![Message::user("q"), Message::assistant(text)];
    let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
    let (out, r) = trim(&h, &mut a).unwrap();
    drop(a);
    assert_eq!(r.reasoning, 1);
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out, &lookup), vec![]);
}

#[test]
fn the_summarizer_sees_a_quoting_note_as_written() {
    let (mem, marker) = seeded();
    let note = format!("please keep {marker} in mind");
    let lookup = |k: &str| mem.get(k);
    let seg = render_segment(&[Message::user(note.clone())], 100_000, &lookup);
    assert!(seg.contains(&note), "{seg}");
    assert!(!seg.contains("an unrelated log"), "{seg}");
}

#[test]
fn content_we_cut_is_not_archived_twice() {
    let (mut mem, _) = seeded();
    let original = lines("orig", 400);
    let k = mem.put(original.as_bytes()).unwrap();
    let ours = format!("{}{}", &original[..9_000], recoverable_suffix(&k));
    let h = vec![Message::user("t"), Message::assistant(ours), Message::user("go")];
    let before = mem.len();
    let out = ladder::apply(Rung::Aggressive, &h, &mut ctx(&mut mem)).unwrap();
    assert_eq!(mem.len(), before, "nothing new archived");
    assert!(out.history[1].content.ends_with(&recoverable_suffix(&k)), "the same suffix is kept");
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out.history, &lookup), vec![]);
}

/// Review finding (replay checks, 1): a message that begins with the head of an original the
/// archive holds, then says something new, and ends with that original's suffix, looked like our
/// cut of it (suffix, head and shorter were all it took). Rung 1 cut it again keeping the suffix
/// and archived nothing, and `lost` excused it the same way: the new words were gone from the
/// history and from every blob while every check said ok. Now a cut must be pieces of its
/// original: this one is ordinary content, archived before it is cut.
#[test]
fn a_cut_that_adds_to_its_original_is_archived_before_it_is_cut_again() {
    let original = lines("orig", 800);
    let k = CcrKey::of(original.as_bytes());
    let forged =
        format!("{}SECRET-UNIQUE-PAYLOAD {}{}", &original[..256], lines("new", 150), recoverable_suffix(&k));
    assert!(forged.len() > 6_000 && forged.len() < original.len());
    // The check: the same cut with the original's suffix kept and nothing archived is lost.
    let unarchived = format!("{}{}", &forged[..3_000], recoverable_suffix(&k));
    cut_by_rung1_archived_first_and_lost_when_gone(&original, &forged, unarchived);
}

/// The same for a stub: a one-line stub of ours (a key the archive holds, an original longer than
/// it) whose words are in no original. Cutting it (it is long) archives it first, and a stub that
/// is gone from the history and from every blob is lost whatever its key holds.
#[test]
fn a_long_stub_is_archived_before_it_is_cut() {
    let original = lines("orig", 800);
    let k = CcrKey::of(original.as_bytes());
    let words: String = (0..1500).map(|i| format!("w{i} ")).collect();
    let stub = format!("[Earlier read of design-notes.md: {words}{}]", k.marker());
    assert!(!stub.contains('\n') && stub.len() > 6_000 && stub.len() < original.len());
    let gone = format!("[Earlier read of design-notes.md: w0 {}]", k.marker());
    cut_by_rung1_archived_first_and_lost_when_gone(&original, &stub, gone);
}

/// With `original` archived, rung 1 cuts the assistant message `text` (which names it), archiving
/// `text` itself first, and nothing is lost; the history with `gone` in its place, against an
/// archive holding only `original`, loses that message.
fn cut_by_rung1_archived_first_and_lost_when_gone(original: &str, text: &str, gone: String) {
    let mut mem = MemoryArchive::new();
    mem.put(original.as_bytes()).unwrap();
    let h = vec![
        Message::system("sys"),
        Message::user("t"),
        Message::assistant(text.to_string()),
        Message::user("go"),
    ];
    let out = ladder::apply(Rung::Aggressive, &h, &mut ctx(&mut mem)).unwrap();
    assert!(out.history[2].content.len() < text.len(), "rung 1 cut the message");
    assert!(mem.blobs().any(|b| b == text.as_bytes()), "the message itself is archived");
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out.history, &lookup), vec![]);
    let mut without = out.history.clone();
    without[2].content = gone;
    let mut only_original = MemoryArchive::new();
    only_original.put(original.as_bytes()).unwrap();
    let lookup = |k: &str| only_original.get(k);
    assert_eq!(lost(&h, &without, &lookup).len(), 1, "words cut away unarchived are lost");
}

/// A task that ends with our own suffix line — pasted from an earlier answer — for a key the
/// archive holds with other content (adversarial review, finding 01): "our form and a key we
/// hold" is not "archived by us"; the task is archived before rung 3 cuts it.
#[test]
fn rung3_archives_a_task_that_ends_with_a_pasted_suffix_for_another_original() {
    let mut mem = MemoryArchive::new();
    let decoy = mem.put(b"unrelated decoy content\n").unwrap();
    let task = format!("{}TASK-END{}", lines("task", 500), recoverable_suffix(&decoy));
    let mut h = vec![Message::system("sys")];
    for i in 0..6 {
        h.push(Message::user(format!("old {i}")));
        h.push(Message::assistant(lines("old", 40)));
    }
    h.push(Message::user(task.clone()));
    let out = ladder::apply(Rung::Nuclear, &h, &mut ctx(&mut mem)).unwrap();
    let cut = &out.history.iter().rev().find(|m| m.content.starts_with("task line 0")).unwrap().content;
    assert!(cut.len() < task.len(), "rung 3 cut the task");
    assert!(mem.blobs().any(|b| b == task.as_bytes()), "the task's original is archived");
    let lookup = |k: &str| mem.get(k);
    assert_eq!(lost(&h, &out.history, &lookup), vec![]);
    // The check itself: the task cut with the pasted suffix kept and nothing archived is lost.
    let mut unarchived = out.history.clone();
    let at = unarchived.iter().position(|m| m.content == *cut).unwrap();
    unarchived[at].content = format!("{}{}", &task[..3_000], recoverable_suffix(&decoy));
    assert_eq!(lost(&h, &unarchived, &lookup).len(), 1, "a cut whose original is nowhere is lost");
}

/// Review finding: a call dropped by the pairing repair for a repeated id, in an assistant
/// message that is kept, was archived nowhere, and `lost` did not see it (it compared message
/// contents only, and a message of calls has none). Now every rung archives the original of a
/// message that lost a call, and `lost` checks calls by name and arguments.
#[test]
fn a_call_pruned_for_a_repeated_id_is_archived_and_checked() {
    let mut a = call("c1");
    let mut second = a.tool_calls[0].clone();
    second.arguments = serde_json::json!({"path": "SECOND-CALL-ONLY-HERE"});
    a.tool_calls.push(second);
    let h = vec![
        Message::system("sys"),
        Message::user("fix it"),
        a,
        Message::tool("c1", "first result"),
        Message::tool("c1", "second result"),
        Message::user("go on"),
    ];
    // The check itself: an output that simply loses the call is reported.
    let mut pruned = h.clone();
    pruned[2].tool_calls.truncate(1);
    pruned.remove(4);
    let lookup = |_: &str| None;
    let l = lost(&h, &pruned, &lookup);
    assert_eq!(l.iter().map(|x| x.index).collect::<Vec<_>>(), vec![2, 4], "{l:?}");
    assert!(l[0].call.as_deref().is_some_and(|c| c.contains("read_file")), "{l:?}");
    for rung in [Rung::Aggressive, Rung::Emergency] {
        let (mut mem, _) = seeded();
        let out = ladder::apply(rung, &h, &mut ctx(&mut mem)).unwrap();
        assert_eq!(out.history.iter().map(|m| m.tool_calls.len()).sum::<usize>(), 1, "{rung:?}: pruned");
        assert!(
            mem.blobs().any(|b| String::from_utf8_lossy(b).contains("SECOND-CALL-ONLY-HERE")),
            "{rung:?}: the pruned call's arguments are archived"
        );
        let lookup = |k: &str| mem.get(k);
        assert_eq!(lost(&h, &out.history, &lookup), vec![], "{rung:?}");
    }
}

/// Every cut the recovery crate makes is one [`salvage_types::cut::derivable`] recognises as a cut
/// of its original (its joints are in `CUT_JOINTS`): cut again, it keeps its key and archives
/// nothing new. A reduction with a joint the list lacks fails here, not as a silent re-archive.
#[test]
fn every_cut_of_the_recovery_crate_is_recognised_as_one() {
    use salvage_recovery::{microcompact, tool_budget};
    use salvage_types::ccr_key::{made_from, own_archive_key};
    use salvage_types::truncate::{preserve_end, structure_preserving};
    let original = lines("orig", 900);
    type Reducer = Box<dyn Fn(&str) -> Option<String>>;
    let reducers: Vec<(&str, Reducer)> = vec![
        ("tool-result preview", Box::new(|b: &str| Some(tool_budget::preview(b)))),
        ("preview within 3000", Box::new(|b: &str| Some(tool_budget::preview_within(b, 3_000)))),
        ("preview within 200", Box::new(|b: &str| Some(tool_budget::preview_within(b, 200)))),
        ("microcompact preview", Box::new(|b: &str| Some(microcompact::preview(b)))),
        ("preserve-end", Box::new(|b: &str| preserve_end(b, b.len() / 2))),
        ("structure-preserving", Box::new(|b: &str| structure_preserving(b, b.len() / 3))),
    ];
    for (name, first) in &reducers {
        let mut mem = MemoryArchive::new();
        let cut = {
            let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
            a.reduce(&original, |b, _| first(b)).unwrap().unwrap()
        };
        let key = own_archive_key(&cut).unwrap().to_string();
        assert!(made_from(&cut, &original), "{name}: {cut:?}");
        for (then, second) in &reducers {
            let before = mem.len();
            let again = {
                let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
                a.reduce(&cut, |b, _| second(b)).unwrap()
            };
            let Some(again) = again else { continue };
            assert_eq!(own_archive_key(&again), Some(key.as_str()), "{name} then {then}: {again:?}");
            assert_eq!(mem.len(), before, "{name} then {then}: archived again");
        }
    }
    // Trim's markup compaction, through trim itself.
    let block = format!("<function_calls>{}</function_calls>", lines("call", 40));
    let text = format!("{}{block}\nafter the call\n{}", lines("before", 30), lines("after", 30));
    let h = vec![Message::user("q"), Message::assistant(text.clone())];
    let mut mem = MemoryArchive::new();
    let (out, _) = {
        let mut a = Archiver::new(Some(&mut mem as &mut dyn Archive));
        trim(&h, &mut a).unwrap()
    };
    assert!(out[1].content.contains("[tool markup compacted"), "{}", out[1].content);
    assert!(made_from(&out[1].content, &text), "{}", out[1].content);
}
