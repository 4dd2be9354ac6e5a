//! The adversarial review of the CLI's bad inputs (stop 29): each case that broke "exit 2, the
//! file named, nothing half-written, bounded", through the real binary. Each failed before its fix.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn corpus(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../testdata/corpus/{id}.json"))
}

fn salvage(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_salvage"))
        .args(args)
        .current_dir(dir)
        .env_remove("SALVAGE_DB")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A journal with one replayed session in `dir/name`.
fn journal(dir: &Path, name: &str) -> PathBuf {
    let c = corpus("gateway-http413-reported");
    let o = salvage(dir, &["replay", c.to_str().unwrap(), "--db", name]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    dir.join(name)
}

/// Finding 1: `-o` given the database (or a link to it, or its `-wal`) replaced the journal with
/// the output and exited 0.
#[test]
fn an_output_never_replaces_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = journal(dir.path(), "v.db");
    let before = std::fs::read(&db).unwrap();
    std::os::unix::fs::symlink("v.db", dir.path().join("link.db")).unwrap();
    for args in [
        &["journal", "export", "latest", "--db", "v.db", "-o", "v.db"][..],
        &["journal", "export", "latest", "--db", "v.db", "-o", "v.db-wal"],
        &["report", "latest", "--db", "v.db", "-o", "link.db"],
    ] {
        let o = salvage(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("an output never replaces it"), "{args:?}: {}", stderr(&o));
        assert_eq!(std::fs::read(&db).unwrap(), before, "{args:?}: the database is untouched");
    }
    let o = salvage(dir.path(), &["journal", "sessions", "--db", "v.db"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Finding 4: an output path that cannot be written was found after `--bless` had rewritten the
/// captures and the run was journaled.
#[test]
fn an_unwritable_report_path_stops_the_run_before_it_changes_anything() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.json");
    std::fs::copy(corpus("gateway-http413-reported"), &cap).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&cap).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("expect");
    std::fs::write(&cap, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let before = std::fs::read(&cap).unwrap();
    let o =
        salvage(dir.path(), &["replay", "c.json", "--bless", "--db", "j.db", "--junit", "missing/dir/x.xml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--junit missing/dir/x.xml"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&cap).unwrap(), before, "the capture is not blessed");
    assert!(!dir.path().join("j.db").exists(), "nothing is journaled");
    let o = salvage(dir.path(), &["apply", "rung3", "c.json", "--db", "a.db", "--report", "missing/r.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!dir.path().join("a.db").exists(), "nothing is archived");
}

/// Finding 8: `--threshold nan` (or `inf`, or a negative number) switched the regression check
/// off unseen.
#[test]
fn a_threshold_must_be_a_finite_percentage() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.json"), "{}").unwrap();
    let c = corpus("gateway-http413-reported");
    for bad in ["nan", "inf", "-5"] {
        let threshold = format!("--threshold={bad}");
        let o = salvage(
            dir.path(),
            &["replay", c.to_str().unwrap(), "--no-journal", "--baseline", "b.json", &threshold],
        );
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--threshold"), "{bad}: {}", stderr(&o));
    }
}

/// Finding 2: a link back up the tree replayed the same captures dozens of times (a link to `/`
/// walked the whole file system).
#[test]
fn a_folder_walk_does_not_follow_links_to_folders() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("loop");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::copy(corpus("gateway-http413-reported"), root.join("a.json")).unwrap();
    std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("/", root.join("sub/root")).unwrap();
    let o = salvage(dir.path(), &["replay", "loop", "--no-journal"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 captures: 1 passed"), "{out}");
}

/// Finding 3: `--upstream-ca` read a FIFO forever (and /dev/zero until memory ran out).
#[test]
fn an_upstream_ca_is_read_bounded_from_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ca.pem");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let o = salvage(
        dir.path(),
        &[
            "proxy",
            "--upstream",
            "https://api.anthropic.com",
            "--listen",
            "127.0.0.1:0",
            "--upstream-ca",
            "ca.pem",
            "--no-journal",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ca.pem: a FIFO"), "{}", stderr(&o));
}

/// Finding 5: damage found after the open (a table gone) exited 1 without naming the file.
#[test]
fn damage_found_after_the_open_names_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = journal(dir.path(), "d.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("DROP TABLE snapshots").unwrap();
    drop(c);
    let o = salvage(dir.path(), &["journal", "show", "latest", "--db", "d.db"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("salvage: error: d.db: "), "{}", stderr(&o));
    assert!(stderr(&o).contains("damaged"), "{}", stderr(&o));
}

/// Finding 7: a Claude Code record whose message content is of the wrong type, or whose message
/// is missing, was dropped while the accounting counted it, exit 0.
#[test]
fn a_claude_code_record_without_a_readable_message_is_refused_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/samples/claude-code/fixture-branch-and-compaction.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(sample).unwrap().lines().map(str::to_string).collect();
    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut l = lines.clone();
        let mut rec: serde_json::Value = serde_json::from_str(&l[1]).unwrap();
        edit(&mut rec);
        l[1] = rec.to_string();
        l.join("\n") + "\n"
    };
    let cases: [(&str, String, &str); 3] = [
        (
            "number.jsonl",
            with(&|r| r["message"]["content"] = 42.into()),
            "line 2.message.content: expected a string or an array of blocks, found a number",
        ),
        (
            "null.jsonl",
            with(&|r| r["message"]["content"] = serde_json::Value::Null),
            "line 2.message.content: expected a string or an array of blocks, found null",
        ),
        (
            "gone.jsonl",
            with(&|r| {
                r.as_object_mut().unwrap().remove("message");
            }),
            "line 2.message: missing",
        ),
    ];
    for (name, text, want) in cases {
        std::fs::write(dir.path().join(name), text).unwrap();
        for args in [
            &["import", "--from", "claude-code", name, "-o", "out.json"][..],
            &["journal", "import", "--from", "claude-code", name, "--db", "j.db"],
        ] {
            let o = salvage(dir.path(), args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).contains(&format!("{name}: {want}")), "{args:?}: {}", stderr(&o));
        }
        assert!(!dir.path().join("out.json").exists());
    }
}

/// Finding 12: a setting whose value is not UTF-8 was dropped and read as unset.
#[test]
fn a_setting_that_is_not_utf8_is_refused_by_name() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_salvage"))
        .arg("config")
        .env("CHATCLI_MAX_PAYLOAD", std::ffi::OsStr::from_bytes(b"5\xffMB"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("CHATCLI_MAX_PAYLOAD: the value is not UTF-8 text"), "{}", stderr(&o));
}

/// Finding 13: a capture starting with a UTF-8 byte-order mark was refused as malformed JSON by
/// `replay` (the importers accepted it).
#[test]
fn a_capture_with_a_byte_order_mark_replays() {
    let dir = tempfile::tempdir().unwrap();
    let bytes =
        [b"\xEF\xBB\xBF".as_slice(), &std::fs::read(corpus("gateway-http413-reported")).unwrap()].concat();
    std::fs::write(dir.path().join("bom.json"), bytes).unwrap();
    let o = salvage(dir.path(), &["replay", "bom.json", "--no-journal"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Finding 11: a `--listen` address that cannot be had left the journal and the captures folder
/// the proxy had already made.
#[test]
fn a_proxy_that_cannot_listen_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let o = salvage(
        dir.path(),
        &[
            "proxy",
            "--upstream",
            "https://api.anthropic.com",
            "--listen",
            "192.0.2.1:0",
            "--db",
            "p.db",
            "--captures",
            "caps",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--listen 192.0.2.1:0"), "{}", stderr(&o));
    assert!(!dir.path().join("p.db").exists() && !dir.path().join("caps").exists());
}

/// Finding 6: a replay cut short (a killed process, a full disk) left a half-journaled session
/// that `journal sessions` listed as `exhausted` and `journal verify` passed without a word. The
/// session is written here as such a run leaves it (started, attempt 0 rejected, attempt 1
/// rejected, no `run_ended`).
#[test]
fn a_run_cut_short_reads_incomplete_and_verify_says_so() {
    use salvage_journal::{Journal, NewEvent};
    use salvage_types::event::EventBody;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    {
        let mut j = Journal::open(&db, &Default::default()).unwrap();
        let ts = |n: i64| chrono::DateTime::from_timestamp(1_764_000_000 + n, 0).unwrap();
        j.start_session(
            "cut",
            "cut short",
            NewEvent::new("c0", ts(0), EventBody::session_started(None, None)),
        )
        .unwrap();
        let sent = |attempt| EventBody::RequestSent {
            attempt,
            bytes: 1000,
            estimated_tokens: 250,
            real_tokens: None,
            history_digest: "d74981efa70a0c88".into(),
            accepted: false,
        };
        let events = vec![NewEvent::new("c1", ts(1), sent(0)), NewEvent::new("c2", ts(2), sent(1))];
        j.append("cut", None, events).unwrap();
    }
    let db_arg = db.to_str().unwrap();
    let o = salvage(dir.path(), &["journal", "sessions", "--json", "--db", db_arg]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sessions"][0]["outcome"], "incomplete", "{v}");
    let o = salvage(dir.path(), &["journal", "sessions", "--outcome", "incomplete", "--db", db_arg]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("cut"), "{}", String::from_utf8_lossy(&o.stdout));
    let o = salvage(dir.path(), &["journal", "verify", "--db", db_arg]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "the chain is sound: {out}");
    assert!(out.contains("NOTE session cut: its last recovery run was cut short"), "{out}");
    assert!(out.contains("1 incomplete"), "{out}");
    let o = salvage(dir.path(), &["journal", "verify", "--json", "--db", db_arg]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["incomplete"], serde_json::json!(["cut"]), "{v}");
}

/// Re-review finding 9: `journal prune --outcome incomplete` deleted the session of a replay
/// still running (it reads `incomplete` until its `run_ended`). A session created in the last
/// minutes is kept; an old one cut short is pruned.
#[test]
fn prune_keeps_an_incomplete_session_a_run_may_still_be_writing() {
    use salvage_journal::{Journal, NewEvent};
    use salvage_types::event::EventBody;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    {
        let mut j = Journal::open(&db, &Default::default()).unwrap();
        let sent = EventBody::RequestSent {
            attempt: 0,
            bytes: 1000,
            estimated_tokens: 250,
            real_tokens: None,
            history_digest: "d74981efa70a0c88".into(),
            accepted: false,
        };
        let long_ago = chrono::DateTime::from_timestamp(1_764_000_000, 0).unwrap();
        for (id, ts) in [("old", long_ago), ("running", chrono::Utc::now())] {
            j.start_session(
                id,
                id,
                NewEvent::new(format!("{id}0"), ts, EventBody::session_started(None, None)),
            )
            .unwrap();
            j.append(id, None, vec![NewEvent::new(format!("{id}1"), ts, sent.clone())]).unwrap();
        }
    }
    let db_arg = db.to_str().unwrap();
    let o = salvage(dir.path(), &["journal", "prune", "--outcome", "incomplete", "--db", db_arg]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("kept 1 incomplete session(s) created in the last 10 minutes"),
        "{}",
        stderr(&o)
    );
    let o = salvage(dir.path(), &["journal", "sessions", "--json", "--db", db_arg]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> =
        v["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["running"]);
}
