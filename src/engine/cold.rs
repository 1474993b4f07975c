//! Whole jobs on disk (docs/PERSISTENCE.md#9-spill-tiers): with
//! `spill-whole-jobs yes`, a plain queued job past its queue's
//! head window leaves RAM entirely once its storage record (the AOF's
//! LOADJOB encoding) is written. What stays is a 20-byte slot (where the
//! record is, its expire time, where its ID-index entry is), its ID-index
//! entry (tagged `COLD_TAG`) and its slot number in one of its queue's
//! runs: no job record, no order-index entry, no timer.
//!
//! Runs keep a queue's cold jobs in creation order: a run takes slots in
//! ascending creation time and runs are ordered by their first one, so
//! reading the front run first brings jobs back in queue order. A queue's
//! head is served only while it is older than every job still on disk
//! (`cold_head_ready`); otherwise the front run is read first.
//!
//! A replica's plain copy (active, waiting for its retry) leaves RAM whole
//! too, into the runs of copies (`COPIES`), grouped by requeue time: the
//! cron reads a run back before its first copy is due, and the copy's
//! timer runs as if it had never left (`cold_copies_due`).
//!
//! Everything else that names a job (a command's arguments, a bus
//! message) first brings the jobs it names back (`cold_fault`,
//! `cold_park`), then runs as if they had never left: no command needs
//! to know about this tier; two bus messages are answered from the slot
//! instead (`cold_answer`). Reads happen on the spill thread
//! (`SpillOp::ReadCold`); the engine never touches the disk.
//!
//! With the AOF on, the job's LOADJOB stays its durable copy. An AOF
//! rewrite (segments pinned) walks the slots (`cold_snapshot`) after the
//! job table; meanwhile a job that leaves RAM whole or is read back is
//! logged again, so no job is missed while it moves between the tables.

use std::collections::VecDeque;

use bytes::Bytes;

use super::chunked::Chunked;
use super::gossip::LinkKind;
use super::records::Flavor;
use super::spill::{Loc, ReadFailure, SpillOp};
use super::{BusOut, Engine, JobHandle, Map};
use crate::domain::job::{JobId, JobState, NodeIdx, NodeSet, F_DELIVERED, F_EXT};
use crate::domain::job_ext::PRIORITY_DEFAULT;
use crate::protocol::bus::message::{Body, JobMsg, Message, MFLAG_CANCELLED};
use crate::protocol::job_codec::RecordRef;

/// ID-index entries of cold jobs carry this bit (slab handles never do).
pub const COLD_TAG: u32 = 1 << 31;

/// A read no queue's prefetch asked for.
pub const NO_QUEUE: u32 = u32::MAX;

/// The runs of replicas' copies, kept under this key beside the queues'
/// runs (never a queue handle: handles are slab indexes).
pub const COPIES: u32 = u32::MAX - 1;

/// A run of copies spans at most this much of their requeue times: read
/// back together, each is due at the run's latest time, never earlier.
const COPY_SPAN_MS: u64 = 500;

/// A run of copies is read back this long before its first requeue time
/// (its WILLQUEUE goes 500 ms before; the cron looks every 100 ms).
const COPY_LEAD_MS: u64 = 800;

/// A copy leaves RAM whole only if its requeue time is further ahead than
/// this (else it would come back at once).
const COPY_AHEAD_MS: u64 = 1500;

/// A copy back from disk is due no sooner than this: its WILLQUEUE goes
/// 500 ms before it is due, and the answer must have time to arrive.
const COPY_ASK_MS: u64 = 600;

/// Copies read back per 100 ms cron run at most, and at least (when
/// memory has no room for them: they come late rather than not at all).
const COPY_READ_BUDGET: usize = 16_384;
const COPY_READ_MIN: usize = 64;

/// Slots per run: reads of a run's slots go out together.
const RUN_SLOTS: usize = 4096;

/// Cold jobs one QPEEK brings back at most (a larger QPEEK shows the
/// resident jobs it finds beyond them).
const PEEK_MAX: usize = 10_000;

/// Slots whose expire time the cron checks per run.
const EXPIRE_BUDGET: usize = 16_384;

const LEN_MASK: u32 = (1 << 28) - 1;
/// The slot holds a replica's copy (active, waiting for its retry), not a
/// queued job.
const COPY: u32 = 1 << 28;
const IN_RUN: u32 = 1 << 29;
const ST_SHIFT: u32 = 30;
const ON_DISK: u32 = 0;
const LOADING: u32 = 1;
const DEAD: u32 = 2;
/// Being copied forward by compaction; still readable where it was.
const MOVING: u32 = 3;

/// One cold job: 20 bytes.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// Segment << 8 | ID-index shard.
    seg_shard: u32,
    off: u32,
    /// Record body length, `COPY`, `IN_RUN`, state (top two bits).
    len_st: u32,
    /// Absolute expire time, unix seconds.
    etime: u32,
    /// The ID's hash bits in its index entry.
    h32: u32,
}

impl Slot {
    fn loc(&self) -> Loc {
        Loc {
            seg: self.seg_shard >> 8,
            off: self.off,
            len: self.len_st & LEN_MASK,
        }
    }
    fn shard(&self) -> usize {
        (self.seg_shard & 0xff) as usize
    }
    fn state(&self) -> u32 {
        self.len_st >> ST_SHIFT
    }
    fn set_state(&mut self, st: u32) {
        self.len_st = (self.len_st & !(3 << ST_SHIFT)) | st << ST_SHIFT;
    }
    fn in_run(&self) -> bool {
        self.len_st & IN_RUN != 0
    }
    fn is_copy(&self) -> bool {
        self.len_st & COPY != 0
    }
    fn set_in_run(&mut self, on: bool) {
        if on {
            self.len_st |= IN_RUN;
        } else {
            self.len_st &= !IN_RUN;
        }
    }
}

/// Every slot ever made, in fixed chunks (`Chunked`).
#[derive(Default)]
struct Slots {
    table: Chunked<Slot>,
    len: u32,
}

impl Slots {
    fn len(&self) -> u32 {
        self.len
    }
    fn get(&self, i: u32) -> Option<&Slot> {
        (i < self.len).then(|| self.table.get(i)).flatten()
    }
    fn get_mut(&mut self, i: u32) -> Option<&mut Slot> {
        if i >= self.len {
            return None;
        }
        self.table.get_mut(i)
    }
    fn push(&mut self, s: Slot) -> Option<u32> {
        let i = self.len;
        if i >= COLD_TAG - 1 {
            return None;
        }
        self.table.set(i, s);
        self.len += 1;
        Some(i)
    }
    fn bytes(&self) -> usize {
        self.table.bytes()
    }
}

/// Consecutive cold jobs of one queue, oldest first.
struct Run {
    id: u64,
    /// No job still on disk or being read is older than this.
    first: u64,
    last: u64,
    /// No live slot expires before this (unix s).
    min_etime: u32,
    /// Reads of this run's slots in flight.
    inflight: u32,
    slots: Vec<u32>,
    start: usize,
}

impl Run {
    /// An empty run starting at `first` (a creation or requeue time).
    fn new(id: u64, first: u64, min_etime: u32) -> Run {
        Run {
            id,
            first,
            last: first,
            min_etime,
            inflight: 0,
            slots: Vec::with_capacity(16),
            start: 0,
        }
    }

    fn is_done(&self) -> bool {
        self.start >= self.slots.len() && self.inflight == 0
    }
}

#[derive(Default)]
struct ColdQueue {
    runs: VecDeque<Run>,
    /// Prefetch reads in flight.
    loading: u32,
}

/// A bus message parked until the jobs it names are back.
pub struct Parked {
    pub link: LinkKind,
    pub local_ip: String,
    pub peer_ip: String,
    pub msg: Message,
}

enum Waiter {
    /// A command to run again (the shell holds the client).
    Ticket(u64),
    Message(Box<Parked>),
}

struct Wait {
    slots: Vec<u32>,
    who: Waiter,
}

