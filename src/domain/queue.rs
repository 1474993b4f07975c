//! Queues: an ordered set of queued jobs (by creation time), the FIFO of
//! clients blocked on it, pause flags, counters and federation bookkeeping.
//! Jobs are referenced by their job-store handle; the engine owns both.
//!
//! Jobs with a PRIORITY other than the default sit in per-level lanes
//! (`Lanes`), allocated the first time such a job is queued: a queue of
//! plain jobs pays one empty pointer and one branch per pop.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::domain::job::NodeIdx;
use crate::domain::job_ext::{PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN};

/// Slot of a level in `Lanes` (clamped into the range).
fn lane_index(level: u8) -> usize {
    usize::from(level.clamp(PRIORITY_MIN, PRIORITY_MAX) - PRIORITY_MIN)
}

pub const PAUSE_IN: u8 = 1;
pub const PAUSE_OUT: u8 = 2;

/// Identifier of a client connection (also used for blocked clients).
pub type ClientId = u64;

/// Import-rate window and NEEDJOBS schedule (federation).
#[derive(Default, Debug)]
pub struct Federation {
    pub bcast_time: u64,
    pub bcast_attempt: u32,
    pub adhoc_time: u64,
    pub adhoc_attempt: u32,
    /// node -> last unix second it sent us jobs for this queue.
    /// Fixed-seed hash (node indexes are ours): iteration order repeats
    /// for a simulation seed.
    pub responders: std::collections::HashMap<NodeIdx, u64, foldhash::fast::FixedState>,
    /// When jobs for this queue last arrived from a node (ms): an ask sent
    /// before that was answered.
    pub last_import: u64,
    /// Nodes that asked for more jobs than we had (NEEDJOBS): (node, jobs
    /// still wanted, until when in ms). Jobs queued here meanwhile go to
    /// them (YOURJOBS) while no local client waits, instead of waiting for
    /// their next ask.
    pub demand: Vec<(NodeIdx, u32, u64)>,
    pub cur_window_start: u64,
    pub cur_count: u64,
    pub prev_window_start: u64,
    pub prev_count: u64,
}

impl Federation {
    /// Jobs per second imported recently (0 when the window is stale).
    pub fn import_rate(&self, now_ms: u64) -> u64 {
        if self.cur_window_start == 0 || now_ms.saturating_sub(self.cur_window_start) > 5000 {
            return 0;
        }
        let elapsed = now_ms.saturating_sub(self.prev_window_start).max(50);
        ((self.prev_count + self.cur_count) * 1000).div_ceil(elapsed)
    }

    pub fn record_import(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.cur_window_start) > 1000 {
            self.prev_window_start = self.cur_window_start;
            self.prev_count = self.cur_count;
            self.cur_window_start = now_ms;
            self.cur_count = 0;
        }
        self.cur_count += 1;
    }
}

/// Jobs in creation-time order, as a deque of sorted chunks of at most
/// `CHUNK` 12-byte entries. Jobs arrive almost always in order (local
/// creation times only grow), so an insert is an append to the last chunk
/// and GETJOB pops from the front of the first: about 12 bytes per queued
/// job instead of ~26 for a B-tree entry. An out-of-order insert (a job
/// from another node, a requeue) binary-searches the chunk and shifts at
/// most one chunk; a full chunk splits in two. Chunks grow by doubling up
/// to `CHUNK`, so a one-job queue stays small and no allocation is ever
/// larger than one chunk (no reallocation cliffs as the queue grows).
#[derive(Default)]
struct OrderIndex {
    chunks: VecDeque<Chunk>,
    len: usize,
}

/// Entries per chunk (3 KB).
const CHUNK: usize = 256;

/// A creation time split in two halves (no padding: 12 bytes, not 16)
/// and the job handle.
#[derive(Clone, Copy)]
struct Entry {
    hi: u32,
    lo: u32,
    h: u32,
}

impl Entry {
    fn new(key: u64, h: u32) -> Entry {
        Entry {
            hi: (key >> 32) as u32,
            lo: key as u32,
            h,
        }
    }
    fn key(&self) -> u64 {
        u64::from(self.hi) << 32 | u64::from(self.lo)
    }
}

/// Sorted entries; the first `start` are already popped (a pop from the
/// front is O(1), not a shift of the whole chunk).
struct Chunk {
    start: usize,
    entries: Vec<Entry>,
}

