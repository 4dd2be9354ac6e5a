//! Reliability and security through the real binary: unique session ids under concurrent
//! replays, CCR grace per write, foreign and newer database files left untouched, read-only
//! opens, `journal redact` and `ccr redact` leaving no secret bytes in the file, owner-only
//! outputs, escaped terminal output and `--db` paths taken literally.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{cmd, corpus, salvage};

use chrono::{TimeZone, Utc};
use salvage_journal::{HistoryChange, Journal, NewEvent};
use salvage_store::Options;
use salvage_types::event::EventBody;
use salvage_types::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn sessions(dir: &Path, db: &str) -> Vec<serde_json::Value> {
    let o = salvage(dir, &["journal", "sessions", "--json", "--db", db]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["sessions"].as_array().unwrap().clone()
}

/// Every file of a database (the file, its -wal and -shm) as bytes, for before/after checks.
fn files(db: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|s| {
            let mut p = db.as_os_str().to_owned();
            p.push(s);
            (s.to_string(), std::fs::read(PathBuf::from(p)).ok())
        })
        .collect()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn concurrent_replays_into_one_database_never_share_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let files: Vec<String> = ["gateway-http413-reported.json", "auth-401.json", "cap-only-tightens.json"]
        .iter()
        .map(|f| c.join(f).to_str().unwrap().to_string())
        .collect();
    // Two different captures sharing an id, in one run: two sessions, each its own history.
    let twin = dir.path().join("twin.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.join("auth-401.json")).unwrap()).unwrap();
    v["title"] = "a different capture with the same id".into();
    v.as_object_mut().unwrap().remove("expect");
    std::fs::write(&twin, serde_json::to_vec(&v).unwrap()).unwrap();
    let mut children = Vec::new();
    for _ in 0..4 {
        let mut args = vec!["replay", "--db", "shared.db", "--jobs", "2", twin.to_str().unwrap()];
        args.extend(files.iter().map(String::as_str));
        children.push(cmd(dir.path(), &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap());
    }
    for ch in children {
        let o = ch.wait_with_output().unwrap();
        assert!(o.status.code() != Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let list = sessions(dir.path(), "shared.db");
    let ids: std::collections::BTreeSet<&str> = list.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(list.len(), 16, "4 processes × 4 captures");
    assert_eq!(ids.len(), 16, "every session id is distinct: {ids:?}");
    let auth = list.iter().filter(|s| s["capture"] == "auth-401").count();
    assert_eq!(auth, 8, "the capture id is kept as a field");
    for s in &list {
        assert!(s["events"].as_u64().unwrap() >= 2, "{s}");
    }
    let o = salvage(dir.path(), &["journal", "verify", "--db", "shared.db"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn ccr_grace_runs_from_each_blobs_write_not_the_replays_start() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let started = Utc::now().timestamp_millis();
    let mut replay = cmd(dir.path(), &["replay", c.to_str().unwrap(), "--db", "g.db"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A collector running all along with no grace at all and no room: it takes every
    // unreferenced blob it sees. A replay archives each original in the transaction of the event
    // that references it, so there is never one to take.
    let mut gcs = 0;
    while replay.try_wait().unwrap().is_none() {
        if dir.path().join("g.db").exists() {
            let o =
                salvage(dir.path(), &["ccr", "gc", "--max-bytes", "1B", "--grace-secs", "0", "--db", "g.db"]);
            assert!(o.status.code() != Some(2), "{}", text(&o));
            gcs += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = replay.wait_with_output().unwrap();
    assert!(o.status.success(), "replay with a concurrent gc: {}", String::from_utf8_lossy(&o.stderr));
    let o = salvage(dir.path(), &["journal", "verify", "--db", "g.db"]);
    assert!(o.status.success(), "{}", text(&o));
    // Blobs carry the wall-clock time of their own write, not the run's start.
    let conn = rusqlite::Connection::open(dir.path().join("g.db")).unwrap();
    let (min, max): (i64, i64) = conn
        .query_row("SELECT min(created_at), max(created_at) FROM ccr_blobs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(min >= started - 1000, "created_at {min} is before the run started ({started})");
    assert!(max > min, "every blob has the same write time {min}: the replay's start, not each write");
    eprintln!("{gcs} concurrent gc runs");
}

#[test]
fn a_foreign_or_newer_database_is_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    // Another application's SQLite file, in its own (rollback) journal mode.
    let foreign = dir.path().join("app.sqlite");
    {
        let c = rusqlite::Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine');")
            .unwrap();
    }
    let before = files(&foreign);
    let f = foreign.to_str().unwrap();
    let corpus = corpus().join("auth-401.json");
    for args in [
        vec!["journal", "sessions", "--db", f],
        vec!["journal", "verify", "--db", f],
        vec!["ccr", "stats", "--db", f],
        vec!["ccr", "put", corpus.to_str().unwrap(), "--db", f],
        vec!["replay", corpus.to_str().unwrap(), "--db", f],
    ] {
        let o = salvage(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("another application's SQLite database"), "{}", text(&o));
        assert_eq!(files(&foreign), before, "{args:?} changed the foreign file");
    }
    // A salvage file written by a newer build, left in rollback mode: refused, mode unchanged.
    let newer = dir.path().join("newer.db");
    drop(salvage_store::Store::open(&newer, &Options::default()).unwrap());
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        let m: String = c.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0)).unwrap();
        assert_eq!(m, "delete");
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = files(&newer);
    for args in [vec!["journal", "sessions"], vec!["replay", corpus.to_str().unwrap()]] {
        let mut args = args.clone();
        args.extend(["--db", newer.to_str().unwrap()]);
        let o = salvage(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("schema version 99 is newer"), "{}", text(&o));
        assert_eq!(files(&newer), before, "{args:?} changed the newer file");
    }
    // Our own file: read-only commands leave every byte as it was.
    let o = salvage(dir.path(), &["replay", corpus.to_str().unwrap(), "--db", "ours.db"]);
    assert!(o.status.success(), "{}", text(&o));
    let ours = dir.path().join("ours.db");
    let before = files(&ours);
    let id = sessions(dir.path(), "ours.db")[0]["id"].as_str().unwrap().to_string();
    for args in [
        vec!["journal", "sessions"],
        vec!["journal", "verify"],
        vec!["journal", "log", &id],
        vec!["journal", "show", &id],
        vec!["journal", "export", &id],
        vec!["ccr", "stats"],
        vec!["ccr", "verify"],
    ] {
        let mut args = args.clone();
        args.extend(["--db", "ours.db"]);
        let o = salvage(dir.path(), &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        let after = files(&ours);
        assert_eq!(after[0], before[0], "{args:?} changed the database file");
        // A reader may leave an empty log where there was none; nothing is written into it.
        let empty = |w: &Option<Vec<u8>>| w.as_ref().is_none_or(|b| b.is_empty());
        assert!(
            after[1] == before[1] || (empty(&after[1].1) && empty(&before[1].1)),
            "{args:?} changed the write-ahead log"
        );
    }
}

/// Makes a file unwritable even for root (the immutable attribute) or, for other users, by its
/// mode; undone on drop.
struct ReadOnly(PathBuf, bool);
impl ReadOnly {
    fn new(p: &Path) -> ReadOnly {
        let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
        let immutable =
            root && Command::new("chattr").arg("+i").arg(p).status().map(|s| s.success()).unwrap_or(false);
        if !immutable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o444)).unwrap();
        }
        ReadOnly(p.to_path_buf(), immutable)
    }
}
impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.1 {
            let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        }
    }
}

#[test]
fn a_read_only_database_is_verified_and_db_paths_are_literal() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus().join("auth-401.json");
    let o = salvage(dir.path(), &["replay", corpus.to_str().unwrap(), "--db", "ro.db"]);
    assert!(o.status.success(), "{}", text(&o));
    // Fold the log into the file so the read-only file holds everything.
    rusqlite::Connection::open(dir.path().join("ro.db"))
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let guard = ReadOnly::new(&dir.path().join("ro.db"));
    let expected_write_error =
        std::fs::OpenOptions::new().append(true).open(dir.path().join("ro.db")).is_err();
    for args in [vec!["journal", "verify"], vec!["journal", "sessions"], vec!["ccr", "verify"]] {
        let mut args = args.clone();
        args.extend(["--db", "ro.db"]);
        let o = salvage(dir.path(), &args);
        assert!(o.status.success(), "{args:?} on a read-only file: {}", text(&o));
    }
    drop(guard);
    assert!(expected_write_error, "the file could still be written: the test proved nothing");
    // --db takes a path, never an SQLite URI: nothing named file:x.db or x.db appears.
    for db in ["file:x.db", "file:x.db?mode=memory", ":memory:", ""] {
        let o = salvage(dir.path(), &["replay", corpus.to_str().unwrap(), "--db", db]);
        assert_eq!(o.status.code(), Some(2), "{db}: {}", text(&o));
        assert!(text(&o).contains("--db"), "{}", text(&o));
    }
    assert!(!dir.path().join("file:x.db").exists() && !dir.path().join("x.db").exists());
    let o = salvage(dir.path(), &["replay", corpus.to_str().unwrap(), "--db", "./file:x.db"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(dir.path().join("file:x.db").exists() && !dir.path().join("x.db").exists());
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn raw_bytes(db: &Path) -> Vec<u8> {
    files(db).into_iter().flat_map(|(_, b)| b.unwrap_or_default()).collect()
}

#[test]
fn journal_redact_and_ccr_redact_leave_no_secret_bytes_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let inline = "launch code ZEBRA-7731-QUOKKA-0042, keep it quiet"; // no rule knows this shape
    let keyed = "deploy with AKIAZ7QX4MNB2LKP9RTW and go";
    {
        let ts = |n: i64| Utc.timestamp_millis_opt(1_764_000_000_000 + n * 1000).unwrap();
        let mut j = Journal::open(&db, &Options::default()).unwrap();
        j.start_session(
            "s1",
            "redaction",
            NewEvent::new("e1", ts(0), EventBody::MessageAppended { count: 3 }).with_history(
                HistoryChange::Append(vec![
                    Message::system("S"),
                    Message::user(inline),
                    Message::user(keyed),
                ]),
            ),
        )
        .unwrap();
        j.append(
            "s1",
            None,
            vec![NewEvent::new("e2", ts(1), EventBody::MessageAppended { count: 1 })
                .with_history(HistoryChange::Append(vec![Message::user("done")]))],
        )
        .unwrap();
    }
    let d = db.to_str().unwrap();
    assert!(count(&raw_bytes(&db), b"ZEBRA-7731-QUOKKA") > 0, "the secret is in the file to begin with");
    // The history at event 1, position 1: the whole text goes (no rule matches it).
    let o = salvage(dir.path(), &["journal", "redact", "s1", "--at", "1", "--index", "1", "--db", d]);
    assert!(o.status.success(), "{}", text(&o));
    // By hash (a prefix), the rules replace only the key.
    let export =
        salvage(dir.path(), &["journal", "export", "s1", "--format", "jsonl", "--no-redact", "--db", d]);
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&export.stdout).lines().next().unwrap()).unwrap();
    let hash = first["delta"]["insert"][2].as_str().unwrap()[..12].to_string();
    let o = salvage(dir.path(), &["journal", "redact", "s1", "--message", &hash, "--db", d]);
    assert!(o.status.success(), "{}", text(&o));
    let raw = raw_bytes(&db);
    assert_eq!(count(&raw, b"ZEBRA-7731-QUOKKA"), 0, "the inline secret's bytes are still in the file");
    assert_eq!(count(&raw, b"AKIAZ7QX4MNB2LKP9RTW"), 0, "the key's bytes are still in the file");
    let o = salvage(dir.path(), &["journal", "verify", "--db", d]);
    assert!(o.status.success(), "the chain verifies after redaction: {}", text(&o));
    let show = text(&salvage(dir.path(), &["journal", "show", "s1", "--db", d]));
    assert!(
        show.contains("[REDACTED:message:") && show.contains("deploy with [REDACTED:aws_access_key:"),
        "{show}"
    );
    let log = text(&salvage(dir.path(), &["journal", "log", "s1", "--db", d]));
    assert_eq!(log.lines().filter(|l| l.contains("redaction")).count(), 2, "{log}");
    // ccr redact: an incompressible blob stored raw, then redacted.
    let mut blob = b"ccr secret PLATYPUS-5518-WOMBAT ".to_vec();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        blob.push((x >> 24) as u8);
    }
    std::fs::write(dir.path().join("blob.bin"), &blob).unwrap();
    let o = salvage(dir.path(), &["ccr", "put", "blob.bin", "--db", d]);
    let marker = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(count(&raw_bytes(&db), b"PLATYPUS-5518-WOMBAT") > 0);
    let o = salvage(dir.path(), &["ccr", "redact", &marker, "--db", d]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(count(&raw_bytes(&db), b"PLATYPUS-5518-WOMBAT"), 0, "ccr redact left the bytes in free pages");
}

#[test]
fn outputs_are_owner_only_under_any_umask_and_stale_temporaries_go() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_salvage");
    let corpus = corpus();
    let body = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/requests/openai-agent-tools.json");
    let sh = |script: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("umask 000; {script}"))
            .current_dir(dir.path())
            .env_remove("SALVAGE_DB")
            .env("BIN", bin)
            .output()
            .unwrap();
        assert!(o.status.code() != Some(2), "{script}: {}", text(&o));
        o
    };
    let cap = corpus.join("auth-401.json");
    sh(&format!("\"$BIN\" replay {} >/dev/null", cap.display()));
    assert_eq!(mode(&dir.path().join(".salvage")), 0o700, ".salvage/ under umask 000");
    assert_eq!(mode(&dir.path().join(".salvage/salvage.db")), 0o600);
    // A temporary file left by a killed writer (its process is gone) is removed by the next write.
    let stale = dir.path().join(".out.json.4194303.Xk2.salvage-tmp");
    std::fs::write(&stale, vec![0u8; 1 << 20]).unwrap();
    sh(&format!("\"$BIN\" import --from openai {} -o out.json", body.display()));
    assert_eq!(mode(&dir.path().join("out.json")), 0o600, "import -o under umask 000");
    assert!(!stale.exists(), "the stale temporary file is still there");
    let id = sessions(dir.path(), ".salvage/salvage.db")[0]["id"].as_str().unwrap().to_string();
    sh(&format!("\"$BIN\" journal export '{id}' -o exported.json"));
    assert_eq!(mode(&dir.path().join("exported.json")), 0o600, "export -o under umask 000");
    // A file replaced keeps its mode: 0600 stays 0600 through --bless and export -o.
    std::fs::copy(&cap, dir.path().join("mine.json")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path().join("mine.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    sh("\"$BIN\" replay mine.json --bless >/dev/null");
    assert_eq!(mode(&dir.path().join("mine.json")), 0o600, "--bless loosened the capture");
    std::fs::set_permissions(dir.path().join("exported.json"), std::fs::Permissions::from_mode(0o640))
        .unwrap();
    sh(&format!("\"$BIN\" journal export '{id}' -o exported.json"));
    assert_eq!(mode(&dir.path().join("exported.json")), 0o640);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.ends_with(".salvage-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn control_characters_never_reach_the_terminal_raw_and_hints_are_shell_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.join("auth-401.json")).unwrap()).unwrap();
    v["id"] = "evil\u{1b}]0;owned\u{7}\r$(touch pwned)'x".into();
    v["title"] = "title \u{1b}[2J\u{1b}[31mred\u{9b}1m\r".into();
    v.as_object_mut().unwrap().remove("expect");
    std::fs::write(dir.path().join("evil.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let raw = |o: &Output| -> Vec<u8> { [o.stdout.clone(), o.stderr.clone()].concat() };
    let clean = |what: &str, b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        assert!(
            !s.chars().any(|ch| ch != '\n' && (ch.is_control())),
            "{what} printed a control character: {s:?}"
        );
    };
    let o = salvage(dir.path(), &["replay", "evil.json", "--db", "e.db"]);
    clean("replay table", &raw(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("evil\\e]0;owned\\x07\\r"), "{}", text(&o));
    let o = salvage(dir.path(), &["journal", "sessions", "--db", "e.db"]);
    clean("journal sessions", &raw(&o));
    let id = sessions(dir.path(), "e.db")[0]["id"].as_str().unwrap().to_string();
    let o = salvage(dir.path(), &["journal", "rewind", &id, "--to", "1", "--db", "e.db"]);
    assert!(o.status.success(), "{}", text(&o));
    clean("journal rewind", &raw(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    // The undo hint is one shell word: pasted into a shell it names the session and runs nothing.
    let hint = out.split('`').nth(1).unwrap();
    assert!(
        hint.starts_with("salvage journal rewind $'evil\\x1b]0;owned\\x07\\x0d$(touch pwned)\\'x@"),
        "{hint}"
    );
    let o = salvage(dir.path(), &["journal", "show", "no\u{1b}[2Jsuch", "--db", "e.db"]);
    assert_eq!(o.status.code(), Some(2));
    clean("an error", &raw(&o));
    let o = salvage(dir.path(), &["replay", "missing\u{7}\u{1b}[1A.json"]);
    assert_eq!(o.status.code(), Some(2));
    clean("a file error", &raw(&o));
}

#[test]
fn journal_verify_through_the_binary_reports_a_session_without_events() {
    // A session row whose first event never committed (what a kill between two transactions left
    // before a session started in one): verify must fail and name it, show must refuse it.
    let dir = tempfile::tempdir().unwrap();
    let c = corpus().join("auth-401.json");
    assert!(salvage(dir.path(), &["replay", c.to_str().unwrap(), "--db", "v.db"]).status.success());
    let ok = salvage(dir.path(), &["journal", "verify", "--db", "v.db"]);
    assert!(ok.status.success(), "{}", text(&ok));
    let store = salvage_store::Store::open(&dir.path().join("v.db"), &Options::default()).unwrap();
    store
        .conn()
        .execute(
            "INSERT INTO sessions (id, title, created_at, head_seq, head_hash) \
             VALUES ('interrupted', '', '2026-12-03T00:00:00Z', 0, zeroblob(32))",
            [],
        )
        .unwrap();
    drop(store);
    let bad = salvage(dir.path(), &["journal", "verify", "--db", "v.db"]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(text(&bad).contains("session interrupted event 0: the session has no events"), "{}", text(&bad));
    let show = salvage(dir.path(), &["journal", "show", "interrupted", "--db", "v.db"]);
    assert_eq!(show.status.code(), Some(2), "{}", text(&show));
}

/// `journal redact` of a message whose original recovery also archived (rung 2 dropped it into a
/// transcript blob) says which CCR blobs still hold it, so that `ccr redact` can clear them
/// (adversarial review, finding 11: the redaction reported success while `recall` and the HTML
/// report still showed the secret, and nothing said so).
#[test]
fn journal_redact_names_the_archived_copies_of_what_it_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("x.db");
    let d = d.to_str().unwrap();
    let secret = "launch code ZEBRA-7731-QUOKKA-0042";
    let mut messages = vec![serde_json::json!({"role": "user", "content": format!("{secret}, remember it")})];
    for i in 0..30 {
        let role = if i % 2 == 0 { "assistant" } else { "user" };
        messages
            .push(serde_json::json!({"role": role, "content": format!("turn {i}: {}", "text ".repeat(600))}));
    }
    messages.push(serde_json::json!({"role": "user", "content": "TASK: go on"}));
    let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "S", "messages": messages});
    std::fs::write(dir.path().join("body.json"), serde_json::to_vec(&body).unwrap()).unwrap();
    let o = salvage(
        dir.path(),
        &[
            "import",
            "body.json",
            "--status",
            "413",
            "--message",
            "413 Payload Too Large",
            "--gateway-max-bytes",
            "30000",
            "-o",
            "cap.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = salvage(dir.path(), &["replay", "cap.json", "--db", d]);
    assert!(o.status.success(), "{}", text(&o));
    let sessions = salvage(dir.path(), &["journal", "sessions", "--json", "--db", d]);
    let v: serde_json::Value = serde_json::from_slice(&sessions.stdout).unwrap();
    let id = v["sessions"][0]["id"].as_str().unwrap().to_string();
    let o =
        salvage(dir.path(), &["journal", "redact", &id, "--at", "1", "--index", "1", "--whole", "--db", d]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let keys: Vec<&str> = err
        .split("CCR blob(s) ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .map(|k| k.split(", ").collect())
        .unwrap_or_default();
    assert!(!keys.is_empty(), "the archived copy is named: {err}");
    for k in &keys {
        let recalled = salvage(dir.path(), &["recall", k, "--db", d]);
        assert!(String::from_utf8_lossy(&recalled.stdout).contains("ZEBRA-7731-QUOKKA"), "{k} holds it");
        let o = salvage(dir.path(), &["ccr", "redact", k, "--db", d]);
        assert!(o.status.success(), "{}", text(&o));
    }
    assert_eq!(count(&raw_bytes(Path::new(d)), b"ZEBRA-7731-QUOKKA"), 0, "no copy is left in the file");
}
