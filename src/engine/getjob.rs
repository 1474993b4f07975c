//! GETJOB: popping jobs across queues, blocking clients on empty queues,
//! serving them when jobs arrive, their timeouts, and the need-jobs hook
//! that asks other nodes for jobs (federation). A blocked client is
//! served with `Wake::Jobs`; jobs its shell could not hand over come back
//! through `hand_back`.

use bytes::Bytes;

use super::{BusOut, ClientId, DeliveredJob, Engine, Wake};
use crate::domain::job::{JobId, JobState, F_DELIVERED};
use crate::domain::queue::PAUSE_OUT;
use crate::errors::WireError;

/// A client blocked in GETJOB.
pub struct GetWaiter {
    pub queues: Vec<Bytes>,
    pub withcounters: bool,
    /// u64::MAX = forever.
    pub deadline: u64,
}

/// `Q` is how the queue names are held: borrowed from the request when a
/// client sends one (copied only if it blocks), owned elsewhere.
pub struct GetJobRequest<Q = Bytes> {
    pub nohang: bool,
    /// 0 = forever.
    pub timeout: u64,
    pub count: u64,
    pub withcounters: bool,
    pub queues: Vec<Q>,
}

pub enum GetJobOutcome {
    /// Jobs found at once, in delivery order.
    Jobs(Vec<DeliveredJob>),
    /// NOHANG and nothing to take (nothing on its way back from disk
    /// either).
    NoJobs,
    /// The client waits; its answer comes as a `Wake` (`Jobs`, `NoJobs`
    /// at the timeout, or `Error`).
    Blocked,
    Error(WireError),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum NeedReason {
    ClientsWaiting,
    ReachedZero,
    /// Importing, clients consuming, and the queue is nearly empty: ask the
    /// nodes that answered recently for the next batch now, so it arrives
    /// before the consumers find the queue empty (one outstanding ask).
    RunningLow,
}

/// The longest a GETJOB NOHANG waits for a queue head on its way back
/// from disk (a read takes well under 10 ms; this bounds a failing disk).
pub const NOHANG_DISK_WAIT_MS: u64 = 250;

/// Below this many queued jobs an importing queue considers asking ahead
/// (`NeedReason::RunningLow`; the exact threshold is half the batch asked for).
const PREFETCH_BELOW: usize = 50;

impl<Q> GetJobRequest<Q> {
    /// The same options over other queues.
    pub fn with_queues<R>(self, queues: Vec<R>) -> GetJobRequest<R> {
        GetJobRequest {
            nohang: self.nohang,
            timeout: self.timeout,
            count: self.count,
            withcounters: self.withcounters,
            queues,
        }
    }
}

impl Engine {
    pub fn getjob<Q: AsRef<[u8]>>(
        &mut self,
        client: ClientId,
        req: GetJobRequest<Q>,
        now: u64,
    ) -> GetJobOutcome {
        let mut jobs = Vec::new();
        loop {
            let mut taken = 0;
            for name in &req.queues {
                let name = name.as_ref();
                if jobs.len() as u64 >= req.count {
                    break;
                }
                // A queue over its QLIMIT is skipped: the client is
                // served by its other queues, and importing jobs would
                // not help.
                if !self.limit_allows(name, now) {
                    continue;
                }
                let qh = self.queue_handle(name);
                let popped = match qh {
                    Some(qh)
                        if self
                            .queues
                            .get(qh)
                            .is_some_and(|q| q.paused & PAUSE_OUT == 0) =>
                    {
                        self.pop(qh, now).map(|h| (qh, h))
                    }
                    _ => None,
                };
                match popped {
                    Some((qh, h)) => {
                        let before = jobs.len();
                        jobs.extend(self.delivered(h, req.withcounters));
                        if let Some(j) = jobs.get(before) {
                            let id = j.id;
                            self.limit_record(name, id, now);
                        }
                        taken += 1;
                        self.after_pop(qh, name, now);
                    }
                    None => self.need_jobs(name, NeedReason::ClientsWaiting, now),
                }
            }
            if taken == 0 || jobs.len() as u64 >= req.count {
                break;
            }
        }
        if !jobs.is_empty() {
            self.counters.delivered += jobs.len() as u64;
            return GetJobOutcome::Jobs(jobs);
        }
        let deadline = if req.nohang {
            // Jobs queued but with their head on its way back from disk
            // (spill tier) are not "no jobs": NOHANG waits for the read,
            // as any command waits for its own I/O, bounded in case the
            // disk fails.
            if self.cluster.leaving() || !self.heads_on_disk(&req.queues, now) {
                return GetJobOutcome::NoJobs;
            }
            now.saturating_add(NOHANG_DISK_WAIT_MS)
        } else if self.cluster.leaving() {
            return GetJobOutcome::Error(WireError::Leaving);
        } else if req.timeout == 0 {
            u64::MAX
        } else {
            now.saturating_add(req.timeout)
        };
        let mut queues: Vec<Bytes> = Vec::with_capacity(req.queues.len());
        for q in &req.queues {
            let q = q.as_ref();
            if !queues.iter().any(|have| have == q) {
                queues.push(Bytes::copy_from_slice(q));
            }
        }
        for q in &queues {
            let qh = self.queue_create(q, now);
            if let Some(queue) = self.queues.get_mut(qh) {
                queue.blocked.push_back(client);
            }
        }
        self.remove_waiter(client);
        self.waiter_timeouts.insert((deadline, client));
        self.waiters.insert(
            client,
            GetWaiter {
                queues,
                withcounters: req.withcounters,
                deadline,
            },
        );
        GetJobOutcome::Blocked
    }

