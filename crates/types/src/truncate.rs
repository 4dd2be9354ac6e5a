//! Truncation helpers that always cut on a `char` boundary (**\[better\]**: the reference slices
//! bytes and can split a code point).

/// The joint of preserve-end truncation.
pub const TRUNCATED_JOINT: &str = "\n... [truncated] ...\n";

/// Largest index `<= i` that is a char boundary of `s`.
pub fn floor_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    // Index 0 is always a boundary.
    (0..=i).rev().find(|&j| s.is_char_boundary(j)).unwrap_or(0)
}

/// Smallest index `>= i` that is a char boundary of `s`.
pub fn ceil_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    // The end of the string is always a boundary.
    (i..s.len()).find(|&j| s.is_char_boundary(j)).unwrap_or(s.len())
}

/// The first `max` bytes of `s` (fewer if that would split a char).
pub fn head(s: &str, max: usize) -> &str {
    s.split_at_checked(floor_boundary(s, max)).map_or("", |(h, _)| h)
}

/// The last `max` bytes of `s` (fewer if that would split a char).
pub fn tail(s: &str, max: usize) -> &str {
    let start = ceil_boundary(s, s.len().saturating_sub(max));
    s.split_at_checked(start).map_or("", |(_, t)| t)
}

/// Preserve-end truncation of `s` to `max` bytes: head `max·3/4`, tail `max − head − 50`, joined by
/// `\n... [truncated] ...\n`. Returns `None` when `s` already fits.
pub fn preserve_end(s: &str, max: usize) -> Option<String> {
    if s.len() <= max {
        return None;
    }
    let head_len = max.saturating_mul(3) / 4;
    let tail_len = max.saturating_sub(head_len).saturating_sub(50);
    let mut out =
        String::with_capacity(head_len.saturating_add(tail_len).saturating_add(TRUNCATED_JOINT.len()));
    out.push_str(head(s, head_len));
    out.push_str(TRUNCATED_JOINT);
    out.push_str(tail(s, tail_len));
    Some(out)
}

/// Structure-preserving truncation of `s` to about `target` bytes: head `2/3`, tail `1/3`, and the
/// banner `\n\n... [N chars omitted for context efficiency] ...\n\n` between them. Returns `None`
/// when `s` already fits.
pub fn structure_preserving(s: &str, target: usize) -> Option<String> {
    if s.len() <= target {
        return None;
    }
    let h = head(s, target.saturating_mul(2) / 3);
    let t = tail(s, target / 3);
    // Head and tail never overlap: together they are at most `target` bytes, less than `s`.
    let omitted = s.get(h.len()..s.len().saturating_sub(t.len())).unwrap_or_default();
    let n = omitted.chars().count();
    let mut out = String::with_capacity(h.len().saturating_add(t.len()).saturating_add(64));
    out.push_str(h);
    out.push_str("\n\n... [");
    out.push_str(&n.to_string());
    out.push_str(" chars omitted for context efficiency] ...\n\n");
    out.push_str(t);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_splits_a_code_point() {
        let s = "é".repeat(5000); // 2 bytes each
        for max in [100, 101, 777, 4001] {
            let out = preserve_end(&s, max).unwrap();
            assert!(out.len() <= max, "{} > {max}", out.len());
            let out = structure_preserving(&s, max).unwrap();
            assert!(out.starts_with('é') && out.ends_with('é'));
        }
        assert_eq!(head("日本語", 4), "日");
        assert_eq!(tail("日本語", 4), "語");
    }

    #[test]
    fn fitting_input_is_left_alone() {
        assert_eq!(preserve_end("abc", 3), None);
        assert_eq!(structure_preserving("abc", 3), None);
    }

    #[test]
    fn preserve_end_shape() {
        let s = "x".repeat(50_000);
        let out = preserve_end(&s, 4000).unwrap();
        assert_eq!(out.len(), 3000 + TRUNCATED_JOINT.len() + 950);
    }
}
