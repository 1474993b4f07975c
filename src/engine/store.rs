//! The job table: jobs in a slab, an ID index whose entries are a 4-byte
//! handle plus 32 bits of the ID's hash (the ID lives once, inside the
//! job; growing the index rehashes from the stored bits without touching
//! any job), and the scheduler's timer buckets. Lookup is O(1),
//! scheduling O(log buckets).
//!
//! The index is split by other hash bits into `SHARDS` independent tables
//! so that a table doubling rehashes and allocates 1/`SHARDS` of it: used
//! memory grows in small steps (the maxmemory levels are crossed one at a
//! time) and ten million jobs never stall on one big rehash. The slab is
//! segmented for the same reason.
//!
//! Timers are 10 ms buckets of handles with lazy deletion: a popped entry
//! counts only if the job's current wake-up time still falls in that
//! bucket. This costs ~4-6 bytes per job instead of ~32 for an ordered set
//! entry. A job that leaves the table takes its entry along when it is
//! among the newest few of its bucket (`drop_timer`), as it is for a job
//! sent to disk whole or acknowledged soon after it was scheduled: left
//! stale, those entries held 4-6 bytes for every job a backlog on disk
//! took in the last RETRY (300 s by default). A job that only moves to
//! another bucket leaves its old entry stale: searching for it would cost
//! every GETJOB of a job queued long ago a fruitless scan. Once stale
//! entries are half of them, a compaction pass in steps of the 100 ms
//! cron drops them (`compact_timers`).

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use super::id_index::IdShard;
use crate::domain::job::{Job, JobId};
use crate::support::slab::Slab;

pub type JobHandle = u32;

/// Heap bytes held by each part of the job table (capacity, not only what
/// is in use), for the memory accounting in docs/PERFORMANCE.md.
#[derive(Debug, Default)]
pub struct Footprint {
    pub jobs: usize,
    /// `size_of::<Job>()` and of one slab slot.
    pub record: usize,
    pub slot: usize,
    /// Slab segments.
    pub slab: usize,
    /// ID index shards (flat tables of 8-byte entries, `id_index`).
    pub index: usize,
    /// Timer buckets: the handle vectors (their tree nodes not counted).
    pub timers: usize,
    /// Job bodies (with their length prefix) as requested from the
    /// allocator, and how many allocations.
    pub bodies: usize,
    pub body_allocs: usize,
    /// Node lists that spilled to the heap.
    pub node_lists: usize,
}

pub struct JobStore {
    slab: Slab<Job>,
    /// `hash32 << 32 | handle`, in the shard picked by the hash's low byte.
    index: Box<[IdShard; SHARDS]>,
    hasher: foldhash::fast::RandomState,
    /// bucket end time (ms) -> handles that may be due by then.
    awake: BTreeMap<u64, Vec<JobHandle>>,
    /// Entries in `awake`, and of them how many went stale (an estimate:
    /// counted as they are left behind, uncounted as they are popped or
    /// compacted away).
    timer_entries: usize,
    timer_stale: usize,
    /// The bucket a compaction pass resumes at; None between passes.
    compact_at: Option<u64>,
}

/// Index shards: a power of two up to 256 (the shard is a hash byte).
const SHARDS: usize = 256;

fn empty_index() -> Box<[IdShard; SHARDS]> {
    Box::new(std::array::from_fn(|_| IdShard::default()))
}

/// Timer granularity in ms.
const BUCKET_MS: u64 = 10;

/// Entries from a bucket's end that `drop_timer` looks at: a bounded
/// scan (a bucket of jobs expiring in the same second can hold hundreds
/// of thousands), enough for the entries of the last few milliseconds.
const DROP_SCAN: usize = 512;

fn bucket(when: u64) -> u64 {
    when.div_ceil(BUCKET_MS) * BUCKET_MS
}

impl Default for JobStore {
    fn default() -> Self {
        JobStore {
            slab: Slab::default(),
            index: empty_index(),
            hasher: foldhash::fast::RandomState::default(),
            awake: BTreeMap::new(),
            timer_entries: 0,
            timer_stale: 0,
            compact_at: None,
        }
    }
}

/// Stale timer entries below which no compaction pass starts.
const COMPACT_MIN_STALE: usize = 4096;

