//! Jobs: the 40-byte job ID format, job states and flags, and the `Job`
//! record every node keeps per job. Behaviour lives in the engine; this
//! module only owns the data and its invariants (ID validation, TTL parity).

use std::alloc::Layout;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use rand::RngCore;

/// A job ID: exactly 40 bytes, `D-<node8>-<rand24>-<ttl4>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub [u8; 40]);

impl std::fmt::Debug for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0))
    }
}

impl JobId {
    /// Validate like Disque: length 40 and `D`,`-`,`-`,`-` at 0,1,10,35.
    pub fn parse(b: &[u8]) -> Option<JobId> {
        if b.len() != 40 || b[0] != b'D' || b[1] != b'-' || b[10] != b'-' || b[35] != b'-' {
            return None;
        }
        let mut id = [0u8; 40];
        id.copy_from_slice(b);
        Some(JobId(id))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// TTL minutes field; non-hex characters count as 0.
    pub fn ttl_minutes(&self) -> u32 {
        self.0[36..40].iter().fold(0u32, |acc, &c| {
            let v = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => 0,
            };
            acc * 16 + u32::from(v)
        })
    }

    /// Odd TTL field = at-least-once job (retry > 0).
    pub fn is_at_least_once(&self) -> bool {
        self.ttl_minutes() & 1 == 1
    }

    /// Build a fresh ID for a job created by `node_id` with this TTL and retry.
    pub fn generate(
        node_id: &[u8; 40],
        ttl_secs: u64,
        retry: u64,
        rng: &mut impl RngCore,
    ) -> JobId {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut id = [0u8; 40];
        id[0] = b'D';
        id[1] = b'-';
        id[2..10].copy_from_slice(&node_id[0..8]);
        id[10] = b'-';
        // 24 base64 characters = 144 random bits, 48 from each of three
        // u64s: no byte buffer to fill and regroup, and one RNG call per
        // 48 bits instead of per byte.
        for chunk in id[11..35].chunks_exact_mut(8) {
            let mut r = rng.next_u64();
            for c in chunk {
                *c = B64[(r & 63) as usize];
                r >>= 6;
            }
        }
        id[35] = b'-';
        id[36..40].copy_from_slice(&Self::suffix(ttl_secs, retry));
        JobId(id)
    }

    /// Whether `generate` with these arguments could have made this ID:
    /// the node's prefix and the TTL/retry suffix match (the random part
    /// is anything).
    pub fn fits(&self, node_id: &[u8; 40], ttl_secs: u64, retry: u64) -> bool {
        self.0[2..10] == node_id[0..8] && self.0[36..40] == Self::suffix(ttl_secs, retry)
    }

    /// The last four characters: TTL in minutes, its low bit set when the
    /// job has a retry (so a node can tell at-most-once jobs by their ID).
    fn suffix(ttl_secs: u64, retry: u64) -> [u8; 4] {
        let mut m = (ttl_secs / 60).min(65535) as u32;
        if retry > 0 {
            m |= 1;
        } else {
            m &= !1;
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 4];
        for (k, c) in out.iter_mut().enumerate() {
            *c = HEX[((m >> (12 - 4 * k)) & 15) as usize];
        }
        out
    }
}

/// Job state as reported by SHOW / JSCAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum JobState {
    WaitRepl = 0,
    Active = 1,
    Queued = 2,
    Acked = 3,
}

impl JobState {
    pub fn name(self) -> &'static str {
        match self {
            JobState::WaitRepl => "wait-repl",
            JobState::Active => "active",
            JobState::Queued => "queued",
            JobState::Acked => "acked",
        }
    }
    pub fn from_name(s: &[u8]) -> Option<JobState> {
        match s.to_ascii_lowercase().as_slice() {
            b"wait-repl" => Some(JobState::WaitRepl),
            b"active" => Some(JobState::Active),
            b"queued" => Some(JobState::Queued),
            b"acked" => Some(JobState::Acked),
            _ => None,
        }
    }
    pub fn from_u8(v: u8) -> Option<JobState> {
        match v {
            0 => Some(JobState::WaitRepl),
            1 => Some(JobState::Active),
            2 => Some(JobState::Queued),
            3 => Some(JobState::Acked),
            _ => None,
        }
    }
}

