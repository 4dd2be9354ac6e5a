#![no_main]
//! The recall parser never panics; every key it returns is 16-64 lowercase hex, distinct.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let keys = salvage_ccr::recall::extract_keys(&text);
    for (i, k) in keys.iter().enumerate() {
        assert!((16..=64).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(!keys[..i].contains(k));
    }
    let _ = salvage_types::ccr_key::find_markers(&text);
});
