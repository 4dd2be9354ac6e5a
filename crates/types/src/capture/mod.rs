//! The capture format `salvage.capture/1`: one failing session plus how its upstream behaves.
//!
//! [`schema`] owns the shape; [`reading`] owns the pipeline from a file to a validated
//! [`Capture`]. [`read_capture`] refuses an unknown `format` and reports the file, the JSON path
//! and the problem for any malformed field.

pub mod reading;
pub mod schema;

pub use reading::*;
pub use schema::*;
