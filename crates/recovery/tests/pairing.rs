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

fn asking(ids: &[&str]) -> Message {
    let mut a = Message::assistant("");
    for id in ids {
        a.tool_calls.push(salvage_types::ToolCall {
            id: (*id).into(),
            kind: "function".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": id}),
        });
    }
    a
}

/// Behaviour spec section 6: "A call id used again by a later assistant message … is renamed
/// deterministically in that message and its result (`ID` → `ID~2`), keeping both"
/// (adversarial review, finding 02: such a history was judged valid and sent as it was).
#[test]
fn a_call_id_a_later_message_uses_again_is_renamed_with_its_result() {
    let h = vec![
        Message::user("u1"),
        asking(&["a"]),
        Message::tool("a", "first"),
        Message::user("u2"),
        asking(&["a", "b"]),
        Message::tool("b", "bee"),
        Message::tool("a", "second"),
        Message::user("u3"),
        // A third use, and an id that was used already too: each gets the first free `~n`.
        asking(&["a~2", "a"]),
        Message::tool("a~2", "third-a"),
        Message::tool("a", "fourth"),
    ];
    assert!(!is_valid(&h), "a repeated id makes the history invalid");
    let (out, report) = repair(&h);
    assert!(is_valid(&out), "{out:#?}");
    assert_eq!(report.renamed, 3);
    let ids: Vec<Vec<&str>> = out
        .iter()
        .filter(|m| !m.tool_calls.is_empty())
        .map(|m| m.tool_calls.iter().map(|c| c.id.as_str()).collect())
        .collect();
    assert_eq!(ids, vec![vec!["a"], vec!["a~2", "b"], vec!["a~2~2", "a~3"]]);
    // Each result follows its renamed call, its content kept.
    let results: Vec<(&str, &str)> = out
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_str()))
        .collect();
    assert_eq!(
        results,
        vec![("a", "first"), ("b", "bee"), ("a~2", "second"), ("a~2~2", "third-a"), ("a~3", "fourth")]
    );
    // Renaming is deterministic, and a repaired history needs nothing more.
    assert_eq!(repair(&h).0, out);
    assert!(repair(&out).1.is_clean());
}
