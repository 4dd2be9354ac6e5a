//! What a binary payload (an image, a PDF, a text document sent as base64) weighs in the
//! simulated provider's count, by the providers' documented rules and written here on its own,
//! never by calling the client's estimator (the code under test).
//!
//! Before, every payload counted 85 tokens, an image's lowest price: a request carrying ten
//! screenshots or a 40-page PDF was hundreds of tokens to the simulation and tens of thousands to
//! the provider, so a recovery that kept them was accepted and called converged.
//!
//! The payload is recognised by its bytes, not by the media type a body claims, in this order
//! (a review showed a looser order wrong: a CSV whose header starts `BM` read as a bitmap):
//! - a PDF (`%PDF`): 1 500 tokens per page (the low end of the 1 500–3 000 Anthropic documents;
//!   the page images come on top), the pages counted by their `/Type /Page` objects, in the file
//!   and in its compressed object streams (pdfTeX's default), at least one;
//! - an image by its signature (PNG, JPEG, GIF, WebP): Anthropic's rule, the long edge scaled to
//!   at most 1568 px, then `w·h/750` tokens, at most 1 600 (larger images are scaled down to
//!   that), at least 85; an image whose size cannot be read costs the most, 1 600, since a lower
//!   price could call a recovery converged that is not;
//! - sound (WAV, AIFF, FLAC, MP3, Ogg Opus or Vorbis): Gemini's 32 tokens a second, its length
//!   read where its encoder wrote it (`sound`);
//! - text (almost no control bytes; UTF-8, or Latin-1 and the like read leniently): its tokens,
//!   as a message's text is counted;
//! - another image format `imagesize` reads (TIFF, HEIF, AVIF, …): as an image;
//! - anything else (an unknown format, sound in a container not read here such as MP4/AAC): a
//!   token per KB, at least 85 (what Gemini's rate gives 16-bit 16 kHz sound).
//!
//! Base64 wrapped in lines is read as one run. It is decoded a window at a time, so a payload
//! of any size is weighed in bounded memory (the hostile one-line captures of the memory
//! ceilings are such payloads); only a PDF is held whole, up to 64 MB decoded, to open its
//! object streams.

use base64::Engine;
use std::borrow::Cow;
use std::io::Read;

mod sound;

/// The lowest price of a payload.
pub const MEDIA_TOKENS: u64 = 85;
/// The long edge an image is scaled to.
const MAX_EDGE: u64 = 1568;
/// The most an image costs (a larger one is scaled down until it costs this).
pub const MAX_IMAGE_TOKENS: u64 = 1600;
/// What a PDF page costs, at the least.
pub const PAGE_TOKENS: u64 = 1500;
/// Base64 characters decoded at a time (a multiple of 4).
const WINDOW: usize = 64 * 1024;
/// An image's header is looked for in at most this many decoded bytes (a JPEG's frame header
/// may follow large metadata segments: an ICC profile, a thumbnail).
const IMAGE_HEADER: usize = 4 << 20;
/// A PDF up to this size (decoded) is held whole to open its compressed object streams.
const PDF_WHOLE: usize = 64 << 20;
/// The most one object stream is inflated to.
const OBJSTM_MAX: u64 = 16 << 20;
/// The most all the object streams of a PDF are inflated to together.
const OBJSTM_TOTAL: u64 = 64 << 20;

/// The tokens of a base64 payload, or of a data URL (`data:…;base64,…`).
pub fn payload_tokens(s: &str) -> u64 {
    payload_tokens_declared(s, None)
}

