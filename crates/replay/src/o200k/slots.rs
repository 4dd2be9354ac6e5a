//! The slot a token's bytes hash to in the o200k lookup table. Shared by the build script, which
//! lays the table out, and the tokenizer, which probes it: both must hash alike.

/// Slots in the table: a power of two, a little over twice the vocabulary (load about 0.38), so a
/// probe for a piece that is no token ends after about 1.6 slots.
pub const SLOTS: usize = 1 << 19;

/// The first slot to probe for `bytes` (64-bit FNV-1a, its bits mixed by MurmurHash3's 64-bit
/// finalizer: FNV's high bits barely depend on a short input's last bytes; a probe
/// that finds another token there moves one slot on, wrapping.
pub fn first_slot(bytes: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    // SLOTS is 2^19: the top 19 bits.
    (h >> (64 - 19)) as usize
}
