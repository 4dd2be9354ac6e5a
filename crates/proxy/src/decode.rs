//! Reading a response the upstream content-encoded (`gzip`, `deflate`, `br`, `zstd`), as provider
//! CDNs do when the client accepts it: the client still gets the encoded bytes unchanged; the
//! proxy decodes its own copy to rebuild the reply, and a rejection's body to classify it.
//!
//! Decoding goes in small steps so that what a step yields stays small whatever the ratio (a body
//! that inflates a thousandfold is read piece by piece, never whole), and a whole body is decoded
//! only up to a size.

use std::io::Write;

/// A request body is decoded up to this size (the proxy's own cap on a body as sent).
pub const MAX_DECODED_REQUEST: usize = 256 << 20;

/// The input fed to a decoder at once: what one step can yield is this times the coding's ratio.
const STEP: usize = 512;

/// A content-coding the proxy reads (RFC 9110 section 8.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// None (`identity`, or no `content-encoding`).
    Identity,
    /// `gzip` (or `x-gzip`).
    Gzip,
    /// `deflate`: zlib-wrapped DEFLATE.
    Deflate,
    /// `br`: Brotli.
    Brotli,
    /// `zstd`: Zstandard.
    Zstd,
}

impl Coding {
    /// The coding a `content-encoding` header names (none: a coding the proxy does not read, or
    /// several stacked).
    pub fn of(header: Option<&str>) -> Option<Coding> {
        let codings: Vec<String> = header
            .unwrap_or("")
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty() && c != "identity")
            .collect();
        match codings.as_slice() {
            [] => Some(Coding::Identity),
            [one] => match one.as_str() {
                "gzip" | "x-gzip" => Some(Coding::Gzip),
                "deflate" => Some(Coding::Deflate),
                "br" => Some(Coding::Brotli),
                "zstd" => Some(Coding::Zstd),
                _ => None,
            },
            _ => None,
        }
    }
}

enum Inner {
    Identity,
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    Deflate(flate2::write::ZlibDecoder<Vec<u8>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Decoder<'static, Vec<u8>>),
    /// The input was not valid in its coding: nothing more is decoded.
    Broken,
}

/// An incremental decoder of one body.
pub struct Decoder {
    inner: Inner,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_broken() { "Decoder(broken)" } else { "Decoder" })
    }
}

impl Decoder {
    /// A decoder of `coding`.
    pub fn new(coding: Coding) -> Decoder {
        let inner = match coding {
            Coding::Identity => Inner::Identity,
            Coding::Gzip => Inner::Gzip(flate2::write::GzDecoder::new(Vec::new())),
            Coding::Deflate => Inner::Deflate(flate2::write::ZlibDecoder::new(Vec::new())),
            Coding::Brotli => {
                Inner::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(Vec::new(), 4096)))
            }
            Coding::Zstd => zstd::stream::write::Decoder::new(Vec::new()).map_or(Inner::Broken, Inner::Zstd),
        };
        Decoder { inner }
    }

    /// The input was not valid in its coding.
    pub fn is_broken(&self) -> bool {
        matches!(self.inner, Inner::Broken)
    }

    /// Decodes the next bytes of the body, handing what they decode to in pieces to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut dyn FnMut(&[u8])) {
        if let Inner::Identity = self.inner {
            out(input);
            return;
        }
        for step in input.chunks(STEP) {
            let ok = match &mut self.inner {
                Inner::Identity | Inner::Broken => return,
                Inner::Gzip(d) => d.write_all(step).is_ok(),
                Inner::Deflate(d) => d.write_all(step).is_ok(),
                Inner::Brotli(d) => d.write_all(step).is_ok(),
                Inner::Zstd(d) => d.write_all(step).is_ok(),
            };
            self.drain(out);
            if !ok {
                self.inner = Inner::Broken;
                return;
            }
        }
    }

    /// The body ended: what the decoder still holds goes to `out`.
    pub fn finish(&mut self, out: &mut dyn FnMut(&[u8])) {
        let ok = match &mut self.inner {
            Inner::Identity | Inner::Broken => return,
            Inner::Gzip(d) => d.try_finish().is_ok(),
            Inner::Deflate(d) => d.try_finish().is_ok(),
            Inner::Brotli(d) => d.flush().is_ok(),
            Inner::Zstd(d) => d.flush().is_ok(),
        };
        self.drain(out);
        if !ok {
            self.inner = Inner::Broken;
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(&[u8])) {
        let buf = match &mut self.inner {
            Inner::Identity | Inner::Broken => return,
            Inner::Gzip(d) => d.get_mut(),
            Inner::Deflate(d) => d.get_mut(),
            Inner::Brotli(d) => d.get_mut(),
            Inner::Zstd(d) => d.get_mut(),
        };
        if !buf.is_empty() {
            out(buf);
            buf.clear();
        }
    }
}

/// A request body as the client encoded it (`coding`, from its `content-encoding`), decoded; the
/// error says why it cannot be read.
pub fn decoded_request(coding: Option<Coding>, body: bytes::Bytes) -> Result<bytes::Bytes, String> {
    match coding {
        Some(Coding::Identity) => Ok(body),
        Some(c) => decode_whole(c, &body, MAX_DECODED_REQUEST).map(bytes::Bytes::from).ok_or_else(|| {
            format!("not valid {c:?} content, or more than {MAX_DECODED_REQUEST} bytes decoded")
        }),
        None => Err("a content-encoding the proxy does not read".into()),
    }
}

