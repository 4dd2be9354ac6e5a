//! Locks the JSON shape of every event kind: a change to a persisted format shows in review as a
//! change to `snapshots/events.json` (regenerate with `SALVAGE_UPDATE_SNAPSHOTS=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_types::class::ErrorClass;
use salvage_types::event::{Cost, EventBody, StepOutcome, Trigger};
use std::collections::BTreeMap;

fn one_of_each() -> Vec<EventBody> {
    let settings: BTreeMap<String, String> = [("CHATCLI_MAX_PAYLOAD".to_string(), "5MB".to_string())].into();
    vec![
        EventBody::SessionStarted {
            provider: Some("bedrock".into()),
            model: Some("claude".into()),
            context_window: Some(200_000),
            settings,
            cap: Some(5_242_880),
            invalid_settings: vec![salvage_types::event::InvalidSetting {
                name: "CHATCLI_MAX_RECOVERY_ATTEMPTS".into(),
                raw: "abc".into(),
                why: "\"abc\" is not a positive integer; using 3".into(),
            }],
            request: Some(Box::new(salvage_types::capture::Request {
                format: salvage_types::capture::RequestFormat::Anthropic,
                bytes: Some(129_434),
                fields:
                    serde_json::json!({"max_tokens": 4096, "temperature": 0.2, "metadata": {"user_id": "u1"}})
                        .as_object()
                        .cloned()
                        .unwrap(),
            })),
        },
        EventBody::MessageAppended { count: 2 },
        EventBody::RequestSent {
            attempt: 0,
            bytes: 129_434,
            estimated_tokens: 30_000,
            real_tokens: Some(31_000),
            history_digest: "d74981efa70a0c88".into(),
            accepted: false,
        },
        EventBody::ProviderError {
            status: Some(403),
            message: "blocked".into(),
            transport: None,
            rejected_bytes: Some(129_434),
            class: ErrorClass::WafRejection,
            reason: "403 + firewall signal 'waf'".into(),
        },
        EventBody::RecoveryAttempt {
            attempt: 1,
            rung: 1,
            outcome: StepOutcome::Applied,
            before_bytes: 10,
            after_bytes: 5,
            before_messages: 4,
            after_messages: 3,
            archived: vec!["d74981efa70a0c88".into()],
        },
        EventBody::CapLearned { cap: 97_075, previous: None, rejected: Some(129_434), message: "cap".into() },
        EventBody::FloorDiagnosis {
            verdict: salvage_types::event::FloorVerdict::Ok,
            floor_bytes: 100,
            rejected: 1000,
            parts: [
                ("system_prompt".to_string(), 60),
                ("tool_definitions_and_envelope".to_string(), 30),
                ("task".to_string(), 10),
            ]
            .into(),
        },
        EventBody::NoticeInjected {},
        EventBody::Microcompact { truncated: 3, summarized: 2, freed_bytes: 1_700_000 },
        EventBody::Dedup { stubbed: 1, freed_bytes: 10 },
        EventBody::Preflight {
            history_bytes: 4_500_000,
            cap: Some(5_000_000),
            forced_ratio_percent: Some(40),
            warn_no_cap: false,
        },
        EventBody::SkillAging { collapsed: 1 },
        EventBody::Compaction {
            trigger: Trigger::Recovery,
            level: 3,
            outcome: StepOutcome::Skipped,
            backoff_skip: false,
            route: Some("builtin".into()),
            cost: Cost { calls: 1, input_tokens: 2, output_tokens: 3 },
            by: None,
            pre_tokens: None,
            archived: None,
        },
        EventBody::SummaryAttempt { attempt: 1, passed: false, reason: Some("empty".into()), chars: 0 },
        EventBody::ContextEdit { cleared_tool_uses: 4, cleared_tokens: 20_000, stubs: 4 },
        EventBody::TokenEscalation { from: 4096, to: 8192, used: 1 },
        EventBody::HookFired {
            name: "notify".into(),
            event: "PostCompact".into(),
            outcome: StepOutcome::Failed,
            error: Some("timeout".into()),
            millis: 10_000,
        },
        EventBody::Checkpoint { name: "before-refactor".into() },
        EventBody::Rewind { target: 7, reason: "undo".into() },
        EventBody::Redaction {
            keys: vec!["ab".repeat(32)],
            counts: [("aws_access_key".to_string(), 1u64)].into(),
        },
        EventBody::ResponseReceived {
            stop_reason: salvage_types::capture::StopReason::EndTurn,
            output_tokens: Some(12),
        },
        EventBody::RunEnded { outcome: salvage_types::capture::Outcome::Recovered },
    ]
}

