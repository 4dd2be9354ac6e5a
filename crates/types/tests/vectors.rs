//! Acceptance vectors for the types crate: `sizes.json` (parse and format) and `weight.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_testkit::vectors;
use salvage_types::{bytesize::ByteSize, message::Message, weight::message_weight};

#[test]
fn sizes_parse_and_format() {
    let cases = vectors::load("sizes.json").expect("vectors present");
    let mut ran = 0;
    for c in &cases {
        if let Some(text) = c.input.get("parse") {
            let got = ByteSize::parse(text.as_str().unwrap()).map(|b| b.0);
            assert_eq!(got, c.expect["bytes"].as_u64(), "{}", c.id);
            ran += 1;
        } else if let Some(n) = c.input.get("format") {
            assert_eq!(
                ByteSize(n.as_u64().unwrap()).to_string(),
                c.expect["text"].as_str().unwrap(),
                "{}",
                c.id
            );
            ran += 1;
        }
    }
    assert_eq!(ran, 20, "parse and format cases");
}

#[test]
fn weight_cases() {
    let cases = vectors::load("weight.json").expect("vectors present");
    assert!(!cases.is_empty());
    for c in &cases {
        let m: Message = serde_json::from_value(c.input.clone()).unwrap_or_else(|e| panic!("{}: {e}", c.id));
        let w = message_weight(&m);
        if let Some(exact) = c.expect.get("weight") {
            assert_eq!(w, exact.as_u64().unwrap(), "{}", c.id);
        } else if let Some(min) = c.expect.get("weight_min") {
            assert!(w >= min.as_u64().unwrap(), "{}: {w}", c.id);
        } else {
            panic!("{}: no expectation understood", c.id);
        }
    }
}
