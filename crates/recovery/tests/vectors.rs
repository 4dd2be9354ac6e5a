//! Every case of classify, sizes (cap, pre-flight, floor), ladder, shrink, pairing, notice and
//! escalation vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use salvage_recovery::archive::{Archive, Archiver, MemoryArchive};
use salvage_recovery::classify::{classify, FailureInput};
use salvage_recovery::escalation::{Escalation, CONTINUATION};
use salvage_recovery::ladder::{self, Attempt, Rung, RungContext};
use salvage_recovery::pairing::{self, MISSING_RESULT_CODE};
use salvage_recovery::payload::{self, FloorVerdict};
use salvage_recovery::shrink::shrink;
use salvage_recovery::tool_budget::Limits;
use salvage_testkit::vectors;
use salvage_types::ccr_key::find_markers;
use salvage_types::{History, Message};
use serde_json::Value;

fn history(v: &Value) -> History {
    serde_json::from_value(v.clone()).unwrap()
}

fn lengths(h: &[Message]) -> Vec<u64> {
    h.iter().map(|m| m.content.len() as u64).collect()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

const LIMITS: Limits = Limits { per_result: 20_000, per_turn: 200_000 };

#[test]
fn classify_vectors() {
    let cases = vectors::load("classify.json").unwrap();
    assert!(cases.len() >= 35);
    for c in &cases {
        let input: FailureInput = serde_json::from_value(c.input.clone()).unwrap();
        let got = classify(&input);
        assert_eq!(got.class.as_str(), c.expect["class"].as_str().unwrap(), "{}: {}", c.id, got.reason);
        assert_eq!(got.recoverable, c.expect["recoverable"].as_bool().unwrap(), "{}", c.id);
    }
}

#[test]
fn sizes_cap_preflight_floor_vectors() {
    let cases = vectors::load("sizes.json").unwrap();
    let mut ran = 0;
    for c in &cases {
        let i = &c.input;
        if let Some(l) = i.get("learn_cap") {
            let d = payload::learn_cap(l["rejected"].as_u64(), l["current_cap"].as_u64());
            assert_eq!(d.cap, c.expect["cap"].as_u64().unwrap(), "{}", c.id);
            for want in c.expect.get("message_contains").map(strs).unwrap_or_default() {
                assert!(d.message.contains(&want), "{}: {:?} lacks {want}", c.id, d.message);
            }
            ran += 1;
        } else if let Some(p) = i.get("preflight") {
            let r = payload::preflight(p["cap"].as_u64(), p["history_bytes"].as_u64().unwrap(), false);
            assert_eq!(r.forced_ratio, c.expect["forced_ratio"].as_f64(), "{}", c.id);
            if let Some(m) = c.expect.get("message") {
                assert_eq!(r.message, m.as_str().unwrap(), "{}", c.id);
            }
            if let Some(w) = c.expect.get("warn_once") {
                assert_eq!(r.warn_no_cap, w.as_bool().unwrap(), "{}", c.id);
                let again = payload::preflight(p["cap"].as_u64(), p["history_bytes"].as_u64().unwrap(), true);
                assert!(!again.warn_no_cap, "{}: warned twice", c.id);
            }
            ran += 1;
        } else if let Some(f) = i.get("floor") {
            let d = payload::floor(f["system_bytes"].as_u64().unwrap(), f["rejected"].as_u64().unwrap());
            let want = match c.expect["verdict"].as_str().unwrap() {
                "fail_fast" => FloorVerdict::FailFast,
                "warn" => FloorVerdict::Warn,
                "ok" => FloorVerdict::Ok,
                other => panic!("{}: verdict {other}", c.id),
            };
            assert_eq!(d.verdict, want, "{}", c.id);
            ran += 1;
        }
    }
    assert_eq!(ran, 9, "cap, pre-flight and floor cases");
}

#[test]
fn ladder_vectors() {
    let cases = vectors::load("ladder.json").unwrap();
    assert_eq!(cases.len(), 9);
    for c in &cases {
        let i = &c.input;
        let h = history(&i["history"]);
        let mut mem = MemoryArchive::new();
        let ccr = i.get("ccr").and_then(Value::as_bool).unwrap_or(false);
        let keep = i.get("keep").and_then(Value::as_u64).unwrap_or(10) as usize;
        let mut ctx = RungContext {
            archiver: Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None }),
            keep,
            limits: LIMITS,
            payload_budget: None,
            rung3_keep: ladder::RUNG3_KEEP,
        };
        let outcome = if let Some(used) = i.get("attempts_used") {
            let max = i["max_attempts"].as_u64().unwrap() as u32;
            let a = ladder::attempt(used.as_u64().unwrap() as u32 + 1, max, &h, &mut ctx).unwrap();
            match a {
                Attempt::Exhausted { .. } => {
                    assert_eq!(c.expect["recovered"], false, "{}", c.id);
                    continue;
                }
                Attempt::Ran(o) => *o,
            }
        } else {
            let rung = match i["rung"].as_u64().unwrap() {
                1 => Rung::Aggressive,
                2 => Rung::Emergency,
                _ => Rung::Nuclear,
            };
            ladder::apply(rung, &h, &mut ctx).unwrap()
        };
        drop(ctx);
        let out = &outcome.history;
        let e = &c.expect;
        assert!(pairing::is_valid(out), "{}: pairing valid after every rung", c.id);
        assert!(outcome.report.task_kept, "{}: task kept", c.id);
        if let Some(r) = e.get("recovered") {
            assert_eq!(!outcome.report.no_op, r.as_bool().unwrap(), "{}", c.id);
        }
        if let Some(l) = e.get("lengths") {
            assert_eq!(lengths(out), u64s(l), "{}", c.id);
        }
        if let Some(s) = e.get("content_2") {
            assert_eq!(out[2].content, s.as_str().unwrap(), "{}", c.id);
        }
        if let Some(s) = e.get("content_1") {
            assert_eq!(out[1].content, s.as_str().unwrap(), "{}", c.id);
        }
        if let Some(cs) = e.get("contents") {
            let got: Vec<&str> = out.iter().map(|m| m.content.as_str()).collect();
            assert_eq!(got, strs(cs), "{}", c.id);
        }
        if let Some(t) = e.get("contents_tail") {
            let want = strs(t);
            let got: Vec<&str> = out[out.len() - want.len()..].iter().map(|m| m.content.as_str()).collect();
            assert_eq!(got, want, "{}", c.id);
        }
        if let Some(n) = e.get("len") {
            assert_eq!(out.len() as u64, n.as_u64().unwrap(), "{}", c.id);
        }
        if let Some(n) = e.get("max_len") {
            assert!(out.len() as u64 <= n.as_u64().unwrap(), "{}: {} messages", c.id, out.len());
        }
        if let Some(u) = e.get("contains_user") {
            assert!(
                out.iter().any(|m| m.role.as_str() == "user" && m.content == u.as_str().unwrap()),
                "{}",
                c.id
            );
        }
        if let Some(n) = e.get("no_op") {
            assert_eq!(outcome.report.no_op, n.as_bool().unwrap(), "{}", c.id);
        }
        if e.get("markers_resolve").is_some() {
            let mut recalled = String::new();
            let mut n = 0;
            for m in out {
                for k in find_markers(&m.content) {
                    let bytes = mem.get(k).unwrap_or_else(|| panic!("{}: marker {k} resolves", c.id));
                    recalled.push_str(&String::from_utf8(bytes).unwrap());
                    n += 1;
                }
            }
            assert!(n > 0, "{}: at least one marker", c.id);
            for want in e.get("recall_contains").map(strs).unwrap_or_default() {
                assert!(recalled.contains(&want), "{}: recall contains {want}", c.id);
            }
        }
    }
}

