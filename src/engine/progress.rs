//! Progress reports (WORKING ... PROGRESS): the newest report a worker
//! made for a job, kept as a `JobExt` field (so only reporting jobs pay)
//! and sent to the job's other holders in a PROGRESS bus message. Best
//! effort: a lost message leaves a holder with an older report, and the
//! newest stamp wins wherever reports meet. Reports are not written to the
//! AOF on their own (a worker reports often); a record written for another
//! reason carries the current one.

use bytes::{Bytes, BytesMut};

use super::{BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, JobState};
use crate::domain::job_ext::Progress;

impl Engine {
    /// The newest progress report of a job.
    pub fn progress_of(&self, h: JobHandle) -> Option<&Progress> {
        self.ext_of(h)?.progress.as_ref()
    }

    /// Keep `p` if it is newer than the job's report; false otherwise or
    /// when the job is acknowledged.
    fn adopt_progress(&mut self, h: JobHandle, p: Progress) -> bool {
        if self.store.get(h).is_none_or(|j| j.state == JobState::Acked) {
            return false;
        }
        if self.progress_of(h).is_some_and(|old| old.stamp > p.stamp) {
            return false;
        }
        match self.ext_mut(h) {
            Some(x) => {
                x.progress = Some(p);
                true
            }
            None => false,
        }
    }

    /// WORKING <id> PROGRESS ...: record the report here and send it to
    /// the other holders. False when the job is not known (or acknowledged).
    pub fn report_progress(
        &mut self,
        id: &JobId,
        percent: u8,
        desc: Bytes,
        data: Bytes,
        now: u64,
    ) -> bool {
        let Some(h) = self.lookup(id) else {
            return false;
        };
        // Strictly after the previous report of this node, so a burst in
        // one millisecond still ends with the last one everywhere.
        let stamp = self
            .progress_of(h)
            .map_or(now, |p| now.max(p.stamp.saturating_add(1)));
        let p = Progress {
            stamp,
            percent,
            desc,
            data,
        };
        let mut payload = BytesMut::with_capacity(60 + p.desc.len() + p.data.len());
        payload.extend_from_slice(&id.0);
        p.encode_into(&mut payload);
        if !self.adopt_progress(h, p) {
            return false;
        }
        self.send_to_delivered(
            h,
            BusOut::Progress {
                data: payload.freeze(),
            },
        );
        true
    }

    /// PROGRESS from another holder.
    pub(crate) fn on_progress(&mut self, data: &Bytes) {
        let Some(id) = data.get(..40).and_then(JobId::parse) else {
            return;
        };
        let Some(p) = Progress::decode(&data.slice(40..)) else {
            return;
        };
        if let Some(h) = self.lookup(&id) {
            self.adopt_progress(h, p);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};

    #[test]
    fn newest_report_wins_and_acked_jobs_take_none() {
        let now = 1_000_000;
        let mut e = Engine::new([b'a'; 40], 7711, 1, now);
        let req = AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from_static(b"b"));
        let AddJobOutcome::Added(id) = e.addjob(1, req, now) else {
            panic!("not added")
        };
        let h = e.lookup(&id).unwrap();
        assert!(e.progress_of(h).is_none());
        assert!(e.report_progress(&id, 10, Bytes::from_static(b"a"), Bytes::new(), now));
        assert!(e.report_progress(&id, 20, Bytes::from_static(b"b"), Bytes::new(), now));
        let p = e.progress_of(h).unwrap().clone();
        assert_eq!((p.percent, p.stamp), (20, now + 1));
        // An older report from another node loses.
        let mut old = BytesMut::new();
        old.extend_from_slice(&id.0);
        Progress {
            stamp: now - 5,
            percent: 99,
            ..Progress::default()
        }
        .encode_into(&mut old);
        e.on_progress(&old.freeze());
        assert_eq!(e.progress_of(h).unwrap().percent, 20);
        let mut newer = BytesMut::new();
        newer.extend_from_slice(&id.0);
        Progress {
            stamp: now + 50,
            percent: 70,
            ..Progress::default()
        }
        .encode_into(&mut newer);
        e.on_progress(&newer.freeze());
        assert_eq!(e.progress_of(h).unwrap().percent, 70);
        e.on_progress(&Bytes::from_static(b"garbage"));
        e.ackjob(&[id], now);
        assert!(!e.report_progress(&id, 30, Bytes::new(), Bytes::new(), now));
    }
}
