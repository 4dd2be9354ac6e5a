//! Tampering behind the triggers' back (with the sqlite3 tool) is reported by `verify` at the
//! right event; two processes appending to one session give one winner and a typed conflict;
//! a process killed during appends leaves every committed event intact.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, JournalError, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::Path;
use std::process::Command;

fn ts(n: u64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_764_000_000_000 + i64::try_from(n).unwrap()).unwrap()
}

fn build(path: &Path, events: u64) {
    let mut j = Journal::open(path, &Options::default()).unwrap();
    j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    for n in 1..events {
        j.append(
            "s",
            None,
            vec![NewEvent::new(format!("s-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("message {n}"))]))],
        )
        .unwrap();
    }
}

fn sqlite3(path: &Path, sql: &str) {
    let o = Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .output()
        .expect("the sqlite3 tool is installed (CI installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

const NO_TRIGGERS: &str = "DROP TRIGGER events_append_only_update; DROP TRIGGER events_append_only_delete;";

fn first_bad(path: &Path) -> (u64, String) {
    let j = Journal::open(path, &Options::default()).unwrap();
    let r = j.verify(None).unwrap();
    let b = r.bad.first().cloned().expect("tampering is detected");
    (b.seq, b.problem)
}

#[test]
fn the_schema_rejects_update_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j.db");
    build(&p, 3);
    let j = Journal::open(&p, &Options::default()).unwrap();
    for sql in ["UPDATE events SET body = 'x' WHERE seq = 2", "DELETE FROM events WHERE seq = 2"] {
        let e = j.conn().execute(sql, []).unwrap_err().to_string();
        assert!(e.contains("append-only"), "{e}");
    }
}

#[test]
fn edited_deleted_and_reordered_events_are_reported_at_the_right_place() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, u64, &str)] = &[
        ("edit", "UPDATE events SET body = CAST('{\"kind\":\"message_appended\",\"count\":7}' AS BLOB) WHERE seq = 5;", 5, "hash does not match"),
        ("edit-ts", "UPDATE events SET ts = '2020-01-01T00:00:00.000Z' WHERE seq = 9;", 9, "hash does not match"),
        ("delete-middle", "DELETE FROM events WHERE seq = 6;", 6, "gap"),
        ("delete-last", "DELETE FROM events WHERE seq = 12;", 12, "removed"),
        ("reorder", "UPDATE events SET seq = 1000 WHERE seq = 3; UPDATE events SET seq = 3 WHERE seq = 4; UPDATE events SET seq = 4 WHERE seq = 1000;", 3, "link to the previous event"),
        ("retyped", "UPDATE events SET body = CAST(body AS TEXT) WHERE seq = 7;", 7, "column body is stored as Text"),
        ("message", "UPDATE messages SET body = CAST('{\"role\":\"user\",\"content\":\"forged\"}' AS BLOB) WHERE CAST(body AS TEXT) LIKE '%message 7\"%';", 8, "does not match its hash"),
    ];
    for (name, sql, seq, problem) in cases {
        let p = dir.path().join(format!("{name}.db"));
        build(&p, 12);
        assert!(Journal::open(&p, &Options::default()).unwrap().verify(None).unwrap().bad.is_empty());
        sqlite3(&p, &format!("{NO_TRIGGERS} {sql}"));
        let (got_seq, got_problem) = first_bad(&p);
        assert_eq!(got_seq, *seq, "{name}: {got_problem}");
        assert!(got_problem.contains(problem), "{name}: {got_problem}");
    }
    // A forged message is never returned by a restore either.
    let p = dir.path().join("message.db");
    let j = Journal::open(&p, &Options::default()).unwrap();
    let e = j.view_at("s", 12).unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
}

#[test]
fn retried_appends_are_idempotent_and_conflicts_are_typed() {
    let mut j = Journal::in_memory().unwrap();
    j.start_session("s", "", NewEvent::new("a", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    let e = NewEvent::new("b", ts(1), EventBody::MessageAppended { count: 1 })
        .with_history(HistoryChange::Append(vec![Message::user("x")]));
    let first = j.append("s", Some(1), vec![e.clone()]).unwrap();
    let retry = j.append("s", Some(1), vec![e]).unwrap();
    assert_eq!((first[0].seq, retry[0].seq, retry[0].inserted), (2, 2, false));
    assert_eq!(first[0].hash, retry[0].hash);
    // The same id with another body (or time) is not a retry: refused, never answered with the
    // original.
    let other = NewEvent::new("b", ts(1), EventBody::MessageAppended { count: 2 });
    assert!(matches!(j.append("s", Some(2), vec![other]), Err(JournalError::IdReused(id)) if id == "b"));
    let later = NewEvent::new("b", ts(5), EventBody::MessageAppended { count: 1 });
    assert!(matches!(j.append("s", Some(2), vec![later]), Err(JournalError::IdReused(_))));
    let stale =
        j.append("s", Some(1), vec![NewEvent::new("c", ts(2), EventBody::MessageAppended { count: 0 })]);
    assert!(matches!(stale, Err(JournalError::Conflict { expected: 1, actual: 2, .. })));
    assert_eq!(j.version("s").unwrap(), 2);
}

const CHILD: &str = "SALVAGE_JOURNAL_CHILD";

fn child(spec: &str) {
    // Mode "race": wait for the go file, then append at the version read before it; print the outcome.
    // Mode "crash": append forever, printing each committed seq, until killed.
    let mut parts = spec.split('|');
    let (mode, path, who) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    let mut j = Journal::open(Path::new(path), &Options::default()).unwrap();
    match mode {
        "race" => {
            let v = j.version("s").unwrap();
            let go = Path::new(path).with_extension("go");
            while !go.exists() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let r = j.append(
                "s",
                Some(v),
                vec![NewEvent::new(format!("race-{who}"), ts(9), EventBody::MessageAppended { count: 0 })],
            );
            match r {
                Ok(a) => println!("won {}", a[0].seq),
                Err(JournalError::Conflict { .. }) => println!("conflict"),
                Err(e) => println!("error {e}"),
            }
        }
        _ => {
            for n in 0u64.. {
                let body = "x".repeat(1000 + usize::try_from(n % 300).unwrap());
                let a = j
                    .append(
                        "s",
                        None,
                        vec![NewEvent::new(
                            format!("{who}-{n}"),
                            ts(n),
                            EventBody::MessageAppended { count: 1 },
                        )
                        .with_history(HistoryChange::Append(vec![Message::user(body)]))],
                    )
                    .unwrap();
                println!("{}", a[0].seq);
            }
        }
    }
}

/// In a child process (the test binary run again with `CHILD` set): runs the child's part and
/// returns `None`. In the parent: a fresh database of `events` events.
fn parent_or_child(file: &str, events: u64) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(file);
    build(&p, events);
    Some((dir, p))
}

/// This test binary, running only `test` as a child with `spec`, its stdout piped.
fn spawn_child(test: &str, spec: String) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, spec)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_processes_one_session_one_winner() {
    let Some((_dir, p)) = parent_or_child("r.db", 3) else { return };
    let kids: Vec<_> = ["a", "b"]
        .iter()
        .map(|w| spawn_child("two_processes_one_session_one_winner", format!("race|{}|{w}", p.display())))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(p.with_extension("go"), b"go").unwrap();
    let outs: Vec<String> =
        kids.into_iter().map(|k| String::from_utf8(k.wait_with_output().unwrap().stdout).unwrap()).collect();
    let won = outs.iter().filter(|o| o.contains("won 4")).count();
    let lost = outs.iter().filter(|o| o.contains("conflict")).count();
    assert_eq!((won, lost), (1, 1), "{outs:?}");
    let j = Journal::open(&p, &Options::default()).unwrap();
    assert_eq!(j.version("s").unwrap(), 4);
    assert!(j.verify(None).unwrap().bad.is_empty());
}

#[test]
fn a_killed_writer_leaves_every_committed_event_intact() {
    let Some((_dir, p)) = parent_or_child("k.db", 1) else { return };
    let mut committed = 0u64;
    for round in 0..5 {
        let spec = format!("crash|{}|w{round}", p.display());
        let mut k = spawn_child("a_killed_writer_leaves_every_committed_event_intact", spec);
        std::thread::sleep(std::time::Duration::from_millis(150 + 37 * round));
        k.kill().unwrap(); // SIGKILL
        let out = String::from_utf8(k.wait_with_output().unwrap().stdout).unwrap();
        if let Some(last) = out.lines().rev().find_map(|l| l.trim().parse::<u64>().ok()) {
            committed = committed.max(last);
        }
        let j = Journal::open(&p, &Options::default()).unwrap();
        let v = j.version("s").unwrap();
        assert!(v >= committed, "round {round}: reported {committed}, stored {v}");
        assert!(j.verify(None).unwrap().bad.is_empty(), "round {round}");
        assert_eq!(j.events("s", 0, usize::MAX >> 1).unwrap().len() as u64, v);
    }
    assert!(committed > 5, "the writer made progress ({committed})");
}

#[test]
fn a_truncated_database_is_detected_never_read_as_valid() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.db");
    build(&p, 400);
    // Checkpoint everything into the main file, then cut it in half.
    sqlite3(&p, "PRAGMA wal_checkpoint(TRUNCATE);");
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let _ = std::fs::remove_file(p.with_extension("db-wal"));
    match Journal::open(&p, &Options::default()) {
        Err(e) => assert!(e.to_string().contains("t.db"), "the error names the file: {e}"),
        Ok(j) => {
            // Whatever opens must not pass as intact: verify or the reads report the damage.
            let verdict = j.verify(None);
            let damaged = match verdict {
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    true
                }
                Ok(r) => {
                    !r.bad.is_empty()
                        || j.head("s").is_err()
                        || j.version("s").map(|v| v < 400).unwrap_or(true)
                }
            };
            assert!(damaged, "a truncated file must not read as the full journal");
        }
    }
}

