//! ADDJOB inside the engine (docs/COMMANDS.md#addjob): validation that needs node state,
//! job creation, the immediate and synchronous replication paths, the
//! replication cron that keeps adding nodes, and "replication achieved"
//! (which wakes the blocked client with `Wake::Added`).

use bytes::Bytes;
use rand::seq::SliceRandom;

use super::{AddWaiter, BusOut, ClientId, Engine, JobHandle, Wake};
use crate::domain::job::{JobId, JobState, NodeSet};
use crate::domain::queue::PAUSE_IN;
use crate::errors::WireError;

pub struct AddJobRequest<B = Bytes> {
    pub queue: B,
    pub body: B,
    /// ms; 0 = wait forever.
    pub timeout: u64,
    pub replicate: Option<u32>,
    pub delay: u32,
    pub retry: Option<u32>,
    pub ttl: Option<u32>,
    pub maxlen: Option<u64>,
    pub asynchronous: bool,
    /// WAIT (our extension): ms to wait for room when the queue is at
    /// MAXLEN, 0 = forever; None = fail at once (Disque).
    pub wait: Option<u64>,
    /// Our extension options (BACKOFF, MAXDELIVERIES, DEADLETTER, DEDUP),
    /// boxed: inline they made every request ~250 bytes larger, copied at
    /// each move of a plain ADDJOB (3 % of its CPU pipelined).
    pub ext: Option<Box<crate::domain::job_ext::JobExt>>,
}

impl<B: AsRef<[u8]>> AddJobRequest<B> {
    /// A request with ADDJOB's defaults: wait forever, no options.
    pub fn new(queue: B, body: B) -> AddJobRequest<B> {
        AddJobRequest {
            queue,
            body,
            timeout: 0,
            replicate: None,
            delay: 0,
            retry: None,
            ttl: None,
            maxlen: None,
            asynchronous: false,
            wait: None,
            ext: None,
        }
    }

    /// The same request owning its queue name and body (a waiting
    /// producer keeps it; the command's arguments may be slices of a large
    /// read buffer, which a long wait would otherwise keep alive).
    pub fn into_owned(self) -> AddJobRequest {
        AddJobRequest {
            queue: Bytes::copy_from_slice(self.queue.as_ref()),
            body: Bytes::copy_from_slice(self.body.as_ref()),
            timeout: self.timeout,
            replicate: self.replicate,
            delay: self.delay,
            retry: self.retry,
            ttl: self.ttl,
            maxlen: self.maxlen,
            asynchronous: self.asynchronous,
            wait: self.wait,
            ext: self.ext,
        }
    }
}

pub enum AddJobOutcome {
    /// The job's ID: created (or, with DEDUP, found) without waiting.
    Added(JobId),
    /// The client waits for replication; its answer comes as a `Wake`
    /// (`Added`, or `Error` with NOREPL).
    Blocked,
    Error(WireError),
}

fn err(e: WireError) -> AddJobOutcome {
    AddJobOutcome::Error(e)
}

