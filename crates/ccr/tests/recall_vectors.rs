//! `recall.json`: every case.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_ccr::recall::{extract_keys, is_recall_tool};
use salvage_testkit::vectors;
use salvage_types::CcrKey;

#[test]
fn recall_vectors() {
    let cases = vectors::load("recall.json").expect("vectors present");
    assert!(cases.len() >= 20);
    for c in &cases {
        let i = &c.input;
        if let Some(text) = i.get("key_of") {
            assert_eq!(
                CcrKey::of(text.as_str().unwrap().as_bytes()).short(),
                c.expect["key"].as_str().unwrap(),
                "{}",
                c.id
            );
        } else if let Some(text) = i.get("extract") {
            let want: Vec<String> = c.expect["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_string())
                .collect();
            assert_eq!(extract_keys(text.as_str().unwrap()), want, "{}", c.id);
        } else if let Some(names) = i.get("recall_tool_name") {
            let want = c.expect["is_recall"].as_bool().unwrap();
            for n in names.as_array().unwrap() {
                assert_eq!(is_recall_tool(n.as_str().unwrap()), want, "{}: {n}", c.id);
            }
        } else {
            panic!("{}: case not understood", c.id);
        }
    }
}
