//! The client and the worker against real `disque-server` processes (one
//! test binary, so the crate is linked once). The server binary comes from
//! `DISQUE_SERVER_BIN` or `../target/debug/disque-server`: build it first
//! with `cargo build --bin disque-server` at the repository root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod cluster;
mod single;
#[cfg(feature = "tls")]
mod tls;
mod worker;
