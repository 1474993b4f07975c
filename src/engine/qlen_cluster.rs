//! `QLEN <queue> CLUSTER` and `QSTAT <queue> CLUSTER`: the number of jobs
//! queued in a queue on all reachable nodes.
//!
//! The node asks every reachable peer it has a link to (QLENREQ) and
//! answers when all of them replied (QLENREP) or after
//! `min(cluster-node-timeout / 2, 1000 ms)`, whichever comes first. The
//! figure is therefore at most that old; peers that are unreachable, have
//! no link, or do not answer in time are left out (the reply then
//! undercounts), and a job counts where it is queued (normally on one
//! node at a time).
//!
//! The dashboard's cluster view asks for every peer's node totals (jobs
//! queued, jobs held, queues, blocked consumers) the same way: QLENREQ
//! with the TOTALS mflag, answered by a longer QLENREP (the layout and why
//! it reuses these types are in `cluster::message`). There a peer that
//! did not answer in time, or answered the short form because it predates
//! totals, is reported as unknown, never as zero.
//!
//! A count's client gets its figure as `Wake::Count`; the dashboard's
//! totals are taken by request number (`Engine::take_totals`).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::{BusOut, ClientId, Engine, Wake};
use crate::domain::job::NodeIdx;
use crate::protocol::bus::message::NodeTotals;

/// Upper bound of the wait for peers' answers.
pub const MAX_WAIT_MS: u64 = 1000;

/// QSTAT's fields of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QStat {
    pub name: Bytes,
    pub len: u64,
    /// Seconds since the queue was created.
    pub age: u64,
    /// Seconds since the last enqueue or pop.
    pub idle: u64,
    pub blocked: u64,
    /// IDs of the nodes this queue imported jobs from lately.
    pub import_from: Vec<[u8; 40]>,
    pub import_rate: u64,
    pub jobs_in: u64,
    pub jobs_out: u64,
    /// `PAUSE_IN` / `PAUSE_OUT` flags.
    pub paused: u8,
    /// Producers waiting for room (ADDJOB ... MAXLEN WAIT).
    pub producers: u64,
    /// The queue's QLIMIT, if one is set.
    pub limit: Option<Box<super::limits::LimitView>>,
    /// Jobs of this queue held here waiting for their dependencies
    /// (ADDJOB AFTER).
    pub waiting: u64,
}

struct Pending {
    client: ClientId,
    total: u64,
    waiting: Vec<NodeIdx>,
    deadline: u64,
    /// QSTAT's local fields (answered with `len-cluster`); None = QLEN.
    qstat: Option<QStat>,
}

/// Every peer asked for its totals, by node index; None = unknown (no
/// answer in time, or a peer that does not know totals).
pub type PeerTotals = Vec<(NodeIdx, Option<NodeTotals>)>;

struct PendingTotals {
    got: PeerTotals,
    waiting: Vec<NodeIdx>,
    deadline: u64,
}

/// Requests of both kinds share `next_req` and `timeouts`, so a request
/// number names one of them only.
#[derive(Default)]
pub struct ClusterCounts {
    /// The last request number handed out (the simulation reads it).
    pub(super) next_req: u32,
    pending: super::Map<u32, Pending>,
    totals: super::Map<u32, PendingTotals>,
    timeouts: BTreeSet<(u64, u32)>,
    /// Totals requests answered (or timed out), for `Engine::take_totals`.
    finished_totals: Vec<(u32, PeerTotals)>,
}

impl ClusterCounts {
    pub fn next_deadline(&self) -> Option<u64> {
        self.timeouts.first().map(|&(t, _)| t)
    }

    pub(super) fn has_finished_totals(&self) -> bool {
        !self.finished_totals.is_empty()
    }

    pub(super) fn take_finished_totals(&mut self) -> Vec<(u32, PeerTotals)> {
        std::mem::take(&mut self.finished_totals)
    }
}

pub enum CountOutcome {
    /// No peer to ask: the local figure (and QSTAT's fields, given back).
    Counted { total: u64, qstat: Option<QStat> },
    /// The client waits for the peers; its answer comes as `Wake::Count`.
    Blocked,
}

impl Engine {
    /// Reachable peers with a live link: the ones worth asking.
    fn linked_peers(&self) -> Vec<NodeIdx> {
        self.cluster
            .reachable
            .iter()
            .copied()
            .filter(|&i| self.cluster.get(i).is_some_and(|n| n.link))
            .collect()
    }

    fn count_wait(&self) -> u64 {
        (self.cluster.node_timeout / 2).clamp(1, MAX_WAIT_MS)
    }

    /// This node's totals (one pass over the queues).
    pub fn node_totals(&self) -> NodeTotals {
        let mut t = NodeTotals {
            jobs: self.registered_jobs() as u64,
            queues: self.queues.len() as u64,
            ..NodeTotals::default()
        };
        for (_, q) in self.queues.iter() {
            t.queued += q.len() as u64;
            t.blocked += q.blocked.len() as u64;
        }
        t
    }

