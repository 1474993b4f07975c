//! Time-driven work: job expiry, WILLQUEUE announcements, retry/delay
//! re-queueing, ack garbage collection retries, ADDJOB and GETJOB timeouts
//! and idle queue eviction. Everything is deadline-ordered; nothing scans
//! every job per tick.

use rand::Rng;

use super::cluster::{FLAG_DELETED, FLAG_FAIL, FLAG_HANDSHAKE, FLAG_NOADDR, FLAG_PFAIL};
use super::{add_ms, rand250, BusOut, Engine};
use crate::domain::job::{JobState, F_BCAST_WILLQUEUE};
use crate::domain::queue::PAUSE_IN;
use crate::errors::WireError;

/// Max jobs processed per tick, so a mass expiry cannot stall the node.
const MAX_JOBS_PER_TICK: usize = 10_000;

/// A retry-timer requeue waits while another holder of the job is cut off
/// (link down or PFAIL, not FAIL), for at most this long after the holder
/// stopped answering: a two-node cluster never agrees on FAIL, and a holder
/// that really died must not keep its jobs from being delivered.
pub const HOLD_BACK_MAX_MS: u64 = 60_000;
/// While holding back, the holders are asked again (WILLQUEUE) this often.
const HOLD_RECHECK_MS: u64 = 1000;

/// Timer entries a compaction step visits per 100 ms cron (each a look
/// at its job's record, a cache miss in a large table: about a
/// millisecond).
const TIMER_COMPACT_BUDGET: usize = 16_384;

impl Engine {
    /// Run all due timers. Returns nothing; effects land in `self.out`.
    pub fn tick(&mut self, now: u64) {
        for _ in 0..MAX_JOBS_PER_TICK {
            let Some(h) = self.store.pop_due(now) else {
                break;
            };
            self.process_job(h, now);
        }
        self.expire_add_waiters(now);
        self.expire_waiters(now);
        self.expire_job_waiters(now);
        self.expire_counts(now);
        self.expire_producers(now);
        if now.saturating_sub(self.last_need_jobs_cron) >= 100 {
            self.last_need_jobs_cron = now;
            self.cluster_cron(now);
            self.dedup_purge(now);
            self.waiters_cron(now);
            self.replication_cron(now);
            self.async_repl_cron(now);
            self.schedule_cron(now);
            self.batch_cron(now);
            self.after_cron(now);
            self.store.compact_timers(TIMER_COMPACT_BUDGET);
        }
        if now.saturating_sub(self.last_queue_evict) >= 100 {
            self.last_queue_evict = now;
            self.evict_idle_queues(now);
            self.spill_cron(now);
        } else if self.spill_due().is_some_and(|t| now >= t) {
            self.spill_cron(now);
        }
        self.serve_ready(now);
    }

