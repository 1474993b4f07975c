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
    /// The queued jobs node `a` holds whole on disk.
    pub(super) fn cold_ids(&self, a: usize) -> Vec<JobId> {
        self.cold_ids_of(a, false)
    }

    /// The queued jobs (or, with `copies`, the replicas' copies) node `a`
    /// holds whole on disk.
    pub(super) fn cold_ids_of(&self, a: usize, copies: bool) -> Vec<JobId> {
        let (Some(disks), Some(Some(e))) = (self.spill.as_ref(), self.nodes.get(a)) else {
            return Vec::new();
        };
        e.cold_live_locs(copies)
            .iter()
            .filter_map(|k| disks.disks[a].get(k).map(|(id, _)| *id))
            .collect()
    }

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

/// A replica asks about each job it holds once per RETRY (WILLQUEUE);
/// the node that has it queued whole on disk answers from the job's slot.
/// Reading it back would bring the cluster's cold backlog into RAM every
/// RETRY period, and a job read back stays resident.
#[test]
fn willqueue_about_jobs_on_disk_leaves_them_there() {
    use super::{addjob, getjob_jobs, poll_adds, Workload};
    use crate::domain::job::JobState;
    use std::collections::HashSet;

    let mut sim = Sim::new(3, 7, super::Faults::calm());
    sim.spill = Some(SimDisks::new(3));
    sim.join_all();
    let mut w = Workload::default();
    // Node 1 (odd) stores jobs whole; REPLICATE 3, RETRY 3.
    for n in 0..60 {
        addjob(&mut sim, &mut w, 1, n);
    }
    for _ in 0..200 {
        sim.step();
        poll_adds(&mut sim, &mut w);
    }
    assert_eq!(w.accepted.len(), 60, "every ADDJOB replicated");
    let cold_before = sim.cold_ids(1).len();
    assert!(cold_before >= 20, "{cold_before} jobs whole on disk");
    let loaded_before = sim.nodes[1].as_ref().map_or(0, |e| e.cold.loaded_total);

    // Three RETRY periods with no consumer: every replica asks each time.
    sim.run_for(10_000);
    let e1 = sim.nodes[1].as_ref().expect("node 1 up");
    assert!(
        e1.cold.willqueue_answered >= cold_before as u64,
        "{} WILLQUEUEs answered from disk",
        e1.cold.willqueue_answered
    );
    assert_eq!(e1.cold.loaded_total, loaded_before, "jobs read back");
    assert_eq!(sim.cold_ids(1).len(), cold_before, "jobs left the disk");
    // Told QUEUED, no replica queued its copy.
    let cold: HashSet<JobId> = sim.cold_ids(1).into_iter().collect();
    for a in [0, 2] {
        let e = sim.nodes[a].as_ref().expect("replica up");
        let queued: Vec<JobId> = e
            .store
            .iter_from(0)
            .filter(|(_, j)| j.state == JobState::Queued && cold.contains(&j.id))
            .map(|(_, j)| j.id)
            .collect();
        assert!(
            queued.is_empty(),
            "node {a} queued {} cold jobs",
            queued.len()
        );
    }

    // Every job is then delivered once, with its body (from any node:
    // GETJOB elsewhere pulls jobs from node 1; a job left active on
    // every node waits for its RETRY).
    let mut got = HashSet::new();
    for t in 0..2000 {
        let client = sim.client();
        let now = sim.now;
        if let Some(e) = sim.nodes[t % 3].as_mut() {
            let jobs = getjob_jobs(e, client, now).unwrap_or_default();
            for j in &jobs {
                assert_eq!(j.body.as_ref(), w.accepted.get(&j.id), "body of {:?}", j.id);
                assert!(got.insert(j.id), "{:?} delivered twice", j.id);
            }
            let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
            e.ackjob(&ids, now);
            sim.flush(t % 3);
        }
        if got.len() == 60 {
            break;
        }
        sim.step();
    }
    assert_eq!(got.len(), 60, "jobs delivered");
}

