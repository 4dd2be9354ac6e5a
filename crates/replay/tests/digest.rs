//! The driver's running digest equals the digest of the whole history after every change, so
//! the rewind check compares restores with the same figure it always did.

use salvage_replay::driver::{history_digest, RunningDigest};
use salvage_types::Message;

fn msgs(texts: &[&str]) -> Vec<Message> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| if i % 2 == 0 { Message::user(*t) } else { Message::assistant(*t) })
        .collect()
}

#[test]
fn running_digest_follows_sets_and_appends() {
    let mut history: Vec<Message> = Vec::new();
    let mut d = RunningDigest::of(&history);
    assert_eq!(d.digest(), history_digest(&history), "empty");
    // The first append to an empty history: no separator before it.
    let first = msgs(&["hi \"there\"", "é ✓ \\ \n"]);
    d.extend(&first);
    history.extend(first);
    assert_eq!(d.digest(), history_digest(&history), "first append");
    // An append of nothing changes nothing.
    d.extend(&[]);
    assert_eq!(d.digest(), history_digest(&history), "empty append");
    let more = msgs(&["third", "fourth", "fifth"]);
    d.extend(&more);
    history.extend(more);
    assert_eq!(d.digest(), history_digest(&history), "second append");
    // A set replaces the state; digests of different histories differ.
    let before = d.digest();
    history = msgs(&["only"]);
    d = RunningDigest::of(&history);
    assert_eq!(d.digest(), history_digest(&history), "set");
    assert_ne!(d.digest(), before);
    history.clear();
    d = RunningDigest::of(&history);
    assert_eq!(d.digest(), history_digest(&history), "set to empty");
    // Reading the digest does not consume the state.
    d.extend(&msgs(&["again"]));
    assert_eq!(d.digest(), d.digest());
    assert_eq!(d.digest(), history_digest(&msgs(&["again"])));
}