    /// Ask every linked reachable peer for its totals. Returns the
    /// request number; the answers are taken with `take_totals` when all
    /// peers answered or after the QLEN CLUSTER wait (at once without
    /// peers).
    pub fn cluster_totals(&mut self, now: u64) -> u32 {
        let peers = self.linked_peers();
        let deadline = now + self.count_wait();
        let c = &mut self.counts;
        c.next_req = c.next_req.wrapping_add(1);
        let req = c.next_req;
        if peers.is_empty() {
            c.finished_totals.push((req, Vec::new()));
            return req;
        }
        c.timeouts.insert((deadline, req));
        c.totals.insert(
            req,
            PendingTotals {
                got: peers.iter().map(|&n| (n, None)).collect(),
                waiting: peers.clone(),
                deadline,
            },
        );
        for n in peers {
            self.out.bus.push((n, BusOut::TotalsReq { req }));
        }
        req
    }

    pub(crate) fn on_totals_req(&mut self, from: NodeIdx, req: u32) {
        let totals = self.node_totals();
        self.out.bus.push((from, BusOut::TotalsRep { req, totals }));
    }

    /// A peer's totals for request `req` (None: it answered the short
    /// QLENREP form, so it does not know totals).
    pub(crate) fn on_totals_rep(&mut self, from: NodeIdx, req: u32, totals: Option<NodeTotals>) {
        let Some(p) = self.counts.totals.get_mut(&req) else {
            return;
        };
        let Some(pos) = p.waiting.iter().position(|&n| n == from) else {
            return;
        };
        p.waiting.swap_remove(pos);
        if let Some(slot) = p.got.iter_mut().find(|(n, _)| *n == from) {
            slot.1 = totals;
        }
        if p.waiting.is_empty() {
            if let Some(p) = self.counts.totals.remove(&req) {
                self.counts.timeouts.remove(&(p.deadline, req));
                self.counts.finished_totals.push((req, p.got));
            }
        }
    }

    /// Start a cluster-wide count of `queue` for `client`. `qstat`: the
    /// local QSTAT fields when the caller is QSTAT CLUSTER.
    pub fn count_cluster(
        &mut self,
        client: ClientId,
        queue: Bytes,
        qstat: Option<QStat>,
        now: u64,
    ) -> CountOutcome {
        let local = self.queue_len(&queue) as u64;
        let peers = self.linked_peers();
        if peers.is_empty() {
            return CountOutcome::Counted {
                total: local,
                qstat,
            };
        }
        let wait = self.count_wait();
        let p = Pending {
            client,
            total: local,
            waiting: peers.clone(),
            deadline: now + wait,
            qstat,
        };
        let c = &mut self.counts;
        c.next_req = c.next_req.wrapping_add(1);
        let req = c.next_req;
        c.timeouts.insert((p.deadline, req));
        c.pending.insert(req, p);
        for n in peers {
            self.out.bus.push((
                n,
                BusOut::QLenReq {
                    queue: queue.clone(),
                    req,
                },
            ));
        }
        CountOutcome::Blocked
    }

    /// QLENREQ from a peer: answer with our local length.
    pub(crate) fn on_qlen_req(&mut self, from: NodeIdx, req: u32, queue: &[u8]) {
        let len = self.queue_len(queue) as u64;
        self.out.bus.push((from, BusOut::QLenRep { req, len }));
    }

    pub(crate) fn on_qlen_rep(&mut self, from: NodeIdx, req: u32, len: u64, _now: u64) {
        let Some(p) = self.counts.pending.get_mut(&req) else {
            // The short answer to a totals request: an older peer.
            self.on_totals_rep(from, req, None);
            return;
        };
        let Some(pos) = p.waiting.iter().position(|&n| n == from) else {
            return;
        };
        p.waiting.swap_remove(pos);
        p.total = p.total.saturating_add(len);
        if p.waiting.is_empty() {
            if let Some(p) = self.counts.pending.remove(&req) {
                self.counts.timeouts.remove(&(p.deadline, req));
                self.finish_count(p);
            }
        }
    }

    /// Answer counts whose peers did not all reply in time.
    pub(crate) fn expire_counts(&mut self, now: u64) {
        while let Some(&(t, req)) = self.counts.timeouts.first() {
            if t > now {
                break;
            }
            self.counts.timeouts.remove(&(t, req));
            if let Some(p) = self.counts.pending.remove(&req) {
                self.finish_count(p);
            }
            if let Some(p) = self.counts.totals.remove(&req) {
                self.counts.finished_totals.push((req, p.got));
            }
        }
    }

    fn finish_count(&mut self, p: Pending) {
        self.wake(
            p.client,
            Wake::Count {
                total: p.total,
                qstat: p.qstat,
            },
        );
    }

    /// QSTAT's fields of a queue; None if it does not exist.
    pub fn qstat(&self, name: &[u8], now: u64) -> Option<QStat> {
        let q = self.queue(name)?;
        let now_s = now / 1000;
        Some(QStat {
            name: q.name.clone(),
            len: q.len() as u64,
            age: now_s.saturating_sub(q.ctime),
            idle: now_s.saturating_sub(q.atime),
            blocked: q.blocked.len() as u64,
            import_from: q
                .fed
                .responders
                .keys()
                .filter_map(|&n| self.cluster.get(n))
                .map(|n| n.id)
                .collect(),
            import_rate: q.fed.import_rate(now),
            jobs_in: q.jobs_in,
            jobs_out: q.jobs_out,
            paused: q.paused,
            producers: self.producers.on_queue(name) as u64,
            limit: self.limit_of(name).map(Box::new),
            waiting: if self.waiting_count() == 0 {
                0
            } else {
                self.waiting_in(name)
            },
        })
    }
}
