//! The stored form of an original: raw below [`TINY`] bytes, zstd otherwise; decoding always
//! verifies the content against its key.

use super::CcrError;
use salvage_types::ccr_key::CcrKey;
use std::cell::RefCell;

/// Below this size an original is stored raw: compression cannot pay.
pub const TINY: usize = 64;
/// The zstd level.
pub const LEVEL: i32 = 3;

pub(super) const CODEC_RAW: i64 = 0;
pub(super) const CODEC_ZSTD: i64 = 1;

// One compression and one decompression context per thread, kept between calls: creating a
// context allocates its tables, which costs as much as working a few-KB original.
thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Compresses at [`LEVEL`] with this thread's context. The output is trimmed to its length: the
/// compressor allocates zstd's bound (a little over the input's size), and a put of many items
/// holds every compressed item at once.
pub(super) fn compress(bytes: &[u8]) -> Result<Vec<u8>, CcrError> {
    COMPRESSOR.with(|c| {
        let mut slot = c.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(LEVEL).map_err(CcrError::Compress)?);
        }
        match slot.as_mut() {
            Some(comp) => {
                let mut out = comp.compress(bytes).map_err(CcrError::Compress)?;
                out.shrink_to_fit();
                Ok(out)
            }
            None => Err(CcrError::Compress(std::io::Error::other("no compressor"))),
        }
    })
}

/// Decompresses `data` (one or more concatenated frames) into at most `cap` bytes.
fn decompress(data: &[u8], cap: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|d| {
        let mut slot = d.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot.as_mut() {
            Some(dec) => dec.decompress(data, cap),
            None => Err(std::io::Error::other("no decompressor")),
        }
    })
}

/// Decodes stored bytes and checks them against the key. Never returns unverified content.
pub fn decode(key: &CcrKey, codec: i64, raw_len: u64, data: &[u8], limit: u64) -> Result<Vec<u8>, CcrError> {
    let corrupt = |reason: String| CcrError::Corrupt { key: key.hex(), reason };
    if raw_len > limit {
        return Err(CcrError::TooLarge { key: key.hex(), len: raw_len, limit });
    }
    let cap = usize::try_from(raw_len).map_err(|_| corrupt("length does not fit in memory".into()))?;
    let bytes = match codec {
        CODEC_RAW => data.to_vec(),
        CODEC_ZSTD => decompress(data, cap).map_err(|e| corrupt(format!("zstd: {e}")))?,
        other => return Err(corrupt(format!("unknown codec {other}"))),
    };
    if bytes.len() != cap {
        return Err(corrupt(format!("decoded {} bytes, expected {raw_len}", bytes.len())));
    }
    if CcrKey::of(&bytes) != *key {
        return Err(corrupt("content does not hash to its key".into()));
    }
    Ok(bytes)
}

pub(super) fn key_from_blob(b: Vec<u8>) -> Result<CcrKey, CcrError> {
    let arr: [u8; 32] = b.try_into().map_err(|_| CcrError::Corrupt {
        key: "(unknown)".into(),
        reason: "stored key is not 32 bytes".into(),
    })?;
    Ok(CcrKey(arr))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn compressed_items_hold_no_more_than_their_bytes() {
        let text = "the same line of a log, again and again\n".repeat(30_000);
        let out = super::compress(text.as_bytes()).unwrap();
        assert!(out.len() < text.len() / 10, "{} bytes", out.len());
        assert_eq!(out.capacity(), out.len());
    }
}