/// The cold tier's state (empty and inert unless enabled).
#[derive(Default)]
pub struct ColdTier {
    enabled: bool,
    slots: Slots,
    free: Vec<u32>,
    /// Cold jobs (slots neither dead nor free).
    live: u64,
    queues: Map<u32, ColdQueue>,
    next_run: u64,
    waits: Vec<Wait>,
    next_ticket: u64,
    done: Vec<u64>,
    ready_msgs: Vec<Parked>,
    /// Compaction: the segment being emptied and the next slot to look at.
    compact: Option<(u32, u32)>,
    /// What an AOF replay keeps per slot (dropped when it ends).
    replay: Option<Replay>,
    pub(crate) evicted_total: u64,
    pub(crate) loaded_total: u64,
    pub(crate) expired_total: u64,
    /// WILLQUEUEs answered from a slot (`cold_answer`).
    pub(crate) willqueue_answered: u64,
    /// Replicas' copies on disk (of `live`).
    pub(crate) copies: u64,
    /// Copies on disk acknowledged without a read (`cold_setack`).
    pub(crate) acked_on_disk: u64,
    /// Every other node that held a copy of a job when it went to disk
    /// (a job's own node list stays on disk with it); cleared when the
    /// last job on disk leaves.
    holders: NodeSet,
}

/// While an AOF replay runs: what it knows of each cold slot it made,
/// indexed by slot, in chunks (`Chunked`: these tables reach tens of
/// megabytes at the very moment memory is tightest).
#[derive(Default)]
struct Replay {
    /// `JobStore::id_check` of each slot's job (`replayed_slot`): 4 bytes
    /// a job, all a replay of copies alone (a restart without the recipe)
    /// keeps.
    checks: Chunked<u32, REPLAY_CHUNK_BITS>,
    /// The creation time of each queued job's slot, as a 4-byte key
    /// (`ctime_key`, from `base`): a replay meets a queue's jobs out of
    /// order (a rewrite lists the job table in slot order), and with it a
    /// job joins the run whose span it falls in, in its place
    /// (`ColdTier::insert`), instead of staying in RAM.
    ctimes: Chunked<u32, REPLAY_CHUNK_BITS>,
    /// The first creation time noted: keys are relative to it.
    base: Option<u64>,
    /// Queued jobs on disk a later record dropped (their DELJOB): the
    /// notes do not say which queue a slot is in, so their queues' counts
    /// come down when the replay ends (`cold_replay_end`), in one walk of
    /// the runs. One bit a slot, set as they are dropped.
    orphans: Chunked<u64, ORPHAN_CHUNK_BITS>,
}

/// A replay's tables in chunks of a million slots (4 MiB): freed at its
/// end, they go back to the kernel whole (`Chunked`).
const REPLAY_CHUNK_BITS: u32 = 20;

/// The orphans' bitmap in words of 64 slots, 16,384 words (8 MiB of
/// slots) a chunk.
const ORPHAN_CHUNK_BITS: u32 = 14;

/// Bits of exact distance in `ctime_key`: below 2^26 units (67 ms of
/// creation times) a key is the distance itself.
const KEY_EXACT_BITS: u32 = 26;

/// A non-negative distance `d` in 31 bits, order kept (a larger `d`
/// never gets a smaller code): exact below 2^26, beyond it a float with
/// 25 bits of mantissa (a day away, within 2.6 ms; an hour, 0.1 ms).
fn far_code(d: u64) -> u32 {
    const M: u32 = KEY_EXACT_BITS;
    if d < 1 << M {
        return d as u32;
    }
    let shift = 64 - d.leading_zeros() - M;
    let mant = (d >> shift) as u32 - (1 << (M - 1));
    (1 << M) + (shift - 1) * (1 << (M - 1)) + mant
}

/// The distances `far_code` maps to `c`: the least and the greatest.
fn far_span(c: u32) -> (u64, u64) {
    const M: u32 = KEY_EXACT_BITS;
    if c < 1 << M {
        return (u64::from(c), u64::from(c));
    }
    let over = c - (1 << M);
    // Codes past the largest `far_code` makes (none is) stay in range.
    let shift = (over / (1 << (M - 1)) + 1).min(64 - M);
    let mant = u64::from(over % (1 << (M - 1)));
    let lo = ((1u64 << (M - 1)) + mant) << shift;
    (lo, lo.saturating_add((1u64 << shift) - 1))
}

const KEY_ZERO: u32 = 1 << 31;

/// A creation time as a 4-byte key relative to `base`, order kept: a
/// later time never gets a smaller key (equal keys keep the replay's
/// order). Half the size of the time itself, for the one table a replay
/// holds per queued job until its end.
fn ctime_key(base: u64, ctime: u64) -> u32 {
    if ctime >= base {
        KEY_ZERO + far_code(ctime - base)
    } else {
        KEY_ZERO - far_code(base - ctime)
    }
}

/// The creation times `ctime_key` maps to `k`: the earliest and the
/// latest (a run's bounds after a split must hold every job in it).
fn key_span(base: u64, k: u32) -> (u64, u64) {
    if k >= KEY_ZERO {
        let (lo, hi) = far_span(k - KEY_ZERO);
        (base.saturating_add(lo), base.saturating_add(hi))
    } else {
        let (lo, hi) = far_span(KEY_ZERO - k);
        (base.saturating_sub(hi), base.saturating_sub(lo))
    }
}

impl ColdTier {
    /// A replay starts: its notes begin empty (`cold_replay_end` drops
    /// them).
    pub(crate) fn begin_replay(&mut self) {
        self.replay = Some(Replay::default());
    }

    /// Note what a replay knows of `slot`: its job's ID check, and for a
    /// queued job its creation time.
    fn note_replayed(&mut self, slot: u32, check: u32, ctime: Option<u64>) {
        let Some(r) = &mut self.replay else {
            return;
        };
        r.checks.set(slot, check);
        if let Some(ctime) = ctime {
            let base = *r.base.get_or_insert(ctime);
            r.ctimes.set(slot, ctime_key(base, ctime));
        }
    }

    /// During a replay: whether a job may go inside run `r` rather than
    /// only after it: none of its slots has been read yet (reads take a
    /// run from its front). A replay starts with no job on disk, so each
    /// slot has its creation time.
    fn insertable(&self, r: &Run) -> bool {
        self.replay.is_some() && r.start == 0 && r.inflight == 0
    }

    /// Put `slot` (created at `ctime`) inside run `k` of queue `qh` in
    /// creation order; a run grown past `RUN_SLOTS` splits in two.
    fn insert(&mut self, qh: u32, k: usize, slot: u32, ctime: u64, etime: u32) {
        let Some(rp) = &self.replay else {
            return;
        };
        let of = |s: u32| rp.ctimes.get(s).copied().unwrap_or(0);
        let base = rp.base.unwrap_or(ctime);
        let key = ctime_key(base, ctime);
        let Some(cq) = self.queues.get_mut(&qh) else {
            return;
        };
        let Some(r) = cq.runs.get_mut(k) else {
            return;
        };
        // `push` only inserts inside the span: `first` and `last` hold.
        let at = r.slots.partition_point(|&s| of(s) <= key);
        r.slots.insert(at, slot);
        r.min_etime = r.min_etime.min(etime);
        if r.slots.len() <= RUN_SLOTS {
            return;
        }
        let tail = r.slots.split_off(RUN_SLOTS / 2);
        // A key stands for a span of times: bounds that take its whole
        // span still hold every job of the run.
        let lo = |s: u32| key_span(base, of(s)).0;
        let hi = |s: u32| key_span(base, of(s)).1;
        r.last = r.slots.last().map_or(r.first, |&s| hi(s));
        let first = tail.first().map_or(r.last, |&s| lo(s));
        let last = tail.last().map_or(first, |&s| hi(s));
        let slots = &self.slots;
        let min_etime = |v: &[u32]| {
            v.iter()
                .filter_map(|&s| slots.get(s).map(|x| x.etime))
                .min()
                .unwrap_or(u32::MAX)
        };
        r.min_etime = min_etime(&r.slots);
        self.next_run += 1;
        let run = Run {
            id: self.next_run,
            first,
            last,
            min_etime: min_etime(&tail),
            inflight: 0,
            slots: tail,
            start: 0,
        };
        cq.runs.insert(k + 1, run);
    }

