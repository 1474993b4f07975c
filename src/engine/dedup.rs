//! Idempotent ADDJOB (`ADDJOB ... DEDUP <key>`).
//!
//! Every node keeps a table `(queue, key) -> (job ID, expiry)`. When an
//! ADDJOB with a key succeeds, the node that created the job records the
//! key and sends it (DEDUP message) to every node it has a link to; the
//! job's replicas also learn it from the job record itself. A later ADDJOB
//! with the same queue and key, on any node that heard of it, replies the
//! first job's ID and adds nothing - also after that job was acknowledged
//! and collected, because the key lives apart from the job until
//! `dedup-window` seconds after the first ADDJOB. Keys are written to the
//! AOF (`DEDUP` records, also in rewrites) so they survive restarts.
//!
//! When a bus link comes up (a new or restarted node, a healed partition),
//! the node sends the peer its newest keys (up to 1024), so nodes that
//! missed a key, or restarted without an AOF, catch up.
//!
//! Guarantee: a retry that starts after the first ADDJOB returned finds
//! the key on every node that was connected to the creating node when it
//! returned, and on every node that has since connected to a node holding
//! the key. Not covered: two ADDJOBs with the same key running at the same
//! time on different nodes (both create a job), and a retry that reaches a
//! node cut off from every node holding the key. When two different IDs
//! meet for one key, every node keeps the smaller, so the table converges.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use super::{AofRecord, BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, NodeIdx};

/// Default `dedup-window` in seconds.
pub const DEFAULT_WINDOW: u64 = 300;
/// Keys sent to a peer whose link comes up: the newest ones, well below
/// the bus link's queue bound.
const SYNC_MAX_KEYS: usize = 1024;

#[derive(Default)]
pub struct DedupTable {
    entries: super::Map<(Bytes, Bytes), (JobId, u64)>,
    expiry: BTreeSet<(u64, Bytes, Bytes)>,
}

impl DedupTable {
    /// Keys are a client's: the engine's keyed hash state.
    pub fn with_hasher(state: super::HashState) -> Self {
        DedupTable {
            entries: super::Map::with_hasher(state),
            expiry: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Insert or keep; returns true when the table changed.
    fn insert(&mut self, queue: Bytes, key: Bytes, id: JobId, expires: u64) -> bool {
        let k = (queue, key);
        if let Some(&(old, old_exp)) = self.entries.get(&k) {
            if old <= id && old_exp >= expires {
                return false;
            }
            self.expiry.remove(&(old_exp, k.0.clone(), k.1.clone()));
            let keep = old.min(id);
            let exp = old_exp.max(expires);
            self.expiry.insert((exp, k.0.clone(), k.1.clone()));
            self.entries.insert(k, (keep, exp));
            return keep != old || exp != old_exp;
        }
        self.expiry.insert((expires, k.0.clone(), k.1.clone()));
        self.entries.insert(k, (id, expires));
        true
    }

    fn purge(&mut self, now: u64) {
        while let Some((t, q, k)) = self.expiry.first().cloned() {
            if t > now {
                break;
            }
            self.expiry.remove(&(t, q.clone(), k.clone()));
            if self
                .entries
                .get(&(q.clone(), k.clone()))
                .is_some_and(|e| e.1 == t)
            {
                self.entries.remove(&(q, k));
            }
        }
    }
}

/// `u32 qlen, queue, u32 klen, key, id[40]` (big-endian lengths).
fn encode_entry(queue: &[u8], key: &[u8], id: &JobId, out: &mut BytesMut) {
    out.put_u32(u32::try_from(queue.len()).unwrap_or(u32::MAX));
    out.put_slice(queue);
    out.put_u32(u32::try_from(key.len()).unwrap_or(u32::MAX));
    out.put_slice(key);
    out.put_slice(&id.0);
}

fn decode_entry(src: &Bytes) -> Option<(Bytes, Bytes, JobId)> {
    let mut pos = 0usize;
    let mut field = || -> Option<Bytes> {
        let l = src.get(pos..pos + 4)?;
        let n = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
        let start = pos + 4;
        let end = start.checked_add(n)?;
        if end > src.len() {
            return None;
        }
        pos = end;
        Some(src.slice(start..end))
    };
    let queue = field()?;
    let key = field()?;
    let id = JobId::parse(src.get(pos..)?)?;
    Some((queue, key, id))
}

/// AOF `DEDUP` payload: u64 expiry (unix ms, big-endian), then the entry.
pub fn encode_aof(queue: &[u8], key: &[u8], id: &JobId, expires: u64) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u64(expires);
    encode_entry(queue, key, id, &mut b);
    b.freeze()
}

/// Structural check of an AOF `DEDUP` payload.
pub fn valid_aof(payload: &[u8]) -> bool {
    payload.len() >= 8 && decode_entry(&Bytes::copy_from_slice(&payload[8..])).is_some()
}

impl Engine {
    /// The job ID an unexpired key points to.
    pub fn dedup_lookup(&self, queue: &[u8], key: &[u8], now: u64) -> Option<JobId> {
        let k = (Bytes::copy_from_slice(queue), Bytes::copy_from_slice(key));
        self.dedup
            .entries
            .get(&k)
            .filter(|e| e.1 > now)
            .map(|e| e.0)
    }

