//! Job dependencies (`ADDJOB ... AFTER <id> [ONFAIL ...]`,
//! docs/COMMANDS.md#addjob): jobs held, not queued, until what they wait
//! for is acknowledged.
//!
//! A waiting job is an ordinary replicated job whose extension fields
//! list its dependencies (job IDs or batch IDs). Every holder keeps it
//! with no requeue timer (`qtime` 0) and `enqueue` refuses it, so no
//! path can queue it early. Each holder settles it on its own, from what
//! it knows or hears:
//!
//! * a batch dependency from the batch's replicated state (every node
//!   gets every batch): met when the batch finished with every member
//!   acknowledged; failed when it finished with a dead member or was
//!   cancelled;
//! * a job dependency from its own copy, the forgotten (recently acked)
//!   and cancelled sets, and otherwise by asking every reachable node
//!   (a DEPS query, repeated every `QUERY_MS` while unsettled, so a lost
//!   frame only delays). A node asked about a job it holds unsettled
//!   answers "pending" and remembers who asked, telling them as soon as
//!   the job is acknowledged, dead-lettered or cancelled there.
//!
//! When every dependency is met the job is released: the node that took
//! the ADDJOB queues it; the other holders arm their retry timer, as for
//! any job another node queued, and a QUEUED from a holder that released
//! it releases it too. When one fails (dead-lettered, cancelled, or not
//! found anywhere: expired, or acked so long ago that no node remembers)
//! ONFAIL decides: CANCEL the waiting job (the default), DEADLETTER it,
//! or RUN it anyway. The node that took the ADDJOB applies it first; the
//! other holders wait RETRY, as for queueing. A job is never queued
//! before its dependencies are known met (or ONFAIL RUN applied); at worst
//! it waits until its own TTL.
//!
//! "Not found anywhere": no node answered pending, met or failed for
//! `MISSING_MS` while every reachable node, a majority of the cluster,
//! answered "unknown", or the dependency's own TTL (in its ID) passed
//! since this node got the waiting job. A minority cut off from the
//! others never decides it.

use std::collections::{BTreeMap, HashMap};

use bytes::{BufMut, Bytes, BytesMut};

use super::{add_ms, rand250, BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, JobState, NodeIdx, NodeSet, F_BCAST_WILLQUEUE};
use crate::domain::job_ext::{ON_FAIL_DEADLETTER, ON_FAIL_RUN};

/// Unsettled job dependencies are asked about this often.
pub const QUERY_MS: u64 = 1000;
/// With no sign of a dependency for this long (and "unknown" from every
/// reachable node), it counts as missing.
pub const MISSING_MS: u64 = 10_000;
/// Settled outcomes are remembered this long, to answer other holders.
const RESOLVED_KEEP_MS: u64 = 600_000;
/// Most outcomes remembered.
const RESOLVED_CAP: usize = 100_000;
/// A node that asked about a dependency and stopped asking is forgotten
/// after this long.
const WATCH_KEEP_MS: u64 = 30_000;
/// Most dependencies in one DEPS frame.
const MAX_PER_FRAME: usize = 1000;
/// Most dependencies one ADDJOB may name.
pub const MAX_AFTER: usize = 64;

const KIND_QUERY: u8 = 1;
const KIND_ANSWER: u8 = 2;

/// What a node knows of a dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DepState {
    Unknown = 0,
    Pending = 1,
    Acked = 2,
    Dead = 3,
    Cancelled = 4,
    /// Not found anywhere (local verdict only, never sent).
    Missing = 5,
}

impl DepState {
    fn from_u8(v: u8) -> DepState {
        match v {
            1 => DepState::Pending,
            2 => DepState::Acked,
            3 => DepState::Dead,
            4 => DepState::Cancelled,
            _ => DepState::Unknown,
        }
    }

    fn settled(self) -> bool {
        matches!(
            self,
            DepState::Acked | DepState::Dead | DepState::Cancelled | DepState::Missing
        )
    }
}

