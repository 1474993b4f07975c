//! Dead letters (ADDJOB MAXDELIVERIES / DEADLETTER) and REDRIVE.
//!
//! A job that is due to be queued again after `max-deliveries` deliveries
//! (nacks + additional deliveries + the current one) is moved to its
//! dead-letter queue instead, on the node whose timer or NACK fired. The
//! move is a state change with a generation number, the job's *epoch*:
//! dead-lettering and REDRIVE each increment it, so odd = dead. The
//! deciding node broadcasts DEADLETTER(epoch) to the job's holders; every
//! node adopts the highest epoch it hears of and answers a lower one with
//! its own. QUEUED carries the sender's epoch too, so a holder that missed
//! the DEADLETTER and queued the job in its original queue is told at once
//! (by the dead holder's answer) and moves it. Like acknowledgement, the
//! dead state therefore spreads and wins: a job does not stay both
//! dead-lettered and queued once the holders can talk, and it is
//! dead-lettered once per epoch (two nodes deciding concurrently reach the
//! same epoch and the usual QUEUED tie-break keeps one queued copy).

use super::{add_ms, rand250, AofRecord, BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, JobState, NodeIdx, QueueName, F_BCAST_QUEUED, F_BCAST_WILLQUEUE};

impl Engine {
    /// Must this queueing dead-letter the job instead? Only for re-queues
    /// (the ones that bump a delivery counter) of live MAXDELIVERIES jobs.
    pub(crate) fn deadletter_due(&self, h: JobHandle, nack: bool) -> bool {
        let Some(x) = self.ext_of(h) else {
            return false;
        };
        if x.max_deliveries == 0 || x.is_dead() {
            return false;
        }
        let Some(j) = self.store.get(h) else {
            return false;
        };
        if j.state == JobState::Queued || j.qtime == 0 || j.queue.is_none() {
            return false;
        }
        let requeue = nack || j.has(F_BCAST_QUEUED);
        let delivered = u32::from(j.nacks) + u32::from(j.deliv) + 1;
        requeue && delivered >= x.max_deliveries
    }

    /// Move a job to its dead-letter queue here and tell the other holders.
    pub(crate) fn dead_letter(&mut self, h: JobHandle, now: u64) -> bool {
        let Some(epoch) = self.ext_of(h).map(|x| x.epoch + 1) else {
            return false;
        };
        let Some(id) = self.set_epoch(h, epoch, now) else {
            return false;
        };
        self.counters.dead_lettered += 1;
        // Queue it in the dead-letter queue silently (no counter bump).
        if let Some(j) = self.store.get_mut(h) {
            j.flags &= !F_BCAST_QUEUED;
            if j.qtime == 0 {
                j.qtime = now.max(1);
            }
        }
        self.enqueue(h, false, now);
        self.send_to_delivered(h, BusOut::DeadLetter { job: id, epoch });
        true
    }

    /// REDRIVE: move a dead job back to its original queue with its
    /// delivery counters reset. False if the job is not dead here.
    pub fn redrive(&mut self, h: JobHandle, now: u64) -> bool {
        let Some(x) = self.ext_of(h) else {
            return false;
        };
        if !x.is_dead() || self.store.get(h).is_none_or(|j| j.state == JobState::Acked) {
            return false;
        }
        let epoch = x.epoch + 1;
        let Some(id) = self.set_epoch(h, epoch, now) else {
            return false;
        };
        if let Some(j) = self.store.get_mut(h) {
            j.flags &= !F_BCAST_QUEUED;
            j.qtime = now.max(1);
        }
        self.enqueue(h, false, now);
        self.send_to_delivered(h, BusOut::DeadLetter { job: id, epoch });
        true
    }

    /// Dead jobs queued here in `queue`, oldest first, at most `count`.
    pub fn dead_jobs_in(&self, queue: &[u8], count: usize) -> Vec<JobHandle> {
        let Some(q) = self.queue(queue) else {
            return Vec::new();
        };
        q.handles()
            .filter(|&h| self.ext_of(h).is_some_and(|x| x.is_dead()))
            .take(count)
            .collect()
    }

