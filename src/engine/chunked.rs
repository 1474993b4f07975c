//! A table addressed by dense `u32` keys (cold slots), kept in fixed-size
//! chunks allocated the first time one of their keys is written.
//!
//! Why not a `Vec`: a doubling vector of millions of entries leaves up to
//! half its capacity allocated and unused, and each doubling copies the
//! whole table into a new allocation while the old one is still held, so
//! for a moment it needs three times what it stores. At ten million cold
//! jobs that moment alone was an eighth of the node's maxmemory
//! (docs/PERFORMANCE.md, the spill tier's restart). Chunks grow by one
//! chunk and never copy.

/// Keys per chunk by default: 16,384 (a 20-byte slot's chunk is 320
/// KiB). A table that lives only for a while (a replay's notes) takes
/// bigger chunks, which the allocator maps on their own and hands back
/// to the kernel whole when freed, where small ones leave their pages
/// held among the allocations made meanwhile.
pub(crate) const CHUNK_BITS: u32 = 14;

pub(crate) struct Chunked<T, const BITS: u32 = CHUNK_BITS> {
    /// `None` for a chunk none of whose keys was ever written, so a table
    /// written at scattered keys holds only the chunks it uses.
    chunks: Vec<Option<Box<[T]>>>,
}

impl<T, const BITS: u32> Default for Chunked<T, BITS> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T: Copy + Default, const BITS: u32> Chunked<T, BITS> {
    const CHUNK: usize = 1 << BITS;

    fn split(i: u32) -> (usize, usize) {
        ((i >> BITS) as usize, i as usize & (Self::CHUNK - 1))
    }

    /// The entry at `i`; `T::default()` for a key never written in an
    /// allocated chunk, `None` if its chunk was never allocated.
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        let (c, k) = Self::split(i);
        self.chunks.get(c)?.as_ref()?.get(k)
    }

    pub(crate) fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        let (c, k) = Self::split(i);
        self.chunks.get_mut(c)?.as_mut()?.get_mut(k)
    }

    /// Write `v` at `i`, allocating its chunk if needed.
    pub(crate) fn set(&mut self, i: u32, v: T) {
        let (c, k) = Self::split(i);
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
        }
        let chunk = self.chunks[c]
            .get_or_insert_with(|| vec![T::default(); Self::CHUNK].into_boxed_slice());
        chunk[k] = v;
    }

    /// Whether no key was ever written.
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.iter().all(Option::is_none)
    }

    /// Bytes allocated for entries.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.iter().flatten().count() * Self::CHUNK * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Box<[T]>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_and_only_written_chunks_are_allocated() {
        const CHUNK: usize = 1 << CHUNK_BITS;
        let mut t: Chunked<u64> = Chunked::default();
        assert_eq!(t.get(0), None);
        t.set(3, 30);
        let far = 5 * CHUNK as u32 + 7;
        t.set(far, 70);
        assert_eq!(t.get(3), Some(&30));
        assert_eq!(t.get(4), Some(&0), "unwritten key of an allocated chunk");
        assert_eq!(t.get(far), Some(&70));
        assert_eq!(t.get(CHUNK as u32), None, "chunk never written");
        assert_eq!(t.get(u32::MAX), None);
        if let Some(v) = t.get_mut(far) {
            *v = 71;
        }
        assert_eq!(t.get(far), Some(&71));
        assert_eq!(t.chunks.iter().flatten().count(), 2);
        assert!(t.bytes() >= 2 * CHUNK * 8);
    }
}
