#![no_main]
//! Journal event decoding never panics; a decoded event re-encodes to the same value.
use salvage_types::event::EventBody;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(e) = serde_json::from_slice::<EventBody>(data) {
        let text = serde_json::to_vec(&e).expect("serializes");
        let again: EventBody = serde_json::from_slice(&text).expect("reads back");
        assert_eq!(again, e);
        let _ = e.summary();
    }
});