    /// After a pop found nothing: whether one of `queues` has jobs it may
    /// hand out but its head is on disk, being read back (a queue that is
    /// empty, paused for consumers or over its QLIMIT has nothing coming).
    fn heads_on_disk<Q: AsRef<[u8]>>(&mut self, queues: &[Q], now: u64) -> bool {
        if !self.spill_holds_jobs() {
            return false;
        }
        for name in queues {
            let name = name.as_ref();
            let waiting = self
                .queue_handle(name)
                .and_then(|qh| self.queues.get(qh))
                .is_some_and(|q| !q.is_empty() && q.paused & PAUSE_OUT == 0);
            if waiting && self.limit_allows(name, now) {
                return true;
            }
        }
        false
    }

    /// Unregister a blocked client from all its queues.
    pub fn remove_waiter(&mut self, client: ClientId) -> Option<GetWaiter> {
        self.take_waiter(client, None)
    }

    /// `remove_waiter`, except for the queue `unlisted`, whose blocked list
    /// the caller already took the client from.
    fn take_waiter(&mut self, client: ClientId, unlisted: Option<&[u8]>) -> Option<GetWaiter> {
        let w = self.waiters.remove(&client)?;
        self.waiter_timeouts.remove(&(w.deadline, client));
        for q in &w.queues {
            if unlisted == Some(&q[..]) {
                continue;
            }
            if let Some(qh) = self.queue_handle(q) {
                if let Some(queue) = self.queues.get_mut(qh) {
                    queue.blocked.retain(|&c| c != client);
                }
            }
        }
        Some(w)
    }

    /// Serve clients blocked on queues that received jobs. Call after every
    /// command, bus message and tick.
    pub fn serve_ready(&mut self, now: u64) {
        self.limits_poll(now);
        while let Some(name) = self.ready.pop() {
            let Some(qh) = self.queue_handle(&name) else {
                continue;
            };
            loop {
                // Waiters stay blocked while the head (or an older job of
                // the queue) is on disk; its read marks the queue ready
                // again. Over its QLIMIT: `limits_poll` marks it ready again.
                if !self.head_ready(qh) || !self.limit_allows(&name, now) {
                    break;
                }
                let Some(q) = self.queues.get_mut(qh) else {
                    break;
                };
                if q.is_empty() || q.paused & PAUSE_OUT != 0 {
                    break;
                }
                let Some(client) = q.blocked.pop_front() else {
                    break;
                };
                // Already off this queue's list: only its other queues
                // (if any) are searched for it. None: a stale entry.
                let Some(w) = self.take_waiter(client, Some(&name[..])) else {
                    continue;
                };
                // Unreachable (the queue is not empty), but a waiter taken
                // off every list must get its one wake.
                let Some(h) = self.pop(qh, now) else {
                    self.wake(client, Wake::NoJobs);
                    break;
                };
                let job = self.delivered(h, w.withcounters);
                if let Some(j) = &job {
                    let id = j.id;
                    self.limit_record(&name, id, now);
                }
                self.counters.delivered += 1;
                self.wake(client, Wake::Jobs(job.into_iter().collect()));
                self.after_pop(qh, &name, now);
            }
        }
        while let Some(name) = self.fed_ready.pop() {
            self.serve_demand(&name, now);
        }
        // Producers waiting for room: served after the consumers (whose
        // pops free the slots); their jobs may serve consumers in turn.
        if self.producers.has_room() {
            self.serve_producers(now);
            if !self.ready.is_empty() || !self.fed_ready.is_empty() || self.producers.has_room() {
                self.serve_ready(now);
            }
        }
    }

