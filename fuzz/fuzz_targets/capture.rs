#![no_main]
//! The capture reader never panics, and what it accepts validates and re-serializes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(c) = salvage_types::capture::parse_capture(data, "fuzz.json") {
        let text = c.to_json_pretty();
        let again = salvage_types::capture::parse_capture(text.as_bytes(), "again.json").expect("a capture we wrote reads back");
        assert_eq!(again, c);
    }
});
