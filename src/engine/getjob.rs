//! GETJOB: popping jobs across queues, blocking clients on empty queues,
//! serving them when jobs arrive, their timeouts, and the need-jobs hook
//! that asks other nodes for jobs (federation).

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{BusOut, Engine, JobHandle};
use crate::errors::WireError;
use crate::job::{JobState, F_DELIVERED};
use crate::queue::{ClientId, PAUSE_OUT};
use crate::resp::Reply;

/// A client blocked in GETJOB.
pub struct GetWaiter {
    pub queues: Vec<Bytes>,
    pub withcounters: bool,
    /// u64::MAX = forever.
    pub deadline: u64,
    pub tx: oneshot::Sender<Reply>,
}

pub struct GetJobRequest {
    pub nohang: bool,
    /// 0 = forever.
    pub timeout: u64,
    pub count: u64,
    pub withcounters: bool,
    pub queues: Vec<Bytes>,
}

pub enum GetJobOutcome {
    Reply(Reply),
    Blocked(oneshot::Receiver<Reply>),
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

/// Below this many queued jobs an importing queue considers asking ahead
/// (`NeedReason::RunningLow`; the exact threshold is half the batch asked for).
const PREFETCH_BELOW: usize = 50;

impl Engine {
    /// Render a job as GETJOB does: [queue, id, body] (+ counters).
    pub fn job_reply(&self, h: JobHandle, withcounters: bool) -> Reply {
        let Some(j) = self.store.get(h) else {
            return Reply::NullBulk;
        };
        let mut v = Vec::with_capacity(if withcounters { 7 } else { 3 });
        v.push(j.queue.as_deref().map_or(Reply::NullBulk, Reply::bulk));
        v.push(Reply::Bulk(Bytes::copy_from_slice(&j.id.0)));
        v.push(j.body.as_deref().map_or(Reply::NullBulk, Reply::bulk));
        if withcounters {
            v.push(Reply::bulk_str("nacks"));
            v.push(Reply::Integer(i64::from(j.nacks)));
            v.push(Reply::bulk_str("additional-deliveries"));
            v.push(Reply::Integer(i64::from(j.deliv)));
        }
        Reply::Array(v)
    }

    pub fn getjob(&mut self, client: ClientId, req: GetJobRequest, now: u64) -> GetJobOutcome {
        let mut jobs = Vec::new();
        loop {
            let mut taken = 0;
            for name in &req.queues {
                if jobs.len() as u64 >= req.count {
                    break;
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
                        jobs.push(self.job_reply(h, req.withcounters));
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
            return GetJobOutcome::Reply(Reply::Array(jobs));
        }
        if req.nohang {
            return GetJobOutcome::Reply(Reply::NullArray);
        }
        if self.cluster.leaving() {
            return GetJobOutcome::Error(WireError::Leaving);
        }
        let (tx, rx) = oneshot::channel();
        let mut queues: Vec<Bytes> = Vec::with_capacity(req.queues.len());
        for q in req.queues {
            if !queues.contains(&q) {
                queues.push(q);
            }
        }
        for q in &queues {
            let qh = self.queue_create(q, now);
            if let Some(queue) = self.queues.get_mut(qh) {
                queue.blocked.push_back(client);
            }
        }
        let deadline = if req.timeout == 0 {
            u64::MAX
        } else {
            now.saturating_add(req.timeout)
        };
        self.remove_waiter(client);
        self.waiter_timeouts.insert((deadline, client));
        self.waiters.insert(
            client,
            GetWaiter {
                queues,
                withcounters: req.withcounters,
                deadline,
                tx,
            },
        );
        GetJobOutcome::Blocked(rx)
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
        while let Some(name) = self.ready.pop() {
            let Some(qh) = self.queue_handle(&name) else {
                continue;
            };
            while let Some(q) = self.queues.get_mut(qh) {
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
                if w.tx.is_closed() {
                    continue;
                }
                let Some(h) = self.pop(qh, now) else { break };
                let reply = Reply::Array(vec![self.job_reply(h, w.withcounters)]);
                if w.tx.send(reply).is_err() {
                    self.undo_pop(qh, h);
                } else {
                    self.counters.delivered += 1;
                }
                self.after_pop(qh, &name, now);
            }
        }
        while let Some(name) = self.fed_ready.pop() {
            self.serve_demand(&name, now);
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

    /// Put back a job whose receiving client vanished between pop and send.
    fn undo_pop(&mut self, qh: u32, h: JobHandle) {
        if let Some(j) = self.store.get_mut(h) {
            j.state = JobState::Queued;
            j.flags &= !F_DELIVERED;
            let ctime = j.ctime;
            if let Some(q) = self.queues.get_mut(qh) {
                q.insert(ctime, h);
                q.jobs_out = q.jobs_out.saturating_sub(1);
            }
        }
    }

    /// Time out blocked GETJOB clients; kick them when leaving.
    pub fn expire_waiters(&mut self, now: u64) {
        while let Some(&(t, client)) = self.waiter_timeouts.first() {
            // Strictly after the deadline: times are truncated to the ms,
            // so firing at `t == now` could end a wait up to 1 ms early.
            if t >= now {
                break;
            }
            if let Some(w) = self.remove_waiter(client) {
                let _ = w.tx.send(Reply::NullArray);
            } else {
                self.waiter_timeouts.remove(&(t, client));
            }
        }
        if self.cluster.leaving() && !self.waiters.is_empty() {
            let ids: Vec<ClientId> = self.waiters.keys().copied().collect();
            for c in ids {
                if let Some(w) = self.remove_waiter(c) {
                    let _ = w.tx.send(WireError::Leaving.reply());
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
            self.need_jobs(&n, NeedReason::ClientsWaiting, now);
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

    #[test]
    fn getjob_timeout_never_fires_early() {
        let mut e = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, 1000);
        let req = GetJobRequest {
            nohang: false,
            timeout: 300,
            count: 1,
            withcounters: false,
            queues: vec![Bytes::from_static(b"q")],
        };
        let GetJobOutcome::Blocked(mut rx) = e.getjob(7, req, 1000) else {
            panic!("expected to block");
        };
        // 1000 may stand for 1000.9 ms: the deadline itself is too early.
        e.tick(1300);
        assert!(rx.try_recv().is_err());
        assert_eq!(e.blocked_clients(), 1);
        e.tick(1301);
        assert_eq!(rx.try_recv(), Ok(Reply::NullArray));
        assert_eq!(e.blocked_clients(), 0);
    }
}
