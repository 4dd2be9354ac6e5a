#![no_main]
//! Each importer, the format detector and the body rebuild never panic on any bytes.
use salvage_wire::{import, request_body, Source};
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
});
