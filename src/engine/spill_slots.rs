//! Where each spilled job's record lives (docs/PERSISTENCE.md#9-spill-tiers):
//! a table addressed by job handle, 12 bytes per handle, in fixed-size
//! chunks allocated the first time one of their handles spills and freed
//! when their last one leaves.
//!
//! Why not a hash map keyed by handle: a map entry is the key, the value
//! and a control byte, and a doubling table sits between 44% and 88% full,
//! so a spilled job paid two to three times its 12 bytes of location. Job
//! handles are dense slab slots, so a direct table wastes little, grows one
//! chunk at a time (used memory rises in small steps, no rehash stall), and
//! a lookup is one shift and one load.

use super::spill::Loc;
use super::store::JobHandle;

/// What the spill tier is doing with a job's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Write in flight; the body is still in RAM.
    Pending,
    /// Only on disk.
    OnDisk,
    /// Page-in in flight.
    Loading,
    /// Compaction copy in flight (target in `SpillState::moving`).
    Moving,
}

impl SlotState {
    fn bits(self) -> u32 {
        match self {
            SlotState::Pending => 0,
            SlotState::OnDisk => 1,
            SlotState::Loading => 2,
            SlotState::Moving => 3,
        }
    }

    fn from_bits(b: u32) -> SlotState {
        match b & 3 {
            0 => SlotState::Pending,
            1 => SlotState::OnDisk,
            2 => SlotState::Loading,
            _ => SlotState::Moving,
        }
    }
}

/// A job's spill location and state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub loc: Loc,
    pub st: SlotState,
}

/// Body lengths fit in the low 30 bits (segments are at most `MAX_LEN`
/// bytes); the state takes the top two.
pub(crate) const MAX_LEN: u32 = (1 << 30) - 1;
const ST_SHIFT: u32 = 30;

/// One handle's entry. Segment 0 is never used (segments are numbered
/// from 1), so `seg == 0` marks an empty entry.
#[derive(Clone, Copy, Default)]
struct Packed {
    seg: u32,
    off: u32,
    len_st: u32,
}

impl Packed {
    fn pack(s: Slot) -> Packed {
        Packed {
            seg: s.loc.seg,
            off: s.loc.off,
            len_st: (s.loc.len & MAX_LEN) | s.st.bits() << ST_SHIFT,
        }
    }

    fn unpack(self) -> Option<Slot> {
        if self.seg == 0 {
            return None;
        }
        Some(Slot {
            loc: Loc {
                seg: self.seg,
                off: self.off,
                len: self.len_st & MAX_LEN,
            },
            st: SlotState::from_bits(self.len_st >> ST_SHIFT),
        })
    }
}

/// Handles per chunk: a power of two so a handle splits with a shift.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: usize = CHUNK - 1;

struct Chunk {
    entries: Box<[Packed]>,
    used: u32,
}

#[derive(Default)]
pub(crate) struct SlotTable {
    chunks: Vec<Option<Chunk>>,
    len: usize,
}

impl SlotTable {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn split(h: JobHandle) -> (usize, usize) {
        let h = h as usize;
        (h >> CHUNK_BITS, h & CHUNK_MASK)
    }

    pub fn get(&self, h: JobHandle) -> Option<Slot> {
        let (c, i) = Self::split(h);
        let chunk = self.chunks.get(c)?.as_ref()?;
        chunk.entries.get(i)?.unpack()
    }

    pub fn contains(&self, h: JobHandle) -> bool {
        self.get(h).is_some()
    }

