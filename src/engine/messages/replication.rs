//! REPLJOB from the origin of a job: store the copy and answer GOTJOB
//! (refused while out of memory or leaving).
//!
//! This runs once per replicated job on every replica, so the record is
//! decoded in place (no owned copy of queue, body and node IDs), the job
//! is looked up once, and a queue this node already has lends its name.

use bytes::Bytes;

use crate::domain::job::{JobId, JobState, NodeIdx, F_BCAST_QUEUED};
use crate::domain::queue::PAUSE_IN;
use crate::engine::records::Flavor;
use crate::engine::{BusOut, Engine};
use crate::protocol::bus::message::MFLAG_NOREPLY;
use crate::protocol::job_codec::RecordRef;

impl Engine {
    pub(super) fn on_repljob(&mut self, from: NodeIdx, blob: &Bytes, mflags: u8, now: u64) {
        if self.memory_level() >= 1 || self.cluster.leaving() {
            return;
        }
        let Ok((rec, _)) = RecordRef::decode(blob) else {
            return;
        };
        let Some(id) = JobId::parse(rec.id) else {
            return;
        };
        let queue = match self.queue(rec.queue) {
            Some(q) if q.paused & PAUSE_IN != 0 => return,
            Some(q) => Some(q.shared_name.clone()),
            None => None,
        };
        match self.lookup(&id) {
            Some(h) => {
                // A copy we hold already (a resent REPLJOB): learn the
                // holders the origin knows now.
                for n in rec.nodes.clone() {
                    if let Some(i) = self.cluster.find(n) {
                        if let Some(j) = self.store.get_mut(h) {
                            j.nodes_delivered.insert(i);
                        }
                    }
                }
            }
            None => {
                if self.answer_forgotten_unstored(from, id) {
                    return;
                }
                let Some(mut job) = self.job_from_ref(&rec, Flavor::Message, now, queue) else {
                    return;
                };
                let ext = crate::engine::records::ext_of_ref(&rec);
                job.flags |= F_BCAST_QUEUED;
                job.state = JobState::Active;
                job.nodes_delivered.insert(0);
                job.nodes_delivered.insert(from);
                if let Some(h) = self.register_with(job, ext) {
                    self.dedup_learn_from_job(h, now);
                    self.update_awake(h, now);
                    self.aof_loadjob(h);
                    self.spill_parked(h, now);
                }
            }
        }
        if mflags & MFLAG_NOREPLY == 0 {
            self.out.bus.push((from, BusOut::GotJob { job: id }));
        }
    }
}
