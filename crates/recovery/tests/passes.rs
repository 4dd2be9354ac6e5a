//! Dedup of repeated reads, skill aging, provider-side edit mirroring, the budget, the model
//! catalog and calibration.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::budget::{budget, model_info, needs_compaction, Calibration, Surface};
use salvage_recovery::context_edit::{self, EditSettings};
use salvage_recovery::dedup::dedup;
use salvage_recovery::skills::age_skills;
use salvage_types::ccr_key::find_markers;
use salvage_types::{Message, ToolCall};
use serde_json::json;

fn read(id: &str, args: serde_json::Value, body: &str) -> Vec<Message> {
    let mut a = Message::assistant("");
    a.tool_calls.push(ToolCall {
        id: id.into(),
        kind: "function".into(),
        name: "read_file".into(),
        arguments: args,
    });
    vec![a, Message::tool(id, body)]
}

#[test]
fn dedup_stubs_earlier_reads_covered_by_later_ones() {
    let big = "fn x() {}\n".repeat(200);
    let mut h = vec![Message::user("refactor")];
    h.extend(read("r1", json!({"path": "src/a.rs", "offset": 10, "limit": 20}), &big)); // lines 10-29
    h.extend(read("r2", json!({"path": "src/a.rs"}), &big)); // whole file: covers r1
    h.extend(read("r3", json!({"path": "src/b.rs", "start_line": 1, "end_line": 100}), &big));
    h.extend(read("r4", json!({"path": "src/b.rs", "start_line": 10, "end_line": 20}), &big)); // narrower: never replaces r3
    h.extend(read("r5", json!({"path": "src/c.rs", "lines": "1-50"}), &big));
    let mut verbatim = read("r6", json!({"path": "src/c.rs", "lines": "1-50"}), &big);
    verbatim[1].meta.preserve_verbatim = true;
    h.extend(verbatim);
    h.extend(read("r7", json!({"path": "src/c.rs", "lines": "1-80"}), &big)); // covers r5 and r6, r6 is verbatim
    let mut mem = MemoryArchive::new();
    let (out, r) = dedup(&h, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
    assert_eq!(r.stubbed, 2, "r1 and r5");
    assert!(out[2].content.starts_with("[Earlier read of src/a.rs (lines 10–29) superseded by a later read"));
    let k = find_markers(&out[2].content)[0];
    assert_eq!(mem.get(k).unwrap(), big.as_bytes(), "archived first");
    assert_eq!(out[4].content, big, "the newest read is intact");
    assert_eq!(out[6].content, big, "a wider earlier read is kept");
    assert_eq!(out[8].content, big, "a narrower later read never replaces a wider one");
    assert!(out[10].content.starts_with("[Earlier read of src/c.rs"));
    assert_eq!(out[12].content, big, "verbatim is never touched");
    // Idempotent.
    let (again, r2) = dedup(&out, &mut Archiver::new(None)).unwrap();
    assert_eq!((again, r2.stubbed), (out, 0));
}

#[test]
fn skills_age_into_stubs() {
    let mut skill = Message::user("# Skill: go-style\n".to_string() + &"rule\n".repeat(500));
    skill.meta.skill_names = Some("go-style,testing".into());
    let mut h = vec![skill.clone()];
    for _ in 0..7 {
        h.push(Message::assistant("ok"));
        h.push(Message::user("next"));
    }
    let mut mem = MemoryArchive::new();
    let (out, r) = age_skills(&h, 6, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
    assert_eq!(r.collapsed, 1);
    assert!(
        out[0].meta.skill_collapsed && out[0].content.starts_with("[Skill block aged out — go-style,testing")
    );
    assert_eq!(mem.get(find_markers(&out[0].content)[0]).unwrap(), skill.content.as_bytes());
    let (young, r) = age_skills(&h[..9], 6, &mut Archiver::new(None)).unwrap();
    assert_eq!((r.collapsed, young[0].content.len()), (0, skill.content.len()));
}

#[test]
fn provider_edits_are_mirrored_with_real_markers_counted_in_tool_uses() {
    let (beta, field) = context_edit::request_fields(&EditSettings::default());
    assert_eq!(beta, "context-management-2025-06-27");
    assert_eq!(field["edits"][0]["type"], "clear_tool_uses_20250919");
    assert_eq!(field["edits"][0]["trigger"]["value"], 100_000);
    assert_eq!(field["edits"][0]["keep"]["value"], 5);
    assert_eq!(field["edits"][0]["clear_at_least"]["value"], 20_000);
    // One assistant with three calls: clearing 2 tool uses stubs 2 results, not 2 assistant turns.
    let mut a = Message::assistant("");
    for i in 0..3 {
        a.tool_calls.push(ToolCall {
            id: format!("c{i}"),
            kind: "function".into(),
            name: "run".into(),
            arguments: json!({}),
        });
    }
    let h = vec![
        Message::user("u"),
        a,
        Message::tool("c0", "x".repeat(5000)),
        Message::tool("c1", "y".repeat(5000)),
        Message::tool("c2", "z".repeat(5000)),
    ];
    assert_eq!(
        context_edit::tool_uses_to_clear(
            &h,
            &EditSettings { keep_tool_uses: 1, ..EditSettings::default() },
            150_000
        ),
        2
    );
    assert_eq!(context_edit::tool_uses_to_clear(&h, &EditSettings::default(), 50_000), 0);
    let mut mem = MemoryArchive::new();
    let (out, r) =
        context_edit::mirror(&h, 2, &mut Archiver::new(Some(&mut mem as &mut dyn Archive))).unwrap();
    assert_eq!(r.stubs, 2);
    for (i, orig) in [(2, "x"), (3, "y")] {
        let k = find_markers(&out[i].content);
        assert_eq!(k.len(), 1, "a proper <<ccr:KEY>> marker");
        assert_eq!(mem.get(k[0]).unwrap(), orig.repeat(5000).as_bytes());
    }
    assert_eq!(out[4].content, "z".repeat(5000));
}

#[test]
fn budget_catalog_and_calibration() {
    assert_eq!(budget(200_000, Surface::Chat.ratio(), 4.0, None), 600_000);
    assert_eq!(budget(200_000, Surface::Agent.ratio(), 4.0, None), 480_000);
    assert_eq!(budget(200_000, Surface::Manual.ratio(), 4.0, None), 400_000);
    assert_eq!(
        budget(200_000, Surface::Preflight.ratio(), 4.0, Some(131_072)),
        91_750,
        "capped at cap x 0.7"
    );
    assert!(needs_compaction(600_001, 600_000) && !needs_compaction(600_000, 600_000), "strictly over");
    assert_eq!(model_info(Some("claude-sonnet-4-5"), None).context_window, 200_000);
    assert_eq!(model_info(Some("anthropic.claude-sonnet-4"), None).context_window, 200_000);
    assert_eq!(model_info(Some("gpt-4o-mini"), None).context_window, 128_000);
    assert_eq!(model_info(Some("gemini-2.5-pro"), None).context_window, 1_048_576);
    assert_eq!(model_info(Some("grok-4"), None).context_window, 256_000);
    assert_eq!(model_info(Some("mistral-large-latest"), None).context_window, 131_072);
    assert_eq!(model_info(Some("something-new"), None), salvage_recovery::budget::DEFAULT_MODEL);
    assert_eq!(
        model_info(Some("claude-sonnet-4"), Some(64_000)).context_window,
        64_000,
        "CHATCLI_CONTEXT_WINDOW wins"
    );
    let mut c = Calibration::default();
    assert_eq!(c.tokens(4000), 1000);
    c.observe(300_000, 100_000);
    assert!((c.chars_per_token - 3.0).abs() < 1e-9);
    c.observe(300_000, 100_000);
    assert!((c.chars_per_token - 3.0).abs() < 1e-9);
    c.observe(0, 10);
    assert_eq!(c.samples, 2);
}
