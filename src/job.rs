//! Jobs: the 40-byte job ID format, job states and flags, and the `Job`
//! record every node keeps per job. Behaviour lives in the engine; this
//! module only owns the data and its invariants (ID validation, TTL parity).

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
        let mut raw = [0u8; 18];
        rng.fill_bytes(&mut raw);
        for (i, chunk) in raw.chunks(3).enumerate() {
            let n = (u32::from(chunk[0]) << 16) | (u32::from(chunk[1]) << 8) | u32::from(chunk[2]);
            for k in 0..4 {
                id[11 + i * 4 + k] = B64[((n >> (18 - 6 * k)) & 63) as usize];
            }
        }
        id[35] = b'-';
        let mut m = (ttl_secs / 60).min(65535) as u32;
        if retry > 0 {
            m |= 1;
        } else {
            m &= !1;
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for k in 0..4 {
            id[36 + k] = HEX[((m >> (12 - 4 * k)) & 15) as usize];
        }
        JobId(id)
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
/// never serialized; `crate::job_ext`).
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
/// A job body: exactly its bytes, no spare capacity.
pub type Body = Box<[u8]>;

/// A small set of node indexes in 16 bytes: up to 7 members below 65536
/// inline (the common REPLICATE <= 7 case allocates nothing), else a Vec.
#[derive(Clone, Debug)]
pub enum NodeSet {
    Inline { len: u8, ids: [u16; 7] },
    Heap(Box<Vec<NodeIdx>>),
}

impl Default for NodeSet {
    fn default() -> Self {
        NodeSet::Inline {
            len: 0,
            ids: [0; 7],
        }
    }
}

impl NodeSet {
    pub fn len(&self) -> usize {
        match self {
            NodeSet::Inline { len, .. } => *len as usize,
            NodeSet::Heap(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn contains(&self, n: NodeIdx) -> bool {
        self.iter().any(|x| x == n)
    }
    pub fn iter(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        let (inline, heap): (&[u16], &[NodeIdx]) = match self {
            NodeSet::Inline { len, ids } => (&ids[..*len as usize], &[]),
            NodeSet::Heap(v) => (&[], v.as_slice()),
        };
        inline
            .iter()
            .map(|&x| NodeIdx::from(x))
            .chain(heap.iter().copied())
    }
    /// Returns true when newly inserted.
    pub fn insert(&mut self, n: NodeIdx) -> bool {
        if self.contains(n) {
            return false;
        }
        match self {
            NodeSet::Inline { len, ids }
                if (*len as usize) < ids.len() && n <= u32::from(u16::MAX) =>
            {
                ids[*len as usize] = n as u16;
                *len += 1;
            }
            NodeSet::Inline { .. } => {
                let mut v: Vec<NodeIdx> = self.iter().collect();
                v.push(n);
                *self = NodeSet::Heap(Box::new(v));
            }
            NodeSet::Heap(v) => v.push(n),
        }
        true
    }
    pub fn remove(&mut self, n: NodeIdx) {
        let kept: Vec<NodeIdx> = self.iter().filter(|&x| x != n).collect();
        *self = NodeSet::from_slice(&kept);
    }
    /// Heap bytes of a spilled set (0 inline).
    pub fn heap_bytes(&self) -> usize {
        match self {
            NodeSet::Inline { .. } => 0,
            NodeSet::Heap(v) => 24 + v.capacity() * 4,
        }
    }
    pub fn from_slice(s: &[NodeIdx]) -> NodeSet {
        let mut set = NodeSet::default();
        for &n in s {
            set.insert(n);
        }
        set
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
        assert_eq!(std::mem::size_of::<NodeSet>(), 16);
        for i in 0..8 {
            assert!(s.insert(i));
        }
        assert!(!s.insert(3));
        assert_eq!(s.len(), 8);
        s.remove(3);
        assert_eq!(s.len(), 7);
        assert!(!s.contains(3));
    }
}
