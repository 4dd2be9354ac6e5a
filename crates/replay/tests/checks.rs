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

/// Review finding 7: a run that used its attempts up with no request accepted passed every check,
/// so a capture without `expect` passed CI when its recovery failed. Convergence now fails on
/// `exhausted` unless the capture expects exactly that.
#[test]
fn convergence_fails_when_the_recovery_is_exhausted_unless_expected() {
    let mut c = corpus("no-op-rungs-are-not-sent");
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert_eq!(r.outcome, salvage_types::capture::Outcome::Exhausted);
    assert!(get(&run_checks(&r, &c, &j, 1000, &CLOCK), "convergence").ok, "expected exhaustion");
    c.expect = None;
    let conv = run_checks(&r, &c, &j, 1000, &CLOCK);
    let conv = get(&conv, "convergence");
    assert!(!conv.ok && conv.detail.contains("did not converge"), "{}", conv.detail);
}

/// Review finding 5: stubs the input already carried (a session exported and replayed again)
/// were counted as the client's mirror of this run's provider edits, so the check failed on a
/// correct run. Only stubs this run made count; a stub this run made for a result the provider
/// did not clear still fails it.
#[test]
fn context_edit_leaves_out_the_stubs_the_input_already_carried() {
    let mut c = corpus("context-editing-provider");
    let first = c.history.iter().position(|m| m.role == salvage_types::Role::Tool).unwrap();
    c.history[first].content = "[Tool result cleared by provider context editing]".into();
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    let ce = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(get(&ce, "context_edit").ok, "{}", get(&ce, "context_edit").detail);
    let fresh = r
        .history
        .iter()
        .rposition(|m| m.role == salvage_types::Role::Tool && !m.content.starts_with("[Tool result cleared"))
        .unwrap();
    r.history[fresh].content = "[Tool result cleared by provider context editing]".into();
    let ce = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(!get(&ce, "context_edit").ok, "{}", get(&ce, "context_edit").detail);
}

/// Re-review, finding 5: a reused call id reached the provider renamed (`ID~2`, the pairing
/// repair's), so a correct mirror was reported as a mismatch.
#[test]
fn context_edit_names_a_reused_id_as_the_history_does() {
    let mut c = corpus("context-editing-provider");
    let tools: Vec<usize> = c
        .history
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == salvage_types::Role::Tool)
        .map(|(i, _)| i)
        .collect();
    let (first, fifth) = (tools[0], tools[5]);
    let id = c.history[first].tool_call_id.clone().unwrap();
    let old = c.history[fifth].tool_call_id.clone().unwrap();
    c.history[fifth].tool_call_id = Some(id.clone());
    for m in c.history.iter_mut() {
        for call in m.tool_calls.iter_mut().filter(|call| call.id == old) {
            call.id = id.clone();
        }
    }
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert!(r.provider_cleared.iter().any(|x| x.contains('~')), "{:?}", r.provider_cleared);
    let ce = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(get(&ce, "context_edit").ok, "{}", get(&ce, "context_edit").detail);
}

/// Review finding 3: a notice the client injected in an earlier turn, dropped by rung 2 into a
/// transcript, was injected again, and the check counted only the final history. Now the session
/// holding a copy counts as injected, and the check counts the input's copy too. A tool result
/// that merely quotes the marker (source code that defines it) is no copy.
#[test]
fn the_payload_notice_is_not_injected_again_after_a_rung_dropped_the_inputs_copy() {
    use salvage_recovery::payload::{notice_message, PAYLOAD_NOTICE};
    let mut c = corpus("gateway-http413-reported");
    c.history.insert(2, notice_message());
    let mut j = Journal::in_memory().unwrap();
    let mut r = run(&c, &mut j);
    assert_eq!(r.notices, 0, "no second notice");
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "notice_once").ok);
    // The check: a run that injected one anyway fails.
    r.notices = 1;
    r.history.push(notice_message());
    let n = run_checks(&r, &c, &j, 3, &CLOCK);
    assert!(!get(&n, "notice_once").ok, "{}", get(&n, "notice_once").detail);
    // A user's question that quotes the marker is no copy either (re-review, finding 6).
    let mut asked = corpus("gateway-http413-reported");
    let last = asked.history.len() - 1;
    asked
        .history
        .insert(last, Message::user("What does [SYSTEM NOTICE — PAYLOAD LIMIT HIT] mean in your docs?"));
    let mut j = Journal::in_memory().unwrap();
    let r = run(&asked, &mut j);
    assert_eq!(r.notices, 1, "the notice is injected: a question about it is not a copy");
    // A quote in a tool result does not suppress the notice.
    let mut q = corpus("gateway-http413-reported");
    let tool = q.history.iter().position(|m| m.role == salvage_types::Role::Tool).unwrap();
    q.history[tool].content =
        format!("const NOTICE: &str = {PAYLOAD_NOTICE:?};\n{}", q.history[tool].content);
    let mut j = Journal::in_memory().unwrap();
    let r = run(&q, &mut j);
    assert_eq!(r.notices, 1, "the notice is injected: a quote is not a copy");
    assert!(get(&run_checks(&r, &q, &j, 3, &CLOCK), "notice_once").ok);
}

