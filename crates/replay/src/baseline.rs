//! Comparing a replay with a previous one (`replay --baseline PREV.json`): the previous run's
//! `--json` report is read back and every capture present in both is compared. Flagged as
//! regressions: an outcome that changed, a capture that passed and now fails, more recovery
//! attempts, and the accepted request's bytes or tokens (estimated or real) up by more than a
//! threshold. Captures new in this run, or only in the baseline (another shard), are noted.

use crate::corpus::CaptureReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// One difference from the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The capture.
    pub id: String,
    /// `outcome`, `passed`, `attempts`, `bytes`, `estimated_tokens` or `real_tokens`.
    pub what: String,
    /// The baseline's value.
    pub before: serde_json::Value,
    /// This run's value.
    pub after: serde_json::Value,
    /// A sentence for people.
    pub detail: String,
}

/// The comparison.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    /// The threshold in percent for bytes and tokens.
    pub threshold_percent: f64,
    /// Regressions (each makes the run fail).
    pub regressions: Vec<Change>,
    /// Improvements (for information).
    pub improvements: Vec<Change>,
    /// Captures not in the baseline.
    pub new: Vec<String>,
    /// Captures of the baseline not in this run.
    pub missing: Vec<String>,
}

/// Why a baseline could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct BaselineError {
    /// The file.
    pub file: String,
    /// What is wrong.
    pub problem: String,
}

/// The fields of a previous report entry this comparison reads.
#[derive(Debug, Clone, serde::Deserialize)]
struct Prev {
    outcome: String,
    #[serde(default)]
    attempts: u64,
    #[serde(default)]
    request_bytes: Vec<u64>,
    #[serde(default)]
    estimated_tokens: Vec<u64>,
    #[serde(default)]
    real_tokens: Vec<Option<u64>>,
    #[serde(default)]
    checks: Vec<PrevCheck>,
    #[serde(default)]
    expect_met: Option<bool>,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct PrevCheck {
    ok: bool,
}

/// Reads a `replay --json` report.
pub fn read(file: &str, text: &str) -> Result<BTreeMap<String, serde_json::Value>, BaselineError> {
    let err = |problem: String| BaselineError { file: file.to_string(), problem };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    let caps = match v.get("captures") {
        Some(c) => c.as_array().ok_or_else(|| err("captures: not an array".into()))?,
        None => return Err(err("captures: missing (expected the output of `salvage replay --json`)".into())),
    };
    let mut out = BTreeMap::new();
    let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, c) in caps.iter().enumerate() {
        let id = match c.get("id") {
            Some(x) => x.as_str().ok_or_else(|| err(format!("captures[{i}].id: not a string")))?,
            None if c.is_object() => return Err(err(format!("captures[{i}].id: missing"))),
            None => return Err(err(format!("captures[{i}]: not an object"))),
        };
        if let Some(j) = first_at.insert(id.to_string(), i) {
            return Err(err(format!("captures[{i}].id: {id} is also captures[{j}] (one entry per capture)")));
        }
        // Every field the comparison reads has its type, or the file is refused: an entry read
        // as "new" because one of its fields was wrong would hide that capture's regressions.
        let prev = serde_path_to_error::deserialize::<_, Prev>(c).map_err(|e| {
            let at = match e.path().to_string().as_str() {
                "." => format!("captures[{i}]"),
                p => format!("captures[{i}].{p}"),
            };
            err(format!("{at}: {} (capture {id})", e.inner()))
        })?;
        if salvage_types::capture::Outcome::parse(&prev.outcome).is_none() {
            return Err(err(format!(
                "captures[{i}].outcome: unknown outcome {:?} (capture {id})",
                prev.outcome
            )));
        }
        out.insert(id.to_string(), c.clone());
    }
    Ok(out)
}

fn up_by(before: u64, after: u64, pct: f64) -> bool {
    after.checked_sub(before).is_some_and(|d| d > 0 && d as f64 > before as f64 * pct / 100.0)
}

/// Compares this run's reports with the baseline's entries.
pub fn compare(
    current: &[CaptureReport],
    baseline: &BTreeMap<String, serde_json::Value>,
    threshold_percent: f64,
) -> Comparison {
    let mut c = Comparison { threshold_percent, ..Comparison::default() };
    for r in current {
        let Some(prev) = baseline.get(&r.id).and_then(|v| serde_json::from_value::<Prev>(v.clone()).ok())
        else {
            c.new.push(r.id.clone());
            continue;
        };
        let mut flags = Flags { c: &mut c, id: &r.id };
        compare_verdicts(r, &prev, &mut flags);
        // The accepted (last) request, only when both runs got one accepted.
        let accepted = |o: &str| o == "recovered" || o == "no_failure";
        if accepted(&prev.outcome) && accepted(r.outcome.as_str()) {
            compare_sizes(r, &prev, threshold_percent, &mut flags);
        }
    }
    let ids: std::collections::BTreeSet<&str> = current.iter().map(|r| r.id.as_str()).collect();
    c.missing = baseline.keys().filter(|k| !ids.contains(k.as_str())).cloned().collect();
    c
}