    fn alloc(&mut self, s: Slot) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            if let Some(x) = self.slots.get_mut(i) {
                *x = s;
                return Some(i);
            }
        }
        self.slots.push(s)
    }

    fn get(&self, slot: u32) -> Option<Slot> {
        self.slots.get(slot).copied()
    }

    fn get_mut(&mut self, slot: u32) -> Option<&mut Slot> {
        self.slots.get_mut(slot)
    }

    /// Give back a slot `alloc` just handed out.
    fn unalloc(&mut self, slot: u32) {
        if let Some(s) = self.get_mut(slot) {
            s.set_state(DEAD);
        }
        self.free.push(slot);
    }

    /// A dead slot that no run holds is reused.
    fn release(&mut self, slot: u32) {
        if let Some(s) = self.get_mut(slot) {
            if s.state() == DEAD && !s.in_run() {
                self.free.push(slot);
            }
        }
    }

    /// Add a slot to the queue's runs: to the run it continues (the last
    /// one starting at or before `ctime`, if not newer and not full), else
    /// to a new run in its place. A backfill pass and the lazy tail evict
    /// in two ascending streams, so each stream keeps extending its run.
    fn push(&mut self, qh: u32, slot: u32, ctime: u64, etime: u32) {
        // Only a replay inserts inside a run: no search on the evictions
        // of a running node.
        let inside = match self.queues.get(&qh) {
            Some(cq) if self.replay.is_some() => cq
                .runs
                .partition_point(|r| r.first <= ctime)
                .checked_sub(1)
                .filter(|&k| {
                    cq.runs
                        .get(k)
                        .is_some_and(|r| r.last > ctime && self.insertable(r))
                }),
            _ => None,
        };
        if let Some(k) = inside {
            self.insert(qh, k, slot, ctime, etime);
            if let Some(s) = self.get_mut(slot) {
                s.set_in_run(true);
            }
            return;
        }
        let cq = self.queues.entry(qh).or_default();
        let at = cq.runs.partition_point(|r| r.first <= ctime);
        let fits = at
            .checked_sub(1)
            .and_then(|k| cq.runs.get(k))
            .is_some_and(|r| r.last <= ctime && r.slots.len() < RUN_SLOTS);
        let k = if fits {
            at - 1
        } else {
            self.next_run += 1;
            cq.runs.insert(at, Run::new(self.next_run, ctime, etime));
            at
        };
        if let Some(r) = cq.runs.get_mut(k) {
            r.last = r.last.max(ctime);
            r.min_etime = r.min_etime.min(etime);
            r.slots.push(slot);
        }
        if let Some(s) = self.get_mut(slot) {
            s.set_in_run(true);
        }
    }

    /// Add a copy's slot to the runs of copies: to one of the last few
    /// runs whose requeue times stay within `COPY_SPAN_MS` with it (copies
    /// arrive roughly in requeue order; jobs with other RETRYs interleave),
    /// else to a new run. A run already being read takes no more.
    fn push_copy(&mut self, slot: u32, qtime: u64, etime: u32) {
        let cq = self.queues.entry(COPIES).or_default();
        let n = cq.runs.len();
        let fits = |r: &Run| {
            r.start == 0
                && r.inflight == 0
                && r.slots.len() < RUN_SLOTS
                && r.last.max(qtime) - r.first.min(qtime) <= COPY_SPAN_MS
        };
        let k = (n.saturating_sub(4)..n)
            .rev()
            .find(|&k| cq.runs.get(k).is_some_and(fits));
        let k = match k {
            Some(k) => k,
            None => {
                self.next_run += 1;
                cq.runs.push_back(Run::new(self.next_run, qtime, etime));
                n
            }
        };
        if let Some(r) = cq.runs.get_mut(k) {
            r.first = r.first.min(qtime);
            r.last = r.last.max(qtime);
            r.min_etime = r.min_etime.min(etime);
            r.slots.push(slot);
        }
        if let Some(s) = self.get_mut(slot) {
            s.set_in_run(true);
        }
    }

    /// Whether a job created at `ctime` can join queue `qh`'s runs
    /// without breaking their order: not inside a run's span. A job read
    /// back from the middle of a run (a command asked for it) stays in
    /// RAM, or spills its body only, rather than be served out of order.
    fn fits_in_order(&self, qh: u32, ctime: u64) -> bool {
        let Some(cq) = self.queues.get(&qh) else {
            return true;
        };
        // New jobs join at the tail: answered by the last run alone, no
        // search over the thousands of runs of a long backlog.
        if let Some(last) = cq.runs.back().filter(|r| r.first <= ctime) {
            return last.last <= ctime || self.insertable(last);
        }
        let at = cq.runs.partition_point(|r| r.first <= ctime);
        at.checked_sub(1)
            .and_then(|k| cq.runs.get(k))
            .is_none_or(|r| r.last <= ctime || self.insertable(r))
    }

    /// Settle every wait on `slot`; waits with nothing left are done.
    fn settled(&mut self, slot: u32) {
        if self.waits.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.waits.len() {
            let w = &mut self.waits[i];
            w.slots.retain(|&s| s != slot);
            if w.slots.is_empty() {
                let w = self.waits.swap_remove(i);
                match w.who {
                    Waiter::Ticket(t) => self.done.push(t),
                    Waiter::Message(m) => self.ready_msgs.push(*m),
                }
            } else {
                i += 1;
            }
        }
    }
}

impl Engine {
    /// `spill-whole-jobs yes|no`.
    pub fn set_spill_whole_jobs(&mut self, on: bool) {
        self.cold.enabled = on;
    }

    /// Whole jobs spill now: the tier is on and there is no AOF (an AOF
    /// rewrite would need every job's record; bodies spill instead then).
    pub(crate) fn cold_on(&self) -> bool {
        self.cold.enabled
    }

    /// Jobs stored whole on disk.
    pub fn cold_jobs(&self) -> u64 {
        self.cold.live
    }

    /// Can queued job `h` leave RAM whole? Plain jobs only: no extension
    /// state, no confirmations, the default priority.
    pub(crate) fn cold_eligible(&self, h: JobHandle) -> bool {
        self.cold_queue_of_eligible(h).is_some()
    }

    /// `cold_eligible`, answering with the job's queue.
    fn cold_queue_of_eligible(&self, h: JobHandle) -> Option<u32> {
        if !self.cold_on() {
            return None;
        }
        let j = self.store.get(h)?;
        let plain = j.state == JobState::Queued
            && !j.has(F_EXT)
            && j.body.is_some()
            && !self.confirmed.contains_key(&h)
            && !self.adders.contains_key(&h);
        if !plain {
            return None;
        }
        let qh = *self.queue_index.get(j.queue.as_deref()?)?;
        self.cold.fits_in_order(qh, j.ctime).then_some(qh)
    }

    /// The storage record of a job leaving whole.
    pub(crate) fn cold_record(&self, h: JobHandle) -> Option<Bytes> {
        let j = self.store.get(h)?;
        Some(super::records::storage_bytes(j, None, &self.cluster))
    }

    /// The write of job `h`'s whole record at `loc` is on disk: the job
    /// leaves RAM. False when it changed meanwhile (it stays).
    pub(crate) fn cold_evict(&mut self, h: JobHandle, id: JobId, loc: Loc) -> bool {
        if loc.seg >= 1 << 24 || loc.len > LEN_MASK {
            return false;
        }
        let Some(qh) = self.cold_queue_of_eligible(h) else {
            return false;
        };
        let Some(j) = self.store.get(h).filter(|j| j.id == id) else {
            return false;
        };
        let (ctime, etime) = (j.ctime, j.etime);
        for n in j.nodes_delivered.iter().filter(|&n| n != 0) {
            self.cold.holders.insert(n);
        }
        let Some(slot) = self.cold.alloc(Slot::default()) else {
            return false;
        };
        if self.cold.replay.is_some() {
            let check = super::store::JobStore::id_check(&id);
            self.cold.note_replayed(slot, check, Some(ctime));
        }
        let removed = self
            .queues
            .get_mut(qh)
            .is_some_and(|q| q.remove_prio(PRIORITY_DEFAULT, ctime, h));
        if !removed {
            self.cold.unalloc(slot);
            return false;
        }
        if !self.cold_settle(h, slot, loc, etime, 0) {
            return false;
        }
        if let Some(q) = self.queues.get_mut(qh) {
            q.cold += 1;
        }
        self.cold.push(qh, slot, ctime, etime);
        self.cold.live += 1;
        self.cold.evicted_total += 1;
        self.spill_cold_record(loc.seg, true);
        true
    }

    /// Can job `h`, a replica's copy (active, never delivered here,
    /// waiting for its retry), leave RAM whole? Plain jobs only, as for
    /// queued ones, with a requeue time far enough ahead.
    pub(crate) fn cold_copy_eligible(&self, h: JobHandle, now: u64) -> bool {
        self.cold_copy_qtime(h)
            .is_some_and(|q| q > now.saturating_add(COPY_AHEAD_MS))
    }

