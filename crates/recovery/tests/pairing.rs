//! Pairing repair and chained responses: a tool result answering a call the provider holds
//! (`previous_response_id`) is kept; an unmarked result with no call is still an orphan.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::pairing::{is_valid, repair};
use salvage_types::Message;

#[test]
fn a_result_of_a_call_the_provider_holds_is_no_orphan() {
    let mut held = Message::tool("call_upstream", "72F");
    let mut stray = held.clone();
    stray.tool_call_id = Some("ghost".into());
    held.meta.call_held_upstream = true;
    let h = vec![held.clone(), Message::user("go on"), stray];
    let (out, report) = repair(&h);
    assert_eq!(report.orphans, 1, "only the unmarked result is an orphan");
    assert_eq!(out, vec![held.clone(), Message::user("go on")]);
    assert!(is_valid(&out));
    held.meta.call_held_upstream = false;
    assert!(!is_valid(&[held]), "without the mark it is an orphan");
}