/// This node's inquiry about one job dependency.
struct Probe {
    /// Last query sent.
    sent: u64,
    /// Since when nothing but "unknown" was heard.
    since: u64,
    /// Nodes that answered "unknown" since `since`.
    unknown_from: NodeSet,
    /// Touched by the last scan (probes nobody needs are dropped).
    used: bool,
}

/// Waiting jobs, inquiries, watchers and remembered outcomes.
#[derive(Default)]
pub struct DepTable {
    /// Waiting jobs held here, with when this node first saw them.
    waiting: BTreeMap<JobId, u64>,
    probes: HashMap<JobId, Probe>,
    /// Dependencies held here unsettled that peers asked about: who
    /// asked, and when last.
    watches: HashMap<JobId, (Vec<NodeIdx>, u64)>,
    /// Outcomes learned from peers, with when.
    resolved: HashMap<JobId, (DepState, u64)>,
    /// Jobs released here (dependencies met, or ONFAIL RUN).
    pub released: u64,
    /// Jobs whose dependency failed here (ONFAIL applied).
    pub failed: u64,
}

/// A dependency as given: a job ID when it has the shape of one,
/// otherwise a batch ID.
pub enum Dep {
    Job(JobId),
    Batch(Bytes),
}

pub fn classify(d: &Bytes) -> Dep {
    match JobId::parse(d) {
        Some(id) => Dep::Job(id),
        None => Dep::Batch(d.clone()),
    }
}

fn encode(kind: u8, items: &[(DepState, JobId)]) -> Bytes {
    let mut out = BytesMut::with_capacity(1 + items.len() * 41);
    out.put_u8(kind);
    for (st, id) in items {
        out.put_u8(*st as u8);
        out.put_slice(id.as_bytes());
    }
    out.freeze()
}

fn decode(data: &Bytes) -> Option<(u8, Vec<(DepState, JobId)>)> {
    let (&kind, rest) = data.split_first()?;
    if rest.is_empty() || rest.len() % 41 != 0 {
        return None;
    }
    let items = rest
        .chunks_exact(41)
        .map(|c| Some((DepState::from_u8(c[0]), JobId::parse(&c[1..])?)))
        .collect::<Option<Vec<_>>>()?;
    Some((kind, items))
}

impl Engine {
    /// Is this job held waiting for its dependencies?
    pub fn is_waiting(&self, h: JobHandle) -> bool {
        self.ext_of(h).is_some_and(|x| x.is_waiting())
    }

    /// Waiting jobs held here.
    pub fn waiting_count(&self) -> usize {
        self.deps.waiting.len()
    }

    /// Waiting jobs held here for `queue`.
    pub fn waiting_in(&self, queue: &[u8]) -> u64 {
        self.deps
            .waiting
            .keys()
            .filter_map(|id| self.lookup(id))
            .filter(|&h| {
                self.store
                    .get(h)
                    .and_then(|j| j.queue.as_deref())
                    .is_some_and(|q| q == queue)
            })
            .count() as u64
    }

    /// Waiting jobs held here, per queue (one pass over them).
    pub fn waiting_per_queue(&self) -> HashMap<Vec<u8>, u64> {
        let mut out: HashMap<Vec<u8>, u64> = HashMap::new();
        for id in self.deps.waiting.keys() {
            let queue = self
                .lookup(id)
                .and_then(|h| self.store.get(h))
                .and_then(|j| j.queue.as_deref());
            if let Some(q) = queue {
                *out.entry(q.to_vec()).or_default() += 1;
            }
        }
        out
    }

    /// (released, failed) counters.
    pub fn after_counters(&self) -> (u64, u64) {
        (self.deps.released, self.deps.failed)
    }

    /// A job was registered: a waiting one gets no requeue timer and is
    /// tracked until settled.
    pub(crate) fn after_registered(&mut self, h: JobHandle) {
        if !self.is_waiting(h) {
            return;
        }
        let Some(j) = self.store.get_mut(h) else {
            return;
        };
        j.qtime = 0;
        j.flags &= !F_BCAST_WILLQUEUE;
        let id = j.id;
        self.deps.waiting.entry(id).or_insert(0);
    }