/// Next time this node queues the job it must broadcast QUEUED.
pub const F_BCAST_QUEUED: u8 = 1;
/// Send WILLQUEUE 500 ms before qtime.
pub const F_BCAST_WILLQUEUE: u8 = 2;
/// Handed to a consumer by this node at least once (local only).
pub const F_DELIVERED: u8 = 4;
/// The job has an entry in the engine's extension side map (local only,
/// never serialized; `crate::domain::job_ext`).
pub const F_EXT: u8 = 8;

/// Index into the engine's node table (0 is always this node).
pub type NodeIdx = u32;

/// A queue name shared by all jobs of the queue: a thin (8-byte) pointer
/// to one refcounted allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueName(std::sync::Arc<Box<[u8]>>);

impl QueueName {
    pub fn ptr_eq(a: &QueueName, b: &QueueName) -> bool {
        std::sync::Arc::ptr_eq(&a.0, &b.0)
    }
}

impl From<&[u8]> for QueueName {
    fn from(b: &[u8]) -> Self {
        QueueName(std::sync::Arc::new(Box::from(b)))
    }
}

impl std::ops::Deref for QueueName {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}
/// A job body in one allocation: a 4-byte length, then the bytes, held by
/// a thin 8-byte pointer (`Box<[u8]>` is 16). A 100-byte body still fits
/// the allocator's 112-byte size class, so the prefix costs nothing there
/// and the job record is 8 bytes smaller. Bodies of 4 GiB or more (not
/// reachable through the protocol's bulk limit) use a 12-byte prefix.
pub struct Body(NonNull<u8>);

// SAFETY: a Body exclusively owns its allocation, like Box<[u8]>.
unsafe impl Send for Body {}
// SAFETY: shared access is read-only.
unsafe impl Sync for Body {}

/// Length prefix: u32, or u32::MAX followed by a u64.
const BODY_SHORT: usize = 4;
const BODY_LONG: usize = 12;

fn body_layout(prefix: usize, len: usize) -> Option<Layout> {
    Layout::from_size_align(prefix.checked_add(len)?, 1).ok()
}

impl Body {
    /// (prefix bytes, body length), read from the allocation.
    fn header(&self) -> (usize, usize) {
        let p = self.0.as_ptr();
        let mut short = [0u8; 4];
        // SAFETY: every allocation starts with at least BODY_SHORT bytes.
        unsafe { std::ptr::copy_nonoverlapping(p, short.as_mut_ptr(), 4) };
        let n = u32::from_le_bytes(short);
        if n != u32::MAX {
            return (BODY_SHORT, n as usize);
        }
        let mut long = [0u8; 8];
        // SAFETY: a u32::MAX prefix is followed by 8 more length bytes.
        unsafe { std::ptr::copy_nonoverlapping(p.add(4), long.as_mut_ptr(), 8) };
        (BODY_LONG, u64::from_le_bytes(long) as usize)
    }
}

impl Body {
    /// Bytes requested from the allocator (prefix included).
    pub fn alloc_size(&self) -> usize {
        let (prefix, len) = self.header();
        prefix + len
    }
}