    fn process_job(&mut self, h: u32, now: u64) {
        let now_s = now / 1000;
        let Some(j) = self.store.get(h) else { return };
        if u64::from(j.etime) <= now_s {
            if j.state != JobState::Acked {
                self.counters.expired += 1;
            }
            let id = j.id;
            self.job_finished(&id, super::JobEnd::Expired);
            self.delete_job(h, now);
            return;
        }
        let state = j.state;
        if matches!(state, JobState::Active | JobState::Queued)
            && j.has(F_BCAST_WILLQUEUE)
            && j.qtime != 0
            && j.qtime.saturating_sub(500) <= now
        {
            let id = j.id;
            if state != JobState::Queued {
                self.send_to_delivered(h, BusOut::WillQueue { job: id });
            }
            if let Some(j) = self.store.get_mut(h) {
                j.flags &= !F_BCAST_WILLQUEUE;
            }
        }
        let Some(j) = self.store.get(h) else { return };
        let (qtime, retry) = (j.qtime, j.retry);
        if state == JobState::Active && qtime != 0 && qtime <= now {
            let paused_in = j
                .queue
                .as_ref()
                .and_then(|q| self.queue(q))
                .is_some_and(|q| q.paused & PAUSE_IN != 0);
            if retry != 0 && paused_in {
                let jitter = rand250(&mut self.rng);
                if let Some(j) = self.store.get_mut(h) {
                    j.qtime = add_ms(now + u64::from(retry) * 1000, jitter);
                }
            } else if retry != 0 && !self.nack_pending(h) && self.holder_cut_off(h, now) {
                // OUR CHANGE (docs/COMPATIBILITY.md): another holder, which
                // may have delivered the job and seen its ACK, is cut off
                // but not agreed failed. Check again in about a second, with
                // a WILLQUEUE first, so the holder answers once the link is
                // back instead of the job being delivered twice.
                let jitter = rand250(&mut self.rng).unsigned_abs();
                if let Some(j) = self.store.get_mut(h) {
                    j.qtime = now + HOLD_RECHECK_MS + jitter;
                    j.flags |= F_BCAST_WILLQUEUE;
                }
            } else {
                let nack = self.take_nack_pending(h);
                self.cause(if nack { "nack" } else { "retry-timer" });
                if self.enqueue(h, nack, now) {
                    if !nack {
                        self.counters.requeued += 1;
                    }
                } else if let Some(j) = self.store.get_mut(h) {
                    // Not queueable any more (at-most-once job already delivered).
                    j.qtime = 0;
                }
            }
        } else if state == JobState::Queued
            && qtime != 0
            && qtime <= now
            && retry != 0
            && self.holder_cut_off(h, now)
        {
            // OUR CHANGE (docs/COMPATIBILITY.md): queued here for a whole
            // retry period while another holder is cut off, which may have
            // requeued and delivered it on its side by now: stop offering
            // it and hold it back like a retry requeue, so it is queued
            // again only after the holders are asked (WILLQUEUE).
            self.dequeue(h);
            let jitter = rand250(&mut self.rng).unsigned_abs();
            if let Some(j) = self.store.get_mut(h) {
                j.qtime = now + HOLD_RECHECK_MS + jitter;
                j.flags |= F_BCAST_WILLQUEUE;
            }
        } else if state == JobState::Queued && qtime != 0 && qtime <= now && retry != 0 {
            let jitter = rand250(&mut self.rng);
            let id = j.id;
            if let Some(j) = self.store.get_mut(h) {
                j.flags |= F_BCAST_WILLQUEUE;
                j.qtime = add_ms(now + u64::from(retry) * 1000, jitter);
            }
            self.apply_backoff(h, now);
            // Our addition: re-announce that the job sits queued here, so a
            // copy queued elsewhere too (after a lost QUEUED) is resolved by
            // the tie-break within one retry period (docs/COMPATIBILITY.md).
            self.send_to_delivered(
                h,
                BusOut::Queued {
                    job: id,
                    nack: false,
                    deliv: false,
                },
            );
        } else if state == JobState::Acked {
            self.gc_attempt(h, now);
            if let Some(j) = self.store.get_mut(h) {
                j.gc_retry = (j.gc_retry + 1).min(10);
            }
        }
        if self.store.get(h).is_some() {
            self.update_awake(h, now);
        }
    }

    /// Is another holder of the job unreachable (no link, or PFAIL) without
    /// being agreed failed, for less than `HOLD_BACK_MAX_MS`?
    fn holder_cut_off(&self, h: u32, now: u64) -> bool {
        let Some(j) = self.store.get(h) else {
            return false;
        };
        j.nodes_delivered.iter().filter(|&n| n != 0).any(|n| {
            self.cluster.get(n).is_some_and(|node| {
                !node.has(FLAG_FAIL | FLAG_DELETED | FLAG_HANDSHAKE | FLAG_NOADDR)
                    && (!node.link || node.has(FLAG_PFAIL))
                    && node.ping_sent != 0
                    && now.saturating_sub(node.ping_sent) < HOLD_BACK_MAX_MS
            })
        })
    }

    fn expire_add_waiters(&mut self, now: u64) {
        while let Some(&(t, h)) = self.add_timeouts.first() {
            // Strictly after the deadline: times are truncated to the ms,
            // so firing at `t == now` could end a wait up to 1 ms early.
            if t >= now {
                break;
            }
            self.add_timeouts.remove(&(t, h));
            if let Some(w) = self.adders.remove(&h) {
                self.counters.norepl += 1;
                self.finish_add_waiter(h, w, super::Wake::Error(WireError::NoReplTimeout));
                // The job is deleted and DELJOB broadcast to possible holders.
                self.delete_job(h, now);
            }
        }
    }

    /// Sample random queues and evict idle empty ones, as Disque does.
    ///
    /// A sample is the first live queue in a window of slots from a random
    /// one, as Disque's random dictionary key walks buckets until one is
    /// used: drawing single slots mostly missed once evictions had left the
    /// slab sparse, and the last idle queues lingered for dozens of calls.
    /// The window bounds the walk in a huge, nearly empty slab.
    pub fn evict_idle_queues(&mut self, now: u64) {
        const EVICT_SCAN_WINDOW: usize = 1024;
        let max_idle = self.max_queue_idle();
        let slots = self.queues.capacity_slots();
        if self.queues.is_empty() || slots == 0 {
            return;
        }
        let mut sampled = 0usize;
        let mut evicted = 0usize;
        loop {
            for _ in 0..20 {
                let from = self.rng.gen_range(0..slots);
                let Some(h) = self.queues.live_near(from, EVICT_SCAN_WINDOW) else {
                    break;
                };
                sampled += 1;
                if self.queue_maybe_evict(h, now, max_idle) {
                    evicted += 1;
                }
            }
            if self.queues.is_empty() || (sampled > 10 && evicted * 10 < sampled) || sampled > 2000
            {
                break;
            }
        }
    }
}