#[test]
fn a_wal_from_another_database_is_refused_before_it_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    build(&b, 3);
    // An open connection keeps a's WAL on disk after its writer closes; copy that WAL next to b.
    let holder = Journal::open(&a, &Options::default()).unwrap();
    let mut w = Journal::open(&a, &Options::default()).unwrap();
    w.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 })).unwrap();
    for n in 1..9 {
        w.append(
            "s",
            None,
            vec![NewEvent::new(format!("s-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user(format!("foreign {n}"))]))],
        )
        .unwrap();
    }
    drop(w);
    assert!(a.with_extension("db-wal").exists(), "a's commits are in its WAL");
    std::fs::copy(a.with_extension("db-wal"), b.with_extension("db-wal")).unwrap();
    let e = Journal::open(&b, &Options::default()).err().expect("refused");
    assert!(e.to_string().contains("b.db") && e.to_string().contains("belongs to another database"), "{e}");
    // Moving the stray log away restores b's own data, untouched.
    std::fs::remove_file(b.with_extension("db-wal")).unwrap();
    let _ = std::fs::remove_file(b.with_extension("db-shm"));
    let j = Journal::open(&b, &Options::default()).unwrap();
    let texts: Vec<String> = j.head("s").unwrap().history.iter().map(|m| m.content.clone()).collect();
    assert_eq!(texts, vec!["message 1", "message 2"]);
    assert!(j.verify(None).unwrap().bad.is_empty());
    drop(holder);
}

#[test]
fn a_session_without_events_is_reported_and_a_start_commits_with_its_first_event() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.db");
    build(&p, 3);
    // What an interrupted two-step start used to leave: a session row and nothing else.
    sqlite3(&p, "INSERT INTO sessions (id, title, created_at, head_seq, head_hash) VALUES ('orphan', '', '2025-01-01T00:00:00Z', 0, zeroblob(32))");
    let j = Journal::open(&p, &Options::default()).unwrap();
    let r = j.verify(None).unwrap();
    assert_eq!(r.bad.len(), 1, "{r:?}");
    assert_eq!(r.bad[0].session, "orphan");
    assert!(r.bad[0].problem.contains("no events"), "{}", r.bad[0].problem);
    // A start that fails (its first event's id is taken) leaves no session behind.
    let mut j = j;
    let e = j.start_session("new", "t", NewEvent::new("s-1", ts(9), EventBody::MessageAppended { count: 0 }));
    assert!(matches!(e, Err(JournalError::IdReused(_))), "{e:?}");
    assert!(j.sessions().unwrap().iter().all(|s| s.id != "new"));
}

/// A session long enough to hold snapshots (taken every 64 events along the parent chain).
fn build_with_snapshots(path: &Path) -> Journal {
    build(path, 200);
    let j = Journal::open(path, &Options::default()).unwrap();
    let snaps: i64 = j.conn().query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0)).unwrap();
    assert!(snaps >= 3, "{snaps} snapshots");
    assert!(j.verify(None).unwrap().bad.is_empty());
    j
}

