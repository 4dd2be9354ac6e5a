//! Why a reply stopped is journaled as the provider said it: a tool call, a refusal, a pause, a
//! stop sequence and the output limit each as itself, and a stream that ended without saying
//! (cut off, or the client left) as unrecorded rather than as a complete answer.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use chrono::Utc;
use salvage_journal::Journal;
use salvage_proxy::assemble::Assembler;
use salvage_proxy::record::{write_turn, Cut, Turn, WriterOptions};
use salvage_proxy::route::Api;
use salvage_types::capture::StopReason;
use salvage_types::event::EventBody;

/// Journals one turn of `api` whose response body is `answer` (`sse`: an event stream) and
/// returns the stop reason recorded.
fn recorded(api: Api, answer: &str, sse: bool, cut: Option<Cut>) -> StopReason {
    let body = match api {
        Api::AnthropicMessages => serde_json::json!({"model": "claude-x", "max_tokens": 8,
            "messages": [{"role": "user", "content": answer}]}),
        Api::OpenaiChat => {
            serde_json::json!({"model": "gpt-x", "messages": [{"role": "user", "content": answer}]})
        }
        Api::OpenaiResponses => serde_json::json!({"model": "gpt-x", "input": answer}),
    };
    let mut journal = Journal::in_memory().expect("journal");
    let mut t = Turn::new(api, serde_json::to_vec(&body).expect("json").into(), Utc::now());
    t.attempt_zero();
    let mut a = Assembler::new(api, sse);
    a.feed(answer.as_bytes());
    t.response = Some(a);
    t.cut = cut;
    let (session, _) = write_turn(
        &mut journal,
        &WriterOptions { captures: None, settings: Default::default(), keep: None },
        t,
    )
    .expect("written");
    let events = journal.events(&session, 0, 100).expect("events");
    events
        .into_iter()
        .find_map(|e| match e.body {
            EventBody::ResponseReceived { stop_reason, .. } => Some(stop_reason),
            _ => None,
        })
        .expect("a response_received")
}

fn anthropic(stop: &str) -> String {
    serde_json::json!({"content": [{"type": "text", "text": "x"}], "stop_reason": stop,
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
}

fn chat(finish: &str) -> String {
    serde_json::json!({"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": finish}]})
        .to_string()
}

#[test]
fn each_stop_is_journaled_as_the_provider_said_it() {
    let a = Api::AnthropicMessages;
    assert_eq!(recorded(a, &anthropic("end_turn"), false, None), StopReason::EndTurn);
    assert_eq!(recorded(a, &anthropic("tool_use"), false, None), StopReason::ToolUse);
    assert_eq!(recorded(a, &anthropic("max_tokens"), false, None), StopReason::MaxTokens);
    assert_eq!(recorded(a, &anthropic("stop_sequence"), false, None), StopReason::StopSequence);
    assert_eq!(recorded(a, &anthropic("pause_turn"), false, None), StopReason::PauseTurn);
    assert_eq!(recorded(a, &anthropic("refusal"), false, None), StopReason::Refusal);
    let c = Api::OpenaiChat;
    assert_eq!(recorded(c, &chat("stop"), false, None), StopReason::EndTurn);
    assert_eq!(recorded(c, &chat("tool_calls"), false, None), StopReason::ToolUse);
    assert_eq!(recorded(c, &chat("length"), false, None), StopReason::Length);
    assert_eq!(recorded(c, &chat("content_filter"), false, None), StopReason::Refusal);
    let r = Api::OpenaiResponses;
    let calls = serde_json::json!({"status": "completed", "output": [{"type": "function_call", "call_id": "c1",
        "name": "ls", "arguments": "{}"}]});
    assert_eq!(recorded(r, &calls.to_string(), false, None), StopReason::ToolUse);
    let text = serde_json::json!({"status": "completed", "output": [{"type": "message", "content": [{"type": "output_text", "text": "x"}]}]});
    assert_eq!(recorded(r, &text.to_string(), false, None), StopReason::EndTurn);
    let cut = serde_json::json!({"status": "incomplete", "output": []});
    assert_eq!(recorded(r, &cut.to_string(), false, None), StopReason::MaxTokens);
}

#[test]
fn a_stream_that_ends_without_a_stop_reason_is_not_a_complete_answer() {
    let partial = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"half an ans\"}}\n\n";
    let a = Api::AnthropicMessages;
    assert_eq!(recorded(a, partial, true, Some(Cut::Client)), StopReason::Unrecorded);
    assert_eq!(recorded(a, partial, true, Some(Cut::Upstream("reset".into()))), StopReason::Unrecorded);
}

/// Left from the first review: an accepted response whose stream the upstream cut was captured
/// as a failure without a status, which the classifier's EOF rule reads as a gateway rejecting
/// the request's size (over 500 000 of history weight), so its replay climbed the ladder against
/// a cap that never was. The client saw a 200 and then the cut: that is what is captured.
#[test]
fn a_stream_cut_after_acceptance_is_captured_with_its_status_not_as_a_size_rejection() {
    let dir = tempfile::tempdir().unwrap();
    let big = "y".repeat(700_000);
    let body = serde_json::json!({"model": "claude-x", "max_tokens": 8, "stream": true,
        "messages": [{"role": "user", "content": big}]});
    let mut journal = Journal::in_memory().expect("journal");
    let mut t =
        Turn::new(Api::AnthropicMessages, serde_json::to_vec(&body).expect("json").into(), Utc::now());
    t.attempt_zero();
    let mut a = Assembler::new(Api::AnthropicMessages, true);
    a.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n");
    t.response = Some(a);
    t.cut = Some(Cut::Upstream("connection reset by peer".into()));
    t.accepted_status = Some(206);
    let options =
        WriterOptions { captures: Some(dir.path().join("c")), settings: Default::default(), keep: None };
    let (session, _) = write_turn(&mut journal, &options, t).expect("written");
    let class = journal
        .events(&session, 0, 100)
        .expect("events")
        .into_iter()
        .find_map(|e| match e.body {
            EventBody::ProviderError { class, status, .. } => Some((class, status)),
            _ => None,
        })
        .expect("the cut is journaled as a failure");
    assert_eq!(class.1, Some(206), "the status the client saw: {class:?}");
    assert!(!class.0.recoverable(), "a cut after acceptance is no size rejection: {class:?}");
    let file =
        std::fs::read_dir(dir.path().join("c")).expect("captures").next().expect("one").expect("entry");
    let capture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file.path()).expect("read")).expect("json");
    assert_eq!(capture["failure"]["status"], 206, "{}", capture["failure"]);
}
