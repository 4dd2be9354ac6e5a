//! SIGKILL during `salvage replay testdata/corpus --jobs 2`, through the real binary: after every
//! kill, every listed session restores at its last event (`journal show`), `journal verify`
//! passes, and a session reads either the outcome its capture reaches in a whole run or
//! `incomplete` (never `exhausted` for a run that was cut short). 50 kills by default;
//! `SALVAGE_REPLAY_KILLS=500` for more.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{corpus, salvage};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small xorshift generator seeded from the clock (the seed is printed for a rerun).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn sigkill_during_a_parallel_corpus_replay_leaves_every_session_restorable() {
    let kills: usize = std::env::var("SALVAGE_REPLAY_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let seed: u64 =
        std::env::var("SALVAGE_REPLAY_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
    eprintln!("kill moments seeded with SALVAGE_REPLAY_KILL_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus();
    let c = corpus.to_str().unwrap();
    // How long a whole run takes here: kills land uniformly over it.
    let t0 = Instant::now();
    let o = salvage(dir.path(), &["replay", c, "--jobs", "2", "--db", "calibrate.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let full = t0.elapsed().as_millis() as u64;
    // The outcome each capture reaches in a whole run.
    let sessions = |db: &str| -> Vec<serde_json::Value> {
        let s = salvage(dir.path(), &["journal", "sessions", "--json", "--db", db]);
        assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
        let list: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
        list["sessions"].as_array().unwrap().clone()
    };
    let whole: std::collections::HashMap<String, serde_json::Value> = sessions("calibrate.db")
        .into_iter()
        .map(|s| (s["capture"].as_str().unwrap().to_string(), s["outcome"].clone()))
        .collect();
    assert!(whole.len() >= 70, "{} captures in the whole run", whole.len());
    let mut incomplete = 0;
    let mut survived = 0;
    let mut restored = 0;
    let mut empty_before_fix = 0;
    // Sessions of earlier runs were checked when they were new; a later run writes only its own.
    let mut seen = std::collections::HashSet::new();
    for k in 0..kills {
        // A fresh database every ten kills keeps the checks fast while later kills still land on
        // a file that already holds sessions.
        let db = format!("kill-{}.db", k / 10);
        let at = Duration::from_millis(rng.next() % full.max(1));
        let mut child = Command::new(env!("CARGO_BIN_EXE_salvage"))
            .args(["replay", c, "--jobs", "2", "--db", &db])
            .current_dir(dir.path())
            .env_remove("SALVAGE_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        if !dir.path().join(&db).exists() {
            continue;
        }
        let v = salvage(dir.path(), &["journal", "verify", "--db", &db]);
        assert!(
            v.status.success(),
            "kill {k} at {at:?}: journal verify failed:\n{}{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        );
        for sess in &sessions(&db) {
            let id = sess["id"].as_str().unwrap();
            if sess["events"].as_u64() == Some(0) {
                empty_before_fix += 1;
            }
            if !seen.insert(format!("{db}/{id}")) {
                continue;
            }
            // A run cut short reads `incomplete` (or nothing, before its first request), never an
            // outcome the whole run does not reach.
            let capture = sess["capture"].as_str().unwrap();
            let outcome = &sess["outcome"];
            if outcome == "incomplete" {
                incomplete += 1;
            } else if !outcome.is_null() {
                assert_eq!(
                    Some(outcome),
                    whole.get(capture),
                    "kill {k} at {at:?}: session {id} of {capture}"
                );
            }
            let show = salvage(dir.path(), &["journal", "show", id, "--db", &db]);
            assert!(
                show.status.success(),
                "kill {k} at {at:?}: session {id} does not restore at its last event: {}",
                String::from_utf8_lossy(&show.stderr)
            );
            let h: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
            assert!(h.is_array());
            restored += 1;
        }
        survived += 1;
    }
    assert_eq!(empty_before_fix, 0, "a session without events was listed");
    eprintln!(
        "{survived} kills survived, {restored} session restores checked, {incomplete} runs cut short read \
         incomplete (a full run takes {full} ms)"
    );
    assert!(survived >= kills * 9 / 10, "only {survived} of {kills} runs had created the database");
}
