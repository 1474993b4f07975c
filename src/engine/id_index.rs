//! One shard of the job-ID index: a flat open-addressing table of 8-byte
//! entries (`hash32 << 32 | handle`), linear probing, backward-shift
//! deletion (no tombstones).
//!
//! Why not hashbrown: its control bytes and its entries are two arrays,
//! so in an index larger than the cache every insert and lookup misses
//! twice, once for the control group and once for the entry, and those
//! misses dominate an insert (docs/PERFORMANCE.md, "Where the CPU goes").
//! Here the entry is its own control word: one miss, and the next probes
//! are usually in the same cache line (8 entries per line).
//!
//! The stored 32 hash bits are enough to place an entry, so growing (and
//! shrinking, under 1/8 full) rehashes without touching any job. The load
//! stays at most 3/4: linear probing needs about 2.5 probes per hit and
//! 8.5 per miss there, one or two cache lines.

/// An unused slot. No real entry has it: slab handles stop below
/// `u32::MAX`.
const EMPTY: u64 = u64::MAX;

/// Slots of a shard's first allocation.
const MIN_SLOTS: usize = 8;

#[derive(Default)]
pub struct IdShard {
    /// Empty, or a power-of-two number of slots.
    slots: Vec<u64>,
    len: usize,
}

/// A hint to the CPU to load `v`'s cache line; no effect on what the
/// program computes (nothing is read through the pointer).
#[inline(always)]
fn prefetch_read<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing into the program;
    // the pointer comes from a reference anyway. (`unused_unsafe`: newer
    // compilers declare the intrinsic safe.)
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(v).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

fn entry(h32: u32, handle: u32) -> u64 {
    u64::from(h32) << 32 | u64::from(handle)
}

fn hash_bits(v: u64) -> u32 {
    (v >> 32) as u32
}

impl IdShard {
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    fn home(&self, h32: u32) -> usize {
        h32 as usize & self.mask()
    }

    /// Start loading the slot where a search for these hash bits begins,
    /// so that a `vacant` or `find` issued a little later does not wait
    /// for memory: in a table of millions of IDs that first slot is a
    /// cache miss nearly every time (82 % of `insert_new`'s samples under
    /// pipelined ADDJOB, docs/PERFORMANCE.md run AO).
    pub fn prefetch(&self, h32: u32) {
        if let Some(slot) = self.slots.get(self.home(h32)) {
            prefetch_read(slot);
        }
    }

