//! CCR put and get-and-verify against raw blake3 + zstd-3 over the same items, and whether a
//! trained dictionary pays for items under 16 KB.

use crate::harness::{try_interleave, wal_frames};
use crate::{Plan, Row};
use salvage_ccr::{Ccr, SystemClock};
use salvage_replay::synth::mixed;
use salvage_store::{Options, Store};
use salvage_types::CcrKey;

fn items(plan: &Plan) -> Vec<Vec<u8>> {
    let per_size = ((16.0 * plan.scale) as usize).max(2);
    let mut out = Vec::new();
    let mut seed = 1;
    for size in [4 << 10, 16 << 10, 64 << 10, 256 << 10] {
        for _ in 0..per_size {
            out.push(mixed(size, seed).into_bytes());
            seed += 1;
        }
    }
    out
}

/// Runs the CCR workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let items = items(plan);
    let dir = tempfile::tempdir()?;
    let mut rows = vec![put_row(plan, &items, dir.path())?, floor_row(plan, &items, dir.path())?];
    rows.extend(get_rows(plan, &items, dir.path())?);
    rows.push(dictionary_row(plan)?);
    Ok(rows)
}

/// MB/s of `total` bytes in `d`.
fn mbps(total: usize, d: std::time::Duration) -> f64 {
    total as f64 / d.as_secs_f64() / 1e6
}

/// put: every round into a fresh file (opened beforehand), one transaction per put (autocommit).
fn put_row(plan: &Plan, items: &[Vec<u8>], dir: &std::path::Path) -> anyhow::Result<Row> {
    let total: usize = items.iter().map(Vec::len).sum();
    let clock = SystemClock;
    let stores: Vec<Store> = (0..plan.rounds + 1)
        .map(|i| Store::open(&dir.join(format!("put{i}.db")), &Options::default()))
        .collect::<Result<_, _>>()?;
    // The first round (the warm-up) puts into the first file: the pages its puts wrote.
    let first = dir.join("put0.db");
    let opened = wal_frames(&first);
    let mut round = 0;
    let mut comp = zstd::bulk::Compressor::new(3)?;
    let put = try_interleave(
        plan.rounds,
        || raw_put(&mut comp, items),
        || {
            let store = stores.get(round).ok_or_else(|| anyhow::anyhow!("out of archive files"))?;
            round += 1;
            let ccr = Ccr::new(store.conn(), &clock);
            for it in items {
                anyhow::ensure!(ccr.put(it)?.inserted, "a fresh file already held the item");
            }
            Ok(())
        },
    )?;
    Ok(Row::at_least(
        "ccr put, 4-256 KB items",
        "blake3 + zstd-3 compress",
        put.speed_ratio(),
        0.8,
        format!(
            "{:.0} MB/s vs {:.0} MB/s raw; {:.1} WAL pages per put",
            mbps(total, put.ours),
            mbps(total, put.baseline),
            wal_frames(&first).saturating_sub(opened) as f64 / items.len().max(1) as f64
        ),
    ))
}

/// The raw baseline of a put: BLAKE3 and zstd-3 of each item, with one reused compressor.
fn raw_put(comp: &mut zstd::bulk::Compressor<'_>, items: &[Vec<u8>]) -> anyhow::Result<()> {
    for it in items {
        let h = blake3::hash(it);
        let z = comp.compress(it)?;
        std::hint::black_box((h, z));
    }
    Ok(())
}

/// What any put that commits each original in a transaction of its own costs at least, on this
/// machine: the baseline's work (blake3 and zstd-3 of each item, the same reused compressor)
/// plus one bare `INSERT` of the key and the compressed bytes into a table with no index, in
/// autocommit, with a cached statement; every round into a fresh file (opened beforehand), as
/// the put row does. No lookup, no collision check, no index: what is left is SQLite writing
/// the compressed bytes through the `-wal` (two `pwrite` calls per 4 KB page) and taking its
/// locks for each transaction. The put row's ratio cannot exceed this one by more than noise.
fn floor_row(plan: &Plan, items: &[Vec<u8>], dir: &std::path::Path) -> anyhow::Result<Row> {
    let total: usize = items.iter().map(Vec::len).sum();
    let stores: Vec<Store> = (0..plan.rounds + 1)
        .map(|i| -> anyhow::Result<Store> {
            let store = Store::open(&dir.join(format!("floor{i}.db")), &Options::default())?;
            store.conn().execute_batch("CREATE TABLE floor (key BLOB NOT NULL, data BLOB NOT NULL)")?;
            Ok(store)
        })
        .collect::<Result<_, _>>()?;
    let first = dir.join("floor0.db");
    let opened = wal_frames(&first);
    let mut round = 0;
    let mut comp = zstd::bulk::Compressor::new(3)?;
    let mut comp_floor = zstd::bulk::Compressor::new(3)?;
    let pair = try_interleave(
        plan.rounds,
        || raw_put(&mut comp, items),
        || {
            let store = stores.get(round).ok_or_else(|| anyhow::anyhow!("out of floor files"))?;
            round += 1;
            let mut insert = store.conn().prepare_cached("INSERT INTO floor (key, data) VALUES (?1, ?2)")?;
            for it in items {
                let h = blake3::hash(it);
                let z = comp_floor.compress(it)?;
                anyhow::ensure!(
                    insert.execute(rusqlite::params![&h.as_bytes()[..], z])? == 1,
                    "not inserted"
                );
            }
            Ok(())
        },
    )?;
    Ok(Row::info(
        "ccr put floor: blake3 + zstd-3 + one bare SQLite insert per item",
        "blake3 + zstd-3 compress",
        pair.speed_ratio(),
        format!(
            "{:.0} MB/s vs {:.0} MB/s raw; {:.1} WAL pages per insert",
            mbps(total, pair.ours),
            mbps(total, pair.baseline),
            wal_frames(&first).saturating_sub(opened) as f64 / items.len().max(1) as f64
        ),
    ))
}

