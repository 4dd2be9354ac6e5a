//! `salvage proxy`: a reverse proxy in front of an LLM provider API that records every turn of any
//! client into the journal, writes a ready-to-replay capture of every failure, and with
//! `--recover` runs the payload policy and the recovery ladder live so the client gets an answer.
//!
//! Owns the HTTP side (hyper 1 server, a pooled hyper-util client with rustls and bundled roots),
//! the mapping of provider paths to wire formats ([`route`]), rebuilding the assistant message from
//! a response as it streams past ([`assemble`]), the journal writer ([`record`]) and the capture of
//! a live failure ([`capture`]). It does not decide how to recover: [`recover`] calls the
//! classifier, payload policy and ladder of `salvage-recovery` as the replay driver does.
//!
//! Design decision: the request path never waits on SQLite or parses a successful exchange. The
//! client's bytes go upstream as they arrive ([`spool`]) and the response is relayed frame by
//! frame; the request's frames (reference-counted, not copied) and the response parser go to one
//! writer thread that owns the journal, imports the body, derives the session and appends the
//! turn, through a queue bounded in bytes. The writer appends the turns at hand together (each
//! session's in one transaction) and does not read again what a session's last request already
//! held ([`record`]). Only a failure is parsed on the request path, because
//! classifying and recovering need its history.

#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod assemble;
pub mod budget;
pub mod capture;
pub mod decode;
pub mod loopback;
pub mod record;
pub mod recover;
pub mod route;
pub mod server;
pub mod spool;

pub use server::{Options, Proxy, ProxyError};
