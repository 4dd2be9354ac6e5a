//! Sound: how long a recording lasts, from the container the encoder wrote, at Gemini's 32
//! tokens a second.
//!
//! Real encoders' files taught this (`testdata/media/audio/`, written here by LAME, SoX and
//! opus-tools, and a review's files from ffmpeg, flac and mutagen's test data): a variable-bitrate
//! MP3 names a bitrate in its first frame that is not the file's, a header's frame count covers
//! only the first of two files joined, a stream cut at its start has no sync at byte 0, and
//! compressed formats weighed a token per KB (20 s of Opus at 12 kbps, 640 tokens to Gemini,
//! counted 85). So each format's length is read from what its bytes hold:
//! - MP3 (and MPEG audio after any number of ID3v2 tags, junk or a cut start): every frame is
//!   walked and its samples counted, so VBR without a header, joined files and free padding are
//!   all exact;
//! - ADTS AAC: every frame walked, 1 024 samples each;
//! - Ogg (Opus, Vorbis, FLAC in Ogg): every page walked; each logical stream's last granule
//!   position at its rate (Opus at 48 kHz less its pre-skip), chained streams added;
//! - WAV (and RF64/BW64): the bytes after the `data` chunk's header at the `fmt ` byte rate;
//! - AIFF: `COMM`'s sample frames (at most what the bytes present hold), chunks in any order;
//! - FLAC (also after an ID3v2 tag): `STREAMINFO`'s total samples;
//! - MP4/M4A sound: the `mvhd` duration at its time scale.
//!
//! A length a header declares but the bytes cannot hold (an 86-byte FLAC declaring an hour) is
//! cut to what [`FLOOR_BYTES_PER_SECOND`] allows. Sound whose length cannot be read (a WebM, a
//! FLAC written to a pipe with no sample count, an MP4 with a video track) costs the most it can:
//! its bytes at [`FLOOR_BYTES_PER_SECOND`], since a lower price could call a recovery converged
//! that the provider rejects. Everything is read forward, a window at a time, in bounded memory.

use super::Windows;

/// Gemini's documented rate.
pub(super) const TOKENS_PER_SECOND: u64 = 32;
/// The fewest bytes a second of compressed sound takes: Opus at 6 kbps, the lowest bitrate
/// encoders offer for speech. A length needing fewer bytes than this is not believed.
pub(super) const FLOOR_BYTES_PER_SECOND: u64 = 750;
/// The most a walker keeps buffered at once (an MP4 `moov` box is read whole up to this).
const BUFFER: usize = 16 << 20;

/// The sound formats this module reads, by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Wav,
    Aiff,
    Flac,
    /// An ID3v2 tag: MP3 or FLAC follows.
    Id3,
    Mpeg,
    Adts,
    Ogg,
    Mp4,
    /// Matroska/WebM: read as sound of unknown length.
    Webm,
}

/// The format `b` starts like, if it is sound. Magic letters alone are not enough: an ID3v2
/// header must be well formed (a CSV whose header is `ID3,Title,…` read as an MP3: review 3,
/// finding 5), and frame-based formats need two frames in a row.
pub(super) fn kind(b: &[u8]) -> Option<Kind> {
    let at = |i: usize, n: usize| b.get(i..i.saturating_add(n));
    if matches!(at(0, 4), Some(b"RIFF" | b"RF64" | b"BW64")) && at(8, 4) == Some(b"WAVE") {
        Some(Kind::Wav)
    } else if at(0, 4) == Some(b"FORM") && matches!(at(8, 4), Some(b"AIFF" | b"AIFC")) {
        Some(Kind::Aiff)
    } else if b.starts_with(b"fLaC") {
        Some(Kind::Flac)
    } else if b.starts_with(b"OggS") && b.get(4) == Some(&0) {
        Some(Kind::Ogg)
    } else if id3_size(b).is_some() {
        Some(Kind::Id3)
    } else if at(4, 4) == Some(b"ftyp") {
        Some(Kind::Mp4)
    } else if b.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        Some(Kind::Webm)
    } else if two_frames(b, 0, mpeg_frame) || frames_within(b, mpeg_frame) {
        Some(Kind::Mpeg)
    } else if two_frames(b, 0, adts_frame) || frames_within(b, adts_frame) {
        Some(Kind::Adts)
    } else {
        None
    }
}

