//! The replay's checks, each shown failing on the input meant to break it, and the turn rules of
//! the guarantees (no identical retry, as-sent attempt 0) through the real driver and journal.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_journal::Journal;
use salvage_recovery::compaction::NoHooks;
use salvage_recovery::summarizer::Builtin;
use salvage_replay::checks::{run_checks, Check};
use salvage_replay::driver::{replay, Options, Run};
use salvage_types::capture::{read_capture, Capture, Gateway, RejectStyle, Request, RequestFormat};
use salvage_types::{FixedClock, Message, ToolCall};

fn corpus(id: &str) -> Capture {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../testdata/corpus/{id}.json"));
    read_capture(&p).unwrap()
}

/// The runs' clock, at their start.
static CLOCK: FixedClock = FixedClock::at_ms(1_700_000_000_000);

fn run(capture: &Capture, journal: &mut Journal) -> Run {
    let mut s = Builtin;
    let mut h = NoHooks;
    let opts = Options {
        summarizer: &mut s,
        hooks: &mut h,
        start: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        session: format!("t-{}", capture.id),
        rung3_keep: salvage_recovery::ladder::RUNG3_KEEP,
        clock: &CLOCK,
    };
    replay(capture, journal, opts).unwrap()
}

fn get<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("check {name}"))
}

#[test]
fn recoverable_fails_when_a_message_is_lost() {
    let c = corpus("gateway-http413-reported");
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "recoverable").ok);
    // A history that silently dropped a tool result (never archived) is caught.
    let victim = c.history.iter().rposition(|m| m.role == salvage_types::Role::Tool).unwrap();
    let lost = c.history[victim].content.clone();
    r.history.retain(|m| m.content != lost);
    r.history.push(Message::user(lost[..lost.len() / 2].to_string()));
    let checks = run_checks(&r, &c, &j, 3, &CLOCK);
    let rec = get(&checks, "recoverable");
    assert!(!rec.ok, "{}", rec.detail);
    assert!(rec.detail.contains(&format!("input message {victim}")), "{}", rec.detail);
}

#[test]
fn recoverable_fails_when_a_sent_marker_is_referenced_by_no_event() {
    let c = corpus("gateway-http413-reported");
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    // A blob in the archive that no event references, whose marker the model was sent: retention
    // could evict it.
    let key = salvage_ccr::Ccr::new(j.conn(), &CLOCK).put(b"an orphan blob").unwrap().key;
    r.sent.last_mut().unwrap().markers.push(key.short());
    let checks = run_checks(&r, &c, &j, 3, &CLOCK);
    let rec = get(&checks, "recoverable");
    assert!(!rec.ok && rec.detail.contains("referenced by no event"), "{}", rec.detail);
}

#[test]
fn fidelity_fails_when_the_replayed_size_is_not_the_size_as_sent() {
    let mut c = corpus("gateway-http413-reported");
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let first = r.sent[0].bytes;
    c.request =
        Some(Request { format: RequestFormat::Anthropic, bytes: Some(first), fields: Default::default() });
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "fidelity").ok);
    c.request = Some(Request {
        format: RequestFormat::Anthropic,
        bytes: Some(first + 1),
        fields: Default::default(),
    });
    let f = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(!get(&f, "fidelity").ok, "{}", get(&f, "fidelity").detail);
}

#[test]
fn fidelity_fails_when_the_gateway_must_reject_but_the_replay_accepts() {
    // The request as sent was 331 KB; the replay weighs a few KB and the gateway accepts it.
    let mut c = corpus("gateway-http413-reported");
    c.history.truncate(2);
    c.failure.rejected_request_bytes = None;
    c.upstream.gateway = Some(Gateway {
        max_body_bytes: Some(131_072),
        rejects_with: RejectStyle::Http413,
        reports_request_size: false,
    });
    c.request =
        Some(Request { format: RequestFormat::Anthropic, bytes: Some(331_000), fields: Default::default() });
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let f = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(!get(&f, "fidelity").ok, "{}", get(&f, "fidelity").detail);
}

#[test]
fn attempt_zero_is_the_request_as_captured() {
    // A captured request with a 60 KB tool result (over the 20 000-char budget) and an orphan
    // result: attempt 0 sends it exactly — no budget, no pairing repair.
    let mut c = corpus("gateway-http413-reported");
    let mut call = Message::assistant("");
    call.tool_calls.push(ToolCall {
        id: "big".into(),
        kind: "function".into(),
        name: "read_file".into(),
        arguments: serde_json::json!({"path": "big.log"}),
    });
    c.history.push(call);
    c.history.push(Message::tool("big", "x".repeat(60_000)));
    c.history.push(Message::tool("nobody", "orphan"));
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert!(r.sent[0].as_sent);
    let head = j.view_at(&r.session, 1).unwrap().history;
    assert_eq!(head, c.history, "the journal starts from the capture's history");
    let expected = salvage_replay::driver::body_bytes(&c, &c.history, 8_192, false);
    assert_eq!(r.sent[0].bytes, expected, "attempt 0 weighs the captured history, unbudgeted");
}

