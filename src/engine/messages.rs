//! Job-level bus messages (WIRE 7.4, 9.5, 9.6): replication, queueing
//! coordination, acknowledgement GC, federation and pause propagation —
//! both building outgoing frames from `BusOut` and handling incoming ones.

use bytes::Bytes;

use super::codec::Flavor;
use super::getjob::NeedReason;
use super::gossip::LinkKind;
use super::{add_ms, rand250, BusOut, Engine, JobHandle};
use crate::cluster::message::{Body, Message, MFLAG_INCR_DELIV, MFLAG_INCR_NACKS, MFLAG_NOREPLY};
use crate::job::{JobId, JobState, NodeIdx, F_BCAST_QUEUED, F_BCAST_WILLQUEUE};
use crate::job_codec::JobRecord;
use crate::queue::{PAUSE_IN, PAUSE_OUT};

/// Cap one YOURJOBS frame well below the bus frame limit.
const MAX_YOURJOBS_BYTES: usize = 8 * 1024 * 1024;

impl Engine {
    /// Turn pending job-level messages into frames (serializing jobs now).
    pub fn take_messages(&mut self, now: u64) -> Vec<(NodeIdx, Message)> {
        let bus = std::mem::take(&mut self.out.bus);
        let mut frames = std::mem::take(&mut self.out.frames);
        for (to, m) in bus {
            let (mflags, body) = match m {
                BusOut::ReplJob { job, noreply } => {
                    let Some(h) = self.lookup(&job) else { continue };
                    let Some(rec) = self.job_record(h, Flavor::Message, now) else {
                        continue;
                    };
                    (
                        if noreply { MFLAG_NOREPLY } else { 0 },
                        Body::ReplJob {
                            job: rec.to_bytes(),
                        },
                    )
                }
                BusOut::YourJobs { jobs } => {
                    let recs: Vec<Bytes> = jobs
                        .iter()
                        .filter_map(|id| self.lookup(id))
                        .filter_map(|h| self.job_record(h, Flavor::Message, now))
                        .map(|r| r.to_bytes())
                        .collect();
                    if recs.is_empty() {
                        continue;
                    }
                    (0, Body::YourJobs { jobs: recs })
                }
                BusOut::GotJob { job } => (
                    0,
                    Body::GotJob {
                        job_id: job.0,
                        aux: 0,
                    },
                ),
                BusOut::Enqueue { job, delay } => (
                    0,
                    Body::Enqueue {
                        job_id: job.0,
                        aux: delay,
                    },
                ),
                BusOut::Queued { job, nack, deliv } => {
                    let mut f = 0;
                    if nack {
                        f |= MFLAG_INCR_NACKS;
                    }
                    if deliv {
                        f |= MFLAG_INCR_DELIV;
                    }
                    (
                        f,
                        Body::Queued {
                            job_id: job.0,
                            aux: self.epoch_of(&job),
                        },
                    )
                }
                BusOut::SetAck { job, may_have } => (
                    0,
                    Body::SetAck {
                        job_id: job.0,
                        aux: may_have,
                    },
                ),
                BusOut::WillQueue { job } => (
                    0,
                    Body::WillQueue {
                        job_id: job.0,
                        aux: 0,
                    },
                ),
                BusOut::GotAck { job, known } => (
                    0,
                    Body::GotAck {
                        job_id: job.0,
                        aux: u32::from(known),
                    },
                ),
                BusOut::DelJob { job } => (
                    0,
                    Body::DelJob {
                        job_id: job.0,
                        aux: 0,
                    },
                ),
                BusOut::Working { job, delay } => (
                    0,
                    Body::Working {
                        job_id: job.0,
                        aux: delay,
                    },
                ),
                BusOut::NeedJobs { queue, count } => (0, Body::NeedJobs { count, queue }),
                BusOut::DeadLetter { job, epoch } => (
                    0,
                    Body::DeadLetter {
                        job_id: job.0,
                        aux: epoch,
                    },
                ),
                BusOut::Dedup { entry, window } => (0, Body::Dedup { window, entry }),
                BusOut::QLenReq { queue, req } => (0, Body::QLenReq { req, queue }),
                BusOut::QLenRep { req, len } => (0, Body::QLenRep { req, len }),
                BusOut::Pause { queue, flags } => (
                    0,
                    Body::Pause {
                        flags: u32::from(flags),
                        queue,
                    },
                ),
            };
            frames.push((to, Message::new(self.header(mflags), body)));
        }
        self.cluster.stats_sent += frames.len() as u64;
        frames
    }

