//! Sound: how long a recording lasts, from the container the encoder wrote, at Gemini's 32
//! tokens a second.
//!
//! Real encoders' files taught this (`testdata/media/audio/`, written here by LAME, SoX and
//! opus-tools): a variable-bitrate MP3 names a bitrate in its first frame that is not the
//! file's (LAME's `-V 9` file of 10 s read as 5 s), and compressed formats weighed a token per
//! KB (20 s of Opus at 12 kbps, 640 tokens to Gemini, counted 85). So each format's length is
//! read where its encoder writes it:
//! - WAV: the bytes after the `data` chunk's header, at the `fmt ` chunk's byte rate;
//! - AIFF: the `COMM` chunk's sample frames at its sample rate;
//! - FLAC: `STREAMINFO`'s total samples at its sample rate;
//! - MP3: the frame count of a `Xing`/`Info` or `VBRI` header in the first frame; without one
//!   (constant bitrate) the bytes after the tags at the first frame's bitrate;
//! - Ogg (Opus, Vorbis): the granule position of the stream's last page, at 48 kHz less the
//!   pre-skip for Opus, at the identification header's rate for Vorbis.
//!
//! Headers are looked for in at most [`HEADER`] decoded bytes; an Ogg file is walked a window
//! at a time for its pages, so every format is weighed in bounded memory.

use super::Windows;

/// Gemini's documented rate.
pub(super) const TOKENS_PER_SECOND: u64 = 32;
/// A format's header is looked for in at most this many decoded bytes (an ID3 tag with cover
/// art, a `LIST` chunk before `fmt `).
const HEADER: usize = 4 << 20;

/// The sound formats this module reads, by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Wav,
    Aiff,
    Flac,
    Mp3,
    Ogg,
}

/// The format `b` starts like, if it is sound.
pub(super) fn kind(b: &[u8]) -> Option<Kind> {
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WAVE") {
        Some(Kind::Wav)
    } else if b.starts_with(b"FORM") && matches!(b.get(8..12), Some(b"AIFF" | b"AIFC")) {
        Some(Kind::Aiff)
    } else if b.starts_with(b"fLaC") {
        Some(Kind::Flac)
    } else if b.starts_with(b"OggS") {
        Some(Kind::Ogg)
    } else if b.starts_with(b"ID3") || frame(b, 0).is_some() {
        Some(Kind::Mp3)
    } else {
        None
    }
}

/// The tokens of a sound of `kind` whose decoded bytes start with `first` (at least 85, like
/// every payload); a token per KB, as an unknown payload, when its header cannot be read.
pub(super) fn tokens(kind: Kind, first: Vec<u8>, rest: Windows<'_>) -> u64 {
    let total = first.len() as u64;
    let mut bytes = Bytes { head: first, rest, total };
    let length = match kind {
        Kind::Wav => wav(&mut bytes),
        Kind::Aiff => aiff(&mut bytes),
        Kind::Flac => flac(&mut bytes),
        Kind::Mp3 => mp3(&mut bytes),
        Kind::Ogg => ogg(&mut bytes),
    };
    let seconds = |(samples, rate): (u64, u64)| {
        let t = u128::from(samples)
            .saturating_mul(u128::from(TOKENS_PER_SECOND))
            .checked_div(u128::from(rate))?;
        Some(u64::try_from(t).unwrap_or(u64::MAX))
    };
    match length.and_then(seconds) {
        Some(t) => t.max(super::MEDIA_TOKENS),
        // A header that cannot be read: weighed as an unknown payload, a token per KB.
        None => (bytes.len() / 1024).max(super::MEDIA_TOKENS),
    }
}

/// A payload's decoded bytes: a head grown on demand up to [`HEADER`], then the rest counted.
struct Bytes<'a> {
    head: Vec<u8>,
    rest: Windows<'a>,
    /// Bytes decoded so far (the head included).
    total: u64,
}