impl From<&[u8]> for Body {
    fn from(b: &[u8]) -> Body {
        let short = u32::try_from(b.len()).ok().filter(|&n| n != u32::MAX);
        let prefix = if short.is_some() {
            BODY_SHORT
        } else {
            BODY_LONG
        };
        let Some(layout) = body_layout(prefix, b.len()) else {
            // Longer than isize::MAX: no such slice exists.
            std::alloc::handle_alloc_error(Layout::new::<u8>());
        };
        // SAFETY: the layout is non-zero-sized (at least the prefix).
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        // SAFETY: `raw` has prefix + len bytes; the source does not overlap.
        unsafe {
            match short {
                Some(n) => std::ptr::copy_nonoverlapping(n.to_le_bytes().as_ptr(), raw, 4),
                None => {
                    std::ptr::copy_nonoverlapping(u32::MAX.to_le_bytes().as_ptr(), raw, 4);
                    let n = (b.len() as u64).to_le_bytes();
                    std::ptr::copy_nonoverlapping(n.as_ptr(), raw.add(4), 8);
                }
            }
            std::ptr::copy_nonoverlapping(b.as_ptr(), raw.add(prefix), b.len());
        }
        Body(ptr)
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let (prefix, len) = self.header();
        // SAFETY: the allocation holds `len` initialised bytes after the prefix.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(prefix), len) }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        let (prefix, len) = self.header();
        if let Some(layout) = body_layout(prefix, len) {
            // SAFETY: allocated in `from` with this very layout.
            unsafe { std::alloc::dealloc(self.0.as_ptr(), layout) };
        }
    }
}

impl Clone for Body {
    fn clone(&self) -> Body {
        Body::from(&**self)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        **self == **other
    }
}

impl Eq for Body {}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// A small set of node indexes in 8 bytes, in insertion order. A tagged
/// pointer: with the low bit set, the word itself holds up to
/// `NODES_INLINE` members below 256 (3 length bits, then one byte each),
/// so the common REPLICATE <= 7 case allocates nothing; otherwise it
/// points to a boxed Vec (a Box is 8-aligned, so its low bit is clear).
pub struct NodeSet(NonNull<Vec<NodeIdx>>);

// SAFETY: a NodeSet exclusively owns its boxed Vec, like Box<Vec<u32>>.
unsafe impl Send for NodeSet {}
// SAFETY: shared access is read-only.
unsafe impl Sync for NodeSet {}

/// Members held in the word: one byte each above the tag/length byte.
const NODES_INLINE: usize = (usize::BITS / 8 - 1) as usize;

impl NodeSet {
    fn from_bits(bits: usize) -> NodeSet {
        // The tag bit makes the address non-zero; it never points anywhere.
        NodeSet(NonNull::without_provenance(NonZeroUsize::MIN | bits))
    }

    /// The inline word, or None for a heap set.
    fn bits(&self) -> Option<usize> {
        let a = self.0.as_ptr().addr();
        (a & 1 == 1).then_some(a)
    }

    fn heap(&self) -> Option<&Vec<NodeIdx>> {
        match self.bits() {
            Some(_) => None,
            // SAFETY: untagged means it came from Box::into_raw and is owned.
            None => Some(unsafe { self.0.as_ref() }),
        }
    }

    fn heap_mut(&mut self) -> Option<&mut Vec<NodeIdx>> {
        match self.bits() {
            Some(_) => None,
            // SAFETY: as in `heap`, and `&mut self` makes it exclusive.
            None => Some(unsafe { self.0.as_mut() }),
        }
    }

    fn from_vec(v: Vec<NodeIdx>) -> NodeSet {
        NodeSet(NonNull::from(Box::leak(Box::new(v))))
    }

