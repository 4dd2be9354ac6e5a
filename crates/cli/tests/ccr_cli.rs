//! `salvage ccr` and `salvage recall` end to end on a real database file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::salvage;

use std::process::Command;

#[test]
fn put_then_recall_every_marker_form() {
    let dir = tempfile::tempdir().unwrap();
    let original = "fn main() {\n    println!(\"olá — 世界\");\n}\n".repeat(200);
    std::fs::write(dir.path().join("f.rs"), &original).unwrap();
    let o = salvage(dir.path(), &["ccr", "put", "f.rs"]);
    assert!(o.status.success());
    let marker = String::from_utf8(o.stdout).unwrap().trim().to_string();
    assert!(marker.starts_with("<<ccr:") && marker.ends_with(">>") && marker.len() == 24, "{marker}");
    assert!(dir.path().join(".salvage/salvage.db").exists(), "default database created on first use");
    let key = &marker[6..22];
    for form in [
        marker.clone(),
        format!("ccr:{key}"),
        key.to_uppercase(),
        format!("<< ccr: {key} >>"),
        format!("{{\"key\":\"{key}\"}}"),
    ] {
        let o = salvage(dir.path(), &["recall", &form]);
        assert!(o.status.success(), "{form}");
        assert_eq!(o.stdout, original.as_bytes(), "{form}: original bytes unchanged");
    }
    // Several keys: labelled sections, the missing one said so, exit 1.
    let o = salvage(dir.path(), &["recall", &marker, "ccr:0123012301230123"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains(&format!("=== {marker} (")));
    assert!(text.contains("[not found — expired or evicted from the local store]"));
    // A malformed key explains itself with exit 2.
    let o = salvage(dir.path(), &["recall", "abc123"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("16 hex characters"));
}

#[test]
fn stats_verify_gc_redact() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.txt"),
        "secret sk-ant-api03-XXXXXXXXXXXXXXXXXXXX in a tool result ".repeat(50),
    )
    .unwrap();
    let marker = String::from_utf8(salvage(dir.path(), &["ccr", "put", "a.txt"]).stdout).unwrap();
    let o = salvage(dir.path(), &["ccr", "stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entries"], 1);
    assert!(v["ratio"].as_f64().unwrap() > 2.0);
    assert!(salvage(dir.path(), &["ccr", "verify"]).status.success());
    // Tamper with the stored bytes: verify exits 1 naming the key; recall refuses.
    let db = dir.path().join(".salvage/salvage.db");
    zero_stored_bytes(&db);
    let o = salvage(dir.path(), &["ccr", "verify", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bad"].as_array().unwrap().len(), 1);
    let o = salvage(dir.path(), &["recall", marker.trim()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "corrupt content is never printed");
    // gc with a young blob deletes nothing; redaction keeps the key.
    let o = salvage(dir.path(), &["ccr", "gc", "--max-bytes", "1B", "--json"]);
    assert!(o.status.success());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["evicted"], 0);
    assert_eq!(salvage(dir.path(), &["ccr", "gc"]).status.code(), Some(2));
    assert!(salvage(dir.path(), &["ccr", "redact", marker.trim()]).status.success());
    let o = salvage(dir.path(), &["recall", marker.trim()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("redacted"));
    // Commands that read refuse a missing database instead of creating one.
    let o = salvage(dir.path(), &["ccr", "stats", "--db", "nope.db"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.path().join("nope.db").exists());
}

/// Overwrites the stored bytes with zeros using the sqlite3 tool, as an attacker or a bad disk would.
fn zero_stored_bytes(db: &std::path::Path) {
    let status = Command::new("sqlite3")
        .arg(db)
        .arg("UPDATE ccr_blobs SET data = CAST(zeroblob(length(data)) AS BLOB);")
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => panic!("the sqlite3 tool is needed (CI installs it)"),
    }
}

/// Finding 10 (recall): a blob over SALVAGE_MAX_RECALL is refused from its recorded length
/// before its content is read: with the content gone from the database, recall still says the
/// size is over the limit (it used to load and decode the blob first, and report it corrupt).
#[test]
fn recall_refuses_a_blob_over_the_limit_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), "x".repeat(8192)).unwrap();
    let o = salvage(dir.path(), &["ccr", "put", "big.txt"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let marker = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let db = dir.path().join(".salvage/salvage.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE ccr_blobs SET data = NULL", []).unwrap();
    drop(conn);
    let o = common::cmd(dir.path(), &["recall", &marker]).env("SALVAGE_MAX_RECALL", "4KB").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("over the 4.0 KB limit (SALVAGE_MAX_RECALL)") && !err.contains("corrupt"), "{err}");
    assert!(o.stdout.is_empty());
}

/// Review (second pass): `ccr redact` of a blob that holds a journal message (a message over
/// the inline size lives in CCR) cleared the message's only copy: the sessions holding it could
/// no longer restore, the command said "recorded in 0 journal session(s)", and a later `journal
/// redact` of the message failed. It is refused, pointing at `journal redact`.
#[test]
fn redacting_a_blob_that_holds_a_journal_message_is_refused_with_the_way_that_works() {
    let dir = tempfile::tempdir().unwrap();
    let capture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus/giant-tool-result.json");
    let o = salvage(dir.path(), &["replay", capture.to_str().unwrap(), "--db", "j.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("sqlite3")
        .arg(dir.path().join("j.db"))
        .arg("SELECT hex(ccr_key), hex(hash) FROM messages WHERE ccr_key IS NOT NULL LIMIT 1")
        .output()
        .expect("the sqlite3 tool is installed (CI installs it)");
    let row = String::from_utf8(o.stdout).unwrap().trim().to_lowercase();
    let (key, hash) = row.split_once('|').expect("the capture stores a message in CCR");
    let o = salvage(dir.path(), &["ccr", "redact", key, "--db", "j.db"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(hash) && err.contains("salvage journal redact"), "{err}");
    // Nothing changed: the message still restores and the journal verifies.
    let o = salvage(dir.path(), &["recall", &key[..16], "--db", "j.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(salvage(dir.path(), &["journal", "verify", "--db", "j.db"]).status.success());
    // The way it points at works, and a message stored once for two sessions is recorded as
    // redacted in both (a second replay of the capture shares it).
    let o = salvage(dir.path(), &["replay", capture.to_str().unwrap(), "--db", "j.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&salvage(dir.path(), &["ccr", "redact", key, "--db", "j.db"]).stderr)
        .to_string();
    let cmd = err.split('`').nth(1).expect("the command to run").to_string();
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let mut with_db = args.clone();
    with_db.extend(["--db", "j.db"]);
    let o = salvage(dir.path(), &with_db);
    assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("also recorded in 1 other session(s)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = salvage(dir.path(), &["journal", "sessions", "--json", "--db", "j.db"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for s in v["sessions"].as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        let log =
            String::from_utf8_lossy(&salvage(dir.path(), &["journal", "log", id, "--db", "j.db"]).stdout)
                .to_string();
        assert!(log.contains("redaction"), "{id}: {log}");
    }
    assert!(salvage(dir.path(), &["journal", "verify", "--db", "j.db"]).status.success());
    // Two keys at once are said to be two, not a malformed one.
    let o = salvage(
        dir.path(),
        &["ccr", "redact", &format!("ccr:{} ccr:0123456789abcdef", &key[..16]), "--db", "j.db"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("2 keys given"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A dry run of gc reads through a read-only connection.
    let o = salvage(dir.path(), &["ccr", "gc", "--max-age-days", "0", "--dry-run", "--db", "j.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("would evict"));
}
