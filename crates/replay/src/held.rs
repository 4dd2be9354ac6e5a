//! The originals a replay archived in memory that no journaled event has stored yet.
//!
//! Design note (issue #19, peak memory): a rung archives its originals here while it runs (the
//! engine is sans-IO), and the event that references them stores them in the journal's CCR in
//! its own transaction. The originals are handed over to that event by value and leave memory
//! with it: the replay never holds an original and its copy at once, and never holds an original
//! the journal already stores (later reads of it go to CCR, verified there).

use salvage_types::CcrKey;
use std::collections::{BTreeMap, HashSet};

/// Originals by short key, with the full key computed once when put, and the keys already stored
/// by an event of this run.
#[derive(Debug, Default)]
pub(crate) struct Held {
    blobs: BTreeMap<String, (CcrKey, Vec<u8>)>,
    stored: HashSet<CcrKey>,
}

impl Held {
    /// Keeps `bytes` until an event stores them, unless an event of this run already stored
    /// them (the journal holds them then); returns their key. Idempotent.
    pub fn put(&mut self, bytes: Vec<u8>) -> CcrKey {
        let key = CcrKey::of(&bytes);
        if !self.stored.contains(&key) {
            self.blobs.entry(key.short()).or_insert((key, bytes));
        }
        key
    }

    /// The original held for a short key, verified against it.
    pub fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.blobs.get(short).filter(|(k, _)| k.short() == short).map(|(_, b)| b.clone())
    }

    /// True when an original is held for the short key.
    pub fn holds(&self, short: &str) -> bool {
        self.blobs.contains_key(short)
    }

    /// True when an event of this run already stored the key.
    pub fn stored(&self, key: &CcrKey) -> bool {
        self.stored.contains(key)
    }

    /// Hands the original of `key` over to the event that stores it (`None` when none is held
    /// under that full key): from now on the key counts as stored and is not held again.
    pub fn store(&mut self, key: &CcrKey) -> Option<Vec<u8>> {
        self.stored.insert(*key);
        let short = key.short();
        match self.blobs.get(&short) {
            Some((k, _)) if k == key => self.blobs.remove(&short).map(|(_, b)| b),
            _ => None,
        }
    }

    /// How many originals are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.blobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_original_leaves_memory_with_the_event_that_stores_it() {
        let mut held = Held::default();
        let k = held.put(b"original one".to_vec());
        let other = held.put(b"original two".to_vec());
        assert_eq!(held.get(&k.short()), Some(b"original one".to_vec()));
        assert_eq!(held.store(&k), Some(b"original one".to_vec()));
        assert!(!held.holds(&k.short()));
        assert!(held.stored(&k));
        // Archived again after its event stored it: the journal holds it, memory does not.
        assert_eq!(held.put(b"original one".to_vec()), k);
        assert!(!held.holds(&k.short()));
        assert_eq!(held.len(), 1);
        assert!(held.holds(&other.short()));
    }

    #[test]
    fn a_key_that_only_shares_the_short_key_takes_nothing() {
        let mut held = Held::default();
        let k = held.put(b"held".to_vec());
        let mut twin = k;
        twin.0[31] ^= 1;
        assert_eq!(twin.short(), k.short());
        assert_eq!(held.store(&twin), None);
        assert_eq!(held.get(&k.short()), Some(b"held".to_vec()));
    }
}
