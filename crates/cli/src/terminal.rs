//! Text printed for people: control characters escaped, shell words quoted.
//!
//! Capture ids, titles, file names, session ids and error texts come from files and flags a user
//! did not necessarily write. Printed raw, an ESC, BEL or CR in them would drive the terminal
//! (rewrite the screen, set the window title, hide a line). Everything a command prints for
//! people goes through [`escape`]; machine output (`--json`, exported files) keeps the bytes, as
//! JSON escaping already makes them inert.

use std::borrow::Cow;
use std::fmt::Write as _;

/// True for characters that must not reach a terminal raw: C0 controls (tab and newline
/// included: a table cell or a one-line error must stay on its line), DEL, C1 controls, and the
/// Unicode bidirectional overrides and isolates that reorder what is shown.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// The text with every unsafe character written as an escape (`\e`, `\r`, `\n`, `\t`, `\x07`,
/// `\u{202e}`), borrowed unchanged when there is none.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if is_unsafe(c) && u32::from(c) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`escape`] for a multi-line block (a report, an error with several lines): line breaks stay,
/// every other unsafe character is escaped.
pub fn escape_block(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split('\n').map(|l| escape(l).into_owned()).collect::<Vec<_>>().join("\n"))
}

/// One shell word for a POSIX shell (bash, zsh, dash): bare when it is made of safe characters,
/// else in single quotes; a word holding control characters uses `$'…'` with `\xHH` escapes, so
/// the hint neither drives the terminal nor changes meaning when pasted.
pub fn shell_quote(s: &str) -> Cow<'_, str> {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        return Cow::Borrowed(s);
    }
    if !s.chars().any(is_unsafe) {
        return Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("plain id-1"), "plain id-1");
        assert_eq!(escape("a\u{1b}]0;pwned\u{7}b\rc\nd"), "a\\e]0;pwned\\x07b\\rc\\nd");
        assert_eq!(escape("x\u{202e}y\u{9b}"), "x\\u{202e}y\\x9b");
        assert_eq!(escape_block("l1\nl2\u{1b}[2J"), "l1\nl2\\e[2J");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(shell_quote("cap@2025-01-01T00:00:00.000Z-1"), "cap@2025-01-01T00:00:00.000Z-1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's; rm -rf ~"), r"'it'\''s; rm -rf ~'");
        assert_eq!(shell_quote("$(id)`x`"), "'$(id)`x`'");
        assert_eq!(shell_quote("a\u{1b}[2Jb'"), r"$'a\x1b[2Jb\''");
        assert_eq!(shell_quote(""), "''");
    }
}
