//! Federation: NEEDJOBS from a node with waiting consumers, and the
//! YOURJOBS it gets back (jobs move; at-least-once senders keep a copy).

use bytes::Bytes;

use super::MAX_YOURJOBS_BYTES;
use crate::domain::job::{JobId, JobState, NodeIdx, F_BCAST_QUEUED};
use crate::domain::queue::PAUSE_OUT;
use crate::engine::getjob::NeedReason;
use crate::engine::records::Flavor;
use crate::engine::{BusOut, Engine, JobHandle};
use crate::protocol::bus::message::{Body, Message};
use crate::protocol::job_codec::JobRecord;

/// How long a node's unanswered part of a NEEDJOBS stays valid (ms). Its
/// consumers ask again every 25 ms to 2 s while they wait (and right away
/// when a delivery empties their queue), which renews it.
const DEMAND_MS: u64 = 1000;

/// NEEDJOBS remembered for queues that do not exist here.
const MAX_EARLY_DEMAND: usize = 1024;

impl Engine {
    pub(super) fn on_needjobs(&mut self, from: NodeIdx, queue: &[u8], count: u32, now: u64) {
        let Some(qh) = self.queue_handle(queue) else {
            // Remembered without creating the queue (no client-visible
            // state); entries expire like the queue-level demand.
            self.early_demand.retain(|(name, (node, _, until))| {
                *until >= now && !(*node == from && name.as_ref() == queue)
            });
            if self.early_demand.len() < MAX_EARLY_DEMAND {
                self.early_demand.push((
                    Bytes::copy_from_slice(queue),
                    (from, count.max(1), now + DEMAND_MS),
                ));
            }
            return;
        };
        let Some(q) = self.queues.get_mut(qh) else {
            return;
        };
        if q.fed.import_rate(now) > 0 || q.paused & PAUSE_OUT != 0 {
            return;
        }
        let count = count.max(1);
        let len = q.len() as u64;
        let mut n = u64::from(count);
        if len < 2 * n {
            n = len / 2;
        }
        let n = if len == 0 { 0 } else { n.max(1) };
        // What we cannot give now goes to `from` as soon as it is queued
        // here (and no local client wants it), until its next ask or
        // DEMAND_MS: a consumer waiting there then gets a job produced here
        // without waiting for another NEEDJOBS round trip.
        let missing = count.saturating_sub(n as u32);
        q.fed.demand.retain(|&(node, _, _)| node != from);
        if missing > 0 {
            q.fed.demand.push((from, missing, now + DEMAND_MS));
        }
        if n == 0 {
            return;
        }
        self.give_jobs(qh, queue, from, n, false, now);
    }

    /// Queued jobs of this queue go to the nodes still waiting for some.
    pub(crate) fn serve_demand(&mut self, queue: &[u8], now: u64) {
        let Some(qh) = self.queue_handle(queue) else {
            return;
        };
        loop {
            let Some(q) = self.queues.get_mut(qh) else {
                return;
            };
            // A node whose link dropped gets nothing: a YOURJOBS it never
            // receives would lose the at-most-once jobs in it.
            let cluster = &self.cluster;
            q.fed.demand.retain(|&(node, left, until)| {
                left > 0 && until >= now && cluster.get(node).is_some_and(|n| n.link)
            });
            if q.is_empty() || !q.blocked.is_empty() || q.paused & PAUSE_OUT != 0 {
                return;
            }
            let Some(&(to, left, _)) = q.fed.demand.first() else {
                return;
            };
            let n = (q.len() as u64).min(u64::from(left));
            let given = self.give_jobs(qh, queue, to, n, true, now);
            let Some(q) = self.queues.get_mut(qh) else {
                return;
            };
            let Some(d) = q.fed.demand.iter_mut().find(|d| d.0 == to) else {
                return;
            };
            d.1 = if given == 0 {
                0
            } else {
                d.1.saturating_sub(given as u32)
            };
        }
    }