    /// DEADLETTER(epoch) from `from`.
    pub(crate) fn on_deadletter(&mut self, from: NodeIdx, id: &[u8; 40], epoch: u32, now: u64) {
        let Some(h) = JobId::parse(id).and_then(|id| self.lookup(&id)) else {
            return;
        };
        self.reconcile_epoch(h, from, epoch, now);
    }

    /// Compare a peer's epoch with ours: adopt a higher one, answer a lower
    /// one with ours. Returns false when the peer is behind (its message
    /// must not be acted upon).
    pub(crate) fn reconcile_epoch(
        &mut self,
        h: JobHandle,
        from: NodeIdx,
        epoch: u32,
        now: u64,
    ) -> bool {
        let Some(j) = self.store.get(h) else {
            return false;
        };
        if j.state == JobState::Acked {
            return true;
        }
        let mine = self.ext_of(h).map_or(0, |x| x.epoch);
        if epoch < mine {
            let id = j.id;
            self.out.bus.push((
                from,
                BusOut::DeadLetter {
                    job: id,
                    epoch: mine,
                },
            ));
            return false;
        }
        if epoch > mine {
            self.set_epoch(h, epoch, now);
            // We are a backup now: stand back for one re-queue period.
            let period = self.backoff_period(h);
            let jitter = rand250(&mut self.rng);
            if let Some(j) = self.store.get_mut(h) {
                if j.retry > 0 && j.qtime != 0 {
                    j.qtime = add_ms(now + period, jitter);
                    j.flags |= F_BCAST_WILLQUEUE;
                }
            }
            self.update_awake(h, now);
        }
        true
    }

    /// Switch the job to `epoch` locally: unqueue it, move it to the
    /// dead-letter queue (odd) or back to its original queue with fresh
    /// counters (even), re-record it in the AOF and wake WAITJOB clients of
    /// a dead job. Returns the job ID.
    fn set_epoch(&mut self, h: JobHandle, epoch: u32, now: u64) -> Option<JobId> {
        self.dequeue(h);
        let (id, queue) = {
            let j = self.store.get(h)?;
            (j.id, j.queue.as_deref().map(bytes::Bytes::copy_from_slice)?)
        };
        let x = self.ext_mut(h)?;
        let was_dead = x.is_dead();
        x.epoch = epoch;
        x.nack_pending = false;
        let dead = x.is_dead();
        let new_queue = match (was_dead, dead) {
            (false, true) => {
                let dq = x.dead_queue_for(&queue);
                x.origin = Some(queue);
                Some(dq)
            }
            (true, false) => x.origin.take(),
            _ => None,
        };
        if let Some(j) = self.store.get_mut(h) {
            if let Some(q) = new_queue {
                j.queue = Some(QueueName::from(&q[..]));
            }
            if !dead {
                j.nacks = 0;
                j.deliv = 0;
            }
        }
        // Replace the job's record: LOADJOB of a known ID is ignored. A
        // body on disk is read back first (`spill_relog_later`).
        if self.aof && !self.spill_relog_later(h) {
            self.out.aof.push(AofRecord::DelJob(id));
            self.aof_loadjob(h);
        }
        if dead {
            self.batch_member_done(h, true);
            self.job_finished(&id, super::JobEnd::Dead);
        }
        self.update_awake(h, now);
        Some(id)
    }

    /// The epoch a QUEUED about this job carries (0 for plain jobs).
    pub(crate) fn epoch_of(&self, id: &JobId) -> u32 {
        self.lookup(id)
            .and_then(|h| self.ext_of(h))
            .map_or(0, |x| x.epoch)
    }
}

impl Engine {
    /// Before acting on a QUEUED: reconcile the sender's epoch with ours
    /// (plain jobs on both sides skip this). False = ignore the message.
    pub(crate) fn queued_epoch_ok(
        &mut self,
        from: NodeIdx,
        id: &[u8; 40],
        epoch: u32,
        now: u64,
    ) -> bool {
        let Some(h) = JobId::parse(id).and_then(|id| self.lookup(&id)) else {
            return true;
        };
        if epoch == 0 && self.ext_of(h).is_none_or(|x| x.epoch == 0) {
            return true;
        }
        self.reconcile_epoch(h, from, epoch, now)
    }
}
