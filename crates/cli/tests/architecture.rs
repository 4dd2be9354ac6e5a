//! The dependency direction of `guide/architecture.md`, enforced: a crate that gains a forbidden
//! dependency fails this test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

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

/// Normal (non-dev) dependencies of every workspace package.
fn deps() -> BTreeMap<String, BTreeSet<String>> {
    let meta = metadata();
    let mut map = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let d: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        map.insert(name, d);
    }
    map
}

/// Which salvage crates each crate may use: `cli → replay → {recovery, journal, ccr, wire} → types`;
/// `journal, ccr → store`.
fn allowed_internal(name: &str) -> &'static [&'static str] {
    match name {
        "salvage-types" => &[],
        "salvage-store" => &[],
        "salvage-wire" => &["salvage-types"],
        "salvage-recovery" => &["salvage-types"],
        "salvage-ccr" => &["salvage-types", "salvage-store"],
        "salvage-journal" => &["salvage-types", "salvage-store", "salvage-ccr"],
        "salvage-adapters" => &["salvage-types", "salvage-recovery", "salvage-ccr"],
        "salvage-replay" => &[
            "salvage-types",
            "salvage-store",
            "salvage-ccr",
            "salvage-journal",
            "salvage-recovery",
            "salvage-wire",
            "salvage-adapters",
        ],
        // The proxy executes the turn engine live; it weighs captures as the replay does.
        "salvage-proxy" => &[
            "salvage-types",
            "salvage-ccr",
            "salvage-journal",
            "salvage-recovery",
            "salvage-wire",
            "salvage-replay",
        ],
        "salvage-cli" => &[
            "salvage-types",
            "salvage-store",
            "salvage-ccr",
            "salvage-journal",
            "salvage-recovery",
            "salvage-wire",
            "salvage-replay",
            "salvage-adapters",
            "salvage-proxy",
        ],
        "salvage-bench" => &[
            "salvage-types",
            "salvage-store",
            "salvage-ccr",
            "salvage-journal",
            "salvage-recovery",
            "salvage-wire",
            "salvage-replay",
            "salvage-adapters",
            "salvage-proxy",
        ],
        other => panic!("{other}: a new crate must be placed in the dependency graph here"),
    }
}

#[test]
fn internal_arrows_point_one_way() {
    for (name, d) in deps() {
        let allowed = allowed_internal(&name);
        for dep in d.iter().filter(|d| d.starts_with("salvage-")) {
            assert!(allowed.contains(&dep.as_str()), "{name} must not depend on {dep}");
        }
    }
}

#[test]
fn types_stays_light() {
    let all = deps();
    let light = [
        "serde",
        "serde_json",
        "blake3",
        "chrono",
        "thiserror",
        "base64",
        "imagesize",
        "serde_path_to_error",
    ];
    for dep in &all["salvage-types"] {
        assert!(light.contains(&dep.as_str()), "salvage-types must not depend on {dep}");
    }
}

#[test]
fn recovery_is_pure_logic() {
    let all = deps();
    let Some(d) = all.get("salvage-recovery") else { panic!("salvage-recovery exists") };
    for forbidden in
        ["rusqlite", "zstd", "salvage-store", "salvage-ccr", "salvage-journal", "tokio", "reqwest", "chrono"]
    {
        assert!(!d.contains(forbidden), "salvage-recovery must not depend on {forbidden}");
    }
}