/// True when three frames in a row start somewhere in `b` past its first byte: a stream cut at
/// its start, or junk before its first frame (review 3, finding 2). Three, not two: a binary of
/// another kind holds two frame-like headers a frame apart more often than one would like.
fn frames_within(b: &[u8], frame: fn(&[u8]) -> Option<Frame>) -> bool {
    (1..b.len().saturating_sub(4)).any(|i| {
        b.get(i) == Some(&0xff) && two_frames(b, i, frame) && {
            let next = b.get(i..).and_then(frame).map_or(0, |f| usize::try_from(f.len).unwrap_or(usize::MAX));
            two_frames(b, i.saturating_add(next), frame)
        }
    })
}

/// The size of a well-formed ID3v2 tag at the start of `b` (header, body and footer).
fn id3_size(b: &[u8]) -> Option<u64> {
    let h = b.get(..10)?;
    let (major, rev, flags) = (*h.get(3)?, *h.get(4)?, *h.get(5)?);
    let size = h.get(6..10)?;
    if h.get(..3)? != b"ID3"
        || !(2..=4).contains(&major)
        || rev == 0xff
        || flags & 0x0f != 0
        || size.iter().any(|x| x & 0x80 != 0)
    {
        return None;
    }
    let body = size.iter().fold(0u64, |n, x| (n << 7) | u64::from(*x));
    Some(body.saturating_add(if flags & 0x10 != 0 { 20 } else { 10 }))
}

/// True when a frame starts at `at` of `b` and another right after it.
fn two_frames(b: &[u8], at: usize, frame: fn(&[u8]) -> Option<Frame>) -> bool {
    let Some(f) = b.get(at..).and_then(frame) else { return false };
    let next = at.saturating_add(usize::try_from(f.len).unwrap_or(usize::MAX));
    b.get(next..).and_then(frame).is_some()
}

/// One frame of a frame-based format: its length in bytes and its samples at its rate.
#[derive(Debug, Clone, Copy)]
struct Frame {
    len: u64,
    samples: u64,
    rate: u64,
}