    pub fn len(&self) -> usize {
        match self.bits() {
            Some(b) => (b >> 1) & 7,
            None => self.heap().map_or(0, Vec::len),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn contains(&self, n: NodeIdx) -> bool {
        self.iter().any(|x| x == n)
    }
    pub fn iter(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        let mut inline = [0; NODES_INLINE];
        let mut len = 0;
        if let Some(b) = self.bits() {
            len = (b >> 1) & 7;
            for (i, slot) in inline.iter_mut().enumerate().take(len) {
                *slot = ((b >> (8 * (i + 1))) & 0xff) as NodeIdx;
            }
        }
        let heap: &[NodeIdx] = self.heap().map_or(&[], Vec::as_slice);
        inline.into_iter().take(len).chain(heap.iter().copied())
    }
    /// Returns true when newly inserted.
    pub fn insert(&mut self, n: NodeIdx) -> bool {
        if self.contains(n) {
            return false;
        }
        if let Some(v) = self.heap_mut() {
            v.push(n);
            return true;
        }
        let len = self.len();
        match self.bits() {
            Some(b) if len < NODES_INLINE && n <= 0xff => {
                let b = (b & !(7 << 1)) | ((len + 1) << 1) | ((n as usize) << (8 * (len + 1)));
                *self = NodeSet::from_bits(b);
            }
            _ => {
                let mut v: Vec<NodeIdx> = self.iter().collect();
                v.push(n);
                *self = NodeSet::from_vec(v);
            }
        }
        true
    }
    pub fn remove(&mut self, n: NodeIdx) {
        let kept: Vec<NodeIdx> = self.iter().filter(|&x| x != n).collect();
        *self = NodeSet::from_slice(&kept);
    }
    /// Heap bytes of a spilled set (0 inline).
    pub fn heap_bytes(&self) -> usize {
        self.heap().map_or(0, |v| {
            std::mem::size_of::<Vec<NodeIdx>>() + v.capacity() * std::mem::size_of::<NodeIdx>()
        })
    }
    pub fn from_slice(s: &[NodeIdx]) -> NodeSet {
        let mut set = NodeSet::default();
        for &n in s {
            set.insert(n);
        }
        set
    }
}

impl Default for NodeSet {
    fn default() -> Self {
        NodeSet::from_bits(1)
    }
}

impl Drop for NodeSet {
    fn drop(&mut self) {
        if self.bits().is_none() {
            // SAFETY: untagged pointers come from Box::leak in `from_vec`
            // and are dropped exactly once, here.
            drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        }
    }
}

impl Clone for NodeSet {
    fn clone(&self) -> NodeSet {
        match (self.bits(), self.heap()) {
            (Some(b), _) => NodeSet::from_bits(b),
            (None, Some(v)) => NodeSet::from_vec(v.clone()),
            (None, None) => NodeSet::default(),
        }
    }
}

impl std::fmt::Debug for NodeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A job as held by one node.
pub struct Job {
    pub id: JobId,
    pub state: JobState,
    pub gc_retry: u8,
    pub flags: u8,
    pub repl: u16,
    pub nacks: u16,
    pub deliv: u16,
    /// Absolute expire time, unix seconds.
    pub etime: u32,
    pub delay: u32,
    pub retry: u32,
    /// Creation time: unix ms * 1e6 (+ tie counter).
    pub ctime: u64,
    /// Next local (re)queue time in ms; 0 = never queue again.
    pub qtime: u64,
    /// Key in the scheduler; 0 = not scheduled.
    pub awakeme: u64,
    /// None for a dummy ACK.
    pub queue: Option<QueueName>,
    /// None for a dummy ACK.
    pub body: Option<Body>,
    pub nodes_delivered: NodeSet,
    // nodes_confirmed (wait-repl and acked jobs only) lives in
    // `Engine::confirmed`, keyed by handle, so other jobs do not pay for it.
}

impl Job {
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
    pub fn is_dummy(&self) -> bool {
        self.queue.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_id_fits_the_node_ttl_and_retry_it_was_made_for() {
        let node = *b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d";
        let other = *b"bd249f8c9b2240cd45f72fd233bd3d5a42a6709d";
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let id = JobId::generate(&node, 86400, 30, &mut rng);
        assert!(id.fits(&node, 86400, 30));
        assert!(
            id.fits(&node, 86410, 1),
            "same minute, retry or not is the bit"
        );
        assert!(!id.fits(&node, 86400, 0));
        assert!(!id.fits(&node, 3600, 30));
        assert!(!id.fits(&other, 86400, 30));
    }

    #[test]
    fn generated_ids_use_every_base64_character_everywhere() {
        let node = *b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d";
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut seen = vec![std::collections::HashSet::new(); 24];
        for _ in 0..5000 {
            let id = JobId::generate(&node, 86400, 30, &mut rng);
            for (i, c) in id.0[11..35].iter().enumerate() {
                seen[i].insert(*c);
            }
        }
        assert!(seen.iter().all(|s| s.len() == 64));
    }

    #[test]
    fn generated_ids_have_disque_shape_and_parity() {
        let node = *b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d";
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let id = JobId::generate(&node, 86400, 30, &mut rng);
        let s = std::str::from_utf8(&id.0).unwrap();
        assert!(s.starts_with("D-ad249f8c-"));
        assert!(s.ends_with("-05a1"));
        assert!(JobId::parse(s.as_bytes()).is_some());
        assert!(s[11..35]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/'));
        assert_eq!(&JobId::generate(&node, 86400, 0, &mut rng).0[36..], b"05a0");
        assert_eq!(&JobId::generate(&node, 3600, 5, &mut rng).0[36..], b"003d");
        assert_eq!(&JobId::generate(&node, 600, 5, &mut rng).0[36..], b"000b");
        assert_eq!(&JobId::generate(&node, 5, 5, &mut rng).0[36..], b"0001");
        assert_eq!(&JobId::generate(&node, 5, 0, &mut rng).0[36..], b"0000");
        assert_eq!(
            &JobId::generate(&node, 10_000_000, 1, &mut rng).0[36..],
            b"ffff"
        );
    }

    #[test]
    fn id_validation_checks_only_length_and_separators() {
        assert!(JobId::parse(b"D-00000000-000000000000000000000000-0001").is_some());
        assert!(JobId::parse(b"D-zzzzzzzz-!!!!!!!!!!!!!!!!!!!!!!!!-zzzz").is_some());
        assert!(JobId::parse(b"E-00000000-000000000000000000000000-0001").is_none());
        assert!(JobId::parse(b"D-00000000-000000000000000000000000-001").is_none());
        assert!(JobId::parse(b"D-00000000x000000000000000000000000-0001").is_none());
        let id = JobId::parse(b"D-00000000-000000000000000000000000-00zz").unwrap();
        assert_eq!(id.ttl_minutes(), 0);
    }

    #[test]
    fn nodeset_spills_to_heap() {
        let mut s = NodeSet::default();
        assert_eq!(std::mem::size_of::<NodeSet>(), 8);
        for i in 0..8 {
            assert!(s.insert(i));
        }
        assert!(!s.insert(3));
        assert_eq!(s.len(), 8);
        assert!(s.heap_bytes() > 0);
        s.remove(3);
        assert_eq!(s.len(), 7);
        assert!(!s.contains(3));
        // Back inline after the removal.
        assert_eq!(s.heap_bytes(), 0);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 4, 5, 6, 7]);
    }

    #[test]
    fn nodeset_keeps_insertion_order_and_big_indexes() {
        let mut s = NodeSet::from_slice(&[5, 0, 255, 9]);
        assert_eq!(s.heap_bytes(), 0);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5, 0, 255, 9]);
        // An index above a byte spills, order kept.
        assert!(s.insert(70_000));
        assert!(s.heap_bytes() > 0);
        let c = s.clone();
        assert!(s.insert(1));
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![5, 0, 255, 9, 70_000]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5, 0, 255, 9, 70_000, 1]);
        assert!(s.contains(70_000) && !s.contains(2));
        assert_eq!(format!("{c:?}"), "[5, 0, 255, 9, 70000]");
        let e = NodeSet::default();
        assert!(e.is_empty() && e.clone().is_empty());
    }

    #[test]
    fn body_is_thin_and_round_trips() {
        assert_eq!(std::mem::size_of::<Option<Body>>(), 8);
        for len in [0usize, 1, 100, 4096, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let b = Body::from(&data[..]);
            assert_eq!(&b[..], &data[..]);
            let c = b.clone();
            drop(b);
            assert_eq!(c.len(), len);
            assert_eq!(&c[..], &data[..]);
            assert_eq!(c, Body::from(&data[..]));
        }
        assert_eq!(format!("{:?}", Body::from(&b"ab"[..])), "\"ab\"");
    }
}
