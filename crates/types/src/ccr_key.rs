//! CCR keys and markers: `<<ccr:` + the first 16 lowercase hex characters of `blake3(original)` + `>>`.

use std::fmt;

/// Hex characters in a marker key (the reference client's length).
pub const MARKER_HEX_LEN: usize = 16;
/// What opens a marker.
pub const MARKER_OPEN: &str = "<<ccr:";
/// What closes a marker.
pub const MARKER_CLOSE: &str = ">>";

/// The full identity of an archived original: its 32-byte BLAKE3 hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CcrKey(pub [u8; 32]);

impl CcrKey {
    /// The key of some bytes.
    pub fn of(bytes: &[u8]) -> CcrKey {
        CcrKey(*blake3::hash(bytes).as_bytes())
    }

    /// The key of a value's compact JSON (`of(&serde_json::to_vec(v))`), hashed as it is
    /// serialized: the JSON text is never held.
    pub fn of_json<T: serde::Serialize + ?Sized>(value: &T) -> CcrKey {
        let mut hasher = blake3::Hasher::new();
        hash_json_into(&mut hasher, value);
        CcrKey(*hasher.finalize().as_bytes())
    }

    /// All 64 lowercase hex characters.
    pub fn hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// The 16-hex short key written into markers.
    pub fn short(&self) -> String {
        let mut h = self.hex();
        h.truncate(MARKER_HEX_LEN);
        h
    }

    /// The marker `<<ccr:SHORT>>`.
    pub fn marker(&self) -> String {
        marker_for(&self.short())
    }

    /// Parses 64 hex characters (any case).
    pub fn from_hex(hex: &str) -> Option<CcrKey> {
        blake3::Hash::from_hex(hex.to_ascii_lowercase()).ok().map(|h| CcrKey(*h.as_bytes()))
    }
}

impl fmt::Debug for CcrKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CcrKey({})", self.hex())
    }
}

impl fmt::Display for CcrKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// A key as a user or a marker names it: 16 to 64 lowercase hex characters, a prefix of a hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPrefix(String);

/// Why a text is not a key prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyPrefixError {
    /// Too short or too long.
    #[error("a CCR key needs 16 to 64 hex characters (got {0})")]
    Length(usize),
    /// A character that is not hex.
    #[error("a CCR key needs 16 to 64 hex characters; {0:?} is not hex")]
    NotHex(char),
}

impl KeyPrefix {
    /// Parses a prefix, lowercasing it.
    pub fn parse(text: &str) -> Result<KeyPrefix, KeyPrefixError> {
        if let Some(c) = text.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(KeyPrefixError::NotHex(c));
        }
        if !(MARKER_HEX_LEN..=64).contains(&text.len()) {
            return Err(KeyPrefixError::Length(text.len()));
        }
        Ok(KeyPrefix(text.to_ascii_lowercase()))
    }

    /// The lowercase hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when `key` starts with this prefix.
    pub fn matches(&self, key: &CcrKey) -> bool {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.0.bytes().enumerate().all(|(i, c)| {
            // A prefix has at most 64 hex characters: two per byte of the 32-byte key.
            let Some(b) = key.0.get(i / 2) else { return false };
            let nibble = if i % 2 == 0 { b >> 4 } else { b & 0x0f };
            HEX.get(usize::from(nibble)) == Some(&c)
        })
    }
}

impl fmt::Display for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Feeds `value`'s compact JSON to `hasher` as it is serialized, the JSON text never held whole.
///
/// Design note (performance): the serializer writes a value in fragments of a few bytes (a
/// quote, a key, a run of text between escapes). Handed to BLAKE3 one by one, each fragment is
/// its own `update`, and BLAKE3 compresses them a 64-byte block at a time (about 0.8 GB/s here);
/// gathered into 64 KiB pieces, its SIMD path hashes 16 chunks at once (about 3.4 GB/s). The
/// bytes hashed, and so the hash, are the same.
pub fn hash_json_into<T: serde::Serialize + ?Sized>(hasher: &mut blake3::Hasher, value: &T) {
    // Writing into a hasher cannot fail, and neither can serializing to it.
    hash_written(hasher, |w| drop(serde_json::to_writer(w, value)));
}