    fn dedup_insert(&mut self, queue: Bytes, key: Bytes, id: JobId, expires: u64, now: u64) {
        if expires <= now {
            return;
        }
        if self.dedup.insert(queue.clone(), key.clone(), id, expires) && self.aof {
            self.out
                .aof
                .push(AofRecord::Dedup(encode_aof(&queue, &key, &id, expires)));
        }
    }

    /// An ADDJOB with a key succeeded here: record it and tell every node.
    pub(crate) fn dedup_commit(&mut self, h: JobHandle, now: u64) {
        let Some(key) = self.ext_of(h).and_then(|x| x.dedup_key.clone()) else {
            return;
        };
        let Some(j) = self.store.get(h) else { return };
        let Some(queue) = j.queue.as_deref().map(Bytes::copy_from_slice) else {
            return;
        };
        let id = j.id;
        let window = self.dedup_window;
        self.dedup_insert(queue.clone(), key.clone(), id, now + window * 1000, now);
        let mut entry = BytesMut::new();
        encode_entry(&queue, &key, &id, &mut entry);
        self.broadcast(BusOut::Dedup {
            entry: entry.freeze(),
            window: u32::try_from(window).unwrap_or(u32::MAX),
        });
    }

    /// Record a key for an existing job and tell every node (a schedule's
    /// skipped tick points at the previous tick's job).
    pub(crate) fn dedup_record(&mut self, queue: Bytes, key: Bytes, id: JobId, now: u64) {
        let window = self.dedup_window;
        self.dedup_insert(queue.clone(), key.clone(), id, now + window * 1000, now);
        let mut entry = BytesMut::new();
        encode_entry(&queue, &key, &id, &mut entry);
        self.broadcast(BusOut::Dedup {
            entry: entry.freeze(),
            window: u32::try_from(window).unwrap_or(u32::MAX),
        });
    }

    /// A replica or loaded job with a key: the key is known here too, for
    /// the rest of the window counted from the job's creation.
    pub fn dedup_learn_from_job(&mut self, h: JobHandle, now: u64) {
        let Some(key) = self
            .ext_of(h)
            .filter(|x| !x.schedule_tick)
            .and_then(|x| x.dedup_key.clone())
        else {
            return;
        };
        let Some(j) = self.store.get(h) else { return };
        let Some(queue) = j.queue.as_deref().map(Bytes::copy_from_slice) else {
            return;
        };
        let (id, created) = (j.id, j.ctime / 1_000_000);
        let expires = created + self.dedup_window * 1000;
        self.dedup_insert(queue, key, id, expires, now);
    }