#[test]
fn shrink_vectors() {
    let cases = vectors::load("shrink.json").unwrap();
    for c in &cases {
        let h = history(&c.input["history"]);
        let copy = h.clone();
        let mut mem = MemoryArchive::new();
        let ccr = c.input["ccr"].as_bool().unwrap();
        let mut archiver = Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None });
        let (out, report) = shrink(&h, c.input["budget"].as_u64().unwrap(), &mut archiver).unwrap();
        drop(archiver);
        let e = &c.expect;
        if let Some(l) = e.get("lengths") {
            assert_eq!(lengths(&out), u64s(l), "{}", c.id);
        }
        if let Some(t) = e.get("total_max") {
            assert!(report.after_bytes <= t.as_u64().unwrap(), "{}: {}", c.id, report.after_bytes);
        }
        if e.get("input_unchanged").is_some() {
            assert_eq!(h, copy, "{}", c.id);
        }
        if let Some(n) = e.get("markers") {
            let markers: Vec<&str> = out.iter().flat_map(|m| find_markers(&m.content)).collect();
            assert_eq!(markers.len() as u64, n.as_u64().unwrap(), "{}", c.id);
            if e.get("recall_equals_original").is_some() {
                assert_eq!(mem.get(markers[0]).unwrap(), h[0].content.as_bytes(), "{}", c.id);
            }
        }
    }
}

