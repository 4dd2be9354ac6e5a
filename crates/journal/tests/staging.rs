//! An append serializes, hashes and compresses before it takes its write turn, within a budget
//! (4 MB of message JSON per batch); past it, the messages are serialized as they are stored.
//! Whichever side of the budget a message falls on, and whether the event owns its messages or
//! shares them with the writer, the batch journals every message in order, its originals
//! archived and referenced.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::{CcrKey, Message};
use std::sync::Arc;

/// `n` distinct messages of about `size` bytes each, named after `tag`.
fn messages(tag: &str, n: usize, size: usize) -> Vec<Message> {
    (0..n).map(|i| Message::user(format!("{tag} {i} {}", "y".repeat(size)))).collect()
}

#[test]
fn a_batch_past_the_staging_budget_journals_every_message_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let mut j = Journal::open(&path, &Options::default()).unwrap();
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts, EventBody::MessageAppended { count: 0 })).unwrap();
    // 3 MB owned, then 2 MB shared (the budget runs out inside it), then the whole history set
    // to another order with a message large enough for CCR, and an original to archive.
    let owned = messages("owned", 30, 100 * 1024);
    let shared = Arc::new(messages("shared", 20, 100 * 1024));
    let mut set: Vec<Message> = shared.iter().rev().chain(owned.iter()).cloned().collect();
    set.push(Message::user("z".repeat(400 * 1024)));
    let original = b"the transcript of what the set dropped".repeat(100);
    let event = |id: &str, n: u64| NewEvent::new(id, ts, EventBody::MessageAppended { count: n });
    let batch = vec![
        event("s-1", 30).with_history(HistoryChange::Append(owned.clone())),
        event("s-2", 20).with_history(HistoryChange::AppendShared(Arc::clone(&shared))),
        event("s-3", 0)
            .with_history(HistoryChange::Set(set.clone()))
            .with_archive(vec![(CcrKey::of(&original), original.clone())]),
    ];
    j.append("s", None, batch).unwrap();
    assert_eq!(Arc::strong_count(&shared), 1, "the journal dropped its handle on the shared messages");

    let cold = Journal::open(&path, &Options::default()).unwrap();
    let after_two: Vec<Message> = owned.iter().chain(shared.iter()).cloned().collect();
    assert!(cold.view_at("s", 2).unwrap().history == owned, "after the owned append");
    assert!(cold.view_at("s", 3).unwrap().history == after_two, "after the shared append");
    let head = cold.head("s").unwrap().history;
    assert!(head == set, "after the set: {} messages restored, {} set", head.len(), set.len());
    let report = cold.verify(None).unwrap();
    assert!(report.bad.is_empty(), "the chain, the message rows and the blob links verify: {:?}", report.bad);
    let clock = salvage_types::SystemClock;
    let ccr = salvage_ccr::Ccr::new(cold.conn(), &clock);
    assert_eq!(ccr.get(&CcrKey::of(&original).hex()).unwrap(), original, "the original is archived");
}

/// A message redacted before, appended again past the staging budget (serialized under the
/// turn) and before it (staged), in batches that take snapshots: no state shows the secret, and
/// the file verifies.
#[test]
fn a_redacted_message_appended_again_on_either_side_of_the_budget_stays_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let mut j = Journal::open(&path, &Options::default()).unwrap();
    let ts = |n: i64| Utc.timestamp_millis_opt(1_764_000_000_000 + n).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let secret = Message::user("the key is sk-live-0123456789abcdef0123456789abcdef");
    let first = vec![Message::user("hello"), secret.clone(), Message::assistant("noted")];
    j.append(
        "s",
        None,
        vec![NewEvent::new("s-1", ts(1), EventBody::MessageAppended { count: 3 })
            .with_history(HistoryChange::Append(first))],
    )
    .unwrap();
    let hash = j.history_hashes("s", 2).unwrap()[1];
    let body = EventBody::Redaction { keys: vec![], counts: Default::default() };
    j.redact_messages("s", &[(hash, Message::user("[redacted]"))], NewEvent::new("red", ts(2), body))
        .unwrap();
    let again = |n: i64| {
        NewEvent::new(format!("again{n}"), ts(10 + n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![secret.clone()]))
    };
    // Staged: the first events of a batch that stays within the budget.
    j.append("s", None, (0..40).map(again).collect()).unwrap();
    // Past the budget: 5 MB first, then the secret again, across the next snapshot.
    let mut batch = vec![NewEvent::new("big", ts(100), EventBody::MessageAppended { count: 50 })
        .with_history(HistoryChange::Append(messages("big", 50, 100 * 1024)))];
    batch.extend((100..180).map(again));
    j.append("s", None, batch).unwrap();
    let head = j.head("s").unwrap();
    drop(j);
    let cold = Journal::open(&path, &Options::read_only()).unwrap();
    for seq in 1..=head.seq {
        let v = cold.view_at("s", seq).unwrap();
        assert!(v.history.iter().all(|m| m.content != secret.content), "event {seq} shows the secret");
    }
    assert_eq!(cold.head("s").unwrap().history.len(), 3 + 40 + 50 + 80);
    let report = cold.verify(None).unwrap();
    assert!(report.bad.is_empty(), "{:?}", report.bad);
}
