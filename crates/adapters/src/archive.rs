//! The real CCR as the ladder's archive.

use salvage_ccr::Ccr;
use salvage_recovery::archive::{Archive, ArchiveError};
use salvage_types::CcrKey;

/// CCR behind the `Archive` trait.
pub struct CcrArchive<'c> {
    /// The archive handle.
    pub ccr: Ccr<'c>,
}

impl Archive for CcrArchive<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<CcrKey, ArchiveError> {
        self.ccr.put(bytes).map(|p| p.key).map_err(ArchiveError::store)
    }

    fn get(&self, short: &str) -> Option<Vec<u8>> {
        self.ccr.get(short).ok()
    }
}
