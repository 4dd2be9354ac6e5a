//! What a binary payload (an image, a PDF, a text document sent as base64) weighs in the
//! simulated provider's count, by the providers' documented rules and written here on its own,
//! never by calling the client's estimator (the code under test).
//!
//! Before, every payload counted 85 tokens, an image's lowest price: a request carrying ten
//! screenshots or a 40-page PDF was hundreds of tokens to the simulation and tens of thousands to
//! the provider, so a recovery that kept them was accepted and called converged.
//!
//! The payload is recognised by its bytes, not by the media type a body claims:
//! - an image (a header `imagesize` reads): Anthropic's rule, the long edge scaled to at most
//!   1568 px, then `w·h/750` tokens, at most 1 600 (larger images are scaled down to that), at
//!   least 85;
//! - a PDF: 1 500 tokens per page (the low end of the 1 500–3 000 Anthropic documents; the page
//!   images come on top), the pages counted by their `/Type /Page` objects, at least one;
//! - UTF-8 text (a `text/plain` document): its tokens, as a message's text is counted;
//! - anything else (audio, an unknown format): 85.
//!
//! The base64 is decoded a window at a time, so a payload of any size is weighed in bounded
//! memory (the hostile one-line captures of the memory ceilings are such payloads).

use base64::Engine;

/// The lowest price of a payload, and the price of one the rules do not describe.
pub const MEDIA_TOKENS: u64 = 85;
/// The long edge an image is scaled to.
const MAX_EDGE: u64 = 1568;
/// The most an image costs (a larger one is scaled down until it costs this).
const MAX_IMAGE_TOKENS: u64 = 1600;
/// What a PDF page costs, at the least.
const PAGE_TOKENS: u64 = 1500;
/// Base64 characters decoded at a time (a multiple of 4).
const WINDOW: usize = 64 * 1024;

/// The tokens of a base64 payload, or of a data URL (`data:…;base64,…`).
pub fn payload_tokens(s: &str) -> u64 {
    let b64 = s.strip_prefix("data:").and_then(|r| r.split_once(";base64,")).map_or(s, |(_, b)| b);
    let b64 = b64.trim_end_matches('=');
    let mut windows = Windows { rest: b64 };
    let Some(first) = windows.next() else { return MEDIA_TOKENS };
    if let Ok(size) = imagesize::blob_size(&first) {
        return image_tokens(size.width as u64, size.height as u64);
    }
    if first.starts_with(b"%PDF") {
        return pdf_tokens(first, windows);
    }
    text_tokens(first, windows).unwrap_or(MEDIA_TOKENS)
}

/// An image of `w` by `h` pixels.
pub fn image_tokens(w: u64, h: u64) -> u64 {
    let long = w.max(h);
    let (w, h) = match long {
        0 => return MEDIA_TOKENS,
        l if l > MAX_EDGE => {
            let scale = |side: u64| side.saturating_mul(MAX_EDGE).checked_div(l).unwrap_or(side);
            (scale(w), scale(h))
        }
        _ => (w, h),
    };
    w.saturating_mul(h).checked_div(750).unwrap_or(0).clamp(MEDIA_TOKENS, MAX_IMAGE_TOKENS)
}

/// The decoded bytes of a base64 string, a window at a time (standard or URL-safe alphabet,
/// padding stripped). A window that does not decode ends the walk.
struct Windows<'a> {
    rest: &'a str,
}

impl Iterator for Windows<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        if self.rest.is_empty() {
            return None;
        }
        let mut cut = self.rest.len().min(WINDOW);
        // Not base64 at all where the cut would split a character.
        while !self.rest.is_char_boundary(cut) {
            cut = cut.saturating_sub(1);
        }
        let (now, rest) = self.rest.split_at(cut);
        self.rest = rest;
        let standard = base64::engine::general_purpose::STANDARD_NO_PAD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        standard.decode(now).or_else(|_| url.decode(now)).ok()
    }
}

/// A PDF: its pages, counted across windows (a marker split by a window's edge is found in the
/// overlap kept from the window before).
fn pdf_tokens(first: Vec<u8>, rest: Windows<'_>) -> u64 {
    let mut pages = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for w in std::iter::once(first).chain(rest) {
        // The tail kept from the window before: a marker that ended in it was counted then.
        let kept = carry.len();
        carry.extend_from_slice(&w);
        pages = pages.saturating_add(page_objects(&carry, kept));
        // Keep the tail a marker not yet counted could start in.
        let keep = carry.len().min(15);
        carry.drain(..carry.len().saturating_sub(keep));
    }
    pages.max(1).saturating_mul(PAGE_TOKENS)
}

