//! The identity of a `-wal` file, read without SQLite: which database wrote its newest committed
//! copy of page 1.
//!
//! Design decision: a `-wal` beside our file whose committed page 1 names another application id
//! is refused (a connection that can write would checkpoint another database's pages into ours).
//! The walk runs before such a connection opens (a read-only one asks SQLite for page 1 instead:
//! `identity.rs`), and reads only frame headers (and the id of a frame holding page 1), never the
//! pages. A header walk trusts what a crash can leave behind, though: a writer killed
//! mid-transaction leaves frames nobody committed, and a frame whose header was written but whose
//! page still holds bytes of an earlier WAL cycle. So only the copies of page 1 in committed
//! transactions count, and a mismatch found that way in any of them is confirmed by the walk
//! SQLite itself trusts — the salts and the cumulative checksum of every frame, pages included —
//! whose newest committed copy decides before the file is refused. That full read happens only
//! when a foreign id is suspected, which a healthy file never shows.

use std::io::Read;
use std::path::Path;

/// WAL frame header length, and where the application id sits in a frame holding page 1 (the
/// frame header, then header offset 68 of the page).
const FRAME_HEADER: usize = 24;
const FRAME_APP_ID: usize = FRAME_HEADER + 68;
/// The WAL header's magic numbers: the low bit says the checksums read big-endian words.
const MAGIC_LE: u32 = 0x377f_0682;
const MAGIC_BE: u32 = 0x377f_0683;

