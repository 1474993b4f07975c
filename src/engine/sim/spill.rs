//! The spill tier in the simulation: each node's spill thread is an
//! in-memory disk whose results arrive one step after the ops were issued,
//! so page-ins, writes and compaction interleave with the cluster's
//! messages, crashes and requeues as they would on a slow disk.

use std::collections::HashMap;

use bytes::Bytes;

use super::net::Sim;
use crate::domain::job::JobId;
use crate::engine::spill::{ReadFailure, SpillDone, SpillOp};

/// Jobs at the head of each queue kept in RAM in the simulation: small,
/// so that its short queues spill.
const SIM_HEAD: usize = 2;

#[derive(Default)]
pub(in crate::engine) struct SimDisks {
    disks: Vec<HashMap<(u32, u32), (JobId, Bytes)>>,
    pending: Vec<Vec<SpillOp>>,
}

impl SimDisks {
    pub(in crate::engine) fn new(n: usize) -> SimDisks {
        SimDisks {
            disks: (0..n).map(|_| HashMap::new()).collect(),
            pending: (0..n).map(|_| Vec::new()).collect(),
        }
    }

    pub(super) fn issued(&mut self, node: usize, ops: Vec<SpillOp>) {
        if let Some(p) = self.pending.get_mut(node) {
            p.extend(ops);
        }
    }

    fn perform(&mut self, node: usize) -> Vec<SpillDone> {
        let ops = std::mem::take(&mut self.pending[node]);
        let disk = &mut self.disks[node];
        let mut done = Vec::new();
        for op in ops {
            match op {
                SpillOp::Write { loc, id, body } => {
                    disk.insert((loc.seg, loc.off), (id, body));
                    done.push(SpillDone::Written {
                        seg: loc.seg,
                        end: loc.off + loc.record_len() as u32,
                    });
                }
                SpillOp::Read { h, id, loc } => {
                    let result = match disk.get(&(loc.seg, loc.off)) {
                        Some((rid, b)) if *rid == id => Ok(b.clone()),
                        Some(_) => Err(ReadFailure::Corrupt),
                        None => Err(ReadFailure::Io),
                    };
                    done.push(SpillDone::Read { h, id, loc, result });
                }
                SpillOp::Move { h, id, from, to } => {
                    let result = match disk.get(&(from.seg, from.off)).cloned() {
                        Some((rid, b)) if rid == id => {
                            disk.insert((to.seg, to.off), (rid, b));
                            Ok(())
                        }
                        Some(_) => Err(ReadFailure::Corrupt),
                        None => Err(ReadFailure::Io),
                    };
                    done.push(SpillDone::Moved {
                        h,
                        id,
                        from,
                        to,
                        result,
                    });
                }
                SpillOp::ReadCold { slot, loc, qh, run } => {
                    let result = match disk.get(&(loc.seg, loc.off)) {
                        Some((rid, b)) => Ok((*rid, b.clone())),
                        None => Err(ReadFailure::Io),
                    };
                    done.push(SpillDone::ReadCold {
                        slot,
                        loc,
                        qh,
                        run,
                        result,
                    });
                }
                SpillOp::MoveCold { slot, from, to } => {
                    let result = match disk.get(&(from.seg, from.off)).cloned() {
                        Some(rec) => {
                            disk.insert((to.seg, to.off), rec);
                            Ok(())
                        }
                        None => Err(ReadFailure::Io),
                    };
                    done.push(SpillDone::MovedCold {
                        slot,
                        from,
                        to,
                        result,
                    });
                }
                SpillOp::Unlink { seg } => disk.retain(|k, _| k.0 != seg),
            }
        }
        done
    }
}

impl Sim {
    /// Complete the spill ops issued since the last step, on every node.
    pub(super) fn complete_spill(&mut self) {
        let Some(mut disks) = self.spill.take() else {
            return;
        };
        let now = self.now;
        for a in 0..self.nodes.len() {
            let Some(e) = self.nodes[a].as_mut() else {
                // A crashed node's disk is a cache: gone with it.
                disks.disks[a].clear();
                disks.pending[a].clear();
                continue;
            };
            // A restarted engine starts without spill settings.
            e.set_spill(true, 0, 0);
            // Odd nodes store plain jobs whole, even ones only bodies:
            // one cluster runs both tiers side by side.
            e.set_spill_whole_jobs(a % 2 == 1);
            e.spill.head = SIM_HEAD;
            let done = disks.perform(a);
            if !done.is_empty() {
                e.spill_done(done, now);
            }
            disks.issued(a, e.take_spill_ops());
        }
        self.spill = Some(disks);
        for a in 0..self.nodes.len() {
            self.flush(a);
        }
    }
}