/// Where one capture's differences go.
struct Flags<'c> {
    c: &'c mut Comparison,
    id: &'c str,
}

impl Flags<'_> {
    /// A regression when `worse`, else an improvement.
    fn flag(
        &mut self,
        what: &str,
        before: serde_json::Value,
        after: serde_json::Value,
        detail: String,
        worse: bool,
    ) {
        let ch = Change { id: self.id.to_string(), what: what.into(), before, after, detail };
        if worse {
            self.c.regressions.push(ch);
        } else {
            self.c.improvements.push(ch);
        }
    }
}

/// The outcome, whether the capture passed, and the recovery attempts.
fn compare_verdicts(r: &CaptureReport, prev: &Prev, flags: &mut Flags<'_>) {
    let outcome = r.outcome.as_str();
    if prev.outcome != outcome {
        flags.flag(
            "outcome",
            prev.outcome.clone().into(),
            outcome.into(),
            format!("outcome {} → {outcome}", prev.outcome),
            true,
        );
    }
    let prev_passed = prev.checks.iter().all(|k| k.ok) && prev.expect_met != Some(false);
    if prev_passed != r.passed() {
        flags.flag(
            "passed",
            prev_passed.into(),
            r.passed().into(),
            if r.passed() { "now passes".into() } else { "passed, now fails".into() },
            prev_passed,
        );
    }
    let attempts = u64::from(r.attempts);
    if attempts != prev.attempts {
        flags.flag(
            "attempts",
            prev.attempts.into(),
            attempts.into(),
            format!("recovery attempts {} → {attempts}", prev.attempts),
            attempts > prev.attempts,
        );
    }
}

/// The accepted request's bytes and tokens (estimated, real): up by more than the threshold is a
/// regression, down by more an improvement.
fn compare_sizes(r: &CaptureReport, prev: &Prev, threshold_percent: f64, flags: &mut Flags<'_>) {
    let pairs: [(&str, Option<u64>, Option<u64>); 3] = [
        ("bytes", prev.request_bytes.last().copied(), r.request_bytes.last().copied()),
        ("estimated_tokens", prev.estimated_tokens.last().copied(), r.estimated_tokens.last().copied()),
        ("real_tokens", prev.real_tokens.last().copied().flatten(), r.real_tokens.last().copied().flatten()),
    ];
    for (what, b, a) in pairs {
        let (Some(b), Some(a)) = (b, a) else { continue };
        if up_by(b, a, threshold_percent) {
            flags.flag(
                what,
                b.into(),
                a.into(),
                format!("accepted request {what} {b} → {a} (over +{threshold_percent}%)"),
                true,
            );
        } else if up_by(a, b, threshold_percent) {
            flags.flag(what, b.into(), a.into(), format!("accepted request {what} {b} → {a}"), false);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::read;

    /// Review finding: an entry with a wrong-typed field was read as a capture new in this run,
    /// so its regressions went unflagged while the comparison said nothing was wrong.
    #[test]
    fn a_wrong_typed_entry_is_refused_naming_its_field() {
        let good = r#"{"captures":[{"id":"a","outcome":"recovered","attempts":2,"request_bytes":[10,5]}]}"#;
        assert_eq!(read("prev.json", good).unwrap().len(), 1);
        let cases = [
            (r#"{"captures":[{"id":"a","outcome":"recovered","attempts":"2"}]}"#, "captures[0].attempts"),
            (
                r#"{"captures":[{"id":"a","outcome":"recovered","request_bytes":[1,"x"]}]}"#,
                "captures[0].request_bytes[1]",
            ),
            (r#"{"captures":[{"id":"a","attempts":1}]}"#, "captures[0]: missing field `outcome`"),
            (
                r#"{"captures":[{"id":"a","outcome":"recovered","checks":[{"ok":"yes"}]}]}"#,
                "captures[0].checks[0].ok",
            ),
            (r#"{"captures":[{"id":"a","outcome":"weird"}]}"#, "captures[0].outcome: unknown outcome"),
            (
                r#"{"captures":[{"id":"a","outcome":"recovered"},{"id":"a","outcome":"exhausted"}]}"#,
                "captures[1].id: a is also captures[0]",
            ),
            (r#"{"captures":{}}"#, "captures: not an array"),
            (r#"{"captures":[{"id":7}]}"#, "captures[0].id: not a string"),
            (r#"{"captures":[[]]}"#, "captures[0]: not an object"),
        ];
        for (text, field) in cases {
            let e = read("prev.json", text).unwrap_err().to_string();
            assert!(e.starts_with("prev.json: ") && e.contains(field), "{field}: {e}");
        }
    }
}
