//! The output handle every command writes through, so tests capture it and a closed pipe is quiet.

use std::io::{IsTerminal, Write};

/// Where a command's standard output goes.
#[allow(dead_code)] // is_terminal serves the replay progress bar
pub struct Output {
    inner: Box<dyn Write>,
    /// True when stdout is a terminal (colour and progress bars only then).
    pub is_terminal: bool,
}

#[allow(dead_code)]
impl Output {
    /// Buffered standard output.
    pub fn stdout() -> Output {
        let is_terminal = std::io::stdout().is_terminal();
        Output { inner: Box::new(std::io::BufWriter::new(std::io::stdout())), is_terminal }
    }

    /// Writes a string.
    pub fn put(&mut self, s: &str) -> std::io::Result<()> {
        self.inner.write_all(s.as_bytes())
    }

    /// The writer itself, for output streamed by a serializer.
    pub fn writer(&mut self) -> &mut dyn Write {
        &mut *self.inner
    }

    /// Writes raw bytes.
    pub fn put_bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(b)
    }

    /// Writes a line.
    pub fn line(&mut self, s: &str) -> std::io::Result<()> {
        self.inner.write_all(s.as_bytes())?;
        self.inner.write_all(b"\n")
    }

    /// Writes pretty JSON and a newline.
    pub fn json(&mut self, v: &serde_json::Value) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut self.inner, v).map_err(|e| match e.io_error_kind() {
            // Keep the kind, so a closed pipe still exits 0.
            Some(kind) => std::io::Error::new(kind, e),
            None => std::io::Error::other(e),
        })?;
        self.inner.write_all(b"\n")
    }

    /// Flushes.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The short form of a session id shown in tables: the part after `@` (its run stamp), which
/// `journal` commands accept as a prefix.
pub fn short_session(id: &str) -> &str {
    id.split_once('@').map(|(_, s)| s).unwrap_or(id)
}

/// Pads cells into aligned columns; every cell is escaped for the terminal first
/// ([`crate::terminal::escape`]), so an id or title cannot drive it or break the layout.
pub fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| r.iter().map(|c| crate::terminal::escape(c).into_owned()).collect()).collect();
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// Refuses, before any work, an output path a write would refuse (see
/// [`crate::atomic_file::check`]), naming the option it was given to.
pub fn check_output(option: &str, path: Option<&std::path::Path>) -> Result<(), crate::exit::Failure> {
    match path {
        Some(p) => crate::atomic_file::check(p)
            .map_err(|e| crate::exit::Failure::Input(format!("{option} {}: cannot write: {e}", p.display()))),
        None => Ok(()),
    }
}

/// Writes a file atomically and owner-only (see [`crate::atomic_file::write`]).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::atomic_file::write(path, bytes)
}

/// Says on stderr what a command is waiting for when its standard input is a terminal (so a bare
/// `salvage classify` does not look hung).
pub fn stdin_hint(what: &str) {
    if std::io::stdin().is_terminal() {
        eprintln!("salvage: reading {what} from standard input (end with Ctrl-D; --help shows the flags)");
    }
}