    /// After a delivery: ask other nodes for jobs when the queue ran dry,
    /// or, while importing, when it is about to.
    fn after_pop(&mut self, qh: u32, name: &[u8], now: u64) {
        let Some(q) = self.queues.get(qh) else { return };
        if q.is_empty() {
            self.need_jobs(name, NeedReason::ReachedZero, now);
        } else if q.len() < PREFETCH_BELOW && q.fed.last_import != 0 {
            self.need_jobs(name, NeedReason::RunningLow, now);
        }
    }

    /// Jobs of a `Wake::Jobs` whose client left before the shell could
    /// hand them over: queued again where they were (as if never popped)
    /// and offered to the next blocked client. Jobs that changed since
    /// (acknowledged, deleted, queued again by a later command of the same
    /// call) are left as they are.
    pub fn hand_back(&mut self, ids: &[JobId], now: u64) {
        for id in ids {
            let Some(h) = self.lookup(id) else { continue };
            let Some(j) = self.store.get_mut(h) else {
                continue;
            };
            if j.state != JobState::Active {
                continue;
            }
            let Some(qh) = j
                .queue
                .as_deref()
                .and_then(|n| self.queue_index.get(n).copied())
            else {
                continue;
            };
            j.state = JobState::Queued;
            j.flags &= !F_DELIVERED;
            let ctime = j.ctime;
            let has_ext = j.has(crate::domain::job::F_EXT);
            let level = self.level_of(has_ext, h);
            self.counters.delivered = self.counters.delivered.saturating_sub(1);
            if let Some(q) = self.queues.get_mut(qh) {
                q.insert_prio(level, ctime, h);
                q.jobs_out = q.jobs_out.saturating_sub(1);
                if !q.blocked.is_empty() && q.paused & PAUSE_OUT == 0 {
                    self.ready.push(q.name.clone());
                }
            }
        }
        self.serve_ready(now);
    }

    /// Time out blocked GETJOB clients; kick them when leaving.
    pub fn expire_waiters(&mut self, now: u64) {
        while let Some(&(t, client)) = self.waiter_timeouts.first() {
            // Strictly after the deadline: times are truncated to the ms,
            // so firing at `t == now` could end a wait up to 1 ms early.
            if t >= now {
                break;
            }
            if self.remove_waiter(client).is_some() {
                self.wake(client, Wake::NoJobs);
            } else {
                self.waiter_timeouts.remove(&(t, client));
            }
        }
        if self.cluster.leaving() && !self.waiters.is_empty() {
            let ids: Vec<ClientId> = self.waiters.keys().copied().collect();
            for c in ids {
                if self.remove_waiter(c).is_some() {
                    self.wake(c, Wake::Error(WireError::Leaving));
                }
            }
        }
    }