/// An MPEG audio frame header (Layer I, II or III) at the start of `b`.
fn mpeg_frame(b: &[u8]) -> Option<Frame> {
    let h = b.get(..4)?;
    let (h1, h2) = (*h.get(1)?, *h.get(2)?);
    let version = (h1 >> 3) & 0x03; // 00 MPEG-2.5, 01 reserved, 10 MPEG-2, 11 MPEG-1
    let layer = (h1 >> 1) & 0x03; // 01 III, 10 II, 11 I
    if *h.first()? != 0xff || h1 & 0xe0 != 0xe0 || version == 0x01 || layer == 0x00 {
        return None;
    }
    let mpeg1 = version == 0x03;
    let index = usize::from(h2 >> 4);
    const V1: [[u64; 15]; 3] = [
        [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
        [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
    ];
    const V2: [[u64; 15]; 2] = [
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
    ];
    // The table's row: 0 for Layer III (bits 01), 1 for II (10), 2 for I (11).
    let l = usize::from(layer.saturating_sub(1));
    let kbps = if mpeg1 {
        *V1.get(l)?.get(index)?
    } else {
        *V2.get(if layer == 0x03 { 1 } else { 0 })?.get(index)?
    };
    let base = *[44_100u64, 48_000, 32_000].get(usize::from((h2 >> 2) & 0x03))?;
    let rate = match version {
        0x03 => base,
        0x02 => base / 2,
        _ => base / 4,
    };
    let pad = u64::from((h2 >> 1) & 0x01);
    // Free format (index 0) has no length in its header: not walked.
    if kbps == 0 {
        return None;
    }
    let bps = kbps.saturating_mul(1000);
    // Bytes a frame: `factor · bitrate / rate + padding` (Layer I counts 4-byte slots).
    let bytes = |factor: u64, slot: u64| {
        factor.saturating_mul(bps).checked_div(rate).map(|n| n.saturating_add(pad).saturating_mul(slot))
    };
    let (samples, len) = match (layer, mpeg1) {
        (0x03, _) => (384, bytes(12, 4)?),
        (0x02, _) | (_, true) => (1152, bytes(144, 1)?),
        (_, false) => (576, bytes(72, 1)?),
    };
    (len >= 4).then_some(Frame { len, samples, rate })
}

/// An ADTS (AAC) frame header at the start of `b`.
fn adts_frame(b: &[u8]) -> Option<Frame> {
    let h = b.get(..7)?;
    let (h1, h2, h3, h4, h5, h6) = (*h.get(1)?, *h.get(2)?, *h.get(3)?, *h.get(4)?, *h.get(5)?, *h.get(6)?);
    // Sync (12 bits), layer 00.
    if *h.first()? != 0xff || h1 & 0xf6 != 0xf0 {
        return None;
    }
    const RATES: [u64; 13] = [
        96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000, 7_350,
    ];
    let rate = *RATES.get(usize::from((h2 >> 2) & 0x0f))?;
    let len = (u64::from(h3 & 0x03) << 11) | (u64::from(h4) << 3) | u64::from(h5 >> 5);
    let blocks = u64::from(h6 & 0x03).saturating_add(1);
    let header = if h1 & 0x01 == 0 { 9 } else { 7 };
    (len > header).then_some(Frame { len, samples: 1024u64.saturating_mul(blocks), rate })
}

/// The tokens of a sound of `kind` whose decoded bytes start with `first` (at least 85, like
/// every payload).
pub(super) fn tokens(kind: Kind, first: Vec<u8>, rest: Windows<'_>) -> u64 {
    let mut r = Reader { buf: first, base: 0, rest, ended: false };
    // A length is not believed past what the bytes can hold at the lowest bitrate (a WAV
    // declaring a byte a second, an 86-byte FLAC declaring two minutes), except Ogg's: its pages
    // bound it already, and Opus with silence suppressed may take fewer bytes a second.
    let (length, declared) = match kind {
        Kind::Wav => (wav(&mut r), true),
        Kind::Aiff => (aiff(&mut r), true),
        Kind::Flac => (flac(&mut r, 0), true),
        Kind::Id3 => after_id3(&mut r),
        Kind::Mpeg => (walk_frames(&mut r, 0, mpeg_frame), true),
        Kind::Adts => (walk_frames(&mut r, 0, adts_frame), true),
        Kind::Ogg => (ogg(&mut r), false),
        Kind::Mp4 => (mp4(&mut r), true),
        Kind::Webm => (None, false),
    };
    let bytes = r.len();
    // The most a payload of sound can cost: its bytes at the lowest bitrate.
    let most = bytes.saturating_mul(TOKENS_PER_SECOND).checked_div(FLOOR_BYTES_PER_SECOND).unwrap_or(0);
    let t = length.map_or(most, |micros| {
        let t = u128::from(micros)
            .saturating_mul(u128::from(TOKENS_PER_SECOND))
            .checked_div(1_000_000)
            .unwrap_or(0);
        let t = u64::try_from(t).unwrap_or(u64::MAX);
        if declared {
            t.min(most)
        } else {
            t
        }
    });
    t.max(super::MEDIA_TOKENS)
}

/// Microseconds of `samples` at `rate`.
fn micros(samples: u64, rate: u64) -> Option<u64> {
    let m = u128::from(samples).saturating_mul(1_000_000).checked_div(u128::from(rate))?;
    Some(u64::try_from(m).unwrap_or(u64::MAX))
}

/// A payload's decoded bytes read forward: a buffer from offset `base`, grown a window at a time
/// and dropped behind the reader.
struct Reader<'a> {
    buf: Vec<u8>,
    base: u64,
    rest: Windows<'a>,
    ended: bool,
}

impl Reader<'_> {
    /// One more window into the buffer; false at the end.
    fn more(&mut self) -> bool {
        if self.ended {
            return false;
        }
        match self.rest.next() {
            Some(w) => {
                self.buf.extend_from_slice(&w);
                true
            }
            None => {
                self.ended = true;
                false
            }
        }
    }

    /// The bytes `at..at + n` (offsets in the payload), `None` past its end, behind the buffer or
    /// past [`BUFFER`].
    fn get(&mut self, at: u64, n: usize) -> Option<&[u8]> {
        let from = usize::try_from(at.checked_sub(self.base)?).ok()?;
        let to = from.checked_add(n)?;
        while self.buf.len() < to {
            if self.buf.len() >= BUFFER.saturating_add(from) || !self.more() {
                return None;
            }
        }
        self.buf.get(from..to)
    }

    /// Up to `n` bytes from `at`, fewer where the payload ends.
    fn some(&mut self, at: u64, n: usize) -> &[u8] {
        let Some(from) = at.checked_sub(self.base).and_then(|f| usize::try_from(f).ok()) else { return &[] };
        let to = from.saturating_add(n);
        while self.buf.len() < to && self.more() {}
        self.buf.get(from..to.min(self.buf.len())).unwrap_or_default()
    }

    /// Forgets the bytes before `at`.
    fn drop_before(&mut self, at: u64) {
        let n = usize::try_from(at.saturating_sub(self.base)).unwrap_or(usize::MAX).min(self.buf.len());
        if n > 0 {
            self.buf.drain(..n);
            self.base = self.base.saturating_add(n as u64);
        }
    }

    /// The payload's length in bytes (reads it to its end).
    fn len(&mut self) -> u64 {
        let mut n = self.base.saturating_add(self.buf.len() as u64);
        if !self.ended {
            for w in self.rest.by_ref() {
                n = n.saturating_add(w.len() as u64);
            }
            self.ended = true;
            self.base = n.saturating_sub(self.buf.len() as u64);
        }
        n
    }
}

