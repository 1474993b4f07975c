//! Per-job fields of the opt-in extensions (docs/COMPATIBILITY.md): ADDJOB
//! BACKOFF, MAXDELIVERIES / DEADLETTER (dead letters and REDRIVE), DEDUP,
//! PRIORITY, BATCH and AFTER / ONFAIL (job dependencies).
//! Only jobs that use an extension carry a `JobExt` (the engine keeps them
//! in a side map, so plain jobs pay nothing), and only those jobs get the
//! extension section of the serialized record (`job_codec`).
//!
//! Section format: a sequence of `u8 tag, u32 LE length, value` entries.
//! Unknown tags are skipped, so a later version can add fields; integers
//! are u32 LE.

use bytes::{BufMut, Bytes, BytesMut};

const TAG_BACKOFF_MAX: u8 = 1;
const TAG_MAX_DELIVERIES: u8 = 2;
const TAG_DEAD_QUEUE: u8 = 3;
const TAG_DEDUP_KEY: u8 = 4;
const TAG_ORIGIN: u8 = 5;
const TAG_EPOCH: u8 = 6;
// Job controls (ADDJOB PRIORITY): tags 10-19.
const TAG_PRIORITY: u8 = 10;
const TAG_PROGRESS: u8 = 11;

/// WORKING ... DESC: longest progress text, in bytes.
pub const PROGRESS_DESC_MAX: usize = 256;
/// WORKING ... DATA: largest progress blob, in bytes.
pub const PROGRESS_DATA_MAX: usize = 4096;

/// A worker's progress report (WORKING ... PROGRESS); the newest `stamp`
/// wins on every node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Unix ms at the node the worker reported to.
    pub stamp: u64,
    /// 0..=100.
    pub percent: u8,
    pub desc: Bytes,
    pub data: Bytes,
}

impl Progress {
    /// `u64 stamp, u8 percent, u16 desc length, desc, u32 data length, data`
    /// (big endian), as in the PROGRESS bus message after the job ID.
    pub fn encode_into(&self, out: &mut BytesMut) {
        out.put_u64(self.stamp);
        out.put_u8(self.percent);
        out.put_u16(u16::try_from(self.desc.len()).unwrap_or(u16::MAX));
        out.put_slice(&self.desc[..self.desc.len().min(usize::from(u16::MAX))]);
        out.put_u32(u32::try_from(self.data.len()).unwrap_or(u32::MAX));
        out.put_slice(&self.data);
    }

    /// Decode exactly `src` (None when malformed or over the limits).
    pub fn decode(src: &Bytes) -> Option<Progress> {
        let u = |a: usize, n: usize| src.get(a..a.checked_add(n)?);
        let stamp = u64::from_be_bytes(u(0, 8)?.try_into().ok()?);
        let percent = *src.get(8)?;
        let dlen = usize::from(u16::from_be_bytes(u(9, 2)?.try_into().ok()?));
        let desc_end = 11 + dlen;
        u(11, dlen)?;
        let blen = u32::from_be_bytes(u(desc_end, 4)?.try_into().ok()?) as usize;
        let data_start = desc_end + 4;
        u(data_start, blen)?;
        if percent > 100
            || dlen > PROGRESS_DESC_MAX
            || blen > PROGRESS_DATA_MAX
            || data_start + blen != src.len()
        {
            return None;
        }
        Some(Progress {
            stamp,
            percent,
            desc: src.slice(11..desc_end),
            data: src.slice(data_start..data_start + blen),
        })
    }
}

/// ADDJOB PRIORITY range: 1 (served last) to 9 (served first).
pub const PRIORITY_MIN: u8 = 1;
pub const PRIORITY_MAX: u8 = 9;
/// The level of jobs added without PRIORITY: the middle, so an unset
/// priority is never secretly the highest.
pub const PRIORITY_DEFAULT: u8 = 5;
// Tags 20..29: schedules and workflows (engine::schedule).
const TAG_SCHEDULE_TICK: u8 = 20;
const TAG_BATCH: u8 = 21;
/// One entry per dependency (a job ID or a batch ID), in the order given.
const TAG_AFTER: u8 = 22;
const TAG_ON_FAIL: u8 = 23;
const TAG_AFTER_DONE: u8 = 24;