    /// What this node knows of a job dependency by itself.
    fn dep_local(&self, id: &JobId) -> DepState {
        if self.is_cancelled(id) {
            return DepState::Cancelled;
        }
        if let Some(h) = self.lookup(id) {
            let Some(j) = self.store.get(h) else {
                return DepState::Unknown;
            };
            if j.state == JobState::Acked {
                return DepState::Acked;
            }
            if self.ext_of(h).is_some_and(|x| x.is_dead()) {
                return DepState::Dead;
            }
            return DepState::Pending;
        }
        if self.forgotten.contains(id) {
            return DepState::Acked;
        }
        match self.deps.resolved.get(id) {
            Some(&(st, _)) => st,
            None => DepState::Unknown,
        }
    }

    fn dep_batch(&self, id: &[u8]) -> DepState {
        let Some(b) = self.batch_get(id) else {
            // Every node gets every batch: one not heard of yet will be.
            return DepState::Pending;
        };
        let st = b.status();
        if st.cancelled {
            DepState::Cancelled
        } else if !b.finished() {
            DepState::Pending
        } else if st.dead > 0 {
            DepState::Dead
        } else {
            DepState::Acked
        }
    }

    /// Where a job dependency stands for a job this node first saw
    /// waiting at `since`; sends no message (queries are gathered by the
    /// caller).
    fn dep_verdict(&mut self, id: &JobId, since: u64, now: u64) -> DepState {
        let local = self.dep_local(id);
        if local.settled() {
            return local;
        }
        let size = self.cluster.size();
        if size <= 1 {
            // Nobody else could know of it.
            return if local == DepState::Pending {
                DepState::Pending
            } else {
                DepState::Missing
            };
        }
        // Its TTL passed since we got the waiting job (created after the
        // dependency): it is gone by now, whatever a silent node holds.
        let ttl_ms = u64::from(id.ttl_minutes()) * 60_000;
        if local != DepState::Pending && now >= since + ttl_ms + MISSING_MS {
            return DepState::Missing;
        }
        let probe = self.deps.probes.entry(*id).or_insert(Probe {
            sent: 0,
            since: now,
            unknown_from: NodeSet::default(),
            used: true,
        });
        probe.used = true;
        if local == DepState::Pending {
            probe.since = now;
            return DepState::Pending;
        }
        let everyone = self
            .cluster
            .reachable
            .iter()
            .all(|&n| probe.unknown_from.contains(n));
        let majority = probe.unknown_from.len() + 1 > size / 2;
        if now >= probe.since + MISSING_MS && everyone && majority {
            return DepState::Missing;
        }
        DepState::Pending
    }

