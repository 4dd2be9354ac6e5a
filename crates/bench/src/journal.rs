//! Journal append (batched and one durable transaction per event) against raw rusqlite inserts of
//! the same rows (cached statements, the same pragmas and the same checkpoint policy on both
//! sides: `Store::checkpoint_if_due` after each commit), and exact restore on a cold handle
//! against parsing the history from a JSON file.

use crate::harness::{try_interleave, wal_frames};
use crate::{Plan, Row};
use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_replay::synth::{mixed, text, Kind};
use salvage_store::{Durability, Options, Store};
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap_or(0)).single().unwrap_or_default()
}

fn event(n: u64, payload: &str) -> NewEvent {
    NewEvent::new(format!("e{n}"), ts(n), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![Message::user(payload.to_string())]))
}

const RAW_TABLE: &str = "CREATE TABLE IF NOT EXISTS raw (session TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (session, seq))";
const RAW_INSERT: &str = "INSERT INTO raw (session, seq, body) VALUES (?1, ?2, ?3)";

/// `row` when the measurement succeeded, else a failed row.
fn settle(workload: &str, baseline: &str, target: &str, r: anyhow::Result<Row>) -> Row {
    r.unwrap_or_else(|e| Row::failed(workload, baseline, target, &e))
}

fn start(j: &mut Journal) -> anyhow::Result<()> {
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 }))?;
    Ok(())
}

/// Batched: 1 000 events per transaction, each side on a fresh file per round.
fn batched(plan: &Plan, dir: &Path, payloads: &[String]) -> anyhow::Result<Row> {
    let batches = ((8.0 * plan.scale) as usize).max(2);
    let (mut round, mut raw_round) = (0u64, 0u64);
    let pair = try_interleave(
        plan.rounds,
        || {
            raw_round += 1;
            let mut store = Store::open(&dir.join(format!("raw{raw_round}.db")), &Options::default())?;
            store.conn().execute_batch(RAW_TABLE)?;
            let mut n = 0i64;
            for _ in 0..batches {
                let tx = store.conn_mut().transaction()?;
                {
                    let mut st = tx.prepare_cached(RAW_INSERT)?;
                    for p in payloads {
                        n += 1;
                        st.execute(rusqlite::params![
                            "s",
                            n,
                            serde_json::to_vec(&Message::user(p.clone()))?
                        ])?;
                    }
                }
                tx.commit()?;
                // The checkpoint policy of every writer of a Store (`checkpoint_if_due` after a
                // commit, as the journal's appends do): both sides copy the -wal back alike.
                store.checkpoint_if_due();
            }
            Ok(())
        },
        || {
            round += 1;
            let mut j = Journal::open(&dir.join(format!("j{round}.db")), &Options::default())?;
            start(&mut j)?;
            let mut n = 0u64;
            for _ in 0..batches {
                let evs: Vec<NewEvent> = payloads
                    .iter()
                    .map(|p| {
                        n += 1;
                        event(n, p)
                    })
                    .collect();
                j.append("s", None, evs)?;
            }
            Ok(())
        },
    )?;
    let events = (batches * payloads.len()) as f64;
    Ok(Row::at_least(
        BATCHED.0,
        BATCHED.1,
        pair.speed_ratio(),
        0.6,
        format!(
            "{:.0} vs {:.0} events/s",
            events / pair.ours.as_secs_f64(),
            events / pair.baseline.as_secs_f64()
        ),
    ))
}

const BATCHED: (&str, &str) = (
    "journal append, batched (1 000/tx, ~1 KB, chain on)",
    "raw rusqlite inserts, cached statement, same pragmas",
);
const DURABLE: (&str, &str) =
    ("journal append, one durable tx per event", "raw single-row transactions, cached statement (FULL)");
const DURABLE_FLOOR: (&str, &str) = (
    "durable append floor: bare rows of the 5 B-trees an append writes, one durable tx each",
    "raw single-row transactions, cached statement (FULL)",
);
const RESTORE: (&str, &str) = (
    "restore exact history at the last of 10 000 events (1 000 messages), cold handle",
    "parse that history from a JSON file",
);
const DEPTH: (&str, &str) = (
    "restore at the last of 10 000 events vs at event 100, same 1 000-message history, cold handle",
    "restore at event 100 (history complete there; no history change after it)",
);

