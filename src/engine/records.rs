//! Converting jobs to and from their serialized form (`job_codec`): the
//! "message" flavour for the bus (relative expire time, DELIVERED cleared)
//! and the "storage" flavour for the AOF (absolute, state kept).

use bytes::Bytes;

use super::{add_ms, rand250, Engine, JobHandle};
use crate::domain::job::{
    Job, JobId, JobState, NodeSet, QueueName, F_BCAST_WILLQUEUE, F_DELIVERED, F_EXT,
};
use crate::domain::job_ext::JobExt;
use crate::protocol::job_codec::{JobRecord, RawNodes, RecordRef};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    Message,
    Storage,
}

impl Engine {
    pub fn job_record(&self, h: JobHandle, flavor: Flavor, now: u64) -> Option<JobRecord> {
        let j = self.store.get(h)?;
        Some(record_of(j, self.ext_of(h), &self.cluster, flavor, now))
    }

    /// Build a job from a record. Unknown node IDs are dropped.
    pub fn job_from_record(&mut self, r: &JobRecord, flavor: Flavor, now: u64) -> Option<Job> {
        self.job_from_ref(&r.as_ref(), flavor, now, None)
    }

    /// [`job_from_record`](Self::job_from_record) from a borrowed record;
    /// `queue` is the queue's shared name when the caller already found the
    /// queue (saves allocating the name once per job).
    pub fn job_from_ref(
        &mut self,
        r: &RecordRef<'_, RawNodes<'_>>,
        flavor: Flavor,
        now: u64,
        queue: Option<QueueName>,
    ) -> Option<Job> {
        let id = JobId::parse(r.id)?;
        let mut job = Engine::new_job(id);
        let now_s = now / 1000;
        match flavor {
            Flavor::Message => {
                job.state = JobState::Active;
                job.etime = (now_s + u64::from(r.etime)).min(u64::from(u32::MAX)) as u32;
                job.flags = r.flags & !(F_DELIVERED | F_EXT);
            }
            Flavor::Storage => {
                job.state = JobState::from_u8(r.state)?;
                job.etime = r.etime;
                job.flags = r.flags & !F_EXT;
            }
        }
        job.gc_retry = 0;
        job.repl = r.repl;
        job.ctime = r.ctime;
        job.delay = r.delay;
        job.retry = r.retry;
        job.nacks = r.nacks;
        job.deliv = r.deliv;
        job.queue = Some(queue.unwrap_or_else(|| QueueName::from(r.queue)));
        job.body = Some(crate::domain::job::Body::from(r.body));
        let mut nodes = NodeSet::default();
        for n in r.nodes.clone() {
            if let Some(i) = self.cluster.find(n) {
                nodes.insert(i);
            }
        }
        job.nodes_delivered = nodes;
        if job.retry > 0 {
            let jitter = rand250(&mut self.rng);
            job.qtime = add_ms(
                now + u64::from(job.delay) * 1000 + u64::from(job.retry) * 1000,
                jitter,
            );
            job.flags |= F_BCAST_WILLQUEUE;
        } else {
            job.qtime = 0;
        }
        Some(job)
    }
}

/// `record_of(j, ext, cluster, Flavor::Storage, 0).to_bytes()` without
/// the intermediate record (one allocation instead of five): the AOF's
/// LOADJOB blob, produced for every ADDJOB while the AOF is on.
pub fn storage_bytes(j: &Job, ext: Option<&JobExt>, cluster: &super::Cluster) -> Bytes {
    encode_job(j, ext, cluster, Flavor::Storage, 0)
}

/// Call `f` with the job's storage record, borrowed: an AOF rewrite
/// encodes it straight into its chunk (`storage_bytes` would give every
/// job a buffer of its own, copied once more and freed).
pub fn with_storage_record<R>(
    j: &Job,
    ext: Option<&JobExt>,
    cluster: &super::Cluster,
    f: impl FnOnce(&RecordRef<'_, RawNodes<'_>>) -> R,
) -> R {
    with_record(j, ext, cluster, Flavor::Storage, 0, f)
}

/// `record_of(j, ext, cluster, flavor, now).to_bytes()` without the
/// intermediate record: the REPLJOB payload is encoded this way once per
/// job, however many replicas it goes to.
pub fn encode_job(
    j: &Job,
    ext: Option<&JobExt>,
    cluster: &super::Cluster,
    flavor: Flavor,
    now: u64,
) -> Bytes {
    with_record(j, ext, cluster, flavor, now, |rec| {
        let mut out = bytes::BytesMut::new();
        rec.encode(&mut out);
        out.freeze()
    })
}

