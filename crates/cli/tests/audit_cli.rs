//! Issue #18 end to end: the replay's CI flags (`--junit`, `--shard`, `--baseline`, `--set`,
//! unreadable files in a folder), the journal's ergonomics (prefixes, `latest`, checkpoints,
//! rewinds, branches, diff, export `--at`, filters, delete and prune) and the conventions
//! (one outcome spelling, completions, man page, broken pipes, `--db` folders, `SALVAGE_DB=`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{cmd, root, salvage};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = salvage(dir, args);
    assert!(
        o.status.success(),
        "{args:?}\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

const PICKS: [&str; 5] =
    ["cap-only-tightens", "rung3-keep-four", "auth-401", "no-failure", "gateway-http431"];

/// A folder with a few corpus captures.
fn corpus(dir: &Path) -> PathBuf {
    let c = dir.join("corpus");
    std::fs::create_dir_all(&c).unwrap();
    for p in PICKS {
        std::fs::copy(root().join(format!("testdata/corpus/{p}.json")), c.join(format!("{p}.json"))).unwrap();
    }
    c
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn junit_shards_and_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus(dir.path());
    std::fs::write(c.join("broken.json"), "{ not json").unwrap();
    let junit = dir.path().join("replay.xml");
    let o = salvage(dir.path(), &["replay", "corpus", "--no-journal", "--junit", junit.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "an unreadable file fails the run at the end: {}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("broken") && table.contains("unreadable"), "{table}");
    assert!(table.contains("6 captures: 5 passed, 1 failed"), "the run went on: {table}");
    assert!(table.contains("not_recoverable") && !table.contains("notrecoverable"), "one spelling: {table}");
    // Well-formed JUnit: one testcase per capture, the unreadable one an error.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), 6);
    let broken = cases.iter().find(|n| n.attribute("name") == Some("broken")).unwrap();
    assert!(broken.children().any(|n| n.has_tag_name("error")));
    assert_eq!(doc.root_element().attribute("errors"), Some("1"));
    // A file named on the command line must be readable: exit 2.
    assert_eq!(salvage(dir.path(), &["replay", "corpus/broken.json", "--no-journal"]).status.code(), Some(2));
    std::fs::remove_file(c.join("broken.json")).unwrap();

    // A failed check is a <failure> naming it.
    let o = salvage(
        dir.path(),
        &["replay", "corpus", "--no-journal", "--fault-rung3-keep", "9", "--junit", junit.to_str().unwrap()],
    );
    if o.status.code() == Some(1) {
        let xml = std::fs::read_to_string(&junit).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        assert!(doc.descendants().any(|n| n.has_tag_name("failure") && n.attribute("message").is_some()));
    }

    // Shards: disjoint, together the whole corpus, stable.
    let mut seen = Vec::new();
    for i in 1..=3 {
        let v = json(&ok(
            dir.path(),
            &["replay", "corpus", "--no-journal", "--json", "--shard", &format!("{i}/3")],
        ));
        assert_eq!(v["shard"]["count"], 3);
        let ids: Vec<String> =
            v["captures"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_string()).collect();
        let again = json(&ok(
            dir.path(),
            &["replay", "corpus", "--no-journal", "--json", "--shard", &format!("{i}/3")],
        ));
        assert_eq!(again["captures"].as_array().unwrap().len(), ids.len(), "stable");
        seen.extend(ids);
    }
    seen.sort();
    let mut all: Vec<String> = PICKS.iter().map(|s| s.to_string()).collect();
    all.sort();
    assert_eq!(seen, all);
    for bad in ["0/3", "4/3", "x"] {
        assert_eq!(salvage(dir.path(), &["replay", "corpus", "--shard", bad]).status.code(), Some(2));
    }
}

#[test]
fn baseline_flags_regressions_and_set_overrides_settings() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let prev = ok(dir.path(), &["replay", "corpus", "--no-journal", "--json"]);
    let base = dir.path().join("prev.json");
    std::fs::write(&base, &prev).unwrap();
    // The same run against itself: no regression.
    let v = json(&ok(
        dir.path(),
        &["replay", "corpus", "--no-journal", "--json", "--baseline", base.to_str().unwrap()],
    ));
    assert_eq!(v["baseline"]["regressions"].as_array().unwrap().len(), 0);
    // A baseline where the accepted request was smaller, fewer attempts, another outcome.
    let mut b = json(&prev);
    for c in b["captures"].as_array_mut().unwrap() {
        match c["id"].as_str().unwrap() {
            "cap-only-tightens" => {
                let bytes = c["request_bytes"].as_array_mut().unwrap();
                let last = bytes.last().unwrap().as_u64().unwrap();
                *bytes.last_mut().unwrap() = serde_json::json!(last / 2);
            }
            "rung3-keep-four" => c["attempts"] = serde_json::json!(1),
            "auth-401" => c["outcome"] = serde_json::json!("recovered"),
            _ => {}
        }
    }
    std::fs::write(&base, b.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "corpus", "--no-journal", "--baseline", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("3 regression(s)"), "{text}");
    assert!(text.contains("cap-only-tightens: accepted request bytes"), "{text}");
    assert!(text.contains("rung3-keep-four: recovery attempts 1 →"), "{text}");
    assert!(text.contains("auth-401: outcome recovered → not_recoverable"), "{text}");
    assert!(stderr(&o).contains("3 regression(s) against the baseline"));
    // A bad baseline is a usage error naming the file.
    std::fs::write(&base, "{}").unwrap();
    let o = salvage(dir.path(), &["replay", "corpus", "--no-journal", "--baseline", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("prev.json: captures"), "{}", stderr(&o));

    // --set: a what-if over the corpus; the setting lands in each journaled session.
    // Keeping 3 messages instead of 10 lets rung 2 succeed where rung 3 was needed: the what-if
    // run differs from the capture's expectation, and says so.
    let o = salvage(
        dir.path(),
        &["replay", "corpus/rung3-keep-four.json", "--set", "CHATCLI_EMERGENCY_KEEP_MESSAGES=3"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("expect level: expected rung 3, got rung 2"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let state = ok(dir.path(), &["journal", "export", "latest"]);
    assert_eq!(json(&state)["settings"]["CHATCLI_EMERGENCY_KEEP_MESSAGES"], "3");
    for bad in ["NOPE=1", "CHATCLI_EMERGENCY_KEEP_MESSAGES=ten", "novalue"] {
        let o = salvage(dir.path(), &["replay", "corpus", "--no-journal", "--set", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains("--set"), "{}", stderr(&o));
    }
}

#[test]
fn journal_prefixes_checkpoints_rewinds_diff_export_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let table = ok(dir.path(), &["replay", "corpus", "--jobs", "1"]);
    assert!(table.contains("SESSION"), "{table}");
    let sessions = json(&ok(dir.path(), &["journal", "sessions", "--json"]));
    let ids: Vec<String> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    let id = ids.iter().find(|s| s.starts_with("rung3-keep-four")).unwrap().clone();
    let stamp = id.split_once('@').unwrap().1.to_string();
    assert!(table.contains(&stamp), "the table shows the short session id: {table}");
    // Unique prefix, run stamp and latest; an ambiguous prefix names the candidates.
    assert!(ok(dir.path(), &["journal", "log", "rung3-keep"]).contains("session_started"));
    assert!(ok(dir.path(), &["journal", "log", &stamp]).contains("session_started"));
    ok(dir.path(), &["journal", "log", "latest"]);
    ok(dir.path(), &["replay", "corpus/no-failure.json"]);
    let o = salvage(dir.path(), &["journal", "log", "no-failure"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("ambiguous"), "{}", stderr(&o));

    // Checkpoints, rewind to a name, the head refused, abandoned branches marked.
    let head: u64 =
        json(&ok(dir.path(), &["journal", "log", &id, "--json"]))["events"].as_array().unwrap().len() as u64;
    assert!(ok(dir.path(), &["journal", "checkpoints", &id]).contains("no checkpoints"));
    ok(dir.path(), &["journal", "checkpoint", &id, "--name", "start-of-review"]);
    assert!(ok(dir.path(), &["journal", "checkpoints", &id]).contains("start-of-review"));
    let cp = json(&ok(dir.path(), &["journal", "checkpoints", &id, "--json"]));
    assert_eq!(cp["checkpoints"][0]["seq"], head + 1);
    for to in ["HEAD", &(head + 1).to_string(), "start-of-review"] {
        let o = salvage(dir.path(), &["journal", "rewind", &id, "--to", to]);
        assert_eq!(o.status.code(), Some(2), "rewind to the head {to}");
        assert!(stderr(&o).contains("head"), "{}", stderr(&o));
    }
    ok(dir.path(), &["journal", "rewind", &id, "--to", "2"]);
    let log = json(&ok(dir.path(), &["journal", "log", &id, "--json"]));
    let abandoned: Vec<u64> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["abandoned"] == true)
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(abandoned, (3..=head + 1).collect::<Vec<_>>());
    assert!(ok(dir.path(), &["journal", "log", &id]).contains("abandoned branches"));
    ok(dir.path(), &["journal", "rewind", &id, "--to", "start-of-review"]);
    assert!(ok(dir.path(), &["journal", "checkpoints", &id]).contains("start-of-review"));

    // Diff: text and JSON.
    let d =
        json(&ok(dir.path(), &["journal", "diff", &id, "--from", "1", "--to", &head.to_string(), "--json"]));
    assert!(d["dropped"].as_array().unwrap().len() + d["stubbed"].as_array().unwrap().len() > 0, "{d}");
    assert!(d["bytes"][1].as_u64().unwrap() < d["bytes"][0].as_u64().unwrap());
    let text = ok(dir.path(), &["journal", "diff", &id, "--from", "1", "--to", "start-of-review"]);
    assert!(text.contains("dropped") && text.lines().any(|l| l.starts_with("- [")), "{text}");
    // Export at an event.
    let at1 = json(&ok(dir.path(), &["journal", "export", &id, "--at", "1"]));
    let atn = json(&ok(dir.path(), &["journal", "export", &id, "--at", &head.to_string()]));
    assert!(at1["history"].as_array().unwrap().len() > atn["history"].as_array().unwrap().len());
    let lines = ok(dir.path(), &["journal", "export", &id, "--format", "jsonl", "--at", "3"]);
    assert_eq!(lines.lines().count(), 3);

    // Filters.
    let f = json(&ok(dir.path(), &["journal", "sessions", "--json", "--outcome", "not_recoverable"]));
    assert!(f["sessions"].as_array().unwrap().iter().all(|s| s["outcome"] == "not_recoverable"));
    assert_eq!(f["sessions"].as_array().unwrap().len(), 1);
    let f = json(&ok(dir.path(), &["journal", "sessions", "--json", "--since", "1h", "--title", "KEEP"]));
    assert!(!f["sessions"].as_array().unwrap().is_empty());
    let f = json(&ok(dir.path(), &["journal", "sessions", "--json", "--since", "2999-01-01"]));
    assert!(f["sessions"].as_array().unwrap().is_empty());
    assert_eq!(
        salvage(dir.path(), &["journal", "sessions", "--outcome", "notrecoverable"]).status.code(),
        Some(2)
    );
    assert_eq!(
        salvage(dir.path(), &["journal", "sessions", "--since", "yesterday-ish"]).status.code(),
        Some(2)
    );
}

/// The text between the first pair of backticks of `line`: a printed copy-paste hint.
fn hint(line: &str) -> String {
    line.split('`').nth(1).unwrap_or_else(|| panic!("no hint in {line:?}")).to_string()
}

/// Runs a printed hint with `sh` in `dir`, `salvage` standing for a function that prints its
/// arguments one a line: the words the shell would have passed.
fn hint_words(dir: &Path, hint: &str) -> Vec<String> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("salvage() {{ printf '%s\\n' \"$@\"; }}\n{hint}"))
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{hint}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
}

/// Finding 12: the copy-paste hints of `journal checkpoint` and `journal checkpoints` quote the
/// session and the checkpoint name as the `rewind` hint does, so pasting one runs nothing else.
#[test]
fn checkpoint_hints_are_shell_quoted_like_the_rewind_hint() {
    let dir = tempfile::tempdir().unwrap();
    let mut c =
        json(&std::fs::read_to_string(root().join("testdata/corpus/axios-413-sentence.json")).unwrap());
    c["id"] = serde_json::json!("x$(touch PWNED)");
    std::fs::write(dir.path().join("inj.json"), c.to_string()).unwrap();
    ok(dir.path(), &["replay", "inj.json"]);
    let session = json(&ok(dir.path(), &["journal", "sessions", "--json"]))["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(session.starts_with("x$(touch PWNED)"), "{session}");

    let none = ok(dir.path(), &["journal", "checkpoints", "latest"]);
    let words = hint_words(dir.path(), &hint(&none));
    assert_eq!(words, ["journal", "checkpoint", &session, "--name", "NAME"], "{none}");

    let name = "cp;touch PWNED2";
    let made = ok(dir.path(), &["journal", "checkpoint", "latest", "--name", name]);
    let words = hint_words(dir.path(), &hint(&made));
    assert_eq!(words, ["journal", "rewind", &session, "--to", name], "{made}");

    let rewound = ok(dir.path(), &["journal", "rewind", "latest", "--to", "3"]);
    let words = hint_words(dir.path(), &hint(&rewound));
    assert_eq!(words[..3], ["journal", "rewind", session.as_str()], "{rewound}");
    assert!(!dir.path().join("PWNED").exists() && !dir.path().join("PWNED2").exists());
}

/// Ages too large for a time (finding 06): `now - age` used to panic inside chrono (exit 101);
/// now they are a usage error naming the option, and a large but representable age still works.
#[test]
fn ages_beyond_any_time_are_usage_errors_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    ok(dir.path(), &["replay", "corpus/auth-401.json"]);
    for (args, flag) in [
        (&["journal", "sessions", "--since", "99999999d"][..], "--since"),
        (&["journal", "sessions", "--since", "2400000000h"][..], "--since"),
        (&["journal", "sessions", "--since", "99999999999999d"][..], "--since"),
        (&["journal", "sessions", "--since", "9999999999999999999h"][..], "--since"),
        (&["journal", "prune", "--before", "99999999999d", "--dry-run"][..], "--before"),
    ] {
        let o = salvage(dir.path(), args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(flag) && e.contains("reaches back further"), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
    // 1000 years back is before every session: all of them are listed.
    let f = json(&ok(dir.path(), &["journal", "sessions", "--json", "--since", "365000d"]));
    assert_eq!(f["sessions"].as_array().unwrap().len(), 1, "{f}");
}

#[test]
fn delete_and_prune_whole_sessions_then_gc_evicts_their_blobs() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    ok(dir.path(), &["replay", "corpus"]);
    let before = ok(dir.path(), &["ccr", "stats", "--json"]);
    let entries = |s: &str| json(s)["entries"].as_u64().unwrap();
    let n0 = entries(&before);
    // Single events stay undeletable behind the triggers.
    let db = dir.path().join(".salvage/salvage.db");
    let j = salvage_journal::Journal::open(&db, &salvage_store::Options::default()).unwrap();
    assert!(j.conn().execute("DELETE FROM events WHERE seq = 2", []).is_err(), "append-only");
    drop(j);
    let d = json(&ok(dir.path(), &["journal", "delete", "rung3-keep", "--json"]));
    assert_eq!(d["sessions"].as_array().unwrap().len(), 1);
    assert!(d["unreferenced_blobs"].as_u64().unwrap() > 0, "{d}");
    assert_eq!(salvage(dir.path(), &["journal", "log", "rung3-keep"]).status.code(), Some(2));
    let dry = json(&ok(dir.path(), &["journal", "prune", "--outcome", "recovered", "--dry-run", "--json"]));
    assert_eq!(dry["sessions"].as_array().unwrap().len(), 2);
    ok(dir.path(), &["journal", "prune", "--outcome", "recovered", "--keep", "1"]);
    let left = json(&ok(dir.path(), &["journal", "sessions", "--json"]));
    assert_eq!(left["sessions"].as_array().unwrap().len(), 3);
    assert_eq!(salvage(dir.path(), &["journal", "prune"]).status.code(), Some(2), "a filter is required");
    ok(dir.path(), &["journal", "verify"]);
    let gc = json(&ok(dir.path(), &["ccr", "gc", "--max-age-days", "0", "--grace-secs", "0", "--json"]));
    assert!(gc["evicted"].as_u64().unwrap() > 0, "{gc}");
    assert!(entries(&ok(dir.path(), &["ccr", "stats", "--json"])) < n0);
    ok(dir.path(), &["ccr", "verify"]);
    ok(dir.path(), &["journal", "verify"]);
    // The remaining sessions still restore and their markers still resolve.
    ok(dir.path(), &["replay", "corpus/cap-only-tightens.json"]);
}

#[test]
fn conventions_completions_man_pipes_and_databases() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let s = ok(dir.path(), &["completions", shell]);
        assert!(s.contains("journal") && s.contains("--baseline"), "{shell}");
    }
    let man = ok(dir.path(), &["man"]);
    assert!(man.contains(".TH salvage") && man.contains("replay"));
    let pages = dir.path().join("man");
    std::fs::create_dir(&pages).unwrap();
    ok(dir.path(), &["man", "--dir", pages.to_str().unwrap()]);
    for page in ["salvage.1", "salvage-replay.1", "salvage-journal-diff.1", "salvage-report.1"] {
        assert!(std::fs::read_to_string(pages.join(page)).unwrap().contains(".TH"), "{page}");
    }
    // --db: no folder is created but .salvage/.
    let o = salvage(dir.path(), &["replay", "--no-journal", "x.json", "--db", "/nonexistent-salvage/x/y.db"]);
    assert_eq!(o.status.code(), Some(2));
    let capture = root().join("testdata/corpus/auth-401.json");
    let o =
        salvage(dir.path(), &["replay", capture.to_str().unwrap(), "--db", "/nonexistent-salvage/x/y.db"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent-salvage/x"), "{}", stderr(&o));
    assert!(!Path::new("/nonexistent-salvage").exists());
    // An empty SALVAGE_DB is unset.
    let o = cmd(dir.path(), &["replay", capture.to_str().unwrap()]).env("SALVAGE_DB", "").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join(".salvage/salvage.db").exists());
    // A closed pipe is a quiet exit 0.
    for args in [&["journal", "show", "latest"][..], &["journal", "log", "latest"], &["man"]] {
        let mut child = cmd(dir.path(), args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = [0u8; 1];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Waiting for standard input on a terminal says so (util-linux `script` gives it a terminal).
    if Path::new("/usr/bin/script").exists() {
        for sub in ["classify", "apply rung1"] {
            let o = Command::new("/usr/bin/script")
                .args(["-qec", &format!("{} {sub}", env!("CARGO_BIN_EXE_salvage")), "/dev/null"])
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("from standard input (end with Ctrl-D"), "{sub}: {text}");
        }
        let o = salvage(dir.path(), &["classify"]);
        assert!(!stderr(&o).contains("Ctrl-D"), "no hint when stdin is not a terminal");
    }
    // generate --size 10MB, as in the README.
    let big = dir.path().join("big.json");
    ok(dir.path(), &["generate", "--size", "10MB", "--seed", "7", "-o", big.to_str().unwrap()]);
    assert!(std::fs::metadata(&big).unwrap().len() > 10_000_000);
    // apply: no "via LLM" for the built-in summarizer; a failing command summarizer is said.
    let rung2 = root().join("testdata/corpus/rung2-many-small-turns.json");
    let o = salvage(
        dir.path(),
        &["apply", "compact", "--budget", "20KB", "--summarizer", "builtin", rung2.to_str().unwrap()],
    );
    assert!(o.status.success());
    assert!(!stderr(&o).contains("via LLM") && stderr(&o).contains("builtin summarizer"), "{}", stderr(&o));
    let o = salvage(
        dir.path(),
        &["apply", "compact", "--budget", "20KB", "--summarizer", "cmd:/bin/false", rung2.to_str().unwrap()],
    );
    assert!(stderr(&o).contains("summarizer cmd:/bin/false attempt 1 failed"), "{}", stderr(&o));
}
