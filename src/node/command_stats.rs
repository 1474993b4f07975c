//! Figures the node counts on the owner thread for /metrics: command latency
//! histograms (one bucket add per command, beside commandstats) and -OOM
//! refusals.

use crate::support::histogram::{Histogram, MICROS};

/// Figures counted on the owner thread.
#[derive(Clone, Debug)]
pub struct CommandStats {
    /// Execution time per command-table index (microseconds).
    pub cmd_latency: Vec<Histogram>,
    /// Deny-oom commands refused with -OOM.
    pub oom_refused: u64,
}

impl CommandStats {
    pub fn new(commands: usize) -> CommandStats {
        CommandStats {
            cmd_latency: vec![Histogram::new(MICROS); commands],
            oom_refused: 0,
        }
    }

    pub fn observe_command(&mut self, idx: usize, usec: u64) {
        if let Some(h) = self.cmd_latency.get_mut(idx) {
            h.observe(usec);
        }
    }
}