impl JobStore {
    /// The index shard and 32 stored bits of a keyed hash of the ID. The
    /// key is a random seed per table (foldhash), so IDs a client chooses
    /// (ACKJOB of unknown IDs, LOADJOB) cannot be picked offline to flood
    /// one bucket; foldhash gives that at a fraction of SipHash-1-3's cost
    /// on a 40-byte key, hashed on every ADDJOB. The shard comes from bits
    /// that are not stored: within a shard all 32 stored bits vary.
    fn hash(&self, id: &JobId) -> (usize, u32) {
        let h = self.hasher.hash_one(id.0);
        (h as usize % SHARDS, (h >> 32) as u32)
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub fn lookup(&self, id: &JobId) -> Option<JobHandle> {
        let (shard, h32) = self.hash(id);
        let slab = &self.slab;
        self.index[shard].find(h32, |h| slab.get(h).is_some_and(|j| j.id == *id))
    }

    /// Warm the ID-index slot a new job with this ID will take (ADDJOB
    /// calls it for the next command's ID, made one command ahead).
    pub fn prefetch_slot(&self, id: &JobId) {
        let (shard, h32) = self.hash(id);
        if let Some(s) = self.index.get(shard) {
            s.prefetch(h32);
        }
    }

    /// Insert a job unless its ID is already present (one hash, one probe).
    /// None (the job dropped) on a duplicate ID.
    pub fn insert_new(&mut self, job: Job) -> Option<JobHandle> {
        let (shard, h32) = self.hash(&job.id);
        let slab = &self.slab;
        let id = job.id;
        let slot = self.index[shard]
            .vacant(h32, |h| slab.get(h).is_some_and(|j| j.id == id))
            .ok()?;
        let h = self.slab.insert(job);
        self.index[shard].fill(slot, h32, h);
        Some(h)
    }

    /// Remove a job from the table and the scheduler.
    pub fn remove(&mut self, h: JobHandle) -> Option<Job> {
        let job = self.slab.get(h)?;
        let (shard, h32) = self.hash(&job.id);
        let awake = job.awakeme;
        self.index[shard].remove(h32, h);
        self.drop_timer(h, awake);
        self.slab.remove(h)
    }

    /// Take job `h`'s entry out of the bucket of `when` if it is among the
    /// last `DROP_SCAN` there; an entry not found stays stale and is
    /// skipped when popped.
    fn drop_timer(&mut self, h: JobHandle, when: u64) {
        if when == 0 {
            return;
        }
        let b = bucket(when);
        let Some(v) = self.awake.get_mut(&b) else {
            return;
        };
        let from = v.len().saturating_sub(DROP_SCAN);
        // Order within a bucket does not matter: pop takes any.
        if let Some(i) = v[from..].iter().rposition(|&x| x == h) {
            v.swap_remove(from + i);
            self.timer_entries = self.timer_entries.saturating_sub(1);
        } else {
            self.timer_stale += 1;
        }
        if v.is_empty() {
            self.awake.remove(&b);
        }
    }

    /// Take a job out of the table and leave `cold` (a whole-job spill
    /// slot tagged `COLD_TAG`, `engine::cold`) in the ID index in its
    /// place; returns the job and where its index entry lives (shard and
    /// hash bits, which the cold slot keeps to remove the entry later
    /// without reading the job back).
    pub fn evict(&mut self, h: JobHandle, cold: u32) -> Option<(Job, usize, u32)> {
        let job = self.slab.get(h)?;
        let (shard, h32) = self.hash(&job.id);
        let awake = job.awakeme;
        // The job's entry becomes the cold one where it stands.
        if !self.index[shard].replace(h32, h, cold) {
            return None;
        }
        self.drop_timer(h, awake);
        let job = self.slab.remove(h)?;
        Some((job, shard, h32))
    }

    /// The cold entry (`COLD_TAG | slot`) whose hash bits match this ID's:
    /// a candidate only (equal bits are not equal IDs; the record read
    /// back tells).
    pub fn cold_candidate(&self, id: &JobId, tag: u32) -> Option<u32> {
        self.cold_find(id, |h| h & tag != 0)
    }

    /// The cold entry this ID's index place holds for which `is_it`
    /// says yes (`is_it` gets the entry, `COLD_TAG` included).
    pub fn cold_find(&self, id: &JobId, is_it: impl Fn(u32) -> bool) -> Option<u32> {
        let (shard, h32) = self.hash(id);
        self.index[shard].find(h32, is_it)
    }

    /// 32 more bits of an ID, independent of its index place: with them
    /// an index entry's 40 bits tell IDs apart where reading the record
    /// back is not an option (`Engine::replayed_cold`).
    pub fn id_check(id: &JobId) -> u32 {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).hash_one(id.0) as u32
    }