/// Feeds what `fill` writes to `hasher`, gathered into large pieces (see [`hash_json_into`]).
pub fn hash_written(hasher: &mut blake3::Hasher, fill: impl FnOnce(&mut dyn std::io::Write)) {
    let mut w = std::io::BufWriter::with_capacity(HASH_PIECE, hasher);
    fill(&mut w);
    // Flushing into a hasher cannot fail.
    let _ = std::io::Write::flush(&mut w);
}

/// The size of the pieces [`hash_json_into`] hands to BLAKE3.
const HASH_PIECE: usize = 64 << 10;

/// The marker for a short key.
pub fn marker_for(short: &str) -> String {
    format!("{MARKER_OPEN}{short}{MARKER_CLOSE}")
}

/// The line appended to content cut in place whose original is archived.
pub fn recoverable_suffix(key: &CcrKey) -> String {
    format!("\n[full content recoverable via @recall {}]", key.marker())
}

/// The prefixes of the one-line stubs salvage writes for content it replaced whole (microcompact,
/// dedup and context-edit stubs, aged skills, aged recall results).
pub const OWN_STUB_PREFIXES: &[&str] = &[
    "[Old tool result cleared — ",
    "[Skill block aged out — ",
    "[Recalled content aged out of the window — ",
    "[Earlier read of ",
    "[Tool result cleared by provider context editing",
];

