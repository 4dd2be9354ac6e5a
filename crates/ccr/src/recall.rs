//! Recall requests: extracting keys from every form a model or a person writes them in, and
//! rendering what the archive returns.
//!
//! Accepted, case-insensitively and with spaces inside: `<<ccr:K>>`, `<ccr:K>`, `ccr:K`, a bare
//! exact key (the whole request), and the same inside the JSON fields `key`, `keys`, `marker`,
//! `markers`, `ccr`, `id`. K is 16 to 64 hex characters. A bare hex word inside prose is not a
//! request. Keys come out distinct, lowercase, in first-seen order.

use crate::archive::{Ccr, CcrError};
use salvage_types::ccr_key::{marker_for, MARKER_HEX_LEN};
use serde_json::Value;

/// JSON fields whose string values may hold bare keys.
pub const KEY_FIELDS: &[&str] = &["key", "keys", "marker", "markers", "ccr", "id"];
/// What a recall of a missing key says.
pub const NOT_FOUND: &str = "[not found — expired or evicted from the local store]";
/// What a malformed key request says.
pub const MALFORMED: &str = "a CCR key needs 16 hex characters (up to 64), e.g. <<ccr:d74981efa70a0c88>>";

/// True for the recall tool's names: `@recall`, `recall`, any case, surrounding spaces.
pub fn is_recall_tool(name: &str) -> bool {
    let n = name.trim();
    let n = n.strip_prefix('@').unwrap_or(n);
    n.eq_ignore_ascii_case("recall")
}

fn hex_run(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_hexdigit).count()
}

/// Keys written as `ccr:K` (with or without `<`/`<<` around, spaces allowed), with their position.
fn marker_keys(text: &str, out: &mut Vec<(usize, String)>) {
    let lower = text.to_ascii_lowercase();
    for (start, _) in lower.match_indices("ccr") {
        let Some(rest) = lower.get(start..).and_then(|r| r.strip_prefix("ccr")) else { continue };
        let rest = rest.trim_start_matches([' ', '\t']);
        let Some(rest) = rest.strip_prefix(':') else { continue };
        let rest = rest.trim_start_matches([' ', '\t']);
        let n = hex_run(rest);
        if let Some(key) = rest.get(..n).filter(|_| (MARKER_HEX_LEN..=64).contains(&n)) {
            out.push((start, key.to_string()));
        }
    }
}

fn is_bare_key(s: &str) -> bool {
    let t = s.trim();
    (MARKER_HEX_LEN..=64).contains(&t.len()) && hex_run(t) == t.len()
}

fn json_keys(v: &Value, text: &str, out: &mut Vec<(usize, String)>) {
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                if KEY_FIELDS.contains(&k.as_str()) {
                    let strings: Vec<&str> = match val {
                        Value::String(s) => vec![s.as_str()],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    for s in strings {
                        if is_bare_key(s) {
                            let key = s.trim().to_ascii_lowercase();
                            let pos = text.find(s.trim()).unwrap_or(usize::MAX);
                            out.push((pos, key));
                        }
                    }
                }
                json_keys(val, text, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| json_keys(x, text, out)),
        _ => {}
    }
}

/// The keys a recall request names, distinct, lowercase, in first-seen order.
pub fn extract_keys(text: &str) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    marker_keys(text, &mut found);
    if is_bare_key(text) {
        found.push((0, text.trim().to_ascii_lowercase()));
    } else if text.trim_start().starts_with(['{', '[']) {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            json_keys(&v, text, &mut found);
        }
    }
    found.sort_by_key(|(pos, _)| *pos);
    let mut out: Vec<String> = Vec::new();
    for (_, k) in found {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// One recalled key's result.
#[derive(Debug)]
pub struct Recalled {
    /// The key as asked.
    pub key: String,
    /// The verified original, or why not.
    pub result: Result<Vec<u8>, CcrError>,
}

/// Looks every key up.
pub fn recall_all(ccr: &Ccr<'_>, keys: &[String]) -> Vec<Recalled> {
    keys.iter().map(|k| Recalled { key: k.clone(), result: ccr.get(k) }).collect()
}

/// Renders several results as labelled sections (a single found key renders as its bytes).
pub fn render(results: &[Recalled]) -> Vec<u8> {
    if let [one] = results {
        if let Ok(bytes) = &one.result {
            return bytes.clone();
        }
    }
    let mut out = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let label = marker_for(&r.key);
        match &r.result {
            Ok(bytes) => {
                out.extend_from_slice(format!("=== {label} ({} bytes) ===\n", bytes.len()).as_bytes());
                out.extend_from_slice(bytes);
                if !bytes.ends_with(b"\n") {
                    out.push(b'\n');
                }
            }
            Err(CcrError::NotFound { .. }) => {
                out.extend_from_slice(format!("=== {label} ===\n{NOT_FOUND}\n").as_bytes());
            }
            Err(e) => out.extend_from_slice(format!("=== {label} ===\n[{e}]\n").as_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longer_keys_and_arrays() {
        let k64 = "ab".repeat(32);
        assert_eq!(extract_keys(&format!("ccr:{k64}")), vec![k64.clone()]);
        assert_eq!(
            extract_keys(r#"{"keys":["1111222233334444","5555666677778888"],"note":"x"}"#),
            vec!["1111222233334444", "5555666677778888"]
        );
        assert_eq!(extract_keys(&format!("ccr:{}", "a".repeat(65))), Vec::<String>::new());
        assert_eq!(extract_keys("{not json ccr:1111222233334444"), vec!["1111222233334444"]);
    }
}
