//! Escaping text into markup (the HTML report, the JUnit XML): the entities both share, each
//! format deciding the rest (apostrophes, line breaks, control characters).

/// Escapes `&`, `<`, `>` and `"` as entities and hands every other character to `other`, which
/// writes it (as is, as an entity, or as visible `\u{…}` text).
pub fn escape_with(s: &str, mut other: impl FnMut(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => other(c, &mut out),
        }
    }
    out
}

/// A character written as visible `\u{…}` text (for what the format cannot or must not carry).
pub fn push_visible(c: char, out: &mut String) {
    out.push_str(&format!("\\u{{{:x}}}", c as u32));
}
