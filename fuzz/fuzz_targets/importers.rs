#![no_main]
//! Each importer, the format detector and the body rebuild never panic on any bytes.
use salvage_wire::{import, read_session, request_body, Source};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = salvage_wire::detect::detect(data);
    for s in [
        Source::Openai,
        Source::Anthropic,
        Source::Chatcli,
        Source::OpenaiResponses,
        Source::Gemini,
        Source::Bedrock,
    ] {
        if let Ok(i) = import(s, data, "fuzz.json") {
            let _ = salvage_types::history_weight(&i.history);
            if let Some(r) = &i.request {
                let _ = request_body(r, &i.history);
            }
        }
    }
    // Session files: the steps, the sidechains and the accounting never panic either.
    for s in [Source::ClaudeCode, Source::Codex, Source::Cline] {
        if let Ok(session) = read_session(s, data, "fuzz.jsonl") {
            let _ = salvage_types::history_weight(&session.history());
            let _ = session.report.describe();
            let _ = request_body(&session.request(), &session.history());
        }
    }
});
