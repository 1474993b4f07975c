//! Acknowledgements and their garbage collection (docs/COMMANDS.md#ackjob):
//! ACKJOB, FASTACK, dummy ACKs for jobs this node never saw, and the
//! SETACK/GOTACK exchange that lets every holder forget an acked job.

use super::{BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, JobState, NodeIdx, NodeSet};

impl Engine {
    /// ACKJOB: returns how many IDs were known and not already acked.
    pub fn ackjob(&mut self, ids: &[JobId], now: u64) -> i64 {
        let mut count = 0;
        for id in ids {
            let h = match self.lookup(id) {
                Some(h) => {
                    if self
                        .store
                        .get(h)
                        .is_some_and(|j| j.state != JobState::Acked)
                    {
                        // `acknowledge`, but the GC retry is scheduled only
                        // when the job outlives its first collection
                        // attempt: a job no other node may hold (the
                        // single-node case) is deleted right away, and
                        // scheduling it first only to unschedule it was
                        // a good part of ACKJOB's cost.
                        self.mark_acked(h);
                        self.counters.acked += 1;
                        count += 1;
                        if !self.gc_attempt(h, now) {
                            self.update_awake(h, now);
                        }
                        continue;
                    }
                    Some(h)
                }
                None if self.cluster.size() > 1
                    && !self.cluster.leaving()
                    && id.is_at_least_once() =>
                {
                    self.create_dummy_ack(*id, now)
                }
                None => None,
            };
            if let Some(h) = h {
                self.gc_attempt(h, now);
            }
        }
        count
    }

    fn create_dummy_ack(&mut self, id: JobId, now: u64) -> Option<JobHandle> {
        let mut job = Engine::new_job(id);
        job.state = JobState::Acked;
        job.etime =
            ((now / 1000) + u64::from(id.ttl_minutes()) * 60).min(u64::from(u32::MAX)) as u32;
        let h = self.register(job)?;
        self.update_awake(h, now);
        Some(h)
    }

    /// FASTACK: delete locally and tell every possible holder.
    pub fn fastack(&mut self, ids: &[JobId], now: u64) -> i64 {
        let mut count = 0;
        for id in ids {
            match self.lookup(id) {
                Some(h) => {
                    self.batch_member_done(h, false);
                    self.send_to_delivered(h, BusOut::DelJob { job: *id });
                    self.delete_job(h, now);
                    self.forgotten.insert(id, now);
                    self.counters.acked += 1;
                    count += 1;
                }
                None => self.broadcast(BusOut::DelJob { job: *id }),
            }
        }
        count
    }

    /// A node answers again after being unreachable (PFAIL/FAIL): tell it
    /// at once what it may have missed about the jobs we share, instead of
    /// after the GC back-off or the next retry period: SETACK for jobs
    /// acknowledged here that it has not confirmed, QUEUED for jobs queued
    /// here (it answers SETACK if it acknowledged them meanwhile, and the
    /// tie-break settles a copy queued on both sides). Its own copies of
    /// jobs acknowledged elsewhere are otherwise delivered again as soon
    /// as its consumers are back (docs/RELIABILITY.md). One pass over the
    /// jobs, only on that transition, never per tick.
    pub fn resync_holder(&mut self, idx: NodeIdx) {
        let mut setacks = Vec::new();
        let mut queued = Vec::new();
        for (h, j) in self.store.iter_from(0) {
            if !j.nodes_delivered.contains(idx) {
                continue;
            }
            match j.state {
                JobState::Acked if !self.confirmed.get(&h).is_some_and(|c| c.contains(idx)) => {
                    setacks.push((j.id, j.nodes_delivered.len() as u32));
                }
                JobState::Queued => queued.push(j.id),
                _ => {}
            }
        }
        for (job, may_have) in setacks {
            self.out.bus.push((idx, BusOut::SetAck { job, may_have }));
        }
        for job in queued {
            self.out.bus.push((
                idx,
                BusOut::Queued {
                    job,
                    nack: false,
                    deliv: false,
                },
            ));
        }
    }

    /// One garbage-collection attempt for an acked job; true when it was
    /// deleted.
    pub fn gc_attempt(&mut self, h: JobHandle, now: u64) -> bool {
        let size = self.cluster.size();
        let Some(j) = self.store.get_mut(h) else {
            return false;
        };
        if j.state != JobState::Acked {
            return false;
        }
        // No entry yet means only this node confirmed: decide before
        // creating one, so a job collected at once never gets one.
        let confirmed_len = if self.confirmed.is_empty() {
            1
        } else {
            self.confirmed.get(&h).map_or(1, NodeSet::len)
        };
        let dummy = j.nodes_delivered.is_empty();
        if (!dummy && j.nodes_delivered.len() == confirmed_len) || (dummy && size == 1) {
            self.delete_job(h, now);
            return true;
        }
        let confirmed = self
            .confirmed
            .entry(h)
            .or_insert_with(|| NodeSet::from_slice(&[0]));
        let id = j.id;
        let may_have = j.nodes_delivered.len() as u32;
        let confirmed: Vec<u32> = confirmed.iter().collect();
        let targets: Vec<u32> = if dummy {
            self.cluster
                .live()
                .filter(|(i, n)| *i != 0 && !n.has(super::cluster::FLAG_HANDSHAKE))
                .map(|(i, _)| i)
                .filter(|i| !confirmed.contains(i))
                .collect()
        } else {
            j.nodes_delivered
                .iter()
                .filter(|n| *n != 0 && !confirmed.contains(n))
                .collect()
        };
        for t in targets {
            self.out.bus.push((t, BusOut::SetAck { job: id, may_have }));
        }
        false
    }
}
