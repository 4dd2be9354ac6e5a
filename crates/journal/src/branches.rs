//! Branches: a rewind makes the events after its target an abandoned branch. The live branch is
//! the parent chain of the session's head; every other event is abandoned.

use std::collections::{BTreeSet, HashMap};

/// The events on the parent chain of `head` (the live branch), given every event's
/// `(seq, parent)`.
pub fn live_branch(links: &[(u64, Option<u64>)], head: u64) -> BTreeSet<u64> {
    let parent: HashMap<u64, Option<u64>> = links.iter().copied().collect();
    let mut live = BTreeSet::new();
    let mut cur = Some(head);
    while let Some(s) = cur {
        if !live.insert(s) {
            break;
        }
        cur = parent.get(&s).copied().flatten();
    }
    live
}

/// The events not on the live branch, in order.
pub fn abandoned(links: &[(u64, Option<u64>)], head: u64) -> BTreeSet<u64> {
    let live = live_branch(links, head);
    links.iter().map(|(s, _)| *s).filter(|s| !live.contains(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewind_abandons_the_events_after_its_target() {
        // 1 ← 2 ← 3 ← 4; 5 rewinds to 2; 6 continues 5.
        let links = [(1, None), (2, Some(1)), (3, Some(2)), (4, Some(3)), (5, Some(2)), (6, Some(5))];
        assert_eq!(abandoned(&links, 6).into_iter().collect::<Vec<_>>(), vec![3, 4]);
        assert!(abandoned(&links[..4], 4).is_empty());
    }
}
