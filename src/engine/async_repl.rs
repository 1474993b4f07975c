//! ADDJOB ASYNC that does not silently drop copies. Disque sends the
//! REPLJOBs of an ASYNC job once, best effort: a copy lost with a link, or
//! refused by a receiver out of memory, is never made. Here the REPLJOBs
//! ask for GOTJOB, and until enough holders confirmed, a cron sends them
//! again (with back-off) to the holders that did not answer, and picks
//! new reachable nodes in place of the ones that stay silent or fail. The
//! origin out of memory (or leaving) hands its job off instead of keeping
//! it: the first holder that confirms is told to queue it (ENQUEUE), and
//! the local record goes once the replication level is reached.
//!
//! Only ASYNC jobs are tracked, and only until their copies are
//! confirmed, so the table is empty in steady state.

use super::{BusOut, Engine, JobHandle, Map};
use crate::domain::job::{JobId, JobState, NodeSet};

/// Tries after which a linked holder that never confirmed is assumed not
/// to hold the job (out of memory, paused queue) and replaced.
const SILENT_TRIES: u32 = 3;
/// Back-off of the resends: doubles from the first value up to the cap,
/// so a peer whose link comes back gets its copy within the cap.
const FIRST_RETRY_MS: u64 = 100;
const MAX_RETRY_MS: u64 = 1000;
/// Jobs handled per cron call (every ~100 ms): a peer out of memory for a
/// long time, with many ASYNC jobs waiting for it, costs a bounded number
/// of resends per second.
const MAX_PER_ROUND: usize = 1000;

/// One ASYNC job still short of its replication level.
struct Pending {
    /// Peers that answered GOTJOB.
    confirmed: NodeSet,
    /// Peer copies wanted (the replication level, less the origin's own
    /// copy unless it hands the job off).
    want: usize,
    /// Resend rounds so far (drives the back-off and `SILENT_TRIES`).
    tries: u32,
    next: u64,
    /// The origin keeps no copy: queue it on the first confirmed holder,
    /// drop the local record once `want` holders confirmed.
    handoff: bool,
    enqueued: bool,
}

/// ASYNC jobs waiting for their copies to be confirmed.
#[derive(Default)]
pub struct AsyncRepl {
    pending: Map<JobId, Pending>,
}

impl AsyncRepl {
    /// ASYNC jobs whose replication level is not confirmed yet.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no ASYNC job waits for copies.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

impl Engine {
    /// ASYNC jobs whose replication level is not confirmed yet (INFO
    /// jobstats `async_copies_pending`).
    pub fn async_copies_pending(&self) -> usize {
        self.async_repl.len()
    }

    /// An ASYNC job was just created and its first REPLJOBs queued: keep
    /// sending until `want` peers confirmed.
    pub(super) fn async_track(&mut self, h: JobHandle, want: usize, handoff: bool, now: u64) {
        let Some(j) = self.store.get(h) else { return };
        if want == 0 {
            return;
        }
        self.async_repl.pending.insert(
            j.id,
            Pending {
                confirmed: NodeSet::default(),
                want,
                tries: 0,
                next: now + FIRST_RETRY_MS,
                handoff,
                enqueued: false,
            },
        );
    }

    /// GOTJOB for a job that is not waiting for a blocked ADDJOB.
    pub(super) fn async_confirmed(&mut self, h: JobHandle, from: u32) {
        let Some(j) = self.store.get(h) else { return };
        let id = j.id;
        let delay = j.delay;
        let Some(p) = self.async_repl.pending.get_mut(&id) else {
            return;
        };
        p.confirmed.insert(from);
        if p.handoff && !p.enqueued {
            // The first holder known to have the job queues it.
            p.enqueued = true;
            self.out
                .bus
                .push((from, BusOut::Enqueue { job: id, delay }));
        }
        if p.confirmed.len() >= p.want {
            let handoff = p.handoff;
            self.async_repl.pending.remove(&id);
            if handoff {
                self.remove_record(h);
            }
        }
    }

    /// Every ~100 ms: resend to silent holders, replace the ones that stay
    /// silent or became unreachable, forget jobs that are gone.
    pub(super) fn async_repl_cron(&mut self, now: u64) {
        if self.async_repl.pending.is_empty() {
            return;
        }
        let due: Vec<JobId> = self
            .async_repl
            .pending
            .iter()
            .filter(|(_, p)| p.next <= now)
            .map(|(id, _)| *id)
            .take(MAX_PER_ROUND)
            .collect();
        let now_s = now / 1000;
        for id in due {
            let live = self.lookup(&id).filter(|&h| {
                self.store.get(h).is_some_and(|j| {
                    matches!(j.state, JobState::Active | JobState::Queued)
                        && u64::from(j.etime) > now_s
                })
            });
            let Some(h) = live else {
                // Acked, deleted or expired meanwhile: nothing to copy.
                if let Some(p) = self.async_repl.pending.remove(&id) {
                    if p.handoff {
                        if let Some(h) = self.lookup(&id) {
                            self.remove_record(h);
                        }
                    }
                }
                continue;
            };
            self.async_resend(h, id, now);
        }
    }

    fn async_resend(&mut self, h: JobHandle, id: JobId, now: u64) {
        let Some(p) = self.async_repl.pending.get_mut(&id) else {
            return;
        };
        p.tries += 1;
        p.next = now + (FIRST_RETRY_MS << p.tries.min(4)).min(MAX_RETRY_MS);
        let tries = p.tries;
        let want = p.want;
        let confirmed = p.confirmed.clone();
        let Some(j) = self.store.get(h) else { return };
        let holders: Vec<u32> = j
            .nodes_delivered
            .iter()
            .filter(|&n| n != 0 && !confirmed.contains(n))
            .collect();
        let usable = |n: u32| {
            self.cluster.reachable.contains(&n) && self.cluster.get(n).is_some_and(|x| x.link)
        };
        // Holders that may still answer: reachable, and either their link
        // was down so far or they have not been silent for long.
        let hopeful = holders
            .iter()
            .filter(|&&n| usable(n) && tries <= SILENT_TRIES)
            .count();
        let short = want.saturating_sub(confirmed.len() + hopeful);
        let resend: Vec<u32> = holders.into_iter().filter(|&n| usable(n)).collect();
        for n in resend {
            self.out.bus.push((
                n,
                BusOut::ReplJob {
                    job: id,
                    noreply: false,
                },
            ));
        }
        if short > 0 {
            let added = self.add_replication_targets(h, short, false);
            if added > 0 {
                // Confirmed holders learn the new ones (for acks and GC).
                for n in confirmed.iter() {
                    self.out.bus.push((
                        n,
                        BusOut::ReplJob {
                            job: id,
                            noreply: true,
                        },
                    ));
                }
            }
        }
    }
}