/// Overwrites `column` of the snapshot row at `seq` behind the journal's back (the snapshots table
/// has no triggers), closes the handle, and checks that verify names that row first.
fn forge_snapshot(j: Journal, p: &Path, column: &str, seq: i64, bytes: &[u8]) {
    let sql = format!("UPDATE snapshots SET {column} = ?1 WHERE seq = ?2");
    j.conn().execute(&sql, rusqlite::params![bytes, seq]).unwrap();
    drop(j);
    let (bad, problem) = first_bad(p);
    assert_eq!(i64::try_from(bad).unwrap(), seq, "{problem}");
    assert!(problem.contains("snapshot"), "{problem}");
}

#[test]
fn a_tampered_snapshot_state_is_reported_and_never_restored() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("snap.db");
    let j = build_with_snapshots(&p);
    let snap_seq: i64 = j.conn().query_row("SELECT min(seq) FROM snapshots", [], |r| r.get(0)).unwrap();
    let want = j.view_at("s", 100).unwrap();
    // Behind the journal's back: the snapshot now says the history is one message shorter and a
    // cap was learned (the snapshots table has no triggers; this is what any writer could do).
    let state: Vec<u8> =
        j.conn().query_row("SELECT state FROM snapshots WHERE seq = ?1", [snap_seq], |r| r.get(0)).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&state).unwrap();
    let hist = v["history"].as_str().unwrap().to_string();
    v["history"] = serde_json::Value::String(hist[..hist.len() - 64].to_string());
    v["cap"] = serde_json::json!(12345);
    forge_snapshot(j, &p, "state", snap_seq, &serde_json::to_vec(&v).unwrap());
    // A restore that would start from it (the first snapshot is at event 65) refuses rather than returning the forged state.
    let j = Journal::open(&p, &Options::default()).unwrap();
    let e = j.view_at("s", 100).unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
    assert!(j.state_at("s", 100).is_err());
    // Snapshots are disposable: once the forged row is gone the restore is exact again.
    j.conn().execute("DELETE FROM snapshots WHERE seq = ?1", [snap_seq]).unwrap();
    assert_eq!(j.view_at("s", 100).unwrap(), want);
    assert!(j.verify(None).unwrap().bad.is_empty());
}