impl Engine {
    /// Borrowed or owned arguments alike (`B`): the command layer passes
    /// slices of the request, which saves two reference-count round trips
    /// per ADDJOB.
    pub fn addjob<B: AsRef<[u8]>>(
        &mut self,
        client: ClientId,
        req: AddJobRequest<B>,
        now: u64,
    ) -> AddJobOutcome {
        let ttl = req.ttl.unwrap_or(86400);
        let cluster_size = self.cluster.size() as u32;
        let repl = req.replicate.unwrap_or_else(|| cluster_size.min(3));
        if repl > 1 && req.retry == Some(0) {
            return err(WireError::RetryZeroNeedsReplicateOne);
        }
        if req.delay >= ttl {
            return err(WireError::DelayOverTtl);
        }
        // DEDUP: a known key answers with the first job's ID, adding nothing.
        if let Some(key) = req.ext.as_ref().and_then(|x| x.dedup_key.as_ref()) {
            if let Some(id) = self.dedup_lookup(req.queue.as_ref(), key, now) {
                return AddJobOutcome::Added(id);
            }
        }
        let retry = req.retry.unwrap_or_else(|| (ttl / 10).clamp(1, 300));
        let oom = self.memory_level() >= 1;
        let leaving = self.cluster.leaving();
        let extrepl = oom || leaving;
        let needed = if extrepl { repl } else { repl - 1 };
        // The reachable set is kept current by the cluster cron and by
        // membership changes; recomputing it here allocated per ADDJOB.
        let reachable = self.cluster.reachable.len() as u32;
        if needed > reachable {
            if extrepl && needed - 1 == reachable {
                self.counters.norepl += 1;
                return err(WireError::NoReplCantHold { leaving });
            }
            self.counters.norepl += 1;
            return err(WireError::NoRepl);
        }
        if let (Some(wait), Some(maxlen)) = (req.wait, req.maxlen) {
            // Arrival order: never overtake a producer already waiting.
            if self.producers_ahead(req.queue.as_ref()) {
                return self.producer_block(client, req, maxlen, wait, now);
            }
        }
        let qh = self.queue_handle(req.queue.as_ref());
        if let Some(q) = qh.and_then(|h| self.queues.get(h)) {
            if let Some(maxlen) = req.maxlen {
                if q.len() as u64 >= maxlen {
                    if let Some(wait) = req.wait {
                        return self.producer_block(client, req, maxlen, wait, now);
                    }
                    return err(WireError::MaxlenReached);
                }
            }
            if q.paused & PAUSE_IN != 0 {
                return err(WireError::PausedInput);
            }
        }

        self.counters.added += 1;
        let myid = self.cluster.my_id();
        let (ttl64, retry64) = (u64::from(ttl), u64::from(retry));
        let id = match self.next_id.take() {
            Some(id) if id.fits(&myid, ttl64, retry64) => id,
            _ => JobId::generate(&myid, ttl64, retry64, &mut self.rng),
        };
        // The next ADDJOB's ID, made one command ahead (assuming the same
        // TTL and retry, as a producer usually sends) so that the ID-index
        // slot it will take is in cache by then: that slot is a cache miss
        // nearly every time in a large table.
        let next = JobId::generate(&myid, ttl64, retry64, &mut self.rng);
        self.store.prefetch_slot(&next);
        self.next_id = Some(next);
        let mut job = Engine::new_job(id);
        job.state = JobState::WaitRepl;
        job.repl = repl as u16;
        job.etime = ((now / 1000) + u64::from(ttl)).min(u64::from(u32::MAX)) as u32;
        job.ctime = self.next_ctime(now);
        job.delay = req.delay;
        job.retry = retry;
        job.qtime = if req.delay > 0 {
            now + u64::from(req.delay) * 1000
        } else {
            now + u64::from(retry) * 1000
        };
        job.queue = Some(match qh.and_then(|h| self.queues.get(h)) {
            Some(q) => q.shared_name.clone(),
            None => crate::domain::job::QueueName::from(req.queue.as_ref()),
        });
        // Own allocation: the argument may be a slice of a large read buffer.
        job.body = Some(crate::domain::job::Body::from(req.body.as_ref()));
        if !extrepl {
            job.nodes_delivered.insert(0);
        }
        let discard = req.asynchronous && extrepl;

        if (repl > 1 || extrepl) && !req.asynchronous {
            let confirmed = if extrepl {
                NodeSet::default()
            } else {
                NodeSet::from_slice(&[0])
            };
            let deadline = if req.timeout == 0 {
                u64::MAX
            } else {
                now.saturating_add(req.timeout)
            };
            let Some(h) = self.register_with(job, req.ext.as_deref().cloned()) else {
                return err(WireError::InternalCreate);
            };
            self.confirmed.insert(h, confirmed);
            self.adders.insert(
                h,
                AddWaiter {
                    client,
                    deadline,
                    last_add: now,
                },
            );
            self.add_timeouts.insert((deadline, h));
            self.add_waiting += 1;
            self.update_awake(h, now);
            self.add_replication_targets(h, needed as usize, false);
            return AddJobOutcome::Blocked;
        }

        // Immediate path.
        let delay = job.delay;
        let Some(h) = self.register_with(job, req.ext.as_deref().cloned()) else {
            return err(WireError::InternalCreate);
        };
        if discard {
            // Out of memory or leaving: hand the job to its replicas.
            if let Some(j) = self.store.get_mut(h) {
                j.state = JobState::Active;
            }
            self.add_replication_targets(h, repl as usize, false);
            self.async_track(h, repl as usize, true, now);
            return AddJobOutcome::Added(id);
        }
        {
            if let Some(j) = self.store.get_mut(h) {
                j.state = JobState::Active;
            }
            let queued = delay == 0 && !extrepl && {
                self.cause("addjob");
                self.enqueue(h, false, now)
            };
            // A queued job was scheduled by `enqueue`.
            if !queued {
                self.update_awake(h, now);
            }
            if !extrepl {
                self.aof_loadjob(h);
            }
            self.dedup_commit(h, now);
            self.batch_member_added(h);
            if needed > 0 {
                // GOTJOBs asked for: the copies are confirmed (async_repl).
                self.add_replication_targets(h, needed as usize, false);
                self.async_track(h, needed as usize, false, now);
            }
        }
        AddJobOutcome::Added(id)
    }

