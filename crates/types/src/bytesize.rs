//! Human-friendly byte sizes: the `CHATCLI_MAX_PAYLOAD` parser and the one-decimal formatter.

use std::fmt;

/// A byte count that prints as `512 B`, `2.0 KB`, `5.0 MB`, `1.0 GB` (binary units, one decimal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

const KIB: f64 = 1024.0;

impl ByteSize {
    /// Parses `5MB`, `512KB`, `2.5MB`, `1G`, `1024B`, `5 MB` (case-insensitive; a bare number is
    /// MB; binary multiples). Returns `None` for an invalid, zero or negative value.
    pub fn parse(text: &str) -> Option<ByteSize> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let upper = compact.to_ascii_uppercase();
        let split = upper
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
            .unwrap_or(upper.len());
        let (num, unit) = upper.split_at(split);
        let mult: f64 = match unit {
            "" | "M" | "MB" | "MIB" => KIB * KIB,
            "B" => 1.0,
            "K" | "KB" | "KIB" => KIB,
            "G" | "GB" | "GIB" => KIB * KIB * KIB,
            "T" | "TB" | "TIB" => KIB * KIB * KIB * KIB,
            _ => return None,
        };
        let n: f64 = num.parse().ok()?;
        if !n.is_finite() || n <= 0.0 {
            return None;
        }
        let bytes = (n * mult).floor();
        if bytes < 1.0 || bytes >= u64::MAX as f64 {
            return None;
        }
        // The value is finite, at least 1 and below u64::MAX, so the conversion is exact enough.
        Some(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let v = n as f64;
        if n < 1024 {
            write!(f, "{n} B")
        } else if v < KIB * KIB {
            write!(f, "{:.1} KB", v / KIB)
        } else if v < KIB * KIB * KIB {
            write!(f, "{:.1} MB", v / (KIB * KIB))
        } else {
            write!(f, "{:.1} GB", v / (KIB * KIB * KIB))
        }
    }
}

/// Shorthand for `ByteSize(n).to_string()`.
pub fn format_bytes(n: u64) -> String {
    ByteSize(n).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_inputs() {
        assert_eq!(ByteSize::parse("5XB"), None);
        assert_eq!(ByteSize::parse("MB"), None);
        assert_eq!(ByteSize::parse("1.2.3MB"), None);
        assert_eq!(ByteSize::parse("0.5B"), None);
        assert_eq!(ByteSize::parse("1e3KB"), None);
        assert_eq!(ByteSize::parse("  2 kb "), Some(ByteSize(2048)));
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(u64::MAX), "17179869184.0 GB");
    }
}
