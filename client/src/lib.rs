//! An async client and worker for [Disque](https://github.com/antirez/disque)
//! job queues, and for disque-rs, the Rust reimplementation, whose
//! extensions (BACKOFF, MAXDELIVERIES and dead letters, DEDUP, NACK DELAY,
//! WAITJOB, REDRIVE, `QLEN ... CLUSTER`, RESP3) it also covers.
//!
//! * [`Client`]: every Disque command with typed arguments ([`AddJob`],
//!   [`GetJob`], [`JScan`], [`QScan`]) and typed replies ([`Job`],
//!   [`JobInfo`], [`QueueStat`], [`Hello`], ...), over TCP or TLS
//!   (feature `tls`, on by default), RESP2 or RESP3, with AUTH.
//! * Several nodes: the client connects to the first reachable node of its
//!   list, moves to another one when the connection fails (repeating the
//!   commands that are safe to repeat), learns the cluster's nodes from
//!   HELLO, and — Disque's client guidance — moves to the node that
//!   produces most of the jobs it receives.
//! * [`Worker`]: N concurrent handlers per queue set, WORKING heartbeats
//!   for long jobs, ACK on success, NACK on failure, graceful shutdown.
//! * [`Error`] tells Disque's error codes ([`ErrorCode`]) apart from I/O,
//!   timeout and protocol errors.
//!
//! # Quick start
//!
//! A producer:
//!
//! ```no_run
//! use std::time::Duration;
//! use disque_client::{AddJob, Client};
//!
//! # async fn run() -> Result<(), disque_client::Error> {
//! let mut client = Client::connect(&["127.0.0.1:7711", "127.0.0.1:7712"]).await?;
//! let id = client
//!     .add_job(&AddJob::new("emails", "welcome:ada@example.com").retry(Duration::from_secs(60)))
//!     .await?;
//! println!("queued {id}");
//! # Ok(()) }
//! ```
//!
//! A consumer by hand:
//!
//! ```no_run
//! # use std::time::Duration;
//! # use disque_client::Client;
//! # async fn run() -> Result<(), disque_client::Error> {
//! let mut client = Client::connect(&["127.0.0.1:7711"]).await?;
//! while let Some(job) = client.get_job("emails", Duration::from_secs(5)).await? {
//!     println!("{}: {:?}", job.id, job.body);
//!     client.ack_job(&job.id).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! A worker, stopping on Ctrl-C after finishing (or giving back) what it
//! holds:
//!
//! ```no_run
//! use disque_client::Worker;
//!
//! # async fn run() -> Result<(), disque_client::Error> {
//! let report = Worker::new(&["127.0.0.1:7711", "127.0.0.1:7712"], ["emails"])
//!     .concurrency(4)
//!     .handler(|job| async move {
//!         let to = std::str::from_utf8(&job.body)?;
//!         println!("sending to {to}");
//!         Ok(())
//!     })
//!     .run_until(async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! Runnable versions are in `examples/` (`cargo run --example producer`,
//! `cargo run --example worker`).
//!
//! # Failover
//!
//! After a connection error (or a `-LEAVING` / `-LOADING` reply) the
//! client drops the connection; the next command connects to the first
//! reachable node among the given ones and those HELLO listed, the failed
//! one last. Commands that are safe to repeat (GETJOB, ACKJOB, FASTACK,
//! NACK, WORKING, PING, HELLO, and ADDJOB with a DEDUP key) are repeated
//! once on the new node; others return the error, which
//! [`Error::is_connection_error`] recognises. Jobs a failed node held are
//! queued again by their replicas after their RETRY period, so a worker
//! loses nothing; it may see a job twice (at-least-once delivery).

#![warn(missing_docs)]

mod client;
mod conn;
mod error;
mod options;
mod resp;
#[cfg(feature = "tls")]
mod tls;
mod types;
mod worker;

pub use client::{Client, ClientBuilder, Protocol};
pub use error::{Error, ErrorCode, Result};
pub use options::{AddJob, GetJob, JScan, QScan};
pub use resp::Value;
#[cfg(feature = "tls")]
pub use tls::TlsOptions;
pub use types::{
    Hello, Info, Job, JobExtensions, JobId, JobInfo, JobOutcome, JobState, NodeInfo, PauseState,
    PeekedJob, QueueStat, ScanPage,
};
pub use worker::{HandlerError, Worker, WorkerReport};
