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

/// What kind of file a path is, for an error message.
fn describe(ft: &std::fs::FileType) -> &'static str {
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
    read_bounded(f, &file, limit, hint)
}

fn read_bounded(r: impl Read, file: &str, limit: u64, hint: u64) -> Result<Vec<u8>, CaptureError> {
    let mut buf = Vec::with_capacity(usize::try_from(hint.min(limit).saturating_add(1)).unwrap_or(0));
    r.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|source| CaptureError::Io { file: file.to_string(), source })?;
    if buf.len() as u64 > limit {
        return Err(CaptureError::TooLarge { file: file.to_string(), size: buf.len() as u64, limit });
    }
    Ok(buf)
}

/// The nesting depth and number of values of a JSON text, found without building anything;
/// stops counting past `max_values`. Malformed text is left for the parser to report.
pub fn json_shape(bytes: &[u8], max_values: usize) -> (usize, usize) {
    let (mut depth, mut max_depth, mut values) = (0usize, 0usize, 0usize);
    let mut it = bytes.iter().copied().peekable();
    while values <= max_values {
        let Some(b) = it.next() else { break };
        match b {
            b'{' | b'[' => {
                values = values.saturating_add(1);
                depth = depth.saturating_add(1);
                max_depth = max_depth.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                values = values.saturating_add(1);
                // Skip the string, escapes included.
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
                values = values.saturating_add(1);
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

/// Refuses a JSON text holding more values than [`max_values`] allows for its size, naming the
/// file.
pub fn check_json_shape(bytes: &[u8], file: &str) -> Result<(), CaptureError> {
    let limit = max_values(bytes.len());
    // Deeper nesting than MAX_DEPTH is left to the parser, whose recursion limit refuses it
    // before it has built much (with the position, which the bad-input corpus pins).
    let (_, values) = json_shape(bytes, limit);
    if values > limit {
        return Err(CaptureError::TooManyValues { file: file.to_string(), limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn devices_and_oversized_streams_are_refused() {
        let e = read_input(Path::new("/dev/zero"), 1 << 20, false).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_input(Path::new("/dev/zero"), 1 << 20, true).unwrap_err();
        assert!(matches!(e, CaptureError::TooLarge { .. }), "{e}");
    }
}