impl Chunk {
    fn live(&self) -> &[Entry] {
        &self.entries[self.start..]
    }
    fn last_key(&self) -> u64 {
        self.entries.last().map_or(0, Entry::key)
    }
    fn is_full(&self) -> bool {
        self.entries.len() >= CHUNK
    }
    /// Room for one more entry at `at` (an index into `entries`); false
    /// when full.
    fn insert(&mut self, at: usize, e: Entry) -> bool {
        if self.is_full() {
            if self.start == 0 {
                return false;
            }
            // Reclaim the popped prefix instead of splitting.
            self.entries.drain(..self.start);
            let at = at - self.start;
            self.start = 0;
            self.entries.insert(at, e);
            return true;
        }
        if self.entries.len() == self.entries.capacity() {
            // Doubling up to CHUNK: never more than one chunk allocated.
            let want = (self.entries.capacity() * 2).clamp(4, CHUNK);
            self.entries.reserve_exact(want - self.entries.len());
        }
        self.entries.insert(at, e);
        true
    }
}

impl OrderIndex {
    fn len(&self) -> usize {
        self.len
    }

    fn insert(&mut self, key: u64, h: u32) {
        let e = Entry::new(key, h);
        self.len += 1;
        // Common case: not older than the newest entry, append.
        let append = self.chunks.back().is_none_or(|c| c.last_key() <= key);
        if append {
            if let Some(c) = self.chunks.back_mut() {
                let at = c.entries.len();
                if c.insert(at, e) {
                    return;
                }
            }
            let mut entries = Vec::with_capacity(4);
            entries.push(e);
            self.chunks.push_back(Chunk { start: 0, entries });
            return;
        }
        // The first chunk whose newest entry is newer than `key`; after
        // every equal key, so equal creation times keep insertion order.
        let ci = self.chunks.partition_point(|c| c.last_key() <= key);
        let Some(c) = self.chunks.get_mut(ci) else {
            return;
        };
        let at = c.start + c.live().partition_point(|x| x.key() <= key);
        if c.insert(at, e) {
            return;
        }
        // Full: split in two halves, then insert into the right one.
        let tail: Vec<Entry> = c.entries.split_off(CHUNK / 2);
        let right = Chunk {
            start: 0,
            entries: tail,
        };
        let (target, at) = if at <= CHUNK / 2 {
            (ci, at)
        } else {
            (ci + 1, at - CHUNK / 2)
        };
        self.chunks.insert(ci + 1, right);
        if let Some(c) = self.chunks.get_mut(target) {
            c.entries.insert(at, e);
        }
    }

    /// Remove the entry of handle `h` inserted with `key`.
    fn remove(&mut self, key: u64, h: u32) -> bool {
        let first = self.chunks.partition_point(|c| c.last_key() < key);
        let mut found = None;
        'search: for (ci, c) in self.chunks.iter().enumerate().skip(first) {
            let from = c.start + c.live().partition_point(|x| x.key() < key);
            for (i, x) in c.entries.iter().enumerate().skip(from) {
                if x.key() != key {
                    break 'search;
                }
                if x.h == h {
                    found = Some((ci, i));
                    break 'search;
                }
            }
        }
        let Some((ci, i)) = found else {
            return false;
        };
        if let Some(c) = self.chunks.get_mut(ci) {
            if i == c.start {
                c.start += 1;
            } else {
                c.entries.remove(i);
            }
            let live = c.entries.len() - c.start;
            if live == 0 {
                self.chunks.remove(ci);
            } else if live < c.entries.capacity() / 4 {
                // Mostly emptied by removals from the middle: give the
                // memory back (bounded at 4x the live entries).
                c.entries.drain(..c.start);
                c.start = 0;
                c.entries.shrink_to(live * 2);
            }
        }
        self.len -= 1;
        true
    }

    fn pop(&mut self) -> Option<u32> {
        let c = self.chunks.front_mut()?;
        let e = c.entries.get(c.start).copied();
        c.start += 1;
        if c.start >= c.entries.len() {
            self.chunks.pop_front();
        }
        let e = e?;
        self.len -= 1;
        Some(e.h)
    }

    fn handles(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.live().iter().map(|e| e.h))
    }

    /// Handles oldest first past the first `skip`, from the first entry
    /// created at or after `key` (chunks found by key, not walked).
    fn handles_from_key(&self, skip: usize, key: u64) -> impl Iterator<Item = u32> + '_ {
        let first = self.chunks.partition_point(|c| c.last_key() < key);
        let before: usize = self.chunks.iter().take(first).map(|c| c.live().len()).sum();
        let within = self
            .chunks
            .get(first)
            .map_or(0, |c| c.live().partition_point(|x| x.key() < key));
        // Entries before `key`, counted from the front, already skip part
        // (or all) of the positional skip.
        let rest = skip.saturating_sub(before + within);
        self.chunks
            .iter()
            .skip(first)
            .enumerate()
            .flat_map(move |(i, c)| {
                let from = if i == 0 { within } else { 0 };
                c.live()[from..].iter().map(|e| e.h)
            })
            .skip(rest)
    }

    /// Handles oldest first, skipping the first `skip` (whole chunks at once).
    fn handles_from(&self, mut skip: usize) -> impl Iterator<Item = u32> + '_ {
        let mut first = 0;
        for c in &self.chunks {
            let n = c.live().len();
            if skip < n {
                break;
            }
            skip -= n;
            first += 1;
        }
        self.chunks
            .iter()
            .skip(first)
            .flat_map(|c| c.live().iter().map(|e| e.h))
            .skip(skip)
    }
}