#[test]
fn no_identical_request_is_ever_resent() {
    // Nothing left to compact and a huge attempts setting: every rung is a no-op on the request,
    // so nothing is re-sent; after rung 3, the last rung, is a no-op nothing can change the
    // request, and the climb ends there instead of counting through the 997 attempts left.
    let mut c = corpus("gateway-http413-reported");
    c.history = vec![Message::system("s".repeat(200)), Message::user("fix the flaky test")];
    c.settings.insert("CHATCLI_MAX_RECOVERY_ATTEMPTS".into(), "1000".into());
    c.failure = salvage_types::capture::Failure {
        status: Some(400),
        message: "prompt is too long: 300000 tokens > 200000 maximum".into(),
        transport: None,
        rejected_request_bytes: None,
    };
    c.upstream.gateway = None;
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert_eq!(
        r.sent.len(),
        1,
        "only the captured request was sent: {:?}",
        r.sent.iter().map(|s| s.bytes).collect::<Vec<_>>()
    );
    assert_eq!(r.outcome, salvage_types::capture::Outcome::Exhausted);
    assert_eq!(r.attempts, 3, "one no-op attempt per rung, then the climb ends");
}

#[test]
fn expected_events_are_counted_in_the_journal() {
    let mut c = corpus("floor-warn-then-recover");
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let expect = c.expect.clone().unwrap();
    assert!(salvage_replay::checks::compare(&expect, &r, &j).0, "the corpus expectation holds");
    // The same run judged against expectations it does not meet.
    let mut wrong = expect.clone();
    wrong.events[0].fields.insert("verdict".into(), serde_json::json!("fail_fast"));
    let (met, diffs) = salvage_replay::checks::compare(&wrong, &r, &j);
    assert!(!met && diffs[0].contains("floor_diagnosis"), "{diffs:?}");
    let mut unknown = expect.clone();
    unknown.events[0].kind = "teleport".into();
    assert!(!salvage_replay::checks::compare(&unknown, &r, &j).0);
    c.expect = None;
}

#[test]
fn a_mirror_that_stubs_other_results_than_the_provider_cleared_is_caught() {
    let c = corpus("context-editing-provider");
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "context_edit").ok);
    assert_eq!(r.provider_cleared.len(), 35);
    // A wrong product rule (mirroring the newest results instead of the oldest) leaves other
    // results stubbed than the ones the simulated server cleared.
    let newest = r.history.iter().rposition(|m| m.role == salvage_types::Role::Tool).unwrap();
    let oldest_stub =
        r.history.iter().position(|m| m.content.starts_with("[Tool result cleared by provider")).unwrap();
    let stub = r.history[oldest_stub].content.clone();
    r.history[oldest_stub].content = "restored".into();
    r.history[newest].content = stub;
    let f = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(!get(&f, "context_edit").ok, "{}", get(&f, "context_edit").detail);
}

#[test]
fn escalation_starts_from_the_bodys_own_max_tokens_and_keeps_its_fields() {
    // The imported Anthropic body asks for 32 000 output tokens (the model default is 8 192):
    // cut at max_tokens, the escalation doubles from the body's value (up to the 64 000 cap),
    // never from the lower default.
    let mut c = corpus("imported-anthropic-output-limit");
    let req = c.request.as_mut().unwrap();
    req.fields.insert("max_tokens".into(), serde_json::json!(32_000));
    req.bytes = Some(salvage_wire::request_bytes(req, &c.history));
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let mut expect = c.expect.clone().unwrap();
    let esc = expect.events.iter_mut().find(|e| e.kind == "token_escalation").unwrap();
    esc.fields.insert("from".into(), serde_json::json!(32_000));
    esc.fields.insert("to".into(), serde_json::json!(64_000));
    let (met, diffs) = salvage_replay::checks::compare(&expect, &r, &j);
    assert!(met, "{diffs:?}");
    // The escalated request is the body with every other field kept and max_tokens raised.
    let mut raised = c.request.clone().unwrap();
    raised.fields.insert("max_tokens".into(), serde_json::json!(64_000));
    let mut h = c.history.clone();
    h.push(Message::assistant(c.upstream.responses[0].content.clone()));
    h.push(Message::user(salvage_recovery::escalation::CONTINUATION));
    assert_eq!(r.sent.last().unwrap().bytes, salvage_wire::request_bytes(&raised, &h));
}

#[test]
fn rewind_fails_when_the_journal_cannot_be_read_at_a_skipped_compaction() {
    let c = corpus("gateway-http413-reported");
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "rewind").ok);
    // A skipped compaction recorded at an event the journal does not have: its state cannot be
    // read, so the undo accounting cannot be verified, and the check must say so.
    let past = j.head(&r.session).unwrap().seq + 100;
    r.skipped_compactions.push(past);
    let f = run_checks(&r, &c, &j, 3, &CLOCK);
    let rw = get(&f, "rewind");
    assert!(!rw.ok, "an unreadable state passed: {}", rw.detail);
    assert!(rw.detail.contains(&format!("skipped compaction {past}")), "{}", rw.detail);
}