    /// Where this ID's index entry lives (shard, hash bits).
    pub fn index_place(&self, id: &JobId) -> (usize, u32) {
        self.hash(id)
    }

    /// Put a job read back from disk where its cold entry (`evict`)
    /// stands: the entry points at the job again, in place (one probe,
    /// not a removal and an insert). None on a duplicate ID.
    pub fn restore(&mut self, job: Job, shard: usize, h32: u32, cold: u32) -> Option<JobHandle> {
        let h = self.slab.insert(job);
        if self
            .index
            .get_mut(shard)
            .is_some_and(|s| s.replace(h32, cold, h))
        {
            return Some(h);
        }
        // No such entry (never expected): an ordinary insert.
        let job = self.slab.remove(h)?;
        self.insert_new(job)
    }

    /// Drop a cold entry left by `evict`.
    pub fn remove_cold(&mut self, shard: usize, h32: u32, cold: u32) -> bool {
        self.index
            .get_mut(shard)
            .is_some_and(|s| s.remove(h32, cold))
    }

    pub fn get(&self, h: JobHandle) -> Option<&Job> {
        self.slab.get(h)
    }

    pub fn get_mut(&mut self, h: JobHandle) -> Option<&mut Job> {
        self.slab.get_mut(h)
    }

    /// Set (or clear with 0) the job's wake-up time.
    pub fn schedule(&mut self, h: JobHandle, when: u64) {
        let Some(job) = self.slab.get_mut(h) else {
            return;
        };
        if job.awakeme == when {
            return;
        }
        let old = job.awakeme;
        job.awakeme = when;
        if old != 0 && (when == 0 || bucket(old) != bucket(when)) {
            // Left where it is: searching a bucket for it would cost the
            // GETJOB of a job queued long ago a fruitless scan.
            self.timer_stale += 1;
        }
        if when != 0 && (old == 0 || bucket(old) != bucket(when)) {
            self.awake.entry(bucket(when)).or_default().push(h);
            self.timer_entries += 1;
        }
    }

    /// Part of a pass that drops stale timer entries (each a job since
    /// rescheduled into another bucket, or gone), so that they do not
    /// hold 4 bytes each until their bucket comes due: one for every job
    /// delivered in the last RETRY (300 s by default) after waiting in a
    /// backlog, tens of megabytes under a steady load. A pass starts once
    /// at least half the entries (and `COMPACT_MIN_STALE`) are stale and
    /// visits whole buckets, about `budget` entries a call, in key order.
    /// It drops exactly the entries `pop_due` would skip. Returns the
    /// entries dropped.
    pub fn compact_timers(&mut self, budget: usize) -> usize {
        let from = match self.compact_at {
            Some(b) => b,
            None if self.timer_stale >= COMPACT_MIN_STALE
                && self.timer_stale * 2 >= self.timer_entries =>
            {
                0
            }
            None => return 0,
        };
        let slab = &self.slab;
        let mut seen = 0usize;
        let mut dropped = 0usize;
        let mut emptied = Vec::new();
        let mut next = None;
        for (&b, v) in self.awake.range_mut(from..) {
            if seen >= budget {
                next = Some(b);
                break;
            }
            seen += v.len();
            let before = v.len();
            v.retain(|&h| {
                slab.get(h)
                    .is_some_and(|j| j.awakeme != 0 && bucket(j.awakeme) == b)
            });
            dropped += before - v.len();
            if v.is_empty() {
                emptied.push(b);
            } else if v.capacity() > 2 * v.len() + 16 {
                v.shrink_to_fit();
            }
        }
        for b in emptied {
            self.awake.remove(&b);
        }
        self.compact_at = next;
        self.timer_entries = self.timer_entries.saturating_sub(dropped);
        self.timer_stale = if next.is_none() {
            0
        } else {
            self.timer_stale.saturating_sub(dropped)
        };
        dropped
    }

    /// Earliest bucket that may hold a due job (possibly only stale entries).
    pub fn next_awake(&self) -> Option<u64> {
        self.awake.first_key_value().map(|(&t, _)| t)
    }