/// One durable (synchronous=FULL) transaction per event.
fn durable(plan: &Plan, dir: &Path, payloads: &[String]) -> anyhow::Result<Row> {
    let full = Options { durability: Durability::Full, ..Options::default() };
    let singles = ((400.0 * plan.scale) as u64).max(100);
    let raw = Store::open(&dir.join("raw-single.db"), &full)?;
    raw.conn().execute_batch(RAW_TABLE)?;
    let mut j = Journal::open(&dir.join("j-single.db"), &full)?;
    start(&mut j)?;
    let (mut rn, mut jn) = (0i64, 0u64);
    let payload = |k: u64| payloads.get((k % 1000) as usize).cloned().unwrap_or_default();
    let pair = try_interleave(
        plan.rounds,
        || {
            let mut st = raw.conn().prepare_cached(RAW_INSERT)?;
            for k in 0..singles {
                rn += 1;
                st.execute(rusqlite::params!["s", rn, serde_json::to_vec(&Message::user(payload(k)))?])?;
                // The checkpoint policy of every writer of a Store, as the journal's appends.
                raw.checkpoint_if_due();
            }
            Ok(())
        },
        || {
            for k in 0..singles {
                jn += 1;
                j.append("s", None, vec![event(jn, &payload(k))])?;
            }
            Ok(())
        },
    )?;
    let n = singles as f64;
    let (ours, raw) = pages_per_event(dir, &full, singles, payloads)?;
    Ok(Row::at_least(
        DURABLE.0,
        DURABLE.1,
        pair.speed_ratio(),
        0.8,
        format!(
            "{:.0} vs {:.0} events/s; {ours:.1} vs {raw:.1} WAL pages per event",
            n / pair.ours.as_secs_f64(),
            n / pair.baseline.as_secs_f64()
        ),
    ))
}

/// The WAL pages one durable event writes (ours, raw): `events` events on a fresh file each
/// side, checkpoints off, so the `-wal` holds every page written. Every page is a frame the
/// commit writes (two `pwrite` calls) and syncs, and a page a checkpoint copies later: the count
/// explains the time, and does not depend on the machine's load as the time does.
fn pages_per_event(
    dir: &Path,
    full: &Options,
    events: u64,
    payloads: &[String],
) -> anyhow::Result<(f64, f64)> {
    let payload = |k: u64| payloads.get((k % 1000) as usize).cloned().unwrap_or_default();
    let raw_path = dir.join("raw-pages.db");
    let raw = Store::open(&raw_path, full)?;
    raw.conn().execute_batch(RAW_TABLE)?;
    raw.conn().pragma_update(None, "wal_autocheckpoint", 0)?;
    let before = wal_frames(&raw_path);
    let mut st = raw.conn().prepare_cached(RAW_INSERT)?;
    for k in 0..events {
        st.execute(rusqlite::params![
            "s",
            i64::try_from(k + 1)?,
            serde_json::to_vec(&Message::user(payload(k)))?
        ])?;
    }
    let raw_pages = wal_frames(&raw_path).saturating_sub(before);
    let j_path = dir.join("j-pages.db");
    let mut j = Journal::open(&j_path, full)?;
    start(&mut j)?;
    j.conn().pragma_update(None, "wal_autocheckpoint", 0)?;
    let before = wal_frames(&j_path);
    for k in 0..events {
        j.append("s", None, vec![event(k + 1, &payload(k))])?;
    }
    let ours = wal_frames(&j_path).saturating_sub(before);
    let per = |pages: u64| pages as f64 / events.max(1) as f64;
    Ok((per(ours), per(raw_pages)))
}