#[test]
fn pairing_vectors() {
    let cases = vectors::load("pairing.json").unwrap();
    assert_eq!(cases.len(), 11);
    for c in &cases {
        let h = history(&c.input);
        let (out, r) = pairing::repair(&h);
        let e = &c.expect;
        assert!(pairing::is_valid(&out), "{}: valid after repair", c.id);
        let (again, r2) = pairing::repair(&out);
        assert!(r2.is_clean() && again == out, "{}: a second pass repairs nothing", c.id);
        if e.get("unchanged").is_some() {
            assert_eq!(out, h, "{}", c.id);
            assert!(r.is_clean(), "{}", c.id);
        }
        let num = |k: &str| e.get(k).and_then(Value::as_u64);
        if let Some(n) = num("synthetic") {
            assert_eq!(r.synthetic as u64, n, "{}", c.id);
        }
        if let Some(n) = num("orphans") {
            assert_eq!(r.orphans as u64, n, "{}", c.id);
        }
        if let Some(ids) = e.get("orphan_ids") {
            assert_eq!(r.orphan_ids, strs(ids), "{}", c.id);
        }
        if let Some(n) = num("len") {
            assert_eq!(out.len() as u64, n, "{}", c.id);
        }
        if let Some(n) = num("relocated") {
            assert_eq!(r.relocated as u64, n, "{}", c.id);
        }
        if let Some(n) = num("pruned_calls") {
            assert_eq!(r.pruned_calls as u64, n, "{}", c.id);
        }
        if let Some(n) = num("calls_left") {
            assert_eq!(out[0].tool_calls.len() as u64, n, "{}", c.id);
        }
        if let Some(n) = num("second_pass_repairs") {
            assert_eq!(u64::from(!r2.is_clean()), n, "{}", c.id);
        }
        if let Some(roles) = e.get("roles") {
            let got: Vec<&str> = out.iter().map(|m| m.role.as_str()).collect();
            assert_eq!(got, strs(roles), "{}", c.id);
        }
        if let Some(map) = e.get("contents_at").and_then(Value::as_object) {
            for (k, v) in map {
                assert_eq!(out[k.parse::<usize>().unwrap()].content, v.as_str().unwrap(), "{} at {k}", c.id);
            }
        }
        if let Some(at) = e.get("synthetic_at") {
            for i in u64s(at) {
                let m = &out[i as usize];
                assert_eq!(m.error_code.as_deref(), Some(MISSING_RESULT_CODE), "{} at {i}", c.id);
            }
        }
        if e.get("synthetic_is_error").is_some() {
            let s = out.iter().find(|m| m.error_code.is_some()).unwrap();
            assert!(s.is_error);
            assert_eq!(s.error_code.as_deref(), e["synthetic_error_code"].as_str());
        }
        if let Some(ids) = e.get("tool_call_ids") {
            let got: Vec<String> = out.iter().filter_map(|m| m.tool_call_id.clone()).collect();
            assert_eq!(got, strs(ids), "{}", c.id);
        }
    }
}

#[test]
fn notice_vectors() {
    for c in &vectors::load("notice.json").unwrap() {
        let h = history(&c.input["history"]);
        assert_eq!(
            payload::notice_already_injected(&h),
            c.expect["already_injected"].as_bool().unwrap(),
            "{}",
            c.id
        );
    }
    assert!(payload::notice_message().content.starts_with(payload::NOTICE_MARKER));
}

#[test]
fn escalation_vectors() {
    for c in &vectors::load("escalation.json").unwrap() {
        let i = &c.input;
        if i.get("continuation").is_some() {
            assert_eq!(CONTINUATION, c.expect["text"].as_str().unwrap(), "{}", c.id);
            continue;
        }
        let mut esc = Escalation::default();
        let mut current = i["current"].as_u64();
        let default = i["provider_default"].as_u64().unwrap();
        let cap = i["cap"].as_u64().unwrap();
        let mut got = Vec::new();
        for _ in 0..i["calls"].as_u64().unwrap() {
            let s = esc.step(current, default, cap, 2);
            got.push(serde_json::json!([s.max_tokens, s.escalated]));
            current = Some(s.max_tokens);
        }
        assert_eq!(Value::Array(got), c.expect["results"], "{}", c.id);
        if let Some(n) = c.expect.get("escalations_used") {
            assert_eq!(u64::from(esc.used), n.as_u64().unwrap(), "{}", c.id);
        }
    }
}

