//! The engine side of the per-job extension fields (`crate::domain::job_ext`):
//! the side map that holds them, and the back-off rule (ADDJOB BACKOFF,
//! NACK DELAY) that replaces Disque's flat RETRY for the jobs that ask.
//! Plain jobs never touch the map: everything here is behind `F_EXT`.

use super::{add_ms, rand250, BusOut, Engine, JobHandle};
use crate::domain::job::{Job, JobState, F_BCAST_WILLQUEUE, F_EXT};
use crate::domain::job_ext::{backoff_ms, JobExt};

impl Engine {
    /// Extension fields of a job, if it has any.
    pub fn ext_of(&self, h: JobHandle) -> Option<&JobExt> {
        if self.store.get(h)?.has(F_EXT) {
            self.ext.get(&h)
        } else {
            None
        }
    }

    /// Extension fields of a job, created empty when missing.
    pub fn ext_mut(&mut self, h: JobHandle) -> Option<&mut JobExt> {
        let j = self.store.get_mut(h)?;
        j.flags |= F_EXT;
        Some(self.ext.entry(h).or_default())
    }

    /// Register a job together with its extension fields (None = plain).
    pub fn register_with(&mut self, mut job: Job, ext: Option<JobExt>) -> Option<JobHandle> {
        job.flags &= !F_EXT;
        let h = self.register(job)?;
        if let Some(x) = ext {
            let backoff = x.backoff_max;
            if let Some(slot) = self.ext_mut(h) {
                *slot = x;
            }
            // A loaded or replicated back-off job waits its current period
            // rather than one RETRY (the record armed `now + delay + RETRY`).
            if backoff > 0 {
                let retry_ms = self.store.get(h).map_or(0, |j| u64::from(j.retry) * 1000);
                let extra = self.backoff_period(h).saturating_sub(retry_ms);
                if let Some(j) = self.store.get_mut(h) {
                    if j.qtime != 0 && j.retry > 0 {
                        j.qtime = j.qtime.saturating_add(extra);
                    }
                }
            }
            self.after_registered(h);
        }
        Some(h)
    }

    /// Re-queue period in ms: RETRY, or for a BACKOFF job RETRY x
    /// 2^(nacks + additional deliveries) capped at its maximum.
    pub fn backoff_period(&self, h: JobHandle) -> u64 {
        let Some(j) = self.store.get(h) else { return 0 };
        let base = u64::from(j.retry) * 1000;
        match self.ext_of(h) {
            Some(x) if x.backoff_max > 0 => {
                let prior = u32::from(j.nacks) + u32::from(j.deliv);
                backoff_ms(j.retry, prior, x.backoff_max)
            }
            _ => base,
        }
    }

    /// After a site armed `qtime = now + RETRY (+ jitter)`: stretch it to
    /// the back-off period for BACKOFF jobs. No-op for plain jobs.
    pub fn apply_backoff(&mut self, h: JobHandle, now: u64) {
        let Some(j) = self.store.get(h) else { return };
        if !j.has(F_EXT) || j.qtime == 0 || j.retry == 0 {
            return;
        }
        if self.ext_of(h).is_none_or(|x| x.backoff_max == 0) {
            return;
        }
        let period = self.backoff_period(h);
        let jitter = rand250(&mut self.rng);
        if let Some(j) = self.store.get_mut(h) {
            j.qtime = add_ms(now + period, jitter);
        }
    }

    /// NACK with a delay (or a BACKOFF job's NACK without one): keep the job
    /// active, queue it `delay_ms` from now counting as a nack, and tell the
    /// other holders to stand back until then. Returns false for jobs that
    /// cannot be re-queued (not active, at-most-once already delivered).
    pub fn nack_later(&mut self, h: JobHandle, delay_ms: u64, now: u64) -> bool {
        let Some(j) = self.store.get(h) else {
            return false;
        };
        if j.state != JobState::Active
            || j.qtime == 0
            || (j.retry == 0 && j.has(crate::domain::job::F_DELIVERED))
            || j.queue.is_none()
        {
            return false;
        }
        let id = j.id;
        let delay_s = u32::try_from(delay_ms / 1000).unwrap_or(u32::MAX);
        if let Some(j) = self.store.get_mut(h) {
            j.qtime = (now + delay_ms).max(1);
            if j.retry > 0 {
                j.flags |= F_BCAST_WILLQUEUE;
            }
        }
        if let Some(x) = self.ext_mut(h) {
            x.nack_pending = true;
        }
        self.update_awake(h, now);
        self.send_to_delivered(
            h,
            BusOut::Working {
                job: id,
                delay: delay_s,
            },
        );
        true
    }

    /// The delay a NACK without DELAY waits: the current back-off of a
    /// BACKOFF job, None for every other job (queued at once, as Disque).
    pub fn nack_default_delay(&self, h: JobHandle) -> Option<u64> {
        let x = self.ext_of(h)?;
        if x.backoff_max == 0 {
            return None;
        }
        Some(self.backoff_period(h))
    }

    /// Consume a pending delayed NACK: the queueing it ends counts as a nack.
    /// A NACK DELAY is waiting to queue the job (see `take_nack_pending`).
    pub fn nack_pending(&self, h: JobHandle) -> bool {
        self.store.get(h).is_some_and(|j| j.has(F_EXT))
            && self.ext.get(&h).is_some_and(|x| x.nack_pending)
    }

    pub fn take_nack_pending(&mut self, h: JobHandle) -> bool {
        if !self.store.get(h).is_some_and(|j| j.has(F_EXT)) {
            return false;
        }
        self.ext
            .get_mut(&h)
            .is_some_and(|x| std::mem::replace(&mut x.nack_pending, false))
    }
}