/// `/Type /Page` objects (not `/Pages`) in `b`, with or without the space, whose marker and the
/// byte after it end past `counted` (those ending before were counted with the window before).
fn page_objects(b: &[u8], counted: usize) -> u64 {
    let mut n = 0u64;
    for (i, _) in b.iter().enumerate().filter(|(_, c)| **c == b'/') {
        let tail = b.get(i..).unwrap_or_default();
        let after = tail.strip_prefix(b"/Type /Page").or_else(|| tail.strip_prefix(b"/Type/Page"));
        // A marker at the very end of the bytes is counted with the next window, which sees
        // the byte after it.
        if let Some(a) = after {
            let end = b.len().saturating_sub(a.len()).saturating_add(1);
            if end > counted && a.first().is_some_and(|c| !c.is_ascii_alphanumeric()) {
                n = n.saturating_add(1);
            }
        }
    }
    n
}

/// UTF-8 text: its tokens, counted a window at a time; `None` when the bytes are not text.
fn text_tokens(first: Vec<u8>, rest: Windows<'_>) -> Option<u64> {
    let mut n = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for w in std::iter::once(first).chain(rest) {
        carry.extend_from_slice(&w);
        let valid = match std::str::from_utf8(&carry) {
            Ok(s) => s.len(),
            // A character split by the window's edge waits for the next window.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => return None,
        };
        let text = std::str::from_utf8(carry.get(..valid)?).ok()?;
        if text.contains('\0') {
            return None;
        }
        n = n.saturating_add(crate::o200k::count(text));
        carry.drain(..valid);
    }
    carry.is_empty().then_some(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    /// A PNG header of `w` by `h` (what `imagesize` reads; the pixels do not matter).
    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut b = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
        b.extend_from_slice(b"IHDR");
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b.extend(std::iter::repeat_n(0u8, 4096));
        b
    }

    #[test]
    fn an_image_costs_what_its_size_does() {
        // 1920x1080 is scaled to 1568x882: 1843 tokens, capped at 1600.
        assert_eq!(payload_tokens(&b64(&png(1920, 1080))), 1600);
        assert_eq!(payload_tokens(&b64(&png(800, 600))), 640);
        assert_eq!(payload_tokens(&b64(&png(64, 64))), MEDIA_TOKENS);
        let url = format!("data:image/png;base64,{}", b64(&png(1000, 750)));
        assert_eq!(payload_tokens(&url), 1000);
    }

    #[test]
    fn a_pdf_costs_its_pages_even_across_windows() {
        let mut pdf = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 40 >> endobj\n".to_vec();
        for i in 0..40 {
            pdf.extend_from_slice(
                format!("{} 0 obj << /Type /Page /Parent 1 0 R >>\nstream\n", i + 2).as_bytes(),
            );
            // Page content large enough that markers fall on every side of a window's edge.
            pdf.extend(std::iter::repeat_n(b'x', 7_001 + i * 13));
            pdf.extend_from_slice(b"\nendstream endobj\n");
        }
        assert_eq!(payload_tokens(&b64(&pdf)), 40 * PAGE_TOKENS);
        assert_eq!(payload_tokens(&b64(b"%PDF-1.7\n%%EOF")), PAGE_TOKENS, "at least one page");
    }

    #[test]
    fn a_text_document_costs_its_text() {
        let text: String = (0..30_000).map(|i| format!("word{i} é ")).collect();
        let tokens = crate::o200k::count(&text);
        let counted = payload_tokens(&b64(text.as_bytes()));
        // Windows split the text where a token might not: within a token per window.
        let windows = (b64(text.as_bytes()).len() / WINDOW + 1) as u64;
        assert!(counted.abs_diff(tokens) <= windows, "{counted} vs {tokens}");
        assert!(counted > 50_000, "{counted}");
    }

    #[test]
    fn anything_else_costs_the_lowest_price() {
        let audio: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(payload_tokens(&b64(&audio)), MEDIA_TOKENS);
        assert_eq!(payload_tokens(""), MEDIA_TOKENS);
        assert_eq!(payload_tokens("not base64 at all!"), MEDIA_TOKENS);
    }
}