/// ADDJOB ONFAIL: what a waiting job does when a dependency fails.
/// Cancel the waiting job (the default).
pub const ON_FAIL_CANCEL: u8 = 0;
/// Run it anyway.
pub const ON_FAIL_RUN: u8 = 1;
/// Move it to its dead-letter queue.
pub const ON_FAIL_DEADLETTER: u8 = 2;

/// Suffix of the default dead-letter queue: jobs of `q` die into `q:dead`.
pub const DEAD_SUFFIX: &[u8] = b":dead";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobExt {
    /// BACKOFF cap in seconds; 0 = flat RETRY as in Disque.
    pub backoff_max: u32,
    /// MAXDELIVERIES; 0 = unlimited.
    pub max_deliveries: u32,
    /// DEADLETTER queue; None = `<queue>:dead`.
    pub dead_queue: Option<Bytes>,
    /// DEDUP key.
    pub dedup_key: Option<Bytes>,
    /// While dead: the queue the job was dead-lettered from.
    pub origin: Option<Bytes>,
    /// Dead-letter generation: incremented by each dead-lettering and each
    /// REDRIVE, so odd = dead. Nodes adopt the highest epoch they hear of,
    /// which makes concurrent or late messages converge.
    pub epoch: u32,
    /// Local only: a NACK is waiting for its DELAY; the queueing that ends
    /// the wait counts as that nack.
    pub nack_pending: bool,
    /// PRIORITY level (`PRIORITY_MIN..=PRIORITY_MAX`); 0 = not given.
    pub priority: u8,
    /// The newest progress report (WORKING ... PROGRESS).
    pub progress: Option<Progress>,
    /// A schedule's tick job: its DEDUP key counts only once the job is
    /// replicated (engine::schedule), so replicas do not learn it from the
    /// record.
    pub schedule_tick: bool,
    /// ADDJOB BATCH: the batch this job is a member of (engine::batch).
    pub batch: Option<Bytes>,
    /// ADDJOB AFTER: the job IDs and batch IDs this job waits for
    /// (engine::after). Empty for every other job.
    pub after: Vec<Bytes>,
    /// ADDJOB ONFAIL: one of the `ON_FAIL_*` values.
    pub on_fail: u8,
    /// The dependencies were settled (met, or failed and ONFAIL applied):
    /// the job no longer waits. Set once, never cleared.
    pub after_done: bool,
    /// Parsing only: ONFAIL was given (not stored).
    pub on_fail_given: bool,
}

impl JobExt {
    /// The level the job is served at (`PRIORITY_DEFAULT` when not given).
    pub fn priority_level(&self) -> u8 {
        if self.priority == 0 {
            PRIORITY_DEFAULT
        } else {
            self.priority
        }
    }

    pub fn is_dead(&self) -> bool {
        self.epoch & 1 == 1
    }

    /// Held until its dependencies are settled (ADDJOB AFTER): never
    /// queued meanwhile. A dead-lettered job no longer waits.
    pub fn is_waiting(&self) -> bool {
        !self.after.is_empty() && !self.after_done && !self.is_dead()
    }