#[test]
fn a_tampered_snapshot_history_is_reported_and_never_restored() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("snaphist.db");
    let j = build_with_snapshots(&p);
    let snap_seq: i64 = j.conn().query_row("SELECT max(seq) FROM snapshots", [], |r| r.get(0)).unwrap();
    let history: Vec<u8> =
        j.conn().query_row("SELECT history FROM snapshots WHERE seq = ?1", [snap_seq], |r| r.get(0)).unwrap();
    // A message's text "message" becomes "forged!" (same length in its MessagePack string): the row
    // still decodes, to a different history.
    let at = history.windows(7).position(|w| w == b"message").expect("a message in the snapshot");
    let mut forged = history.clone();
    forged[at..at + 7].copy_from_slice(b"forged!");
    forge_snapshot(j, &p, "history", snap_seq, &forged);
    let j = Journal::open(&p, &Options::default()).unwrap();
    let e = j.head("s").unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
    // Forging the hash the event records as well breaks the chain instead.
    let digest: Vec<u8> = {
        let state: Vec<u8> = j
            .conn()
            .query_row("SELECT state FROM snapshots WHERE seq = ?1", [snap_seq], |r| r.get(0))
            .unwrap();
        let mut h = blake3::Hasher::new();
        h.update(b"salvage.snapshot/1\0");
        for part in [&state[..], &forged[..]] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().as_bytes().to_vec()
    };
    drop(j);
    sqlite3(
        &p,
        &format!(
            "{NO_TRIGGERS} UPDATE events SET snapshot_hash = x'{}' WHERE seq = {snap_seq};",
            digest.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    );
    let (seq, problem) = first_bad(&p);
    assert_eq!(i64::try_from(seq).unwrap(), snap_seq, "{problem}");
    assert!(problem.contains("hash does not match"), "{problem}");
}

