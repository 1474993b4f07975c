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

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{BusOut, Engine};
use crate::job::NodeIdx;
use crate::resp::Reply;

/// Upper bound of the wait for peers' answers.
pub const MAX_WAIT_MS: u64 = 1000;

struct Pending {
    tx: oneshot::Sender<Reply>,
    total: u64,
    waiting: Vec<NodeIdx>,
    deadline: u64,
    /// QSTAT fields to reply with (`len-cluster` is appended); None = QLEN.
    qstat: Option<Vec<(&'static str, Reply)>>,
}

#[derive(Default)]
pub struct ClusterCounts {
    next_req: u32,
    pending: HashMap<u32, Pending>,
    timeouts: BTreeSet<(u64, u32)>,
}

impl ClusterCounts {
    pub fn next_deadline(&self) -> Option<u64> {
        self.timeouts.first().map(|&(t, _)| t)
    }
}

pub enum CountOutcome {
    Reply(Reply),
    Blocked(oneshot::Receiver<Reply>),
}

fn reply_of(total: u64, qstat: Option<Vec<(&'static str, Reply)>>) -> Reply {
    let n = Reply::Integer(i64::try_from(total).unwrap_or(i64::MAX));
    match qstat {
        None => n,
        Some(mut pairs) => {
            pairs.push(("len-cluster", n));
            Reply::map(pairs)
        }
    }
}

fn finish(p: Pending) {
    let _ = p.tx.send(reply_of(p.total, p.qstat));
}

impl Engine {
    /// Start a cluster-wide count of `queue`. `qstat`: the local QSTAT
    /// fields when the caller is QSTAT CLUSTER.
    pub fn count_cluster(
        &mut self,
        queue: Bytes,
        qstat: Option<Vec<(&'static str, Reply)>>,
        now: u64,
    ) -> CountOutcome {
        let local = self.queue_len(&queue) as u64;
        let peers: Vec<NodeIdx> = self
            .cluster
            .reachable
            .iter()
            .copied()
            .filter(|&i| self.cluster.get(i).is_some_and(|n| n.link))
            .collect();
        if peers.is_empty() {
            return CountOutcome::Reply(reply_of(local, qstat));
        }
        let (tx, rx) = oneshot::channel();
        let wait = (self.cluster.node_timeout / 2).clamp(1, MAX_WAIT_MS);
        let p = Pending {
            tx,
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
        CountOutcome::Blocked(rx)
    }

    /// QLENREQ from a peer: answer with our local length.
    pub(crate) fn on_qlen_req(&mut self, from: NodeIdx, req: u32, queue: &[u8]) {
        let len = self.queue_len(queue) as u64;
        self.out.bus.push((from, BusOut::QLenRep { req, len }));
    }

    pub(crate) fn on_qlen_rep(&mut self, from: NodeIdx, req: u32, len: u64, _now: u64) {
        let Some(p) = self.counts.pending.get_mut(&req) else {
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
                finish(p);
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
                finish(p);
            }
        }
    }
}