    /// A copy that could leave RAM whole but whose retry is too near: it
    /// stays in RAM, body and all, until that retry is answered and moves
    /// its requeue time on (its body alone on disk would keep its record
    /// in RAM from then on).
    ///
    /// Only for a RETRY of four times that window or more: a copy with a
    /// shorter one would spend much of its time in RAM whole, so its body
    /// spills as before whenever it is not whole.
    pub(crate) fn cold_copy_soon(&self, h: JobHandle, now: u64) -> bool {
        let long = self
            .store
            .get(h)
            .is_some_and(|j| u64::from(j.retry) * 1000 >= 4 * COPY_AHEAD_MS);
        long && self
            .cold_copy_qtime(h)
            .is_some_and(|q| q <= now.saturating_add(COPY_AHEAD_MS))
    }

    /// The requeue time of job `h` if it is a plain replica's copy that
    /// may leave RAM whole now (or a job an AOF replay brought back
    /// active, which waits for its retry the same way).
    fn cold_copy_qtime(&self, h: JobHandle) -> Option<u64> {
        if !self.cold_on() {
            return None;
        }
        let j = self.store.get(h)?;
        let plain = j.state == JobState::Active
            && !j.has(F_DELIVERED)
            && !j.has(F_EXT)
            && j.body.is_some()
            && j.queue.is_some()
            && j.retry > 0
            && j.qtime != 0
            && !self.confirmed.contains_key(&h)
            && !self.adders.contains_key(&h);
        plain.then_some(j.qtime)
    }

    /// The write of copy `h`'s whole record at `loc` is on disk: the copy
    /// leaves RAM if it is as it was written (the same requeue time and
    /// node count; a QUEUED or WORKING meanwhile moves the requeue time).
    pub(crate) fn cold_evict_copy(
        &mut self,
        h: JobHandle,
        id: JobId,
        loc: Loc,
        qtime: u64,
        nodes: u32,
    ) -> bool {
        if loc.seg >= 1 << 24 || loc.len > LEN_MASK {
            return false;
        }
        // Eligible as written: its requeue time was ahead then.
        if !self.cold_copy_eligible(h, 0) {
            return false;
        }
        let Some(j) = self
            .store
            .get(h)
            .filter(|j| j.id == id && j.qtime == qtime && j.nodes_delivered.len() as u32 == nodes)
        else {
            return false;
        };
        let etime = j.etime;
        for n in j.nodes_delivered.iter().filter(|&n| n != 0) {
            self.cold.holders.insert(n);
        }
        let Some(slot) = self.cold.alloc(Slot::default()) else {
            return false;
        };
        if self.cold.replay.is_some() {
            // A later record of the job (its DELJOB, a duplicate LOADJOB)
            // must find it here.
            let check = super::store::JobStore::id_check(&id);
            self.cold.note_replayed(slot, check, None);
        }
        if !self.cold_settle(h, slot, loc, etime, COPY) {
            return false;
        }
        self.cold.push_copy(slot, qtime, etime);
        self.cold.live += 1;
        self.cold.copies += 1;
        self.cold.evicted_total += 1;
        self.spill_cold_record(loc.seg, true);
        true
    }

    /// Job `h` leaves the job table for the slot `alloc` gave it: its
    /// ID-index entry now names the slot, which says where its record
    /// (written at `loc`) is. False (the slot given back) if the entry was
    /// not found.
    fn cold_settle(&mut self, h: JobHandle, slot: u32, loc: Loc, etime: u32, kind: u32) -> bool {
        // While an AOF rewrite snapshots the node, its pass over the job
        // table may not have reached the job yet and its pass over the
        // jobs on disk may have passed the slot already: the job's record
        // is logged again, so the new file has it either way (a record
        // twice is a duplicate the loader skips). Keeping every job in RAM
        // for the whole rewrite instead spilled bodies only, ~160 bytes a
        // job left in RAM, for as long as a rewrite of a large file lasts.
        if self.spill_pinned() {
            self.aof_relog(h);
        }
        let Some((_, shard, h32)) = self.store.evict(h, COLD_TAG | slot) else {
            self.cold.unalloc(slot);
            return false;
        };
        if let Some(s) = self.cold.get_mut(slot) {
            *s = Slot {
                seg_shard: loc.seg << 8 | shard as u32,
                off: loc.off,
                len_st: loc.len | kind,
                etime,
                h32,
            };
        }
        true
    }

    /// Read back the runs of copies whose requeue time is near (from the
    /// 100 ms spill cron): each comes back in time for its retry, as if it
    /// had never left. As many as memory has room for under 95 % of
    /// maxmemory, at the mean job size (a backlog's copies come due at the
    /// rate they arrived, and each stays in RAM until its WILLQUEUE is
    /// answered), at least `COPY_READ_MIN`.
    pub(crate) fn cold_copies_due(&mut self, now: u64) {
        if !self.cold.queues.contains_key(&COPIES) {
            return;
        }
        let mut budget = COPY_READ_BUDGET;
        let max = self.memory.maxmemory;
        if max > 0 {
            let used = (self.memory.used)() as u64;
            let room = (max / 100 * 95).saturating_sub(used);
            let fit = room / self.spill_mean_job().max(1);
            budget = budget.min(
                usize::try_from(fit)
                    .unwrap_or(usize::MAX)
                    .max(COPY_READ_MIN),
            );
        }
        let Some(cq) = self.cold.queues.get_mut(&COPIES) else {
            return;
        };
        let horizon = now.saturating_add(COPY_LEAD_MS);
        let mut ops = Vec::new();
        let mut freed = Vec::new();
        for r in cq.runs.iter_mut() {
            if r.first > horizon {
                continue;
            }
            // Slots already gone (read back for a message, acknowledged)
            // cost no read: they are released whatever the budget, or a
            // node short of memory would keep them all.
            while let Some(&slot) = r.slots.get(r.start) {
                let Some(s) = self.cold.slots.get_mut(slot) else {
                    r.start += 1;
                    continue;
                };
                let read = matches!(s.state(), ON_DISK | MOVING);
                if read && budget == 0 {
                    break;
                }
                r.start += 1;
                s.set_in_run(false);
                match s.state() {
                    ON_DISK | MOVING => {
                        budget -= 1;
                        s.set_state(LOADING);
                        r.inflight += 1;
                        cq.loading += 1;
                        ops.push(SpillOp::ReadCold {
                            slot,
                            loc: s.loc(),
                            qh: COPIES,
                            run: r.id,
                        });
                    }
                    DEAD => freed.push(slot),
                    _ => {}
                }
            }
        }
        cq.runs.retain(|r| !r.is_done());
        if cq.runs.is_empty() && cq.loading == 0 {
            self.cold.queues.remove(&COPIES);
        }
        for slot in freed {
            self.cold.release(slot);
        }
        self.spill_push_ops(ops);
    }

    /// A cold job is gone (read back, expired, corrupt): its index entry,
    /// its record and its place in the queue's count.
    fn cold_drop(&mut self, slot: u32, qh: u32) {
        if let Some(s) = self.cold.get(slot).filter(|s| s.state() != DEAD) {
            self.store.remove_cold(s.shard(), s.h32, COLD_TAG | slot);
            self.cold_forget(slot, qh);
        }
    }

    /// `cold_drop` but for the index entry, which the caller removes or
    /// points at the job read back.
    fn cold_forget(&mut self, slot: u32, qh: u32) {
        let Some(s) = self.cold.get(slot) else {
            return;
        };
        if s.state() == DEAD {
            return;
        }
        let loc = s.loc();
        self.spill_record_dead(loc);
        self.spill_cold_record(loc.seg, false);
        if let Some(x) = self.cold.get_mut(slot) {
            x.set_state(DEAD);
        }
        if s.is_copy() {
            self.cold.copies = self.cold.copies.saturating_sub(1);
        }
        self.cold.live = self.cold.live.saturating_sub(1);
        if self.cold.live == 0 {
            // Nodes that left the cluster stop being told QUEUED.
            self.cold.holders = NodeSet::default();
        }
        if let Some(q) = self.queues.get_mut(qh).filter(|_| !s.is_copy()) {
            q.cold = q.cold.saturating_sub(1);
        }
        self.cold.release(slot);
        self.cold.settled(slot);
    }

    /// Whether queue `qh`'s resident head may be served: it must be older
    /// than every job of the queue still on disk. If not, the front run
    /// is read first.
    pub(crate) fn cold_head_ready(&mut self, qh: u32) -> bool {
        let bound = self
            .cold
            .queues
            .get(&qh)
            .and_then(|cq| cq.runs.front())
            .map(|r| r.first);
        let Some(bound) = bound else {
            return true;
        };
        let head = self
            .queues
            .get(qh)
            .and_then(|q| q.first())
            .and_then(|h| self.store.get(h))
            .map(|j| j.ctime);
        if head.is_some_and(|c| c <= bound) {
            return true;
        }
        self.cold_prefetch(qh, true);
        false
    }

