//! The put side: hashing each original (unless its caller already holds the key) and compressing
//! it, before the write transaction and spread over the machine's cores.
//!
//! Design decisions:
//! - Level-3 zstd runs at about 225 MB/s on one core here, so compression is most of a put: the
//!   originals of one put are independent, and an original over [`FRAME`] bytes is cut into
//!   [`FRAME`]-byte pieces compressed as separate zstd frames. Concatenated frames are one valid
//!   zstd stream, which [`super::decode`] reads whole (the stored length still caps it and the
//!   hash still verifies it); an original up to [`FRAME`] bytes is stored exactly as before. The
//!   cut is fixed, so the stored form does not depend on how many cores did the work. The cost is
//!   a little ratio on multi-megabyte originals (each frame starts with an empty window).
//! - Small puts (under [`PARALLEL_MIN`] bytes in all, or a single frame to compress) run on the
//!   calling thread, whose compression context is kept between puts: starting a thread, and the
//!   fresh context it needs, would cost more than it saves.
//! - A caller may give the key it already computed (the in-memory archive of a rung hashes every
//!   original once): it is then not hashed again. Debug builds hash anyway and refuse a wrong key;
//!   in release a wrong key cannot be returned either, since every read verifies the content
//!   against its key.

use super::codec::{compress, CODEC_RAW, CODEC_ZSTD, TINY};
use super::CcrError;
use salvage_types::ccr_key::CcrKey;
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Originals larger than this are compressed as several frames of this size, in parallel.
pub const FRAME: usize = 1 << 20;
/// Below this many bytes in all, a put does its work on the calling thread.
pub const PARALLEL_MIN: usize = 256 << 10;

/// An original ready to insert: its key, its length and its stored form (compressed, or the
/// original itself when stored raw: borrowed, or owned when the caller gave it up).
pub(super) struct Prepared<'b> {
    pub key: CcrKey,
    pub raw_len: usize,
    pub codec: i64,
    data: Cow<'b, [u8]>,
}

impl<'b> Prepared<'b> {
    /// The bytes the row stores.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The same without borrowing: a compressed form is kept (it is owned already); a raw one
    /// is left empty until [`Prepared::attach`] gives its original back.
    pub fn detach(self) -> Prepared<'static> {
        let data = match self.codec {
            CODEC_RAW => Cow::Owned(Vec::new()),
            _ => Cow::Owned(self.data.into_owned()),
        };
        Prepared { key: self.key, raw_len: self.raw_len, codec: self.codec, data }
    }
}

impl Prepared<'static> {
    /// Gives a detached original back its bytes (`original`, these very bytes, which the
    /// caller gives up): kept when stored raw, dropped when compressed.
    pub fn attach(mut self, original: Vec<u8>) -> Prepared<'static> {
        if self.codec == CODEC_RAW {
            self.data = Cow::Owned(original);
        }
        self
    }
}

/// One unit of work: hash original `i`, or compress frame `f` of original `i`.
#[derive(Clone, Copy)]
enum Job {
    Hash(usize),
    Frame(usize, usize),
}

/// What a job produced.
enum Done {
    Key(usize, CcrKey),
    Frame(usize, usize, Vec<u8>),
}

fn jobs(items: &[(Option<CcrKey>, &[u8])]) -> Vec<Job> {
    let mut out = Vec::new();
    for (i, (key, bytes)) in items.iter().enumerate() {
        if key.is_none() || cfg!(debug_assertions) {
            out.push(Job::Hash(i));
        }
        if bytes.len() >= TINY {
            out.extend((0..bytes.len().div_ceil(FRAME)).map(|f| Job::Frame(i, f)));
        }
    }
    out
}

fn run(job: Job, items: &[(Option<CcrKey>, &[u8])]) -> Result<Done, CcrError> {
    let bytes = |i: usize| items.get(i).map_or(&[][..], |(_, b)| *b);
    match job {
        Job::Hash(i) => Ok(Done::Key(i, CcrKey::of(bytes(i)))),
        Job::Frame(i, f) => {
            let piece = bytes(i).chunks(FRAME).nth(f).unwrap_or(&[]);
            Ok(Done::Frame(i, f, compress(piece)?))
        }
    }
}

