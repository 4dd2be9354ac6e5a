//! Journal append (batched and one durable transaction per event) against raw rusqlite inserts of
//! the same rows, and exact restore against parsing the history from a JSON file.

use crate::harness::{interleave, time};
use crate::{Plan, Row};
use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_replay::synth::{mixed, text, Kind};
use salvage_store::{Durability, Options, Store};
use salvage_types::event::EventBody;
use salvage_types::Message;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap_or(0)).single().unwrap_or_default()
}

fn event(n: u64, payload: &str) -> NewEvent {
    NewEvent::new(format!("e{n}"), ts(n), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![Message::user(payload.to_string())]))
}

fn raw_table(conn: &rusqlite::Connection) {
    let _ = conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS raw (session TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (session, seq))",
    );
}

/// Runs the journal workloads.
pub fn run(plan: &Plan) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let payloads: Vec<String> = (0..1000u64).map(|i| mixed(900, 7_000 + i)).collect();

    // Batched: 1 000 events per transaction.
    let batches = ((8.0 * plan.scale) as usize).max(2);
    let mut round = 0u64;
    let mut raw_round = 0u64;
    let pair = interleave(
        plan.rounds,
        || {
            raw_round += 1;
            if let Ok(store) =
                Store::open(&dir.path().join(format!("raw{raw_round}.db")), &Options::default())
            {
                raw_table(store.conn());
                let mut n = 0i64;
                for _ in 0..batches {
                    if let Ok(tx) = store.conn().unchecked_transaction() {
                        if let Ok(mut st) =
                            tx.prepare_cached("INSERT INTO raw (session, seq, body) VALUES (?1, ?2, ?3)")
                        {
                            for p in &payloads {
                                n += 1;
                                let body = serde_json::to_vec(&Message::user(p.clone())).unwrap_or_default();
                                let _ = st.execute(rusqlite::params!["s", n, body]);
                            }
                        }
                        let _ = tx.commit();
                    }
                }
            }
        },
        || {
            round += 1;
            if let Ok(mut j) = Journal::open(&dir.path().join(format!("j{round}.db")), &Options::default()) {
                let _ = j.start_session(
                    "s",
                    "",
                    NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 }),
                );
                let mut n = 0u64;
                for _ in 0..batches {
                    let evs: Vec<NewEvent> = payloads
                        .iter()
                        .map(|p| {
                            n += 1;
                            event(n, p)
                        })
                        .collect();
                    let _ = j.append("s", None, evs);
                }
            }
        },
    );
    let events = (batches * payloads.len()) as f64;
    rows.push(Row::at_least(
        "journal append, batched (1 000/tx, ~1 KB, chain on)",
        "raw rusqlite inserts, same pragmas",
        pair.speed_ratio(),
        0.6,
        format!(
            "{:.0} vs {:.0} events/s",
            events / pair.ours.as_secs_f64(),
            events / pair.baseline.as_secs_f64()
        ),
    ));

    // One durable (synchronous=FULL) transaction per event.
    let full = Options { durability: Durability::Full, ..Options::default() };
    let singles = ((400.0 * plan.scale) as u64).max(100);
    let raw = Store::open(&dir.path().join("raw-single.db"), &full)?;
    raw_table(raw.conn());
    let mut j = Journal::open(&dir.path().join("j-single.db"), &full)?;
    j.start_session("s", "", NewEvent::new("start", ts(0), EventBody::MessageAppended { count: 0 }))?;
    let mut rn = 0i64;
    let mut jn = 0u64;
    let pair = interleave(
        plan.rounds,
        || {
            for k in 0..singles {
                rn += 1;
                let body = serde_json::to_vec(&Message::user(payloads[(k % 1000) as usize].clone()))
                    .unwrap_or_default();
                let _ = raw.conn().execute(
                    "INSERT INTO raw (session, seq, body) VALUES (?1, ?2, ?3)",
                    rusqlite::params!["s", rn, body],
                );
            }
        },
        || {
            for k in 0..singles {
                jn += 1;
                let _ = j.append("s", None, vec![event(jn, &payloads[(k % 1000) as usize])]);
            }
        },
    );
    rows.push(Row::at_least(
        "journal append, one durable tx per event",
        "raw single-row transactions (FULL)",
        pair.speed_ratio(),
        0.7,
        format!(
            "{:.0} vs {:.0} events/s",
            singles as f64 / pair.ours.as_secs_f64(),
            singles as f64 / pair.baseline.as_secs_f64()
        ),
    ));

    // Restore: a 10 000-event session whose history reaches 1 000 messages.
    let total = if plan.scale < 1.0 { 5_000u64 } else { 10_000 };
    let mut j = Journal::open(&dir.path().join("restore.db"), &Options::default())?;
    j.start_session("s", "", NewEvent::new("r0", ts(0), EventBody::MessageAppended { count: 0 }))?;
    let every = total / 1000;
    let mut batch = Vec::new();
    let mut history = Vec::new();
    for n in 1..total {
        let e = if n % every == 0 && history.len() < 1000 {
            let kind = [Kind::Prose, Kind::Code, Kind::Json, Kind::Log][(n % 4) as usize];
            let m = Message::user(text(kind, 600 + (n as usize * 37) % 1500, n));
            history.push(m.clone());
            NewEvent::new(format!("r{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![m]))
        } else {
            NewEvent::new(
                format!("r{n}"),
                ts(n),
                EventBody::RequestSent {
                    attempt: 0,
                    bytes: n,
                    estimated_tokens: n / 4,
                    real_tokens: None,
                    history_digest: "0".repeat(16),
                    accepted: true,
                },
            )
        };
        batch.push(e);
        if batch.len() == 1000 {
            j.append("s", None, std::mem::take(&mut batch))?;
        }
    }
    j.append("s", None, batch)?;
    drop(j);
    if let Some(keep) = std::env::var_os("SALVAGE_BENCH_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        let _ = std::fs::copy(dir.path().join("restore.db"), &keep);
        let _ = std::fs::copy(dir.path().join("restore.db-wal"), keep.with_extension("db-wal"));
    }
    let json_path = dir.path().join("history.json");
    std::fs::write(&json_path, serde_json::to_vec(&history)?)?;
    let j = Journal::open(&dir.path().join("restore.db"), &Options::default())?;
    let last = j.version("s")?;
    let pair = interleave(
        plan.rounds,
        || {
            let bytes = std::fs::read(&json_path).unwrap_or_default();
            let h: Vec<Message> = serde_json::from_slice(&bytes).unwrap_or_default();
            std::hint::black_box(h);
        },
        || {
            std::hint::black_box(j.view_at("s", last).ok());
        },
    );
    rows.push(Row::at_most(
        "restore exact history at the last of 10 000 events (1 000 messages)",
        "parse that history from a JSON file",
        pair.cost_ratio(),
        3.0,
        format!("{:.2} ms vs {:.2} ms", pair.ours.as_secs_f64() * 1e3, pair.baseline.as_secs_f64() * 1e3),
    ));
    let at100 = time(plan.rounds, || {
        std::hint::black_box(j.view_at("s", 100).ok());
    });
    let atlast = time(plan.rounds, || {
        std::hint::black_box(j.view_at("s", last).ok());
    });
    // Restore cost is dominated by the history it rebuilds; compare the fold alone too.
    let fold100 = time(plan.rounds, || {
        std::hint::black_box(j.state_at("s", 100).ok());
    });
    let foldlast = time(plan.rounds, || {
        std::hint::black_box(j.state_at("s", last).ok());
    });
    rows.push(Row::at_most(
        "restore state at the last event vs at event 100 (fold only)",
        "fold at event 100",
        foldlast.as_secs_f64() / fold100.as_secs_f64().max(1e-9),
        2.0,
        format!(
            "{:.3} ms vs {:.3} ms; with history: {:.2} ms vs {:.2} ms",
            foldlast.as_secs_f64() * 1e3,
            fold100.as_secs_f64() * 1e3,
            atlast.as_secs_f64() * 1e3,
            at100.as_secs_f64() * 1e3
        ),
    ));
    Ok(rows)
}