    /// Ask other nodes for jobs of this queue (NEEDJOBS).
    pub fn need_jobs(&mut self, name: &[u8], reason: NeedReason, now: u64) {
        if self.cluster.leaving() {
            return;
        }
        let qh = self.queue_create(name, now);
        // Alone there is nobody to ask (the queue is still created, as
        // Disque does, for its statistics). This runs every time a queue
        // drains and for every GETJOB that blocks.
        if self.cluster.known() <= 1 {
            return;
        }
        let Some(q) = self.queues.get_mut(qh) else {
            return;
        };
        let rate = q.fed.import_rate(now);
        if reason != NeedReason::ClientsWaiting && rate == 0 {
            return;
        }
        let now_s = now / 1000;
        q.fed
            .responders
            .retain(|_, &mut t| now_s.saturating_sub(t) <= 5);
        let nresp = q.fed.responders.len() as u64;
        let want = rate.checked_div(nresp).map_or(5, |r| r.clamp(5, 100)) as u32;
        let mut sends = Vec::new();
        let adhoc_delay = (25u64 << q.fed.adhoc_attempt.min(7)).min(2000);
        if reason == NeedReason::RunningLow {
            let answered = q.fed.last_import >= q.fed.adhoc_time;
            let stale = now.saturating_sub(q.fed.adhoc_time) > adhoc_delay;
            if nresp == 0 || q.len() as u64 > u64::from(want / 2) || !(answered || stale) {
                return;
            }
        }
        let bcast_delay = (2000u64 << q.fed.bcast_attempt.min(5)).min(30_000);
        // Peers are listed only when a broadcast is due: this function runs
        // every time a local queue drains, federated or not.
        let peers = if reason != NeedReason::RunningLow
            && now.saturating_sub(q.fed.bcast_time) > bcast_delay
        {
            self.cluster.linked_peers()
        } else {
            Vec::new()
        };
        if !peers.is_empty() {
            q.fed.bcast_time = now;
            q.fed.bcast_attempt = q.fed.bcast_attempt.saturating_add(1);
            for &p in &peers {
                sends.push((p, 1));
            }
        }
        if (reason != NeedReason::ClientsWaiting
            || now.saturating_sub(q.fed.adhoc_time) > adhoc_delay)
            && nresp > 0
        {
            q.fed.adhoc_time = now;
            q.fed.adhoc_attempt = q.fed.adhoc_attempt.saturating_add(1);
            for &p in q.fed.responders.keys() {
                sends.push((p, want));
            }
        }
        let qname = q.name.clone();
        for (p, count) in sends {
            self.out.bus.push((
                p,
                BusOut::NeedJobs {
                    queue: qname.clone(),
                    count,
                },
            ));
        }
    }

