//! Token counts of OpenAI's `o200k_base`, exactly as tiktoken-rs's `encode_ordinary` counts them,
//! from tables the build script lays out as read-only data (`build.rs`): the tokens' bytes in
//! rank order, their offsets, and an open-addressing table from bytes to rank. tiktoken-rs
//! builds hash maps of owned byte strings for the same vocabulary at run time (about 27 MB of
//! heap for every replay); these tables are about 4 MB of the binary, paged in as they are read.
//!
//! Text is split by o200k's own pattern (tiktoken-rs's, written out by the build script); a
//! piece that is a token counts one, any other is merged by byte-pair ranks, lowest rank first
//! and leftmost among equals, and counts the tokens left.

mod slots;

use slots::{first_slot, SLOTS};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::LazyLock;

static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_bytes.bin"));
static OFFSETS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_offsets.bin"));
static TABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_table.bin"));
static PATTERN: &str = include_str!(concat!(env!("OUT_DIR"), "/o200k_pattern.txt"));

/// The pre-tokenizing pattern, compiled at first use (only a run that counts tokens pays for it).
static SPLIT: LazyLock<Result<fancy_regex::Regex, String>> =
    LazyLock::new(|| fancy_regex::Regex::new(PATTERN).map_err(|e| e.to_string()));

thread_local! {
    /// This thread's copy of the pattern, for threads other than the first to count.
    ///
    /// Design decision: a compiled pattern keeps its matching scratch in a pool, which serves
    /// the thread that used it first without a lock and every other thread through a shared
    /// stack; every counted piece takes and returns a scratch. With `replay --jobs 2` that pool was
    /// 4% of the run's CPU on the corpus, all of it on the second thread. So the thread that
    /// compiled [`SPLIT`] uses it, and any other compiles a copy of its own (once per thread;
    /// about 6 ms here, against a corpus replay's 700 ms).
    static MINE: Option<Result<fancy_regex::Regex, String>> = {
        let first = FIRST.get_or_init(|| std::thread::current().id());
        (*first != std::thread::current().id())
            .then(|| fancy_regex::Regex::new(PATTERN).map_err(|e| e.to_string()))
    };
}