    /// The handle of an entry with these hash bits for which `is` holds
    /// (the caller compares the job's ID: equal bits are not equal IDs).
    pub fn find(&self, h32: u32, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.home(h32);
        loop {
            let v = *self.slots.get(i)?;
            if v == EMPTY {
                return None;
            }
            if hash_bits(v) == h32 && is(v as u32) {
                return Some(v as u32);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Where an entry with these hash bits goes (`Ok(slot)`, for `fill`),
    /// or the handle of a present one for which `is` holds (`Err`). Makes
    /// room first, so the slot stays valid until `fill` if nothing else
    /// changes the shard in between.
    pub fn vacant(&mut self, h32: u32, mut is: impl FnMut(u32) -> bool) -> Result<usize, u32> {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mut i = self.home(h32);
        loop {
            let v = self.slots.get(i).copied().unwrap_or(EMPTY);
            if v == EMPTY {
                return Ok(i);
            }
            if hash_bits(v) == h32 && is(v as u32) {
                return Err(v as u32);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Store an entry in a slot `vacant` returned.
    pub fn fill(&mut self, slot: usize, h32: u32, handle: u32) {
        if let Some(s) = self.slots.get_mut(slot) {
            debug_assert_eq!(*s, EMPTY);
            *s = entry(h32, handle);
            self.len += 1;
        }
    }

    /// Point the entry of `old` (stored with these hash bits) at `new`
    /// in place: same hash bits, same slot, so no probe path changes.
    pub fn replace(&mut self, h32: u32, old: u32, new: u32) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let target = entry(h32, old);
        let mut i = self.home(h32);
        loop {
            match self.slots.get(i).copied() {
                Some(v) if v == target => {
                    self.slots[i] = entry(h32, new);
                    return true;
                }
                Some(v) if v != EMPTY => i = (i + 1) & self.mask(),
                _ => return false,
            }
        }
    }

    /// Remove the entry of `handle` (stored with these hash bits); the
    /// entries after it in its run move back so no probe sequence breaks.
    pub fn remove(&mut self, h32: u32, handle: u32) -> bool {
        let target = entry(h32, handle);
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.mask();
        let mut hole = self.home(h32);
        loop {
            match self.slots.get(hole) {
                Some(&v) if v == target => break,
                Some(&v) if v != EMPTY => hole = (hole + 1) & mask,
                _ => return false,
            }
        }
        let mut j = (hole + 1) & mask;
        loop {
            let v = self.slots.get(j).copied().unwrap_or(EMPTY);
            if v == EMPTY {
                break;
            }
            // `v` may fill the hole if the hole is on its probe path, i.e.
            // no farther from its home than where it sits now.
            let home = self.home(hash_bits(v));
            if hole.wrapping_sub(home) & mask < j.wrapping_sub(home) & mask {
                self.slots[hole] = v;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
        // Halve a shard that fell under 1/8 full (back to 1/4: far from
        // the 3/4 that doubles it), so the index shrinks after a backlog
        // drains as the job table does.
        if self.len * 8 < self.slots.len() && self.slots.len() > MIN_SLOTS {
            self.resize(self.slots.len() / 2);
        }
        true
    }

    /// Double the slots (one shard at a time: a bounded step).
    fn grow(&mut self) {
        self.resize((self.slots.len() * 2).max(MIN_SLOTS));
    }

    /// Rehash into `n` slots (a power of two, more than `len`) from the
    /// stored hash bits.
    fn resize(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; n]);
        let mask = n - 1;
        for v in old.into_iter().filter(|&v| v != EMPTY) {
            let mut i = hash_bits(v) as usize & mask;
            while self.slots[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = v;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn allocation_size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    fn insert(s: &mut IdShard, h32: u32, handle: u32) -> bool {
        match s.vacant(h32, |x| x == handle) {
            Ok(slot) => {
                s.fill(slot, h32, handle);
                true
            }
            Err(_) => false,
        }
    }

    /// Random inserts, lookups, removals and replacements against a map, with few
    /// distinct hash values so runs are long, collide and wrap around the
    /// end of the table.
    #[test]
    fn matches_a_map_under_random_operations() {
        for seed in 0..20u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut s = IdShard::default();
            let mut model: HashMap<u32, u32> = HashMap::new();
            let spread = [4u32, 64, u32::MAX][seed as usize % 3];
            let mut next = 0u32;
            for step in 0..4000 {
                match rng.gen_range(0..10) {
                    0..=4 => {
                        let h32 = rng.gen_range(0..=spread);
                        assert!(insert(&mut s, h32, next), "seed {seed} step {step}");
                        model.insert(next, h32);
                        next += 1;
                    }
                    5..=7 if !model.is_empty() => {
                        let k = *model.keys().nth(rng.gen_range(0..model.len())).unwrap();
                        let h32 = model.remove(&k).unwrap();
                        assert!(s.remove(h32, k), "seed {seed} step {step}");
                        assert!(!s.remove(h32, k));
                    }
                    8 if !model.is_empty() => {
                        // An entry handed to another handle in place.
                        let k = *model.keys().nth(rng.gen_range(0..model.len())).unwrap();
                        let h32 = model.remove(&k).unwrap();
                        assert!(s.replace(h32, k, next), "seed {seed} step {step}");
                        assert!(!s.replace(h32, k, next));
                        model.insert(next, h32);
                        next += 1;
                    }
                    _ => {}
                }
                assert_eq!(s.len(), model.len());
                if step % 97 == 0 {
                    for (&k, &h32) in &model {
                        assert_eq!(s.find(h32, |x| x == k), Some(k), "seed {seed}");
                    }
                    assert_eq!(s.find(7, |x| x == next + 1), None);
                }
            }
            for (&k, &h32) in &model {
                assert_eq!(s.find(h32, |x| x == k), Some(k), "seed {seed}");
            }
            assert!(s.slots.len() * 3 >= s.len() * 4, "load stays at most 3/4");
        }
    }

    /// Fill, drain to a few, fill again: the shard halves as it empties,
    /// every entry left stays findable, and a shrink never undoes itself
    /// at once (1/8 full shrinks to 1/4, 3/4 grows).
    #[test]
    fn a_drained_shard_shrinks_and_keeps_what_is_left() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut s = IdShard::default();
        let mut model: HashMap<u32, u32> = HashMap::new();
        for round in 0..3u32 {
            for k in 0..20_000u32 {
                let h = round * 100_000 + k;
                let h32 = rng.gen();
                assert!(insert(&mut s, h32, h));
                model.insert(h, h32);
            }
            let full = s.slots.len();
            let mut keys: Vec<u32> = model.keys().copied().collect();
            keys.sort_unstable();
            for k in keys.into_iter().skip(10) {
                let h32 = model.remove(&k).unwrap();
                assert!(s.remove(h32, k), "round {round}");
                assert!(s.len() * 8 >= s.slots.len() || s.slots.len() == MIN_SLOTS);
            }
            assert!(s.slots.len() <= 128, "{} slots of {full}", s.slots.len());
            for (&k, &h32) in &model {
                assert_eq!(s.find(h32, |x| x == k), Some(k), "round {round}");
            }
        }
    }

    #[test]
    fn a_present_entry_is_reported_not_duplicated() {
        let mut s = IdShard::default();
        assert!(s.is_empty());
        assert!(insert(&mut s, 9, 1));
        assert_eq!(s.vacant(9, |x| x == 1), Err(1));
        // Same bits, another job: both kept.
        assert!(insert(&mut s, 9, 2));
        assert_eq!(s.len(), 2);
        assert_eq!(s.find(9, |x| x == 2), Some(2));
        assert!(!s.remove(8, 2), "wrong hash bits find nothing");
        assert!(s.remove(9, 1));
        assert_eq!(s.find(9, |x| x == 2), Some(2));
        assert_eq!(IdShard::default().find(9, |_| true), None);
        assert!(!IdShard::default().remove(9, 1));
    }
}