    /// Pop a job due at `now`, unscheduling it.
    pub fn pop_due(&mut self, now: u64) -> Option<JobHandle> {
        loop {
            let mut entry = self.awake.first_entry()?;
            let b = *entry.key();
            if b > now {
                return None;
            }
            let Some(h) = entry.get_mut().pop() else {
                entry.remove();
                continue;
            };
            if entry.get().is_empty() {
                entry.remove();
            }
            self.timer_entries = self.timer_entries.saturating_sub(1);
            if let Some(j) = self.slab.get_mut(h) {
                if j.awakeme != 0 && bucket(j.awakeme) == b {
                    j.awakeme = 0;
                    return Some(h);
                }
            }
            self.timer_stale = self.timer_stale.saturating_sub(1);
        }
    }

    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = (JobHandle, &Job)> {
        self.slab.iter_from(from)
    }

    pub fn slots(&self) -> usize {
        self.slab.capacity_slots()
    }

    pub fn handles(&self) -> Vec<JobHandle> {
        self.slab.handles()
    }

    pub fn footprint(&self) -> Footprint {
        let mut f = Footprint {
            jobs: self.slab.len(),
            record: std::mem::size_of::<Job>(),
            slot: Slab::<Job>::slot_bytes(),
            slab: self.slab.heap_bytes(),
            index: self.index.iter().map(|t| t.allocation_size()).sum(),
            timers: self.awake.values().map(|v| v.capacity() * 4).sum(),
            ..Footprint::default()
        };
        for (_, j) in self.slab.iter() {
            if let Some(b) = &j.body {
                f.bodies += b.alloc_size();
                f.body_allocs += 1;
            }
            f.node_lists += j.nodes_delivered.heap_bytes();
        }
        f
    }

    pub fn clear(&mut self) {
        self.slab.clear();
        self.index = empty_index();
        self.awake.clear();
        self.timer_entries = 0;
        self.timer_stale = 0;
        self.compact_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u32) -> Job {
        let mut id = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-05a1";
        id[28..34].copy_from_slice(format!("{n:06}").as_bytes());
        crate::engine::Engine::new_job(JobId(id))
    }

    fn entries(s: &JobStore) -> usize {
        s.awake.values().map(Vec::len).sum()
    }

    /// Jobs acknowledged or sent to disk whole soon after they were
    /// scheduled take their entries along; the jobs still scheduled are
    /// each popped once.
    #[test]
    fn timers_of_jobs_that_move_or_leave_go_with_them() {
        let mut s = JobStore::default();
        let mut hs = Vec::new();
        for n in 0..3000u32 {
            let h = s.insert_new(job(n)).expect("new");
            s.schedule(h, 300_000 + u64::from(n));
            hs.push(h);
        }
        assert_eq!(entries(&s), 3000);
        for (i, &h) in hs.iter().enumerate() {
            match i % 3 {
                // Acknowledged and removed.
                0 => {
                    s.remove(h);
                }
                // Sent to disk whole.
                1 => {
                    s.evict(h, crate::engine::cold::COLD_TAG | i as u32)
                        .expect("evicted");
                }
                // Left scheduled.
                _ => {}
            }
        }
        assert_eq!(entries(&s), 1000, "one entry per job still scheduled");
        let mut popped = Vec::new();
        while let Some(h) = s.pop_due(u64::MAX) {
            popped.push(h);
        }
        popped.sort_unstable();
        let mut want: Vec<JobHandle> = hs.iter().skip(2).step_by(3).copied().collect();
        want.sort_unstable();
        assert_eq!(popped, want);
    }

    /// Only the newest entries of a bucket are searched: an old one is
    /// left stale, and skipped when popped.
    #[test]
    fn a_timer_deep_in_a_large_bucket_is_left_stale_and_skipped() {
        let mut s = JobStore::default();
        let mut hs = Vec::new();
        for n in 0..(DROP_SCAN as u32 + 100) {
            let h = s.insert_new(job(n)).expect("new");
            s.schedule(h, 5_000);
            hs.push(h);
        }
        s.remove(hs[0]);
        assert_eq!(entries(&s), hs.len(), "stale, not searched for");
        let mut n = 0;
        while s.pop_due(5_000).is_some() {
            n += 1;
        }
        assert_eq!(n, hs.len() - 1);
    }

