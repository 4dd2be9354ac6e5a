//! Reading untrusted input files under their ceilings: the size limit is enforced while reading
//! (never trusted from metadata, which says 0 for `/dev/zero`), only regular files are opened
//! unless the caller allows devices and pipes (a FIFO would block forever), and the JSON's shape
//! (nesting depth, number of values) is checked by a scan that builds nothing, before any parser
//! builds values from it: a bomb of small objects costs about 80 bytes of memory per 3 bytes of
//! file once parsed.
//!
//! `replay`, `import` and the session importers read through [`read_input`].

use crate::error::CaptureError;
use std::io::Read;
use std::path::Path;

/// Deepest JSON nesting accepted (serde_json's own recursion limit is 128).
pub const MAX_DEPTH: usize = 128;

/// How many JSON values (objects, arrays, strings, numbers, literals, keys included) a document
/// of `len` bytes may hold: 512 Ki for free, then one per 32 bytes. Parsed, a value costs about
/// 80 bytes, so the parsed tree stays within about 2.5 times the file plus 40 MB, while real
/// captures and request bodies (long strings, few values) sit far below the limit.
pub fn max_values(len: usize) -> usize {
    (512usize << 10).saturating_add(len / 32)
}

/// Gives a read buffer back once it is parsed: shrunk to nothing first (a `realloc`), then freed.
///
/// Design note (issue #19, peak memory): glibc's malloc serves a buffer over 128 KiB with a
/// mapping of its own, and freeing such a mapping (up to 32 MiB) raises the size under which
/// later allocations are served from the heap to that buffer's size (its dynamic mmap threshold).
/// After a 10 MB capture's buffer was freed, every buffer of the replay under 10 MB (compressed
/// frames, snapshot blobs, decoded rows) came from the heap and left it fragmented: about 3.5 MB
/// more peak RSS in the 10 MB replay. Shrunk first, the mapping is remapped to one page, whose
/// release changes no threshold. Any other allocator sees a `realloc` and a `free`.
pub fn release(buf: Vec<u8>) {
    drop(emptied(buf));
}

/// The buffer emptied and shrunk to (about) nothing, in place.
fn emptied(mut buf: Vec<u8>) -> Vec<u8> {
    buf.clear();
    buf.shrink_to(1);
    buf
}

/// What kind of file a path is, for an error message (`a FIFO`, `a folder`, …).
pub fn describe(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// Reads at most `limit` bytes of `path` (`-` is standard input), refusing a larger input as
/// soon as it is seen, and anything but a regular file unless `allow_special`.
pub fn read_input(path: &Path, limit: u64, allow_special: bool) -> Result<Vec<u8>, CaptureError> {
    let file = path.display().to_string();
    let io = |source| CaptureError::Io { file: file.clone(), source };
    if path.as_os_str() == "-" {
        return read_bounded(std::io::stdin().lock(), &file, limit, 0);
    }
    // Follows symlinks: a `*.json` link to `/dev/zero` is judged by what it points at.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() && !allow_special {
        return Err(CaptureError::NotRegular { file, kind: describe(&meta.file_type()) });
    }
    if meta.is_file() && meta.len() > limit {
        return Err(CaptureError::TooLarge { file, size: meta.len(), limit });
    }
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(target_os = "linux")]
    if !allow_special {
        // O_NONBLOCK: a file swapped for a FIFO after the check cannot block the open.
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(0o4000);
    }
    let f = o.open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() && !allow_special {
        return Err(CaptureError::NotRegular { file, kind: describe(&meta.file_type()) });
    }
    let hint = if meta.is_file() { meta.len() } else { 0 };
    if meta.is_file() {
        if let Some(bytes) = read_halves(&f, hint) {
            return Ok(bytes);
        }
        // Read again from the start, one piece after the other.
        use std::io::Seek;
        (&f).rewind().map_err(io)?;
    }
    read_bounded(f, &file, limit, hint)
}

/// From this size a regular file is read in two halves at once.
const HALVES_FROM: u64 = 8 << 20;

