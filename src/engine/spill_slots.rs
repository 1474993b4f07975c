//! Where each spilled job's segment record is
//! (docs/PERSISTENCE.md#9-spill-tiers): a table addressed by job handle,
//! in fixed-size chunks of consecutive handles, allocated the first time
//! one of their handles spills and freed when their last one leaves.
//!
//! Why not a hash map keyed by handle: a map entry carries the key and a
//! control byte beside the location, and a doubling table is often half
//! empty, so a spilled job paid several times its location. Job handles
//! are dense slab slots, so a chunk where many jobs are spilled is a plain
//! array indexed by handle (no key stored, one shift and one load); a
//! chunk where few are is a short sorted list, so scattered spills among
//! many resident jobs do not pay for whole arrays.

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

/// A chunk turns dense past this many entries (a sparse one is then a
/// fraction of a dense one's size) and sparse again below `TO_SPARSE`.
const TO_DENSE: usize = 1024;
const TO_SPARSE: usize = 256;

/// The entries of `CHUNK` consecutive handles. Sparse while few of them
/// are spilled (a node of many short queues spills a job here and there
/// among millions of resident ones: a dense chunk for each would cost far
/// more than the bodies it saves), dense once many are (long queue tails).
enum Chunk {
    /// (index in the chunk, entry), sorted by index.
    Sparse(Vec<(u16, Packed)>),
    /// Indexed by position; `used` entries are set.
    Dense { entries: Box<[Packed]>, used: u32 },
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Sparse(v) => v.len(),
            Chunk::Dense { used, .. } => *used as usize,
        }
    }

    fn get(&self, i: usize) -> Option<Slot> {
        match self {
            Chunk::Sparse(v) => {
                let k = v.binary_search_by_key(&(i as u16), |e| e.0).ok()?;
                v.get(k)?.1.unpack()
            }
            Chunk::Dense { entries, .. } => entries.get(i)?.unpack(),
        }
    }

    /// Store an entry; true when `i` had none.
    fn set(&mut self, i: usize, p: Packed) -> bool {
        let added = match self {
            Chunk::Sparse(v) => match v.binary_search_by_key(&(i as u16), |e| e.0) {
                Ok(k) => {
                    if let Some(e) = v.get_mut(k) {
                        e.1 = p;
                    }
                    false
                }
                Err(k) => {
                    v.insert(k, (i as u16, p));
                    true
                }
            },
            Chunk::Dense { entries, used } => {
                let Some(e) = entries.get_mut(i) else {
                    return false;
                };
                let added = e.seg == 0;
                *e = p;
                if added {
                    *used += 1;
                }
                added
            }
        };
        if let Chunk::Sparse(v) = self {
            if v.len() > TO_DENSE {
                let mut entries = vec![Packed::default(); CHUNK].into_boxed_slice();
                for &(k, e) in v.iter() {
                    if let Some(d) = entries.get_mut(usize::from(k)) {
                        *d = e;
                    }
                }
                let used = v.len() as u32;
                *self = Chunk::Dense { entries, used };
            }
        }
        added
    }

    fn take(&mut self, i: usize) -> Option<Slot> {
        let old = match self {
            Chunk::Sparse(v) => {
                let k = v.binary_search_by_key(&(i as u16), |e| e.0).ok()?;
                let (_, e) = v.remove(k);
                if v.capacity() > 2 * v.len() + 8 {
                    v.shrink_to(v.len() + v.len() / 2);
                }
                e.unpack()?
            }
            Chunk::Dense { entries, used } => {
                let e = entries.get_mut(i)?;
                let old = e.unpack()?;
                *e = Packed::default();
                *used -= 1;
                old
            }
        };
        if let Chunk::Dense { entries, used } = self {
            if (*used as usize) < TO_SPARSE {
                let v: Vec<(u16, Packed)> = entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.seg != 0)
                    .map(|(k, e)| (k as u16, *e))
                    .collect();
                *self = Chunk::Sparse(v);
            }
        }
        Some(old)
    }

    /// Entries at positions `lo..hi`, in order, until `f` says stop.
    fn scan(
        &self,
        base: usize,
        lo: usize,
        hi: usize,
        f: &mut impl FnMut(JobHandle, Slot) -> bool,
    ) -> bool {
        let mut visit = |k: usize, e: &Packed| match (e.unpack(), JobHandle::try_from(base + k)) {
            (Some(s), Ok(h)) => f(h, s),
            _ => true,
        };
        match self {
            Chunk::Sparse(v) => v
                .iter()
                .filter(|(k, _)| (lo..hi).contains(&usize::from(*k)))
                .all(|(k, e)| visit(usize::from(*k), e)),
            Chunk::Dense { entries, .. } => entries
                .get(lo..hi)
                .unwrap_or_default()
                .iter()
                .enumerate()
                .all(|(k, e)| visit(lo + k, e)),
        }
    }

    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        match self {
            Chunk::Sparse(v) => v.capacity() * std::mem::size_of::<(u16, Packed)>(),
            Chunk::Dense { entries, .. } => entries.len() * std::mem::size_of::<Packed>(),
        }
    }
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
        self.chunks.get(c)?.as_ref()?.get(i)
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
        let chunk = cell.get_or_insert_with(|| Chunk::Sparse(Vec::new()));
        if chunk.set(i, Packed::pack(slot)) {
            self.len += 1;
        }
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
        let old = cell.as_mut()?.take(i)?;
        self.len -= 1;
        if cell.as_ref().is_some_and(|ch| ch.len() == 0) {
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

    /// Call `f` on the entries of handles `from..from + n` in handle order
    /// (absent chunks skipped whole) until it returns false.
    pub fn scan(&self, from: usize, n: usize, mut f: impl FnMut(JobHandle, Slot) -> bool) {
        let to = from.saturating_add(n).min(self.end());
        for (c, cell) in self.chunks.iter().enumerate().skip(from >> CHUNK_BITS) {
            let base = c << CHUNK_BITS;
            if base >= to {
                return;
            }
            let Some(ch) = cell else {
                continue;
            };
            let lo = from.saturating_sub(base).min(CHUNK);
            let hi = to.saturating_sub(base).min(CHUNK);
            if !ch.scan(base, lo, hi, &mut f) {
                return;
            }
        }
    }

    /// Heap bytes held (chunks and their directory).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.chunks
            .iter()
            .flatten()
            .map(Chunk::heap_bytes)
            .sum::<usize>()
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

    fn handles(t: &SlotTable, from: usize, n: usize) -> Vec<u32> {
        let mut v = Vec::new();
        t.scan(from, n, |h, _| {
            v.push(h);
            true
        });
        v
    }

    #[test]
    fn scans_visit_present_entries_in_handle_order() {
        let mut t = SlotTable::default();
        let hs = [3u32, 4095, 4096, 20_000, 20_001];
        for &h in &hs {
            t.insert(h, slot(1, h, 1, SlotState::OnDisk));
        }
        assert_eq!(handles(&t, 0, t.end()), hs);
        assert_eq!(handles(&t, 4095, 2), [4095, 4096]);
        assert_eq!(handles(&t, 20_001, 1 << 20), [20_001]);
        assert!(handles(&t, t.end(), 10).is_empty());
        // A scan stops when told to.
        let mut seen = 0;
        t.scan(0, t.end(), |_, _| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }

    #[test]
    fn chunks_turn_dense_when_full_and_sparse_when_emptied() {
        let mut t = SlotTable::default();
        let n = CHUNK as u32;
        // Every other handle, backwards: sparse inserts out of order.
        for h in (0..n).rev().filter(|h| h % 2 == 0) {
            t.insert(h, slot(1, h, h, SlotState::OnDisk));
        }
        assert!(matches!(t.chunks[0], Some(Chunk::Dense { .. })));
        for h in 0..n {
            let want = (h % 2 == 0).then(|| slot(1, h, h, SlotState::OnDisk));
            assert_eq!(t.get(h), want, "handle {h}");
        }
        let all = handles(&t, 0, t.end());
        assert_eq!(all.len(), CHUNK / 2);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        for h in (0..n).filter(|h| h % 2 == 0).skip(TO_SPARSE - 1) {
            assert!(t.remove(h).is_some());
        }
        assert!(matches!(t.chunks[0], Some(Chunk::Sparse(_))));
        assert_eq!(t.len(), TO_SPARSE - 1);
        for h in (0..n).filter(|h| h % 2 == 0).take(TO_SPARSE - 1) {
            assert_eq!(t.get(h).map(|s| s.loc.off), Some(h));
        }
    }

    #[test]
    fn a_few_spilled_handles_among_many_cost_sixteen_bytes_each() {
        let mut t = SlotTable::default();
        // One spilled job in every 200 handles of a million.
        for h in (0..1_000_000u32).step_by(200) {
            t.insert(h, slot(1, h, 1, SlotState::OnDisk));
        }
        let per = t.heap_bytes() / t.len();
        assert!(per <= 32, "{per} bytes per entry");
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
