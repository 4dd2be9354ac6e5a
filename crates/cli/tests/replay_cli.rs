//! `salvage replay` end to end: the corpus is green, a broken ladder is caught, the journal of a
//! run restores at every event, `--bless`, `--jobs`, `--json` and bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::{corpus, salvage};

use salvage_journal::Journal;
use salvage_store::Options;
use std::path::Path;

fn strip_sessions(mut v: serde_json::Value) -> serde_json::Value {
    for c in v["captures"].as_array_mut().unwrap() {
        c["session"] = serde_json::Value::Null;
    }
    v
}

#[test]
fn the_corpus_replays_green_and_its_journal_restores_at_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let o = salvage(dir.path(), &["replay", c.to_str().unwrap(), "--json", "--jobs", "2"]);
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = v["captures"].as_array().unwrap().len();
    assert!(n >= 60, "{n} captures");
    // Every capture asserts the path its title names with the events it must journal.
    for f in std::fs::read_dir(&c).unwrap().map(|e| e.unwrap().path()) {
        if f.extension().is_some_and(|e| e == "json") {
            let cap: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
            let events = cap["expect"]["events"].as_array().map_or(0, Vec::len);
            assert!(events > 0, "{}: no expect.events", f.display());
        }
    }
    assert_eq!(v["summary"]["passed"], n);
    for cap in v["captures"].as_array().unwrap() {
        assert_eq!(cap["expect_met"], true, "{}", cap["id"]);
        assert!(cap["checks"].as_array().unwrap().iter().all(|c| c["ok"] == true));
        assert!(!cap["request_bytes"].as_array().unwrap().is_empty());
    }
    // Every run is a journal session; the journal verifies and restores at every event.
    let db = dir.path().join(".salvage/salvage.db");
    assert!(salvage(dir.path(), &["journal", "verify"]).status.success());
    let j = Journal::open(&db, &Options::default()).unwrap();
    let sessions = j.sessions().unwrap();
    assert_eq!(sessions.len(), n);
    for s in sessions.iter().filter(|s| {
        s.id.starts_with("rung3-keep-four")
            || s.id.starts_with("gateway-waf-html")
            || s.id.starts_with("recorded-summary")
    }) {
        let mut prev: Option<Vec<salvage_types::Message>> = None;
        for e in j.events(&s.id, 0, 10_000).unwrap() {
            let h = j.view_at(&s.id, e.seq).unwrap().history;
            if let (None, Some(p)) = (&e.delta, &prev) {
                assert_eq!(&h, p, "{} event {}: no delta, no change", s.id, e.seq);
            }
            prev = Some(h);
        }
    }
    // Every event kind of the vocabulary is produced by some capture of the corpus, except the ones
    // only a person, a library user or a live session produces.
    const NOT_FROM_A_REPLAY: &[(&str, &str)] = &[
        (
            "message_appended",
            "appended by library users and live sessions between turns; a replay is one turn",
        ),
        (
            "hook_fired",
            "hooks are configured on a person's machine (.chatcli/hooks.json); a replay runs none",
        ),
        ("checkpoint", "named by a person (journal checkpoint)"),
        ("rewind", "asked for by a person (journal rewind)"),
        ("redaction", "recorded by ccr redact, a person's command"),
    ];
    let mut seen = std::collections::BTreeMap::<String, u64>::new();
    for s in &sessions {
        for e in j.events(&s.id, 0, usize::MAX).unwrap() {
            *seen.entry(e.kind).or_default() += 1;
        }
    }
    for kind in salvage_types::event::EventBody::KINDS {
        let exempt = NOT_FROM_A_REPLAY.iter().any(|(k, _)| k == kind);
        assert!(exempt || seen.contains_key(*kind), "no corpus capture produces a {kind} event: {seen:?}");
    }
    let log = String::from_utf8(salvage(dir.path(), &["journal", "log", &sessions[0].id]).stdout).unwrap();
    assert!(log.contains("session_started") && log.contains("request_sent"), "{log}");
    // --jobs 2 and --jobs 1 report the same, in the same order.
    let o1 = salvage(dir.path(), &["replay", c.to_str().unwrap(), "--json", "--no-journal"]);
    let v1: serde_json::Value = serde_json::from_slice(&o1.stdout).unwrap();
    assert_eq!(strip_sessions(v1), strip_sessions(v.clone()));
}