    /// The queue dead jobs of `queue` go to.
    pub fn dead_queue_for(&self, queue: &[u8]) -> Bytes {
        match &self.dead_queue {
            Some(q) => q.clone(),
            None => {
                let mut v = Vec::with_capacity(queue.len() + DEAD_SUFFIX.len());
                v.extend_from_slice(queue);
                v.extend_from_slice(DEAD_SUFFIX);
                Bytes::from(v)
            }
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        let mut int = |tag: u8, v: u32| {
            if v != 0 {
                out.put_u8(tag);
                out.put_u32_le(4);
                out.put_u32_le(v);
            }
        };
        int(TAG_BACKOFF_MAX, self.backoff_max);
        int(TAG_MAX_DELIVERIES, self.max_deliveries);
        int(TAG_EPOCH, self.epoch);
        int(TAG_PRIORITY, u32::from(self.priority));
        int(TAG_SCHEDULE_TICK, u32::from(self.schedule_tick));
        int(TAG_ON_FAIL, u32::from(self.on_fail));
        int(TAG_AFTER_DONE, u32::from(self.after_done));
        for d in &self.after {
            out.put_u8(TAG_AFTER);
            out.put_u32_le(u32::try_from(d.len()).unwrap_or(u32::MAX));
            out.put_slice(d);
        }
        if let Some(p) = &self.progress {
            let mut v = BytesMut::new();
            p.encode_into(&mut v);
            out.put_u8(TAG_PROGRESS);
            out.put_u32_le(u32::try_from(v.len()).unwrap_or(u32::MAX));
            out.put_slice(&v);
        }
        for (tag, v) in [
            (TAG_DEAD_QUEUE, &self.dead_queue),
            (TAG_DEDUP_KEY, &self.dedup_key),
            (TAG_ORIGIN, &self.origin),
            (TAG_BATCH, &self.batch),
        ] {
            if let Some(b) = v {
                out.put_u8(tag);
                out.put_u32_le(u32::try_from(b.len()).unwrap_or(u32::MAX));
                out.put_slice(b);
            }
        }
        out.freeze()
    }

    /// Decode a section; None when it is malformed (lengths running past
    /// the end, integer fields of the wrong size).
    pub fn decode(src: &Bytes) -> Option<JobExt> {
        let mut ext = JobExt::default();
        let mut pos = 0usize;
        while pos < src.len() {
            let tag = *src.get(pos)?;
            let len_bytes = src.get(pos + 1..pos + 5)?;
            let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                as usize;
            let start = pos + 5;
            let end = start.checked_add(len)?;
            let val = src.get(start..end)?;
            let int = || -> Option<u32> {
                let a: [u8; 4] = val.try_into().ok()?;
                Some(u32::from_le_bytes(a))
            };
            match tag {
                TAG_BACKOFF_MAX => ext.backoff_max = int()?,
                TAG_MAX_DELIVERIES => ext.max_deliveries = int()?,
                TAG_EPOCH => ext.epoch = int()?,
                // A level this version does not serve is read as unset
                // rather than rejecting the whole job.
                TAG_PRIORITY => {
                    ext.priority = u8::try_from(int()?)
                        .ok()
                        .filter(|p| (PRIORITY_MIN..=PRIORITY_MAX).contains(p))
                        .unwrap_or(0)
                }
                TAG_SCHEDULE_TICK => ext.schedule_tick = int()? != 0,
                TAG_DEAD_QUEUE => ext.dead_queue = Some(src.slice(start..end)),
                TAG_DEDUP_KEY => ext.dedup_key = Some(src.slice(start..end)),
                // Progress is best effort: a bad report is dropped, not the job.
                TAG_PROGRESS => ext.progress = Progress::decode(&src.slice(start..end)),
                TAG_ORIGIN => ext.origin = Some(src.slice(start..end)),
                TAG_BATCH => ext.batch = Some(src.slice(start..end)),
                TAG_AFTER => ext.after.push(src.slice(start..end)),
                // A policy this version does not know reads as the default.
                TAG_ON_FAIL => {
                    ext.on_fail = u8::try_from(int()?)
                        .ok()
                        .filter(|&p| p <= ON_FAIL_DEADLETTER)
                        .unwrap_or(ON_FAIL_CANCEL)
                }
                TAG_AFTER_DONE => ext.after_done = int()? != 0,
                _ => {}
            }
            pos = end;
        }
        Some(ext)
    }
}

/// Re-queue period in ms for the `d`-th delivery (`prior` = re-queues so
/// far, i.e. nacks + additional deliveries): RETRY x 2^prior, capped at
/// `max_s` seconds (never below RETRY).
pub fn backoff_ms(retry_s: u32, prior: u32, max_s: u32) -> u64 {
    let base = u64::from(retry_s) * 1000;
    let cap = (u64::from(max_s) * 1000).max(base);
    base.checked_shl(prior.min(40)).unwrap_or(u64::MAX).min(cap)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unknown_tags() {
        let x = JobExt {
            backoff_max: 600,
            max_deliveries: 5,
            dead_queue: Some(Bytes::from_static(b"dlq")),
            dedup_key: Some(Bytes::from_static(b"k1")),
            origin: Some(Bytes::from_static(b"q")),
            epoch: 3,
            nack_pending: false,
            priority: 8,
            progress: Some(Progress {
                stamp: 1_700_000_000_000,
                percent: 42,
                desc: Bytes::from_static(b"step 2"),
                data: Bytes::from_static(b"\x00\x01"),
            }),
            schedule_tick: true,
            batch: Some(Bytes::from_static(b"b1")),
            after: vec![Bytes::from_static(b"b1"), Bytes::from_static(b"b2")],
            on_fail: ON_FAIL_DEADLETTER,
            after_done: true,
            on_fail_given: false,
        };
        let enc = x.encode();
        assert_eq!(JobExt::decode(&enc).unwrap(), x);
        let mut more = BytesMut::from(&enc[..]);
        more.put_u8(99);
        more.put_u32_le(2);
        more.put_slice(b"zz");
        assert_eq!(JobExt::decode(&more.freeze()).unwrap(), x);
        assert_eq!(
            JobExt::decode(&JobExt::default().encode()).unwrap(),
            JobExt::default()
        );
    }

    #[test]
    fn malformed_sections_are_rejected() {
        for bad in [
            &b"\x01"[..],
            b"\x01\x04\x00\x00",
            b"\x01\x03\x00\x00\x00abc",
            b"\x03\xff\xff\xff\xffab",
        ] {
            assert_eq!(
                JobExt::decode(&Bytes::copy_from_slice(bad)),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_ms(2, 0, 60), 2000);
        assert_eq!(backoff_ms(2, 1, 60), 4000);
        assert_eq!(backoff_ms(2, 4, 60), 32000);
        assert_eq!(backoff_ms(2, 5, 60), 60000);
        assert_eq!(backoff_ms(2, 500, 60), 60000);
        assert_eq!(backoff_ms(10, 3, 5), 10000);
    }

    #[test]
    fn priority_out_of_range_reads_as_unset() {
        let mut x = JobExt {
            priority: 9,
            ..JobExt::default()
        };
        assert_eq!(JobExt::decode(&x.encode()).unwrap().priority_level(), 9);
        x.priority = 0;
        assert_eq!(JobExt::decode(&x.encode()).unwrap().priority_level(), 5);
        let mut raw = BytesMut::new();
        raw.put_u8(TAG_PRIORITY);
        raw.put_u32_le(4);
        raw.put_u32_le(200);
        assert_eq!(JobExt::decode(&raw.freeze()).unwrap().priority, 0);
    }

    #[test]
    fn progress_decoding_checks_lengths_and_limits() {
        let p = Progress {
            stamp: 7,
            percent: 100,
            desc: Bytes::from_static(b"done"),
            data: Bytes::new(),
        };
        let mut b = BytesMut::new();
        p.encode_into(&mut b);
        let b = b.freeze();
        assert_eq!(Progress::decode(&b), Some(p.clone()));
        for cut in 0..b.len() {
            assert_eq!(Progress::decode(&b.slice(..cut)), None, "cut {cut}");
        }
        let mut long = BytesMut::from(&b[..]);
        long.put_u8(0);
        assert_eq!(Progress::decode(&long.freeze()), None);
        let mut over = BytesMut::new();
        Progress { percent: 101, ..p }.encode_into(&mut over);
        assert_eq!(Progress::decode(&over.freeze()), None);
    }

    #[test]
    fn default_dead_queue_name() {
        let x = JobExt::default();
        assert_eq!(&x.dead_queue_for(b"jobs")[..], b"jobs:dead");
    }
}