/// One order index per priority level, indexed by `level - PRIORITY_MIN`;
/// the default level's slot stays empty (its jobs are in `Queue::jobs`).
type Lanes = [OrderIndex; (PRIORITY_MAX - PRIORITY_MIN + 1) as usize];

pub struct Queue {
    pub name: Bytes,
    /// The same name, shared by every job of the queue (one allocation).
    pub shared_name: crate::domain::job::QueueName,
    /// Job handles of the default priority, ordered by creation time.
    jobs: OrderIndex,
    /// The other priority levels, once a job with one was queued.
    lanes: Option<Box<Lanes>>,
    /// Creation time, unix seconds.
    pub ctime: u64,
    /// Last enqueue/pop, unix seconds.
    pub atime: u64,
    pub blocked: VecDeque<ClientId>,
    pub paused: u8,
    pub jobs_in: u64,
    pub jobs_out: u64,
    pub fed: Federation,
    /// Jobs of this queue stored whole on disk (`engine::cold`): counted
    /// in `len`, not in the order index until they are read back.
    pub cold: usize,
}

impl Queue {
    pub fn new(name: Bytes, now_s: u64) -> Queue {
        Queue {
            shared_name: crate::domain::job::QueueName::from(&name[..]),
            name,
            jobs: OrderIndex::default(),
            lanes: None,
            ctime: now_s,
            atime: now_s,
            blocked: VecDeque::new(),
            paused: 0,
            jobs_in: 0,
            jobs_out: 0,
            fed: Federation::default(),
            cold: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.resident() + self.cold
    }

    /// Jobs in RAM (the order index), without those on disk.
    pub fn resident(&self) -> usize {
        match &self.lanes {
            None => self.jobs.len(),
            Some(l) => self.jobs.len() + l.iter().map(OrderIndex::len).sum::<usize>(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Insert a job handle of the default priority in creation-time order
    /// (after equal ones).
    pub fn insert(&mut self, ctime: u64, h: u32) {
        self.jobs.insert(ctime, h);
    }

    /// Remove a default-priority job handle inserted with this ctime.
    pub fn remove(&mut self, ctime: u64, h: u32) -> bool {
        self.jobs.remove(ctime, h)
    }

    /// Insert a job handle at a priority level (`PRIORITY_DEFAULT` for
    /// plain jobs; out-of-range levels are clamped).
    pub fn insert_prio(&mut self, level: u8, ctime: u64, h: u32) {
        if level == PRIORITY_DEFAULT {
            return self.jobs.insert(ctime, h);
        }
        let lanes = self.lanes.get_or_insert_with(Box::default);
        lanes[lane_index(level)].insert(ctime, h);
    }

    /// The next job to serve, not popped.
    pub fn first(&self) -> Option<u32> {
        if self.lanes.is_none() {
            return self
                .jobs
                .chunks
                .front()
                .and_then(|c| c.live().first())
                .map(|e| e.h);
        }
        self.handles().next()
    }

    /// Job handles in serving order after the first `skip` (whole chunks
    /// skipped at once when the queue has only the default level).
    pub fn handles_from(&self, skip: usize) -> Box<dyn Iterator<Item = u32> + '_> {
        if self.lanes.is_none() {
            return Box::new(self.jobs.handles_from(skip));
        }
        Box::new(self.handles().skip(skip))
    }

    /// Default-level job handles in serving order past the first `skip`,
    /// created at or after `key`: a cursor that removals before it do not
    /// move (a positional one skips a job for each). None for a queue
    /// with other priority levels (positions only there).
    pub fn handles_from_key(
        &self,
        skip: usize,
        key: u64,
    ) -> Option<impl Iterator<Item = u32> + '_> {
        self.lanes
            .is_none()
            .then(|| self.jobs.handles_from_key(skip, key))
    }

    /// Remove a job handle inserted with this level and ctime.
    pub fn remove_prio(&mut self, level: u8, ctime: u64, h: u32) -> bool {
        if level == PRIORITY_DEFAULT {
            return self.jobs.remove(ctime, h);
        }
        match &mut self.lanes {
            Some(l) => l[lane_index(level)].remove(ctime, h),
            None => false,
        }
    }

    /// The next job to serve: the oldest of the highest non-empty level.
    pub fn pop(&mut self) -> Option<u32> {
        let Some(lanes) = &mut self.lanes else {
            return self.jobs.pop();
        };
        let mid = lane_index(PRIORITY_DEFAULT);
        if let Some(h) = lanes[mid + 1..].iter_mut().rev().find_map(OrderIndex::pop) {
            return Some(h);
        }
        if let Some(h) = self.jobs.pop() {
            return Some(h);
        }
        lanes[..mid].iter_mut().rev().find_map(OrderIndex::pop)
    }

    /// Job handles in serving order: highest level first, oldest first
    /// within a level (`.rev()` for the reverse).
    pub fn handles(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        let mid = lane_index(PRIORITY_DEFAULT);
        let (high, low): (&[OrderIndex], &[OrderIndex]) = match &self.lanes {
            Some(l) => (&l[mid + 1..], &l[..mid]),
            None => (&[], &[]),
        };
        high.iter()
            .rev()
            .chain(std::iter::once(&self.jobs))
            .chain(low.iter().rev())
            .flat_map(OrderIndex::handles)
    }

    pub fn pause_name(flags: u8) -> &'static str {
        match flags & (PAUSE_IN | PAUSE_OUT) {
            0 => "none",
            PAUSE_IN => "in",
            PAUSE_OUT => "out",
            _ => "all",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_rate_windows() {
        let mut f = Federation::default();
        assert_eq!(f.import_rate(10_000), 0);
        f.record_import(10_000);
        f.record_import(10_010);
        assert!(f.import_rate(10_020) > 0);
        assert_eq!(f.import_rate(20_000), 0);
    }

    #[test]
    fn handles_from_key_skips_by_position_and_key() {
        let mut q = Queue::new(Bytes::from_static(b"q"), 0);
        // 1,000 jobs over several chunks, ctime 10, 20, ...; two share 500.
        for i in 0..1000u64 {
            q.insert((i + 1) * 10, i as u32);
        }
        q.insert(500, 5000);
        fn from(q: &Queue, skip: usize, key: u64) -> Vec<u32> {
            q.handles_from_key(skip, key)
                .expect("no lanes")
                .take(3)
                .collect()
        }
        assert_eq!(from(&q, 0, 0), vec![0, 1, 2]);
        assert_eq!(from(&q, 0, 500), vec![49, 5000, 50]);
        assert_eq!(from(&q, 0, 501), vec![50, 51, 52]);
        // The positional skip wins when it reaches further.
        assert_eq!(from(&q, 600, 501), vec![599, 600, 601]);
        assert_eq!(from(&q, 10, 3000), vec![299, 300, 301]);
        assert_eq!(from(&q, 0, 20_000), Vec::<u32>::new());
        // Removing jobs before the key does not move where it starts.
        for i in 0..100u32 {
            assert!(q.remove(u64::from(i + 1) * 10, i));
        }
        assert_eq!(from(&q, 0, 3000), vec![299, 300, 301]);
        q.insert_prio(PRIORITY_DEFAULT + 1, 1, 9999);
        assert!(q.handles_from_key(0, 0).is_none());
    }

    #[test]
    fn equal_ctimes_keep_all_jobs_in_order() {
        let mut q = Queue::new(Bytes::from_static(b"q"), 0);
        q.insert(10, 1);
        q.insert(10, 2);
        q.insert(11, 3);
        q.insert(5, 4);
        assert_eq!(q.handles().collect::<Vec<_>>(), vec![4, 1, 2, 3]);
        assert!(q.remove(10, 2));
        assert!(!q.remove(10, 2));
        assert!(q.remove(11, 3));
        assert_eq!(q.pop(), Some(4));
        assert_eq!(q.pop(), Some(1));
        assert!(q.is_empty());
    }

    /// The chunked index against a plain sorted vector: in-order appends,
    /// older inserts (splits), equal keys, removals anywhere, pops.
    #[test]
    fn order_index_matches_a_sorted_vector() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for round in 0..20 {
            let mut idx = OrderIndex::default();
            let mut model: Vec<(u64, u32)> = Vec::new();
            let mut next_key = 1000u64;
            let mut next_h = 0u32;
            for _ in 0..5000 {
                match rng.gen_range(0..10) {
                    0..=4 => {
                        let key = if rng.gen_range(0..4) == 0 && next_key > 1000 {
                            rng.gen_range(1000..next_key)
                        } else {
                            next_key += rng.gen_range(0..3);
                            next_key
                        };
                        next_h += 1;
                        idx.insert(key, next_h);
                        let at = model.partition_point(|&(k, _)| k <= key);
                        model.insert(at, (key, next_h));
                    }
                    5..=6 if !model.is_empty() => {
                        let (k, h) = model.remove(rng.gen_range(0..model.len()));
                        assert!(idx.remove(k, h));
                        assert!(!idx.remove(k, h));
                    }
                    7 => {
                        let want = (!model.is_empty()).then(|| model.remove(0).1);
                        assert_eq!(idx.pop(), want);
                    }
                    _ => {}
                }
                assert_eq!(idx.len(), model.len());
            }
            let got: Vec<u32> = idx.handles().collect();
            let want: Vec<u32> = model.iter().map(|&(_, h)| h).collect();
            assert_eq!(got, want, "round {round}");
            for skip in [0, 1, 255, 256, 257, want.len() / 2, want.len()] {
                let from: Vec<u32> = idx.handles_from(skip).collect();
                assert_eq!(from, want.iter().skip(skip).copied().collect::<Vec<_>>());
            }
            let back: Vec<u32> = idx.handles().rev().collect();
            assert_eq!(back, want.iter().rev().copied().collect::<Vec<_>>());
            assert!(idx
                .chunks
                .iter()
                .all(|c| c.entries.capacity() <= CHUNK && c.entries.len() > c.start));
            while idx.pop().is_some() {}
            assert!(idx.chunks.is_empty());
        }
    }

    #[test]
    fn higher_levels_first_fifo_within_a_level() {
        let mut q = Queue::new(Bytes::from_static(b"q"), 0);
        q.insert_prio(PRIORITY_DEFAULT, 10, 1);
        q.insert_prio(1, 5, 2);
        q.insert_prio(9, 30, 3);
        q.insert_prio(7, 20, 4);
        q.insert_prio(9, 25, 5);
        q.insert_prio(PRIORITY_DEFAULT, 8, 6);
        assert_eq!(q.len(), 6);
        assert_eq!(q.handles().collect::<Vec<_>>(), vec![5, 3, 4, 6, 1, 2]);
        assert_eq!(
            q.handles().rev().collect::<Vec<_>>(),
            vec![2, 1, 6, 4, 3, 5]
        );
        assert!(q.remove_prio(7, 20, 4));
        assert!(!q.remove_prio(8, 20, 4));
        assert!(!q.remove_prio(PRIORITY_DEFAULT, 30, 3));
        let mut order = Vec::new();
        while let Some(h) = q.pop() {
            order.push(h);
        }
        assert_eq!(order, vec![5, 3, 6, 1, 2]);
        assert!(q.is_empty());
    }

    #[test]
    fn pause_names() {
        assert_eq!(Queue::pause_name(0), "none");
        assert_eq!(Queue::pause_name(PAUSE_IN), "in");
        assert_eq!(Queue::pause_name(PAUSE_OUT), "out");
        assert_eq!(Queue::pause_name(PAUSE_IN | PAUSE_OUT), "all");
    }
}
