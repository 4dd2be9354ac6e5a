//! `HistoryChange::AppendShared`: messages the writer keeps too are journaled exactly as an
//! `Append` of the same messages, and the journal keeps no handle on them afterwards (the writer
//! takes them back without a copy).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::sync::Arc;

fn appended(j: &mut Journal, session: &str, n: usize, change: HistoryChange) {
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    let id = format!("{session}-{n}");
    let count = match &change {
        HistoryChange::Append(m) => m.len(),
        HistoryChange::AppendShared(m) => m.len(),
        _ => 0,
    };
    let e = NewEvent::new(id, ts, EventBody::MessageAppended { count: count as u64 }).with_history(change);
    j.append(session, None, vec![e]).unwrap();
}

#[test]
fn a_shared_append_journals_what_an_append_does_and_lets_go_of_the_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    let ts = Utc.timestamp_millis_opt(1_764_000_000_000).unwrap();
    let first: Vec<Message> = (0..40).map(|n| Message::user(format!("message {n}"))).collect();
    let more = vec![Message::assistant("an answer"), Message::user("x".repeat(300 * 1024))];
    for s in ["plain", "shared"] {
        j.start_session(s, "t", NewEvent::new(format!("{s}-0"), ts, EventBody::MessageAppended { count: 0 }))
            .unwrap();
    }
    appended(&mut j, "plain", 1, HistoryChange::Append(first.clone()));
    appended(&mut j, "plain", 2, HistoryChange::Append(more.clone()));
    let lent = Arc::new(first.clone());
    appended(&mut j, "shared", 1, HistoryChange::AppendShared(Arc::clone(&lent)));
    assert_eq!(Arc::strong_count(&lent), 1, "the journal dropped its handle");
    // Appended after what the session holds, not over it.
    appended(&mut j, "shared", 2, HistoryChange::AppendShared(Arc::new(more.clone())));
    let want: Vec<Message> = first.iter().chain(&more).cloned().collect();
    let cold = Journal::open(&dir.path().join("j.db"), &Options::default()).unwrap();
    for s in ["plain", "shared"] {
        let head = cold.head(s).unwrap().history;
        assert!(head == want, "{s}: {} messages restored, {} appended", head.len(), want.len());
        let at_first = cold.view_at(s, 2).unwrap().history;
        assert!(at_first == first, "{s} after its first append: {} messages", at_first.len());
    }
    assert!(cold.verify(None).unwrap().bad.is_empty(), "the chain and the message rows verify");
}