/// A regular file of `len` bytes (at most the limit, checked by the caller) read by two threads,
/// one half each: the kernel's copy and the faults that map the buffer's pages, most of the time
/// of a read, run on two cores. `None` when the file is small, a thread cannot start, or the
/// file is not `len` bytes long any more (it grew or shrank since `len` was taken): the caller
/// reads it again the ordinary way, which bounds it as it reads.
#[cfg(unix)]
fn read_halves(f: &std::fs::File, len: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    if len < HALVES_FROM {
        return None;
    }
    let len = usize::try_from(len).ok()?;
    // Zeroed by the allocator's fresh mapping, not by a pass over it: the pages are first
    // touched by the threads' reads.
    let mut buf = vec![0u8; len];
    let half = len / 2;
    let (first, second) = buf.split_at_mut(half);
    let fill = |part: &mut [u8], at: usize| f.read_exact_at(part, at as u64).is_ok();
    let both = std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("read".into())
            .spawn_scoped(scope, || fill(second, half))
            .ok()?;
        let mine = fill(first, 0);
        Some(mine && other.join().ok()?)
    });
    // The file ends where it did when its size was taken.
    let mut past = [0u8; 1];
    (both == Some(true) && f.read_at(&mut past, len as u64).ok()? == 0).then_some(buf)
}

#[cfg(not(unix))]
fn read_halves(_: &std::fs::File, _: u64) -> Option<Vec<u8>> {
    None
}

fn read_bounded(r: impl Read, file: &str, limit: u64, hint: u64) -> Result<Vec<u8>, CaptureError> {
    let mut buf = Vec::with_capacity(usize::try_from(hint.min(limit).saturating_add(1)).unwrap_or(0));
    r.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|source| CaptureError::Io { file: file.to_string(), source })?;
    if buf.len() as u64 > limit {
        // Only the first bytes past the ceiling were read: the size is not known (saying it is
        // limit + 1 bytes, as before, was false).
        return Err(CaptureError::TooLong { file: file.to_string(), limit });
    }
    Ok(buf)
}

/// The nesting depth and number of values of a JSON text, found without building anything;
/// stops counting past `max_values`. Malformed text is left for the parser to report.
pub fn json_shape(bytes: &[u8], max_values: usize) -> (usize, usize) {
    let (mut depth, mut max_depth, mut values) = (0usize, 0usize, 0usize);
    let mut i = 0usize;
    while values <= max_values {
        let Some(&b) = bytes.get(i) else { break };
        i = i.saturating_add(1);
        match b {
            b'{' | b'[' => {
                values = values.saturating_add(1);
                depth = depth.saturating_add(1);
                max_depth = max_depth.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                values = values.saturating_add(1);
                i = string_end(bytes, i);
            }
            b'0'..=b'9' | b'-' | b't' | b'f' | b'n' => {
                values = values.saturating_add(1);
                while bytes
                    .get(i)
                    .is_some_and(|c| !matches!(c, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t' | b':'))
                {
                    i = i.saturating_add(1);
                }
            }
            _ => {}
        }
    }
    (max_depth, values)
}

/// Where the string whose contents start at `i` ends: just after its closing quote, escapes
/// skipped (the end of the text when it is not closed).
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    loop {
        let rest = bytes.get(i..).unwrap_or_default();
        let Some(at) = quote_or_backslash(rest).map(|k| k.saturating_add(i)) else { return bytes.len() };
        match bytes.get(at) {
            Some(b'\\') => i = at.saturating_add(2),
            _ => return at.saturating_add(1),
        }
    }
}

/// The first `"` or `\` of `s`, eight bytes at a time (long strings are most of a request body).
fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Non-zero exactly when a byte of `x` is zero.
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut start = 0usize;
    for chunk in s.chunks_exact(8) {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        if has_zero(w ^ ONES.wrapping_mul(u64::from(b'"')))
            | has_zero(w ^ ONES.wrapping_mul(u64::from(b'\\')))
            != 0
        {
            break;
        }
        start = start.saturating_add(8);
    }
    let tail = s.get(start..).unwrap_or_default();
    tail.iter().position(|&c| c == b'"' || c == b'\\').map(|k| k.saturating_add(start))
}

