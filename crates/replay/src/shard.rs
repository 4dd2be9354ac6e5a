//! Splitting a corpus across CI jobs: `--shard I/N` keeps the captures whose id hashes to shard
//! I of N. The partition depends only on the capture id (BLAKE3), so it is stable across runs,
//! machines and file moves, every capture lands in exactly one shard, and adding a capture never
//! moves another one.

/// The shard (0-based, below `n`) a capture id belongs to.
pub fn shard_of(id: &str, n: u32) -> u32 {
    let h = blake3::hash(id.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    u32::try_from(u64::from_le_bytes(b).checked_rem(u64::from(n.max(1))).unwrap_or(0)).unwrap_or(0)
}

/// A `--shard I/N` selection (I is 1-based, as CI matrices count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 1..=count.
    pub index: u32,
    /// How many shards.
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` with 1 ≤ I ≤ N.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard: {text:?} is not I/N with 1 <= I <= N (e.g. 2/4)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) =
            (i.trim().parse::<u32>().map_err(|_| bad())?, n.trim().parse::<u32>().map_err(|_| bad())?);
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// True when the capture id belongs to this shard.
    pub fn holds(&self, id: &str) -> bool {
        self.index.checked_sub(1) == Some(shard_of(id, self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_lands_in_exactly_one_shard_and_stays_there() {
        let ids: Vec<String> = (0..1000).map(|i| format!("capture-{i}")).collect();
        let shards: Vec<Shard> = (1..=4).map(|i| Shard { index: i, count: 4 }).collect();
        let mut sizes = [0usize; 4];
        for id in &ids {
            let owners: Vec<usize> = (0..4).filter(|&k| shards[k].holds(id)).collect();
            assert_eq!(owners.len(), 1, "{id}");
            sizes[owners[0]] += 1;
            assert_eq!(shard_of(id, 4), shard_of(id, 4));
        }
        assert!(sizes.iter().all(|&s| s > 200), "balanced: {sizes:?}");
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
