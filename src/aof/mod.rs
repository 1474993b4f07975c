//! Append-only file persistence (docs/PERSISTENCE.md): the file side only.
//! It knows records and files, never nodes; `node::persistence` drives it.
//!
//! - `error`: `AofError`, every way the file side fails.
//! - `reader`: the strict record parser (truncated vs corrupt, offsets) and
//!   the record encoder.
//! - `writer`: the queue of records between the node and the file, the
//!   owner-side flush, and the handle that starts and stops the thread.
//! - `file`: the writer thread and the file it owns (fsync policy, retries,
//!   rewrites).
//! - `progress`: what the writer publishes (sequence numbers, errors,
//!   rewrite reports) and `SyncWait`.
//! - `rewrite`: one rewrite as the writer runs it (temp file, diff, rename).
//! - `reclaim`: what a rewrite would drop, estimated from the records
//!   appended (`auto-aof-rewrite-min-reclaim`).
//! - `loader`: replaying a file into the engine at startup / DEBUG LOADAOF.
//! - `check`: `disque-server --check-aof FILE [--fix]`.

pub mod check;
mod error;
mod file;
pub mod loader;
mod progress;
pub mod reader;
pub mod reclaim;
mod rewrite;
pub mod writer;

pub use check::check_aof_main;
pub use error::{AofError, RecordError};
pub use writer::SyncWait;
