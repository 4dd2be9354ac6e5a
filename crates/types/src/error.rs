//! The error of reading an input file (a capture, a request body, a session file): every variant
//! names the file. Defined apart from [`crate::capture`] and [`crate::input`] so that the
//! low-level reading ([`crate::input`]) and the capture pipeline both use it without importing
//! each other; re-exported as `capture::CaptureError`.

/// Why a capture could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is larger than the configured ceiling.
    #[error("{file}: file is {size} bytes, over the {limit}-byte limit for a capture")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size.
        size: u64,
        /// The ceiling.
        limit: u64,
    },
    /// A stream (a pipe, a device, a file that grew while read) went on past the ceiling: its size
    /// is not known, only that it is over.
    #[error("{file}: more than {limit} bytes, over the {limit}-byte limit for a capture")]
    TooLong {
        /// The file.
        file: String,
        /// The ceiling.
        limit: u64,
    },
    /// Not a regular file (a FIFO, a device…) and the caller did not allow one.
    #[error("{file}: {kind}, not a regular file: salvage reads regular files only")]
    NotRegular {
        /// The file.
        file: String,
        /// What it is.
        kind: &'static str,
    },
    /// The JSON holds more values than a file of its size may (a JSON bomb).
    #[error("{file}: more than {limit} JSON values for a file of this size: refused before parsing (a bomb of small values would exhaust memory)")]
    TooManyValues {
        /// The file.
        file: String,
        /// The ceiling.
        limit: usize,
    },
    /// The bytes are not UTF-8.
    #[error("{file}: invalid UTF-8 at byte {offset} (line {line})")]
    InvalidUtf8 {
        /// The file.
        file: String,
        /// Byte offset of the first bad byte.
        offset: usize,
        /// Its line.
        line: usize,
    },
    /// The JSON is malformed.
    #[error("{file}: malformed JSON at line {line}, column {column}: {problem}")]
    Syntax {
        /// The file.
        file: String,
        /// Line.
        line: usize,
        /// Column.
        column: usize,
        /// What is wrong.
        problem: String,
    },
    /// The `format` is not one this build knows.
    #[error("{file}: format: unknown capture format {found:?} (this build reads {known})")]
    UnknownFormat {
        /// The file.
        file: String,
        /// What the file says (`<missing>` when absent).
        found: String,
        /// The known versions.
        known: String,
    },
    /// A field is malformed.
    #[error("{file}: {path}: {problem}")]
    Field {
        /// The file.
        file: String,
        /// The JSON path, e.g. `history[3].role`.
        path: String,
        /// What is wrong.
        problem: String,
    },
}

impl CaptureError {
    /// The file the error is about.
    pub fn file(&self) -> &str {
        match self {
            CaptureError::Io { file, .. }
            | CaptureError::TooLarge { file, .. }
            | CaptureError::TooLong { file, .. }
            | CaptureError::InvalidUtf8 { file, .. }
            | CaptureError::Syntax { file, .. }
            | CaptureError::UnknownFormat { file, .. }
            | CaptureError::Field { file, .. }
            | CaptureError::NotRegular { file, .. }
            | CaptureError::TooManyValues { file, .. } => file,
        }
    }
}
