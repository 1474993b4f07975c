//! Federation: NEEDJOBS from a node with waiting consumers, and the
//! YOURJOBS it gets back (jobs move; at-least-once senders keep a copy).

use bytes::Bytes;

use super::MAX_YOURJOBS_BYTES;
use crate::cluster::message::{Body, Message};
use crate::engine::codec::Flavor;
use crate::engine::getjob::NeedReason;
use crate::engine::{Engine, JobHandle};
use crate::job::{JobId, JobState, NodeIdx, F_BCAST_QUEUED};
use crate::job_codec::JobRecord;
use crate::queue::PAUSE_OUT;

impl Engine {
    pub(super) fn on_needjobs(&mut self, from: NodeIdx, queue: &[u8], count: u32, now: u64) {
        let Some(qh) = self.queue_handle(queue) else {
            return;
        };
        let Some(q) = self.queues.get(qh) else { return };
        if q.is_empty() || q.fed.import_rate(now) > 0 || q.paused & PAUSE_OUT != 0 {
            return;
        }
        let len = q.len() as u64;
        let mut n = u64::from(count.max(1));
        if len < 2 * n {
            n = len / 2;
        }
        let n = n.max(1);
        let mut ids = Vec::new();
        let mut bytes = 0usize;
        for _ in 0..n {
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
            return;
        }
        // `from` now may hold a copy: list it, so requeue coordination and
        // ack GC include it (the record carries the list to `from` too).
        for &(h, _, _) in &ids {
            if let Some(j) = self.store.get_mut(h) {
                j.nodes_delivered.insert(from);
            }
        }
        // Serialize now, then forget at-most-once jobs: they live only at `from`.
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
        self.out.frames.push((from, frame));
        if self.queues.get(qh).is_some_and(|q| q.is_empty()) {
            self.need_jobs(queue, NeedReason::ReachedZero, now);
        }
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
            let h = match self.lookup(&id) {
                Some(h) => h,
                None => {
                    let Some(mut job) = self.job_from_record(&rec, Flavor::Message, now) else {
                        continue;
                    };
                    job.nodes_delivered.insert(0);
                    job.nodes_delivered.insert(from);
                    let ext = crate::engine::codec::ext_of_record(&rec);
                    let Some(h) = self.register_with(job, ext) else {
                        continue;
                    };
                    h
                }
            };
            let Some(j) = self.store.get_mut(h) else {
                continue;
            };
            j.flags &= !F_BCAST_QUEUED;
            if j.retry == 0 {
                j.qtime = now.max(1);
                j.flags &= !crate::job::F_DELIVERED;
            }
            if j.state == JobState::Queued {
                continue;
            }
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
                self.counters.imported += 1;
                q.fed.adhoc_attempt = 0;
            }
        }
    }
}
