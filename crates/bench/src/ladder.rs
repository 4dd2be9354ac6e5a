//! Rung 3 with shrink, and the full compaction pipeline, on a 10 MB history against serde_json
//! parsing of that history.
//!
//! The target rows measure the product path: archiving on, as every replay runs. Like the replay
//! driver, the rung archives into memory (hashing each original once) and the originals then
//! move into the CCR of a SQLite file in one transaction, with the one `Ccr::put_all_keyed` the
//! journal makes for the event that references them (compressing on every core). The CCR-off rows stay as information.

use crate::harness::try_interleave;
use crate::{Plan, Row};
use salvage_ccr::{Ccr, SystemClock};
use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::ladder::{self, Rung, RungContext};
use salvage_recovery::tool_budget::Limits;
use salvage_replay::synth::agent_history;
use salvage_store::{Options, Store};
use salvage_types::Message;
use std::path::Path;

/// Fresh archive files opened beforehand, one per timed run, so no run measures opening a
/// file or re-archiving what an earlier run stored.
pub struct Stores {
    stores: Vec<Store>,
    next: usize,
}

impl Stores {
    /// `n` fresh files in `dir`, named after `tag`.
    pub fn open(dir: &Path, tag: &str, n: usize) -> anyhow::Result<Stores> {
        let stores = (0..n)
            .map(|i| Store::open(&dir.join(format!("{tag}{i}.db")), &Options::default()))
            .collect::<Result<_, _>>()?;
        Ok(Stores { stores, next: 0 })
    }

    /// The next unused file.
    pub fn take(&mut self) -> anyhow::Result<&Store> {
        let s = self.stores.get(self.next).ok_or_else(|| anyhow::anyhow!("out of archive files"))?;
        self.next += 1;
        Ok(s)
    }
}

