//! Wake-ups of blocked clients as domain values. A command that blocks
//! (GETJOB on empty queues, a replicated ADDJOB, WAITJOB, QLEN/QSTAT
//! CLUSTER) leaves only its client's ID in the engine; when the wait ends
//! the engine puts `(client, Wake)` in its wake outbox, and the shell,
//! which holds the reply channels, drains it after every engine call,
//! encodes each wake and sends it (`commands::wake`).
//!
//! Each blocked command gets exactly one wake, unless its client left
//! first (`Engine::client_gone`). Jobs in a wake are copied out of the
//! store when popped, so they outlive the job; a shell that finds the
//! client gone gives them back (`Engine::hand_back`), so a disconnect never
//! loses a job.

use bytes::Bytes;

use super::qlen_cluster::{PeerTotals, QStat};
use super::{ClientId, Engine, JobHandle};
use crate::domain::job::{JobId, QueueName};
use crate::errors::WireError;

/// A job as GETJOB hands it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredJob {
    pub id: JobId,
    pub queue: Option<QueueName>,
    pub body: Option<Bytes>,
    /// (nacks, additional deliveries), asked for with WITHCOUNTERS.
    pub counters: Option<(u32, u32)>,
}

/// How the job a WAITJOB client waits for ended (or that the wait did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    Acked,
    Expired,
    Deleted,
    Dead,
    /// Acknowledged by CANCEL (`engine::cancel`).
    Cancelled,
    /// The WAITJOB timeout passed first.
    Timeout,
}

impl JobEnd {
    /// The word WAITJOB replies with; None for a timeout.
    pub fn name(self) -> Option<&'static str> {
        match self {
            JobEnd::Acked => Some("acked"),
            JobEnd::Expired => Some("expired"),
            JobEnd::Deleted => Some("deleted"),
            JobEnd::Dead => Some("dead"),
            JobEnd::Cancelled => Some("cancelled"),
            JobEnd::Timeout => None,
        }
    }
}

/// The end of a blocked command's wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// GETJOB: the jobs popped for the client, already counted as
    /// delivered. A shell that cannot hand them over gives them back.
    Jobs(Vec<DeliveredJob>),
    /// GETJOB ended without jobs: its timeout passed, or FLUSHALL.
    NoJobs,
    /// ADDJOB: the job reached its replication level.
    Added(JobId),
    /// The command failed while blocked (ADDJOB's NOREPL, GETJOB on a
    /// node that started leaving).
    Error(WireError),
    /// WAITJOB.
    JobEnded(JobEnd),
    /// QLEN/QSTAT CLUSTER: the cluster-wide length, and for QSTAT the
    /// local fields taken when the count started.
    Count { total: u64, qstat: Option<QStat> },
}

impl Engine {
    /// Queue a wake-up for the shell.
    pub(crate) fn wake(&mut self, client: ClientId, wake: Wake) {
        // A schedule's own ADDJOB: nobody waits for the answer.
        if client == super::schedule::INTERNAL_CLIENT {
            return;
        }
        self.wakes.push((client, wake));
    }

    /// Whether wake-ups (or dashboard totals) wait to be taken.
    pub fn has_wakes(&self) -> bool {
        !self.wakes.is_empty() || self.counts.has_finished_totals()
    }

    /// Take the wake-ups produced so far, in engine order.
    pub fn take_wakes(&mut self) -> Vec<(ClientId, Wake)> {
        std::mem::take(&mut self.wakes)
    }

    /// `take_wakes` into the caller's buffer, so neither side gives up its
    /// allocation.
    pub fn take_wakes_into(&mut self, out: &mut Vec<(ClientId, Wake)>) {
        out.append(&mut self.wakes);
    }

    /// Dashboard totals that arrived (or timed out), by request number
    /// (`cluster_totals`).
    pub fn take_totals(&mut self) -> Vec<(u32, PeerTotals)> {
        self.counts.take_finished_totals()
    }

    /// A job as GETJOB hands it out; None if the handle is free.
    pub fn delivered(&self, h: JobHandle, withcounters: bool) -> Option<DeliveredJob> {
        let j = self.store.get(h)?;
        Some(DeliveredJob {
            id: j.id,
            queue: j.queue.clone(),
            body: j.body.as_deref().map(Bytes::copy_from_slice),
            counters: withcounters.then(|| (u32::from(j.nacks), u32::from(j.deliv))),
        })
    }
}