#[test]
fn microcompact_vectors() {
    use salvage_recovery::microcompact::{microcompact, Ages};
    let cases = vectors::load("microcompact.json").unwrap();
    assert_eq!(cases.len(), 8);
    for c in &cases {
        let h = history(&c.input["history"]);
        let mut mem = MemoryArchive::new();
        let ccr = c.input["ccr"].as_bool().unwrap();
        let turn = c.input["current_turn"].as_u64().unwrap() as u32;
        let (out, r) = {
            let mut archiver = Archiver::new(if ccr { Some(&mut mem as &mut dyn Archive) } else { None });
            microcompact(&h, turn, Ages { truncate: 2, summarize: 4 }, &mut archiver, &|_| None).unwrap()
        };
        let e = &c.expect;
        if let Some(n) = e.get("truncated") {
            assert_eq!(r.truncated, n.as_u64().unwrap(), "{}", c.id);
        }
        if let Some(n) = e.get("summarized") {
            assert_eq!(r.summarized, n.as_u64().unwrap(), "{}", c.id);
        }
        if e.get("unchanged").is_some() {
            assert_eq!(out, h, "{}", c.id);
        }
        if let Some(n) = e.get("markers") {
            let markers: Vec<&str> = out.iter().flat_map(|m| find_markers(&m.content)).collect();
            assert_eq!(markers.len() as u64, n.as_u64().unwrap(), "{}", c.id);
        }
        if let Some(i) = e.get("recall_equals_original_at") {
            let i = i.as_u64().unwrap() as usize;
            let k = find_markers(&out[i].content)[0];
            assert_eq!(mem.get(k).unwrap(), h[i].content.as_bytes(), "{}", c.id);
        }
        for (field, exact) in [("length_at", false), ("contains_at", false), ("content_at", true)] {
            if let Some(map) = e.get(field).and_then(Value::as_object) {
                for (k, v) in map {
                    let m = &out[k.parse::<usize>().unwrap()];
                    match (field, v) {
                        ("length_at", v) => {
                            assert_eq!(m.content.len() as u64, v.as_u64().unwrap(), "{} at {k}", c.id)
                        }
                        (_, Value::String(s)) if exact => assert_eq!(&m.content, s, "{} at {k}", c.id),
                        (_, Value::String(s)) => assert!(m.content.contains(s.as_str()), "{} at {k}", c.id),
                        _ => panic!("{}: {field}", c.id),
                    }
                }
            }
        }
    }
    // Markers survive from the preview to the stub, and the stub counts the original.
    let mut h = history(&cases[0].input["history"]);
    let original = h[2].content.clone();
    let mut mem = MemoryArchive::new();
    let (mid, _) = microcompact(
        &h,
        2,
        Ages { truncate: 2, summarize: 4 },
        &mut Archiver::new(Some(&mut mem as &mut dyn Archive)),
        &|_| None,
    )
    .unwrap();
    let key = find_markers(&mid[2].content)[0].to_string();
    h = mid;
    for _ in 0..2 {
        h.push(Message::user("n"));
        h.push(Message::assistant("ok"));
    }
    let mem2 = mem.clone();
    let (late, r) = microcompact(
        &h,
        6,
        Ages { truncate: 2, summarize: 4 },
        &mut Archiver::new(Some(&mut mem as &mut dyn Archive)),
        &|k| mem2.get(k),
    )
    .unwrap();
    assert_eq!(r.summarized, 1);
    assert_eq!(find_markers(&late[2].content), vec![key.as_str()]);
    assert!(
        late[2]
            .content
            .starts_with(&format!("[Old tool result cleared — 301 lines, {} chars, text]", original.len())),
        "{}",
        late[2].content
    );
}

#[test]
fn gate_vectors() {
    let cases = vectors::load("gate.json").unwrap();
    assert_eq!(cases.len(), 7);
    for c in &cases {
        let summary = c.input["summary"].as_str().unwrap();
        let seg = c.input["segment_chars"].as_u64().unwrap() as usize;
        let got = salvage_recovery::gate::check(summary, seg);
        assert_eq!(got.is_ok(), c.expect["pass"].as_bool().unwrap(), "{}: {got:?}", c.id);
    }
}
