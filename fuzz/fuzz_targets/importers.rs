#![no_main]
//! Each importer never panics on any bytes.
use salvage_wire::{import, read_session, Source};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for s in [Source::Openai, Source::Anthropic, Source::Chatcli] {
        if let Ok(i) = import(s, data, "fuzz.json") {
            let _ = salvage_types::history_weight(&i.history);
        }
    }
    // Session files: the steps, the sidechains and the accounting never panic either.
    for s in [Source::ClaudeCode, Source::Codex, Source::Cline] {
        if let Ok(session) = read_session(s, data, "fuzz.jsonl") {
            let _ = salvage_types::history_weight(&session.history());
            let _ = session.report.describe();
        }
    }
});