/// Call `f` with the job's record: its extension section encoded and the
/// IDs of its `nodes_delivered` looked up (on the stack for the common
/// small sets), the other fields borrowed from the job.
fn with_record<R>(
    j: &Job,
    ext: Option<&JobExt>,
    cluster: &super::Cluster,
    flavor: Flavor,
    now: u64,
    f: impl FnOnce(&RecordRef<'_, RawNodes<'_>>) -> R,
) -> R {
    let ext = ext.map(JobExt::encode);
    let mut inline = [[0u8; 40]; 8];
    let mut spilled = Vec::new();
    let mut n = 0;
    for id in j
        .nodes_delivered
        .iter()
        .filter_map(|n| cluster.get(n).map(|x| &x.id))
    {
        if n < inline.len() {
            inline[n] = *id;
        } else {
            if spilled.is_empty() {
                spilled.extend_from_slice(&inline);
            }
            spilled.push(*id);
        }
        n += 1;
    }
    let nodes: &[[u8; 40]] = if n <= inline.len() {
        &inline[..n]
    } else {
        &spilled
    };
    f(&record_ref(j, ext.as_deref(), nodes, flavor, now))
}

/// The record of a job, borrowing the job's fields, the node IDs of its
/// `nodes_delivered` and its encoded extension section.
fn record_ref<'a>(
    j: &'a Job,
    ext: Option<&'a [u8]>,
    nodes: &'a [[u8; 40]],
    flavor: Flavor,
    now: u64,
) -> RecordRef<'a, RawNodes<'a>> {
    let (etime, flags) = wire_etime_flags(j, flavor, now);
    RecordRef {
        id: &j.id.0,
        state: j.state as u8,
        gc_retry: j.gc_retry,
        flags,
        repl: j.repl,
        etime,
        ctime: j.ctime,
        delay: j.delay,
        retry: j.retry,
        nacks: j.nacks,
        deliv: j.deliv,
        queue: j.queue.as_deref().unwrap_or_default(),
        body: j.body.as_deref().unwrap_or_default(),
        nodes: nodes.iter(),
        ext,
    }
}

/// The extension fields a record carries, if any (None also when the
/// section is malformed: the job then loads as a plain job).
pub fn ext_of_record(r: &JobRecord) -> Option<JobExt> {
    r.ext.as_ref().and_then(JobExt::decode)
}

/// [`ext_of_record`] for a borrowed record.
pub fn ext_of_ref<N>(r: &RecordRef<'_, N>) -> Option<JobExt> {
    r.ext
        .and_then(|e| JobExt::decode(&Bytes::copy_from_slice(e)))
}

/// Expire time and flags as a record carries them: the message flavour
/// sends the seconds left (at least 1) and never the DELIVERED flag.
fn wire_etime_flags(j: &Job, flavor: Flavor, now: u64) -> (u32, u8) {
    match flavor {
        Flavor::Message => {
            let now_s = now / 1000;
            let rel = if u64::from(j.etime) > now_s {
                u64::from(j.etime) - now_s + 1
            } else {
                1
            };
            (
                rel.min(u64::from(u32::MAX)) as u32,
                j.flags & !(F_DELIVERED | F_EXT),
            )
        }
        Flavor::Storage => (j.etime, j.flags & !F_EXT),
    }
}

pub fn record_of(
    j: &Job,
    ext: Option<&JobExt>,
    cluster: &super::Cluster,
    flavor: Flavor,
    now: u64,
) -> JobRecord {
    with_record(j, ext, cluster, flavor, now, |rec| {
        JobRecord::owned(rec, Bytes::copy_from_slice)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_bytes_equal_the_owned_record_encoding() {
        let e = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, 1000);
        let id = JobId::parse(b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d").expect("valid id");
        let mut j = Engine::new_job(id);
        j.queue = Some(crate::domain::job::QueueName::from(&b"q"[..]));
        j.body = Some(crate::domain::job::Body::from(&b"body"[..]));
        j.retry = 7;
        j.ctime = 123_456;
        j.nodes_delivered.insert(0);
        let ext = JobExt {
            max_deliveries: 3,
            dedup_key: Some(Bytes::from_static(b"k")),
            ..JobExt::default()
        };
        j.etime = 5_000;
        j.flags = F_DELIVERED | 1;
        for ext in [None, Some(&ext)] {
            let owned = record_of(&j, ext, e.cluster(), Flavor::Storage, 0).to_bytes();
            assert_eq!(storage_bytes(&j, ext, e.cluster()), owned);
            // An AOF rewrite's chunk: the same bytes, written in place.
            let mut chunk = b"x".to_vec();
            let len = with_storage_record(&j, ext, e.cluster(), |rec| {
                rec.put(&mut chunk);
                rec.encoded_len()
            });
            assert_eq!(len, owned.len());
            assert_eq!(&chunk[1..], &owned[..]);
            // The REPLJOB flavour: relative expire time, DELIVERED cleared.
            for now in [0, 1_000_000, 4_999_999, 9_000_000] {
                let owned = record_of(&j, ext, e.cluster(), Flavor::Message, now).to_bytes();
                assert_eq!(
                    encode_job(&j, ext, e.cluster(), Flavor::Message, now),
                    owned
                );
            }
        }
    }
}
