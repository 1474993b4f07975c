//! Append-only file persistence (docs/PERSISTENCE.md): the file side only.
//! It knows records and files, never nodes; `node::persistence` drives it.
//!
//! - `error`: `AofError`, every way the file side fails.
//! - `reader`: the strict record parser (truncated vs corrupt, offsets) and
//!   the record encoder.
//! - `writer`: the one thread that owns the file and its fsync policy.
//! - `rewrite`: one rewrite as the writer runs it (temp file, diff, rename).
//! - `loader`: replaying a file into the engine at startup / DEBUG LOADAOF.
//! - `check`: `disque-server --check-aof FILE [--fix]`.
//! - `faults`: injected fsync errors and slow writes (`DEBUG DISK-FAULT`).

pub mod check;
mod error;
pub mod faults;
pub mod loader;
pub mod reader;
mod rewrite;
pub mod writer;

pub use check::check_aof_main;
pub use error::{AofError, RecordError};
pub use writer::SyncWait;
