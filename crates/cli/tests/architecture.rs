//! The dependency direction of `guide/architecture.md`, enforced: a crate that gains a forbidden
//! dependency fails this test.
//!
//! The design's arrows are `cli → replay → {recovery, journal, ccr} → types` and
//! `journal, ccr → store`. [`ARROWS`] lists them, plus the few extra arrows the code needs, each
//! with the reason it exists. A crate may depend on what its arrows point at and on everything
//! reachable from there (replay names `salvage_types::Message` and opens a `salvage_store::Store`
//! without a direct arrow to either); anything else is a violation. Only normal and build
//! dependencies count: a test may use whatever crate it needs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each workspace crate and the salvage crates it points at directly.
const ARROWS: &[(&str, &[&str])] = &[
    ("salvage-types", &[]),
    // Test support (the vectors loader reads the environment and files): a dev-dependency only,
    // so no crate has an arrow to it.
    ("salvage-testkit", &[]),
    ("salvage-store", &[]),
    // The design lets ccr reach store; today ccr borrows a `rusqlite::Connection` the caller
    // opened and names nothing of store, so its Cargo.toml has no such line.
    ("salvage-ccr", &["salvage-types", "salvage-store"]),
    ("salvage-journal", &["salvage-types", "salvage-store", "salvage-ccr"]),
    ("salvage-recovery", &["salvage-types"]),
    // Extra: wire stands beside recovery, at the same level. It maps provider bodies and session
    // files to and from the shared message model and needs nothing but that model.
    ("salvage-wire", &["salvage-types"]),
    // Extra: adapters is the real I/O behind recovery's traits (the archive into CCR, the command
    // and MCP summarizers, the hooks), so recovery itself stays pure logic.
    ("salvage-adapters", &["salvage-recovery", "salvage-ccr"]),
    // replay → wire (extra): attempt 0 is sized and rebuilt in the capture's own wire format.
    ("salvage-replay", &["salvage-recovery", "salvage-journal", "salvage-ccr", "salvage-wire"]),
    // Extra: proxy is a live driver of the same sans-IO turn; it uses replay's model of a
    // capture's request size so that the captures it writes replay with fidelity.
    ("salvage-proxy", &["salvage-replay", "salvage-adapters"]),
    // cli → wire (extra): `import` and `journal export`/`journal import` read and write bodies.
    // cli → adapters (extra): the summarizers `--summarizer cmd:`/`mcp:` plugs into replay and apply.
    // cli → proxy (extra): `salvage proxy`.
    ("salvage-cli", &["salvage-replay", "salvage-proxy", "salvage-wire", "salvage-adapters"]),
    // The benchmark binary measures the library crates under replay and the proxy, as the cli
    // uses them.
    ("salvage-bench", &["salvage-replay", "salvage-proxy"]),
];

/// The salvage crates `name` may depend on: the transitive closure of its arrows, or `None` when
/// the crate has no place in [`ARROWS`].
fn allowed(arrows: &[(&str, &[&str])], name: &str) -> Option<BTreeSet<String>> {
    let direct = |n: &str| arrows.iter().find(|(c, _)| *c == n).map(|(_, d)| *d);
    let mut out = BTreeSet::new();
    let mut todo: Vec<&str> = direct(name)?.to_vec();
    while let Some(d) = todo.pop() {
        if out.insert(d.to_string()) {
            todo.extend(direct(d).unwrap_or(&[]));
        }
    }
    Some(out)
}

/// Every forbidden arrow of `graph` (crate → its normal dependencies), one line each.
fn violations(arrows: &[(&str, &[&str])], graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, deps) in graph {
        let Some(ok) = allowed(arrows, name) else {
            out.push(format!("{name}: a new crate must be placed in ARROWS (architecture.rs) first"));
            continue;
        };
        for dep in deps.iter().filter(|d| d.starts_with("salvage-") && !ok.contains(*d)) {
            out.push(format!("{name} must not depend on {dep} (allowed: {ok:?})"));
        }
    }
    out
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Normal and build (not dev) dependencies of every workspace package.
fn deps() -> BTreeMap<String, BTreeSet<String>> {
    let meta = metadata();
    let mut map = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let d: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        map.insert(name, d);
    }
    map
}

#[test]
fn internal_arrows_point_one_way() {
    let v = violations(ARROWS, &deps());
    assert!(v.is_empty(), "forbidden dependencies:\n{}", v.join("\n"));
}

#[test]
fn the_checker_fails_on_a_forbidden_arrow() {
    let graph = |edges: &[(&str, &[&str])]| -> BTreeMap<String, BTreeSet<String>> {
        edges.iter().map(|(c, d)| (c.to_string(), d.iter().map(|s| s.to_string()).collect())).collect()
    };
    // The design itself passes, with external crates and reachable (not direct) crates allowed.
    let good = graph(&[
        ("salvage-types", &["serde"]),
        ("salvage-replay", &["salvage-types", "salvage-store", "salvage-journal", "salvage-wire"]),
        ("salvage-cli", &["salvage-replay", "salvage-types", "salvage-store", "anyhow"]),
    ]);
    assert_eq!(violations(ARROWS, &good), Vec::<String>::new());
    // Arrows up, sideways, to I/O from pure logic, and a crate the design has no place for.
    let bad = graph(&[
        ("salvage-types", &["salvage-store"]),
        ("salvage-recovery", &["salvage-types", "salvage-ccr"]),
        ("salvage-replay", &["salvage-journal", "salvage-adapters"]),
        ("salvage-journal", &["salvage-replay"]),
        ("salvage-bench", &["salvage-cli", "salvage-replay"]),
        ("salvage-extra", &["salvage-types"]),
    ]);
    let v = violations(ARROWS, &bad);
    let expected = [
        "salvage-bench must not depend on salvage-cli",
        "salvage-extra: a new crate",
        "salvage-journal must not depend on salvage-replay",
        "salvage-recovery must not depend on salvage-ccr",
        "salvage-replay must not depend on salvage-adapters",
        "salvage-types must not depend on salvage-store",
    ];
    assert_eq!(v.len(), expected.len(), "{v:#?}");
    for (got, want) in v.iter().zip(expected) {
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
    // Test support is a dev-dependency only: as a normal dependency it is a violation.
    let kit = graph(&[("salvage-replay", &["salvage-testkit"]), ("salvage-types", &["salvage-testkit"])]);
    let v = violations(ARROWS, &kit);
    assert_eq!(v.len(), 2, "{v:#?}");
    assert!(v.iter().all(|l| l.contains("must not depend on salvage-testkit")), "{v:#?}");
}

#[test]
fn every_arrow_names_a_crate_of_the_table() {
    for (name, deps) in ARROWS {
        for d in *deps {
            assert!(ARROWS.iter().any(|(c, _)| c == d), "{name} → {d}: {d} is not in ARROWS");
        }
    }
}

#[test]
fn types_stays_light() {
    let all = deps();
    let light = ["serde", "serde_json", "blake3", "thiserror", "base64", "imagesize", "serde_path_to_error"];
    for dep in &all["salvage-types"] {
        assert!(light.contains(&dep.as_str()), "salvage-types must not depend on {dep}");
    }
}

#[test]
fn recovery_is_pure_logic() {
    // No database, file format, network or clock: the shared model, serde and typed errors only.
    let all = deps();
    let Some(d) = all.get("salvage-recovery") else { panic!("salvage-recovery exists") };
    let pure = ["salvage-types", "serde", "serde_json", "thiserror"];
    for dep in d {
        assert!(pure.contains(&dep.as_str()), "salvage-recovery must not depend on {dep}");
    }
}