    /// Every ~100 ms: tell watchers about settled dependencies, settle
    /// waiting jobs, ask about the unsettled ones.
    pub(crate) fn after_cron(&mut self, now: u64) {
        if !self.deps.watches.is_empty() {
            self.after_watch_cron(now);
        }
        if !self.deps.resolved.is_empty() {
            self.deps
                .resolved
                .retain(|_, (_, t)| now.saturating_sub(*t) < RESOLVED_KEEP_MS);
        }
        if self.deps.waiting.is_empty() {
            self.deps.probes.clear();
            return;
        }
        for p in self.deps.probes.values_mut() {
            p.used = false;
        }
        let ids: Vec<(JobId, u64)> = self.deps.waiting.iter().map(|(k, v)| (*k, *v)).collect();
        for (id, since) in ids {
            let since = if since == 0 {
                self.deps.waiting.insert(id, now);
                now
            } else {
                since
            };
            let h = match self.lookup(&id) {
                Some(h) if self.is_waiting(h) => h,
                Some(h)
                    if self
                        .store
                        .get(h)
                        .is_some_and(|j| j.state == JobState::Acked) =>
                {
                    self.deps.waiting.remove(&id);
                    continue;
                }
                Some(_) | None => {
                    self.deps.waiting.remove(&id);
                    continue;
                }
            };
            // Settled once replicated: the ADDJOB answers first.
            if self
                .store
                .get(h)
                .is_some_and(|j| j.state == JobState::WaitRepl)
            {
                continue;
            }
            let Some(after) = self.ext_of(h).map(|x| x.after.clone()) else {
                continue;
            };
            let mut all_met = true;
            let mut failed = false;
            for d in &after {
                let st = match classify(d) {
                    Dep::Job(dep) => self.dep_verdict(&dep, since, now),
                    Dep::Batch(b) => self.dep_batch(&b),
                };
                match st {
                    DepState::Acked => {}
                    DepState::Dead | DepState::Cancelled | DepState::Missing => {
                        failed = true;
                        all_met = false;
                    }
                    _ => all_met = false,
                }
            }
            if failed {
                // The node that took the ADDJOB decides first (its client
                // may still wait for the replication); the other holders
                // only after RETRY, as they would queue it.
                let mine = id.0[2..10] == self.cluster.my_id()[0..8];
                let retry_ms = self.store.get(h).map_or(0, |j| u64::from(j.retry) * 1000);
                if !mine && now < since.saturating_add(retry_ms) {
                    continue;
                }
                self.after_failed(h, now);
            } else if all_met {
                self.after_release(h, now);
            }
        }
        self.deps.probes.retain(|_, p| p.used);
        // Ask about the unsettled dependencies whose last query is old.
        let due: Vec<(DepState, JobId)> = self
            .deps
            .probes
            .iter_mut()
            .filter(|(_, p)| now.saturating_sub(p.sent) >= QUERY_MS)
            .map(|(id, p)| {
                p.sent = now;
                (DepState::Unknown, *id)
            })
            .collect();
        for chunk in due.chunks(MAX_PER_FRAME) {
            let data = encode(KIND_QUERY, chunk);
            for &n in &self.cluster.reachable.clone() {
                self.out.bus.push((n, BusOut::Deps { data: data.clone() }));
            }
        }
    }

    fn after_watch_cron(&mut self, now: u64) {
        let ids: Vec<JobId> = self.deps.watches.keys().copied().collect();
        let mut tell: HashMap<NodeIdx, Vec<(DepState, JobId)>> = HashMap::new();
        for id in ids {
            let st = self.dep_local(&id);
            let Some((nodes, asked)) = self.deps.watches.get(&id) else {
                continue;
            };
            if st.settled() {
                for &n in nodes {
                    tell.entry(n).or_default().push((st, id));
                }
                self.deps.watches.remove(&id);
            } else if now.saturating_sub(*asked) >= WATCH_KEEP_MS {
                self.deps.watches.remove(&id);
            }
        }
        for (n, items) in tell {
            for chunk in items.chunks(MAX_PER_FRAME) {
                let data = encode(KIND_ANSWER, chunk);
                self.out.bus.push((n, BusOut::Deps { data }));
            }
        }
    }

    /// DEPS frame from a peer.
    pub(crate) fn on_deps(&mut self, from: NodeIdx, data: &Bytes, now: u64) {
        let Some((kind, items)) = decode(data) else {
            return;
        };
        match kind {
            KIND_QUERY => {
                let answers: Vec<(DepState, JobId)> = items
                    .iter()
                    .map(|(_, id)| (self.dep_local(id), *id))
                    .collect();
                for (st, id) in &answers {
                    if *st == DepState::Pending {
                        let w = self.deps.watches.entry(*id).or_default();
                        if !w.0.contains(&from) {
                            w.0.push(from);
                        }
                        w.1 = now;
                    }
                }
                let data = encode(KIND_ANSWER, &answers);
                self.out.bus.push((from, BusOut::Deps { data }));
            }
            KIND_ANSWER => {
                for (st, id) in items {
                    if st.settled() {
                        if self.deps.resolved.len() < RESOLVED_CAP {
                            self.deps.resolved.insert(id, (st, now));
                        }
                        continue;
                    }
                    let Some(p) = self.deps.probes.get_mut(&id) else {
                        continue;
                    };
                    if st == DepState::Pending {
                        p.since = now;
                        p.unknown_from = NodeSet::default();
                    } else {
                        p.unknown_from.insert(from);
                    }
                }
            }
            _ => {}
        }
    }

