//! A minimal slab: values addressed by stable `u32` handles with a free
//! list. Jobs and queues live in slabs so that indexes and ordered sets can
//! refer to them with 4 bytes instead of a 40-byte ID, and so that SCAN
//! cursors are plain slot numbers that stay valid while the table changes.

enum Slot<T> {
    Used(T),
    Free(u32),
}

/// Handle-addressed storage. Handles are reused after removal.
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free_head: u32,
    len: usize,
}

const NONE: u32 = u32::MAX;

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free_head: NONE,
            len: 0,
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
        self.slots.len()
    }

    pub fn insert(&mut self, value: T) -> u32 {
        self.len += 1;
        if self.free_head != NONE {
            let h = self.free_head;
            if let Some(slot) = self.slots.get_mut(h as usize) {
                if let Slot::Free(next) = *slot {
                    self.free_head = next;
                }
                *slot = Slot::Used(value);
            }
            return h;
        }
        self.slots.push(Slot::Used(value));
        (self.slots.len() - 1) as u32
    }

    pub fn remove(&mut self, h: u32) -> Option<T> {
        let slot = self.slots.get_mut(h as usize)?;
        if matches!(slot, Slot::Free(_)) {
            return None;
        }
        let old = std::mem::replace(slot, Slot::Free(self.free_head));
        self.free_head = h;
        self.len -= 1;
        match old {
            Slot::Used(v) => Some(v),
            Slot::Free(_) => None,
        }
    }

    pub fn get(&self, h: u32) -> Option<&T> {
        match self.slots.get(h as usize) {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        match self.slots.get_mut(h as usize) {
            Some(Slot::Used(v)) => Some(v),
            _ => None,
        }
    }

    /// Iterate used slots starting at `from` (inclusive).
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .skip(from)
            .filter_map(|(i, s)| match s {
                Slot::Used(v) => Some((i as u32, v)),
                Slot::Free(_) => None,
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.iter_from(0)
    }

    pub fn handles(&self) -> Vec<u32> {
        self.iter().map(|(h, _)| h).collect()
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.slots.shrink_to_fit();
        self.free_head = NONE;
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