    /// Add `n` random reachable linked nodes to nodes_delivered and send them REPLJOB.
    pub(super) fn add_replication_targets(
        &mut self,
        h: JobHandle,
        n: usize,
        noreply: bool,
    ) -> usize {
        let Some(j) = self.store.get(h) else { return 0 };
        let mut candidates: Vec<u32> = self
            .cluster
            .reachable
            .iter()
            .copied()
            .filter(|&i| {
                self.cluster.get(i).is_some_and(|node| node.link) && !j.nodes_delivered.contains(i)
            })
            .collect();
        candidates.shuffle(&mut self.rng);
        candidates.truncate(n);
        let id = j.id;
        if let Some(j) = self.store.get_mut(h) {
            for &c in &candidates {
                j.nodes_delivered.insert(c);
            }
        }
        for &c in &candidates {
            self.out.bus.push((c, BusOut::ReplJob { job: id, noreply }));
        }
        candidates.len()
    }

    /// Every ~100 ms: for each blocked ADDJOB, add one more node every 50 ms
    /// and resend REPLJOB to the holders that did not confirm yet.
    pub fn replication_cron(&mut self, now: u64) {
        if self.add_waiting == 0 {
            return;
        }
        self.cluster.refresh_reachable();
        let pending: Vec<JobHandle> = self.add_timeouts.iter().map(|&(_, h)| h).collect();
        for h in pending {
            let Some(w) = self.adders.get(&h) else {
                continue;
            };
            if now.saturating_sub(w.last_add) < 50 {
                continue;
            }
            let added = self.add_replication_targets(h, 1, false);
            if let Some(w) = self.adders.get_mut(&h) {
                w.last_add = now;
            }
            let Some(j) = self.store.get(h) else {
                continue;
            };
            let id = j.id;
            let confirmed: Vec<u32> = self
                .confirmed
                .get(&h)
                .map(|c| c.iter().collect())
                .unwrap_or_default();
            let holders: Vec<u32> = j.nodes_delivered.iter().filter(|&n| n != 0).collect();
            for n in holders {
                if !confirmed.contains(&n) {
                    self.out.bus.push((
                        n,
                        BusOut::ReplJob {
                            job: id,
                            noreply: false,
                        },
                    ));
                } else if added > 0 {
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

    /// GOTJOB from `from` for a wait-repl job.
    pub fn on_gotjob(&mut self, h: JobHandle, from: u32, now: u64) {
        let Some(j) = self.store.get_mut(h) else {
            return;
        };
        if j.state != JobState::WaitRepl {
            self.async_confirmed(h, from);
            return;
        }
        let repl = usize::from(j.repl);
        let confirmed = self.confirmed.entry(h).or_default();
        confirmed.insert(from);
        if confirmed.len() >= repl {
            self.replication_achieved(h, now);
        }
    }

    /// The requested replication level was reached: reply and go active.
    /// Returns false if the job was handed off and deleted locally.
    pub fn replication_achieved(&mut self, h: JobHandle, now: u64) -> bool {
        let Some(j) = self.store.get_mut(h) else {
            return false;
        };
        j.state = JobState::Active;
        let id = j.id;
        let delay = j.delay;
        let local = j.nodes_delivered.contains(0);
        let created_ms = j.ctime / 1_000_000;
        // Only an externally replicated job needs the list (to pick who
        // queues it); the common case skips the allocation.
        let confirmed: Vec<u32> = if local {
            Vec::new()
        } else {
            self.confirmed
                .get(&h)
                .map(|c| c.iter().collect())
                .unwrap_or_default()
        };
        self.dedup_commit(h, now);
        self.batch_member_added(h);
        if let Some(w) = self.adders.remove(&h) {
            self.counters
                .repl_latency
                .observe(now.saturating_sub(created_ms));
            self.finish_add_waiter(h, w, Wake::Added(id));
        }
        if !local {
            let targets: Vec<u32> = confirmed.into_iter().filter(|&n| n != 0).collect();
            if let Some(&t) = targets.choose(&mut self.rng) {
                self.out.bus.push((t, BusOut::Enqueue { job: id, delay }));
            }
            self.remove_record(h);
            return false;
        }
        self.confirmed.remove(&h);
        if delay == 0 {
            self.cause("addjob");
            self.enqueue(h, false, now);
        }
        self.update_awake(h, now);
        self.aof_loadjob(h);
        true
    }
}
