//! Job priorities (ADDJOB PRIORITY, JOBPRIORITY): the level a job is
//! queued at, changing it while the job waits, and the PRIORITY bus
//! message that carries a change to the other nodes holding the job.
//!
//! A level is a `JobExt` field, so only jobs given one pay for it; the
//! queue keeps one creation-time index per level (`crate::domain::queue`). Order
//! across nodes is best effort, as Disque's FIFO is: federation moves the
//! highest levels first because it pops jobs in serving order, and a
//! change reaches the other holders with one message that may be lost.

use super::{BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, JobState, NodeIdx};
use crate::domain::job_ext::{JobExt, PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN};

impl Engine {
    /// The level a job is queued at; `has_ext` is its `F_EXT` flag, read by
    /// the caller from the job it already holds, so plain jobs cost no
    /// lookup.
    #[inline]
    pub(crate) fn level_of(&self, has_ext: bool, h: JobHandle) -> u8 {
        if !has_ext {
            return PRIORITY_DEFAULT;
        }
        self.ext
            .get(&h)
            .map_or(PRIORITY_DEFAULT, JobExt::priority_level)
    }

    /// The PRIORITY a job was given (None: not given, served at the default).
    pub fn priority_of(&self, h: JobHandle) -> Option<u8> {
        self.ext_of(h).map(|x| x.priority).filter(|&p| p != 0)
    }

    /// Set a job's level here; a queued job moves to its new place at
    /// once. Returns false for unknown or acknowledged jobs.
    fn set_priority_local(&mut self, h: JobHandle, level: u8) -> bool {
        let level = level.clamp(PRIORITY_MIN, PRIORITY_MAX);
        let Some(j) = self.store.get(h) else {
            return false;
        };
        if j.state == JobState::Acked {
            return false;
        }
        let queued = j.state == JobState::Queued;
        let ctime = j.ctime;
        let qname = j.queue.clone();
        let old = self.level_of(j.has(crate::domain::job::F_EXT), h);
        if let Some(x) = self.ext_mut(h) {
            x.priority = level;
        }
        if queued && old != level {
            if let Some(q) = qname.as_deref().and_then(|n| self.queue_mut(n)) {
                if q.remove_prio(old, ctime, h) {
                    q.insert_prio(level, ctime, h);
                }
            }
        }
        // The AOF keeps the newest record of a job.
        if matches!(
            self.store.get(h).map(|j| j.state),
            Some(JobState::Active | JobState::Queued)
        ) {
            self.aof_relog(h);
        }
        true
    }

    /// AOF load: a later record of a job already loaded carries this
    /// level (0 = none given).
    pub fn load_priority(&mut self, h: JobHandle, level: u8) {
        if level != 0 && self.priority_of(h) != Some(level) {
            self.set_priority_local(h, level);
        }
    }

    /// JOBPRIORITY: set the level of each job known here and tell the other
    /// nodes holding it. Returns how many jobs were known here.
    pub fn set_priority(&mut self, ids: &[JobId], level: u8) -> usize {
        let mut n = 0;
        for id in ids {
            let Some(h) = self.lookup(id) else { continue };
            if self.set_priority_local(h, level) {
                n += 1;
                self.send_to_delivered(h, BusOut::Priority { job: *id, level });
            }
        }
        n
    }

    /// PRIORITY(level) from another node holding the job.
    pub(crate) fn on_priority(&mut self, _from: NodeIdx, id: &[u8; 40], level: u32) {
        let Some(level) = u8::try_from(level)
            .ok()
            .filter(|l| (PRIORITY_MIN..=PRIORITY_MAX).contains(l))
        else {
            return;
        };
        let Some(h) = JobId::parse(id).and_then(|id| self.lookup(&id)) else {
            return;
        };
        self.set_priority_local(h, level);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::domain::job::JobId;
    use crate::domain::job_ext::JobExt;
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
    use crate::engine::Engine;
    use bytes::Bytes;

    fn add(e: &mut Engine, body: &str, prio: Option<u8>, now: u64) -> JobId {
        let mut req = AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from(body.to_owned()));
        if let Some(p) = prio {
            req.ext = Some(Box::new(JobExt {
                priority: p,
                ..JobExt::default()
            }));
        }
        match e.addjob(1, req, now) {
            AddJobOutcome::Added(id) => id,
            _ => panic!("not added"),
        }
    }

    fn drain(e: &mut Engine, now: u64) -> Vec<JobId> {
        let qh = e.queue_handle(b"q").unwrap();
        let mut out = Vec::new();
        while let Some(h) = e.pop(qh, now) {
            out.push(e.job(h).unwrap().id);
        }
        out
    }

    #[test]
    fn served_by_level_then_age_and_changes_move_queued_jobs() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, 1_000_000);
        let now = 1_000_000;
        let plain1 = add(&mut e, "p1", None, now);
        let low = add(&mut e, "low", Some(1), now);
        let high = add(&mut e, "high", Some(9), now);
        let plain2 = add(&mut e, "p2", None, now);
        let mid = add(&mut e, "mid", Some(5), now);
        assert_eq!(e.priority_of(e.lookup(&plain1).unwrap()), None);
        assert_eq!(e.priority_of(e.lookup(&mid).unwrap()), Some(5));
        // Raise the second plain job above everything, lower the high one.
        assert_eq!(e.set_priority(&[plain2, high], 9), 2);
        assert_eq!(e.set_priority(&[high], 2), 1);
        assert_eq!(e.queue_len(b"q"), 5);
        assert_eq!(drain(&mut e, now), vec![plain2, plain1, mid, high, low]);
        assert_eq!(e.queue_len(b"q"), 0);
    }
}