    /// Jobs delivered long after they were queued leave their first
    /// entries behind: once they are most of the entries, the compaction
    /// drops them (and those of jobs gone), a budget at a time, and keeps
    /// every live one, each popped once when due.
    #[test]
    fn stale_timer_entries_are_compacted_away_and_live_ones_kept() {
        let mut s = JobStore::default();
        let n = 3 * COMPACT_MIN_STALE as u32;
        let hs: Vec<JobHandle> = (0..n)
            .map(|i| {
                let h = s.insert_new(job(i)).expect("new");
                s.schedule(h, 300_000 + u64::from(i % 50) * 10);
                h
            })
            .collect();
        // Each moves to a later bucket of its own (its first entry now
        // stale), and a third then leave the table (taking their new
        // entries along).
        for (i, &h) in hs.iter().enumerate() {
            s.schedule(h, 600_000 + i as u64 * 10);
        }
        for &h in hs.iter().step_by(3) {
            s.remove(h);
        }
        let live = hs.len() - hs.len().div_ceil(3);
        assert_eq!(entries(&s), 2 * hs.len() - hs.len().div_ceil(3));
        let before = s.footprint().timers;
        let mut calls = 0;
        loop {
            s.compact_timers(1000);
            calls += 1;
            if s.compact_at.is_none() {
                break;
            }
        }
        assert!(calls > 5, "a budget at a time: {calls} calls");
        assert_eq!(entries(&s), live);
        assert_eq!(s.timer_entries, live);
        assert!(s.footprint().timers < before, "the buckets shrank");
        // Nothing stale is left to start another pass.
        assert_eq!(s.compact_timers(1000), 0);
        assert_eq!(s.pop_due(599_999), None);
        let mut popped = Vec::new();
        while let Some(h) = s.pop_due(u64::MAX) {
            popped.push(h);
        }
        popped.sort_unstable();
        let mut want: Vec<JobHandle> = hs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, &h)| h)
            .collect();
        want.sort_unstable();
        assert_eq!(popped, want);
    }

    /// Random scheduling, removals, compaction steps and pops against a
    /// model of each job's wake-up time: every pop is a job due then,
    /// and every job due is popped exactly once.
    #[test]
    fn compaction_never_changes_what_comes_due() {
        use rand::{Rng, SeedableRng};
        for seed in 0..8u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut s = JobStore::default();
            let mut model: std::collections::HashMap<JobHandle, u64> = Default::default();
            let mut next_id = 0u32;
            let mut now = 1_000u64;
            for _ in 0..8_000 {
                match rng.gen_range(0..100) {
                    0..30 => {
                        if let Some(h) = s.insert_new(job(next_id)) {
                            let when = now + rng.gen_range(1..5_000);
                            s.schedule(h, when);
                            model.insert(h, when);
                        }
                        next_id += 1;
                    }
                    30..60 if !model.is_empty() => {
                        let h = *model
                            .keys()
                            .nth(rng.gen_range(0..model.len()))
                            .expect("some");
                        let when = match rng.gen_range(0..4) {
                            0 => 0,
                            _ => now + rng.gen_range(1..5_000),
                        };
                        s.schedule(h, when);
                        model.insert(h, when);
                    }
                    60..75 if !model.is_empty() => {
                        let h = *model
                            .keys()
                            .nth(rng.gen_range(0..model.len()))
                            .expect("some");
                        s.remove(h);
                        model.remove(&h);
                    }
                    75..85 => {
                        // Small thresholds' worth: force passes often.
                        s.timer_stale = s.timer_stale.max(COMPACT_MIN_STALE);
                        s.timer_stale = s.timer_stale.max(s.timer_entries.div_ceil(2));
                        s.compact_timers(rng.gen_range(1..200));
                    }
                    _ => {
                        now += rng.gen_range(0..200);
                        let mut got = Vec::new();
                        while let Some(h) = s.pop_due(now) {
                            got.push(h);
                        }
                        for h in &got {
                            let when = model.get(h).copied().unwrap_or(0);
                            assert!(
                                when != 0 && bucket(when) <= now,
                                "seed {seed}: popped {h} due at {when}, now {now}"
                            );
                            model.insert(*h, 0);
                        }
                        let missed = model
                            .iter()
                            .filter(|(_, &w)| w != 0 && bucket(w) <= now)
                            .count();
                        assert_eq!(missed, 0, "seed {seed}: due jobs not popped at {now}");
                        assert_eq!(
                            got.len(),
                            got.iter().collect::<std::collections::HashSet<_>>().len()
                        );
                    }
                }
            }
        }
    }
}