    /// Mark the job settled here (persisted with it).
    fn after_settle(&mut self, h: JobHandle) -> Option<JobId> {
        let x = self.ext_mut(h)?;
        x.after_done = true;
        let id = self.store.get(h)?.id;
        self.deps.waiting.remove(&id);
        Some(id)
    }

    /// Every dependency met (or ONFAIL RUN): the job may be delivered.
    pub(crate) fn after_release(&mut self, h: JobHandle, now: u64) {
        let Some(id) = self.after_settle(h) else {
            return;
        };
        self.deps.released += 1;
        let mine = id.0[2..10] == self.cluster.my_id()[0..8];
        let jitter = rand250(&mut self.rng);
        let Some(j) = self.store.get_mut(h) else {
            return;
        };
        if j.state == JobState::WaitRepl {
            // Queued when its replication completes.
            j.qtime = now.max(1);
            return;
        }
        let delay_until = (j.ctime / 1_000_000).saturating_add(u64::from(j.delay) * 1000);
        if mine || j.retry == 0 {
            // The node that took the ADDJOB queues it (after its DELAY).
            j.qtime = delay_until.max(now).max(1);
            if j.retry > 0 {
                j.flags |= F_BCAST_WILLQUEUE;
            }
            if delay_until <= now {
                self.cause("after");
                self.enqueue(h, false, now);
            }
        } else {
            // Another holder: queue it only if the first one does not,
            // as for any job queued elsewhere.
            j.qtime = add_ms(delay_until.max(now) + u64::from(j.retry) * 1000, jitter);
            j.flags |= F_BCAST_WILLQUEUE;
        }
        self.update_awake(h, now);
        self.aof_relog(h);
    }

    /// A dependency failed: apply ONFAIL.
    fn after_failed(&mut self, h: JobHandle, now: u64) {
        let policy = self.ext_of(h).map_or(0, |x| x.on_fail);
        if policy == ON_FAIL_RUN {
            self.after_release(h, now);
            return;
        }
        let Some(id) = self.after_settle(h) else {
            return;
        };
        self.deps.failed += 1;
        if policy == ON_FAIL_DEADLETTER {
            self.dead_letter(h, now);
            self.update_awake(h, now);
            self.aof_relog(h);
        } else {
            self.cancel(&[id], now);
        }
    }

    /// A QUEUED or YOURJOBS from another holder for a job waiting here:
    /// that holder released it (it never queues a waiting job).
    pub(crate) fn after_released_elsewhere(&mut self, h: JobHandle, now: u64) {
        if !self.is_waiting(h) {
            return;
        }
        if self.after_settle(h).is_some() {
            self.deps.released += 1;
            if let Some(j) = self.store.get_mut(h) {
                j.qtime = now.max(1);
            }
            self.aof_relog(h);
        }
    }

    /// A later AOF record of a job already loaded says it was released.
    pub(crate) fn after_loaded_done(&mut self, h: JobHandle, done: bool, now: u64) {
        if !done || !self.is_waiting(h) {
            return;
        }
        let _ = self.after_settle(h);
        let jitter = rand250(&mut self.rng);
        if let Some(j) = self.store.get_mut(h) {
            if j.retry > 0 {
                j.qtime = add_ms(now + u64::from(j.retry) * 1000, jitter);
                j.flags |= F_BCAST_WILLQUEUE;
            } else {
                j.qtime = now.max(1);
            }
        }
        self.update_awake(h, now);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use crate::domain::job_ext::{JobExt, ON_FAIL_CANCEL};
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};

    const T0: u64 = 1_800_000_000_000;