    /// Read the front of the queue's runs back while fewer than
    /// `prefetch_jobs` are resident or on their way
    /// (`force`: whatever is resident, the head must wait for them).
    pub(crate) fn cold_prefetch(&mut self, qh: u32, force: bool) {
        let resident = self.queues.get(qh).map_or(0, |q| q.resident());
        let want = self.prefetch_jobs();
        let Some(cq) = self.cold.queues.get_mut(&qh) else {
            return;
        };
        let mut have = cq.loading as usize + if force { 0 } else { resident };
        let mut ops = Vec::new();
        let mut freed = Vec::new();
        'runs: for r in cq.runs.iter_mut() {
            while have < want {
                let Some(&slot) = r.slots.get(r.start) else {
                    continue 'runs;
                };
                r.start += 1;
                let Some(s) = self.cold.slots.get_mut(slot) else {
                    continue;
                };
                s.set_in_run(false);
                match s.state() {
                    ON_DISK | MOVING => {
                        s.set_state(LOADING);
                        r.inflight += 1;
                        cq.loading += 1;
                        have += 1;
                        ops.push(SpillOp::ReadCold {
                            slot,
                            loc: s.loc(),
                            qh,
                            run: r.id,
                        });
                    }
                    DEAD => freed.push(slot),
                    // Being read for a command: it lands on its own.
                    _ => {}
                }
            }
            break;
        }
        while cq.runs.front().is_some_and(Run::is_done) {
            cq.runs.pop_front();
        }
        if cq.runs.is_empty() && cq.loading == 0 {
            self.cold.queues.remove(&qh);
        }
        for slot in freed {
            self.cold.release(slot);
        }
        self.spill_push_ops(ops);
    }

    /// A whole job read back.
    pub(crate) fn cold_read_done(
        &mut self,
        slot: u32,
        loc: Loc,
        qh: u32,
        run: u64,
        result: Result<(JobId, Bytes), ReadFailure>,
        now: u64,
    ) {
        // A run of copies: when its latest copy is due.
        let mut run_due = None;
        if qh != NO_QUEUE {
            if let Some(cq) = self.cold.queues.get_mut(&qh) {
                cq.loading = cq.loading.saturating_sub(1);
                if let Some(r) = cq.runs.iter_mut().find(|r| r.id == run) {
                    r.inflight = r.inflight.saturating_sub(1);
                    run_due = (qh == COPIES).then_some(r.last);
                }
            }
        }
        let mine = self
            .cold
            .get(slot)
            .is_some_and(|s| s.state() == LOADING && s.loc() == loc);
        if !mine {
            return;
        }
        let job = match result {
            Ok((id, blob)) => {
                self.spill_count_read(blob.len());
                self.cold_decode(slot, &id, &blob, now)
            }
            Err(ReadFailure::Io) => {
                // Left on disk: back at the front of its queue's runs.
                self.spill_read_error();
                if let Some(s) = self.cold.get_mut(slot) {
                    s.set_state(ON_DISK);
                }
                let ours = self.cold_queue_of(slot, qh);
                let in_run = self.cold.get(slot).is_some_and(|s| s.in_run());
                if !in_run && ours != NO_QUEUE {
                    self.cold.push_front(ours, slot);
                }
                self.cold.settled(slot);
                return;
            }
            Err(ReadFailure::Corrupt) => None,
        };
        let Some(job) = job else {
            // Never serve a wrong record: the job is dropped here, its
            // replicas still have it.
            self.spill_corrupt();
            let ours = self.cold_queue_of(slot, qh);
            self.cold_drop(slot, ours);
            return;
        };
        let (job, qh, flags) = job;
        if self.cold.get(slot).is_some_and(|s| s.is_copy()) {
            self.cold_copy_back(slot, job, flags, run_due, now);
            return;
        }
        let name = job.queue.clone();
        let ctime = job.ctime;
        if let Some(cq) = self.cold.queues.get_mut(&qh) {
            if let Some(r) = cq.runs.iter_mut().find(|r| r.id == run) {
                r.first = r.first.max(ctime);
            }
        }
        let Some((shard, h32)) = self.cold_landed(slot, qh, job.etime, now) else {
            return;
        };
        let mut job = job;
        job.flags &= !F_EXT;
        let Some(h) = self.store.restore(job, shard, h32, COLD_TAG | slot) else {
            return;
        };
        let qh = match name {
            Some(n) if qh == NO_QUEUE => self.queue_create(&n, now),
            _ => qh,
        };
        if let Some(j) = self.store.get_mut(h) {
            j.state = JobState::Queued;
        }
        if let Some(q) = self.queues.get_mut(qh) {
            q.insert_prio(PRIORITY_DEFAULT, ctime, h);
            if let Some(j) = self.store.get_mut(h) {
                j.queue = Some(q.shared_name.clone());
            }
        }
        self.update_awake(h, now);
        // During an AOF rewrite the job's record is logged again: the
        // snapshot's pass over the jobs on disk may not have reached it,
        // and its pass over the job table may have passed its new slot.
        if self.spill_pinned() {
            self.aof_relog(h);
        }
        self.spill_mark_ready(h);
    }

    /// A read landed: the slot is forgotten and counted. The job's place
    /// in the ID index, whose entry stays to point at the job restored
    /// there; None when it has none, or when the job expired on disk
    /// (then its entry goes too).
    fn cold_landed(&mut self, slot: u32, qh: u32, etime: u32, now: u64) -> Option<(usize, u32)> {
        let expired = u64::from(etime) <= now / 1000;
        let place = self.cold.get(slot).map(|s| (s.shard(), s.h32));
        self.cold_forget(slot, qh);
        self.cold.loaded_total += 1;
        let (shard, h32) = place?;
        if expired {
            self.store.remove_cold(shard, h32, COLD_TAG | slot);
            self.cold.expired_total += 1;
            return None;
        }
        Some((shard, h32))
    }

    /// A copy read back: active again with its timer, as before it left.
    /// Read with its run it is due at the run's latest requeue time (at
    /// most `COPY_SPAN_MS` after its own); read for a command or a message,
    /// its requeue time starts again from now, as for a job an AOF load
    /// brings back (later than its own, never earlier).
    fn cold_copy_back(
        &mut self,
        slot: u32,
        mut job: crate::domain::job::Job,
        flags: u8,
        due: Option<u64>,
        now: u64,
    ) {
        let Some((shard, h32)) = self.cold_landed(slot, COPIES, job.etime, now) else {
            return;
        };
        // The flags as they were (a delayed job's first queueing does not
        // ask the other nodes first).
        job.flags = flags & !F_EXT;
        // Never due sooner than its WILLQUEUE can be answered: a copy
        // read late would otherwise ask and queue itself in one go.
        if let Some(q) = due {
            job.qtime = q.max(now + COPY_ASK_MS);
        }
        let Some(h) = self.store.restore(job, shard, h32, COLD_TAG | slot) else {
            return;
        };
        self.update_awake(h, now);
        if self.spill_pinned() {
            self.aof_relog(h);
        }
    }

    /// AOF rewrite: where the records of up to `max` cold jobs are, from
    /// slot `from` on, and the slot to go on from (None: every slot seen).
    pub fn cold_snapshot(&self, from: u32, max: usize) -> (Vec<Loc>, Option<u32>) {
        let mut locs = Vec::new();
        let end = self.cold.slots.len();
        let mut i = from;
        while i < end {
            // Bounded in slots looked at too: a stretch of dead slots
            // (a consumed backlog) is walked over several calls.
            if locs.len() >= max || (i - from) as usize >= max.saturating_mul(16) {
                return (locs, Some(i));
            }
            if let Some(s) = self.cold.get(i).filter(|s| s.state() != DEAD) {
                locs.push(s.loc());
            }
            i += 1;
        }
        (locs, None)
    }

    /// The job in a whole record, if it is the one the slot stands for,
    /// its queue (`NO_QUEUE` when the queue is gone) and the record's
    /// flags.
    fn cold_decode(
        &mut self,
        slot: u32,
        id: &JobId,
        blob: &[u8],
        now: u64,
    ) -> Option<(crate::domain::job::Job, u32, u8)> {
        let s = self.cold.get(slot)?;
        if self.store.index_place(id) != (s.shard(), s.h32) {
            return None;
        }
        // Borrowed, not owned: the body is copied once, into the job
        // (an owned record copied it twice, and allocated the queue's
        // name that the job then swapped for the queue's shared one).
        let (r, _) = RecordRef::decode(blob).ok()?;
        let qh = self.queue_index.get(r.queue).copied().unwrap_or(NO_QUEUE);
        let shared = self.queues.get(qh).map(|q| q.shared_name.clone());
        let job = self.job_from_ref(&r, Flavor::Storage, now, shared)?;
        (job.id == *id && job.queue.is_some()).then_some((job, qh, r.flags))
    }

    /// The queue of `slot`: `qh` when a prefetch named it, else the queue
    /// whose runs hold it (a rare walk: a corrupt or failed read a command
    /// asked for).
    fn cold_queue_of(&self, slot: u32, qh: u32) -> u32 {
        if qh != NO_QUEUE {
            return qh;
        }
        for (&qh, cq) in self.cold.queues.iter() {
            if cq.runs.iter().any(|r| r.slots.contains(&slot)) {
                return qh;
            }
        }
        NO_QUEUE
    }

    /// Bring back the cold jobs among a command's arguments (any argument
    /// shaped like a job ID). Some(ticket) when reads went out: the
    /// command runs again once `take_cold_done` returns the ticket.
    pub fn cold_fault(&mut self, args: &[&[u8]]) -> Option<u64> {
        if self.cold.live == 0 {
            return None;
        }
        let ids = args.iter().filter_map(|a| JobId::parse(a));
        let slots = self.cold_slots_of(ids);
        self.cold_wait_slots(slots)
    }

    /// QPEEK: bring back the cold jobs among the `count` first (or, when
    /// negative, last) jobs of the queue, at most `PEEK_MAX`. Some(ticket)
    /// when reads went out: QPEEK runs again once they are back.
    pub fn cold_fault_peek(&mut self, queue: &[u8], count: i64) -> Option<u64> {
        let qh = self.queue_handle(queue)?;
        let q = self.queues.get(qh)?;
        if q.cold == 0 {
            return None;
        }
        let n = (count.unsigned_abs() as usize).min(q.len()).min(PEEK_MAX);
        let cq = self.cold.queues.get(&qh)?;
        let store = &self.store;
        let ctime = |h: u32| store.get(h).map_or(0, |j| j.ctime);
        let need = if count >= 0 {
            // Resident jobs older than every cold one come first.
            let bound = cq.runs.front().map_or(u64::MAX, |r| r.first);
            let older = q
                .handles()
                .take(n)
                .take_while(|&h| ctime(h) <= bound)
                .count();
            n - older
        } else {
            let bound = cq.runs.iter().map(|r| r.last).max().unwrap_or(0);
            let newer = q
                .handles()
                .rev()
                .take(n)
                .take_while(|&h| ctime(h) > bound)
                .count();
            n - newer
        };
        if need == 0 {
            return None;
        }
        let mut want: Vec<u32> = Vec::new();
        let live = |slot: &u32| {
            self.cold
                .get(*slot)
                .is_some_and(|s| matches!(s.state(), ON_DISK | LOADING | MOVING))
        };
        if count >= 0 {
            for r in cq.runs.iter() {
                want.extend(
                    r.slots[r.start..]
                        .iter()
                        .filter(|s| live(s))
                        .take(need - want.len()),
                );
                if want.len() >= need {
                    break;
                }
            }
        } else {
            for r in cq.runs.iter().rev() {
                want.extend(
                    r.slots[r.start..]
                        .iter()
                        .rev()
                        .filter(|s| live(s))
                        .take(need - want.len()),
                );
                if want.len() >= need {
                    break;
                }
            }
        }
        self.cold_wait_slots(want)
    }

    /// Issue reads for these slots (those still on disk) and a ticket
    /// that is done when every one of them has landed.
    fn cold_wait_slots(&mut self, slots: Vec<u32>) -> Option<u64> {
        let waiting = self.cold_read_slots(slots);
        if waiting.is_empty() {
            return None;
        }
        self.cold.next_ticket += 1;
        let t = self.cold.next_ticket;
        self.cold.waits.push(Wait {
            slots: waiting,
            who: Waiter::Ticket(t),
        });
        Some(t)
    }

    /// Issue reads for the slots still on disk; the slots to wait for
    /// (those and the ones already being read).
    fn cold_read_slots(&mut self, slots: Vec<u32>) -> Vec<u32> {
        let mut ops = Vec::new();
        let mut waiting = Vec::new();
        for slot in slots {
            let Some(s) = self.cold.get_mut(slot) else {
                continue;
            };
            match s.state() {
                ON_DISK | MOVING => {
                    s.set_state(LOADING);
                    ops.push(SpillOp::ReadCold {
                        slot,
                        loc: s.loc(),
                        qh: NO_QUEUE,
                        run: 0,
                    });
                }
                LOADING => {}
                _ => continue,
            }
            waiting.push(slot);
        }
        self.spill_push_ops(ops);
        waiting
    }

    /// Commands whose cold jobs are back (their tickets).
    pub fn take_cold_done(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.cold.done)
    }

    /// The cold slots (on disk or being read) of these IDs.
    fn cold_slots_of(&self, ids: impl Iterator<Item = JobId>) -> Vec<u32> {
        let mut slots = Vec::new();
        for id in ids {
            if let Some((slot, _)) = self.cold_slot_of(&id) {
                if !slots.contains(&slot) {
                    slots.push(slot);
                }
            }
        }
        slots
    }

    /// The cold slot (on disk or being read) of this ID, if it is not in
    /// the job table.
    fn cold_slot_of(&self, id: &JobId) -> Option<(u32, Slot)> {
        if self.store.lookup(id).is_some() {
            return None;
        }
        let slot = self.store.cold_candidate(id, COLD_TAG)? & !COLD_TAG;
        self.cold
            .get(slot)
            .filter(|s| matches!(s.state(), ON_DISK | LOADING | MOVING))
            .map(|s| (slot, s))
    }

    /// Park a bus message that names cold jobs until they are back
    /// (`cold_ready_messages` hands it back then); the message back when
    /// it can run now.
    pub(crate) fn cold_park(
        &mut self,
        link: LinkKind,
        local_ip: &str,
        peer_ip: &str,
        msg: Message,
    ) -> Option<Message> {
        if self.cold.live == 0 {
            return Some(msg);
        }
        let ids = message_ids(&msg);
        if ids.is_empty() {
            return Some(msg);
        }
        let slots = self.cold_read_slots(self.cold_slots_of(ids.into_iter()));
        if slots.is_empty() {
            return Some(msg);
        }
        self.cold.waits.push(Wait {
            slots,
            who: Waiter::Message(Box::new(Parked {
                link,
                local_ip: local_ip.to_string(),
                peer_ip: peer_ip.to_string(),
                msg,
            })),
        });
        None
    }

    /// Answer a WILLQUEUE about a job stored whole on disk without
    /// reading it back: a cold job is queued here, so, as `on_willqueue`
    /// does, the holders are told QUEUED (the asker updates its timer; a
    /// holder that queued it too, across a partition, drops its copy if
    /// this node wins the tie). Every replica asks once per RETRY, so
    /// reading the job back for it would bring a cluster's whole cold
    /// backlog into RAM every RETRY period, and a job read back no longer
    /// fits its queue's runs in order.
    ///
    /// The job's node list is on disk, so the QUEUED goes to every node
    /// that held a copy of any job when it went to disk (the same nodes in
    /// a cluster of REPLICATE-many nodes; a node without the job ignores
    /// it, or answers SETACK if it saw the job acknowledged). An asker
    /// outside that set (a copy that reached it by federation) takes the
    /// usual path: the job is read back and the asker joins its node list,
    /// as Disque does. Inside it, the asker is not added: in a cluster
    /// larger than the replication level it may be missing from the list,
    /// and then learns of an acknowledgement from its next WILLQUEUE,
    /// answered by SETACK while this node holds or remembers the job. The
    /// slot matches the ID by 40 hash bits, not the whole ID: a WILLQUEUE
    /// for a job this node does not hold that collides with a cold one
    /// (about one in 10^5 at 10M jobs on disk) delays the asker's requeue
    /// until that job leaves the disk; it loses nothing.
    ///
    /// A replica's copy on disk is not answered here: `on_willqueue` adds
    /// the asker to the copy's node list, and a copy that skipped it could
    /// leave that node out of its later QUEUEDs (in a cluster larger than
    /// the replication level, a node that got the job by federation). Its
    /// messages read it back; the replicas' timers run together (they got
    /// the job at the same time and are answered by the same QUEUED), so a
    /// copy is mostly back in RAM when another replica's WILLQUEUE comes.
    ///
    /// The SETACK of a copy on disk is the exception (`cold_setack`).
    pub(crate) fn cold_answer(&mut self, from: NodeIdx, msg: &Message, now: u64) -> bool {
        let Body::Job { kind, job_id, aux } = &msg.body else {
            return false;
        };
        if self.cold.live == 0 || !matches!(kind, JobMsg::WillQueue | JobMsg::SetAck) {
            return false;
        }
        let Some(id) = JobId::parse(job_id) else {
            return false;
        };
        let Some((slot, s)) = self.cold_slot_of(&id) else {
            return false;
        };
        if *kind == JobMsg::SetAck {
            let cancelled = msg.header.mflags & MFLAG_CANCELLED != 0;
            return !cancelled && self.cold_setack(from, id, slot, s, *aux, now);
        }
        if s.is_copy() || !self.cold.holders.contains(from) {
            return false;
        }
        self.cold.willqueue_answered += 1;
        let queued = BusOut::Queued {
            job: id,
            nack: false,
            deliv: false,
        };
        for n in self.cold.holders.iter() {
            self.out.bus.push((n, queued.clone()));
        }
        true
    }

    /// The acknowledgement of a replica's copy on disk, without reading it
    /// back (draining a cluster's backlog would otherwise read every copy
    /// once more, only to drop it): `on_setack` answers GOTACK with
    /// "known" when the copy's node list is no longer than the acker's
    /// count (`may_have`), and that list holds at most this node and the
    /// holders. Then the copy is acknowledged as in RAM (its AOF DELJOB,
    /// WAITJOB's wake-up), except that no acknowledged record is kept for
    /// the collection that follows: the ID joins the recently acknowledged
    /// IDs, which answer a late WILLQUEUE or QUEUED with SETACK, as after
    /// the acker's DELJOB. Otherwise (a longer list may be on disk, or the
    /// copy is being read) the copy is read back first.
    fn cold_setack(
        &mut self,
        from: NodeIdx,
        id: JobId,
        slot: u32,
        s: Slot,
        may_have: u32,
        now: u64,
    ) -> bool {
        let most = self.cold.holders.len() as u32 + 1;
        if !s.is_copy() || s.state() != ON_DISK || may_have < most {
            return false;
        }
        self.cold_drop(slot, COPIES);
        self.cold.acked_on_disk += 1;
        self.forget_acked(&id, now);
        self.aof_deljob(id);
        self.job_finished(&id, super::JobEnd::Acked);
        self.out.bus.push((
            from,
            BusOut::GotAck {
                job: id,
                known: true,
            },
        ));
        true
    }

    /// Where every queued job whole on disk is (tests: the simulation's
    /// disk says which job each is); replicas' copies with `copies`.
    #[cfg(test)]
    pub(crate) fn cold_live_locs(&self, copies: bool) -> Vec<(u32, u32)> {
        (0..self.cold.slots.len())
            .filter_map(|i| self.cold.slots.get(i))
            .filter(|s| matches!(s.state(), ON_DISK | LOADING | MOVING))
            .filter(|s| s.is_copy() == copies)
            .map(|s| (s.loc().seg, s.loc().off))
            .collect()
    }

    /// Parked bus messages whose jobs are back, to handle now.
    pub(crate) fn cold_ready_messages(&mut self) -> Vec<Parked> {
        std::mem::take(&mut self.cold.ready_msgs)
    }

    /// During an AOF replay: whether a job with this ID was loaded earlier
    /// in it and is now whole on disk, so a later record of it is a
    /// duplicate (a rewrite may list a job twice: the LOADJOB of an
    /// ADDJOB made while it ran and the snapshot's). `lookup` cannot tell,
    /// and a second copy would be queued.
    pub fn replayed_cold(&self, id: &JobId) -> bool {
        self.replayed_slot(id).is_some()
    }

    /// The cold slot of a job this replay sent to disk whole.
    fn replayed_slot(&self, id: &JobId) -> Option<u32> {
        let r = self.cold.replay.as_ref().filter(|_| self.cold.live > 0)?;
        let check = super::store::JobStore::id_check(id);
        let e = self.store.cold_find(id, |e| {
            e & COLD_TAG != 0 && r.checks.get(e & !COLD_TAG) == Some(&check)
        })?;
        Some(e & !COLD_TAG)
    }

    /// During a replay: forget the copy on disk of a job this replay sent
    /// there whole, for a later record that deletes or replaces it (its
    /// DELJOB; a record carrying options a job on disk cannot keep). A job
    /// acknowledged after its ADDJOB and before the next rewrite has both
    /// records in the file, and must not come back. True if one was there.
    pub fn drop_replayed_cold(&mut self, id: &JobId) -> bool {
        let Some(slot) = self.replayed_slot(id) else {
            return false;
        };
        let copy = self.cold.get(slot).is_some_and(|s| s.is_copy());
        let qh = match &mut self.cold.replay {
            Some(_) if copy => COPIES,
            // Its queue's count comes down when the replay ends.
            Some(r) => {
                let word = r.orphans.get(slot / 64).copied().unwrap_or(0);
                r.orphans.set(slot / 64, word | 1 << (slot % 64));
                NO_QUEUE
            }
            None => return false,
        };
        self.cold_drop(slot, qh);
        true
    }

    /// A replay ends: its notes go, and the queues of the jobs on disk
    /// that later records dropped count them out, found in one walk of
    /// the runs (a dropped slot stays in its run, dead, until the run is
    /// read).
    pub(crate) fn cold_replay_end(&mut self) {
        let Some(r) = self.cold.replay.take() else {
            return;
        };
        let Replay { mut orphans, .. } = r;
        if orphans.is_empty() {
            return;
        }
        for (&qh, cq) in &self.cold.queues {
            if qh == COPIES {
                continue;
            }
            let mut n = 0;
            for &slot in cq.runs.iter().flat_map(|r| r.slots.iter()) {
                let Some(word) = orphans.get_mut(slot / 64) else {
                    continue;
                };
                let bit = 1u64 << (slot % 64);
                // Dead still: not reused since (a slot in a run never is).
                if *word & bit != 0 && self.cold.get(slot).is_some_and(|s| s.state() == DEAD) {
                    *word &= !bit;
                    n += 1;
                }
            }
            if let Some(q) = self.queues.get_mut(qh) {
                q.cold = q.cold.saturating_sub(n);
            }
        }
    }

    /// Whether a job with this ID may be stored whole on disk (existence
    /// checks that need no more than that).
    pub fn maybe_cold(&self, id: &JobId) -> bool {
        self.cold.live > 0 && self.store.cold_candidate(id, COLD_TAG).is_some()
    }

    /// Expire cold jobs whose TTL passed (from the spill cron), a budget
    /// of slots per call; runs whose earliest expire time is ahead are
    /// skipped whole.
    pub(crate) fn cold_expire(&mut self, now: u64) {
        if self.cold.live == 0 {
            return;
        }
        let now_s = u32::try_from(now / 1000).unwrap_or(u32::MAX);
        let mut budget = EXPIRE_BUDGET;
        let mut gone: Vec<(u32, u32)> = Vec::new();
        for (&qh, cq) in self.cold.queues.iter_mut() {
            for r in cq.runs.iter_mut() {
                if budget == 0 {
                    break;
                }
                if r.min_etime > now_s {
                    continue;
                }
                let mut min = u32::MAX;
                for &slot in &r.slots[r.start..] {
                    budget = budget.saturating_sub(1);
                    let Some(s) = self.cold.slots.get(slot) else {
                        continue;
                    };
                    if s.state() != ON_DISK {
                        continue;
                    }
                    if s.etime <= now_s {
                        gone.push((slot, qh));
                    } else {
                        min = min.min(s.etime);
                    }
                }
                r.min_etime = min;
            }
        }
        for (slot, qh) in gone {
            self.cold.expired_total += 1;
            self.cold_drop(slot, qh);
        }
    }

    /// Forget every cold job (FLUSHALL): their records become dead.
    pub(crate) fn cold_clear(&mut self) {
        let live: Vec<u32> = (0..self.cold.slots.len())
            .filter(|&i| self.cold.get(i).is_some_and(|s| s.state() != DEAD))
            .collect();
        for slot in live {
            if let Some(s) = self.cold.get(slot) {
                let loc = s.loc();
                self.spill_record_dead(loc);
                self.spill_cold_record(loc.seg, false);
            }
            self.cold.settled(slot);
        }
        let enabled = self.cold.enabled;
        let done = std::mem::take(&mut self.cold.done);
        let msgs = std::mem::take(&mut self.cold.ready_msgs);
        let replay = self.cold.replay.as_ref().map(|_| Replay::default());
        self.cold = ColdTier {
            enabled,
            done,
            ready_msgs: msgs,
            replay,
            ..ColdTier::default()
        };
    }

    /// Compaction of segment `seg`: copy the whole jobs' records found
    /// in the next `scan` slots forward (at most `budget`); the walk
    /// resumes where it stopped while the same segment is compacted.
    pub(crate) fn cold_compact(&mut self, seg: u32, scan: usize, budget: usize) -> bool {
        let from = match self.cold.compact {
            Some((s, next)) if s == seg => next,
            _ => 0,
        };
        let end = self.cold.slots.len();
        let stop = u32::try_from((from as usize).saturating_add(scan))
            .unwrap_or(u32::MAX)
            .min(end);
        let mut moves = Vec::new();
        let mut i = from;
        while i < stop && moves.len() < budget {
            if let Some(s) = self.cold.get(i) {
                if s.state() == ON_DISK && s.loc().seg == seg {
                    moves.push((i, s.loc()));
                }
            }
            i += 1;
        }
        self.cold.compact = (i < end).then_some((seg, i));
        let mut ops = Vec::new();
        for (slot, from) in moves {
            let to = self.spill_allocate(from.len);
            if to.seg >= 1 << 24 {
                self.spill_record_dead(to);
                continue;
            }
            self.spill_cold_record(to.seg, true);
            if let Some(s) = self.cold.get_mut(slot) {
                s.set_state(MOVING);
            }
            ops.push(SpillOp::MoveCold { slot, from, to });
        }
        let started = !ops.is_empty();
        self.spill_push_ops(ops);
        started
    }

    /// A compaction copy finished: the job's record is now at `to`, or
    /// stays at `from` (a read of it meanwhile, or a failure).
    pub(crate) fn cold_moved(
        &mut self,
        slot: u32,
        from: Loc,
        to: Loc,
        result: Result<(), ReadFailure>,
    ) {
        let mine = self
            .cold
            .get(slot)
            .is_some_and(|s| s.state() == MOVING && s.loc() == from);
        if !mine || result.is_err() {
            self.spill_record_dead(to);
            self.spill_cold_record(to.seg, false);
            if mine {
                if let Some(s) = self.cold.get_mut(slot) {
                    s.set_state(ON_DISK);
                }
            }
            return;
        }
        self.spill_record_dead(from);
        self.spill_cold_record(from.seg, false);
        self.spill_count_moved();
        if let Some(s) = self.cold.get_mut(slot) {
            s.seg_shard = to.seg << 8 | (s.seg_shard & 0xff);
            s.off = to.off;
            s.set_state(ON_DISK);
        }
    }

    /// Slot numbers so far (JSCAN's cursor space over cold jobs).
    pub fn cold_slot_count(&self) -> u32 {
        self.cold.slots.len()
    }

    /// Where cold slot `slot`'s record is, if it holds a cold job.
    pub fn cold_loc(&self, slot: u32) -> Option<Loc> {
        self.cold
            .get(slot)
            .filter(|s| matches!(s.state(), ON_DISK | LOADING | MOVING))
            .map(|s| s.loc())
    }

    /// Heap bytes of the tier's tables (slots, runs), for INFO.
    pub fn cold_bytes(&self) -> usize {
        let runs: usize = self
            .cold
            .queues
            .values()
            .map(|cq| {
                cq.runs
                    .iter()
                    .map(|r| r.slots.capacity() * 4 + 64)
                    .sum::<usize>()
            })
            .sum();
        self.cold.slots.bytes() + self.cold.free.capacity() * 4 + runs
    }
}

