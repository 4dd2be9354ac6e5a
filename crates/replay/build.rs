//! Lays out the o200k vocabulary for the simulated provider's token counter (`src/o200k/`): the
//! tokens' bytes in rank order, their offsets, and an open-addressing table from bytes to rank,
//! read from tiktoken-rs's own o200k_base at build time. The binary carries these as read-only
//! data (about 4 MB, paged in as touched) instead of building tiktoken-rs's hash maps of owned
//! byte strings on the heap at run time (about 27 MB).

#[path = "src/o200k/slots.rs"]
mod slots;

use std::io::Write;
use std::path::Path;

/// Ranks of ordinary tokens are dense from 0; the special tokens sit above them.
const SPECIAL_FROM: u32 = 199_998;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/o200k/slots.rs");
    let bpe = tiktoken_rs::o200k_base()?;
    let mut bytes = Vec::new();
    let mut offsets: Vec<u32> = vec![0];
    for rank in 0..SPECIAL_FROM {
        let token = bpe.decode_bytes(&[rank]).map_err(|e| format!("o200k rank {rank}: {e:?}"))?;
        bytes.extend_from_slice(&token);
        offsets.push(u32::try_from(bytes.len())?);
    }
    // The ordinary ranks end where this says: the first rank after them is no ordinary token.
    if bpe.decode_bytes(&[SPECIAL_FROM]).is_ok() {
        return Err(format!("o200k has an ordinary token at rank {SPECIAL_FROM}").into());
    }
    // Each slot holds rank + 1 (0 = empty).
    let mut table = vec![0u32; slots::SLOTS];
    for rank in 0..SPECIAL_FROM {
        let (from, to) = (offsets[rank as usize] as usize, offsets[rank as usize + 1] as usize);
        let mut slot = slots::first_slot(&bytes[from..to]);
        while table[slot] != 0 {
            slot = (slot + 1) % slots::SLOTS;
        }
        table[slot] = rank + 1;
    }
    let out = std::env::var("OUT_DIR")?;
    let out = Path::new(&out);
    std::fs::write(out.join("o200k_bytes.bin"), &bytes)?;
    write_u32s(&out.join("o200k_offsets.bin"), &offsets)?;
    write_u32s(&out.join("o200k_table.bin"), &table)?;
    std::fs::write(out.join("o200k_pattern.txt"), tiktoken_rs::O200K_BASE_PAT_STR)?;
    Ok(())
}

fn write_u32s(path: &Path, values: &[u32]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for v in values {
        f.write_all(&v.to_le_bytes())?;
    }
    f.flush()
}