/// get-and-verify from one file holding every item, and the compression ratio it reached.
fn get_rows(plan: &Plan, items: &[Vec<u8>], dir: &std::path::Path) -> anyhow::Result<Vec<Row>> {
    let total: usize = items.iter().map(Vec::len).sum();
    let clock = SystemClock;
    let store = Store::open(&dir.join("get.db"), &Options::default())?;
    let ccr = Ccr::new(store.conn(), &clock);
    let mut compressed = Vec::new();
    let mut keys = Vec::new();
    for it in items {
        keys.push(ccr.put(it)?.key.short());
        compressed.push((zstd::bulk::compress(it, 3)?, it.len()));
    }
    let mut dec = zstd::bulk::Decompressor::new()?;
    let get = try_interleave(
        plan.rounds,
        || {
            for (z, len) in &compressed {
                let raw = dec.decompress(z, *len)?;
                std::hint::black_box(CcrKey::of(&raw));
            }
            Ok(())
        },
        || {
            for k in &keys {
                std::hint::black_box(ccr.get(k)?);
            }
            Ok(())
        },
    )?;
    let stats = ccr.stats()?;
    Ok(vec![
        Row::at_least(
            "ccr get-and-verify, 4-256 KB items",
            "zstd decompress + blake3",
            get.speed_ratio(),
            0.8,
            format!("{:.0} MB/s vs {:.0} MB/s raw", mbps(total, get.ours), mbps(total, get.baseline)),
        ),
        Row::info(
            "ccr compression ratio (mixed text)",
            "original bytes",
            stats.ratio(),
            format!("{} items", stats.entries),
        ),
    ])
}

/// Does a trained dictionary pay for items under 16 KB?
fn dictionary_row(plan: &Plan) -> anyhow::Result<Row> {
    let small: Vec<Vec<u8>> = (0..((400.0 * plan.scale) as u64).max(100))
        .map(|i| mixed(512 + (i as usize * 7919) % (15 << 10), 10_000 + i).into_bytes())
        .collect();
    let (train, test) = small.split_at(small.len() / 2);
    let dict = zstd::dict::from_samples(train, 64 << 10)?;
    let mut plain = zstd::bulk::Compressor::new(3)?;
    let mut with_dict = zstd::bulk::Compressor::with_dictionary(3, &dict)?;
    let raw_small: usize = test.iter().map(Vec::len).sum();
    let mut plain_len = 0usize;
    let mut dict_len = 0usize;
    for t in test {
        plain_len += plain.compress(t)?.len();
        dict_len += with_dict.compress(t)?.len();
    }
    let speed = try_interleave(
        plan.rounds,
        || compress_all(&mut plain, test),
        || compress_all(&mut with_dict, test),
    )?;
    Ok(Row::info(
        "zstd dictionary on < 16 KB items (ratio gain)",
        "zstd-3 without dictionary",
        plain_len as f64 / dict_len.max(1) as f64,
        format!(
            "ratio {:.2} -> {:.2}, compress speed {:.2}x",
            raw_small as f64 / plain_len.max(1) as f64,
            raw_small as f64 / dict_len.max(1) as f64,
            speed.speed_ratio()
        ),
    ))
}

/// Compresses every item (the timed body of the dictionary comparison).
fn compress_all(c: &mut zstd::bulk::Compressor<'_>, items: &[Vec<u8>]) -> anyhow::Result<()> {
    for t in items {
        std::hint::black_box(c.compress(t)?);
    }
    Ok(())
}