/// Review finding 4 asked fidelity to compare attempt 0 with the failure's reported rejected size.
/// That number is often the gateway's limit, not the request's size ("exceeds the limit of N
/// bytes"; the proxy and the importer read it either way and model the cap from it), so the
/// comparison was taken back after the re-review showed it failing genuine captures: a reported
/// size far from attempt 0 is no fidelity failure.
#[test]
fn a_reported_size_that_is_the_limit_is_no_fidelity_failure() {
    let mut c = corpus("gateway-http413-reported");
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    c.failure.rejected_request_bytes = Some(r.sent[0].bytes / 5);
    assert!(get(&run_checks(&r, &c, &j, 3, &CLOCK), "fidelity").ok);
}

/// Review finding 8: a body imported without a failure (its size as sent known) ran the per-turn
/// passes on attempt 0, so attempt 0 was not the request as sent and fidelity failed.
#[test]
fn a_body_imported_without_a_failure_is_sent_as_it_was() {
    let mut c = corpus("gateway-http413-reported");
    c.failure = Default::default();
    c.upstream = Default::default();
    c.expect = None;
    let mut sized = c.clone();
    let mut req = Request { format: RequestFormat::Anthropic, bytes: None, fields: Default::default() };
    req.bytes = Some(salvage_wire::request_bytes(&req, &c.history));
    sized.request = Some(req);
    let mut j = Journal::in_memory().unwrap();
    let r = run(&sized, &mut j);
    assert!(r.sent[0].as_sent, "attempt 0 is the body as sent");
    assert!(get(&run_checks(&r, &sized, &j, 3, &CLOCK), "fidelity").ok);
}

/// Review finding 2: the simulated provider counted no token of the blocks a message's `wire`
/// template carries (a text document), so a request 2.5 times over the window was accepted and
/// the run "recovered". Now the document counts as its text would, placeholders are not counted
/// twice, and a base64 source is weighed by what its bytes are (a PDF by its pages).
#[test]
fn the_simulated_provider_counts_the_blocks_the_message_model_has_no_field_for() {
    use salvage_replay::upstream::count_tokens;
    let text: String = (0..3000).map(|i| format!("alpha{i} beta gamma ")).collect();
    let plain = Message::user(text.clone());
    let mut doc = Message::user("see the attached notes");
    doc.wire = Some(serde_json::json!({"f": "anthropic", "m": {"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}},
        {"$": "text", "type": "text"}
    ]}}));
    let (p, d) = (count_tokens(std::slice::from_ref(&plain)), count_tokens(std::slice::from_ref(&doc)));
    assert!(d >= p, "the document counts as its text: {d} vs {p}");
    assert!(d < p + 50, "and once: {d} vs {p}");
    let mut pdf = Message::user("scan");
    pdf.wire = Some(serde_json::json!({"f": "anthropic", "m": {"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK".repeat(5000)}}
    ]}}));
    let base = count_tokens(&[Message::user("scan")]);
    // The bytes are a PDF (`%PDF-1.4` again and again): a page, not its base64 read as text.
    assert_eq!(count_tokens(&[pdf]), base + 1500, "a base64 source is weighed by what it holds");
}

