//! Memory pressure (`maxmemory`, docs/COMMANDS.md#dispatch-and-common-errors): warning levels derived from the allocator's
//! byte count and `maxmemory`, and eviction of acked or already-delivered
//! at-most-once jobs (then idle queues) when above 95%.

use rand::Rng;

use super::Engine;
use crate::domain::job::{JobState, F_DELIVERED};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Acks,
    NoEviction,
}

pub struct MemoryConfig {
    pub maxmemory: u64,
    pub policy: Policy,
    /// Bytes currently allocated by the process.
    pub used: fn() -> usize,
}

fn zero() -> usize {
    0
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            maxmemory: 0,
            policy: Policy::Acks,
            used: zero,
        }
    }
}

/// Per call, `free_memory_if_needed` samples at most this many job slots
/// and evicts at most `MAX_EVICTIONS` jobs (about a millisecond's work):
/// one command never stalls the node for long, and the next call goes on
/// where this one stopped. Counts rather than a clock, so the engine stays
/// deterministic.
const MAX_SAMPLES: u32 = 50_000;
const MAX_EVICTIONS: u32 = 1_000;

impl Engine {
    /// 0 normal, 1 above 75% of maxmemory, 2 above 95%. While the spill
    /// tier takes bodies (enabled, no write fault, disk budget left), level
    /// 1 does not apply: new jobs stay local and their bodies go to disk
    /// instead of being replicated away; 95% still refuses.
    pub fn memory_level(&self) -> u8 {
        let max = self.memory.maxmemory;
        if max == 0 {
            return 0;
        }
        let used = (self.memory.used)() as u64;
        if used > max / 100 * 95 {
            2
        } else if used > max / 100 * 75 && !self.spill_absorbs() {
            1
        } else {
            0
        }
    }

    /// Seconds an empty queue may stay idle before eviction.
    pub fn max_queue_idle(&self) -> u64 {
        match self.memory_level() {
            0 => 300,
            1 => 10,
            _ => 2,
        }
    }

    /// Try to get under 95% of maxmemory. Returns false if it could not
    /// (deny-oom commands must then be refused).
    pub fn free_memory_if_needed(&mut self, now: u64) -> bool {
        if self.memory_level() < 2 {
            return true;
        }
        if self.memory.policy == Policy::NoEviction {
            return false;
        }
        let mut misses = 0;
        let mut sampled = 0u32;
        let mut evicted = 0u32;
        while self.memory_level() >= 2 {
            if self.store.is_empty() {
                let before = self.queues.len();
                self.evict_idle_queues(now);
                return self.memory_level() < 2
                    || (self.queues.len() < before && self.memory_level() < 2);
            }
            sampled += 1;
            let slots = self.store.slots();
            let h = self.rng.gen_range(0..slots.max(1)) as u32;
            let evictable = self
                .store
                .get(h)
                .map(|j| j.state == JobState::Acked || (j.retry == 0 && j.has(F_DELIVERED)));
            match evictable {
                Some(true) => {
                    self.counters.evicted += 1;
                    self.delete_job(h, now);
                    misses = 0;
                    evicted += 1;
                }
                Some(false) => misses += 1,
                None => {}
            }
            if misses >= 10 || sampled >= MAX_SAMPLES || evicted >= MAX_EVICTIONS {
                return false;
            }
        }
        true
    }
}
