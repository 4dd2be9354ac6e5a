//! The event-sourced journal: every turn, compaction, recovery attempt and server-side edit of a
//! session, from which any past state is restored exactly.
//!
//! Owns the `sessions`, `events`, `messages`, `event_blobs` and `snapshots` tables: appending
//! (optimistic concurrency per session, idempotent retries by writer-chosen event id, a BLAKE3
//! hash chain), folding a session's state at any event, rewinds as appended events, verification
//! and export. It does not decide what happens in a session (the replay driver does). Design
//! decision: a history change is stored as one splice of message hashes against the parent
//! event's state, so in-place rewrites (stubs that leave the last message alone) are recorded and
//! restored exactly, and a rewind is an event whose parent is its target — never a deletion.
//!
//! Where things live: [`append`] writes events (the one transaction per batch),
//! [`restore`] folds states and reads events back, [`messages`]
//! stores and loads message bodies (large ones spilled to CCR), `snapshot` materialises
//! the decoded history every so many events, incrementally (each snapshot holds only the messages
//! after the one it extends, in chains of at most 16 rows; each row vouched for by the hash chain
//! and checked on every read, message hashes checked once as messages enter a snapshot and by
//! [`verify`]), [`verify`] checks the chain and the snapshots, and [`error`] names
//! every failure.
//!
//! Reads never write: restoring, listing, exporting and verifying leave the database file as it
//! was (CCR blobs a history spilled are read without refreshing their `last_access`: the journal's
//! reference already keeps them from eviction). The journal never reads the wall clock: times come
//! from the events it is given and from the [`Clock`](salvage_types::Clock) it holds
//! ([`Journal::with_clock`]).

#![deny(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects)]
#![cfg_attr(test, allow(clippy::indexing_slicing, clippy::string_slice, clippy::arithmetic_side_effects))]

pub mod append;
pub mod branches;
pub mod delete;
pub mod error;
pub mod event;
pub mod export;
pub(crate) mod fresh;
pub mod hash_chain;
pub mod history_diff;
pub mod import;
pub mod lookup;
pub mod messages;
pub mod open;
pub mod otlp;
pub(crate) mod packed;
pub(crate) mod read_tx;
mod redact;
pub mod restore;
pub(crate) mod snapshot;
pub(crate) mod snapshot_audit;
pub mod state;
pub mod verify;
mod write_tx;

pub use error::JournalError;
pub use event::{rfc3339, Appended, HistoryChange, NewEvent, Parent, StoredEvent};
pub use messages::{CCR_OWNER, LARGE_MESSAGE};
pub use open::{Journal, SessionInfo};
pub use restore::{snapshot_interval, View, SNAPSHOT_EVERY};
pub use verify::{BadEvent, VerifyReport};
