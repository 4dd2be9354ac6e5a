//! Helpers the wire tests share: [`sessions`] for the session-file importers (the samples, reading
//! a file or an inline text), [`bodies`] for the request bodies (every sample of a format, the
//! opaque blocks of a history, the pairing check).

// Each test binary uses its own subset.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod bodies;
pub mod sessions;