impl ColdTier {
    /// Put a slot whose read failed back at the front of its queue.
    fn push_front(&mut self, qh: u32, slot: u32) {
        self.next_run += 1;
        let id = self.next_run;
        let Some(s) = self.get(slot) else {
            return;
        };
        let cq = self.queues.entry(qh).or_default();
        let first = cq.runs.front().map_or(0, |r| r.first);
        let mut run = Run::new(id, first, s.etime);
        run.slots.push(slot);
        cq.runs.push_front(run);
        if let Some(s) = self.get_mut(slot) {
            s.set_in_run(true);
        }
    }
}

/// The job IDs a bus message names.
fn message_ids(msg: &Message) -> Vec<JobId> {
    match &msg.body {
        Body::Job { job_id, .. } => JobId::parse(job_id).into_iter().collect(),
        Body::ReplJob { job } => record_id(job).into_iter().collect(),
        Body::YourJobs { jobs } => jobs.iter().filter_map(|j| record_id(j)).collect(),
        _ => Vec::new(),
    }
}

fn record_id(blob: &[u8]) -> Option<JobId> {
    let (r, _) = RecordRef::decode(blob).ok()?;
    JobId::parse(r.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_interleaved_ascending_streams_make_two_runs() {
        let mut t = ColdTier::default();
        // The lazy tail evicts 1000.., a backfill pass 1..; interleaved.
        for i in 0..3000u64 {
            let a = t.alloc(Slot::default()).expect("slot");
            t.push(7, a, 1000 + i, 100);
            let b = t.alloc(Slot::default()).expect("slot");
            // The backfill wraps every 900: a new, older stream.
            t.push(7, b, 1 + i % 900, 100);
        }
        let runs = &t.queues[&7].runs;
        assert!(runs.len() <= 8, "{} runs", runs.len());
        assert!(runs.iter().all(|r| r.slots.len() <= RUN_SLOTS));
        // Ordered by first creation time.
        assert!(runs
            .iter()
            .zip(runs.iter().skip(1))
            .all(|(a, b)| a.first <= b.first));
    }

    #[test]
    fn creation_time_keys_keep_order_and_know_their_span() {
        let base = 1_765_000_000_000u64 * 1_000_000;
        let day = 86_400_000u64 * 1_000_000;
        let mut times: Vec<u64> = vec![0, 1, base / 2, u64::MAX, base, base + 1];
        for i in 0..20_000u64 {
            // Nanoseconds to weeks either side of the base.
            let d = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % (1u64 << (i % 60 + 1));
            times.push(base.saturating_add(d));
            times.push(base.saturating_sub(d));
        }
        times.sort_unstable();
        // Any key at all has a span (a slot never noted reads as 0).
        for k in [0, 1, u32::MAX, KEY_ZERO - 1, KEY_ZERO + 1] {
            let (lo, hi) = key_span(base, k);
            assert!(lo <= hi);
        }
        let mut last = 0;
        for &t in &times {
            let k = ctime_key(base, t);
            assert!(k >= last, "{t}: key {k} after {last}");
            last = k;
            let (lo, hi) = key_span(base, k);
            assert!(lo <= t && t <= hi, "{t} outside [{lo}, {hi}]");
            assert_eq!(key_span(base, k), key_span(base, ctime_key(base, lo)));
            let d = t.abs_diff(base);
            if d < 1 << KEY_EXACT_BITS {
                assert_eq!((lo, hi), (t, t), "exact near the base");
            } else if d <= day {
                // Within a day of the base: within 2.6 ms.
                assert!(hi - lo < 2_600_000, "{t}: span {}", hi - lo);
            }
        }
    }

    #[test]
    fn slots_pack_location_state_and_index_place() {
        let mut s = Slot {
            seg_shard: 77 << 8 | 200,
            off: 4096,
            len_st: 1234,
            etime: 9,
            h32: 0xdead_beef,
        };
        assert_eq!(std::mem::size_of::<Slot>(), 20);
        assert_eq!(
            s.loc(),
            Loc {
                seg: 77,
                off: 4096,
                len: 1234
            }
        );
        assert_eq!(s.shard(), 200);
        s.set_state(LOADING);
        s.set_in_run(true);
        assert_eq!((s.state(), s.in_run(), s.loc().len), (LOADING, true, 1234));
        s.set_state(DEAD);
        s.set_in_run(false);
        assert_eq!((s.state(), s.in_run(), s.loc().len), (DEAD, false, 1234));
    }
}
