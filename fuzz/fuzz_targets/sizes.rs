#![no_main]
//! The size parser never panics; what it accepts is positive and formats.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(b) = salvage_types::ByteSize::parse(&text) {
        assert!(b.0 > 0);
        let _ = b.to_string();
    }
});
