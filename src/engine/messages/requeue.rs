//! Requeue coordination between holders: ENQUEUE, QUEUED,
//! WORKING and WILLQUEUE, and the job-keyed tie break when two holders
//! queue the same job.

use crate::domain::job::{JobId, JobState, NodeIdx, F_BCAST_QUEUED, F_BCAST_WILLQUEUE};
use crate::domain::queue::PAUSE_IN;
use crate::engine::{add_ms, rand250, BusOut, Engine};
use crate::protocol::bus::message::{MFLAG_INCR_DELIV, MFLAG_INCR_NACKS};

impl Engine {
    pub(super) fn on_enqueue_msg(&mut self, id: &[u8; 40], delay: u32, now: u64) {
        let Some(h) = self.lookup_raw(id) else { return };
        let Some(j) = self.store.get(h) else { return };
        if !matches!(j.state, JobState::WaitRepl | JobState::Active) {
            return;
        }
        if j.queue
            .as_ref()
            .and_then(|q| self.queue(q))
            .is_some_and(|q| q.paused & PAUSE_IN != 0)
        {
            return;
        }
        if let Some(j) = self.store.get_mut(h) {
            j.flags &= !F_BCAST_QUEUED;
            // OUR FIX (docs/COMPATIBILITY.md): an at-most-once job handed
            // over by external replication gets queued once instead of never.
            if j.qtime == 0 && j.retry == 0 && !j.has(crate::domain::job::F_DELIVERED) {
                j.qtime = now.max(1);
            }
            if delay == 0 {
                j.state = JobState::Active;
            }
        }
        if delay == 0 {
            self.cause("enqueue-msg");
            self.enqueue(h, false, now);
        } else if let Some(j) = self.store.get_mut(h) {
            if j.retry != 0 && j.qtime != 0 {
                j.qtime = now + u64::from(delay) * 1000;
            }
        }
        self.update_awake(h, now);
    }

    /// QUEUED or WORKING from `from`; `delay` (WORKING from a NACK DELAY):
    /// seconds the sender waits before queueing it, added to our timer.
    pub(super) fn on_queued(
        &mut self,
        from: NodeIdx,
        id: &[u8; 40],
        working: bool,
        mflags: u8,
        delay: u32,
        now: u64,
    ) {
        if self.answer_forgotten(from, id) {
            return;
        }
        let Some(h) = self.lookup_raw(id) else { return };
        let Some(j) = self.store.get(h) else { return };
        if j.state == JobState::Acked {
            let may_have = j.nodes_delivered.len() as u32;
            self.out.bus.push((
                from,
                BusOut::SetAck {
                    job: j.id,
                    may_have,
                },
            ));
            return;
        }
        if j.state == JobState::Queued && (working || self.sender_wins(from, &j.id)) {
            self.dequeue(h);
        }
        if !working {
            self.after_released_elsewhere(h, now);
        }
        let jitter = rand250(&mut self.rng);
        let Some(j) = self.store.get_mut(h) else {
            return;
        };
        if j.retry != 0 && j.qtime != 0 {
            j.flags |= F_BCAST_WILLQUEUE;
            j.qtime = add_ms(now + u64::from(j.retry) * 1000, jitter);
        }
        if !working {
            if mflags & MFLAG_INCR_NACKS != 0 {
                j.nacks = j.nacks.saturating_add(1);
            }
            if mflags & MFLAG_INCR_DELIV != 0 {
                j.deliv = j.deliv.saturating_add(1);
            }
        }
        self.apply_backoff(h, now);
        if delay > 0 {
            if let Some(j) = self.store.get_mut(h) {
                if j.qtime != 0 {
                    j.qtime = j.qtime.saturating_add(u64::from(delay) * 1000);
                }
            }
        }
        self.update_awake(h, now);
        self.spill_copy_again(h, now);
    }

    /// Job-keyed XOR comparison: does `from` beat this node for the job?
    pub(super) fn sender_wins(&self, from: NodeIdx, id: &JobId) -> bool {
        let (Some(a), Some(b)) = (self.cluster.get(from), self.cluster.get(0)) else {
            return false;
        };
        let key = |node: &[u8; 40]| {
            let mut out = [0u8; 40];
            for i in 0..40 {
                out[i] = node[i] ^ id.0[11 + i % 24];
            }
            out
        };
        key(&a.id) > key(&b.id)
    }

    pub(super) fn on_willqueue(&mut self, from: NodeIdx, id: &[u8; 40]) {
        if self.answer_forgotten(from, id) {
            return;
        }
        let Some(h) = self.lookup_raw(id) else { return };
        let Some(j) = self.store.get(h) else { return };
        match j.state {
            JobState::Active | JobState::Queued => {
                let queued = j.state == JobState::Queued;
                let jid = j.id;
                if let Some(j) = self.store.get_mut(h) {
                    j.nodes_delivered.insert(from);
                }
                if queued {
                    self.send_to_delivered(
                        h,
                        BusOut::Queued {
                            job: jid,
                            nack: false,
                            deliv: false,
                        },
                    );
                }
            }
            JobState::Acked => {
                let may_have = j.nodes_delivered.len() as u32;
                self.out.bus.push((
                    from,
                    BusOut::SetAck {
                        job: j.id,
                        may_have,
                    },
                ));
            }
            JobState::WaitRepl => {}
        }
    }
}