    /// Send up to `n` queued jobs to `to` in one YOURJOBS; how many went.
    /// `fresh_only` (pushing to a remembered demand) stops at the first job
    /// that was delivered before: a re-queued job stays where its retry
    /// timer and back-off put it, and moves only when someone asks.
    fn give_jobs(
        &mut self,
        qh: u32,
        queue: &[u8],
        to: NodeIdx,
        n: u64,
        fresh_only: bool,
        now: u64,
    ) -> u64 {
        let mut ids = Vec::new();
        let mut bytes = 0usize;
        for _ in 0..n {
            if fresh_only && !self.head_is_fresh(qh) {
                break;
            }
            let Some(h) = self.pop(qh, now) else { break };
            if let Some(j) = self.store.get(h) {
                ids.push((h, j.id, j.retry));
                bytes += j.body.as_ref().map_or(0, |b| b.len()) + 200;
            }
            if bytes > MAX_YOURJOBS_BYTES {
                break;
            }
        }
        if ids.is_empty() {
            return 0;
        }
        // `to` now may hold a copy: list it, so requeue coordination and
        // ack GC include it (the record carries the list to `to` too).
        for &(h, _, _) in &ids {
            if let Some(j) = self.store.get_mut(h) {
                j.nodes_delivered.insert(to);
            }
        }
        // Serialize now, then forget at-most-once jobs: they live only at `to`.
        let recs: Vec<Bytes> = ids
            .iter()
            .filter_map(|&(h, _, _)| self.job_record(h, Flavor::Message, now))
            .map(|r| r.to_bytes())
            .collect();
        for &(h, _, retry) in &ids {
            if retry == 0 {
                self.store_remove_silently(h);
            }
        }
        let frame = Message::new(self.header(0), Body::YourJobs { jobs: recs });
        self.out.frames.push((to, frame));
        if self.queues.get(qh).is_some_and(|q| q.is_empty()) {
            self.need_jobs(queue, NeedReason::ReachedZero, now);
        }
        ids.len() as u64
    }

    /// The queue's next job has never been delivered (first enqueue).
    fn head_is_fresh(&self, qh: u32) -> bool {
        self.queues
            .get(qh)
            .and_then(|q| q.handles().next())
            .and_then(|h| self.store.get(h))
            .is_some_and(|j| j.deliv == 0 && j.nacks == 0)
    }

    /// Drop a job that moved to another node (no AOF record, no messages).
    pub(super) fn store_remove_silently(&mut self, h: JobHandle) {
        self.dequeue(h);
        if let Some(j) = self.remove_record(h) {
            if self.aof {
                self.out.aof.push(crate::engine::AofRecord::DelJob(j.id));
            }
        }
    }

    pub(super) fn on_yourjobs(&mut self, from: NodeIdx, blobs: &[Bytes], now: u64) {
        for blob in blobs {
            let Ok((rec, _)) = JobRecord::decode(blob) else {
                continue;
            };
            let Some(id) = JobId::parse(&rec.id) else {
                continue;
            };
            if self.answer_forgotten(from, &id.0) {
                continue;
            }
            if let Some(j) = self.lookup(&id).and_then(|h| self.store.get(h)) {
                if j.state == JobState::Acked {
                    // Acknowledged here already: the sender's copy is stale.
                    let may_have = j.nodes_delivered.len() as u32;
                    self.out
                        .bus
                        .push((from, BusOut::SetAck { job: id, may_have }));
                    continue;
                }
            }
            let h = match self.lookup(&id) {
                Some(h) => h,
                None => {
                    let Some(mut job) = self.job_from_record(&rec, Flavor::Message, now) else {
                        continue;
                    };
                    job.nodes_delivered.insert(0);
                    job.nodes_delivered.insert(from);
                    let ext = crate::engine::records::ext_of_record(&rec);
                    let Some(h) = self.register_with(job, ext) else {
                        continue;
                    };
                    h
                }
            };
            self.after_released_elsewhere(h, now);
            let Some(j) = self.store.get_mut(h) else {
                continue;
            };
            j.flags &= !F_BCAST_QUEUED;
            if j.retry == 0 {
                j.qtime = now.max(1);
                j.flags &= !crate::domain::job::F_DELIVERED;
            }
            if j.state == JobState::Queued {
                continue;
            }
            self.cause("yourjobs");
            if !self.enqueue(h, false, now) {
                self.update_awake(h, now);
                continue;
            }
            let Some(qname) = self.store.get(h).and_then(|j| j.queue.clone()) else {
                continue;
            };
            let qh = self.queue_create(&qname, now);
            if let Some(q) = self.queues.get_mut(qh) {
                if !q.fed.responders.contains_key(&from) {
                    q.fed.bcast_attempt = 0;
                }
                q.fed.responders.insert(from, now / 1000);
                q.fed.record_import(now);
                q.fed.last_import = now;
                self.counters.imported += 1;
                q.fed.adhoc_attempt = 0;
            }
        }
    }
}