    /// Set the entry of `h` (a new one or a replacement). A location that
    /// cannot be packed (segment 0, a body longer than `MAX_LEN`) is not
    /// stored: the caller never spills such a job.
    pub fn insert(&mut self, h: JobHandle, slot: Slot) {
        if slot.loc.seg == 0 || slot.loc.len > MAX_LEN {
            return;
        }
        let (c, i) = Self::split(h);
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
        }
        let Some(cell) = self.chunks.get_mut(c) else {
            return;
        };
        let chunk = cell.get_or_insert_with(|| Chunk {
            entries: vec![Packed::default(); CHUNK].into_boxed_slice(),
            used: 0,
        });
        let Some(e) = chunk.entries.get_mut(i) else {
            return;
        };
        if e.seg == 0 {
            chunk.used += 1;
            self.len += 1;
        }
        *e = Packed::pack(slot);
    }

    /// Change the state of an existing entry.
    pub fn set_state(&mut self, h: JobHandle, st: SlotState) {
        if let Some(mut s) = self.get(h) {
            s.st = st;
            self.insert(h, s);
        }
    }

    pub fn remove(&mut self, h: JobHandle) -> Option<Slot> {
        let (c, i) = Self::split(h);
        let cell = self.chunks.get_mut(c)?;
        let chunk = cell.as_mut()?;
        let e = chunk.entries.get_mut(i)?;
        let old = e.unpack()?;
        *e = Packed::default();
        chunk.used -= 1;
        self.len -= 1;
        if chunk.used == 0 {
            *cell = None;
            if self.len == 0 {
                self.chunks = Vec::new();
            } else {
                while matches!(self.chunks.last(), Some(None)) {
                    self.chunks.pop();
                }
            }
        }
        Some(old)
    }

    /// One past the largest handle the table could hold now: scans run
    /// from 0 to here.
    pub fn end(&self) -> usize {
        self.chunks.len() << CHUNK_BITS
    }

    /// The entries of handles `from..from + n` (absent chunks skipped
    /// whole), in handle order.
    pub fn range(&self, from: usize, n: usize) -> impl Iterator<Item = (JobHandle, Slot)> + '_ {
        let to = from.saturating_add(n).min(self.end());
        let first = from >> CHUNK_BITS;
        self.chunks
            .iter()
            .enumerate()
            .skip(first)
            .take_while(move |(c, _)| c << CHUNK_BITS < to)
            .filter_map(|(c, chunk)| chunk.as_ref().map(|ch| (c, ch)))
            .flat_map(move |(c, ch)| {
                let base = c << CHUNK_BITS;
                let lo = from.saturating_sub(base).min(CHUNK);
                let hi = to.saturating_sub(base).min(CHUNK);
                ch.entries
                    .get(lo..hi)
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, e)| {
                        let h = JobHandle::try_from(base + lo + i).ok()?;
                        Some((h, e.unpack()?))
                    })
            })
    }

    /// Heap bytes held (chunks and their directory).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        let chunks = self.chunks.iter().flatten().count();
        chunks * CHUNK * std::mem::size_of::<Packed>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(seg: u32, off: u32, len: u32, st: SlotState) -> Slot {
        Slot {
            loc: Loc { seg, off, len },
            st,
        }
    }

    #[test]
    fn entries_round_trip_and_chunks_are_freed() {
        let mut t = SlotTable::default();
        assert!(t.get(5).is_none());
        let a = slot(1, 0, MAX_LEN, SlotState::Moving);
        let b = slot(u32::MAX, u32::MAX, 0, SlotState::OnDisk);
        t.insert(5, a);
        t.insert(70_000, b);
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(5), Some(a));
        assert_eq!(t.get(70_000), Some(b));
        t.set_state(5, SlotState::Loading);
        assert_eq!(t.get(5).map(|s| s.st), Some(SlotState::Loading));
        assert_eq!(t.remove(70_000), Some(b));
        assert!(t.remove(70_000).is_none());
        assert_eq!(t.chunks.len(), 1);
        assert_eq!(t.remove(5).map(|s| s.loc), Some(a.loc));
        assert!(t.is_empty());
        assert_eq!(t.heap_bytes(), 0);
    }

    #[test]
    fn ranges_visit_present_entries_in_handle_order() {
        let mut t = SlotTable::default();
        let hs = [3u32, 4095, 4096, 20_000, 20_001];
        for &h in &hs {
            t.insert(h, slot(1, h, 1, SlotState::OnDisk));
        }
        let all: Vec<u32> = t.range(0, t.end()).map(|(h, _)| h).collect();
        assert_eq!(all, hs);
        let mid: Vec<u32> = t.range(4095, 2).map(|(h, _)| h).collect();
        assert_eq!(mid, [4095, 4096]);
        let tail: Vec<u32> = t.range(20_001, 1 << 20).map(|(h, _)| h).collect();
        assert_eq!(tail, [20_001]);
        assert_eq!(t.range(t.end(), 10).count(), 0);
    }

    #[test]
    fn unpackable_locations_are_not_stored() {
        let mut t = SlotTable::default();
        t.insert(1, slot(0, 0, 1, SlotState::OnDisk));
        t.insert(2, slot(1, 0, MAX_LEN + 1, SlotState::OnDisk));
        assert!(t.is_empty());
    }

    #[test]
    fn a_full_chunk_costs_twelve_bytes_per_handle() {
        let mut t = SlotTable::default();
        for h in 0..CHUNK as u32 {
            t.insert(h, slot(1, h, 10, SlotState::OnDisk));
        }
        assert_eq!(t.len(), CHUNK);
        assert!(t.heap_bytes() <= CHUNK * 12 + 256);
    }
}