/// [`payload_tokens`], with the media type the block declares (`media_type`, `mimeType`, or a
/// data URL's): a payload declared as text (`text/…`) is read as text whatever its first bytes
/// (a text file that starts with `%PDF` weighed one page: re-review finding 11). Any other
/// declaration is not trusted: the bytes say what they are.
pub fn payload_tokens_declared(s: &str, declared: Option<&str>) -> u64 {
    let (from_url, b64) = match s.strip_prefix("data:").and_then(|r| r.split_once(";base64,")) {
        Some((t, b)) => (Some(t), b),
        None => (None, s),
    };
    let text = declared.or(from_url).is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("text/"));
    // Base64 wrapped in lines (MIME style) is one run.
    let b64: Cow<'_, str> = if b64.bytes().any(|b| b.is_ascii_whitespace()) {
        Cow::Owned(b64.chars().filter(|c| !c.is_ascii_whitespace()).collect())
    } else {
        Cow::Borrowed(b64)
    };
    let b64 = b64.trim_end_matches('=');
    let mut windows = Windows { rest: b64 };
    let Some(first) = windows.next() else { return MEDIA_TOKENS };
    if text {
        return text_tokens(first, windows);
    }
    if first.starts_with(b"%PDF") {
        return pdf_tokens(first, windows);
    }
    if has_image_signature(&first) {
        return image_of(first, windows);
    }
    if let Some(kind) = sound::kind(&first) {
        return sound::tokens(kind, first, windows);
    }
    if is_text(&first) {
        return text_tokens(first, windows);
    }
    if let Ok(size) = imagesize::blob_size(&first) {
        return image_tokens(size.width as u64, size.height as u64);
    }
    let len = windows.fold(first.len() as u64, |n, w| n.saturating_add(w.len() as u64));
    (len / 1024).max(MEDIA_TOKENS)
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

