//! A Disque 1.0 compatible distributed job queue.
//!
//! # Layout
//!
//! Imports point one way: server → commands → node → {aof, engine,
//! config, acl}; engine → protocol::bus (frames) → domain; docs/ARCHITECTURE.md
//! draws it and `layering` (a test) enforces it.
//!
//! - `engine`: the synchronous, wire-free owner of a node's state. Every
//!   command, bus message and timer tick is one call with `now` passed in;
//!   effects (AOF records, bus messages, wakes) are collected for the shell.
//! - `domain`: the data the engine stores (job IDs, states and flags; the
//!   extension fields; queues).
//! - `protocol`: the wire formats: RESP (`resp`), bus frames (`bus`), the
//!   serialized job (`job_codec`).
//! - `commands`: the command table, the argument cursor and one module per
//!   command family; replies are encoded here.
//! - `acl`: ACL users and their permissions, ACL LOG, the aclfile and the
//!   user table's replication over the bus.
//! - `node`: everything the node's owner holds (engine, config, clients,
//!   stats, slow log); `node::persistence` drives the AOF writer.
//! - `server`: the tokio shell: owner, listeners, connections, bus links,
//!   timer, HTTP, shutdown.
//! - `config`: directives, config files, CONFIG GET/SET/REWRITE.
//! - `aof`: the AOF file side (reader, writer, rewrite, loader, check); it
//!   knows records, never nodes.
//! - `spill`: the spill tier's segment files and the thread that reads
//!   and writes them for the engine's spill decisions (`engine::spill`).
//! - `errors`: every client-visible error with its exact text.
//! - `tls`: rustls configuration for clients and the bus.
//! - `observe`: metrics kept off the owner, logging, `--healthcheck`.
//! - `support`: Redis-style strings and integers, the one wall-clock read,
//!   histograms, the slab.
//! - `os`: the counting allocator, cgroup memory limits, OS queries.
//!
//! # Public surface
//!
//! What the `disque-server` binary needs is public and documented: [`run`],
//! [`check_aof`], [`healthcheck`], [`init_logging`], [`Counting`],
//! [`tune_allocator`] and
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
pub(crate) mod spill;
pub(crate) mod support;
pub(crate) mod tls;

pub use aof::check_aof_main as check_aof;
pub use observe::healthcheck::main as healthcheck;
pub use observe::logging::init as init_logging;
pub use os::allocator::{tune as tune_allocator, Counting};
pub use server::run;

/// The version reported by INFO and HELLO.
pub const VERSION: &str = "1.0-rc1";

#[cfg(test)]
mod layering;
