//! The stored form of a snapshot row's history (snapshot format 2): a 12-byte header — the magic
//! `SVH2` and the seq of the row it extends (little-endian u64, 0 for a whole row) — followed by
//! one MessagePack value per message the row lists, uncompressed.
//!
//! Design decision (restore speed): a snapshot exists to make a restore cheap, and a restore of
//! format 1 (the messages' JSON, zstd level 1) spent as long decompressing as parsing, and parsing
//! JSON (escapes in code and logs) about six times as long as decoding the same messages from
//! MessagePack, which copies strings without unescaping them. Snapshots are disposable caches of
//! content the `messages` table holds, so they trade size (about 4x a zstd row) for speed.
//!
//! Design decision (exactness): each message's MessagePack is transcoded mechanically from the
//! JSON the journal stored and hashed for it (every map, key order, string and number as the JSON
//! parser reads them), never re-serialized from a `Message`, so a restore through a snapshot
//! decodes the same values a row-by-row restore decodes from the JSON.

use salvage_types::Message;
use serde::de::{Deserialize, IgnoredAny};

/// The first bytes of a format-2 history.
const MAGIC: [u8; 4] = *b"SVH2";
/// The header: magic and base seq.
const HEADER: usize = 12;

/// The header of a row extending the row at `base` (`None`: a whole row).
pub(crate) fn header(base: Option<u64>) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&base.unwrap_or(0).to_le_bytes());
    h
}

/// True when `blob` is a format-2 history (its header whole).
pub(crate) fn is_packed(blob: &[u8]) -> bool {
    blob.len() >= HEADER && blob.starts_with(&MAGIC)
}

/// The base a format-2 row names (`None` for a whole row or another format).
pub(crate) fn base_of(blob: &[u8]) -> Option<u64> {
    if !is_packed(blob) {
        return None;
    }
    let seq = blob.get(4..HEADER).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_le_bytes)?;
    (seq > 0).then_some(seq)
}

/// The messages of a format-2 row (after its header).
pub(crate) fn body(blob: &[u8]) -> &[u8] {
    blob.get(HEADER..).unwrap_or_default()
}

/// Appends the MessagePack of one message's stored JSON to `out`.
pub(crate) fn transcode(json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut ser = rmp_serde::Serializer::new(&mut *out);
    serde_transcode::transcode(&mut de, &mut ser).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())
}

/// Decodes exactly `count` messages from a row's body into `out`; fewer, or bytes left after
/// them, is an error.
pub(crate) fn decode(body: &[u8], count: usize, out: &mut Vec<Message>) -> Result<(), String> {
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    out.reserve(count);
    for n in 0..count {
        let m = Message::deserialize(&mut de).map_err(|e| format!("message {n} of {count}: {e}"))?;
        out.push(m);
    }
    // The body must end here: one more value decoding means the row holds more than it lists.
    if IgnoredAny::deserialize(&mut de).is_ok() {
        return Err(format!("the row holds more than its {count} messages"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn pack(jsons: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for j in jsons {
            transcode(j.as_bytes(), &mut out).unwrap();
        }
        out
    }

    #[test]
    fn decodes_what_the_json_decodes_numbers_escapes_and_order_included() {
        let jsons = [
            r#"{"role":"user","content":"a \"quoted\"\nline\t\u00e9 \ud83d\ude00"}"#,
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","name":"f","arguments":{"z":1,"a":-2,"m":1.5,"big":18446744073709551615,"neg":-9223372036854775808,"f":1.0,"n":null,"l":[true,false,{}]}}]}"#,
            r#"{"role":"tool","content":null,"tool_call_id":"c1","wire":{"b":2,"a":[1e300,-0.0]}}"#,
        ];
        let mut got = Vec::new();
        decode(&pack(&jsons), jsons.len(), &mut got).unwrap();
        let want: Vec<Message> = jsons.iter().map(|j| serde_json::from_str(j).unwrap()).collect();
        assert_eq!(got, want);
        // Key order survives (preserve_order): the re-serialized JSON is the same text.
        let args = serde_json::to_string(&got[1].tool_calls[0].arguments).unwrap();
        assert!(args.starts_with(r#"{"z":1,"a":-2,"m":1.5,"big":18446744073709551615"#), "{args}");
    }

    #[test]
    fn a_count_that_differs_from_the_body_is_refused() {
        let body = pack(&[r#"{"role":"user","content":"a"}"#, r#"{"role":"user","content":"b"}"#]);
        let mut out = Vec::new();
        assert!(decode(&body, 3, &mut out).is_err(), "fewer messages than listed");
        let mut out = Vec::new();
        assert!(decode(&body, 1, &mut out).is_err(), "more messages than listed");
        let mut out = Vec::new();
        assert!(decode(&body[..body.len() - 1], 2, &mut out).is_err(), "a cut last message");
        let mut out = Vec::new();
        decode(&body, 2, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        let mut out = Vec::new();
        decode(&[], 0, &mut out).unwrap();
    }

    #[test]
    fn json_that_is_not_one_value_is_refused() {
        let mut out = Vec::new();
        assert!(transcode(br#"{"role":"user"} {}"#, &mut out).is_err());
        assert!(transcode(br#"{"role":"#, &mut out).is_err());
    }

    #[test]
    fn the_header_names_the_base() {
        let mut whole = header(None);
        whole.extend_from_slice(b"x");
        assert!(is_packed(&whole));
        assert_eq!(base_of(&whole), None);
        assert_eq!(body(&whole), b"x");
        assert_eq!(base_of(&header(Some(42))), Some(42));
        assert!(!is_packed(b"SVH2"), "a header cut short is not format 2");
        assert!(!is_packed(&[0x28, 0xB5, 0x2F, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0]), "a zstd frame is format 1");
    }
}
