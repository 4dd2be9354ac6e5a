//! The one outside capability the ladder needs: archiving originals before it drops or cuts them.
//! The replay and the CLI plug in the real CCR; tests use [`MemoryArchive`].

use salvage_types::CcrKey;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The error of the store behind an [`Archive`] (shared, so errors stay `Clone`).
pub type StoreSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why archiving failed (the rung then fails instead of losing content). Each variant keeps
/// its cause as the error's source.
#[derive(Debug, Clone)]
pub enum ArchiveError {
    /// What was to be archived (a transcript of dropped messages) could not be encoded.
    Encode(Arc<serde_json::Error>),
    /// The store behind the archive refused the bytes.
    Store(StoreSource),
}

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveError::Encode(e) => write!(f, "archive: cannot encode the transcript: {e}"),
            ArchiveError::Store(e) => write!(f, "archive: {e}"),
        }
    }
}

/// The source is the cause itself, not the `Arc` around it, so callers can downcast it.
impl std::error::Error for ArchiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArchiveError::Encode(e) => Some(&**e),
            ArchiveError::Store(e) => Some(&**e),
        }
    }
}

impl ArchiveError {
    /// A failure of the store behind the archive, keeping it as the source.
    pub fn store(e: impl std::error::Error + Send + Sync + 'static) -> ArchiveError {
        ArchiveError::Store(Arc::new(e))
    }
}

impl From<serde_json::Error> for ArchiveError {
    fn from(e: serde_json::Error) -> ArchiveError {
        ArchiveError::Encode(Arc::new(e))
    }
}

/// Equal when of the same kind with the same message (the sources are not comparable).
impl PartialEq for ArchiveError {
    fn eq(&self, other: &ArchiveError) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.to_string() == other.to_string()
    }
}

impl Eq for ArchiveError {}

/// Somewhere originals go before they are dropped or cut.
pub trait Archive {
    /// Stores the bytes and returns their key (idempotent).
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError>;
    /// [`Archive::put`] of bytes the caller gives up (a serialized transcript): an archive that
    /// keeps them can take the buffer instead of copying it.
    fn put_owned(&mut self, bytes: Vec<u8>) -> Result<CcrKey, ArchiveError> {
        self.put(&bytes)
    }
    /// The original for a 16-hex short key, if present (verified by the implementation).
    fn get(&self, short: &str) -> Option<Vec<u8>>;
    /// True when the archive holds the key (override when cheaper than [`Archive::get`]).
    fn holds(&self, short: &str) -> bool {
        self.get(short).is_some()
    }
    /// The full key of a short key the archive holds (override when cheaper than hashing).
    fn resolve(&self, short: &str) -> Option<CcrKey> {
        self.get(short).map(|b| CcrKey::of(&b))
    }
}

/// An archive in memory (tests, `--no-journal` what-ifs).
#[derive(Debug, Default, Clone)]
pub struct MemoryArchive {
    /// By short key: the full key (computed once, at put) and the original.
    blobs: BTreeMap<String, (CcrKey, Vec<u8>)>,
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
        self.blobs.values().map(|(_, b)| b.as_slice())
    }

    /// Every original held with its key, as computed when it was put: a caller moving them into
    /// CCR need not hash them again.
    pub fn keyed(&self) -> impl Iterator<Item = (CcrKey, &[u8])> {
        self.blobs.values().map(|(k, b)| (*k, b.as_slice()))
    }

    /// The original of a full key, without hashing it again (it was hashed when put, and memory
    /// is not a file that can be tampered with).
    pub fn original(&self, key: &CcrKey) -> Option<&[u8]> {
        self.blobs.get(&key.short()).filter(|(k, _)| k == key).map(|(_, b)| b.as_slice())
    }
}

impl Archive for MemoryArchive {
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError> {
        let key = CcrKey::of(bytes);
        self.blobs.entry(key.short()).or_insert_with(|| (key, bytes.to_vec()));
        Ok(key)
    }

    fn put_owned(&mut self, bytes: Vec<u8>) -> Result<CcrKey, ArchiveError> {
        let key = CcrKey::of(&bytes);
        self.blobs.entry(key.short()).or_insert((key, bytes));
        Ok(key)
    }

    fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.blobs.get(short).filter(|(_, b)| CcrKey::of(b).short() == short).map(|(_, b)| b.clone())
    }
}

/// The length of the recoverable suffix (`\n[full content recoverable via @recall <<ccr:…>>]`).
pub const SUFFIX_LEN: usize = 64;

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

    /// True when the archive holds the key (always false with CCR off).
    pub fn holds(&self, short: &str) -> bool {
        self.inner.as_deref().is_some_and(|a| a.holds(short))
    }

    /// The original archived under a key (`None` with CCR off).
    pub fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.inner.as_deref().and_then(|a| a.get(short))
    }

    /// The key of the original `content` was made from, when salvage made it: our suffix or stub
    /// form, a key this archive holds, **and** an original under it that `content` was cut from
    /// ([`salvage_types::ccr_key::archived_key`]). Content that merely quotes a marker, or ends
    /// with our suffix for a key holding something else, is ordinary content.
    pub fn archived_original(&self, content: &str) -> Option<String> {
        salvage_types::ccr_key::archived_key(content, |k| self.get(k)).map(str::to_string)
    }

    /// Shortens `content` with `reduce` while keeping its original recoverable. `reduce` gets the
    /// text to shorten and the bytes it must leave for the suffix. Content salvage already
    /// archived keeps its key: the text before its suffix is reduced and the same suffix is put
    /// back. Anything else is archived first (CCR on) and gets the suffix of its own key.
    /// `None` when the result would not be shorter.
    pub fn reduce(
        &mut self,
        content: &str,
        reduce: impl FnOnce(&str, usize) -> Option<String>,
    ) -> Result<Option<String>, ArchiveError> {
        use salvage_types::ccr_key::{marker_for, strip_recoverable_suffix};
        // Only a cut keeps its key: its text is pieces of its original. A stub (salvage's
        // description of an original) is cut like any text, archived first: its words are in no
        // original.
        let ours = self.archived_original(content).filter(|_| salvage_types::ccr_key::is_cut(content));
        let (body, suffix) = match ours {
            Some(k) => {
                let body = strip_recoverable_suffix(content).unwrap_or(content);
                (body, Some(format!("\n[full content recoverable via @recall {}]", marker_for(&k))))
            }
            None if self.enabled() => (content, None),
            None => {
                return Ok(reduce(content, 0).filter(|c| c.len() < content.len()));
            }
        };
        let room = suffix.as_ref().map_or(SUFFIX_LEN, String::len);
        let Some(mut cut) = reduce(body, room) else { return Ok(None) };
        if cut.len().saturating_add(room) >= content.len() {
            return Ok(None);
        }
        match suffix {
            Some(s) => cut.push_str(&s),
            None => {
                if let Some(k) = self.put(content.as_bytes())? {
                    cut.push_str(&salvage_types::ccr_key::recoverable_suffix(&k));
                }
            }
        }
        Ok((cut.len() < content.len()).then_some(cut))
    }

    /// Archives a transcript (the JSON of messages dropped or summarized away) and returns its
    /// marker; `None` when CCR is off.
    pub fn put_transcript<T: serde::Serialize + ?Sized>(
        &mut self,
        messages: &T,
    ) -> Result<Option<String>, ArchiveError> {
        if !self.enabled() {
            return Ok(None);
        }
        let transcript = serde_json::to_vec(messages)?;
        // The transcript is handed over, not copied: it can be most of a history.
        Ok(self.record(|a| a.put_owned(transcript))?.map(|k| k.marker()))
    }

    /// Archives bytes; `None` when CCR is off.
    pub fn put(&mut self, bytes: &[u8]) -> Result<Option<CcrKey>, ArchiveError> {
        self.record(|a| a.put(bytes))
    }

    /// Runs `put` on the archive (CCR on) and records the key it returns.
    fn record(
        &mut self,
        put: impl FnOnce(&mut dyn Archive) -> Result<CcrKey, ArchiveError>,
    ) -> Result<Option<CcrKey>, ArchiveError> {
        match self.inner.as_deref_mut() {
            None => Ok(None),
            Some(a) => {
                let k = put(a)?;
                if !self.keys.contains(&k) {
                    self.keys.push(k);
                }
                Ok(Some(k))
            }
        }
    }
}
