//! A minimal slab: values addressed by stable `u32` handles with free
//! lists. Jobs and queues live in slabs so that indexes and ordered sets can
//! refer to them with 4 bytes instead of a 40-byte ID, and so that SCAN
//! cursors are plain slot numbers that stay valid while the table changes.
//!
//! Slots live in fixed-size segments rather than one contiguous vector:
//! growing never copies existing slots and never allocates more than one
//! segment at a time, so used memory rises in small steps (a doubling
//! vector of 8k jobs would jump by a megabyte in one insert, straight past
//! the 75% maxmemory level to the 95% one) and a large table has no
//! multi-gigabyte reallocation stall. The first segment still starts small
//! and doubles up to the segment size, so a nearly empty slab stays cheap.
//! Each segment keeps its own free list, so one whose slots are all free
//! can give its memory back (`Seg`): the table shrinks in the same steps.

enum Slot<T> {
    Used(T),
    Free(u32),
}

/// Slots per segment: a power of two so a handle splits with a shift.
const SEG_BITS: u32 = 10;
const SEG: usize = 1 << SEG_BITS;
const SEG_MASK: usize = SEG - 1;

/// Whole segments left empty but allocated: a table that shrinks and grows
/// again by a few thousand slots does not free and allocate them each time.
const KEEP_IDLE: usize = 2;

/// One segment and its own free list. A segment whose slots all became free
/// while `KEEP_IDLE` others were already idle gives its memory back (its
/// vector is emptied): after a backlog drains, the table shrinks to what is
/// live (a job's slot is 120 bytes; a drained 10M-job backlog held 1.2 GB
/// of empty slots). Handles in a released segment stay valid numbers (SCAN
/// cursors) and come back when it is needed again.
struct Seg<T> {
    slots: Vec<Slot<T>>,
    /// Head of this segment's free list (a handle), NONE if full.
    free: u32,
    used: u32,
    /// In `Slab::open`.
    listed: bool,
    /// Counted in `Slab::idle`.
    idle: bool,
}

impl<T> Seg<T> {
    fn new(cap: usize) -> Self {
        Seg {
            slots: Vec::with_capacity(cap),
            free: NONE,
            used: 0,
            listed: false,
            idle: false,
        }
    }
}

/// Handle-addressed storage. Handles are reused after removal.
pub struct Slab<T> {
    /// Every segment but the last is full-size (`SEG` slots) or released.
    segs: Vec<Seg<T>>,
    /// Segments that may have a free slot, the one freed into last on top
    /// (an insert takes its slot from there: the slots just freed, still
    /// in cache).
    open: Vec<u32>,
    /// Released segments, to allocate again before growing the table.
    released: Vec<u32>,
    /// Full-size segments with no used slot that still hold their memory.
    idle: usize,
    len: usize,
    /// Slots ever allocated (the next never-used handle).
    slots: usize,
}

const NONE: u32 = u32::MAX;

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            segs: Vec::new(),
            open: Vec::new(),
            released: Vec::new(),
            idle: 0,
            len: 0,
            slots: 0,
        }
    }
}

