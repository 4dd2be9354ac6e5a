#![no_main]
//! The classifier never panics, whatever the status, text and weight.
use salvage_recovery::classify::{classify, status_tokens, FailureInput};
use salvage_types::capture::Failure;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).to_string();
    let status = data.first().map(|b| 300 + u16::from(*b));
    let failure = Failure { status, message: text.clone(), transport: (data.len() % 2 == 0).then(|| text.clone()), rejected_request_bytes: None };
    let c = classify(&FailureInput { failure, history_bytes: data.len() as u64 * 1000, payload_path_seen: data.len() % 3 == 0 });
    assert_eq!(c.recoverable, c.class.recoverable());
    for s in status_tokens(&text) {
        assert!((100..=599).contains(&s));
    }
});
