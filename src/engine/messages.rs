//! Job-level bus messages: building outgoing frames from `BusOut`, and
//! the dispatch of incoming ones to their handlers, one module per
//! concern: `replication` (REPLJOB), `requeue` (ENQUEUE, QUEUED, WORKING,
//! WILLQUEUE), `acks` (SETACK, GOTACK), `federation` (NEEDJOBS, YOURJOBS).
//! Pause propagation and the extensions' messages are handled inline or in
//! their own engine modules.

mod acks;
mod federation;
mod replication;
mod requeue;

use bytes::Bytes;

use super::gossip::LinkKind;
use super::records::Flavor;
use super::{BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, NodeIdx};
use crate::domain::queue::{PAUSE_IN, PAUSE_OUT};
use crate::protocol::bus::message::{
    Body, JobMsg, Message, MFLAG_CANCELLED, MFLAG_INCR_DELIV, MFLAG_INCR_NACKS, MFLAG_NOREPLY,
    MFLAG_TOTALS,
};

/// Cap one YOURJOBS frame well below the bus frame limit.
pub(super) const MAX_YOURJOBS_BYTES: usize = 8 * 1024 * 1024;

impl Engine {
    /// Turn pending job-level messages into frames (serializing jobs now).
    pub fn take_messages(&mut self, now: u64) -> Vec<(NodeIdx, Message)> {
        let bus = std::mem::take(&mut self.out.bus);
        let mut frames = std::mem::take(&mut self.out.frames);
        frames.reserve(bus.len());
        // A job's REPLJOBs to its replicas are queued one after the other
        // and carry the same record: look the job up and encode it once.
        let mut last_repl: Option<(JobId, Bytes)> = None;
        for (to, m) in bus {
            let (mflags, body) = match m {
                BusOut::ReplJob { job, noreply } => {
                    let blob = match &last_repl {
                        Some((id, blob)) if *id == job => blob.clone(),
                        _ => {
                            let Some(h) = self.lookup(&job) else { continue };
                            let Some(j) = self.store.get(h) else { continue };
                            // Never a record without its body (spilled).
                            if j.body.is_none() && !j.is_dummy() {
                                continue;
                            }
                            let blob = super::records::encode_job(
                                j,
                                self.ext_of(h),
                                &self.cluster,
                                Flavor::Message,
                                now,
                            );
                            last_repl = Some((job, blob.clone()));
                            blob
                        }
                    };
                    (
                        if noreply { MFLAG_NOREPLY } else { 0 },
                        Body::ReplJob { job: blob },
                    )
                }
                BusOut::YourJobs { jobs } => {
                    let recs: Vec<Bytes> = jobs
                        .iter()
                        .filter_map(|id| self.lookup(id))
                        .filter(|&h| self.store.get(h).is_some_and(|j| j.body.is_some()))
                        .filter_map(|h| self.job_record(h, Flavor::Message, now))
                        .map(|r| r.to_bytes())
                        .collect();
                    if recs.is_empty() {
                        continue;
                    }
                    (0, Body::YourJobs { jobs: recs })
                }
                BusOut::GotJob { job } => (0, job_msg(JobMsg::GotJob, &job, 0)),
                BusOut::Enqueue { job, delay } => (0, job_msg(JobMsg::Enqueue, &job, delay)),
                BusOut::Queued { job, nack, deliv } => {
                    let mut f = 0;
                    if nack {
                        f |= MFLAG_INCR_NACKS;
                    }
                    if deliv {
                        f |= MFLAG_INCR_DELIV;
                    }
                    (f, job_msg(JobMsg::Queued, &job, self.epoch_of(&job)))
                }
                BusOut::SetAck { job, may_have } => (
                    if self.is_cancelled(&job) {
                        MFLAG_CANCELLED
                    } else {
                        0
                    },
                    job_msg(JobMsg::SetAck, &job, may_have),
                ),
                BusOut::WillQueue { job } => (0, job_msg(JobMsg::WillQueue, &job, 0)),
                BusOut::GotAck { job, known } => {
                    (0, job_msg(JobMsg::GotAck, &job, u32::from(known)))
                }
                BusOut::DelJob { job } => (0, job_msg(JobMsg::DelJob, &job, 0)),
                BusOut::Working { job, delay } => (0, job_msg(JobMsg::Working, &job, delay)),
                BusOut::NeedJobs { queue, count } => (0, Body::NeedJobs { count, queue }),
                BusOut::DeadLetter { job, epoch } => (0, job_msg(JobMsg::DeadLetter, &job, epoch)),
                BusOut::Cancel { job } => (0, job_msg(JobMsg::Cancel, &job, 0)),
                BusOut::Progress { data } => (0, Body::Progress { data }),
                BusOut::QLimit { data } => (0, Body::QLimit { data }),
                BusOut::Priority { job, level } => {
                    (0, job_msg(JobMsg::Priority, &job, u32::from(level)))
                }
                BusOut::Dedup { entry, window } => (0, Body::Dedup { window, entry }),
                BusOut::Schedule { data } => (0, Body::Schedule { data }),
                BusOut::Batch { data } => (0, Body::Batch { data }),
                BusOut::Deps { data } => (0, Body::Deps { data }),
                BusOut::QLenReq { queue, req } => (0, Body::QLenReq { req, queue }),
                BusOut::QLenRep { req, len } => (0, Body::QLenRep { req, len }),
                BusOut::TotalsReq { req } => (
                    MFLAG_TOTALS,
                    Body::QLenReq {
                        req,
                        queue: Bytes::new(),
                    },
                ),
                BusOut::TotalsRep { req, totals } => (0, Body::QLenTotals { req, totals }),
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

    /// Start loading the ID-index place a REPLJOB's copy will take, so
    /// that a batch's frames prefetched before they run do not each wait
    /// for memory (the index is far larger than the cache: the lookup of
    /// a new copy's ID was the largest user-space item of replication,
    /// 3-4 % of the three nodes' samples).
    pub fn prefetch_message(&self, msg: &Message) {
        if let Body::ReplJob { job } = &msg.body {
            if let Some(id) = crate::protocol::job_codec::peek_id(job) {
                self.store.prefetch_slot(&JobId(*id));
            }
        }
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
        // A replica's periodic WILLQUEUE about a job queued whole on disk,
        // and the SETACK of a copy whole on disk, are answered from the
        // slot; any other message about one waits for it to be read back
        // (`cold`), then runs as if it had never left.
        if self.cold_answer(from, &msg, now) {
            return None;
        }
        let msg = self.cold_park(link, local_ip, peer_ip, msg)?;
        let mflags = msg.header.mflags;
        match msg.body {
            Body::ReplJob { job } => self.on_repljob(from, &job, mflags, now),
            Body::Job {
                kind: JobMsg::GotJob,
                job_id,
                ..
            } => {
                if let Some(h) = self.lookup_raw(&job_id) {
                    self.on_gotjob(h, from, now);
                }
            }
            Body::Job {
                kind: JobMsg::Enqueue,
                job_id,
                aux,
            } => self.on_enqueue_msg(&job_id, aux, now),
            Body::Job {
                kind: JobMsg::Queued,
                job_id,
                aux,
            } if self.queued_epoch_ok(from, &job_id, aux, now) => {
                self.on_queued(from, &job_id, false, mflags, 0, now)
            }
            Body::Job {
                kind: JobMsg::DeadLetter,
                job_id,
                aux,
            } => self.on_deadletter(from, &job_id, aux, now),
            Body::Job {
                kind: JobMsg::Priority,
                job_id,
                aux,
            } => self.on_priority(from, &job_id, aux),
            Body::Job {
                kind: JobMsg::Cancel,
                job_id,
                ..
            } => self.on_cancel(&job_id, now),
            Body::Progress { data } => self.on_progress(&data),
            Body::QLimit { data } => self.on_qlimit(&data),
            Body::Dedup { window, entry } => self.on_dedup(&entry, window, now),
            Body::Schedule { data } => self.on_schedule(&data, now),
            Body::Batch { data } => self.on_batch(&data),
            Body::Deps { data } => self.on_deps(from, &data, now),
            Body::QLenReq { req, .. } if mflags & MFLAG_TOTALS != 0 => {
                self.on_totals_req(from, req)
            }
            Body::QLenReq { req, queue } => self.on_qlen_req(from, req, &queue),
            Body::QLenRep { req, len } => self.on_qlen_rep(from, req, len, now),
            Body::QLenTotals { req, totals } => self.on_totals_rep(from, req, Some(totals)),
            Body::Job {
                kind: JobMsg::Working,
                job_id,
                aux,
            } => self.on_queued(from, &job_id, true, 0, aux, now),
            Body::Job {
                kind: JobMsg::WillQueue,
                job_id,
                ..
            } => self.on_willqueue(from, &job_id),
            Body::Job {
                kind: JobMsg::SetAck,
                job_id,
                aux,
            } => {
                if mflags & MFLAG_CANCELLED != 0 {
                    if let Some(id) = JobId::parse(&job_id) {
                        self.cancelled.insert(&id, now);
                    }
                }
                self.on_setack(from, &job_id, aux, now)
            }
            Body::Job {
                kind: JobMsg::GotAck,
                job_id,
                aux,
            } => self.on_gotack(from, &job_id, aux != 0, now),
            Body::Job {
                kind: JobMsg::DelJob,
                job_id,
                ..
            } => {
                if let Some(id) = JobId::parse(&job_id) {
                    self.forget_acked(&id, now);
                }
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

    /// A message about a job this node does not store: if the job was
    /// acknowledged and forgotten here recently, tell the sender with a
    /// SETACK (so a holder that missed the acknowledgement drops its copy
    /// instead of queueing it again) and return true.
    pub(super) fn answer_forgotten(&mut self, from: NodeIdx, id: &[u8; 40]) -> bool {
        let Some(id) = JobId::parse(id) else {
            return false;
        };
        if self.lookup(&id).is_some() {
            return false;
        }
        self.answer_forgotten_unstored(from, id)
    }

    /// [`answer_forgotten`](Self::answer_forgotten) for a caller that
    /// already looked the job up and did not find it.
    pub(super) fn answer_forgotten_unstored(&mut self, from: NodeIdx, id: JobId) -> bool {
        if !self.forgotten.contains(&id) {
            return false;
        }
        self.out.bus.push((
            from,
            BusOut::SetAck {
                job: id,
                may_have: 0,
            },
        ));
        true
    }

    /// Remember an acknowledged job that this node may not store.
    pub(super) fn forget_acked(&mut self, id: &JobId, now: u64) {
        self.forgotten.insert(id, now);
    }
}

/// A job-id block message.
fn job_msg(kind: JobMsg, job: &JobId, aux: u32) -> Body {
    Body::Job {
        kind,
        job_id: job.0,
        aux,
    }
}