/// Moves what a rung archived in memory into the CCR of `store`, in one transaction.
fn flush(mem: &MemoryArchive, store: &Store) -> anyhow::Result<()> {
    let conn = store.conn();
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let clock = SystemClock;
    let ccr = Ccr::new(conn, &clock);
    // As the journal's append does: one put of every original with the key the in-memory
    // archive computed (not hashed again), compressed on every core.
    let blobs: Vec<(salvage_types::CcrKey, &[u8])> = mem.keyed().collect();
    if let Err(e) = ccr.put_all_keyed(&blobs) {
        conn.execute_batch("ROLLBACK")?;
        return Err(e.into());
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Rung 3 with shrink on `history`, archiving into `store` (the product path) or with CCR off.
pub fn rung3(history: &[Message], store: Option<&Store>) -> anyhow::Result<()> {
    let mut mem = MemoryArchive::new();
    let mut ctx = RungContext {
        archiver: Archiver::new(store.map(|_| &mut mem as &mut dyn Archive)),
        keep: 10,
        limits: Limits { per_result: 20_000, per_turn: 200_000 },
        payload_budget: Some(90 * 1024),
        rung3_keep: ladder::RUNG3_KEEP,
    };
    let out = ladder::apply(Rung::Nuclear, history, &mut ctx)?;
    drop(ctx);
    if let Some(s) = store {
        anyhow::ensure!(!mem.is_empty(), "rung 3 archived nothing: the history is too small to measure");
        flush(&mem, s)?;
    }
    std::hint::black_box(out);
    Ok(())
}

/// Microcompact, then the compaction pipeline up to level 3, archiving into `store` (the
/// product path) or with CCR off.
pub fn pipeline_once(history: &[Message], store: Option<&Store>) -> anyhow::Result<()> {
    use salvage_recovery::compaction::{compact, CompactionState, Io, NoHooks, NoMemory, Plan as CPlan};
    use salvage_recovery::microcompact::{microcompact, Ages};
    use salvage_recovery::summarizer::{Builtin, Cancel};
    use salvage_types::event::Trigger;
    let turn = history.iter().filter(|m| m.role == salvage_types::Role::Assistant).count() as u32;
    let mut mem = MemoryArchive::new();
    let lookup = |_: &str| None;
    let (h, _) = {
        let mut a = Archiver::new(store.map(|_| &mut mem as &mut dyn Archive));
        microcompact(history, turn, Ages { truncate: 2, summarize: 4 }, &mut a, &lookup)?
    };
    let mut state = CompactionState { backoff: 1, ..CompactionState::default() };
    let cancel = Cancel::new();
    let mut status = |_: salvage_recovery::compaction::Phase, _: &str| {};
    let mut summarizer = Builtin;
    let mut io = Io {
        archiver: Archiver::new(store.map(|_| &mut mem as &mut dyn Archive)),
        lookup: &lookup,
        summarizer: &mut summarizer,
        hooks: &mut NoHooks,
        memory: &mut NoMemory,
        status: &mut status,
        cancel: &cancel,
    };
    let p = CPlan {
        budget: 400_000,
        trigger: Trigger::Auto,
        min_keep_recent: 6,
        summarizer_window_chars: 800_000,
    };
    let out = compact(&h, &p, &mut state, &mut io)?;
    drop(io);
    if let Some(s) = store {
        anyhow::ensure!(!mem.is_empty(), "the pipeline archived nothing");
        flush(&mem, s)?;
    }
    std::hint::black_box(out);
    Ok(())
}

/// Parsing the history's JSON into messages: the baseline of both workloads.
fn parse(json: &[u8]) -> anyhow::Result<()> {
    let parsed: Vec<Message> = serde_json::from_slice(json)?;
    std::hint::black_box(parsed);
    Ok(())
}

type Workload = fn(&[Message], Option<&Store>) -> anyhow::Result<()>;

fn rows(
    plan: &Plan,
    name: &str,
    seed: u64,
    max: f64,
    work: Workload,
    labels: [&str; 2],
) -> anyhow::Result<Vec<Row>> {
    let size = (10.0 * 1024.0 * 1024.0 * plan.scale.max(0.5)) as usize;
    let history = agent_history(size, seed);
    let json = serde_json::to_vec(&history)?;
    let dir = tempfile::tempdir()?;
    let mut stores = Stores::open(dir.path(), name, plan.rounds + 1)?;
    let mut out = Vec::new();
    for (label, ccr) in [(labels[0], false), (labels[1], true)] {
        let base = "serde_json parse of the history";
        let pair = try_interleave(
            plan.rounds,
            || parse(&json),
            || {
                let store = if ccr { Some(stores.take()?) } else { None };
                work(&history, store)
            },
        );
        let row = match pair {
            Err(e) => Row::failed(label, base, &format!("<= {max}x"), &e),
            Ok(pair) => {
                let detail = format!(
                    "{:.1} ms vs {:.1} ms parse ({:.1} MB)",
                    pair.ours.as_secs_f64() * 1e3,
                    pair.baseline.as_secs_f64() * 1e3,
                    json.len() as f64 / 1e6
                );
                if ccr {
                    Row::at_most(label, base, pair.cost_ratio(), max, detail)
                } else {
                    Row::info(label, base, pair.cost_ratio(), detail)
                }
            }
        };
        out.push(row);
    }
    Ok(out)
}

/// Runs the ladder workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    rows(
        plan,
        "rung",
        42,
        1.0,
        rung3,
        ["rung 3 + shrink, 10 MB history, CCR off", "rung 3 + shrink, 10 MB history, archiving into CCR"],
    )
}

/// The full compaction pipeline (microcompact, trim, level 3) on a 10 MB history.
pub fn pipeline(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    rows(
        plan,
        "pipe",
        43,
        2.0,
        pipeline_once,
        [
            "full pipeline (microcompact, trim, level 3), 10 MB, CCR off",
            "full pipeline (microcompact, trim, level 3), 10 MB, archiving originals into CCR",
        ],
    )
}
