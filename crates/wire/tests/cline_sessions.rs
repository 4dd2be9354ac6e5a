//! The Cline importer: tool results written as user text stay user text, native tool results
//! pair with their calls.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod common;

use common::sessions::*;
use salvage_types::message::Role;
use salvage_wire::Source;
use serde_json::json;

#[test]
fn cline_tool_results_as_user_text_stay_user_text() {
    // The XML-tool era shape (Cline's src/core/task/index.ts, see the samples README).
    let body = json!([
        {"role": "user", "content": [{"type": "text", "text": "<task>\nRead a.ts\n</task>"}, {"type": "text", "text": "<environment_details>x</environment_details>"}], "ts": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.ts</path>\n</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.ts'] Result:"}, {"type": "text", "text": "export {}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}, {"type": "tool_use", "id": "toolu_x", "name": "attempt_completion", "input": {}}]}
    ]);
    let s = read_str(Source::Cline, &body.to_string());
    let h = s.history();
    assert_eq!(
        h.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(),
        ["user", "assistant", "user", "assistant"]
    );
    assert!(h.iter().all(|m| m.tool_calls.is_empty() && m.role != Role::Tool), "no native call to answer");
    assert!(h[2].meta.agent_feedback && !h[0].meta.agent_feedback);
    assert_eq!(
        h[3].wire.as_ref().unwrap()["m"]["content"][1]["type"],
        "tool_use",
        "an unanswered call is carried, not modeled"
    );
    let body = salvage_wire::request_body(&s.request(), &h);
    assert_eq!(body["messages"][3]["content"][1]["id"], "toolu_x", "and sent back in place: {body}");
    assert!(body["messages"][0].get("ts").is_none(), "Cline's bookkeeping is not sent");
    assert_eq!(s.report.get("field:ts").seen, 1);
}

#[test]
fn cline_native_tool_results_pair() {
    let s =
        read_file(Source::Cline, &samples().join("cline/native-tools-tool-result-with-result-prefix.json"));
    let h = s.history();
    assert_eq!(h[0].tool_calls[0].id, "toolu_write");
    assert_eq!(h[1].role, Role::Tool);
    assert!(h[1].content.starts_with("[write_to_file for 'new-file.ts'] Result:"));
}