impl<T> Slab<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots ever allocated (upper bound for handles and cursors).
    pub fn capacity_slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, h: u32) -> Option<&Slot<T>> {
        let h = h as usize;
        self.segs.get(h >> SEG_BITS)?.slots.get(h & SEG_MASK)
    }

    pub fn insert(&mut self, value: T) -> u32 {
        self.len += 1;
        let mut open = self.open_segment();
        if open.is_none() {
            if let Some(si) = self.released.pop() {
                self.reallocate(si);
                open = self.open_segment();
            }
        }
        if let Some(seg) = open.and_then(|si| self.segs.get_mut(si)) {
            let h = seg.free;
            if let Some(slot) = seg.slots.get_mut(h as usize & SEG_MASK) {
                seg.free = match *slot {
                    Slot::Free(n) => n,
                    Slot::Used(_) => NONE,
                };
                *slot = Slot::Used(value);
                if seg.idle {
                    seg.idle = false;
                    self.idle -= 1;
                }
                seg.used += 1;
                return h;
            }
        }
        let h = self.slots;
        if self.segs.last().is_none_or(|seg| seg.slots.len() >= SEG) {
            // Later segments are allocated whole: one bounded step.
            let cap = if self.segs.is_empty() { 0 } else { SEG };
            self.segs.push(Seg::new(cap));
        }
        if let Some(seg) = self.segs.last_mut() {
            if seg.slots.len() == seg.slots.capacity() {
                // Only the first segment grows in place, doubling up to SEG.
                let want = (seg.slots.capacity() * 2).clamp(4, SEG);
                seg.slots.reserve_exact(want - seg.slots.len());
            }
            seg.slots.push(Slot::Used(value));
            seg.used += 1;
        }
        self.slots += 1;
        h as u32
    }

    /// The listed segment with a free slot on top of `open`, dropping
    /// the entries of segments that filled up or were released since.
    fn open_segment(&mut self) -> Option<usize> {
        while let Some(&si) = self.open.last() {
            match self.segs.get_mut(si as usize) {
                Some(g) if g.free != NONE && !g.slots.is_empty() => return Some(si as usize),
                Some(g) => g.listed = false,
                None => {}
            }
            self.open.pop();
        }
        None
    }

    /// Give a released segment its slots back, all free, and list it.
    fn reallocate(&mut self, si: u32) {
        let Some(seg) = self.segs.get_mut(si as usize) else {
            return;
        };
        let base = si << SEG_BITS;
        seg.slots.reserve_exact(SEG);
        for i in 0..SEG as u32 {
            let next = if (i as usize) + 1 < SEG {
                base + i + 1
            } else {
                NONE
            };
            seg.slots.push(Slot::Free(next));
        }
        seg.free = base;
        seg.used = 0;
        seg.idle = true;
        self.idle += 1;
        if !seg.listed {
            seg.listed = true;
            self.open.push(si);
        }
    }

    pub fn remove(&mut self, h: u32) -> Option<T> {
        let si = h as usize >> SEG_BITS;
        let last = self.segs.len().saturating_sub(1);
        let seg = self.segs.get_mut(si)?;
        let slot = seg.slots.get_mut(h as usize & SEG_MASK)?;
        if matches!(slot, Slot::Free(_)) {
            return None;
        }
        let old = std::mem::replace(slot, Slot::Free(seg.free));
        seg.free = h;
        seg.used -= 1;
        self.len -= 1;
        if !seg.listed {
            seg.listed = true;
            self.open.push(si as u32);
        }
        if seg.used == 0 && seg.slots.len() == SEG && si < last {
            if self.idle >= KEEP_IDLE {
                seg.slots = Vec::new();
                seg.free = NONE;
                self.released.push(si as u32);
            } else {
                seg.idle = true;
                self.idle += 1;
            }
        }
        match old {
            Slot::Used(v) => Some(v),
            Slot::Free(_) => None,
        }
    }

    pub fn get(&self, h: u32) -> Option<&T> {
        match self.slot(h) {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        let h = h as usize;
        match self
            .segs
            .get_mut(h >> SEG_BITS)?
            .slots
            .get_mut(h & SEG_MASK)
        {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    /// Iterate used slots starting at `from` (inclusive), without walking
    /// the slots before it.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = (u32, &T)> {
        let first = from >> SEG_BITS;
        let offset = from & SEG_MASK;
        self.segs
            .iter()
            .enumerate()
            .skip(first)
            .flat_map(move |(si, seg)| {
                let skip = if si == first { offset } else { 0 };
                seg.slots
                    .iter()
                    .enumerate()
                    .skip(skip)
                    .filter_map(move |(i, s)| match s {
                        Slot::Used(v) => Some(((si << SEG_BITS | i) as u32, v)),
                        Slot::Free(_) => None,
                    })
            })
    }

    /// The first used handle among the `window` slots starting at `from`
    /// (wrapping around past the last slot); None if they are all free.
    pub fn live_near(&self, from: usize, window: usize) -> Option<u32> {
        if self.slots == 0 {
            return None;
        }
        (0..window.min(self.slots))
            .map(|i| ((from + i) % self.slots) as u32)
            .find(|&h| self.get(h).is_some())
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.iter_from(0)
    }

    pub fn handles(&self) -> Vec<u32> {
        self.iter().map(|(h, _)| h).collect()
    }

    /// Heap bytes held by the segments (capacity, used or not).
    pub fn heap_bytes(&self) -> usize {
        self.segs.capacity() * std::mem::size_of::<Seg<T>>()
            + (self.open.capacity() + self.released.capacity()) * 4
            + self
                .segs
                .iter()
                .map(|s| s.slots.capacity() * std::mem::size_of::<Slot<T>>())
                .sum::<usize>()
    }

    /// Bytes of one slot (the value plus the free-list tag, if any).
    pub const fn slot_bytes() -> usize {
        std::mem::size_of::<Slot<T>>()
    }

    pub fn clear(&mut self) {
        *self = Slab::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_near_scans_forward_and_wraps() {
        let mut s: Slab<u8> = Slab::default();
        let hs: Vec<u32> = (0..10).map(|i| s.insert(i)).collect();
        for &h in &hs[..9] {
            s.remove(h);
        }
        assert_eq!(s.live_near(0, 10), Some(hs[9]));
        assert_eq!(s.live_near(0, 9), None);
        assert_eq!(s.live_near(9, 1), Some(hs[9]));
        let again = s.insert(42);
        assert!(again < hs[9]);
        assert_eq!(s.live_near(again as usize + 1, 100), Some(hs[9]));
        s.remove(hs[9]);
        // Past the last slot the walk wraps around to the reused one.
        assert_eq!(s.live_near(again as usize + 1, 100), Some(again));
        assert_eq!(Slab::<u8>::default().live_near(0, 8), None);
    }

    #[test]
    fn insert_remove_reuses_handles() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        let c = s.insert("c");
        assert_eq!(c, a);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.iter_from(1).count(), 1);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn handles_span_segments_and_iterate_from_any_slot() {
        let mut s = Slab::default();
        let n = 3 * SEG + 17;
        for i in 0..n {
            assert_eq!(s.insert(i), i as u32);
        }
        assert_eq!(s.capacity_slots(), n);
        // Later segments are allocated whole, the first grew to exactly SEG.
        assert!(s.segs.iter().all(|seg| seg.slots.capacity() == SEG));
        for h in [0, SEG - 1, SEG, 2 * SEG + 5, n - 1] {
            assert_eq!(s.get(h as u32), Some(&h));
        }
        assert_eq!(s.get(n as u32), None);
        assert_eq!(s.remove(SEG as u32), Some(SEG));
        assert_eq!(s.remove((SEG + 1) as u32), Some(SEG + 1));
        let from: Vec<u32> = s.iter_from(SEG - 1).map(|(h, _)| h).take(3).collect();
        assert_eq!(from, vec![SEG as u32 - 1, SEG as u32 + 2, SEG as u32 + 3]);
        assert_eq!(s.iter_from(n).count(), 0);
        assert_eq!(s.iter().count(), n - 2);
        // Freed slots are reused before a new one is allocated.
        assert_eq!(s.insert(7), SEG as u32 + 1);
        assert_eq!(s.insert(8), SEG as u32);
        assert_eq!(s.insert(9), n as u32);
        s.clear();
        assert_eq!((s.len(), s.capacity_slots(), s.iter().count()), (0, 0, 0));
        assert_eq!(s.insert(1), 0);
    }

    /// A drained table gives its segments back but `KEEP_IDLE` (and the
    /// last one), and grows into them again before it appends.
    #[test]
    fn a_drained_table_releases_its_segments_and_reuses_them() {
        let mut s = Slab::default();
        let n = 10 * SEG;
        for i in 0..n {
            s.insert(i);
        }
        let full = s.heap_bytes();
        for h in 0..n as u32 {
            assert!(s.remove(h).is_some());
        }
        let held = s.segs.iter().filter(|g| !g.slots.is_empty()).count();
        assert_eq!(held, KEEP_IDLE + 1);
        assert!(s.heap_bytes() < full / 3, "{} of {full}", s.heap_bytes());
        assert_eq!(s.get(5), None);
        assert_eq!(s.remove(5), None);
        assert_eq!(s.iter().count(), 0);
        // SCAN's cursor bound stays, and handles come back from the
        // segments already numbered before any new one.
        assert_eq!(s.capacity_slots(), n);
        let again: Vec<u32> = (0..n).map(|i| s.insert(i)).collect();
        assert!(again.iter().all(|&h| (h as usize) < n));
        assert_eq!(s.capacity_slots(), n);
        for (i, &h) in again.iter().enumerate() {
            assert_eq!(s.get(h), Some(&i));
        }
        // The same segments (and the two short lists of them).
        assert!(
            s.heap_bytes() <= full + 1024,
            "{} of {full}",
            s.heap_bytes()
        );
    }

    /// The last segment emptied and refilled (it is never counted idle).
    #[test]
    fn the_last_segment_empties_and_fills_again() {
        let mut s = Slab::default();
        for i in 0..2 * SEG {
            s.insert(i);
        }
        for h in SEG..2 * SEG {
            s.remove(h as u32);
        }
        for i in 0..SEG {
            s.insert(i);
        }
        assert_eq!(s.len(), 2 * SEG);
        assert_eq!(s.capacity_slots(), 2 * SEG);
    }

    /// Random inserts and removals, with whole drains, against a model.
    #[test]
    fn random_churn_matches_a_model() {
        use rand::{Rng, SeedableRng};
        let seed = 0x5eed_51ab;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut s = Slab::default();
        let mut model: std::collections::HashMap<u32, u64> = Default::default();
        let mut next = 0u64;
        for round in 0..40 {
            let target = rng.gen_range(0..6 * SEG);
            while model.len() < target {
                let h = s.insert(next);
                assert!(
                    model.insert(h, next).is_none(),
                    "seed {seed:#x}: {h} given twice"
                );
                next += 1;
            }
            let drop = if round % 5 == 4 {
                model.len()
            } else {
                rng.gen_range(0..=model.len())
            };
            let mut live: Vec<u32> = model.keys().copied().collect();
            live.sort_unstable();
            for _ in 0..drop {
                let i = rng.gen_range(0..live.len());
                let h = live.swap_remove(i);
                assert_eq!(s.remove(h), model.remove(&h), "seed {seed:#x}");
            }
            assert_eq!(s.len(), model.len());
            let mut seen: Vec<(u32, u64)> = s.iter().map(|(h, v)| (h, *v)).collect();
            let mut want: Vec<(u32, u64)> = model.iter().map(|(h, v)| (*h, *v)).collect();
            seen.sort_unstable();
            want.sort_unstable();
            assert_eq!(seen, want, "seed {seed:#x} round {round}");
            assert!(s.idle <= KEEP_IDLE);
        }
    }
}
