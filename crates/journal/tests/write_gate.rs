//! An append waits for this process's other writers of the same file at the store's write gate
//! (`salvage_store::WriteGate`) and goes on the moment their turn ends, before asking SQLite for
//! the lock.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::{Options, Store};
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::sync::mpsc;
use std::time::Duration;

fn ts(n: i64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + n).unwrap()
}

#[test]
fn an_append_takes_its_turn_after_another_writer_of_the_file_in_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let mut j = Journal::open(&path, &Options::default()).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    // Another handle on the same file, named by another path to it, holds the turn. SQLite's
    // lock itself is free: only the gate can hold the append back.
    let other = Store::open(&dir.path().join(".").join("j.db"), &Options::default()).unwrap();
    let turn = other.write_turn();
    assert!(turn.held());
    let (done, finished) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let r = j.append(
                "s",
                None,
                vec![NewEvent::new("s-1", ts(1), EventBody::MessageAppended { count: 1 })
                    .with_history(HistoryChange::Append(vec![Message::user("next")]))],
            );
            done.send(r.map(|_| ()).map_err(|e| e.to_string())).unwrap();
        });
        assert!(
            finished.recv_timeout(Duration::from_millis(300)).is_err(),
            "the append went ahead while another writer of this process held the turn"
        );
        drop(turn);
        assert_eq!(finished.recv_timeout(Duration::from_secs(20)).unwrap(), Ok(()));
    });
    let j = Journal::open(&path, &Options::read_only()).unwrap();
    assert_eq!(j.events("s", 0, 10).unwrap().len(), 2, "the start and the append");
}