    /// Entry point for every bus frame. Returns a reply for the same connection.
    pub fn on_bus_message(
        &mut self,
        link: LinkKind,
        local_ip: &str,
        peer_ip: &str,
        msg: Message,
        now: u64,
    ) -> Option<Message> {
        self.cluster.stats_received += 1;
        if matches!(
            msg.body,
            Body::Ping(_) | Body::Pong(_) | Body::Meet(_) | Body::Fail { .. }
        ) {
            let r = self.on_membership(link, local_ip, peer_ip, &msg, now);
            self.serve_ready(now);
            return r;
        }
        // Job messages only from known nodes.
        let from = self.cluster.find(&msg.header.sender).filter(|&s| s != 0)?;
        let mflags = msg.header.mflags;
        match msg.body {
            Body::ReplJob { job } => self.on_repljob(from, &job, mflags, now),
            Body::GotJob { job_id, .. } => {
                if let Some(h) = self.lookup_raw(&job_id) {
                    self.on_gotjob(h, from, now);
                }
            }
            Body::Enqueue { job_id, aux } => self.on_enqueue_msg(&job_id, aux, now),
            Body::Queued { job_id, aux } if self.queued_epoch_ok(from, &job_id, aux, now) => {
                self.on_queued(from, &job_id, false, mflags, 0, now)
            }
            Body::DeadLetter { job_id, aux } => self.on_deadletter(from, &job_id, aux, now),
            Body::Dedup { window, entry } => self.on_dedup(&entry, window, now),
            Body::QLenReq { req, queue } => self.on_qlen_req(from, req, &queue),
            Body::QLenRep { req, len } => self.on_qlen_rep(from, req, len, now),
            Body::Working { job_id, aux } => self.on_queued(from, &job_id, true, 0, aux, now),
            Body::WillQueue { job_id, .. } => self.on_willqueue(from, &job_id),
            Body::SetAck { job_id, aux } => self.on_setack(from, &job_id, aux, now),
            Body::GotAck { job_id, aux } => self.on_gotack(from, &job_id, aux != 0, now),
            Body::DelJob { job_id, .. } => {
                if let Some(h) = self.lookup_raw(&job_id) {
                    self.delete_job(h, now);
                }
            }
            Body::NeedJobs { count, queue } => self.on_needjobs(from, &queue, count, now),
            Body::YourJobs { jobs } => self.on_yourjobs(from, &jobs, now),
            Body::Pause { flags, queue } => {
                let f = (flags as u8) & (PAUSE_IN | PAUSE_OUT);
                self.set_pause(&queue, f, now);
            }
            _ => {}
        }
        self.serve_ready(now);
        None
    }

    fn lookup_raw(&self, id: &[u8; 40]) -> Option<JobHandle> {
        JobId::parse(id).and_then(|id| self.lookup(&id))
    }