fn u32_le(b: &[u8]) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
}

fn u32_be(b: &[u8]) -> Option<u64> {
    Some(u64::from(u32::from_be_bytes(b.get(..4)?.try_into().ok()?)))
}

fn u64_be(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// WAV: the bytes after the `data` chunk's header at the `fmt ` chunk's byte rate. The bytes
/// present are counted, not the size the header declares (a WAV written to a pipe declares none;
/// RF64 declares it elsewhere).
fn wav(r: &mut Reader<'_>) -> Option<u64> {
    let mut at = 12u64;
    let mut rate = None;
    for _ in 0..64 {
        let chunk = r.get(at, 8)?;
        let (id, size) = (chunk.get(..4)?.to_vec(), u32_le(chunk.get(4..)?)?);
        if id == b"fmt " {
            rate = u32_le(r.get(at.checked_add(16)?, 4)?).filter(|x| *x > 0);
        } else if id == b"data" {
            let start = at.checked_add(8)?;
            let bytes = r.len().saturating_sub(start);
            return micros(bytes, rate?);
        }
        at = at.checked_add(8)?.checked_add(size.saturating_add(size & 1))?;
    }
    None
}

/// AIFF: the `COMM` chunk's sample frames (at most what the sound data present holds, for PCM)
/// and its sample rate (an 80-bit extended float), wherever the chunk lies.
fn aiff(r: &mut Reader<'_>) -> Option<u64> {
    let mut at = 12u64;
    let (mut comm, mut sound) = (None, None);
    for _ in 0..64 {
        let Some(chunk) = r.get(at, 8) else { break };
        let (id, size) = (chunk.get(..4)?.to_vec(), u32_be(chunk.get(4..)?)?);
        let body = at.checked_add(8)?;
        if id == b"COMM" {
            let c = r.get(body, 18)?.to_vec();
            let channels = u64::from(u16::from_be_bytes(c.get(..2)?.try_into().ok()?));
            let frames = u32_be(c.get(2..)?)?;
            let bits = u64::from(u16::from_be_bytes(c.get(6..8)?.try_into().ok()?));
            let exp = u16::from_be_bytes(c.get(8..10)?.try_into().ok()?) & 0x7fff;
            let mantissa = u64_be(c.get(10..)?)?;
            // value = mantissa · 2^(exp − 16383 − 63); a sample rate is a whole number of Hz.
            let shift = i32::from(exp).saturating_sub(16383 + 63);
            let rate = if shift >= 0 {
                mantissa.checked_shl(shift.unsigned_abs())?
            } else {
                mantissa.checked_shr(shift.unsigned_abs()).unwrap_or(0)
            };
            // AIFC names its compression after the rate; the PCM ones hold `frames · channels ·
            // width` bytes.
            let codec = r.some(body.saturating_add(18), 4).to_vec();
            let pcm = matches!(
                codec.as_slice(),
                b"" | b"NONE"
                    | b"twos"
                    | b"sowt"
                    | b"raw "
                    | b"in24"
                    | b"in32"
                    | b"fl32"
                    | b"fl64"
                    | b"FL32"
                    | b"FL64"
            ) || size < 22;
            comm = Some((channels, frames, bits.div_ceil(8), rate, !pcm));
        } else if id == b"SSND" {
            sound = Some(size.saturating_sub(8));
        }
        at = body.checked_add(size.saturating_add(size & 1))?;
        r.drop_before(at.min(r.base.saturating_add(r.buf.len() as u64)));
    }
    let (channels, frames, width, rate, compressed) = comm?;
    let frame_bytes = channels.saturating_mul(width);
    // PCM: no more frames than the sound data holds (AIFC compressed data has other sizes).
    // Without sound data there is nothing to hear; a compressed AIFC's frames are believed up
    // to the lowest bitrate (`tokens`' cap does not apply here: capped by the data instead).
    let data = sound?;
    let held = if compressed {
        data.saturating_mul(rate).checked_div(FLOOR_BYTES_PER_SECOND).unwrap_or(0)
    } else {
        data.checked_div(frame_bytes).unwrap_or(0)
    };
    micros(frames.min(held), rate).filter(|_| rate > 0)
}

/// FLAC at `at`: `STREAMINFO` (the first metadata block) holds the sample rate (20 bits) and
/// the total samples a channel (36 bits; 0 when the encoder wrote to a pipe: not known).
fn flac(r: &mut Reader<'_>, at: u64) -> Option<u64> {
    if r.get(at, 4)? != b"fLaC" {
        return None;
    }
    let block = r.get(at.checked_add(4)?, 4 + 34)?.to_vec();
    if block.first()? & 0x7f != 0 {
        return None;
    }
    let packed = u64_be(block.get(4 + 10..)?)?;
    let rate = packed >> 44;
    let samples = packed & 0x0f_ffff_ffff;
    (samples > 0).then(|| micros(samples, rate)).flatten()
}

/// After an ID3v2 tag (or several): FLAC (a declared length), or MPEG audio (walked).
fn after_id3(r: &mut Reader<'_>) -> (Option<u64>, bool) {
    let mut at = 0u64;
    for _ in 0..16 {
        let head = r.some(at, 10).to_vec();
        match id3_size(&head) {
            Some(n) => at = at.saturating_add(n),
            None => break,
        }
        // A tag of any size is skipped without holding it.
        r.drop_before(at.min(r.base.saturating_add(r.buf.len() as u64)));
    }
    if r.some(at, 4) == b"fLaC" {
        return (flac(r, at), true);
    }
    (walk_frames(r, at, mpeg_frame), true)
}

/// Walks the frames from `at` to the end: each frame's samples at its rate. Between frames
/// (tags, padding, junk, a cut start) the next sync is searched for and accepted only when
/// another frame follows it.
fn walk_frames(r: &mut Reader<'_>, at: u64, frame: fn(&[u8]) -> Option<Frame>) -> Option<u64> {
    let mut at = at;
    let mut total = 0u64;
    let mut frames = 0u64;
    loop {
        r.drop_before(at);
        let head = r.some(at, 16).to_vec();
        if head.len() < 4 {
            break;
        }
        if let Some(n) = id3_size(&head) {
            at = at.saturating_add(n);
            continue;
        }
        match frame(&head) {
            Some(f) if frames > 0 || next_is_frame(r, at, f, frame) => {
                total = total.saturating_add(micros(f.samples, f.rate)?);
                frames = frames.saturating_add(1);
                at = at.saturating_add(f.len);
            }
            _ => match resync(r, at.saturating_add(1), frame) {
                Some(next) => {
                    at = next;
                    // A frame found by search needs its follower again.
                    frames = 0;
                }
                None => break,
            },
        }
    }
    (total > 0).then_some(total)
}

/// True when a frame follows the frame `f` at `at` (or the payload ends right after it).
fn next_is_frame(r: &mut Reader<'_>, at: u64, f: Frame, frame: fn(&[u8]) -> Option<Frame>) -> bool {
    let next = at.saturating_add(f.len);
    let head = r.some(next, 8).to_vec();
    head.is_empty() || frame(&head).is_some() || id3_size(&head).is_some() || head.starts_with(b"TAG")
}

/// The next offset from `at` where a frame starts that another frame follows.
fn resync(r: &mut Reader<'_>, mut at: u64, frame: fn(&[u8]) -> Option<Frame>) -> Option<u64> {
    loop {
        r.drop_before(at);
        let window = r.some(at, 64 * 1024).to_vec();
        if window.len() < 4 {
            return None;
        }
        let mut found = None;
        for (i, pair) in window.windows(2).enumerate() {
            if pair.first() == Some(&0xff) && pair.get(1).is_some_and(|b| b & 0xe0 == 0xe0) {
                let here = at.saturating_add(i as u64);
                if let Some(f) = window.get(i..).and_then(frame) {
                    if next_is_frame(r, here, f, frame) {
                        found = Some(here);
                        break;
                    }
                }
            }
        }
        if found.is_some() {
            return found;
        }
        // The last byte may start a sync split by the window's edge.
        at = at.saturating_add((window.len() as u64).saturating_sub(1).max(1));
    }
}

/// One logical Ogg stream: its rate, pre-skip and last granule position, and the most samples
/// its packets can hold (a granule past that is not believed: a damaged file claimed centuries).
struct OggStream {
    serial: [u8; 4],
    rate: u64,
    skip: u64,
    last: u64,
    /// The most samples one packet decodes to (Opus 120 ms, Vorbis's largest block, FLAC's).
    per_packet: u64,
    most: u64,
}

/// Ogg: every page walked by its header; each audio stream's last granule position at its
/// rate, streams added (chained files follow each other).
fn ogg(r: &mut Reader<'_>) -> Option<u64> {
    let mut streams: Vec<OggStream> = Vec::new();
    let mut at = 0u64;
    loop {
        r.drop_before(at);
        let Some(h) = r.get(at, 27).map(<[u8]>::to_vec) else { break };
        if h.get(..4) != Some(b"OggS") || h.get(4) != Some(&0) {
            // Lost: the next capture pattern.
            match find(r, at.saturating_add(1), b"OggS") {
                Some(next) => {
                    at = next;
                    continue;
                }
                None => break,
            }
        }
        let segments = usize::from(*h.get(26)?);
        let table = r.get(at.saturating_add(27), segments)?.to_vec();
        let body = table.iter().map(|x| u64::from(*x)).sum::<u64>();
        let start = at.saturating_add(27).saturating_add(segments as u64);
        let serial: [u8; 4] = h.get(14..18)?.try_into().ok()?;
        let granule = u64::from_le_bytes(h.get(6..14)?.try_into().ok()?);
        if h.get(5).is_some_and(|f| f & 0x02 != 0) {
            // Beginning of a stream: its identification header.
            let id = r.some(start, 64).to_vec();
            if let Some((rate, skip, per_packet)) = ogg_identification(&id) {
                streams.push(OggStream { serial, rate, skip, last: 0, per_packet, most: 0 });
            }
        } else if let Some(s) = streams.iter_mut().rev().find(|s| s.serial == serial) {
            // Packets ending on this page: its lacing values under 255.
            let ending = table.iter().filter(|x| **x < 255).count() as u64;
            s.most = s.most.saturating_add(ending.saturating_mul(s.per_packet));
            // A page on which no packet ends has a granule of -1.
            if granule != u64::MAX {
                s.last = granule;
            }
        }
        at = start.saturating_add(body);
    }
    let mut total = 0u64;
    for s in &streams {
        total = total.saturating_add(micros(s.last.saturating_sub(s.skip).min(s.most), s.rate)?);
    }
    (!streams.is_empty()).then_some(total)
}

/// An Ogg stream's first packet: Opus (48 kHz granules, its pre-skip), Vorbis (its rate) or
/// FLAC (its `STREAMINFO` rate), with the most samples one packet of it decodes to.
fn ogg_identification(p: &[u8]) -> Option<(u64, u64, u64)> {
    if p.starts_with(b"OpusHead") {
        let skip = u64::from(u16::from_le_bytes(p.get(10..12)?.try_into().ok()?));
        Some((48_000, skip, 5_760))
    } else if p.starts_with(b"\x01vorbis") {
        u32_le(p.get(12..)?).filter(|x| *x > 0).map(|rate| (rate, 0, 8_192))
    } else if p.starts_with(b"\x7fFLAC") && p.get(9..13) == Some(b"fLaC") {
        let packed = u64_be(p.get(13 + 4 + 10..)?)?;
        Some((packed >> 44, 0, 65_535)).filter(|(rate, _, _)| *rate > 0)
    } else {
        None
    }
}

/// The offset of the next `needle` from `at`.
fn find(r: &mut Reader<'_>, mut at: u64, needle: &[u8]) -> Option<u64> {
    loop {
        r.drop_before(at);
        let window = r.some(at, 64 * 1024).to_vec();
        if window.len() < needle.len() {
            return None;
        }
        if let Some(i) = window.windows(needle.len()).position(|w| w == needle) {
            return Some(at.saturating_add(i as u64));
        }
        at = at.saturating_add((window.len().saturating_sub(needle.len()).saturating_add(1)) as u64);
    }
}

/// MP4/M4A: the top-level boxes walked to `moov`, read whole; its `mvhd` duration at its time
/// scale. A movie with a video track is not sound (`None`: the most sound costs).
fn mp4(r: &mut Reader<'_>) -> Option<u64> {
    let mut at = 0u64;
    for _ in 0..4096 {
        r.drop_before(at);
        let h = r.get(at, 16)?.to_vec();
        let mut size = u32_be(&h)?;
        let mut header = 8u64;
        if size == 1 {
            size = u64_be(h.get(8..)?)?;
            header = 16;
        }
        if h.get(4..8) == Some(b"moov") {
            let n = usize::try_from(size.checked_sub(header)?).ok()?;
            let moov = r.get(at.checked_add(header)?, n)?.to_vec();
            if has_handler(&moov, b"vide") {
                return None;
            }
            let m = moov.windows(4).position(|w| w == b"mvhd")?;
            let v = moov.get(m.checked_add(4)?..)?;
            let (scale, duration) = if v.first()? == &1 {
                (u32_be(v.get(20..)?)?, u64_be(v.get(24..)?)?)
            } else {
                (u32_be(v.get(12..)?)?, u32_be(v.get(16..)?)?)
            };
            return micros(duration, scale);
        }
        if size < header {
            return None;
        }
        at = at.checked_add(size)?;
    }
    None
}

/// True when a `hdlr` box in `moov` names `kind` (`vide`, `soun`).
fn has_handler(moov: &[u8], kind: &[u8]) -> bool {
    moov.windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"hdlr")
        .any(|(i, _)| moov.get(i.saturating_add(12)..i.saturating_add(16)) == Some(kind))
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

    /// An Ogg page of stream 7 with granule `granule` and `body` bytes in one packet's segments;
    /// the first page of its stream when it carries an identification header.
    fn ogg_page(granule: u64, body: &[u8]) -> Vec<u8> {
        let bos = body.starts_with(b"OpusHead") || body.starts_with(b"Speex");
        let mut p = vec![b'O', b'g', b'g', b'S', 0, if bos { 0x02 } else { 0 }];
        p.extend_from_slice(&granule.to_le_bytes());
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(&[0; 8]); // sequence and checksum: not read
                                      // Lacing: 255 for each full segment, then the rest (0 when the body fills its segments),
                                      // which ends the packet on this page.
        let segments = body.len() / 255 + 1;
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
        /// A page of stream 7 with its lacing given (each value under 255 ends a packet).
        fn page(granule: u64, lacing: &[u8]) -> Vec<u8> {
            let mut p = vec![b'O', b'g', b'g', b'S', 0, 0];
            p.extend_from_slice(&granule.to_le_bytes());
            p.extend_from_slice(&7u32.to_le_bytes());
            p.extend_from_slice(&[0; 8]);
            p.push(u8::try_from(lacing.len()).unwrap());
            p.extend_from_slice(lacing);
            let body: usize = lacing.iter().map(|x| usize::from(*x)).sum();
            p.extend((0..body).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            p
        }
        for pad in [0usize, 1, 13, 26, 27, 100] {
            let mut ogg = ogg_page(0, &opus_head(312));
            // Pages of 40 packets of 20 ms (960 samples) up to just before the first window's
            // edge (48 KB decoded).
            let mut g = 312u64;
            while ogg.len() + 40 * 250 + 400 < 48 * 1024 - pad {
                g += 40 * 960;
                ogg.extend(page(g, &[250; 40]));
            }
            ogg.extend(std::iter::repeat_n(0u8, 48 * 1024 - pad - ogg.len() - 40).collect::<Vec<_>>());
            // A page no packet ends on (granule -1), then the last page.
            ogg.extend(page(u64::MAX, &[255]));
            g += 40 * 960;
            ogg.extend(page(
                g,
                &[
                    0, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250,
                    250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250, 250,
                    250, 250, 250, 250,
                ],
            ));
            assert_eq!(payload_tokens(&b64(&ogg)), (g - 312) * 32 / 48_000, "pad {pad}");
            assert!(g > 4 * 48_000, "long enough to be more than the least price");
        }
    }

    /// Headers cut short, sizes out of range, rates of 0: sound of unknown length, at the most
    /// it can cost (at least 85), never a panic.
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
            b"OggS\0\0".to_vec(),
            ogg_page(0, b"SpeexHeader and more bytes"),
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(kind(c).is_some(), "case {i} not read as sound");
            assert_eq!(payload_tokens(&b64(c)), 85, "case {i}");
        }
        // Sound of 300 KB whose length cannot be read costs the most it can: its bytes at the
        // lowest bitrate.
        let mut big = b"fLaC\0\0\0\x22".to_vec();
        big.extend(std::iter::repeat_n(0u8, 300 * 1024));
        assert_eq!(payload_tokens(&b64(&big)), big.len() as u64 * 32 / FLOOR_BYTES_PER_SECOND);
    }
}
