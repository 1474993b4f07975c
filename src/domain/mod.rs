//! The domain data the engine stores: job IDs, states and flags (`job`),
//! the per-job fields of the opt-in extensions (`job_ext`), and queues
//! ordered by creation time (`queue`).

pub mod job;
pub mod job_ext;
pub mod queue;
