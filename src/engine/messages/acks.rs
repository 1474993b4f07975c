//! Acknowledgement GC: SETACK from the acking node and the
//! GOTACK answers that let it delete the job everywhere.

use crate::domain::job::{JobId, JobState, NodeIdx};
use crate::engine::{BusOut, Engine};

impl Engine {
    pub(super) fn on_setack(&mut self, from: NodeIdx, id: &[u8; 40], may_have: u32, now: u64) {
        let Some(jid) = JobId::parse(id) else { return };
        let Some(h) = self.lookup(&jid) else {
            self.forget_acked(&jid, now);
            self.out.bus.push((
                from,
                BusOut::GotAck {
                    job: jid,
                    known: false,
                },
            ));
            return;
        };
        if self
            .store
            .get(h)
            .is_some_and(|j| j.state == JobState::WaitRepl)
            && !self.replication_achieved(h, now)
        {
            self.out.bus.push((
                from,
                BusOut::GotAck {
                    job: jid,
                    known: false,
                },
            ));
            return;
        }
        self.acknowledge(h, now);
        let known = self.store.get(h).map_or(0, |j| j.nodes_delivered.len()) as u32;
        if known <= may_have {
            self.out.bus.push((
                from,
                BusOut::GotAck {
                    job: jid,
                    known: true,
                },
            ));
        } else {
            if may_have == 0 {
                self.out.bus.push((
                    from,
                    BusOut::GotAck {
                        job: jid,
                        known: true,
                    },
                ));
            }
            self.gc_attempt(h, now);
        }
    }

    pub(super) fn on_gotack(&mut self, from: NodeIdx, id: &[u8; 40], known: bool, now: u64) {
        let Some(h) = self.lookup_raw(id) else { return };
        let Some(j) = self.store.get_mut(h) else {
            return;
        };
        if j.state != JobState::Acked {
            return;
        }
        let dummy = j.nodes_delivered.is_empty();
        if dummy && known {
            self.delete_job(h, now);
            return;
        }
        if known || j.nodes_delivered.contains(from) {
            j.nodes_delivered.insert(from);
            if let Some(c) = self.confirmed.get_mut(&h) {
                c.insert(from);
            }
        } else if dummy {
            let c = self.confirmed.entry(h).or_default();
            c.insert(from);
            if c.len() >= self.cluster.known() {
                self.delete_job(h, now);
                return;
            }
        }
        let Some(j) = self.store.get(h) else { return };
        if !dummy
            && self
                .confirmed
                .get(&h)
                .is_some_and(|c| c.len() >= j.nodes_delivered.len())
        {
            let jid = j.id;
            self.send_to_delivered(h, BusOut::DelJob { job: jid });
            self.delete_job(h, now);
        }
    }
}