fn is_short_key(k: &str) -> bool {
    k.len() == MARKER_HEX_LEN && k.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The key of the archived original a text says it was made from, when the text is in a form
/// salvage itself writes: it ends with the recoverable suffix (`\n[full content recoverable via
/// @recall <<ccr:KEY>>]`), or it is one of salvage's one-line stubs ([`OWN_STUB_PREFIXES`]) that
/// ends with a marker. A text that merely quotes a marker (a log line, a pasted marker) gives
/// `None`. Callers must still check that their archive holds the key: provenance is "our form
/// **and** a key we archived", never the form alone.
pub fn own_archive_key(text: &str) -> Option<&str> {
    const SUFFIX_OPEN: &str = "\n[full content recoverable via @recall <<ccr:";
    if let Some(rest) = text.strip_suffix(">>]") {
        if let Some(at) = rest.rfind(SUFFIX_OPEN) {
            let k = rest.get(at.saturating_add(SUFFIX_OPEN.len())..).unwrap_or("");
            if is_short_key(k) {
                return Some(k);
            }
        }
    }
    if text.contains('\n') || !OWN_STUB_PREFIXES.iter().any(|p| text.starts_with(p)) {
        return None;
    }
    let body = text.strip_suffix(']').unwrap_or(text).strip_suffix(MARKER_CLOSE)?;
    let at = body.rfind(MARKER_OPEN)?;
    let k = body.get(at.saturating_add(MARKER_OPEN.len())..)?;
    is_short_key(k).then_some(k)
}

/// The key of the archived original `text` was made from, when it was: `text` is in a form
/// salvage writes ([`own_archive_key`]), `get` finds the key's original, **and** `text` can have
/// been made from that original ([`made_from`]). This is what "archived by us" means: a pasted
/// suffix or stub naming a key that holds other content (a marker quoted from an earlier answer,
/// a blob put by hand) is ordinary content, archived before it is cut like any other.
pub fn archived_key(text: &str, get: impl FnOnce(&str) -> Option<Vec<u8>>) -> Option<&str> {
    let k = own_archive_key(text)?;
    let original = get(k)?;
    made_from(text, &String::from_utf8_lossy(&original)).then_some(k)
}

/// True when `text` (a cut ending with salvage's recoverable suffix, or one of its stubs) can
/// have been made from `original`:
/// - a cut's text before the suffix is made of the original's pieces, in order, between the
///   joints salvage's truncations write ([`crate::cut::derivable`]): nothing in it is new;
/// - a stub that counts the characters it replaced (`12 lines, 3456 chars`) counts the
///   original's; any other stub is shorter than the original it replaced. A stub is salvage's
///   description of its original, not a part of it: it is recognised (so it is not stubbed
///   again), never cut as if its text were in the original ([`is_cut`] tells the two apart).
pub fn made_from(text: &str, original: &str) -> bool {
    let Some(body) = strip_recoverable_suffix(text) else {
        return match stub_char_count(text) {
            Some(n) => n == original.chars().count(),
            None => original.len() > text.len(),
        };
    };
    crate::cut::derivable(body, original)
}

/// True when `text` ends with salvage's recoverable suffix (a cut), as opposed to a stub.
pub fn is_cut(text: &str) -> bool {
    strip_recoverable_suffix(text).is_some()
}

/// The `N` of the first `N chars` a stub says it replaced.
fn stub_char_count(stub: &str) -> Option<usize> {
    let before = stub.split_once(" chars")?.0;
    let digits = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// The text before salvage's recoverable suffix, when the text ends with one.
pub fn strip_recoverable_suffix(text: &str) -> Option<&str> {
    let k = own_archive_key(text)?;
    let suffix = format!("\n[full content recoverable via @recall {}]", marker_for(k));
    text.strip_suffix(suffix.as_str())
}

/// The canonical markers (`<<ccr:` + 16 lowercase hex + `>>`) in a text, in order, repeats kept.
pub fn find_markers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((_, after)) = rest.split_once(MARKER_OPEN) {
        let marker = after
            .split_at_checked(MARKER_HEX_LEN)
            .filter(|(key, _)| is_short_key(key))
            .and_then(|(key, tail)| Some((key, tail.strip_prefix(MARKER_CLOSE)?)));
        match marker {
            Some((key, tail)) => {
                out.push(key);
                rest = tail;
            }
            None => rest = after,
        }
    }
    out
}

/// True when a text carries at least one canonical marker.
pub fn has_marker(text: &str) -> bool {
    !find_markers(text).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_is_made_from_its_original_and_a_pasted_suffix_is_not() {
        let original: String = (0..3000).map(|i| format!("line {i} of the original\n")).collect();
        let k = CcrKey::of(original.as_bytes());
        let suffix = recoverable_suffix(&k);
        // Every cut salvage makes, and a cut of a cut.
        let cuts = [
            crate::truncate::structure_preserving(&original, 20_000).unwrap(),
            crate::truncate::preserve_end(&original, 4_000).unwrap(),
            crate::truncate::head(&original, 5_000).to_string(),
        ];
        for cut in &cuts {
            let text = format!("{cut}{suffix}");
            assert!(made_from(&text, &original), "{}", &cut[..80]);
            let again = crate::truncate::structure_preserving(cut, cut.len() / 2).unwrap();
            assert!(made_from(&format!("{again}{suffix}"), &original));
        }
        // A text that ends with the suffix of a key holding something else is not a cut of it:
        // a user's task, or a short note, quoting the line.
        let task: String = (0..2000).map(|i| format!("task step {i}\n")).collect();
        assert!(!made_from(&format!("{task}{suffix}"), &original));
        assert!(!made_from(&format!("hi{suffix}"), &original));
        assert!(!made_from(&format!("{task}{suffix}"), "unrelated decoy content\n"));
        // Not shorter than the original: not a cut.
        assert!(!made_from(&format!("{original}{suffix}"), &original));
        // Through a lookup: the key is given only when the original it names was the source.
        let text = format!("{}{suffix}", cuts[0]);
        let short = k.short();
        assert_eq!(
            archived_key(&text, |q| (q == short).then(|| original.clone().into_bytes())),
            Some(short.as_str())
        );
        assert_eq!(archived_key(&text, |_| Some(b"decoy".to_vec())), None);
        assert_eq!(archived_key(&text, |_| None), None);
    }

    #[test]
    fn a_stub_is_made_from_the_original_it_counts() {
        let original = "x".repeat(5000);
        let m = CcrKey::of(original.as_bytes()).marker();
        assert!(made_from(&format!("[Old tool result cleared — 1 lines, 5000 chars, text] {m}"), &original));
        assert!(!made_from(&format!("[Old tool result cleared — 1 lines, 4999 chars, text] {m}"), &original));
        assert!(made_from(&format!("[Skill block aged out — s — recoverable via @recall {m}]"), &original));
        assert!(!made_from(&format!("[Skill block aged out — s — recoverable via @recall {m}]"), "tiny"));
    }

    #[test]
    fn key_and_marker_shape() {
        let k = CcrKey::of(b"hello world");
        assert_eq!(k.hex().len(), 64);
        assert_eq!(k.marker(), format!("<<ccr:{}>>", &k.hex()[..16]));
        assert_eq!(CcrKey::from_hex(&k.hex().to_uppercase()), Some(k));
    }

    #[test]
    fn the_key_of_a_value_is_the_key_of_its_compact_json() {
        let h = vec![crate::Message::user("a \"quoted\" line\n"), crate::Message::assistant("é ✓")];
        let json = serde_json::to_vec(&h).unwrap_or_default();
        assert_eq!(CcrKey::of_json(&h), CcrKey::of(&json));
        assert_ne!(CcrKey::of_json(&h[..1]), CcrKey::of(&json));
    }

    /// The hashing is gathered in pieces: a value whose JSON ends just before, at and after a
    /// piece's edge, and one of many pieces with escapes cut across the edges, hashes as its JSON.
    #[test]
    fn values_across_the_hashing_pieces_hash_as_their_json() {
        for len in [0, 1, HASH_PIECE - 20, HASH_PIECE - 19, HASH_PIECE - 18, HASH_PIECE, 3 * HASH_PIECE + 7] {
            let text: String = "ab\"\n✓".chars().cycle().take(len).collect();
            let h = vec![crate::Message::user(text.clone()), crate::Message::assistant(text)];
            let json = serde_json::to_vec(&h).unwrap_or_default();
            assert_eq!(CcrKey::of_json(&h), CcrKey::of(&json), "{len}");
            let mut by_parts = blake3::Hasher::new();
            hash_written(&mut by_parts, |w| {
                for b in json.chunks(977) {
                    let _ = w.write_all(b);
                }
            });
            assert_eq!(by_parts.finalize(), blake3::hash(&json), "{len}");
        }
    }

    #[test]
    fn own_forms_are_told_from_quotes() {
        let k = CcrKey::of(b"original");
        let cut = format!("head ... tail{}", recoverable_suffix(&k));
        assert_eq!(own_archive_key(&cut), Some(k.short().as_str()));
        assert_eq!(strip_recoverable_suffix(&cut), Some("head ... tail"));
        let stub = format!("[Old tool result cleared — 3 lines, 20 chars, text] {}", k.marker());
        assert_eq!(own_archive_key(&stub), Some(k.short().as_str()));
        let dedup = format!(
            "[Old tool result cleared — a.rs (all) superseded — recoverable via @recall {}]",
            k.marker()
        );
        assert_eq!(own_archive_key(&dedup), Some(k.short().as_str()));
        // Quoting a marker, even our whole suffix in the middle of a text, is not our form.
        assert_eq!(own_archive_key(&format!("see {} in the log", k.marker())), None);
        assert_eq!(own_archive_key(&format!("{}\nand then more", recoverable_suffix(&k))), None);
        assert_eq!(own_archive_key(&format!("log: {}", k.marker())), None);
        assert_eq!(own_archive_key(&format!("x\n[Old tool result cleared — {}", k.marker())), None);
    }

    #[test]
    fn markers_are_found_in_order() {
        let t = "a <<ccr:0123456789abcdef>> b <<ccr:XYZ>> <<ccr:0123456789abcdeF>> <<ccr:fedcba9876543210>>";
        assert_eq!(find_markers(t), vec!["0123456789abcdef", "fedcba9876543210"]);
        assert!(!has_marker("<<ccr:0123>>"));
    }

    #[test]
    fn prefix_rules() {
        assert!(KeyPrefix::parse("aaaabbbbccccddd").is_err());
        assert!(KeyPrefix::parse(&"a".repeat(65)).is_err());
        assert!(matches!(KeyPrefix::parse("aaaabbbbccccdddz"), Err(KeyPrefixError::NotHex('z'))));
        assert_eq!(KeyPrefix::parse("AAAABBBBCCCCDDDD").unwrap().as_str(), "aaaabbbbccccdddd");
    }
}
