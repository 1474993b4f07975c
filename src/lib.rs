//! A Disque 1.0 compatible distributed job queue.
//!
//! # Layout
//!
//! Imports point one way: server → commands → node → {aof, engine,
//! config}; engine → cluster (frames) → job, queue; docs/ARCHITECTURE.md
//! draws it and `layering` (a test) enforces it.
//!
//! - `resp`: RESP2/RESP3 request parsing and reply encoding (pure).
//! - `job`, `queue`: the domain data (job IDs, states, flags; queues).
//! - `engine`: the synchronous, I/O-free owner of a node's state. Every
//!   command, bus message and timer tick is one call with `now` passed in;
//!   effects (AOF records, bus messages) are collected for the shell.
//! - `commands`: the command table and one module per command family.
//! - `acl`: ACL users and their permissions, ACL LOG, the aclfile and
//!   the user table's replication over the bus (`node` holds the table;
//!   `commands::acl` is the ACL command and the per-command check).
//! - `node`: everything the owner thread holds (engine, config, clients,
//!   stats, slow log); `node::persistence` drives the AOF writer.
//! - `server`: the tokio shell: listener, connections, timer, shutdown.
//! - `config`: directives, config files, CONFIG GET/SET/REWRITE.
//! - `cluster`: bus message framing; `job_codec`: serialized jobs.
//! - `aof`: the AOF file side (reader, writer thread, rewrite, loader,
//!   check); it knows records, never nodes.
//! - `spill`: the spill tier's segment files and the thread that reads
//!   and writes them for the engine's spill decisions (`engine::spill`).
//! - `errors`: every client-visible error with its exact text.
//! - `strings`: Redis-style splitting, quoting and integer parsing.
//! - `clock`: the one wall-clock read. `memory`: counting allocator.
//!   `sys`: OS queries.
//! - `cgroup`: the container memory limit behind a default `maxmemory`.
//! - `healthcheck`: `--healthcheck`, the probe for shell-less images.
//! - `logging`: tracing setup with a level CONFIG SET can change.
//! - `metrics`, `histogram`: counters kept off the owner thread (bus,
//!   fsync) and the fixed-bucket histograms; `server::http` serves them
//!   with the engine's job counters as Prometheus metrics, beside
//!   /healthz, /readyz and the dashboard.

pub mod acl;
pub mod aof;
pub mod cgroup;
pub mod clock;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod engine;
pub mod errors;
pub mod healthcheck;
pub mod histogram;
pub mod job;
pub mod job_codec;
pub mod job_ext;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod node;
pub mod queue;
pub mod resp;
pub mod server;
pub mod slab;
pub mod spill;
pub mod strings;
pub mod sys;
pub mod tls;

/// The version reported by INFO and HELLO.
pub const VERSION: &str = "1.0-rc1";

#[cfg(test)]
mod layering;