/// Re-review, findings 3 and 4: base64 under any key (audio `data`, a data-URL `file_data`) is a
/// binary payload, counted as an image, not read as text; text under any key (a code cell) is
/// counted; identifiers and signatures are not.
#[test]
fn wire_blocks_count_text_as_text_and_binary_as_media() {
    use salvage_replay::upstream::wire_tokens;
    let b64 = "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA".repeat(700);
    let audio = serde_json::json!([{"type": "input_audio", "input_audio": {"data": b64, "format": "mp3"}}]);
    // An ID3 tag and no frame: sound whose length cannot be read costs the most it can, its
    // 31 500 bytes at 750 a second (it weighed 85, the least).
    assert_eq!(wire_tokens(&audio), 31_500 * 32 / 750);
    let pdf = serde_json::json!([{"type": "file", "file": {"file_data": format!("data:application/pdf;base64,{b64}"), "filename": "a.pdf"}}]);
    // Declared a PDF, the bytes are the same ID3 tag: priced as that sound, not read as text.
    let n = wire_tokens(&pdf);
    assert!((31_500 * 32 / 750..31_500 * 32 / 750 + 10).contains(&n), "{n}");
    let code: String = (0..500).map(|i| format!("print({i})\n")).collect();
    let cell = serde_json::json!([{"type": "code_interpreter_call", "id": "ci_1", "code": code.clone()}]);
    assert!(wire_tokens(&cell) >= salvage_replay::o200k::count(&code));
    let thinking = serde_json::json!([{"type": "thinking", "thinking": "short", "signature": b64}]);
    assert_eq!(wire_tokens(&thinking), salvage_replay::o200k::count("short"));
}

/// The corpus proves recoveries only against an upstream that rejects the captured request: a
/// capture that recovers while its own simulation accepted attempt 0 was judged by an upstream
/// that accepts everything (six did, until their windows were set under attempt 0's real tokens).
#[test]
fn every_recovery_in_the_corpus_starts_from_a_simulated_rejection() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus");
    let mut recovered = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let c = read_capture(&p).unwrap();
        let mut j = Journal::in_memory().unwrap();
        let r = run(&c, &mut j);
        // Every run journals its end: the journal reads the outcome the run had, never
        // `incomplete`.
        let events = j.events(&r.session, 0, usize::MAX).unwrap();
        assert_eq!(
            events.last().map(|e| &e.body),
            Some(&salvage_types::event::EventBody::RunEnded { outcome: r.outcome }),
            "{}: the last event",
            c.id
        );
        assert_eq!(j.session_outcome(&r.session).unwrap(), Some(r.outcome.as_str()), "{}", c.id);
        if r.outcome == salvage_types::capture::Outcome::Recovered {
            recovered += 1;
            assert!(
                matches!(r.first_class, Some((_, true))),
                "{}: attempt 0 was accepted by its simulation",
                c.id
            );
        }
    }
    assert!(recovered >= 40, "{recovered} recoveries in the corpus");
}

