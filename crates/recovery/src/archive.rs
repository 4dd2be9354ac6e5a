//! The one outside capability the ladder needs: archiving originals before it drops or cuts them.
//! The replay and the CLI plug in the real CCR; tests use [`MemoryArchive`].

use salvage_types::CcrKey;
use std::collections::BTreeMap;

/// Why archiving failed (the rung then fails instead of losing content).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("archive: {0}")]
pub struct ArchiveError(pub String);

/// Somewhere originals go before they are dropped or cut.
pub trait Archive {
    /// Stores the bytes and returns their key (idempotent).
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError>;
    /// The original for a 16-hex short key, if present (verified by the implementation).
    fn get(&self, short: &str) -> Option<Vec<u8>>;
}

/// An archive in memory (tests, `--no-journal` what-ifs).
#[derive(Debug, Default, Clone)]
pub struct MemoryArchive {
    blobs: BTreeMap<String, Vec<u8>>,
}

impl MemoryArchive {
    /// An empty archive.
    pub fn new() -> MemoryArchive {
        MemoryArchive::default()
    }

    /// How many originals it holds.
    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }

    /// Every original held.
    pub fn blobs(&self) -> impl Iterator<Item = &[u8]> {
        self.blobs.values().map(Vec::as_slice)
    }
}

impl Archive for MemoryArchive {
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError> {
        let key = CcrKey::of(bytes);
        self.blobs.entry(key.short()).or_insert_with(|| bytes.to_vec());
        Ok(key)
    }

    fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.blobs.get(short).filter(|b| CcrKey::of(b).short() == short).cloned()
    }
}

/// Archiving as a rung sees it: optional (CCR off), recording every key it produced.
pub struct Archiver<'a> {
    inner: Option<&'a mut dyn Archive>,
    /// Keys archived so far, in order, distinct.
    pub keys: Vec<CcrKey>,
}

impl<'a> Archiver<'a> {
    /// With an archive (CCR on) or without (CCR off).
    pub fn new(inner: Option<&'a mut dyn Archive>) -> Archiver<'a> {
        Archiver { inner, keys: Vec::new() }
    }

    /// True when CCR is on.
    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Archives bytes; `None` when CCR is off.
    pub fn put(&mut self, bytes: &[u8]) -> Result<Option<CcrKey>, ArchiveError> {
        match self.inner.as_deref_mut() {
            None => Ok(None),
            Some(a) => {
                let k = a.put(bytes)?;
                if !self.keys.contains(&k) {
                    self.keys.push(k);
                }
                Ok(Some(k))
            }
        }
    }
}