impl Bytes<'_> {
    /// The head holding at least `end` bytes, or `None` past the payload or [`HEADER`].
    fn upto(&mut self, end: usize) -> Option<&[u8]> {
        while self.head.len() < end {
            if self.head.len() >= HEADER {
                return None;
            }
            let w = self.rest.next()?;
            self.total = self.total.saturating_add(w.len() as u64);
            self.head.extend_from_slice(&w);
        }
        Some(&self.head)
    }

    /// The bytes `at..at + n` of the payload.
    fn get(&mut self, at: usize, n: usize) -> Option<&[u8]> {
        let end = at.checked_add(n)?;
        self.upto(end)?.get(at..end)
    }

    /// Up to `n` bytes from `at` (fewer where the payload or [`HEADER`] ends first).
    fn some(&mut self, at: usize, n: usize) -> &[u8] {
        let end = at.saturating_add(n);
        while self.head.len() < end && self.head.len() < HEADER {
            let Some(w) = self.rest.next() else { break };
            self.total = self.total.saturating_add(w.len() as u64);
            self.head.extend_from_slice(&w);
        }
        self.head.get(at..end.min(self.head.len())).unwrap_or_default()
    }

    /// The payload's length in bytes (reads it to its end).
    fn len(&mut self) -> u64 {
        for w in self.rest.by_ref() {
            self.total = self.total.saturating_add(w.len() as u64);
        }
        self.total
    }
}

fn u16_le(b: &[u8]) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(b.get(..2)?.try_into().ok()?)))
}

fn u32_le(b: &[u8]) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
}

fn u32_be(b: &[u8]) -> Option<u64> {
    Some(u64::from(u32::from_be_bytes(b.get(..4)?.try_into().ok()?)))
}

/// WAV: the bytes after the `data` chunk's header at the `fmt ` chunk's byte rate, as
/// (bytes, bytes a second). The bytes present are counted, not the size the header declares
/// (a WAV written to a pipe declares none).
fn wav(b: &mut Bytes<'_>) -> Option<(u64, u64)> {
    let mut at = 12usize;
    let mut rate = None;
    for _ in 0..64 {
        let chunk = b.get(at, 8)?;
        let (id, size) = (chunk.get(..4)?.to_vec(), u32_le(chunk.get(4..)?)?);
        if id == b"fmt " {
            rate = u32_le(b.get(at.checked_add(16)?, 4)?).filter(|r| *r > 0);
        } else if id == b"data" {
            let start = at.checked_add(8)? as u64;
            return Some((b.len().saturating_sub(start), rate?));
        }
        // Chunks are padded to an even size.
        let size = usize::try_from(size.saturating_add(size & 1)).ok()?;
        at = at.checked_add(8)?.checked_add(size)?;
    }
    None
}

/// AIFF: the `COMM` chunk's sample frames and sample rate (an 80-bit extended float).
fn aiff(b: &mut Bytes<'_>) -> Option<(u64, u64)> {
    let mut at = 12usize;
    for _ in 0..64 {
        let chunk = b.get(at, 8)?;
        let (id, size) = (chunk.get(..4)?.to_vec(), u32_be(chunk.get(4..)?)?);
        if id == b"COMM" {
            let comm = b.get(at.checked_add(8)?, 18)?;
            let frames = u32_be(comm.get(2..)?)?;
            let exp = u16::from_be_bytes(comm.get(8..10)?.try_into().ok()?) & 0x7fff;
            let mantissa = u64::from_be_bytes(comm.get(10..18)?.try_into().ok()?);
            // value = mantissa · 2^(exp − 16383 − 63); a sample rate is a whole number of Hz.
            let shift = i32::from(exp).saturating_sub(16383 + 63);
            let rate = if shift >= 0 {
                mantissa.checked_shl(shift.unsigned_abs())?
            } else {
                mantissa.checked_shr(shift.unsigned_abs()).unwrap_or(0)
            };
            return (rate > 0).then_some((frames, rate));
        }
        let size = usize::try_from(size.saturating_add(size & 1)).ok()?;
        at = at.checked_add(8)?.checked_add(size)?;
    }
    None
}

/// FLAC: `STREAMINFO` (the first metadata block) holds the sample rate (20 bits) and the total
/// samples a channel (36 bits).
fn flac(b: &mut Bytes<'_>) -> Option<(u64, u64)> {
    let block = b.get(4, 4 + 34)?;
    if block.first()? & 0x7f != 0 {
        return None;
    }
    let info = block.get(4..)?;
    let packed = u64::from_be_bytes(info.get(10..18)?.try_into().ok()?);
    let rate = packed >> 44;
    let samples = packed & 0x0f_ffff_ffff;
    (rate > 0 && samples > 0).then_some((samples, rate))
}

