//! Reliability under crashes and concurrency, with real processes:
//! - a writer appending events with CCR blobs is SIGKILLed at pseudo-random points
//!   (`SALVAGE_CRASH_KILLS`, default 50); after each kill the database opens, verifies, keeps every
//!   event the writer reported committed, has no half-written event and every blob resolves;
//! - 4 processes append for a bounded time to their own sessions and to one shared session with
//!   expected versions: no lost or duplicated event, no gap, conflicts surfaced as typed errors and
//!   retried, `SQLITE_BUSY` never escaping.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_ccr::{Ccr, SystemClock};
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "SALVAGE_RELIABILITY_CHILD";

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap()).unwrap()
}

fn blob(n: u64, who: &str) -> Vec<u8> {
    format!("archived original {n} from {who}: {}\n", "tool output line ".repeat(50 + (n % 40) as usize))
        .into_bytes()
}

fn crash_writer(path: &Path, who: &str) {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    let start = j.version("s").unwrap();
    for n in start.. {
        let clock = SystemClock;
        let key = Ccr::new(j.conn(), &clock).put(&blob(n, who)).unwrap().key;
        let e = NewEvent::new(format!("{who}-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
            .with_history(HistoryChange::Append(vec![Message::tool(
                format!("c{n}"),
                format!("result {n} {}", key.marker()),
            )]))
            .with_blobs(vec![key]);
        let a = j.append("s", None, vec![e]).unwrap();
        println!("{}", a[0].seq);
    }
}

fn soak_writer(path: &Path, who: &str, millis: u64) {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    let own = format!("own-{who}");
    j.start_session(
        &own,
        "",
        NewEvent::new(format!("{own}-0"), ts(0), EventBody::MessageAppended { count: 0 }),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_millis(millis);
    let (mut own_n, mut shared_n, mut conflicts) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline {
        own_n += 1;
        j.append(
            &own,
            None,
            vec![NewEvent::new(format!("{own}-{own_n}"), ts(own_n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("{who} {own_n}"))]))],
        )
        .unwrap();
        // The shared session: append at the version we read, retrying on a typed conflict.
        shared_n += 1;
        loop {
            let v = j.version("shared").unwrap();
            let e = NewEvent::new(
                format!("shared-{who}-{shared_n}"),
                ts(shared_n),
                EventBody::MessageAppended { count: 1 },
            )
            .with_history(HistoryChange::Append(vec![Message::user(format!("{who} says {shared_n}"))]));
            match j.append("shared", Some(v), vec![e]) {
                Ok(_) => break,
                Err(JournalError::Conflict { .. }) => conflicts += 1,
                Err(e) => panic!("{who}: {e}"),
            }
        }
    }
    println!("SOAK {own_n} {shared_n} {conflicts}");
}

fn child() -> bool {
    let Ok(spec) = std::env::var(CHILD) else { return false };
    let parts: Vec<&str> = spec.split('|').collect();
    match parts[0] {
        "crash" => crash_writer(Path::new(parts[1]), parts[2]),
        _ => soak_writer(Path::new(parts[1]), parts[2], parts[3].parse().unwrap()),
    }
    true
}

fn spawn(test: &str, spec: String) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn killed_writers_lose_no_committed_event() {
    if child() {
        return;
    }
    let kills: u64 = std::env::var("SALVAGE_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("crash.db");
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("s", "crash", NewEvent::new("s-start", ts(0), EventBody::MessageAppended { count: 0 }))
        .unwrap();
    drop(j);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut committed = 0u64;
    for round in 0..kills {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut c =
            spawn("killed_writers_lose_no_committed_event", format!("crash|{}|w{round}", p.display()));
        std::thread::sleep(Duration::from_millis(30 + x % 120));
        c.kill().unwrap(); // SIGKILL
        let out = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap();
        if let Some(last) = out.lines().rev().find_map(|l| l.trim().parse::<u64>().ok()) {
            committed = committed.max(last);
        }
        let j = Journal::open(&p, &Options::default()).unwrap();
        let v = j.version("s").unwrap();
        assert!(v >= committed, "kill {round}: {committed} reported committed, {v} stored");
        let r = j.verify(None).unwrap();
        assert!(r.bad.is_empty(), "kill {round}: {:?}", r.bad);
        assert_eq!(
            j.events("s", 0, usize::MAX >> 1).unwrap().len() as u64,
            v,
            "kill {round}: no half-written event"
        );
        let clock = SystemClock;
        assert!(Ccr::new(j.conn(), &clock).verify().unwrap().bad.is_empty(), "kill {round}: blobs verify");
        assert_eq!(j.head("s").unwrap().history.len() as u64, v - 1);
    }
    assert!(committed > kills, "the writers made progress ({committed} events over {kills} kills)");
    eprintln!("{kills} kills survived, {committed} events committed");
}

#[test]
fn four_processes_append_concurrently_without_loss() {
    if child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("soak.db");
    let mut j = Journal::open(&p, &Options::default()).unwrap();
    j.start_session("shared", "", NewEvent::new("shared-0", ts(0), EventBody::MessageAppended { count: 0 }))
        .unwrap();
    drop(j);
    let millis = std::env::var("SALVAGE_SOAK_MILLIS").ok().and_then(|v| v.parse().ok()).unwrap_or(2500u64);
    let kids: Vec<_> = (0..4)
        .map(|w| {
            spawn(
                "four_processes_append_concurrently_without_loss",
                format!("soak|{}|w{w}|{millis}", p.display()),
            )
        })
        .collect();
    let mut own_total = 0;
    let mut shared_total = 0;
    let mut conflicts = 0;
    let mut per: Vec<(u64, u64)> = Vec::new();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert!(o.status.success(), "a writer failed (SQLITE_BUSY must never escape)");
        let out = String::from_utf8(o.stdout).unwrap();
        let line = out.lines().find_map(|l| l.find("SOAK ").map(|i| &l[i + 5..])).expect("writer report");
        let nums: Vec<u64> = line.split_whitespace().map(|t| t.parse().unwrap()).collect();
        let [a, b, c] = nums[..] else { panic!("writer output {line}") };
        per.push((a, b));
        own_total += a;
        shared_total += b;
        conflicts += c;
    }
    let j = Journal::open(&p, &Options::default()).unwrap();
    assert!(j.verify(None).unwrap().bad.is_empty());
    for (w, (own, shared)) in per.iter().enumerate() {
        let s = format!("own-w{w}");
        assert_eq!(j.version(&s).unwrap(), own + 1, "{s}: every event, once");
        let h = j.head(&s).unwrap().history;
        for (i, m) in h.iter().enumerate() {
            assert_eq!(m.content, format!("w{w} {}", i + 1), "{s}: in order, no gap, no duplicate");
        }
        let from_w = j
            .head("shared")
            .unwrap()
            .history
            .iter()
            .filter(|m| m.content.starts_with(&format!("w{w} says ")))
            .count() as u64;
        assert_eq!(from_w, *shared, "shared: every event of w{w} exactly once");
    }
    assert_eq!(j.version("shared").unwrap(), shared_total + 1, "shared: gapless");
    eprintln!(
        "{} events under concurrency ({own_total} own, {shared_total} shared), {conflicts} conflicts retried",
        own_total + shared_total
    );
}
