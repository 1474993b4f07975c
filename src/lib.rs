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

//!
//! # Public surface
//!
//! What the `disque-server` binary needs is public and documented: [`run`],
//! [`check_aof`], [`healthcheck`], [`init_logging`], [`Counting`] and
//! [`VERSION`]. The modules hidden from the documentation are public only
//! so that the workspace's fuzz targets, benchmarks and integration tests
//! can drive the decoders and the engine directly; they promise no
//! stability. Everything else is private to the crate.

#![warn(missing_docs)]

pub(crate) mod acl;
#[doc(hidden)]
pub mod aof;
pub(crate) mod commands;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod domain;
#[doc(hidden)]
pub mod engine;
pub(crate) mod errors;
pub(crate) mod node;
pub(crate) mod observe;
#[doc(hidden)]
pub mod os;
#[doc(hidden)]
pub mod protocol;
pub(crate) mod server;
pub(crate) mod support;
pub(crate) mod tls;

pub use aof::check_aof_main as check_aof;
pub use observe::healthcheck::main as healthcheck;
pub use observe::logging::init as init_logging;
pub use os::allocator::Counting;
pub use server::run;

/// The version reported by INFO and HELLO.
pub const VERSION: &str = "1.0-rc1";

#[cfg(test)]
mod layering;