/// Samples of the fields a later kind version added (appended after `one_of_each`).
fn later_versions() -> Vec<EventBody> {
    vec![EventBody::Compaction {
        trigger: Trigger::Auto,
        level: 2,
        outcome: StepOutcome::Applied,
        backoff_skip: false,
        route: None,
        cost: Cost::default(),
        by: Some("claude-code".into()),
        pre_tokens: Some(150_000),
        archived: Some("d74981efa70a0c88".into()),
    }]
}

fn expected_version(kind: &str) -> u32 {
    match kind {
        "session_started" => 4,
        "floor_diagnosis" | "compaction" => 2,
        _ => 1,
    }
}

/// Every kind `EventBody` deserializes, from serde's own list of its variants (the error for an
/// unknown kind names them all), so a variant added to the enum is in it without anyone
/// remembering to list it.
fn kinds_serde_knows() -> Vec<String> {
    let err = serde_json::from_str::<EventBody>(r#"{"kind":"-no-such-kind-"}"#).unwrap_err().to_string();
    let list = err.split_once("expected one of ").map(|(_, l)| l).unwrap_or_else(|| panic!("{err}"));
    let names: Vec<String> = list.split('`').skip(1).step_by(2).map(str::to_string).collect();
    assert!(!names.is_empty(), "{err}");
    names
}

/// The kinds of `known` with no sample in `samples`.
fn kinds_without_a_sample(samples: &[EventBody], known: &[String]) -> Vec<String> {
    known.iter().filter(|k| !samples.iter().any(|e| e.kind() == k.as_str())).cloned().collect()
}

#[test]
fn every_kind_of_the_enum_has_a_sample() {
    let known = kinds_serde_knows();
    assert_eq!(
        kinds_without_a_sample(&one_of_each(), &known),
        Vec::<String>::new(),
        "add a sample to one_of_each"
    );
    assert_eq!(known, EventBody::KINDS, "EventBody::KINDS lists every variant, in declaration order");
    // The check fails when a kind has no sample.
    let mut fewer = one_of_each();
    fewer.retain(|e| e.kind() != "rewind");
    assert_eq!(kinds_without_a_sample(&fewer, &known), vec!["rewind".to_string()]);
}

#[test]
fn every_kind_has_a_locked_shape() {
    let events = one_of_each();
    let mut kinds: Vec<&str> = events.iter().map(EventBody::kind).collect();
    kinds.dedup();
    assert_eq!(kinds.len(), events.len(), "one sample per kind");
    assert_eq!(kinds, kinds_serde_knows(), "a sample for every kind of the vocabulary, in order");
    let mut rendered = String::new();
    for e in events.iter().chain(&later_versions()) {
        let json = serde_json::to_value(e).unwrap();
        assert_eq!(json["kind"], e.kind(), "the kind field is the kind's name");
        assert_eq!(e.kind_version(), expected_version(e.kind()), "{}", e.kind());
        let back: EventBody = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(&back, e, "{} round-trips", e.kind());
        rendered.push_str(&serde_json::to_string(&json).unwrap());
        rendered.push('\n');
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/events.jsonl");
    if std::env::var_os("SALVAGE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let locked =
        std::fs::read_to_string(&path).expect("snapshot exists (SALVAGE_UPDATE_SNAPSHOTS=1 writes it)");
    assert_eq!(
        rendered, locked,
        "an event's JSON shape changed: bump its kind_version and update the snapshot"
    );
}

#[test]
fn a_version_1_compaction_still_reads() {
    let v1 = r#"{"kind":"compaction","trigger":"auto","level":2,"outcome":"applied","backoff_skip":false,"route":null,"cost":{"calls":0,"input_tokens":0,"output_tokens":0}}"#;
    let e: EventBody = serde_json::from_str(v1).unwrap();
    assert!(matches!(e, EventBody::Compaction { by: None, pre_tokens: None, archived: None, .. }));
    assert_eq!(serde_json::to_string(&e).unwrap(), v1, "a version-1 body keeps its bytes");
}

#[test]
fn unknown_kind_and_unknown_field_are_refused() {
    assert!(serde_json::from_str::<EventBody>(r#"{"kind":"teleport"}"#).is_err());
    assert!(serde_json::from_str::<EventBody>(r#"{"kind":"checkpoint","name":"x","extra":1}"#).is_err());
}

/// Found by the `events` fuzz target (fuzz/artifacts/events/crash-7d56d3d2…): a session start
/// whose request part holds long decimal numbers read back as other numbers after one write,
/// because serde_json's default float parsing is not correctly rounded. The workspace enables
/// `float_roundtrip`, so a request's numbers survive the journal exactly.
#[test]
fn long_decimals_in_a_request_part_read_back_as_written() {
    let data = include_bytes!("fuzz/events-float-roundtrip.json");
    let e: EventBody = serde_json::from_slice(data).unwrap();
    let again: EventBody = serde_json::from_slice(&serde_json::to_vec(&e).unwrap()).unwrap();
    assert_eq!(again, e);
}