#[test]
fn a_redaction_reaches_restores_that_start_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("redact.db");
    let mut j = build_with_snapshots(&p);
    // Message 7 is in every snapshot's materialised history.
    let hash = j.history_hashes("s", 8).unwrap()[6];
    assert_eq!(j.messages_by_hash("s", 8, &[hash]).unwrap()[0].content, "message 7");
    let body = EventBody::Redaction { keys: vec![], counts: Default::default() };
    j.redact_messages("s", &[(hash, Message::user("[redacted]"))], NewEvent::new("red", ts(999), body))
        .unwrap();
    drop(j);
    let j = Journal::open(&p, &Options::default()).unwrap();
    for seq in [8u64, 100, 150, 200, 201] {
        let v = j.view_at("s", seq).unwrap();
        assert_eq!(v.history[6].content, "[redacted]", "event {seq}");
        assert!(v.history.iter().all(|m| m.content != "message 7"), "event {seq}");
    }
    assert!(j.verify(None).unwrap().bad.is_empty());
}

/// Review (second pass): a message stored in CCR could be repointed at another message's blob,
/// its own blob's ref deleted and the blob evicted, with every trigger in place, while verify
/// said the journal was intact and the session no longer restored. A stored message keeps its
/// hash and its key (a trigger), and verify reads each CCR-stored message back under its own hash.
#[test]
fn a_message_stored_in_ccr_is_checked_under_its_own_hash() {
    let dir = tempfile::tempdir().unwrap();
    let build_big = |name: &str| {
        let p = dir.path().join(name);
        let mut j = Journal::open(&p, &Options::default()).unwrap();
        j.start_session("s", "t", NewEvent::new("s-0", ts(0), EventBody::MessageAppended { count: 0 }))
            .unwrap();
        for n in 1..3u64 {
            let big = format!("message {n} {}", "x".repeat(salvage_journal::LARGE_MESSAGE + 10));
            j.append(
                "s",
                None,
                vec![NewEvent::new(format!("s-{n}"), ts(n), EventBody::MessageAppended { count: 1 })
                    .with_history(HistoryChange::Append(vec![Message::user(big)]))],
            )
            .unwrap();
        }
        assert!(j.verify(None).unwrap().bad.is_empty());
        p
    };
    let p = build_big("guarded.db");
    let j = Journal::open(&p, &Options::default()).unwrap();
    let e = j
        .conn()
        .execute("UPDATE messages SET ccr_key = (SELECT ccr_key FROM messages WHERE ccr_key IS NOT NULL LIMIT 1 OFFSET 1) WHERE rowid = (SELECT rowid FROM messages WHERE ccr_key IS NOT NULL LIMIT 1)", [])
        .unwrap_err()
        .to_string();
    assert!(e.contains("keeps its hash"), "{e}");
    drop(j);
    let cases = [
        ("repointed", "DROP TRIGGER messages_keys_fixed; UPDATE messages SET ccr_key = (SELECT ccr_key FROM messages WHERE ccr_key IS NOT NULL ORDER BY id DESC LIMIT 1) WHERE id = (SELECT id FROM messages WHERE ccr_key IS NOT NULL ORDER BY id LIMIT 1);", "names another CCR blob"),
        ("blob-edited", "UPDATE ccr_blobs SET data = zeroblob(length(data)) WHERE id = (SELECT min(id) FROM ccr_blobs);", "cannot be restored"),
    ];
    for (name, sql, problem) in cases {
        let p = build_big(&format!("{name}.db"));
        sqlite3(&p, sql);
        let (seq, got) = first_bad(&p);
        assert_eq!(seq, 2, "{name}: {got}");
        assert!(got.contains(problem), "{name}: {got}");
    }
    // A blob link to an event that is not stored is reported too.
    let p = build_big("stray.db");
    sqlite3(&p, "INSERT INTO event_blobs VALUES ('s', 99, (SELECT key FROM ccr_blobs LIMIT 1));");
    let (seq, got) = first_bad(&p);
    assert_eq!(seq, 99, "{got}");
    assert!(got.contains("not stored"), "{got}");
}