/// PNG, JPEG, GIF or WebP by their first bytes.
fn has_image_signature(b: &[u8]) -> bool {
    b.starts_with(&[0x89, b'P', b'N', b'G'])
        || b.starts_with(&[0xff, 0xd8, 0xff])
        || b.starts_with(b"GIF8")
        || (b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP"))
}

/// An image with a known signature: its size from its header, read from more of the payload
/// when the first window does not hold it; the most an image costs when no header says it.
fn image_of(first: Vec<u8>, rest: Windows<'_>) -> u64 {
    let mut head = first;
    let mut rest = rest;
    loop {
        if let Ok(size) = imagesize::blob_size(&head) {
            return image_tokens(size.width as u64, size.height as u64);
        }
        match rest.next() {
            Some(w) if head.len() < IMAGE_HEADER => head.extend_from_slice(&w),
            _ => return MAX_IMAGE_TOKENS,
        }
    }
}

/// Text: almost no control bytes (tab, line breaks and form feed are text; one stray NUL in a
/// log is tolerated, a binary format's headers and tables are full of them).
fn is_text(b: &[u8]) -> bool {
    let control = b.iter().filter(|c| matches!(**c, 0..=8 | 0x0b | 0x0e..=0x1f | 0x7f)).count();
    control.saturating_mul(100) <= b.len()
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

/// A PDF: its pages, in the file and in its compressed object streams when it is held whole;
/// counted a window at a time (plain objects only) past [`PDF_WHOLE`].
fn pdf_tokens(first: Vec<u8>, mut rest: Windows<'_>) -> u64 {
    let mut whole = first;
    let pages = loop {
        let Some(w) = rest.next() else { break held_pdf_pages(&whole) };
        if whole.len().saturating_add(w.len()) > PDF_WHOLE {
            // Too large to hold: the plain objects, window by window.
            break pdf_pages_streamed(std::mem::take(&mut whole), w, rest);
        }
        whole.extend_from_slice(&w);
    };
    pages.max(1).saturating_mul(PAGE_TOKENS)
}

/// The pages of a PDF held whole: its page objects, in the file and in its compressed object
/// streams, each object number once (an incremental update writes a page object again under
/// its number: re-review, finding 4). Markers outside any numbered object (a damaged file) are
/// counted as they are.
fn held_pdf_pages(pdf: &[u8]) -> u64 {
    let mut numbers = std::collections::HashSet::new();
    let mut loose = 0u64;
    for (at, _) in page_markers(pdf) {
        match object_number_before(pdf, at) {
            Some(n) => {
                numbers.insert(n);
            }
            None => loose = loose.saturating_add(1),
        }
    }
    object_stream_pages(pdf, &mut numbers);
    (numbers.len() as u64).saturating_add(loose)
}

/// The number of the object `at` lies in: the `N G obj` before it.
fn object_number_before(pdf: &[u8], at: usize) -> Option<u64> {
    let before = pdf.get(at.saturating_sub(64 * 1024)..at)?;
    let obj = before.windows(3).rposition(|w| w == b"obj")?;
    let head = before.get(..obj)?;
    // Back over whitespace, the generation, whitespace, the number.
    let mut i = head.len();
    let mut field = |digits: bool| {
        let end = i;
        while let Some(prev) = i.checked_sub(1) {
            if !head.get(prev).is_some_and(|c| if digits { c.is_ascii_digit() } else { pdf_space(*c) }) {
                break;
            }
            i = prev;
        }
        (end > i).then(|| head.get(i..end).unwrap_or_default())
    };
    field(false)?;
    field(true)?;
    field(false)?;
    let n = field(true)?;
    std::str::from_utf8(n).ok()?.parse().ok()
}

/// The plain page objects of a PDF too large to hold, across windows (a marker split by a
/// window's edge is found in the overlap kept from the window before).
fn pdf_pages_streamed(head: Vec<u8>, next: Vec<u8>, rest: Windows<'_>) -> u64 {
    let mut pages = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for w in [head, next].into_iter().chain(rest) {
        // The tail kept from the window before: a marker that ended in it was counted then.
        let kept = carry.len();
        carry.extend_from_slice(&w);
        pages = pages.saturating_add(page_objects(&carry, kept));
        let keep = carry.len().min(64);
        carry.drain(..carry.len().saturating_sub(keep));
    }
    pages
}

/// PDF whitespace.
fn pdf_space(c: u8) -> bool {
    matches!(c, 0 | b'\t' | b'\n' | 0x0c | b'\r' | b' ')
}

/// Where the `/Type /Page` markers (not `/Pages`) of `b` start, and where they end (past the
/// name and the byte after it that ends it), any whitespace between the names; a marker at the
/// very end (no byte after it to end the name) is not one yet.
fn page_markers(b: &[u8]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut i = 0usize;
    while let Some(at) = find(b.get(i..).unwrap_or_default(), b"/Type") {
        let marker = i.saturating_add(at);
        let mut j = marker.saturating_add(5);
        i = j;
        while b.get(j).copied().is_some_and(pdf_space) {
            j = j.saturating_add(1);
        }
        if let Some(after) = b.get(j..).unwrap_or_default().strip_prefix(b"/Page") {
            if after.first().is_some_and(|c| !c.is_ascii_alphanumeric()) {
                found.push((marker, j.saturating_add(6)));
            }
        }
    }
    found
}

/// The page markers of `b` whose name and the byte after it end past `counted` (those ending
/// before were counted with the window before).
fn page_objects(b: &[u8], counted: usize) -> u64 {
    page_markers(b).iter().filter(|(_, end)| *end > counted).count() as u64
}

/// The first place `needle` is in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The numbers of the page objects inside the PDF's compressed object streams (`/Type
/// /ObjStm`, `/FlateDecode`), added to `numbers`: each stream is inflated up to [`OBJSTM_MAX`],
/// and all of them together up to [`OBJSTM_TOTAL`] (a small file of streams that each inflate
/// to the limit took a minute: re-review, finding 10). The dictionary is the object's, from its
/// `obj` keyword to `stream` (a nested `<< >>` such as `/DecodeParms` is inside it: finding 3).
/// Returns the bytes inflated.
fn object_stream_pages(pdf: &[u8], numbers: &mut std::collections::HashSet<u64>) -> u64 {
    let mut budget = OBJSTM_TOTAL;
    let mut i = 0usize;
    while let Some(at) = find(pdf.get(i..).unwrap_or_default(), b"stream") {
        let kw = i.saturating_add(at);
        i = kw.saturating_add(6);
        // `endstream` is not a start.
        if kw >= 3 && pdf.get(kw.saturating_sub(3)..kw) == Some(b"end") {
            continue;
        }
        let region = pdf.get(kw.saturating_sub(4096)..kw).unwrap_or_default();
        let dict = match region.windows(3).rposition(|w| w == b"obj") {
            Some(p) => region.get(p..).unwrap_or_default(),
            None => region,
        };
        if find(dict, b"/ObjStm").is_none() || find(dict, b"/FlateDecode").is_none() || budget == 0 {
            continue;
        }
        let first = name_number(dict, b"/First").and_then(|f| usize::try_from(f).ok());
        let mut data = kw.saturating_add(6);
        if pdf.get(data) == Some(&b'\r') {
            data = data.saturating_add(1);
        }
        if pdf.get(data) == Some(&b'\n') {
            data = data.saturating_add(1);
        }
        let body = pdf.get(data..).unwrap_or_default();
        let end = find(body, b"endstream").unwrap_or(body.len());
        let mut out = Vec::new();
        let z = flate2::bufread::ZlibDecoder::new(body.get(..end).unwrap_or_default());
        // A stream that does not inflate whole still gives what it inflated.
        let _ = z.take(OBJSTM_MAX.min(budget)).read_to_end(&mut out);
        budget = budget.saturating_sub(out.len() as u64);
        i = data.saturating_add(end);
        // PNG predictors (`/Predictor` 10 to 15) filter each row of `/Columns` bytes.
        if name_number(dict, b"/Predictor").is_some_and(|p| p >= 10) {
            let columns = name_number(dict, b"/Columns").and_then(|c| usize::try_from(c).ok()).unwrap_or(1);
            out = unpredict(&out, columns.max(1));
        }
        // The header: pairs of an object's number and its offset from `/First`.
        let Some(first) = first else { continue };
        let header: Vec<u64> = std::str::from_utf8(out.get(..first).unwrap_or_default())
            .unwrap_or_default()
            .split(|c: char| c.is_ascii_whitespace())
            .filter_map(|t| t.parse().ok())
            .collect();
        let objects: Vec<(u64, usize)> = header
            .chunks_exact(2)
            .filter_map(|p| Some((*p.first()?, usize::try_from(*p.get(1)?).ok()?)))
            .collect();
        for (k, (number, offset)) in objects.iter().enumerate() {
            let from = first.saturating_add(*offset);
            let to = objects.get(k.saturating_add(1)).map_or(out.len(), |(_, o)| first.saturating_add(*o));
            let object = out.get(from..to.max(from)).unwrap_or_default();
            if !page_markers(object).is_empty() {
                numbers.insert(*number);
            }
        }
    }
    OBJSTM_TOTAL.saturating_sub(budget)
}

/// Rows of `columns` bytes, each after its PNG filter byte, unfiltered (one byte per pixel, as a
/// PDF stream's predictor has it by default).
fn unpredict(data: &[u8], columns: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut prev = vec![0u8; columns];
    for row in data.chunks(columns.saturating_add(1)) {
        let Some((&filter, bytes)) = row.split_first() else { continue };
        let mut cur = vec![0u8; bytes.len()];
        for (k, &x) in bytes.iter().enumerate() {
            let a = k.checked_sub(1).and_then(|l| cur.get(l)).copied().unwrap_or(0);
            let b = prev.get(k).copied().unwrap_or(0);
            let c = k.checked_sub(1).and_then(|l| prev.get(l)).copied().unwrap_or(0);
            let predicted = match filter {
                1 => a,
                2 => b,
                // The sums fit: bytes widened to 16 bits cannot overflow them.
                3 => (u16::from(a).saturating_add(u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a).saturating_add(i16::from(b)).saturating_sub(i16::from(c));
                    let d = |v: u8| p.saturating_sub(i16::from(v)).saturating_abs();
                    let (pa, pb, pc) = (d(a), d(b), d(c));
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                _ => 0,
            };
            if let Some(slot) = cur.get_mut(k) {
                *slot = x.wrapping_add(predicted);
            }
        }
        out.extend_from_slice(&cur);
        prev = cur;
        prev.resize(columns, 0);
    }
    out
}

/// The number after a name in a dictionary (`/First 123`).
fn name_number(dict: &[u8], name: &[u8]) -> Option<u64> {
    let at = find(dict, name)?;
    let rest = dict.get(at.saturating_add(name.len())..)?;
    let digits: Vec<u8> =
        rest.iter().copied().skip_while(|c| pdf_space(*c)).take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Text: its tokens, counted a window at a time (a character split by a window's edge waits
/// for the next; bytes that are not UTF-8 are read as replacement characters, as a lenient
/// reader of a Latin-1 file would).
fn text_tokens(first: Vec<u8>, rest: Windows<'_>) -> u64 {
    let mut n = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    for w in std::iter::once(first).chain(rest) {
        carry.extend_from_slice(&w);
        // The bytes of a character the window's edge split stay for the next window.
        let whole = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => carry.len().saturating_sub(incomplete_tail(&carry)),
        };
        let text = String::from_utf8_lossy(carry.get(..whole).unwrap_or_default());
        n = n.saturating_add(crate::o200k::count(&text));
        carry.drain(..whole);
    }
    if !carry.is_empty() {
        n = n.saturating_add(crate::o200k::count(&String::from_utf8_lossy(&carry)));
    }
    n
}

/// How many bytes at the end of `b` begin a UTF-8 character that is not complete.
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=3usize.min(b.len()) {
        let Some(&c) = b.get(b.len().saturating_sub(back)) else { break };
        if c & 0xc0 != 0x80 {
            let need = match c {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => 1,
            };
            return if need > back { back } else { 0 };
        }
    }
    0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic
    use super::*;
    use std::io::Write;

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

    /// A JPEG of `w` by `h` whose frame header follows `app` bytes of metadata (an APP2
    /// segment of an ICC profile, split in 64 KB segments as JPEG requires).
    fn jpeg(w: u16, h: u16, app: usize) -> Vec<u8> {
        let mut b = vec![0xff, 0xd8];
        let mut left = app;
        while left > 0 {
            let n = left.min(60_000);
            b.extend_from_slice(&[0xff, 0xe2]);
            b.extend_from_slice(&u16::try_from(n + 2).unwrap().to_be_bytes());
            b.extend(std::iter::repeat_n(0x41u8, n));
            left -= n;
        }
        b.extend_from_slice(&[0xff, 0xc0, 0, 17, 8]);
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        b.extend_from_slice(&[0xff, 0xd9]);
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
        // Review finding 4: a frame header past the first window (a 200 KB ICC profile).
        assert_eq!(payload_tokens(&b64(&jpeg(1000, 750, 0))), 1000);
        assert_eq!(payload_tokens(&b64(&jpeg(1000, 750, 200_000))), 1000);
        // A signature without a readable size costs the most.
        assert_eq!(payload_tokens(&b64(&[0xff, 0xd8, 0xff, 0xe0, 0, 0, 1, 2, 3])), MAX_IMAGE_TOKENS);
        // Wrapped at 76 columns, as MIME writes it.
        let wrapped: String = b64(&png(1000, 750))
            .as_bytes()
            .chunks(76)
            .map(|c| format!("{}\r\n", std::str::from_utf8(c).unwrap()))
            .collect();
        assert_eq!(payload_tokens(&wrapped), 1000);
    }

    fn pdf_pages(n: usize, sep: &str) -> Vec<u8> {
        let mut pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Pages /Count 40 >> endobj\n".to_vec();
        for i in 0..n {
            pdf.extend_from_slice(
                format!("{} 0 obj << /Type{sep}/Page /Parent 1 0 R >>\nstream\n", i + 2).as_bytes(),
            );
            // Page content large enough that markers fall on every side of a window's edge.
            pdf.extend(std::iter::repeat_n(b'x', 7_001 + i * 13));
            pdf.extend_from_slice(b"\nendstream endobj\n");
        }
        pdf.extend_from_slice(b"%%EOF\n");
        pdf
    }

    #[test]
    fn a_pdf_costs_its_pages() {
        assert_eq!(payload_tokens(&b64(&pdf_pages(40, " "))), 40 * PAGE_TOKENS);
        // Review finding 2: any whitespace between the names.
        assert_eq!(payload_tokens(&b64(&pdf_pages(40, "\n"))), 40 * PAGE_TOKENS);
        assert_eq!(payload_tokens(&b64(&pdf_pages(40, ""))), 40 * PAGE_TOKENS);
        assert_eq!(payload_tokens(&b64(b"%PDF-1.7\n%%EOF")), PAGE_TOKENS, "at least one page");
    }

    /// An object stream of `objects` (their numbers and text), as PDF 1.5 writes one: a header
    /// of number-offset pairs, the objects from `/First` on. `parms` goes in the dictionary.
    fn object_stream(number: u64, objects: &[(u64, String)], parms: &str) -> Vec<u8> {
        let (mut header, mut body) = (String::new(), String::new());
        for (n, text) in objects {
            header.push_str(&format!("{n} {} ", body.len()));
            body.push_str(text);
            body.push('\n');
        }
        let first = header.len();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(format!("{header}{body}").as_bytes()).unwrap();
        let packed = z.finish().unwrap();
        let mut out = format!(
            "{number} 0 obj\n<< /Type /ObjStm /N {} /First {first} /Length {}{parms} /Filter /FlateDecode >>\nstream\n",
            objects.len(),
            packed.len()
        )
        .into_bytes();
        out.extend_from_slice(&packed);
        out.extend_from_slice(b"\nendstream\nendobj\n");
        out
    }

    fn pages(from: u64, n: u64) -> Vec<(u64, String)> {
        (from..from + n)
            .map(|i| (i, format!("<< /Type /Page /Parent 1 0 R /Contents {} 0 R >>", i + 100)))
            .collect()
    }

    /// Review finding 2: pdfTeX puts its page objects in compressed object streams; re-review
    /// finding 3: with a nested dictionary (`/DecodeParms`) in the stream's.
    #[test]
    fn a_pdf_costs_the_pages_in_its_object_streams() {
        for parms in ["", " /DecodeParms << /Predictor 1 >>"] {
            let mut pdf = b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n".to_vec();
            pdf.extend_from_slice(&object_stream(5, &pages(10, 40), parms));
            pdf.extend_from_slice(b"%%EOF\n");
            assert_eq!(payload_tokens(&b64(&pdf)), 40 * PAGE_TOKENS, "{parms:?}");
        }
    }

    /// Re-review finding 3: a PNG predictor (`/Predictor 12`, the Up filter) on the stream.
    #[test]
    fn an_object_stream_behind_a_png_predictor_is_read() {
        let (mut header, mut body) = (String::new(), String::new());
        for (n, text) in pages(10, 40) {
            header.push_str(&format!("{n} {} ", body.len()));
            body.push_str(&text);
            body.push('\n');
        }
        let plain = format!("{header}{body}").into_bytes();
        let columns = 5usize;
        let mut filtered = Vec::new();
        let mut prev = vec![0u8; columns];
        for row in plain.chunks(columns) {
            let mut row = row.to_vec();
            row.resize(columns, b' ');
            filtered.push(2u8);
            filtered.extend(row.iter().zip(&prev).map(|(x, p)| x.wrapping_sub(*p)));
            prev = row;
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&filtered).unwrap();
        let packed = z.finish().unwrap();
        let mut pdf = format!(
            "%PDF-1.5\n5 0 obj\n<< /Type /ObjStm /N 40 /First {} /DecodeParms << /Predictor 12 /Columns {columns} >> /Filter /FlateDecode >>\nstream\n",
            header.len()
        )
        .into_bytes();
        pdf.extend_from_slice(&packed);
        pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
        assert_eq!(payload_tokens(&b64(&pdf)), 40 * PAGE_TOKENS);
    }

    /// Re-review finding 4: an incremental update writes page objects again under their numbers;
    /// each page is counted once, in the file and in object streams alike.
    #[test]
    fn an_updated_pdf_counts_each_page_once() {
        let mut pdf = pdf_pages(40, " ");
        // The update: the first ten pages again, with an annotation.
        for i in 0..10 {
            pdf.extend_from_slice(
                format!("{} 0 obj << /Type /Page /Parent 1 0 R /Annots [9 0 R] >> endobj\n", i + 2)
                    .as_bytes(),
            );
        }
        pdf.extend_from_slice(b"%%EOF\n");
        assert_eq!(payload_tokens(&b64(&pdf)), 40 * PAGE_TOKENS);
        let mut packed = b"%PDF-1.5\n".to_vec();
        packed.extend_from_slice(&object_stream(5, &pages(10, 40), ""));
        packed.extend_from_slice(&object_stream(6, &pages(10, 5), ""));
        assert_eq!(payload_tokens(&b64(&packed)), 40 * PAGE_TOKENS);
    }

    /// Re-review finding 10: object streams that each inflate to the limit are inflated to a
    /// total budget, in bounded time.
    #[test]
    fn object_streams_inflate_within_a_total_budget() {
        let zeros = vec![0u8; 16 << 20];
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&zeros).unwrap();
        let packed = z.finish().unwrap();
        let mut pdf = b"%PDF-1.5\n".to_vec();
        for n in 0..40 {
            pdf.extend_from_slice(
                format!("{n} 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n")
                    .as_bytes(),
            );
            pdf.extend_from_slice(&packed);
            pdf.extend_from_slice(b"\nendstream\nendobj\n");
        }
        assert_eq!(payload_tokens(&b64(&pdf)), PAGE_TOKENS);
        let inflated = object_stream_pages(&pdf, &mut std::collections::HashSet::new());
        assert_eq!(inflated, OBJSTM_TOTAL, "4 of the 40 streams, not 640 MB");
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

    /// Review findings 3 and 5: text that begins like an image format's signature, a log with
    /// a stray NUL, and a Latin-1 file are text.
    #[test]
    fn text_is_text_whatever_its_first_bytes() {
        let rows: String =
            (0..5_000).map(|i| format!("{}.{},{},{}\n", 20 + i % 15, i % 10, 30 + i % 40, i)).collect();
        let csv = format!("BMI,age,id\n{rows}");
        let (counted, tokens) = (payload_tokens(&b64(csv.as_bytes())), crate::o200k::count(&csv));
        assert!(counted.abs_diff(tokens) <= 3 && tokens > 40_000, "{counted} vs {tokens}");
        let hindi: String = "\nकी ".repeat(5_000);
        assert!(payload_tokens(&b64(hindi.as_bytes())) > 5_000);
        let mut log: Vec<u8> = (0..5_000).flat_map(|i| format!("GET /item/{i} 200\n").into_bytes()).collect();
        log.push(0);
        assert!(payload_tokens(&b64(&log)) > 20_000, "{}", payload_tokens(&b64(&log)));
        let latin1: Vec<u8> = (0..5_000)
            .flat_map(|i| format!("caf\u{e9};{i}\n").into_bytes())
            .map(|b| if b == 0xc3 { 0xe9 } else { b })
            .filter(|b| *b != 0xa9)
            .collect();
        assert!(payload_tokens(&b64(&latin1)) > 10_000, "{}", payload_tokens(&b64(&latin1)));
    }

    /// Review finding 5: ten minutes of sound are 19 200 tokens to Gemini, whatever the rate.
    #[test]
    fn a_wav_costs_its_seconds() {
        for (rate, bits) in [(8_000u32, 16u16), (16_000, 16), (44_100, 8)] {
            let byte_rate = rate * u32::from(bits / 8);
            let data = byte_rate as usize * 600;
            let mut wav = b"RIFF".to_vec();
            wav.extend_from_slice(&u32::try_from(36 + data).unwrap().to_le_bytes());
            wav.extend_from_slice(b"WAVEfmt ");
            wav.extend_from_slice(&16u32.to_le_bytes());
            wav.extend_from_slice(&1u16.to_le_bytes());
            wav.extend_from_slice(&1u16.to_le_bytes());
            wav.extend_from_slice(&rate.to_le_bytes());
            wav.extend_from_slice(&byte_rate.to_le_bytes());
            wav.extend_from_slice(&(bits / 8).to_le_bytes());
            wav.extend_from_slice(&bits.to_le_bytes());
            wav.extend_from_slice(b"data");
            wav.extend_from_slice(&u32::try_from(data).unwrap().to_le_bytes());
            wav.extend((0..data).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            assert_eq!(payload_tokens(&b64(&wav)), 600 * 32, "{rate} Hz, {bits} bits");
        }
    }

    /// Re-review finding 6: an MP3 of 496 s at 64 kbps is 15 872 tokens, not a token per KB.
    #[test]
    fn an_mp3_costs_its_seconds() {
        for (id3, header, kbps) in
            [(false, [0xffu8, 0xfb, 0x50, 0xc4], 64u64), (true, [0xff, 0xf3, 0x80, 0xc4], 64)]
        {
            let mut mp3 = Vec::new();
            if id3 {
                mp3.extend_from_slice(b"ID3\x04\x00\x00\x00\x00\x08\x00");
                mp3.extend(std::iter::repeat_n(0u8, 1024));
            }
            // Frames of 1 152 samples (MPEG-1) or 576 (MPEG-2) at 44.1 or 22.05 kHz, each
            // `144 (or 72) · bitrate / rate` bytes (with a padding byte when flagged), noise
            // after each header; 496 s of them.
            let seconds = 496u64;
            let (samples, rate, factor) =
                if header[1] == 0xfb { (1152, 44_100, 144) } else { (576, 22_050, 72) };
            let frames = seconds * rate / samples;
            for f in 0..frames {
                let pad = f % 2 == 1;
                let mut h = header;
                h[2] |= u8::from(pad) << 1;
                let len = factor * kbps * 1000 / rate + u64::from(pad);
                mp3.extend_from_slice(&h);
                mp3.extend((4..len).map(|i| ((i + f).wrapping_mul(2_654_435_761) >> 13) as u8));
            }
            let want = frames * samples * 32 / rate;
            assert_eq!(payload_tokens(&b64(&mp3)), want, "id3 {id3}");
            assert!(want.abs_diff(seconds * 32) <= 1);
        }
    }

    /// Re-review finding 11: a text file that starts like a PDF, declared as text, is text.
    #[test]
    fn a_payload_declared_as_text_is_text() {
        let text: String = format!(
            "%PDF is how a PDF starts; this is a note about it.\n{}",
            "plain words here ".repeat(3000)
        );
        let tokens = crate::o200k::count(&text);
        let undeclared = payload_tokens(&b64(text.as_bytes()));
        assert_eq!(undeclared, PAGE_TOKENS, "by its bytes alone it reads as a PDF");
        for declared in [Some("text/plain"), Some("Text/CSV")] {
            let counted = payload_tokens_declared(&b64(text.as_bytes()), declared);
            assert!(counted.abs_diff(tokens) <= 3, "{declared:?}: {counted} vs {tokens}");
        }
        let url = format!("data:text/plain;base64,{}", b64(text.as_bytes()));
        assert!(payload_tokens(&url).abs_diff(tokens) <= 3);
        // A declared image type is not trusted: the bytes are text.
        assert_eq!(payload_tokens_declared(&b64(text.as_bytes()), Some("image/png")), PAGE_TOKENS);
    }

    #[test]
    fn anything_else_costs_a_token_per_kilobyte() {
        let audio: Vec<u8> = (0..2_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(payload_tokens(&b64(&audio)), 2_000_000 / 1024);
        let short: Vec<u8> = audio.iter().copied().take(10_000).collect();
        assert_eq!(payload_tokens(&b64(&short)), MEDIA_TOKENS);
        assert_eq!(payload_tokens(""), MEDIA_TOKENS);
        assert_eq!(payload_tokens("not base64 at all!"), MEDIA_TOKENS);
    }
}
