//! Message weight: the honest payload size of a message (behaviour spec section 1).

use crate::message::{Image, Message};
use base64::Engine;

/// Long edge an image is scaled down to before its tokens are estimated.
pub const IMAGE_MAX_EDGE: u64 = 1568;
/// The smallest token estimate for any image.
pub const IMAGE_MIN_TOKENS: u64 = 85;

/// Estimated tokens of one image.
///
/// A decodable image is scaled so its long edge is at most 1568 px, then `w·h/750`, floor 85;
/// undecodable bytes count `max(85, len/2048)`; a URL-only image counts 85.
pub fn image_tokens(image: &Image) -> u64 {
    let Some(data) = image.data.as_deref().filter(|d| !d.is_empty()) else {
        return IMAGE_MIN_TOKENS;
    };
    // Strip a data-URL prefix if present.
    let b64 =
        data.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,")).map_or(data, |(_, b64)| b64);
    match dimensions(b64) {
        Some((w, h)) => {
            let (w, h) = scale_to_edge(w, h);
            (w.saturating_mul(h) / 750).max(IMAGE_MIN_TOKENS)
        }
        None => (decoded_len(b64) / 2048).max(IMAGE_MIN_TOKENS),
    }
}

fn scale_to_edge(w: u64, h: u64) -> (u64, u64) {
    let long = w.max(h);
    if long <= IMAGE_MAX_EDGE || long == 0 {
        return (w, h);
    }
    // Integer scaling: w·1568/long, rounded down.
    // `long` is past the edge here, so never 0.
    let scale = |side: u64| side.saturating_mul(IMAGE_MAX_EDGE).checked_div(long).unwrap_or(side);
    (scale(w), scale(h))
}

/// Reads width and height from the image header, decoding only a prefix of the base64 first.
fn dimensions(b64: &str) -> Option<(u64, u64)> {
    let engine = base64::engine::general_purpose::STANDARD;
    // Headers of PNG, GIF, WebP and most JPEGs lie in the first few KB.
    // At most 64 KiB, rounded down to whole base64 quanta of 4 characters.
    let prefix_len = b64.len().min(64 * 1024) & !3;
    let try_decode = |s: &str| -> Option<(u64, u64)> {
        let bytes = engine.decode(s.trim_end_matches('=')).ok().or_else(|| engine.decode(s).ok())?;
        let size = imagesize::blob_size(&bytes).ok()?;
        let (w, h) = (u64::try_from(size.width).ok()?, u64::try_from(size.height).ok()?);
        (w > 0 && h > 0).then_some((w, h))
    };
    // The prefix is cut at a byte offset: where that splits a character the data is not base64
    // at all, and the prefix is skipped.
    let prefix = b64.get(..prefix_len).filter(|p| !p.is_empty() && p.len() < b64.len());
    if let Some(prefix) = prefix {
        if let Some(d) = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(prefix)
            .ok()
            .and_then(|bytes| imagesize::blob_size(&bytes).ok())
            .and_then(|s| Some((u64::try_from(s.width).ok()?, u64::try_from(s.height).ok()?)))
            .filter(|(w, h)| *w > 0 && *h > 0)
        {
            return Some(d);
        }
    }
    try_decode(b64)
}

/// Decoded byte length of a base64 string, computed without decoding.
fn decoded_len(b64: &str) -> u64 {
    let trimmed = b64.trim_end_matches('=');
    (trimmed.len() as u64).saturating_mul(3) / 4
}

/// Length of the compact JSON serialization of a value (as `serde_json::to_vec` writes it),
/// without allocating it.
///
/// Walked by hand rather than serialized into a counting writer: a string's length is its bytes
/// plus what their escapes add, counted in one pass over the bytes (`escaped_len`; serde_json
/// writes a string piece by piece between escapes, which made this a tenth of a 50 MB body's
/// import).
pub fn compact_json_len(value: &serde_json::Value) -> u64 {
    use serde_json::Value;
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => n.to_string().len() as u64,
        Value::String(s) => escaped_len(s),
        Value::Array(a) => {
            // `[`, `]` and a comma between items.
            let marks = (a.len() as u64).saturating_add(1).max(2);
            a.iter().fold(marks, |n, v| n.saturating_add(compact_json_len(v)))
        }
        Value::Object(o) => {
            // `{`, `}`, a colon per entry and a comma between entries.
            let marks = (o.len() as u64).saturating_mul(2).saturating_add(1).max(2);
            o.iter()
                .fold(marks, |n, (k, v)| n.saturating_add(escaped_len(k)).saturating_add(compact_json_len(v)))
        }
    }
}

/// Length of a string written as JSON: its quotes, its bytes and its escapes. A byte adds: `"`,
/// `\\` and the controls with a short escape (`\b \t \n \f \r`) one, the other controls five
/// (`\u00XX`). Counted without branches, 32 bytes at a time in a byte-wide sum (at most 32 × 5),
/// so that the compiler does it in vector registers: a byte-by-byte `match` ran ten times slower.
fn escaped_len(s: &str) -> u64 {
    let mut extra = 0u64;
    for chunk in s.as_bytes().chunks(32) {
        let mut n = 0u8;
        for &c in chunk {
            let control = u8::from(c < 0x20);
            let short = u8::from(c == 0x08)
                | u8::from(c == b'\t')
                | u8::from(c == b'\n')
                | u8::from(c == 0x0C)
                | u8::from(c == b'\r');
            let quote = u8::from(c == b'"') | u8::from(c == b'\\');
            // 5 for a control, 1 for a short one (a control too), 1 for a quote or backslash.
            n = n
                .wrapping_add(control.wrapping_mul(5).wrapping_sub(short.wrapping_mul(4)))
                .wrapping_add(quote);
        }
        extra = extra.saturating_add(u64::from(n));
    }
    (s.len() as u64).saturating_add(2).saturating_add(extra)
}

