//! Real I/O behind the recovery crate's traits: the CCR archive, the `cmd:PROGRAM` and
//! `mcp:SERVER` summarizers, and command and HTTP hooks.
//!
//! The recovery crate is pure logic; everything here touches processes, pipes, sockets or the
//! database, and is plugged in by the replay driver and the CLI. Design decision: every adapter
//! bounds its time (a timeout on each process or request) and turns every failure into a value
//! the pipeline reports — a slow or broken hook or engine never stalls a compaction.

pub mod archive;
pub mod hooks;
pub mod mcp;
pub mod process;

pub use archive::CcrArchive;
