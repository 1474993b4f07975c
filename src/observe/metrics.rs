//! Process-wide operational figures counted off the owner thread: bus
//! messages by type, bus link connects per peer, AOF fsync latency
//! (relaxed atomics). Job-lifecycle totals live in the engine
//! (`engine::counters`), per-command latency in the node
//! (`node::command_stats`); `server::http` exports all of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use crate::domain::job::NodeIdx;
use crate::support::histogram::{AtomicHistogram, MICROS};

/// Bus message types are small integers; anything newer lands in the last slot.
const BUS_TYPES: usize = 32;

/// Process-wide figures counted off the owner thread.
pub struct ShellMetrics {
    bus_sent: [AtomicU64; BUS_TYPES],
    bus_received: [AtomicU64; BUS_TYPES],
    /// Outbound links established per peer (first connect + reconnects).
    link_connects: Mutex<HashMap<NodeIdx, u64>>,
    pub fsync: AtomicHistogram,
}

static SHELL: LazyLock<ShellMetrics> = LazyLock::new(|| ShellMetrics {
    bus_sent: std::array::from_fn(|_| AtomicU64::new(0)),
    bus_received: std::array::from_fn(|_| AtomicU64::new(0)),
    link_connects: Mutex::new(HashMap::new()),
    fsync: AtomicHistogram::new(MICROS),
});

pub fn shell() -> &'static ShellMetrics {
    &SHELL
}

impl ShellMetrics {
    pub fn bus_sent(&self, msg_type: u16) {
        let i = usize::from(msg_type).min(BUS_TYPES - 1);
        self.bus_sent[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn bus_received(&self, msg_type: u16) {
        let i = usize::from(msg_type).min(BUS_TYPES - 1);
        self.bus_received[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn link_connected(&self, peer: NodeIdx) {
        let mut m = self.link_connects.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(peer).or_default() += 1;
    }

    /// (type, sent, received) for every type seen at least once.
    pub fn bus_counts(&self) -> Vec<(u16, u64, u64)> {
        (0..BUS_TYPES)
            .filter_map(|i| {
                let s = self.bus_sent[i].load(Ordering::Relaxed);
                let r = self.bus_received[i].load(Ordering::Relaxed);
                (s + r > 0).then_some((i as u16, s, r))
            })
            .collect()
    }

    pub fn link_connects(&self) -> HashMap<NodeIdx, u64> {
        self.link_connects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