/// The thread that uses [`SPLIT`] itself.
static FIRST: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// The `i`-th little-endian u32 of `data`.
fn u32_at(data: &[u8], i: usize) -> Option<u32> {
    let from = i.checked_mul(4)?;
    let b = data.get(from..from.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// The bytes of the token of rank `rank`.
fn token(rank: u32) -> Option<&'static [u8]> {
    let r = usize::try_from(rank).ok()?;
    let from = usize::try_from(u32_at(OFFSETS, r)?).ok()?;
    let to = usize::try_from(u32_at(OFFSETS, r.checked_add(1)?)?).ok()?;
    BYTES.get(from..to)
}

/// The rank of the token whose bytes are `piece`, if there is one.
fn rank(piece: &[u8]) -> Option<u32> {
    let mut slot = first_slot(piece);
    // Every probe ends at an empty slot (the table is under half full); the bound is for form.
    for _ in 0..SLOTS {
        let stored = u32_at(TABLE, slot)?;
        let r = stored.checked_sub(1)?;
        if token(r)? == piece {
            return Some(r);
        }
        slot = slot.wrapping_add(1) % SLOTS;
    }
    None
}

/// Tokens `text` encodes to with `o200k_base`, special tokens' text counted as ordinary text
/// (tiktoken's `encode_ordinary(text).len()`).
pub fn count(text: &str) -> u64 {
    // This thread's own pattern when it has one; the shared one otherwise (also for a count made
    // while this thread's locals are destroyed).
    MINE.try_with(|mine| mine.as_ref().map(|own| count_with(own.as_ref(), text)))
        .ok()
        .flatten()
        .unwrap_or_else(|| count_with(SPLIT.as_ref(), text))
}

fn count_with(split: Result<&fancy_regex::Regex, &String>, text: &str) -> u64 {
    let Ok(split) = split else {
        // The pattern is a constant the tests compile; were it ever refused, the text is one piece.
        return merged_len(text.as_bytes());
    };
    let mut n = 0u64;
    let mut at = 0;
    for found in split.find_iter(text) {
        let Ok(m) = found else {
            // The matcher gave up (its backtracking limit): the rest is counted as one piece.
            // tiktoken-rs panics here; a count stays a count.
            return n.saturating_add(merged_len(text.as_bytes().get(at..).unwrap_or_default()));
        };
        at = m.end();
        n = n.saturating_add(piece_len(m.as_str().as_bytes()));
    }
    n
}

/// Tokens of one pre-tokenized piece.
fn piece_len(piece: &[u8]) -> u64 {
    if rank(piece).is_some() {
        1
    } else {
        merged_len(piece)
    }
}

/// Where a part of a piece being merged ends, where the part before it starts, and the rank of
/// merging it with the part after it (`None`: no such token, or no part after it).
#[derive(Clone, Copy)]
struct Part {
    end: usize,
    prev: usize,
    next: Option<u32>,
}

/// Tokens left of `piece` after byte-pair merging: the pair of adjacent parts whose bytes are the
/// lowest-ranked token merges first, the leftmost among equal ranks, until no pair is a token.
/// A heap of candidate merges keeps a long piece (one 1 MB word) at n log n.
fn merged_len(piece: &[u8]) -> u64 {
    let n = piece.len();
    let mut parts: Vec<Part> =
        (0..n).map(|i| Part { end: i.saturating_add(1), prev: i.wrapping_sub(1), next: None }).collect();
    let mut heap: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    for i in 0..n.saturating_sub(1) {
        let r = piece.get(i..i.saturating_add(2)).and_then(rank);
        if let (Some(r), Some(p)) = (r, parts.get_mut(i)) {
            p.next = Some(r);
            heap.push(Reverse((r, i)));
        }
    }
    let mut left = n;
    while let Some(Reverse((r, start))) = heap.pop() {
        let Some(part) = parts.get(start).copied() else { continue };
        // A merge whose parts changed since it was queued is stale.
        if part.next != Some(r) {
            continue;
        }
        let right = part.end;
        let Some(new_end) = parts.get(right).map(|p| p.end) else { continue };
        left = left.saturating_sub(1);
        if let Some(p) = parts.get_mut(right) {
            p.next = None;
        }
        let after = parts.get(new_end).map(|p| p.end);
        let next = after.and_then(|a| piece.get(start..a)).and_then(rank);
        if let Some(p) = parts.get_mut(start) {
            p.end = new_end;
            p.next = next;
        }
        if let Some(r) = next {
            heap.push(Reverse((r, start)));
        }
        if let Some(p) = parts.get_mut(new_end) {
            p.prev = start;
        }
        if start > 0 {
            let before = part.prev;
            let r = piece.get(before..new_end).and_then(rank);
            if let Some(p) = parts.get_mut(before) {
                p.next = r;
            }
            if let Some(r) = r {
                heap.push(Reverse((r, before)));
            }
        }
    }
    u64::try_from(left).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_compiles() {
        assert!(SPLIT.is_ok(), "{:?}", SPLIT.as_ref().err());
    }

    /// The first thread to count uses the shared pattern, any other its own copy: all count alike.
    #[test]
    fn every_thread_counts_alike() {
        let text = "Hello, world! 123 tokens   of  text\n\nwith ünïcödé, CamelCase and x+=1;";
        let here = count(text);
        let (there, own) =
            std::thread::spawn(move || (count(text), MINE.with(Option::is_some))).join().unwrap();
        assert_eq!(there, here);
        // This test's thread may or may not be the process's first to count; the spawned one
        // is not, unless this thread never counted, which it just did.
        assert!(own, "the second thread compiled its own pattern");
    }

    #[test]
    fn every_token_is_found_at_its_own_rank() {
        let mut r = 0u32;
        while let Some(t) = token(r) {
            assert_eq!(rank(t), Some(r), "rank {r}");
            r += 1;
        }
        assert_eq!(r, 199_998);
    }

    #[test]
    fn no_token_is_probed_for_long() {
        // A hash whose bits cluster (FNV-1a's top bits alone did) makes probes run for thousands
        // of slots; mixed, the longest run stays short.
        let mut longest = 0;
        let mut r = 0u32;
        while let Some(t) = token(r) {
            let mut slot = first_slot(t);
            let mut probes = 1;
            while u32_at(TABLE, slot) != Some(r + 1) {
                slot = (slot + 1) % SLOTS;
                probes += 1;
            }
            longest = longest.max(probes);
            r += 1;
        }
        assert!(longest <= 64, "longest probe {longest}");
    }

    #[test]
    fn bytes_that_are_no_token_have_no_rank() {
        assert_eq!(rank(b""), None);
        assert_eq!(rank("zzzzqqqqxxxxjjjj".as_bytes()), None);
    }
}