/// The weight of one message: content, tool calls, images (tokens × 4), the system-parts excess
/// and the provider blocks carried opaquely (`wire`, its compact JSON length).
pub fn message_weight(m: &Message) -> u64 {
    let mut w = m.content.len() as u64;
    if let Some(wire) = &m.wire {
        w = w.saturating_add(compact_json_len(wire));
    }
    for call in &m.tool_calls {
        w = w.saturating_add(call.name.len() as u64).saturating_add(compact_json_len(&call.arguments));
    }
    for image in &m.images {
        w = w.saturating_add(image_tokens(image).saturating_mul(4));
    }
    if !m.system_parts.is_empty() {
        let parts: u64 = m.system_parts.iter().map(|p| p.text.len() as u64).sum();
        w = w.saturating_add(parts.saturating_sub(m.content.len() as u64));
    }
    w
}

/// The weight of a history: the sum of its messages' weights.
pub fn history_weight(history: &[Message]) -> u64 {
    history.iter().map(message_weight).fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_json_len_is_the_length_serde_json_writes() {
        let every_byte: String = (0u8..=0x7F).map(char::from).collect();
        let values = [
            serde_json::json!(null),
            serde_json::json!(true),
            serde_json::json!(false),
            serde_json::json!(0),
            serde_json::json!(-17),
            serde_json::json!(u64::MAX),
            serde_json::json!(i64::MIN),
            serde_json::json!(1.5e300),
            serde_json::json!(-0.000123),
            serde_json::json!(""),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!([[]]),
            serde_json::json!({"": {}}),
            serde_json::json!(every_byte.clone()),
            // Chunks of the worst case (a five-byte escape each) and a chunk's edge inside one.
            serde_json::json!("\u{1}".repeat(100)),
            serde_json::json!(format!("{}\"\u{1f}\n", "a".repeat(30))),
            serde_json::json!({ every_byte.clone(): [every_byte, "é ✓ 𝄞 \u{2028}", 1, null, {"a": [true, false]}] }),
            serde_json::json!({"a": 1, "b\"c": "line\nnext\ttab\\", "d": [1, 2, 3]}),
        ];
        for v in values {
            assert_eq!(compact_json_len(&v), serde_json::to_vec(&v).unwrap().len() as u64, "{v}");
        }
    }

    fn png(w: u32, h: u32) -> String {
        // A minimal PNG header with an IHDR chunk: enough for the dimension reader.
        let mut b = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13];
        b.extend_from_slice(b"IHDR");
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn img(data: Option<String>) -> Image {
        Image { media_type: Some("image/png".into()), data, url: None }
    }

    #[test]
    fn decodable_image_is_scaled_to_the_long_edge() {
        // 3136x1568 scales to 1568x784: 1568*784/750 = 1639.
        assert_eq!(image_tokens(&img(Some(png(3136, 1568)))), 1568 * 784 / 750);
        // Small image: 100x100 = 13 tokens, floored at 85.
        assert_eq!(image_tokens(&img(Some(png(100, 100)))), 85);
        // 1000x750 fits: 1000 tokens.
        assert_eq!(image_tokens(&img(Some(png(1000, 750)))), 1000);
    }

    #[test]
    fn undecodable_and_url_only_images() {
        assert_eq!(image_tokens(&img(None)), 85);
        let big = "A".repeat(4 * 1024 * 1024); // decodes to 3 MiB of zeros: not an image
        assert_eq!(image_tokens(&img(Some(big))), 3 * 1024 * 1024 / 2048);
        let url = Image { media_type: None, data: None, url: Some("https://x/y.png".into()) };
        assert_eq!(image_tokens(&url), 85);
    }

    #[test]
    fn multibyte_data_around_the_header_prefix_is_weighed_without_panicking() {
        // Issue #12: the header reader sliced the data at the 64 KiB prefix, a byte offset that
        // here falls inside a two-byte character. Such data is not base64: it weighs as
        // undecodable bytes.
        for pad in [64 * 1024 - 1, 64 * 1024 - 3, 64 * 1024 + 1] {
            let mut data = "A".repeat(pad);
            data.push_str(&"é".repeat(40));
            data.push_str("日本語🙂");
            let expected = (decoded_len(&data) / 2048).max(IMAGE_MIN_TOKENS);
            assert_eq!(image_tokens(&img(Some(data.clone()))), expected);
            let mut with_prefix = "data:image/png;base64,".to_string();
            with_prefix.push_str(&data);
            assert_eq!(image_tokens(&img(Some(with_prefix))), expected);
            let mut m = Message::user("look");
            m.images.push(img(Some(data)));
            assert_eq!(message_weight(&m), 4 + expected * 4);
        }
    }

    #[test]
    fn tool_call_weight_counts_name_and_compact_arguments() {
        let mut m = Message::assistant("hi");
        m.tool_calls.push(crate::message::ToolCall {
            id: "c1".into(),
            kind: "function".into(),
            name: "run".into(),
            arguments: serde_json::json!({"cmd": "ls -la"}),
        });
        assert_eq!(message_weight(&m), 2 + 3 + r#"{"cmd":"ls -la"}"#.len() as u64);
    }
}