/// Runs every job, on this thread alone or on as many threads as there are cores.
fn run_all(items: &[(Option<CcrKey>, &[u8])], jobs: &[Job]) -> Result<Vec<Done>, CcrError> {
    let total: usize = items.iter().map(|(_, b)| b.len()).sum();
    // Hashing is ~15 times faster than compressing: only frames are worth another thread.
    let frames = jobs.iter().filter(|j| matches!(j, Job::Frame(..))).count();
    let threads = if total < PARALLEL_MIN || frames < 2 { 1 } else { cores().min(frames) };
    if threads <= 1 {
        return jobs.iter().map(|j| run(*j, items)).collect();
    }
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(jobs.len()));
    let work = || -> Result<(), CcrError> {
        while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
            let done = run(*job, items)?;
            results.lock().map_err(|_| poisoned())?.push(done);
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mine = work();
        // Every worker's error counts; a worker that panicked (it cannot: nothing here panics)
        // is reported rather than propagated.
        helpers.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(poisoned()))).fold(mine, Result::and)
    })?;
    results.into_inner().map_err(|_| poisoned())
}

/// The cores this process may use, read once (it reads cgroup files: too slow for every put).
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

fn poisoned() -> CcrError {
    CcrError::Compress(std::io::Error::other("a compression worker failed"))
}

/// Hashes (where no key is given) and compresses every original; the result is in input order.
pub(super) fn prepare<'b>(items: &[(Option<CcrKey>, &'b [u8])]) -> Result<Vec<Prepared<'b>>, CcrError> {
    let jobs = jobs(items);
    let mut keys: Vec<Option<CcrKey>> = vec![None; items.len()];
    let mut frames: Vec<Vec<Option<Vec<u8>>>> =
        items.iter().map(|(_, b)| vec![None; b.len().div_ceil(FRAME)]).collect();
    for done in run_all(items, &jobs)? {
        match done {
            Done::Key(i, k) => {
                if let Some(slot) = keys.get_mut(i) {
                    *slot = Some(k);
                }
            }
            Done::Frame(i, f, z) => {
                if let Some(slot) = frames.get_mut(i).and_then(|v| v.get_mut(f)) {
                    *slot = Some(z);
                }
            }
        }
    }
    items
        .iter()
        .zip(keys)
        .zip(frames)
        .map(|(((given, bytes), hashed), frames)| finish(*given, bytes, hashed, frames))
        .collect()
}

/// The key and stored form of one original from its jobs' results.
fn finish<'b>(
    given: Option<CcrKey>,
    bytes: &'b [u8],
    hashed: Option<CcrKey>,
    frames: Vec<Option<Vec<u8>>>,
) -> Result<Prepared<'b>, CcrError> {
    let key = match (given, hashed) {
        (Some(g), Some(h)) if g != h => {
            return Err(CcrError::Corrupt {
                key: g.hex(),
                reason: "content put under this key does not hash to it".into(),
            })
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => return Err(poisoned()),
    };
    if bytes.len() < TINY {
        return Ok(Prepared { key, raw_len: bytes.len(), codec: CODEC_RAW, data: Cow::Borrowed(bytes) });
    }
    let mut parts: Vec<Vec<u8>> =
        frames.into_iter().map(|f| f.ok_or_else(poisoned)).collect::<Result<_, _>>()?;
    let z = if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        let mut z = Vec::with_capacity(parts.iter().map(Vec::len).sum());
        parts.iter().for_each(|p| z.extend_from_slice(p));
        z
    };
    if z.len() < bytes.len().saturating_sub(bytes.len() / 32) {
        Ok(Prepared { key, raw_len: bytes.len(), codec: CODEC_ZSTD, data: Cow::Owned(z) })
    } else {
        Ok(Prepared { key, raw_len: bytes.len(), codec: CODEC_RAW, data: Cow::Borrowed(bytes) })
    }
}