    fn on_repljob(&mut self, from: NodeIdx, blob: &Bytes, mflags: u8, now: u64) {
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
        let ext = super::codec::ext_of_record(&rec);
        let id = job.id;
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

    fn on_enqueue_msg(&mut self, id: &[u8; 40], delay: u32, now: u64) {
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
            if j.qtime == 0 && j.retry == 0 && !j.has(crate::job::F_DELIVERED) {
                j.qtime = now.max(1);
            }
            if delay == 0 {
                j.state = JobState::Active;
            }
        }
        if delay == 0 {
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
    fn on_queued(
        &mut self,
        from: NodeIdx,
        id: &[u8; 40],
        working: bool,
        mflags: u8,
        delay: u32,
        now: u64,
    ) {
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
    }

    /// Job-keyed XOR comparison: does `from` beat this node for the job?
    fn sender_wins(&self, from: NodeIdx, id: &JobId) -> bool {
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

    fn on_willqueue(&mut self, from: NodeIdx, id: &[u8; 40]) {
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

    fn on_setack(&mut self, from: NodeIdx, id: &[u8; 40], may_have: u32, now: u64) {
        let Some(jid) = JobId::parse(id) else { return };
        let Some(h) = self.lookup(&jid) else {
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

    fn on_gotack(&mut self, from: NodeIdx, id: &[u8; 40], known: bool, now: u64) {
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

    fn on_needjobs(&mut self, from: NodeIdx, queue: &[u8], count: u32, now: u64) {
        let Some(qh) = self.queue_handle(queue) else {
            return;
        };
        let Some(q) = self.queues.get(qh) else { return };
        if q.is_empty() || q.fed.import_rate(now) > 0 || q.paused & PAUSE_OUT != 0 {
            return;
        }
        let len = q.len() as u64;
        let mut n = u64::from(count.max(1));
        if len < 2 * n {
            n = len / 2;
        }
        let n = n.max(1);
        let mut ids = Vec::new();
        let mut bytes = 0usize;
        for _ in 0..n {
            let Some(h) = self.pop(qh, now) else { break };
            if let Some(j) = self.store.get(h) {
                ids.push((h, j.id, j.retry));
                bytes += j.body.as_ref().map_or(0, |b| b.len()) + 200;
            }
            if bytes > MAX_YOURJOBS_BYTES {
                break;
            }
        }
        if ids.is_empty() {
            return;
        }
        // `from` now may hold a copy: list it, so requeue coordination and
        // ack GC include it (the record carries the list to `from` too).
        for &(h, _, _) in &ids {
            if let Some(j) = self.store.get_mut(h) {
                j.nodes_delivered.insert(from);
            }
        }
        // Serialize now, then forget at-most-once jobs: they live only at `from`.
        let recs: Vec<Bytes> = ids
            .iter()
            .filter_map(|&(h, _, _)| self.job_record(h, Flavor::Message, now))
            .map(|r| r.to_bytes())
            .collect();
        for &(h, _, retry) in &ids {
            if retry == 0 {
                self.store_remove_silently(h);
            }
        }
        let frame = Message::new(self.header(0), Body::YourJobs { jobs: recs });
        self.out.frames.push((from, frame));
        if self.queues.get(qh).is_some_and(|q| q.is_empty()) {
            self.need_jobs(queue, NeedReason::ReachedZero, now);
        }
    }

    /// Drop a job that moved to another node (no AOF record, no messages).
    fn store_remove_silently(&mut self, h: JobHandle) {
        self.dequeue(h);
        if let Some(j) = self.remove_record(h) {
            if self.aof {
                self.out.aof.push(super::AofRecord::DelJob(j.id));
            }
        }
    }

    fn on_yourjobs(&mut self, from: NodeIdx, blobs: &[Bytes], now: u64) {
        for blob in blobs {
            let Ok((rec, _)) = JobRecord::decode(blob) else {
                continue;
            };
            let Some(id) = JobId::parse(&rec.id) else {
                continue;
            };
            let h = match self.lookup(&id) {
                Some(h) => h,
                None => {
                    let Some(mut job) = self.job_from_record(&rec, Flavor::Message, now) else {
                        continue;
                    };
                    job.nodes_delivered.insert(0);
                    job.nodes_delivered.insert(from);
                    let ext = super::codec::ext_of_record(&rec);
                    let Some(h) = self.register_with(job, ext) else {
                        continue;
                    };
                    h
                }
            };
            let Some(j) = self.store.get_mut(h) else {
                continue;
            };
            j.flags &= !F_BCAST_QUEUED;
            if j.retry == 0 {
                j.qtime = now.max(1);
                j.flags &= !crate::job::F_DELIVERED;
            }
            if j.state == JobState::Queued {
                continue;
            }
            if !self.enqueue(h, false, now) {
                self.update_awake(h, now);
                continue;
            }
            let Some(qname) = self.store.get(h).and_then(|j| j.queue.clone()) else {
                continue;
            };
            let qh = self.queue_create(&qname, now);
            if let Some(q) = self.queues.get_mut(qh) {
                if !q.fed.responders.contains_key(&from) {
                    q.fed.bcast_attempt = 0;
                }
                q.fed.responders.insert(from, now / 1000);
                q.fed.record_import(now);
                q.fed.adhoc_attempt = 0;
            }
        }
    }
}