/// An MPEG audio Layer III frame header at `at` of `b`: (samples a frame, sample rate, bytes a
/// second, side information's length).
fn frame(b: &[u8], at: usize) -> Option<(u64, u64, u64, usize)> {
    let h = b.get(at..at.checked_add(4)?)?;
    let (h1, h2, h3) = (*h.get(1)?, *h.get(2)?, *h.get(3)?);
    // Frame sync (11 bits), a version that exists (01 is reserved), Layer III (01).
    let version = (h1 >> 3) & 0x03;
    if *h.first()? != 0xff || h1 & 0xe0 != 0xe0 || version == 0x01 || (h1 >> 1) & 0x03 != 0x01 {
        return None;
    }
    const MPEG1: [u64; 15] = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
    const MPEG2: [u64; 15] = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
    let mpeg1 = version == 0x03;
    let kbps = *(if mpeg1 { &MPEG1 } else { &MPEG2 }).get(usize::from(h2 >> 4))?;
    let base = *[44_100u64, 48_000, 32_000].get(usize::from((h2 >> 2) & 0x03))?;
    // MPEG-2 halves the rate, MPEG-2.5 (version 00) quarters it.
    let rate = match version {
        0x03 => base,
        0x02 => base / 2,
        _ => base / 4,
    };
    let mono = h3 >> 6 == 0x03;
    let side = match (mpeg1, mono) {
        (true, false) => 32,
        (true, true) => 17,
        (false, false) => 17,
        (false, true) => 9,
    };
    (kbps > 0).then_some((if mpeg1 { 1152 } else { 576 }, rate, kbps.saturating_mul(1000) / 8, side))
}

/// MP3: the frame count a `Xing`/`Info` or `VBRI` header declares, as (samples, rate); without
/// one, the bytes after the tags at the first frame's bitrate, as (bytes, bytes a second).
fn mp3(b: &mut Bytes<'_>) -> Option<(u64, u64)> {
    let mut at = 0usize;
    if b.get(0, 3)? == b"ID3" {
        // A syncsafe size (four 7-bit bytes), a footer of 10 more when flagged.
        let tag = b.get(0, 10)?;
        let size = tag.get(6..10)?.iter().fold(0usize, |n, x| (n << 7) | usize::from(x & 0x7f));
        let header_and_footer = if tag.get(5)? & 0x10 != 0 { 20 } else { 10 };
        at = size.checked_add(header_and_footer)?;
    }
    // Tags may be followed by padding the tag's size does not cover.
    let head = b.some(at, 4096).to_vec();
    let skip = (0..head.len()).find(|i| frame(&head, *i).is_some())?;
    let start = at.checked_add(skip)?;
    let (per_frame, rate, byte_rate, side) = frame(&head, skip)?;
    let first = b.get(start, 4 + 36 + 18)?.to_vec();
    // The tag follows the frame header and its side information.
    let at_tag = |n: usize| first.get(side.saturating_add(n)..);
    let xing = at_tag(4)?.get(..4)?;
    if xing == b"Xing" || xing == b"Info" {
        let flags = u32_be(at_tag(8)?)?;
        if flags & 1 != 0 {
            let frames = u32_be(at_tag(12)?)?;
            return Some((frames.saturating_mul(per_frame), rate));
        }
    }
    if first.get(36..40)? == b"VBRI" {
        // Its frame count follows the version, delay, quality and byte count.
        let frames = u32_be(first.get(50..)?)?;
        return Some((frames.saturating_mul(per_frame), rate));
    }
    let len = b.len();
    // An ID3v1 tag of 128 bytes may close the file; its bytes are not sound.
    Some((len.saturating_sub(start as u64), byte_rate))
}