    fn add(e: &mut Engine, q: &'static [u8], after: &[JobId], on_fail: u8, now: u64) -> JobId {
        let ext = (!after.is_empty()).then(|| JobExt {
            after: after
                .iter()
                .map(|d| Bytes::copy_from_slice(d.as_bytes()))
                .collect(),
            on_fail,
            ..JobExt::default()
        });
        let req = AddJobRequest {
            replicate: Some(1),
            retry: Some(5),
            ext: ext.map(Box::new),
            ..AddJobRequest::new(Bytes::from_static(q), Bytes::from_static(b"x"))
        };
        match e.addjob(1, req, now) {
            AddJobOutcome::Added(id) => id,
            _ => panic!("addjob"),
        }
    }

    fn run(e: &mut Engine, from: u64, until: u64) {
        let mut t = from;
        while t <= until {
            e.tick(t);
            t += 100;
        }
    }

    #[test]
    fn held_until_the_dependency_is_acked() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        let a = add(&mut e, b"q", &[], 0, T0);
        let b = add(&mut e, b"q", &[a], ON_FAIL_CANCEL, T0);
        assert_eq!(e.queue_len(b"q"), 1);
        let hb = e.lookup(&b).unwrap();
        assert!(e.is_waiting(hb));
        run(&mut e, T0 + 100, T0 + 20_000);
        assert!(e.is_waiting(hb), "still waiting, dependency pending");
        assert_eq!(e.queue_len(b"q"), 1);
        e.ackjob(&[a], T0 + 20_050);
        run(&mut e, T0 + 20_100, T0 + 20_300);
        assert!(!e.is_waiting(hb));
        assert_eq!(e.queue_len(b"q"), 1, "a gone, b queued");
        assert_eq!(e.after_counters(), (1, 0));
    }

    #[test]
    fn a_cancelled_dependency_cancels_by_default_and_runs_with_run() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        let a = add(&mut e, b"q", &[], 0, T0);
        let b = add(&mut e, b"w", &[a], ON_FAIL_CANCEL, T0);
        let c = add(&mut e, b"w", &[a], ON_FAIL_RUN, T0);
        let d = add(&mut e, b"w", &[a], ON_FAIL_DEADLETTER, T0);
        e.cancel(&[a], T0 + 10);
        run(&mut e, T0 + 100, T0 + 300);
        assert!(e.is_cancelled(&b));
        assert!(e.lookup(&c).is_some_and(|h| !e.is_waiting(h)));
        assert_eq!(e.queue_len(b"w"), 1, "only the RUN job is queued");
        assert_eq!(e.queue_len(b"w:dead"), 1, "the DEADLETTER job is dead");
        assert!(e.lookup(&d).is_some());
        assert_eq!(e.after_counters(), (1, 2));
    }

    #[test]
    fn an_unknown_dependency_on_a_single_node_fails_at_once() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        let ghost = JobId::parse(b"D-aaaaaaaa-000000000000000000000000-0001").unwrap();
        let b = add(&mut e, b"w", &[ghost], ON_FAIL_CANCEL, T0);
        run(&mut e, T0 + 100, T0 + 200);
        assert!(e.is_cancelled(&b));
        assert_eq!(e.waiting_count(), 0);
    }

    #[test]
    fn frames_round_trip_and_reject_garbage() {
        let id = JobId::parse(b"D-00000000-000000000000000000000000-0001").unwrap();
        let enc = encode(
            KIND_ANSWER,
            &[(DepState::Acked, id), (DepState::Pending, id)],
        );
        let (k, items) = decode(&enc).unwrap();
        assert_eq!(k, KIND_ANSWER);
        assert_eq!(items, vec![(DepState::Acked, id), (DepState::Pending, id)]);
        assert!(decode(&enc.slice(..enc.len() - 1)).is_none());
        assert!(decode(&Bytes::from_static(b"\x01")).is_none());
        // A state this version does not know reads as unknown.
        let mut raw = enc.to_vec();
        raw[1] = 77;
        assert_eq!(decode(&Bytes::from(raw)).unwrap().1[0].0, DepState::Unknown);
    }
}