/// The tables a durable append writes, reduced to bare rows: an event row keyed by (session,
/// seq) with its unique event id, a message stored once by its hash, and the session's head.
const FLOOR_TABLES: &str = "
    CREATE TABLE ev (session TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL UNIQUE,
                     row BLOB NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
    CREATE TABLE msg (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, body BLOB NOT NULL);
    CREATE TABLE head (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash BLOB NOT NULL);
    INSERT INTO head VALUES ('s', 0, zeroblob(32));";

/// What a durable append that keeps the journal's guarantees costs at least, on this machine:
/// each event in its own `BEGIN IMMEDIATE` transaction (FULL) writing the five B-trees one
/// append writes (the event row by (session, seq), its unique event id, the message row, its
/// content hash, the session's head, which `verify` checks the chain's last event against) with
/// bare cached statements: no JSON of the event, no chain, no snapshot, no reads. Against the
/// same raw single-row transactions, interleaved.
fn durable_floor(plan: &Plan, dir: &Path, payloads: &[String]) -> anyhow::Result<Row> {
    let full = Options { durability: Durability::Full, ..Options::default() };
    let singles = ((400.0 * plan.scale) as u64).max(100);
    let raw = Store::open(&dir.join("raw-floor.db"), &full)?;
    raw.conn().execute_batch(RAW_TABLE)?;
    let floor = Store::open(&dir.join("floor.db"), &full)?;
    floor.conn().execute_batch(FLOOR_TABLES)?;
    let payload = |k: u64| payloads.get((k % 1000) as usize).cloned().unwrap_or_default();
    let (mut rn, mut fnum) = (0i64, 0i64);
    let pair = try_interleave(
        plan.rounds,
        || {
            let mut st = raw.conn().prepare_cached(RAW_INSERT)?;
            for k in 0..singles {
                rn += 1;
                st.execute(rusqlite::params!["s", rn, serde_json::to_vec(&Message::user(payload(k)))?])?;
                // The checkpoint policy of every writer of a Store, as the journal's appends.
                raw.checkpoint_if_due();
            }
            Ok(())
        },
        || {
            for k in 0..singles {
                fnum += 1;
                floor_event(floor.conn(), fnum, &payload(k))?;
                floor.checkpoint_if_due();
            }
            Ok(())
        },
    )?;
    // The floor's pages per event, on a fresh file with checkpoints off (as `pages_per_event`).
    let pages_path = dir.join("floor-pages.db");
    let pages = Store::open(&pages_path, &full)?;
    pages.conn().execute_batch(FLOOR_TABLES)?;
    pages.conn().pragma_update(None, "wal_autocheckpoint", 0)?;
    let before = wal_frames(&pages_path);
    for k in 0..singles {
        floor_event(pages.conn(), i64::try_from(k + 1)?, &payload(k))?;
    }
    let per_event = wal_frames(&pages_path).saturating_sub(before) as f64 / singles as f64;
    let n = singles as f64;
    Ok(Row::info(
        DURABLE_FLOOR.0,
        DURABLE_FLOOR.1,
        pair.speed_ratio(),
        format!(
            "{:.0} vs {:.0} events/s; {per_event:.1} WAL pages per event",
            n / pair.ours.as_secs_f64(),
            n / pair.baseline.as_secs_f64()
        ),
    ))
}

/// One event of the floor: its transaction and the bare rows it writes.
fn floor_event(c: &rusqlite::Connection, seq: i64, payload: &str) -> anyhow::Result<()> {
    let body = serde_json::to_vec(&Message::user(payload.to_string()))?;
    let hash = blake3::hash(&body);
    // An event row of the journal's size (~250 bytes besides its key and id).
    let row: Vec<u8> = hash.as_bytes().iter().copied().cycle().take(250).collect();
    c.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    c.prepare_cached("INSERT INTO ev (session, seq, event_id, row) VALUES ('s', ?1, ?2, ?3)")?
        .execute(rusqlite::params![seq, format!("e{seq}"), row])?;
    c.prepare_cached("INSERT OR IGNORE INTO msg (hash, body) VALUES (?1, ?2)")?
        .execute(rusqlite::params![&hash.as_bytes()[..], body])?;
    c.prepare_cached("UPDATE head SET seq = ?1, hash = ?2 WHERE id = 's'")?
        .execute(rusqlite::params![seq, &hash.as_bytes()[..]])?;
    c.prepare_cached("COMMIT")?.execute([])?;
    Ok(())
}

/// Writes a session of `total` events (`event(n)` for n in 1..total) in batches of 1 000.
fn write_session(path: &Path, total: u64, mut event: impl FnMut(u64) -> NewEvent) -> anyhow::Result<()> {
    let mut j = Journal::open(path, &Options::default())?;
    start(&mut j)?;
    let mut batch = Vec::new();
    for n in 1..total {
        batch.push(event(n));
        if batch.len() == 1000 {
            j.append("s", None, std::mem::take(&mut batch))?;
        }
    }
    j.append("s", None, batch)?;
    Ok(())
}

/// Message `k` of a restore session: 600–2 100 bytes of mixed text.
fn message(k: u64) -> Message {
    let kind = [Kind::Prose, Kind::Code, Kind::Json, Kind::Log][(k % 4) as usize];
    Message::user(text(kind, 600 + (k as usize * 37) % 1500, k))
}

/// Writes the restore session: `total` events whose history reaches 1 000 messages.
fn restore_session(path: &Path, total: u64) -> anyhow::Result<Vec<Message>> {
    let every = total / 1000;
    let mut history = Vec::new();
    write_session(path, total, |n| {
        if n % every == 0 && history.len() < 1000 {
            let m = message(n);
            history.push(m.clone());
            NewEvent::new(format!("r{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m]))
        } else {
            NewEvent::new(format!("r{n}"), ts(n), request_sent(n))
        }
    })?;
    Ok(history)
}

/// Writes the depth session: `total` events whose history reaches `messages` messages by event
/// 100 and does not change after it (requests, responses and skipped compactions follow), so a
/// restore at event 100 and at the last event decode the same history at different depths.
fn depth_session(path: &Path, total: u64, messages: u64) -> anyhow::Result<()> {
    let mut written = 0u64;
    write_session(path, total, |n| {
        if n < 100 {
            // Events 2..=100 hold the history: an even share each, the remainder first.
            let count = messages / 99 + u64::from(n <= messages % 99);
            let msgs: Vec<Message> = (written..written + count).map(message).collect();
            written += count;
            NewEvent::new(format!("d{n}"), ts(n), EventBody::MessageAppended { count })
                .with_history(HistoryChange::Append(msgs))
        } else {
            NewEvent::new(format!("d{n}"), ts(n), quiet_event(n))
        }
    })?;
    anyhow::ensure!(written == messages, "depth session holds {written} messages, not {messages}");
    Ok(())
}

/// A request of `n` bytes, accepted.
fn request_sent(n: u64) -> EventBody {
    EventBody::RequestSent {
        attempt: 0,
        bytes: n,
        estimated_tokens: n / 4,
        real_tokens: None,
        history_digest: "0".repeat(16),
        accepted: true,
    }
}

/// An event that leaves the history as it is: a request, a response or a skipped compaction.
fn quiet_event(n: u64) -> EventBody {
    match n % 3 {
        0 => request_sent(n),
        1 => EventBody::ResponseReceived {
            stop_reason: salvage_types::capture::StopReason::EndTurn,
            output_tokens: Some(n % 900),
        },
        _ => EventBody::Compaction {
            trigger: salvage_types::event::Trigger::Auto,
            level: 1,
            outcome: salvage_types::event::StepOutcome::Skipped,
            backoff_skip: false,
            route: None,
            cost: Default::default(),
            by: None,
            pre_tokens: None,
            archived: None,
        },
    }
}

/// A cold restore as `salvage journal` runs it: a fresh read-only handle on the file (no cache
/// the writer filled), the history decoded and checked against the length expected.
fn cold_view(path: &Path, seq: u64, want: usize) -> anyhow::Result<()> {
    let j = Journal::open(path, &Options::read_only())?;
    let v = j.view_at("s", seq)?;
    anyhow::ensure!(
        v.history.len() == want,
        "restore at {seq} gave {} messages, expected {want}",
        v.history.len()
    );
    std::hint::black_box(v);
    Ok(())
}

/// The restore session on disk, its history as a JSON file, and its last event; and the depth
/// session (its history complete at event 100).
struct Restore {
    db: std::path::PathBuf,
    depth_db: std::path::PathBuf,
    json: std::path::PathBuf,
    messages: usize,
    last: u64,
}

fn restore_setup(plan: &Plan, dir: &Path) -> anyhow::Result<Restore> {
    let total = if plan.scale < 1.0 { 5_000u64 } else { 10_000 };
    let db = dir.join("restore.db");
    let history = restore_session(&db, total)?;
    if let Some(keep) = std::env::var_os("SALVAGE_BENCH_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::copy(&db, &keep)?;
        let _ = std::fs::copy(dir.join("restore.db-wal"), keep.with_extension("db-wal"));
        // may not exist
    }
    let json = dir.join("history.json");
    std::fs::write(&json, serde_json::to_vec(&history)?)?;
    let last = Journal::open(&db, &Options::read_only())?.version("s")?;
    let depth_db = dir.join("depth.db");
    depth_session(&depth_db, total, 1000)?;
    Ok(Restore { db, depth_db, json, messages: history.len(), last })
}

fn restore_whole(plan: &Plan, r: &Restore) -> anyhow::Result<Row> {
    let pair = try_interleave(
        plan.rounds,
        || {
            let h: Vec<Message> = serde_json::from_slice(&std::fs::read(&r.json)?)?;
            anyhow::ensure!(h.len() == r.messages, "parsed {} messages", h.len());
            std::hint::black_box(h);
            Ok(())
        },
        || cold_view(&r.db, r.last, r.messages),
    )?;
    Ok(Row::at_most(
        RESTORE.0,
        RESTORE.1,
        pair.cost_ratio(),
        1.5,
        format!("{:.2} ms vs {:.2} ms", pair.ours.as_secs_f64() * 1e3, pair.baseline.as_secs_f64() * 1e3),
    ))
}

/// The same history size at two depths (spec/storage.md: restore cost is bounded by snapshots,
/// not by the session length): the depth session at event 100 and at its last event.
fn restore_depth(plan: &Plan, r: &Restore) -> anyhow::Result<Row> {
    let last = Journal::open(&r.depth_db, &Options::read_only())?.version("s")?;
    let pair = try_interleave(
        plan.rounds,
        || cold_view(&r.depth_db, 100, 1000),
        || cold_view(&r.depth_db, last, 1000),
    )?;
    Ok(Row::at_most(
        DEPTH.0,
        DEPTH.1,
        pair.cost_ratio(),
        1.5,
        format!("{:.2} ms vs {:.2} ms", pair.ours.as_secs_f64() * 1e3, pair.baseline.as_secs_f64() * 1e3),
    ))
}

/// Runs the journal workloads. Every timed closure returns its errors: a failing one fails its
/// row (shown with the error) instead of being timed.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let payloads: Vec<String> = (0..1000u64).map(|i| mixed(900, 7_000 + i)).collect();
    let mut rows = vec![
        settle(BATCHED.0, BATCHED.1, ">= 0.6x", batched(plan, dir.path(), &payloads)),
        settle(DURABLE.0, DURABLE.1, ">= 0.8x", durable(plan, dir.path(), &payloads)),
        settle(DURABLE_FLOOR.0, DURABLE_FLOOR.1, "(info)", durable_floor(plan, dir.path(), &payloads)),
    ];
    match restore_setup(plan, dir.path()) {
        Ok(r) => rows.extend([
            settle(RESTORE.0, RESTORE.1, "<= 1.5x", restore_whole(plan, &r)),
            settle(DEPTH.0, DEPTH.1, "<= 1.5x", restore_depth(plan, &r)),
        ]),
        Err(e) => rows.extend([
            Row::failed(RESTORE.0, RESTORE.1, "<= 1.5x", &e),
            Row::failed(DEPTH.0, DEPTH.1, "<= 1.5x", &e),
        ]),
    }
    Ok(rows)
}
