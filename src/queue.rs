//! Queues: an ordered set of queued jobs (by creation time), the FIFO of
//! clients blocked on it, pause flags, counters and federation bookkeeping.
//! Jobs are referenced by their job-store handle; the engine owns both.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use crate::job::NodeIdx;

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
    pub responders: HashMap<NodeIdx, u64>,
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

pub struct Queue {
    pub name: Bytes,
    /// The same name, shared by every job of the queue (one allocation).
    pub shared_name: crate::job::QueueName,
    /// Order key (creation time) -> job handle. A key already taken (equal
    /// ctimes from different nodes) is bumped to the next free value, which
    /// keeps each entry at 12 bytes instead of a (ctime, handle) pair.
    jobs: BTreeMap<u64, u32>,
    /// Creation time, unix seconds.
    pub ctime: u64,
    /// Last enqueue/pop, unix seconds.
    pub atime: u64,
    pub blocked: VecDeque<ClientId>,
    pub paused: u8,
    pub jobs_in: u64,
    pub jobs_out: u64,
    pub fed: Federation,
}

impl Queue {
    pub fn new(name: Bytes, now_s: u64) -> Queue {
        Queue {
            shared_name: crate::job::QueueName::from(&name[..]),
            name,
            jobs: BTreeMap::new(),
            ctime: now_s,
            atime: now_s,
            blocked: VecDeque::new(),
            paused: 0,
            jobs_in: 0,
            jobs_out: 0,
            fed: Federation::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Insert a job handle in creation-time order.
    pub fn insert(&mut self, ctime: u64, h: u32) {
        let mut k = ctime;
        // One tree descent in the common case (key free).
        loop {
            match self.jobs.entry(k) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(h);
                    return;
                }
                std::collections::btree_map::Entry::Occupied(_) => k = k.wrapping_add(1),
            }
        }
    }

    /// Remove a job handle inserted with this ctime.
    pub fn remove(&mut self, ctime: u64, h: u32) -> bool {
        let near = self
            .jobs
            .range(ctime..)
            .take(1024)
            .find(|(_, &v)| v == h)
            .map(|(&k, _)| k);
        // Bumped keys stay next to their ctime; the full scan is a safety net.
        let key = near.or_else(|| self.jobs.iter().find(|(_, &v)| v == h).map(|(&k, _)| k));
        match key {
            Some(k) => self.jobs.remove(&k).is_some(),
            None => false,
        }
    }

    /// Oldest job.
    pub fn pop(&mut self) -> Option<u32> {
        self.jobs.pop_first().map(|(_, h)| h)
    }

    /// Job handles oldest first (`.rev()` for newest first).
    pub fn handles(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.jobs.values().copied()
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

    #[test]
    fn pause_names() {
        assert_eq!(Queue::pause_name(0), "none");
        assert_eq!(Queue::pause_name(PAUSE_IN), "in");
        assert_eq!(Queue::pause_name(PAUSE_OUT), "out");
        assert_eq!(Queue::pause_name(PAUSE_IN | PAUSE_OUT), "all");
    }
}