    /// Cron part of blocking: keep asking for jobs for blocked clients.
    pub fn waiters_cron(&mut self, now: u64) {
        if self.waiters.is_empty() {
            return;
        }
        let mut names: Vec<Bytes> = self
            .waiters
            .values()
            .flat_map(|w| w.queues.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        for n in names {
            // Jobs imported into a queue over its QLIMIT would wait here
            // while other nodes' consumers could take them.
            if self.limit_allows(&n, now) {
                self.need_jobs(&n, NeedReason::ClientsWaiting, now);
            }
        }
    }
}

impl Engine {
    /// Replace a queue's pause flags (creating it when setting non-zero
    /// flags); lifting `out` wakes blocked clients.
    pub fn set_pause(&mut self, name: &[u8], flags: u8, now: u64) {
        let qh = match self.queue_handle(name) {
            Some(h) => h,
            None if flags == 0 => return,
            None => self.queue_create(name, now),
        };
        if let Some(q) = self.queues.get_mut(qh) {
            let was_out = q.paused & PAUSE_OUT != 0;
            q.paused = flags;
            if was_out && flags & PAUSE_OUT == 0 && !q.is_empty() && !q.blocked.is_empty() {
                self.ready.push(q.name.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};

    fn engine() -> Engine {
        Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, 1000)
    }

    fn blocking(timeout: u64, withcounters: bool) -> GetJobRequest {
        GetJobRequest {
            nohang: false,
            timeout,
            count: 1,
            withcounters,
            queues: vec![Bytes::from_static(b"q")],
        }
    }

    fn add(e: &mut Engine, body: &'static [u8], now: u64) -> JobId {
        let req = AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from_static(body));
        let AddJobOutcome::Added(id) = e.addjob(99, req, now) else {
            panic!("ADDJOB did not add");
        };
        e.serve_ready(now);
        id
    }

    #[test]
    fn getjob_timeout_never_fires_early() {
        let mut e = engine();
        assert!(matches!(
            e.getjob(7, blocking(300, false), 1000),
            GetJobOutcome::Blocked
        ));
        // 1000 may stand for 1000.9 ms: the deadline itself is too early.
        e.tick(1300);
        assert!(e.take_wakes().is_empty());
        assert_eq!(e.blocked_clients(), 1);
        e.tick(1301);
        assert_eq!(e.take_wakes(), vec![(7, Wake::NoJobs)]);
        assert_eq!(e.blocked_clients(), 0);
    }

    #[test]
    fn a_blocked_client_is_woken_with_the_job_copied_out() {
        let mut e = engine();
        assert!(matches!(
            e.getjob(7, blocking(0, true), 1000),
            GetJobOutcome::Blocked
        ));
        let id = add(&mut e, b"body", 1001);
        let wakes = e.take_wakes();
        let [(7, Wake::Jobs(jobs))] = &wakes[..] else {
            panic!("unexpected wakes {wakes:?}");
        };
        let [job] = &jobs[..] else {
            panic!("one job expected: {jobs:?}");
        };
        assert_eq!(job.id, id);
        assert_eq!(job.queue.as_deref(), Some(&b"q"[..]));
        assert_eq!(job.body.as_deref(), Some(&b"body"[..]));
        assert_eq!(job.counters, Some((0, 0)));
        assert_eq!(e.counters().delivered, 1);
        assert_eq!(e.queue_len(b"q"), 0);
    }

    #[test]
    fn jobs_handed_back_go_to_the_next_waiter_or_the_queue() {
        let mut e = engine();
        for client in [7, 8] {
            assert!(matches!(
                e.getjob(client, blocking(0, false), 1000),
                GetJobOutcome::Blocked
            ));
        }
        let id = add(&mut e, b"b", 1001);
        let wakes = e.take_wakes();
        assert!(
            matches!(&wakes[..], [(7, Wake::Jobs(j))] if j.len() == 1 && j[0].id == id),
            "{wakes:?}"
        );
        // Client 7 vanished before its reply went out: the job goes to 8.
        e.hand_back(&[id], 1002);
        let wakes = e.take_wakes();
        assert!(
            matches!(&wakes[..], [(8, Wake::Jobs(j))] if j.len() == 1 && j[0].id == id),
            "{wakes:?}"
        );
        assert_eq!(e.counters().delivered, 1);
        // Client 8 vanished too: with nobody waiting, the job is queued
        // again, never delivered.
        e.hand_back(&[id], 1003);
        assert!(e.take_wakes().is_empty());
        assert_eq!(e.queue_len(b"q"), 1);
        assert_eq!(e.counters().delivered, 0);
        let h = e.lookup(&id).expect("job kept");
        let j = e.job(h).expect("job kept");
        assert_eq!(j.state, JobState::Queued);
        assert!(!j.has(F_DELIVERED));
        // A job that changed meanwhile (here acknowledged) stays as it is.
        let GetJobOutcome::Jobs(got) = e.getjob(
            9,
            GetJobRequest {
                nohang: true,
                ..blocking(0, false)
            },
            1004,
        ) else {
            panic!("job not queued");
        };
        assert_eq!(got.len(), 1);
        e.ackjob(&[id], 1005);
        e.hand_back(&[id], 1006);
        assert_eq!(e.queue_len(b"q"), 0);
    }

    #[test]
    fn leaving_and_flushall_end_every_wait() {
        let mut e = engine();
        assert!(matches!(
            e.getjob(7, blocking(0, false), 1000),
            GetJobOutcome::Blocked
        ));
        e.flushall(1001);
        assert_eq!(e.take_wakes(), vec![(7, Wake::NoJobs)]);
        assert!(matches!(
            e.getjob(8, blocking(0, false), 1002),
            GetJobOutcome::Blocked
        ));
        e.set_leaving(true);
        e.tick(1003);
        assert_eq!(e.take_wakes(), vec![(8, Wake::Error(WireError::Leaving))]);
        assert_eq!(e.blocked_clients(), 0);
    }
}
