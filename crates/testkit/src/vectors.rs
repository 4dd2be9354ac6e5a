//! Loading the acceptance vectors of `../shared/spec/vectors/` (used by tests across the workspace).
//!
//! A vector file is a JSON array of `{id, input, expect, note?}`. Long strings are written as
//! generators: `{"repeat": s, "times": n}` and `{"concat": [..]}`; [`expand`] resolves them.

use serde_json::Value;
use std::path::PathBuf;

/// One acceptance case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case id, named by a failing test.
    pub id: String,
    /// The input, generators expanded.
    pub input: Value,
    /// The expectation, generators expanded.
    pub expect: Value,
}

/// The vectors folder: `SALVAGE_VECTORS` if set, else `shared/spec/vectors` beside the repository.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SALVAGE_VECTORS") {
        return PathBuf::from(d);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/vectors")
}

/// Loads every case of a vector file, with generators expanded.
pub fn load(name: &str) -> Result<Vec<Case>, String> {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Value::Array(cases) = value else {
        return Err(format!("{}: not an array", path.display()));
    };
    cases
        .into_iter()
        .map(|c| {
            let id = c.get("id").and_then(Value::as_str).ok_or("case without id")?.to_string();
            Ok(Case {
                input: expand(c.get("input").cloned().unwrap_or(Value::Null)),
                expect: expand(c.get("expect").cloned().unwrap_or(Value::Null)),
                id,
            })
        })
        .collect()
}

/// Resolves `{"repeat","times"}` and `{"concat"}` generators anywhere in a value.
pub fn expand(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            if let (Some(r), Some(t), 2) =
                (map.get("repeat"), map.get("times").and_then(Value::as_u64), map.len())
            {
                let unit = match expand(r.clone()) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                return Value::String(unit.repeat(usize::try_from(t).unwrap_or(0)));
            }
            if let (Some(Value::Array(parts)), 1) = (map.get("concat"), map.len()) {
                let mut s = String::new();
                for p in parts {
                    match expand(p.clone()) {
                        Value::String(x) => s.push_str(&x),
                        other => s.push_str(&other.to_string()),
                    }
                }
                return Value::String(s);
            }
            Value::Object(map.into_iter().map(|(k, v)| (k, expand(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(expand).collect()),
        other => other,
    }
}
