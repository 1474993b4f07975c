//! Observability the shell serves: counters kept off the owner thread
//! (`metrics`), log setup (`logging`) and the `--healthcheck` probe.

pub mod healthcheck;
pub mod logging;
pub mod metrics;
