#![no_main]
//! Each importer never panics on any bytes.
use salvage_wire::{import, Source};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for s in [Source::Openai, Source::Anthropic, Source::Chatcli] {
        if let Ok(i) = import(s, data, "fuzz.json") {
            let _ = salvage_types::history_weight(&i.history);
        }
    }
});
