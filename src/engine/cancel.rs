//! CANCEL: a job that must never be delivered again, anywhere. It is an
//! acknowledgement (so it travels and wins like one: SETACK, GC, the
//! forgotten set) with a mark that it was a cancellation: WAITJOB replies
//! `cancelled` and WORKING tells the worker still holding the job to stop.
//!
//! The mark is a bounded set of recently cancelled IDs, kept whether or
//! not the job is still stored (a single-node ACK deletes it at once). A
//! CANCEL bus message carries it to the job's other holders before the
//! SETACK of the same turn (links are ordered); a holder that misses it
//! still drops the job on the SETACK and reports `acked`.

use bytes::Bytes;

use super::{BusOut, Engine};
use crate::domain::job::{JobId, JobState, F_DELIVERED};

impl Engine {
    /// Whether the job was cancelled here recently (or heard of it).
    pub fn is_cancelled(&self, id: &JobId) -> bool {
        !self.cancelled.is_empty() && self.cancelled.contains(id)
    }

    /// CANCEL <id> ...: mark and acknowledge each job. Returns how many
    /// jobs known here were live (not yet acknowledged).
    pub fn cancel(&mut self, ids: &[JobId], now: u64) -> i64 {
        let mut n = 0;
        for id in ids {
            self.cancelled.insert(id, now);
            match self.lookup(id) {
                Some(h) => {
                    if self
                        .store
                        .get(h)
                        .is_some_and(|j| j.state != JobState::Acked)
                    {
                        n += 1;
                    }
                    self.send_to_delivered(h, BusOut::Cancel { job: *id });
                }
                // Unknown here: whoever holds it learns of it (ACKJOB's
                // dummy acknowledgement, created below, follows).
                None if self.cluster.size() > 1 => self.broadcast(BusOut::Cancel { job: *id }),
                None => {}
            }
            self.ackjob(std::slice::from_ref(id), now);
        }
        n
    }

    /// CANCEL from another node: mark the job and acknowledge our copy
    /// (the sender's SETACK follows and completes the collection).
    pub(crate) fn on_cancel(&mut self, id: &[u8; 40], now: u64) {
        let Some(id) = JobId::parse(id) else { return };
        self.cancelled.insert(&id, now);
        if let Some(h) = self.lookup(&id) {
            self.acknowledge(h, now);
        }
    }

    /// CANCEL QUEUE: the jobs of `queue` held here that no consumer has
    /// yet: queued ones, in serving order, then those still waiting for
    /// their first queueing (DELAY not elapsed), with their bodies so the
    /// command can filter them. One pass over the queue and, for the
    /// delayed ones, over the jobs stored here.
    pub fn cancel_candidates(&self, queue: &[u8], now: u64) -> Vec<(JobId, Option<Bytes>)> {
        let mut out = Vec::new();
        let body = |j: &crate::domain::job::Job| j.body.as_deref().map(Bytes::copy_from_slice);
        if let Some(q) = self.queue(queue) {
            for h in q.handles() {
                if let Some(j) = self.store.get(h) {
                    out.push((j.id, body(j)));
                }
            }
        }
        for (_, j) in self.store.iter_from(0) {
            let delayed = j.state == JobState::Active
                && j.delay > 0
                && !j.has(F_DELIVERED)
                && now < (j.ctime / 1_000_000).saturating_add(u64::from(j.delay) * 1000)
                && j.queue.as_deref() == Some(queue);
            if delayed {
                out.push((j.id, body(j)));
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
    use crate::engine::waitjob::WaitJobOutcome;
    use crate::engine::{Engine, JobEnd, Wake};
    use crate::errors::WireError;
    use bytes::Bytes;

    fn add(e: &mut Engine, delay: u32, now: u64) -> crate::domain::job::JobId {
        let mut req = AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from_static(b"b"));
        req.delay = delay;
        match e.addjob(1, req, now) {
            AddJobOutcome::Added(id) => id,
            _ => panic!("not added"),
        }
    }

    #[test]
    fn cancel_acks_marks_and_stops_workers() {
        let now = 1_000_000;
        let mut e = Engine::new([b'a'; 40], 7711, 1, now);
        let queued = add(&mut e, 0, now);
        let delayed = add(&mut e, 60, now);
        let running = add(&mut e, 0, now);
        let qh = e.queue_handle(b"q").unwrap();
        // `running` is the second queued job: pop both, put `queued` back.
        let first = e.pop(qh, now).unwrap();
        let second = e.pop(qh, now).unwrap();
        assert_eq!(e.job(second).unwrap().id, running);
        e.hand_back(&[e.job(first).unwrap().id], now);
        let ids: Vec<_> = e
            .cancel_candidates(b"q", now)
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(ids, vec![queued, delayed]);
        assert!(matches!(
            e.waitjob(7, running, 0, now),
            WaitJobOutcome::Blocked
        ));
        assert_eq!(e.cancel(&[queued, delayed, running], now), 3);
        assert_eq!(e.cancel(&[queued], now), 0);
        assert_eq!(e.queue_len(b"q"), 0);
        assert!(matches!(
            e.take_wakes().as_slice(),
            [(7, Wake::JobEnded(JobEnd::Cancelled))]
        ));
        assert_eq!(e.working(&running, now), Err(WireError::Cancelled));
        assert!(matches!(
            e.waitjob(8, queued, 0, now),
            WaitJobOutcome::Ended(JobEnd::Cancelled)
        ));
        // The delayed job is not queued when its delay ends.
        e.tick(now + 61_000);
        assert_eq!(e.queue_len(b"q"), 0);
    }
}
