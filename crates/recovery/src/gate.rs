//! The summary quality gate: empty output, refusals (English and Portuguese) and output shorter
//! than a floor proportional to the segment (capped at 80 chars) are rejected.

/// The floor cap.
pub const FLOOR_CAP: usize = 80;
/// Segment chars per required summary char.
pub const FLOOR_DIVISOR: usize = 40;

const REFUSALS: &[&str] = &[
    "i'm sorry",
    "i am sorry",
    "i cannot help",
    "i can't help",
    "i cannot assist",
    "i can't assist",
    "i'm unable to",
    "i am unable to",
    "as an ai",
    "desculpe",
    "não posso",
    "nao posso",
    "não consigo",
    "sinto muito",
];

/// The gate's verdict: `Ok(())` or why the summary is rejected.
pub fn check(summary: &str, segment_chars: usize) -> Result<(), String> {
    let t = summary.trim();
    if t.is_empty() {
        return Err("empty summary".into());
    }
    let lower: String = t.chars().take(200).collect::<String>().to_lowercase();
    if let Some(r) = REFUSALS.iter().find(|r| lower.contains(*r)) {
        return Err(format!("refusal ({r:?})"));
    }
    let floor = (segment_chars / FLOOR_DIVISOR).min(FLOOR_CAP);
    if t.chars().count() < floor {
        return Err(format!("too short ({} chars, floor {floor})", t.chars().count()));
    }
    Ok(())
}
