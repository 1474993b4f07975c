//! Integration tests: one binary, the real `disque-server` process per
//! test (STYLE rule 14). `harness` starts servers and speaks RESP; each
//! other module covers one area of docs/COMMANDS.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
mod util;

mod acl;
mod admin;
mod aof;
mod auth;
mod batches;
mod bench_tool;
mod client_lib;
mod cluster;
mod compat;
mod config;
mod controls;
mod dependencies;
mod deploy;
mod disk_faults;
mod extensions;
mod getjob;
mod hostile;
mod jobs;
mod leaving;
mod limits;
mod memory;
mod memory_growth;
mod observe;
mod owner;
mod parse_errors;
mod pki;
mod producers;
mod protocol;
mod queues;
mod reliability;
mod resp3;
mod scan;
mod schedules;
mod spill;
mod spill_model;
mod tls;
mod tls_cluster;