/// Refuses a JSON text holding more values than [`max_values`] allows for its size, naming the
/// file; else returns how many values it holds.
pub fn check_json_shape(bytes: &[u8], file: &str) -> Result<usize, CaptureError> {
    let limit = max_values(bytes.len());
    // Deeper nesting than MAX_DEPTH is left to the parser, whose recursion limit refuses it
    // before it has built much (with the position, which the bad-input corpus pins).
    let (_, values) = json_shape(bytes, limit);
    if values > limit {
        return Err(CaptureError::TooManyValues { file: file.to_string(), limit });
    }
    // Within the limit the scan ran to the end: `values` is every value of the bytes.
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_buffer_is_shrunk_before_it_is_freed() {
        let small = emptied(vec![7u8; 4 << 20]);
        assert!(small.capacity() < 4096, "{} bytes kept", small.capacity());
        assert!(small.is_empty());
    }

    /// The byte-by-byte scan `json_shape` replaced, as the reference.
    fn shape_byte_by_byte(bytes: &[u8], max_values: usize) -> (usize, usize) {
        let (mut depth, mut max_depth, mut values) = (0usize, 0usize, 0usize);
        let mut it = bytes.iter().copied().peekable();
        while values <= max_values {
            let Some(b) = it.next() else { break };
            match b {
                b'{' | b'[' => {
                    values += 1;
                    depth += 1;
                    max_depth = max_depth.max(depth);
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                b'"' => {
                    values += 1;
                    while let Some(c) = it.next() {
                        match c {
                            b'\\' => {
                                it.next();
                            }
                            b'"' => break,
                            _ => {}
                        }
                    }
                }
                b'0'..=b'9' | b'-' | b't' | b'f' | b'n' => {
                    values += 1;
                    while it
                        .next_if(|c| !matches!(c, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t' | b':'))
                        .is_some()
                    {}
                }
                _ => {}
            }
        }
        (max_depth, values)
    }

    #[test]
    fn the_word_at_a_time_scan_counts_as_the_byte_scan() {
        let pieces = [
            "{",
            "}",
            "[",
            "]",
            "\"",
            "\\",
            "\\\"",
            "a",
            "12",
            ",",
            ":",
            " ",
            "true",
            r"\u00e9",
            "é",
            "xxxxxxxxx",
        ];
        // Every text of up to 4 pieces, and longer ones whose escapes fall across 8-byte words.
        let mut texts: Vec<String> = vec![String::new()];
        for _ in 0..4 {
            texts = texts.iter().flat_map(|t| pieces.iter().map(move |p| format!("{t}{p}"))).collect();
            for t in &texts {
                for max in [0, 1, 3, usize::MAX] {
                    assert_eq!(json_shape(t.as_bytes(), max), shape_byte_by_byte(t.as_bytes(), max), "{t:?}");
                }
            }
        }
        for pad in 0..17 {
            let t = format!(r#"{{"a": "{}\"q\\", "b": [1, "{}"]}}"#, "y".repeat(pad), "z".repeat(pad * 3));
            assert_eq!(
                json_shape(t.as_bytes(), usize::MAX),
                shape_byte_by_byte(t.as_bytes(), usize::MAX),
                "{t}"
            );
        }
    }

    #[test]
    fn shapes_are_counted_without_parsing() {
        assert_eq!(json_shape(br#"{"a": [1, 2.5e3, "x\"]", true, null], "b": {}}"#, 100), (2, 10));
        let bomb = format!("[{}]", vec!["{}"; 1000].join(","));
        assert_eq!(json_shape(bomb.as_bytes(), 10_000), (2, 1001));
        assert!(json_shape(bomb.as_bytes(), 10).1 > 10);
    }

    #[test]
    fn a_bomb_is_refused_and_a_long_string_is_not() {
        let bomb = format!("[{}]", vec!["{}"; 2_000_000].join(","));
        assert!(matches!(
            check_json_shape(bomb.as_bytes(), "b.json"),
            Err(CaptureError::TooManyValues { .. })
        ));
        let long = format!("{{\"content\": \"{}\"}}", "x".repeat(10 << 20));
        assert!(check_json_shape(long.as_bytes(), "l.json").is_ok());
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(json_shape(deep.as_bytes(), 1000).0, 200);
    }

    #[cfg(unix)]
    #[test]
    fn a_large_file_is_read_in_halves_whole_and_in_order() {
        let path = std::env::temp_dir().join(format!("salvage-halves-{}.json", std::process::id()));
        // An odd length, and bytes that differ at every offset of a period prime to it.
        let len = HALVES_FROM as usize + 3;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert!(read_halves(&f, len as u64) == Some(bytes.clone()), "the halves differ from the file");
        // A size that is no longer the file's: left to the ordinary read.
        assert!(read_halves(&f, len as u64 - 1).is_none());
        assert!(read_halves(&f, len as u64 + 1).is_none());
        assert!(read_input(&path, len as u64, false).unwrap() == bytes);
        assert!(matches!(read_input(&path, len as u64 - 1, false), Err(CaptureError::TooLarge { .. })));
        std::fs::remove_file(&path).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_oversized_streams_are_refused() {
        let e = read_input(Path::new("/dev/zero"), 1 << 20, false).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_input(Path::new("/dev/zero"), 1 << 20, true).unwrap_err();
        assert!(matches!(e, CaptureError::TooLong { .. }), "{e}");
        assert!(e.to_string().contains(": more than 1048576 bytes"), "{e}");
    }
}
