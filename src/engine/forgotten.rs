//! Recently forgotten acknowledged jobs. Once an acknowledged job is
//! garbage-collected (or a SETACK/DELJOB arrives for a job this node never
//! stored), nothing says it was acknowledged, so a late REPLJOB or YOURJOBS
//! (delayed by retransmissions, or sent on another link that overtook
//! the GC) would create the job again, and its retry timer would deliver it
//! a second time; a WILLQUEUE from a holder that missed the SETACK would
//! find nobody to answer it. This set remembers such IDs for a while, so
//! those messages are answered with SETACK instead (docs/RELIABILITY.md,
//! "Duplicate deliveries"; docs/COMPATIBILITY.md).
//!
//! Memory is bounded: two generations of 64-bit keyed hashes, the older
//! dropped when the newer is `WINDOW_MS` old or holds `GEN_CAP` IDs, so an
//! ID is remembered for between one and two windows (less under a very
//! high acknowledgement rate) and the set never exceeds 2 × `GEN_CAP`
//! entries (~4 MB). A hash collision could only refuse a REPLJOB whose ID
//! collides in 64 bits with a recently acknowledged one.

use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::domain::job::JobId;

/// How long a generation collects IDs before it becomes the older one.
const WINDOW_MS: u64 = 60_000;
/// IDs per generation.
const GEN_CAP: usize = 131_072;

pub struct Forgotten {
    hasher: std::collections::hash_map::RandomState,
    cur: HashSet<u64, NoHash>,
    prev: HashSet<u64, NoHash>,
    cur_since: u64,
}

/// The keys already are keyed SipHash values: hash them as they are.
#[derive(Default, Clone, Copy)]
pub struct NoHash;

impl BuildHasher for NoHash {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

#[derive(Default)]
pub struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl Default for Forgotten {
    fn default() -> Self {
        Forgotten {
            hasher: std::collections::hash_map::RandomState::new(),
            cur: HashSet::default(),
            prev: HashSet::default(),
            cur_since: 0,
        }
    }
}

impl Forgotten {
    /// Remember that `id` was acknowledged (cluster-wide) and may be gone.
    pub fn insert(&mut self, id: &JobId, now: u64) {
        if self.cur.len() >= GEN_CAP || now.saturating_sub(self.cur_since) >= WINDOW_MS {
            self.prev = std::mem::take(&mut self.cur);
            self.cur_since = now;
        }
        self.cur.insert(self.hasher.hash_one(id.0));
    }

    pub fn contains(&self, id: &JobId) -> bool {
        // Asked for every replicated job: skip the hash while nothing was
        // acknowledged lately (a producer-only load).
        if self.is_empty() {
            return false;
        }
        let h = self.hasher.hash_one(id.0);
        self.cur.contains(&h) || self.prev.contains(&h)
    }

    pub fn clear(&mut self) {
        self.cur.clear();
        self.prev.clear();
    }

    pub fn len(&self) -> usize {
        self.cur.len() + self.prev.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> JobId {
        let s = format!("D-00000000-{n:024}-0001");
        JobId::parse(s.as_bytes()).expect("valid id")
    }

    #[test]
    fn remembers_for_one_to_two_windows() {
        let mut f = Forgotten::default();
        f.insert(&id(1), 1000);
        assert!(f.contains(&id(1)));
        assert!(!f.contains(&id(2)));
        f.insert(&id(2), 1000 + WINDOW_MS);
        assert!(f.contains(&id(1)), "kept one more window");
        f.insert(&id(3), 1000 + 2 * WINDOW_MS);
        assert!(!f.contains(&id(1)));
        assert!(f.contains(&id(2)) && f.contains(&id(3)));
    }

    #[test]
    fn bounded_by_count() {
        let mut f = Forgotten::default();
        for n in 0..(3 * GEN_CAP as u32) {
            f.insert(&id(n), 5);
        }
        assert!(f.len() <= 2 * GEN_CAP);
        assert!(f.contains(&id(3 * GEN_CAP as u32 - 1)));
    }
}