/// A whole body decoded, when it is valid in `coding` and decodes to at most `max` bytes.
pub fn decode_whole(coding: Coding, body: &[u8], max: usize) -> Option<Vec<u8>> {
    if coding == Coding::Identity {
        return (body.len() <= max).then(|| body.to_vec());
    }
    let mut d = Decoder::new(coding);
    let mut all = Vec::new();
    let mut over = false;
    for part in body.chunks(64 * 1024) {
        d.feed(part, &mut |b| keep(&mut all, &mut over, b, max));
        if over || d.is_broken() {
            return None;
        }
    }
    d.finish(&mut |b| keep(&mut all, &mut over, b, max));
    (!over && !d.is_broken()).then_some(all)
}

/// Adds `b` to `all` unless that passes `max` (then `over`).
fn keep(all: &mut Vec<u8>, over: &mut bool, b: &[u8], max: usize) {
    if *over || all.len().saturating_add(b.len()) > max {
        *over = true;
    } else {
        all.extend_from_slice(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(coding: Coding, plain: &[u8]) -> Vec<u8> {
        match coding {
            Coding::Identity => plain.to_vec(),
            Coding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(plain).expect("gzip");
                e.finish().expect("gzip")
            }
            Coding::Deflate => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(plain).expect("zlib");
                e.finish().expect("zlib")
            }
            Coding::Zstd => zstd::encode_all(plain, 3).expect("zstd"),
            // A stored (uncompressed) Brotli stream: one metablock, ISLAST with ISUNCOMPRESSED
            // cannot be combined, so a non-last uncompressed metablock then an empty last one.
            Coding::Brotli => brotli_stored(plain),
        }
    }

    /// A valid Brotli stream holding `plain` in uncompressed metablocks (RFC 7932 section 9.2):
    /// WBITS 16 (one 0 bit), then per block ISLAST=0, MNIBBLES=4 (bits 00), MLEN-1 in 16 bits,
    /// ISUNCOMPRESSED=1, padding to the byte, the bytes; then ISLAST=1, ISLASTEMPTY=1.
    fn brotli_stored(plain: &[u8]) -> Vec<u8> {
        let mut bits = Bits::default();
        bits.put(0, 1);
        for block in plain.chunks(65536) {
            bits.put(0, 1);
            bits.put(0, 2);
            bits.put((block.len() - 1) as u64, 16);
            bits.put(1, 1);
            bits.align();
            bits.bytes.extend_from_slice(block);
        }
        bits.put(1, 1);
        bits.put(1, 1);
        bits.align();
        bits.bytes
    }

    #[derive(Default)]
    struct Bits {
        bytes: Vec<u8>,
        used: u32,
    }

    impl Bits {
        fn put(&mut self, v: u64, n: u32) {
            for i in 0..n {
                if self.used.is_multiple_of(8) {
                    self.bytes.push(0);
                }
                let bit = ((v >> i) & 1) as u8;
                *self.bytes.last_mut().expect("a byte") |= bit << (self.used % 8);
                self.used += 1;
            }
        }

        fn align(&mut self) {
            self.used = self.used.div_ceil(8) * 8;
        }
    }

    const ALL: [Coding; 5] = [Coding::Identity, Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd];

    #[test]
    fn headers_name_codings() {
        assert_eq!(Coding::of(None), Some(Coding::Identity));
        assert_eq!(Coding::of(Some("identity")), Some(Coding::Identity));
        assert_eq!(Coding::of(Some("GZIP")), Some(Coding::Gzip));
        assert_eq!(Coding::of(Some("x-gzip")), Some(Coding::Gzip));
        assert_eq!(Coding::of(Some(" br ")), Some(Coding::Brotli));
        assert_eq!(Coding::of(Some("zstd")), Some(Coding::Zstd));
        assert_eq!(Coding::of(Some("deflate")), Some(Coding::Deflate));
        assert_eq!(Coding::of(Some("compress")), None);
        assert_eq!(Coding::of(Some("gzip, br")), None);
    }

    #[test]
    fn every_coding_decodes_fed_in_odd_pieces() {
        let plain: Vec<u8> =
            (0..50_000u32).flat_map(|i| format!("data: {{\"n\":{i}}}\n\n").into_bytes()).collect();
        for coding in ALL {
            let body = encoded(coding, &plain);
            let mut d = Decoder::new(coding);
            let mut got = Vec::new();
            for piece in body.chunks(777) {
                d.feed(piece, &mut |b| got.extend_from_slice(b));
            }
            d.finish(&mut |b| got.extend_from_slice(b));
            assert!(!d.is_broken(), "{coding:?}");
            assert_eq!(got.len(), plain.len(), "{coding:?}");
            assert!(got == plain, "{coding:?}");
            assert_eq!(
                decode_whole(coding, &body, plain.len()).as_deref(),
                Some(plain.as_slice()),
                "{coding:?}"
            );
        }
    }

    #[test]
    fn a_body_that_inflates_past_the_limit_or_is_not_in_its_coding_is_not_decoded() {
        let plain = vec![b'a'; 10_000_000];
        let bomb = encoded(Coding::Gzip, &plain);
        assert!(bomb.len() < 20_000);
        assert_eq!(decode_whole(Coding::Gzip, &bomb, 1_000_000), None);
        // Fed incrementally, no single piece handed out is large.
        let mut d = Decoder::new(Coding::Gzip);
        let mut largest = 0;
        d.feed(&bomb, &mut |b| largest = largest.max(b.len()));
        assert!(largest <= 1 << 20, "{largest}");
        for coding in [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd] {
            assert_eq!(
                decode_whole(coding, b"{\"plain\": \"json, not encoded\"}", 1 << 20),
                None,
                "{coding:?}"
            );
        }
    }
}
