//! A minimal slab: values addressed by stable `u32` handles with a free
//! list. Jobs and queues live in slabs so that indexes and ordered sets can
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

enum Slot<T> {
    Used(T),
    Free(u32),
}

/// Slots per segment: a power of two so a handle splits with a shift.
const SEG_BITS: u32 = 10;
const SEG: usize = 1 << SEG_BITS;
const SEG_MASK: usize = SEG - 1;

/// Handle-addressed storage. Handles are reused after removal.
pub struct Slab<T> {
    /// Every segment but the last is full (`SEG` slots).
    segs: Vec<Vec<Slot<T>>>,
    free_head: u32,
    len: usize,
    /// Slots ever allocated (the next never-used handle).
    slots: usize,
}

const NONE: u32 = u32::MAX;

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            segs: Vec::new(),
            free_head: NONE,
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
        self.segs.get(h >> SEG_BITS)?.get(h & SEG_MASK)
    }

    fn slot_mut(&mut self, h: u32) -> Option<&mut Slot<T>> {
        let h = h as usize;
        self.segs.get_mut(h >> SEG_BITS)?.get_mut(h & SEG_MASK)
    }

    pub fn insert(&mut self, value: T) -> u32 {
        self.len += 1;
        if self.free_head != NONE {
            let h = self.free_head;
            let mut next = NONE;
            if let Some(slot) = self.slot_mut(h) {
                if let Slot::Free(n) = *slot {
                    next = n;
                }
                *slot = Slot::Used(value);
            }
            self.free_head = next;
            return h;
        }
        let h = self.slots;
        if self.segs.last().is_none_or(|seg| seg.len() >= SEG) {
            // Later segments are allocated whole: one bounded step.
            let cap = if self.segs.is_empty() { 0 } else { SEG };
            self.segs.push(Vec::with_capacity(cap));
        }
        if let Some(seg) = self.segs.last_mut() {
            if seg.len() == seg.capacity() {
                // Only the first segment grows in place, doubling up to SEG.
                let want = (seg.capacity() * 2).clamp(4, SEG);
                seg.reserve_exact(want - seg.len());
            }
            seg.push(Slot::Used(value));
        }
        self.slots += 1;
        h as u32
    }

    pub fn remove(&mut self, h: u32) -> Option<T> {
        let free_head = self.free_head;
        let slot = self.slot_mut(h)?;
        if matches!(slot, Slot::Free(_)) {
            return None;
        }
        let old = std::mem::replace(slot, Slot::Free(free_head));
        self.free_head = h;
        self.len -= 1;
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
        match self.slot_mut(h) {
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
                seg.iter()
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
        self.segs.capacity() * std::mem::size_of::<Vec<Slot<T>>>()
            + self
                .segs
                .iter()
                .map(|s| s.capacity() * std::mem::size_of::<Slot<T>>())
                .sum::<usize>()
    }

    /// Bytes of one slot (the value plus the free-list tag, if any).
    pub const fn slot_bytes() -> usize {
        std::mem::size_of::<Slot<T>>()
    }

    pub fn clear(&mut self) {
        self.segs.clear();
        self.segs.shrink_to_fit();
        self.free_head = NONE;
        self.len = 0;
        self.slots = 0;
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
        assert!(s.segs.iter().all(|seg| seg.capacity() == SEG));
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
}