/// Tool definitions are input tokens: the simulated provider counted only the messages, so a
/// request whose tools alone filled the window was "recovered" by cutting messages. Now a
/// capture whose tools outweigh the window cannot converge, and the tools count in every verdict.
#[test]
fn the_simulated_provider_counts_the_requests_tool_definitions() {
    use salvage_replay::upstream::{count_tokens, request_tokens, Simulated};
    let mut c = corpus("imported-openai-chat-overflow");
    let window = c.upstream.model.as_ref().and_then(|m| m.context_window_tokens).unwrap();
    let describe: String = (0..window).map(|i| format!("field{i} ")).collect();
    let tools = serde_json::json!([{"type": "function", "function": {"name": "lookup", "description": describe,
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
    let req = c.request.as_mut().unwrap();
    req.fields.insert("tools".into(), tools);
    let weight = request_tokens(&req.fields);
    assert!(weight > window, "the tools alone are over the window: {weight} vs {window}");
    req.bytes = Some(salvage_wire::request_bytes(req, &c.history));

    let small = [Message::user("hi")];
    match Simulated::for_capture(&c).judge(0, &small, false) {
        Err(r) => assert_eq!(r.counted_tokens, Some(count_tokens(&small) + weight)),
        Ok(v) => panic!("a request carrying the tools is over the window: {v:?}"),
    }
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert_eq!(
        r.outcome,
        salvage_types::capture::Outcome::Exhausted,
        "no cut of the messages fits the tools"
    );
    assert!(!get(&run_checks(&r, &c, &j, 3, &CLOCK), "convergence").ok);
}

/// Only the fields a model reads count: parameters, the model id, and fields the importer left
/// empty (a Bedrock body's `system: []`, a Responses body's `instructions: ""`) weigh nothing.
#[test]
fn request_fields_that_carry_no_input_count_nothing() {
    use salvage_replay::upstream::request_tokens;
    let fields = serde_json::json!({"model": "gpt-4o", "max_tokens": 100, "stream": true, "system": [],
        "instructions": "", "tool_choice": "auto", "metadata": {"user_id": "a long identifier of a user"}});
    assert_eq!(request_tokens(fields.as_object().unwrap()), 0);
    let with = serde_json::json!({"instructions": "Answer in French.", "model": "gpt-4o"});
    assert_eq!(request_tokens(with.as_object().unwrap()), salvage_replay::o200k::count("Answer in French."));
    // Review finding 6: the output schema counts in every format's spelling.
    let schema = serde_json::json!({"type": "object", "properties": {"answer": {"type": "string", "description": "the answer, in French"}}});
    let n = salvage_replay::o200k::count(&schema.to_string());
    for body in [
        serde_json::json!({"response_format": schema}),
        serde_json::json!({"text": {"format": schema, "verbosity": "low"}}),
        serde_json::json!({"generationConfig": {"responseSchema": schema, "temperature": 0.2}}),
    ] {
        assert_eq!(request_tokens(body.as_object().unwrap()), n, "{body}");
    }
}

/// Review finding 5: a text document's source is text, even when its letters are all base64's
/// (a DNA sequence), not a payload decoded into noise.
#[test]
fn a_text_documents_letters_are_text() {
    use salvage_replay::upstream::wire_tokens;
    let dna: String = (0..20_000).map(|i| ["A", "C", "G", "T"][(i * 7 + i / 3) % 4]).collect();
    let doc = serde_json::json!([{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": dna}}]);
    assert!(wire_tokens(&doc) >= salvage_replay::o200k::count(&dna), "{}", wire_tokens(&doc));
}

/// A PNG of `w` by `h` as base64: its header (what a size reader reads) and zero bytes.
fn png_base64(w: u32, h: u32) -> String {
    use base64::Engine;
    let mut b = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
    b.extend_from_slice(b"IHDR");
    b.extend_from_slice(&w.to_be_bytes());
    b.extend_from_slice(&h.to_be_bytes());
    b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    b.extend(std::iter::repeat_n(0u8, 2048));
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Images are priced by their size: the simulated provider counted every payload at 85 tokens,
/// an image's lowest price, so screenshots that fill the window weighed a few hundred tokens and
/// a recovery that kept them was accepted. Six full-HD screenshots are 9 600 tokens to the
/// provider; in the task of a capture whose window is 4 000, no cut of the history can fit.
#[test]
fn the_simulated_provider_prices_images_by_their_size() {
    use salvage_replay::upstream::count_tokens;
    let shot = salvage_types::message::Image {
        media_type: Some("image/png".into()),
        data: Some(png_base64(1920, 1080)),
        url: None,
    };
    let mut m = Message::user("what is wrong in these screenshots?");
    let text_only = count_tokens(std::slice::from_ref(&m));
    m.images = vec![shot; 6];
    assert_eq!(count_tokens(std::slice::from_ref(&m)), text_only + 6 * 1600);

    let mut c = corpus("images-in-history");
    let task = c.history.iter_mut().rev().find(|m| m.role == salvage_types::Role::User).unwrap();
    task.images = m.images.clone();
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    assert_ne!(
        r.outcome,
        salvage_types::capture::Outcome::Recovered,
        "the screenshots alone are over the window"
    );
    assert!(!get(&run_checks(&r, &c, &j, 3, &CLOCK), "convergence").ok);
}

/// Re-review finding 1: a system prompt sent as blocks (as Claude Code sends it) was counted
/// twice, its joined content and each block again, so a capture that recovers with the prompt as
/// one string was exhausted with it as two blocks.
#[test]
fn a_system_prompt_in_blocks_is_counted_once() {
    use salvage_replay::upstream::count_tokens;
    use salvage_types::message::SystemPart;
    let (a, b) = ("You are a coding agent. ".repeat(200), "Follow the repository's style. ".repeat(150));
    let part = |t: &str| SystemPart { kind: "text".into(), text: t.to_string(), cache_control: None };
    let mut blocks = Message::system(format!("{a}\n\n{b}"));
    blocks.system_parts = vec![part(&a), part(&b)];
    let one = Message::system(format!("{a}\n\n{b}"));
    assert_eq!(count_tokens(&[blocks.clone()]), count_tokens(&[one]));
    // A part the content does not hold is still counted.
    blocks.system_parts.push(part("An extra instruction that only this block carries."));
    assert!(count_tokens(&[blocks.clone()]) > count_tokens(&[Message::system(format!("{a}\n\n{b}"))]));
}

/// Re-review finding 5: a PDF document wrapped at 76 columns, as MIME writes base64, is the PDF,
/// not nothing.
#[test]
fn a_wrapped_base64_document_is_weighed_by_its_bytes() {
    use base64::Engine;
    use salvage_replay::upstream::wire_tokens;
    let mut pdf = b"%PDF-1.4\n".to_vec();
    for i in 0..40 {
        pdf.extend_from_slice(format!("{} 0 obj << /Type /Page /Parent 1 0 R >> endobj\n", i + 2).as_bytes());
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let wrapped: String =
        b64.as_bytes().chunks(76).map(|c| format!("{}\r\n", std::str::from_utf8(c).unwrap())).collect();
    for data in [b64, wrapped] {
        let doc = serde_json::json!([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}]);
        assert_eq!(wire_tokens(&doc), 40 * 1500);
        let gemini = serde_json::json!([{"inlineData": {"mimeType": "application/pdf", "data": data}}]);
        assert_eq!(wire_tokens(&gemini), 40 * 1500);
    }
}

/// A Responses request that continues a stored response (`previous_response_id`) carries only
/// its new input: the provider counted the stored conversation, the simulation cannot. Its
/// context overflow is not reproduced, and fidelity says so and names the reference; a
/// failure that does not depend on the count (a 500) keeps fidelity, with the reference noted.
#[test]
fn fidelity_fails_on_an_overflow_of_content_the_capture_does_not_hold() {
    let id = serde_json::json!("resp_0435eb6c2aa8e9eb0069e15ffeb3fc81959cd2d1e915a8c7ea");
    let mut c = corpus("imported-responses-overflow");
    assert!(
        get(
            &run_checks(
                &run(&c, &mut Journal::in_memory().unwrap()),
                &c,
                &Journal::in_memory().unwrap(),
                3,
                &CLOCK
            ),
            "fidelity"
        )
        .ok
    );
    c.request.as_mut().unwrap().fields.insert("previous_response_id".into(), id.clone());
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let f = get(&run_checks(&r, &c, &j, 3, &CLOCK), "fidelity").clone();
    assert!(!f.ok, "{}", f.detail);
    assert!(
        f.detail.contains("request.previous_response_id") && f.detail.contains("resp_0435eb6c"),
        "{}",
        f.detail
    );

    let mut c = corpus("imported-responses-500-not-recoverable");
    let req = c.request.as_mut().unwrap();
    // The body as sent grows by the field: `,"previous_response_id":"resp_…"`.
    let grown = 1 + r#""previous_response_id":"#.len() + id.to_string().len();
    req.bytes = req.bytes.map(|b| b + grown as u64);
    req.fields.insert("previous_response_id".into(), id);
    let mut j = Journal::in_memory().unwrap();
    let r = run(&c, &mut j);
    let f = get(&run_checks(&r, &c, &j, 3, &CLOCK), "fidelity").clone();
    assert!(f.ok, "{}", f.detail);
    assert!(
        f.detail.contains("not counted") && f.detail.contains("request.previous_response_id"),
        "{}",
        f.detail
    );
}

/// An image the capture holds by address only is priced at the most an image costs: at 85 (the
/// lowest price), ten screenshots by URL weighed 850 tokens where the provider counts up to
/// 16 000, and a recovery that kept them was accepted.
#[test]
fn an_image_by_address_costs_the_most_an_image_can() {
    use salvage_replay::upstream::{count_tokens, wire_tokens};
    let by_url = salvage_types::message::Image {
        media_type: None,
        data: None,
        url: Some("https://example.com/screenshot.png".into()),
    };
    let mut m = Message::user("what is wrong in these screenshots?");
    let text_only = count_tokens(std::slice::from_ref(&m));
    m.images = vec![by_url; 10];
    assert_eq!(count_tokens(std::slice::from_ref(&m)), text_only + 10 * 1600);
    for block in [
        serde_json::json!([{"type": "input_image", "file_id": "file-abc", "detail": "high"}]),
        serde_json::json!([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]),
        serde_json::json!([{"type": "image", "source": {"type": "file", "file_id": "file_011"}}]),
    ] {
        assert_eq!(wire_tokens(&block), 1600, "{block}");
    }
}

/// Review findings 9 and 13: a Gemini image by `fileUri` and a Bedrock image in S3 cost the most
/// an image can, not the tokens of their addresses.
#[test]
fn gemini_and_bedrock_images_by_address_cost_the_most_an_image_can() {
    use salvage_replay::upstream::wire_tokens;
    let gemini =
        serde_json::json!([{"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/photo-1.jpg"}}]);
    assert_eq!(wire_tokens(&gemini), 1600);
    let bedrock =
        serde_json::json!([{"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/a.png"}}}}]);
    assert_eq!(wire_tokens(&bedrock), 1600);
    // A PDF by address is not an image: it is listed as unheld instead (fidelity names it).
    let pdf = serde_json::json!([{"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/r.pdf"}}]);
    assert!(wire_tokens(&pdf) < 100);
}
