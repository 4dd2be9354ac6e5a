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