#[test]
fn a_broken_ladder_fails_the_replay_naming_captures_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let o = salvage(dir.path(), &["replay", c.to_str().unwrap(), "--no-journal", "--fault-rung3-keep", "40"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("rung3-keep-four (")
            && text.contains("✖ expect outcome: expected recovered, got exhausted"),
        "{text}"
    );
    assert!(text.contains("captures:") && text.contains("failed"));
}

#[test]
fn bless_records_the_observed_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(corpus().join("gateway-http413-reported.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    v.as_object_mut().unwrap().remove("expect");
    let f = dir.path().join("c.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal", "--bless"]);
    assert!(o.status.success());
    let blessed: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(blessed["expect"]["outcome"], "recovered");
    assert_eq!(blessed["expect"]["level"], 2);
    assert_eq!(blessed["expect"]["notice_injected"], true);
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["captures"][0]["expect_met"], true);
}

#[test]
fn bless_over_a_stale_expectation_passes_and_keeps_what_changed_but_not_unmet_expected_events() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(corpus().join("gateway-http413-reported.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    // A stale expectation: the outcome changed since it was recorded.
    v["expect"]["outcome"] = "exhausted".into();
    let f = dir.path().join("c.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal"]);
    assert_eq!(o.status.code(), Some(1), "the stale expectation fails a plain run");
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal", "--bless", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["captures"][0]["expect_met"], true);
    let messages = r["captures"][0]["messages"].to_string();
    assert!(messages.contains("blessed (was: outcome: expected exhausted, got recovered)"), "{messages}");
    let blessed: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(blessed["expect"]["outcome"], "recovered");
    assert_eq!(blessed["expect"]["events"], v["expect"]["events"], "the hand-written events are kept");
    // An expected event the run does not produce is not something --bless can record: it fails.
    v["expect"]["events"][1]["min"] = 5.into();
    std::fs::write(&f, v.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal", "--bless", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stdout));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["captures"][0]["expect_met"], false);
    let diffs = r["captures"][0]["expect_diffs"].to_string();
    assert!(diffs.contains("cap_learned"), "{diffs}");
}

/// The tool results of a session's history, as the last session in the database holds them.
fn exported_tool_results(dir: &Path) -> Vec<String> {
    let o = salvage(dir, &["journal", "export", "latest", "--db", "m.db", "-o", "out.json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("out.json")).unwrap()).unwrap();
    let history = c["history"].as_array().unwrap();
    history
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_stub_of_a_preview_counts_the_original_the_databases_archive_holds() {
    // Session 1 previews tool results (age 2-3) and archives their 6 000-char originals in the
    // database's CCR; its exported history carries the previews with their markers.
    let dir = tempfile::tempdir().unwrap();
    let first = corpus().join("microcompact-old-results.json");
    assert!(salvage(dir.path(), &["replay", first.to_str().unwrap(), "--db", "m.db"]).status.success());
    let before = exported_tool_results(dir.path());
    let previews: Vec<&String> =
        before.iter().filter(|t| t.contains("[full content recoverable via @recall <<ccr:")).collect();
    assert!(!previews.is_empty(), "session 1 left previews: {before:?}");
    assert!(previews.iter().all(|p| p.chars().count() < 6000));
    // Session 2 replays that history in the same database with stubbing from age 2: each preview
    // becomes a stub, counted from the original (6 000 chars), not from the preview.
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    c["id"] = "stubs-of-previews".into();
    c["settings"]["CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS"] = "2".into();
    c.as_object_mut().unwrap().remove("expect");
    std::fs::write(dir.path().join("again.json"), c.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "again.json", "--db", "m.db"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let after = exported_tool_results(dir.path());
    for p in previews {
        let marker = &p[p.rfind("<<ccr:").unwrap()..p.rfind(">>").unwrap() + 2];
        let stub = after.iter().find(|t| t.contains(marker)).expect("the preview's marker stays");
        assert!(stub.starts_with("[Old tool result cleared"), "stubbed: {stub}");
        assert!(stub.contains(", 6000 chars,"), "counted from the original: {stub}");
    }
}

#[test]
fn bless_keeps_the_hand_written_expected_events() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(corpus().join("floor-warn-then-recover.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    let events = v["expect"]["events"].clone();
    assert!(events.as_array().is_some_and(|e| !e.is_empty()), "the capture has expected events");
    // A stale outcome the bless must correct, beside events it must not touch.
    v["expect"]["outcome"] = "exhausted".into();
    let f = dir.path().join("c.json");
    std::fs::write(&f, v.to_string()).unwrap();
    // The run writes the observed outcome, is judged against it (exit 0), and lists what the
    // stale expectation said, for review.
    let o = salvage(dir.path(), &["replay", "c.json", "--no-journal", "--bless"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("blessed (was: outcome: expected exhausted, got recovered)"), "{text}");
    assert!(!text.contains("✖"), "{text}");
    let blessed: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(blessed["expect"]["outcome"], "recovered");
    assert_eq!(blessed["expect"]["events"], events, "bless writes outcome fields only");
    let again = salvage(dir.path(), &["replay", "c.json", "--db", "b.db"]);
    assert!(again.status.success(), "the blessed capture passes: {}", String::from_utf8_lossy(&again.stdout));
}

#[test]
fn unreadable_captures_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.json"), r#"{"format":"salvage.capture/2","id":"x"}"#).unwrap();
    let o = salvage(dir.path(), &["replay", "bad.json"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.json: format: unknown capture format \"salvage.capture/2\""));
    assert!(!dir.path().join(".salvage").exists(), "nothing written");
    let o = salvage(dir.path(), &["replay", "missing-dir"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ccr_redaction_is_recorded_in_the_sessions_that_reference_the_blob() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus().join("rung2-many-small-turns.json");
    assert!(salvage(dir.path(), &["replay", c.to_str().unwrap()]).status.success());
    let db = dir.path().join(".salvage/salvage.db");
    let j = Journal::open(&db, &Options::default()).unwrap();
    let session = j.sessions().unwrap()[0].id.clone();
    let key: Vec<u8> =
        j.conn().query_row("SELECT blob_key FROM event_blobs LIMIT 1", [], |r| r.get(0)).unwrap();
    drop(j);
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let o = salvage(dir.path(), &["ccr", "redact", &hex]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("recorded in 1 journal session(s)"));
    let log = String::from_utf8(salvage(dir.path(), &["journal", "log", &session, "--json"]).stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&log).unwrap();
    assert_eq!(v["events"].as_array().unwrap().last().unwrap()["kind"], "redaction");
    assert!(salvage(dir.path(), &["journal", "verify"]).status.success(), "the chain stays valid");
    let o = salvage(dir.path(), &["recall", &hex[..16]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("redacted"));
}

/// Left from the first review: a capture's invalid `CHATCLI_*` value was replaced by its default
/// and said only in `--json`; the table a person reads said nothing.
#[test]
fn an_invalid_setting_of_a_capture_is_said_under_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(corpus().join("auth-401.json")).unwrap()).unwrap();
    c["settings"]["CHATCLI_MAX_PAYLOAD"] = "abc".into();
    std::fs::write(dir.path().join("bad-setting.json"), c.to_string()).unwrap();
    let o = salvage(dir.path(), &["replay", "bad-setting.json", "--no-journal"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("invalid setting CHATCLI_MAX_PAYLOAD=\"abc\""), "{text}");
    assert!(text.contains("no cap is set"), "the default that stood in is said: {text}");
    // And in the JUnit report a CI reads.
    let o = salvage(dir.path(), &["replay", "bad-setting.json", "--no-journal", "--junit", "j.xml"]);
    assert!(o.status.code().is_some());
    let xml = std::fs::read_to_string(dir.path().join("j.xml")).unwrap();
    assert!(xml.contains("invalid setting CHATCLI_MAX_PAYLOAD=&quot;abc&quot;"), "{xml}");
}
