//! REPLJOB from the origin of a job: store the copy and answer GOTJOB
//! (refused while out of memory or leaving).

use bytes::Bytes;

use crate::cluster::message::MFLAG_NOREPLY;
use crate::engine::codec::Flavor;
use crate::engine::{BusOut, Engine};
use crate::job::{JobState, NodeIdx, F_BCAST_QUEUED};
use crate::job_codec::JobRecord;
use crate::queue::PAUSE_IN;

impl Engine {
    pub(super) fn on_repljob(&mut self, from: NodeIdx, blob: &Bytes, mflags: u8, now: u64) {
        if self.memory_level() >= 1 || self.cluster.leaving() {
            return;
        }
        let Ok((rec, _)) = JobRecord::decode(blob) else {
            return;
        };
        if self
            .queue(&rec.queue)
            .is_some_and(|q| q.paused & PAUSE_IN != 0)
        {
            return;
        }
        let Some(mut job) = self.job_from_record(&rec, Flavor::Message, now) else {
            return;
        };
        let ext = crate::engine::codec::ext_of_record(&rec);
        let id = job.id;
        if self.answer_forgotten(from, &id.0) {
            return;
        }
        match self.lookup(&id) {
            Some(h) => {
                let incoming: Vec<NodeIdx> = job.nodes_delivered.iter().collect();
                if let Some(j) = self.store.get_mut(h) {
                    for n in incoming {
                        j.nodes_delivered.insert(n);
                    }
                }
            }
            None => {
                job.flags |= F_BCAST_QUEUED;
                job.state = JobState::Active;
                job.nodes_delivered.insert(0);
                job.nodes_delivered.insert(from);
                if let Some(h) = self.register_with(job, ext) {
                    self.dedup_learn_from_job(h, now);
                    self.update_awake(h, now);
                    self.aof_loadjob(h);
                }
            }
        }
        if mflags & MFLAG_NOREPLY == 0 {
            self.out.bus.push((from, BusOut::GotJob { job: id }));
        }
    }
}
