//! Job-lifecycle counters the engine bumps as jobs move (plain integers:
//! the engine runs on the owner thread only), and read-only snapshots of
//! queues and peers for the metrics exporter and the dashboard. Nothing
//! here changes job state.

use super::Engine;
use crate::domain::job::NodeIdx;
use crate::domain::queue::{PAUSE_IN, PAUSE_OUT};
use crate::support::histogram::{Histogram, MILLIS};

/// Totals since the process started (never reset, as Prometheus counters
/// must only grow).
#[derive(Clone, Debug)]
pub struct JobCounters {
    /// Jobs created by ADDJOB on this node.
    pub added: u64,
    /// Jobs handed to GETJOB consumers.
    pub delivered: u64,
    /// Jobs acknowledged by ACKJOB / FASTACK on this node.
    pub acked: u64,
    /// NACKs that put a job back in its queue.
    pub nacked: u64,
    /// Jobs re-queued by their retry timer.
    pub requeued: u64,
    /// Jobs deleted because their TTL elapsed.
    pub expired: u64,
    /// Jobs evicted to get under maxmemory.
    pub evicted: u64,
    /// Jobs moved to a dead-letter queue.
    pub dead_lettered: u64,
    /// ADDJOBs refused or failed with NOREPL.
    pub norepl: u64,
    /// Jobs received from other nodes through federation (YOURJOBS).
    pub imported: u64,
    /// ADDJOB ... WAIT producers that blocked on a full queue.
    pub producer_waits: u64,
    /// Of those, the ones served when a slot freed.
    pub producers_served: u64,
    /// Of those, the ones whose WAIT expired (MAXLEN error).
    pub producer_timeouts: u64,
    /// Total time producers spent waiting for room, finished waits (ms).
    pub producer_wait_ms: u64,
    /// ADDJOB to enough GOTJOBs, for synchronously replicated jobs (ms).
    pub repl_latency: Histogram,
}

impl Default for JobCounters {
    fn default() -> Self {
        JobCounters {
            added: 0,
            delivered: 0,
            acked: 0,
            nacked: 0,
            requeued: 0,
            expired: 0,
            evicted: 0,
            dead_lettered: 0,
            norepl: 0,
            imported: 0,
            producer_waits: 0,
            producers_served: 0,
            producer_timeouts: 0,
            producer_wait_ms: 0,
            repl_latency: Histogram::new(MILLIS),
        }
    }
}

/// One queue as the exporter and dashboard see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStat {
    pub name: Vec<u8>,
    pub len: u64,
    /// Age of the oldest queued job in ms (0 when empty).
    pub oldest_age_ms: u64,
    pub blocked: u64,
    pub jobs_in: u64,
    pub jobs_out: u64,
    pub paused_in: bool,
    pub paused_out: bool,
}

/// One node of the table (this node first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerStat {
    pub idx: NodeIdx,
    pub id: String,
    pub addr: String,
    pub flags: String,
    pub myself: bool,
    /// An outbound bus link is up.
    pub link: bool,
    pub reachable: bool,
}

impl Engine {
    pub fn counters(&self) -> &JobCounters {
        &self.counters
    }

    /// Every queue, unordered.
    pub fn queue_stats(&self, now: u64) -> Vec<QueueStat> {
        self.queues
            .iter()
            .map(|(_, q)| {
                let oldest = q
                    .handles()
                    .next()
                    .and_then(|h| self.store.get(h))
                    .map_or(0, |j| now.saturating_sub(j.ctime / 1_000_000));
                QueueStat {
                    name: q.name.to_vec(),
                    len: q.len() as u64,
                    oldest_age_ms: oldest,
                    blocked: q.blocked.len() as u64,
                    jobs_in: q.jobs_in,
                    jobs_out: q.jobs_out,
                    paused_in: q.paused & PAUSE_IN != 0,
                    paused_out: q.paused & PAUSE_OUT != 0,
                }
            })
            .collect()
    }

    /// The node table without deleted entries, this node first.
    pub fn peer_stats(&self) -> Vec<PeerStat> {
        use super::cluster::{FLAG_DELETED, FLAG_MYSELF};
        self.cluster
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.has(FLAG_DELETED))
            .map(|(i, n)| PeerStat {
                idx: i as NodeIdx,
                id: String::from_utf8_lossy(&n.id).into_owned(),
                addr: format!("{}:{}", n.ip, n.port),
                flags: n.flags_string(),
                myself: n.has(FLAG_MYSELF),
                link: n.link,
                reachable: self.cluster.reachable.contains(&(i as NodeIdx)),
            })
            .collect()
    }
}