    /// A link to `peer` came up (first contact, reconnect after a
    /// partition, restarted node): send it our newest keys, so a node that
    /// missed them - or restarted without an AOF - learns them too.
    pub(crate) fn dedup_sync_to(&mut self, peer: NodeIdx, now: u64) {
        if self.dedup.is_empty() {
            return;
        }
        let newest: Vec<(u64, Bytes, Bytes)> = self
            .dedup
            .expiry
            .iter()
            .rev()
            .take(SYNC_MAX_KEYS)
            .cloned()
            .collect();
        for (exp, queue, key) in newest {
            let Some(&(id, _)) = self.dedup.entries.get(&(queue.clone(), key.clone())) else {
                continue;
            };
            if exp <= now {
                continue;
            }
            let mut entry = BytesMut::new();
            encode_entry(&queue, &key, &id, &mut entry);
            let window = (exp - now).div_ceil(1000);
            self.out.bus.push((
                peer,
                BusOut::Dedup {
                    entry: entry.freeze(),
                    window: u32::try_from(window).unwrap_or(u32::MAX),
                },
            ));
        }
    }

    /// DEDUP message: `window` seconds left.
    pub(crate) fn on_dedup(&mut self, entry: &Bytes, window: u32, now: u64) {
        if let Some((queue, key, id)) = decode_entry(entry) {
            self.dedup_insert(queue, key, id, now + u64::from(window) * 1000, now);
        }
    }

    /// AOF `DEDUP` record.
    pub fn dedup_load(&mut self, payload: &Bytes, now: u64) -> bool {
        if payload.len() < 8 {
            return false;
        }
        let mut e = [0u8; 8];
        e.copy_from_slice(&payload[..8]);
        let expires = u64::from_be_bytes(e);
        let Some((queue, key, id)) = decode_entry(&payload.slice(8..)) else {
            return false;
        };
        self.dedup_insert(queue, key, id, expires, now);
        true
    }

    /// Every live key as AOF payloads (for rewrites).
    pub fn dedup_snapshot(&self) -> Vec<Bytes> {
        self.dedup
            .entries
            .iter()
            .map(|((q, k), (id, exp))| encode_aof(q, k, id, *exp))
            .collect()
    }

    /// Drop expired keys (cron).
    pub(crate) fn dedup_purge(&mut self, now: u64) {
        if !self.dedup.is_empty() {
            self.dedup.purge(now);
        }
    }

    /// `dedup-window` in seconds.
    pub fn set_dedup_window(&mut self, secs: u64) {
        self.dedup_window = secs;
    }

    pub fn dedup_keys(&self) -> usize {
        self.dedup.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(c: u8) -> JobId {
        let mut b = *b"D-00000000-000000000000000000000000-0001";
        b[11] = c;
        JobId(b)
    }

    #[test]
    fn entries_round_trip_and_reject_garbage() {
        let mut b = BytesMut::new();
        encode_entry(b"q", b"key", &id(b'a'), &mut b);
        let b = b.freeze();
        assert_eq!(
            decode_entry(&b),
            Some((
                Bytes::from_static(b"q"),
                Bytes::from_static(b"key"),
                id(b'a')
            ))
        );
        for cut in 0..b.len() {
            assert_eq!(decode_entry(&b.slice(..cut)), None);
        }
        let aof = encode_aof(b"q", b"k", &id(b'a'), 99);
        assert!(valid_aof(&aof));
        assert!(!valid_aof(&aof[..aof.len() - 1]));
    }

    #[test]
    fn table_keeps_smaller_id_and_expires() {
        let mut t = DedupTable::default();
        let (q, k) = (Bytes::from_static(b"q"), Bytes::from_static(b"k"));
        assert!(t.insert(q.clone(), k.clone(), id(b'b'), 100));
        assert!(!t.insert(q.clone(), k.clone(), id(b'c'), 100));
        assert!(t.insert(q.clone(), k.clone(), id(b'a'), 100));
        assert_eq!(t.entries[&(q.clone(), k.clone())].0, id(b'a'));
        t.purge(99);
        assert_eq!(t.len(), 1);
        t.purge(100);
        assert_eq!(t.len(), 0);
        assert!(t.expiry.is_empty());
    }
}