/// The big-endian `u32` at `at`, if `b` holds it (SQLite's headers are big-endian).
pub(crate) fn be32(b: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// The WAL header fields the walks need.
struct Header {
    big_endian_sums: bool,
    page_size: u32,
    salts: (Option<u32>, Option<u32>),
    /// The header's own checksum: where the frames' cumulative checksum starts.
    sums: (u32, u32),
}

/// SQLite's WAL checksum over `data` (a multiple of 8 bytes), continuing from `s`.
fn checksum(big_endian: bool, data: &[u8], s: &mut (u32, u32)) {
    let word = |w: &[u8]| -> u32 {
        let b: [u8; 4] = w.try_into().unwrap_or([0; 4]);
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    for pair in data.chunks_exact(8) {
        let Some((x0, x1)) = pair.split_at_checked(4) else { continue };
        s.0 = s.0.wrapping_add(word(x0)).wrapping_add(s.1);
        s.1 = s.1.wrapping_add(word(x1)).wrapping_add(s.0);
    }
}

/// The WAL header, when it is one SQLite could have written (magic, a power-of-two page size in
/// 512..=65536, a matching checksum); `None` concludes nothing.
fn header(wal: &mut std::fs::File) -> Option<Header> {
    let mut h = [0u8; 32];
    wal.read_exact(&mut h).ok()?;
    let big_endian_sums = match be32(&h, 0)? {
        MAGIC_LE => false,
        MAGIC_BE => true,
        _ => return None,
    };
    let page_size = be32(&h, 8)?;
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return None;
    }
    let mut sums = (0, 0);
    checksum(big_endian_sums, h.get(..24)?, &mut sums);
    if (Some(sums.0), Some(sums.1)) != (be32(&h, 24), be32(&h, 28)) {
        return None;
    }
    Some(Header { big_endian_sums, page_size, salts: (be32(&h, 16), be32(&h, 20)), sums })
}

/// The application ids of the committed copies of page 1, oldest first, walking frame headers
/// only (or, with `verify`, whole frames with their checksums, as SQLite's recovery does). The
/// walk ends at the first frame of another WAL cycle (other salts), with a bad checksum, or cut
/// short. The checked walk's ids are a prefix of the header walk's: it stops at the first frame
/// whose checksum fails, which the header walk reads past.
fn committed_page1_ids(wal: &std::fs::File, wal_len: u64, h: &Header, verify: bool) -> Vec<u32> {
    let mut committed = Vec::new();
    walk(wal, wal_len, h, verify, &mut committed);
    committed
}

/// [`committed_page1_ids`] into `committed` (`None` when the header's page size does not fit).
fn walk(wal: &std::fs::File, wal_len: u64, h: &Header, verify: bool, committed: &mut Vec<u32>) -> Option<()> {
    let frame_len = u64::from(h.page_size).checked_add(FRAME_HEADER as u64)?;
    let mut buf = vec![0u8; if verify { usize::try_from(frame_len).ok()? } else { FRAME_APP_ID + 4 }];
    let (mut at, mut sums) = (32u64, h.sums);
    let mut pending = None;
    while at.checked_add(frame_len).is_some_and(|end| end <= wal_len) {
        if read_at(wal, &mut buf, at).is_err() || (be32(&buf, 8), be32(&buf, 12)) != h.salts {
            break;
        }
        if verify {
            checksum(h.big_endian_sums, buf.get(..8)?, &mut sums);
            checksum(h.big_endian_sums, buf.get(FRAME_HEADER..)?, &mut sums);
            if (Some(sums.0), Some(sums.1)) != (be32(&buf, 16), be32(&buf, 20)) {
                break;
            }
        }
        if be32(&buf, 0) == Some(1) {
            pending = be32(&buf, FRAME_APP_ID);
        }
        // A frame recording the database size after a commit ends a transaction.
        if be32(&buf, 4).is_some_and(|size| size != 0) {
            committed.extend(pending.take());
        }
        at = at.saturating_add(frame_len);
    }
    Some(())
}

/// The application id a `-wal` beside `path` would write into the database, when it names one
/// other than `file_id` (the id in the database file's header): `Some(foreign id)` only when the
/// checksummed walk confirms it; `None` for our own id, no id, or anything unreadable. The header
/// walk only decides whether the checked one is needed: any committed copy naming another id
/// sends it there, not only the newest (a later copy whose checksum fails is one SQLite never
/// replays, so an earlier one may be the copy it does).
pub(crate) fn foreign_wal_id(path: &Path, file_id: u32) -> Option<u32> {
    let mut wal_path = path.as_os_str().to_owned();
    wal_path.push("-wal");
    let mut wal = std::fs::File::open(&wal_path).ok()?;
    let wal_len = wal.metadata().map(|m| m.len()).unwrap_or(0);
    let h = header(&mut wal)?;
    let foreign = |w: &u32| *w != 0 && *w != file_id;
    if !committed_page1_ids(&wal, wal_len, &h, false).iter().any(foreign) {
        return None;
    }
    committed_page1_ids(&wal, wal_len, &h, true).last().copied().filter(foreign)
}

/// Reads `buf.len()` bytes at `at`: one `pread` per frame where the platform has it.
#[cfg(unix)]
fn read_at(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
}

#[cfg(not(unix))]
fn read_at(mut f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(at)).and_then(|_| f.read_exact(buf))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The checksum, for tests that rewrite a header.
    pub(crate) fn sums(big_endian: bool, data: &[u8], s: &mut (u32, u32)) {
        checksum(big_endian, data, s);
    }

    /// A `-wal` as SQLite writes one (`big_endian` picks the checksum word order): a header, then
    /// `frames` of (page number, commit size, application id at page offset 68), each checksummed.
    pub(crate) fn wal_bytes(big_endian: bool, page_size: u32, frames: &[(u32, u32, u32)]) -> Vec<u8> {
        let (salt1, salt2) = (0x0102_0304u32, 0x0506_0708u32);
        let mut w = vec![0u8; 32];
        w[0..4].copy_from_slice(&(if big_endian { MAGIC_BE } else { MAGIC_LE }).to_be_bytes());
        w[4..8].copy_from_slice(&3_007_000u32.to_be_bytes());
        w[8..12].copy_from_slice(&page_size.to_be_bytes());
        w[16..20].copy_from_slice(&salt1.to_be_bytes());
        w[20..24].copy_from_slice(&salt2.to_be_bytes());
        let mut s = (0, 0);
        checksum(big_endian, &w[..24], &mut s);
        w[24..28].copy_from_slice(&s.0.to_be_bytes());
        w[28..32].copy_from_slice(&s.1.to_be_bytes());
        for &(pgno, commit, id) in frames {
            let mut f = vec![0u8; 24 + page_size as usize];
            f[0..4].copy_from_slice(&pgno.to_be_bytes());
            f[4..8].copy_from_slice(&commit.to_be_bytes());
            f[8..12].copy_from_slice(&salt1.to_be_bytes());
            f[12..16].copy_from_slice(&salt2.to_be_bytes());
            f[24 + 68..24 + 72].copy_from_slice(&id.to_be_bytes());
            for (i, b) in f[24 + 100..].iter_mut().enumerate() {
                *b = (i * 7 % 251) as u8;
            }
            checksum(big_endian, &f[..8], &mut s);
            checksum(big_endian, &f[24..], &mut s);
            f[16..20].copy_from_slice(&s.0.to_be_bytes());
            f[20..24].copy_from_slice(&s.1.to_be_bytes());
            w.extend(f);
        }
        w
    }
}