/// Ogg (Opus or Vorbis): the last page's granule position, read a window at a time.
fn ogg(b: &mut Bytes<'_>) -> Option<(u64, u64)> {
    // The first page carries the identification header: `OpusHead` or `\x01vorbis`.
    let first = b.get(0, 27)?;
    let segments = usize::from(*first.get(26)?);
    let serial = first.get(14..18)?.to_vec();
    let packet = 27usize.checked_add(segments)?;
    let id = b.get(packet, 19)?.to_vec();
    let (rate, skip) = if id.starts_with(b"OpusHead") {
        (48_000, u16_le(id.get(10..)?)?)
    } else if id.starts_with(b"\x01vorbis") {
        (u32_le(id.get(12..)?)?, 0)
    } else {
        return None;
    };
    // Every page header of this stream; the last one's granule is the stream's length.
    let mut last = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    let head = std::mem::take(&mut b.head);
    let mut next = Some(head);
    while let Some(w) = next.take() {
        carry.extend_from_slice(&w);
        let mut i = 0usize;
        while let Some(found) = carry.get(i..).and_then(|s| s.windows(4).position(|x| x == b"OggS")) {
            let p = i.saturating_add(found);
            let Some(page) = carry.get(p..p.saturating_add(27)) else { break };
            if page.get(4) == Some(&0) && page.get(14..18) == Some(serial.as_slice()) {
                let granule = u64::from_le_bytes(page.get(6..14)?.try_into().ok()?);
                // A page on which no packet ends has a granule of -1.
                if granule != u64::MAX {
                    last = granule;
                }
            }
            i = p.saturating_add(4);
        }
        // A page header split by the window's edge is found whole in the next one.
        let keep = carry.len().min(26);
        carry.drain(..carry.len().saturating_sub(keep));
        next = b.rest.next();
        if let Some(w) = &next {
            b.total = b.total.saturating_add(w.len() as u64);
        }
    }
    Some((last.saturating_sub(skip), rate))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic
    use super::super::payload_tokens;
    use super::*;
    use base64::Engine;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    /// An Ogg page of stream 7 with granule `granule` and `body` bytes in one packet's segments.
    fn ogg_page(granule: u64, body: &[u8]) -> Vec<u8> {
        let mut p = b"OggS\0\0".to_vec();
        p.extend_from_slice(&granule.to_le_bytes());
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(&[0; 8]); // sequence and checksum: not read
        let segments = body.len().div_ceil(255).max(1);
        p.push(u8::try_from(segments).unwrap());
        for i in 0..segments {
            p.push(u8::try_from((body.len() - i * 255).min(255)).unwrap());
        }
        p.extend_from_slice(body);
        p
    }

    fn opus_head(pre_skip: u16) -> Vec<u8> {
        let mut h = b"OpusHead\x01\x01".to_vec();
        h.extend_from_slice(&pre_skip.to_le_bytes());
        h.extend_from_slice(&48_000u32.to_le_bytes());
        h.extend_from_slice(&[0, 0, 0]);
        h
    }

    /// The last page's header lies across a window's edge, wherever that edge falls: the stream
    /// is as long as its last granule says, less the pre-skip.
    #[test]
    fn an_ogg_page_split_by_a_window_is_read() {
        for pad in [0usize, 1, 13, 26, 27, 100] {
            let mut ogg = ogg_page(0, &opus_head(312));
            // Pages of noise up to just before the first window's edge (48 KB decoded).
            let noise: Vec<u8> =
                (0..255 * 40).map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
            let mut g = 0u64;
            while ogg.len() + noise.len() + 300 < 48 * 1024 - pad {
                g += 48_000;
                ogg.extend(ogg_page(g, &noise));
            }
            ogg.extend(std::iter::repeat_n(0u8, 48 * 1024 - pad - ogg.len() - 40).collect::<Vec<_>>());
            // A page no packet ends on (granule -1), then the last page.
            ogg.extend(ogg_page(u64::MAX, &[1, 2, 3]));
            let end = 90 * 48_000 + 312;
            ogg.extend(ogg_page(end, &noise));
            assert_eq!(payload_tokens(&b64(&ogg)), 90 * 32, "pad {pad}");
        }
    }

    /// Headers cut short, sizes out of range, rates of 0: weighed as unknown payloads (a token
    /// per KB, at least 85), never a panic.
    #[test]
    fn broken_sound_headers_weigh_as_unknown_payloads() {
        let cases: Vec<Vec<u8>> = vec![
            b"RIFF\0\0\0\0WAVEfmt \xff\xff\xff\xff".to_vec(),
            b"RIFF\0\0\0\0WAVEdata\x10\0\0\0".to_vec(), // data before fmt: no rate
            b"FORM\0\0\0\0AIFFCOMM\0\0\0\x12\0\x01\xff\xff\xff\xff\0\x08\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
            b"FORM\0\0\0\0AIFFCOMM\0\0\0\x12\0\x01\0\0\0\x10\0\x08\0\0\0\0\0\0\0\0\0\0".to_vec(),
            b"fLaC\0\0\0\x22".to_vec(),
            [b"fLaC\0\0\0\x22".as_slice(), &[0u8; 34]].concat(),
            b"ID3\x04\0\0\x7f\x7f\x7f\x7f".to_vec(),
            vec![0xff, 0xfb, 0x50, 0xc4],
            b"OggS\0\0".to_vec(),
            ogg_page(0, b"SpeexHeader and more bytes"),
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(kind(c).is_some(), "case {i} not read as sound");
            assert_eq!(payload_tokens(&b64(c)), 85, "case {i}");
        }
        // A payload of 300 KB after a broken header still weighs a token per KB.
        let mut big = b"fLaC\0\0\0\x22".to_vec();
        big.extend(std::iter::repeat_n(0u8, 300 * 1024));
        assert_eq!(payload_tokens(&b64(&big)), 300);
    }
}