/// A replica's copies (active, waiting for their RETRY) leave RAM whole,
/// come back in time for each retry (asked about with WILLQUEUE and
/// answered QUEUED by the node that has the job queued), go back to disk,
/// and are requeued from disk when that node dies: every job is then
/// delivered with its body.
#[test]
fn copies_leave_ram_whole_and_come_back_for_their_retry() {
    use super::{addjob_retry, getjob_jobs, poll_adds, Workload};
    use crate::domain::job::JobState;
    use std::collections::HashSet;

    let mut sim = Sim::new(3, 9, super::Faults::calm());
    sim.spill = Some(SimDisks::new(3));
    sim.join_all();
    let mut w = Workload::default();
    // Node 0 queues them (bodies on disk); node 1 (odd) stores whole jobs,
    // here its copies. REPLICATE 3, RETRY 6.
    for n in 0..60 {
        addjob_retry(&mut sim, &mut w, 0, n, 6);
    }
    let copies = |sim: &Sim| sim.nodes[1].as_ref().map_or(0, |e| e.cold.copies);
    let mut most = 0;
    for _ in 0..200 {
        sim.step();
        poll_adds(&mut sim, &mut w);
        most = most.max(copies(&sim));
    }
    assert_eq!(w.accepted.len(), 60, "every ADDJOB replicated");
    assert!(most >= 30, "{most} copies whole on disk at most");

    // Three RETRY periods with no consumer: the copies come back for each
    // retry (read back) and go to disk again; none is queued beside node
    // 0's job.
    let loaded = |sim: &Sim| sim.nodes[1].as_ref().map_or(0, |e| e.cold.loaded_total);
    let mut again = 0;
    for _ in 0..200 {
        sim.run_for(100);
        if loaded(&sim) >= 60 {
            again = again.max(copies(&sim));
        }
    }
    assert!(loaded(&sim) >= 120, "{} copies read back", loaded(&sim));
    assert!(
        again >= 30,
        "{again} copies on disk at most after their first retry"
    );
    for a in [1, 2] {
        let e = sim.nodes[a].as_ref().expect("replica up");
        let queued = e
            .store
            .iter_from(0)
            .filter(|(_, j)| j.state == JobState::Queued)
            .count();
        assert_eq!(
            queued, 0,
            "node {a} queued copies while node 0 holds the jobs"
        );
    }

    // Acknowledged at node 0, the first 20 jobs leave the replicas; those
    // whose copy is on disk there are dropped without a read.
    let acked: Vec<JobId> = {
        let mut ids: Vec<JobId> = w.accepted.keys().copied().collect();
        ids.sort_by_key(|id| id.0);
        ids.truncate(20);
        ids
    };
    let reads = loaded(&sim);
    let on_disk = sim
        .cold_ids_of(1, true)
        .iter()
        .filter(|id| acked.contains(id))
        .count() as u64;
    let now = sim.now;
    if let Some(e) = sim.nodes[0].as_mut() {
        e.ackjob(&acked, now);
    }
    sim.flush(0);
    sim.run_for(200);
    let e1 = sim.nodes[1].as_ref().expect("node 1 up");
    assert!(on_disk > 0, "none of the acknowledged copies on disk");
    assert_eq!(
        e1.cold.acked_on_disk, on_disk,
        "copies acknowledged on disk"
    );
    assert_eq!(loaded(&sim), reads, "copies read back to be acknowledged");
    assert!(
        e1.store.iter_from(0).all(|(_, j)| !acked.contains(&j.id)),
        "node 1 keeps an acknowledged job"
    );
    for id in &acked {
        w.accepted.remove(id);
    }

    // Node 0 dies: the copies requeue, from disk or not, and every job is
    // delivered with its body.
    sim.crash(0);
    let mut got = HashSet::new();
    for t in 0..4000 {
        let client = sim.client();
        let now = sim.now;
        let a = 1 + t % 2;
        if let Some(e) = sim.nodes[a].as_mut() {
            let jobs = getjob_jobs(e, client, now).unwrap_or_default();
            for j in &jobs {
                assert_eq!(j.body.as_ref(), w.accepted.get(&j.id), "body of {:?}", j.id);
                got.insert(j.id);
            }
            let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
            e.ackjob(&ids, now);
            sim.flush(a);
        }
        if got.len() == 40 {
            break;
        }
        sim.step();
    }
    assert_eq!(got.len(), 40, "jobs delivered after their node died");
}
