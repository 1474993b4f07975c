//! Spill policy (docs/PERSISTENCE.md#9-spill-tiers): which job bodies leave
//! RAM for the node's append-only segment files, which come back ahead of
//! consumers, and when a segment is freed or compacted.
//!
//! The engine only decides. Every read, write and unlink is a `SpillOp`
//! the shell takes (`Engine::take_spill_ops`) and performs on its own
//! thread (the top-level `spill` module); the results come back as `SpillDone` through
//! `Engine::spill_done`. No disk access ever happens while the engine is
//! held, so a slow disk delays page-ins, never other clients.
//!
//! What spills: the bodies of queued jobs beyond a queue's head window
//! (`HEAD_WINDOW` jobs nearest to delivery stay resident), once used
//! memory passes `spill-watermark` percent of maxmemory, until it falls ten
//! points below. New jobs of a long queue go straight to disk then (the
//! lazy tail); a backfill pass in the cron spills the older backlog.
//! A job keeps its record in the job table (SHOW, ACKJOB, ... find it as
//! before); only its body is replaced by a location (`Loc`).
//!
//! A body leaves RAM only once its write is confirmed: a failed write
//! leaves every job as it was and turns spilling off for a while
//! (`SpillFault`), so Disque's memory levels apply as without spill.
//! GETJOB never pops a job whose body is on disk: the queue waits for the
//! page-in (blocked clients are served when it lands), and prefetch reads
//! the head window ahead of consumers so that rarely happens.
//!
//! Reclaim: ACKJOB, DELJOB, expiry and page-ins only drop the location
//! (the record becomes dead, no tombstone); a segment with no live record
//! is unlinked, and one that is mostly dead has its live records copied
//! forward (`SpillOp::Move`) so that a few long-lived jobs never pin it.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use super::spill_slots::{Slot, SlotState, SlotTable, MAX_LEN};
use super::{Engine, JobHandle, Map};
use crate::domain::job::{JobId, JobState, F_DELIVERED};

/// Bytes in front of each body in a segment record: body length (u32),
/// CRC32 of ID and body (u32), the 40-byte job ID.
pub const RECORD_HEADER: u64 = 4 + 4 + 40;

/// How many results (and landed writes) ahead of the one being handled
/// the owner starts loading ID-index places: enough to cover a memory
/// miss, few enough to stay in the L1 cache.
const PREFETCH_AHEAD: usize = 8;

/// Jobs at the front of each queue that are never spilled.
pub const HEAD_WINDOW: usize = 128;

/// How far ahead of consumers page-ins go, in head windows.
pub(crate) const PREFETCH_WINDOWS: usize = 4;

/// Bytes of jobs one queue's read-ahead may bring back: maxmemory /
/// `PREFETCH_SHARE`, within these bounds (the upper one also without a
/// maxmemory), counted at the mean job size. 1 KB jobs read their 4
/// windows ahead under any maxmemory; 60 KB jobs read 17 ahead under
/// 64 MB, not 512 (30 MB a queue: a drain of three took a 64 MB node to
/// 100 MB).
const PREFETCH_SHARE: u64 = 64;
const PREFETCH_BYTES_MIN: u64 = 1 << 20;
const PREFETCH_BYTES_MAX: u64 = 64 << 20;

/// Jobs a read-ahead brings back at least, whatever their size.
const PREFETCH_MIN_JOBS: usize = 4;

/// The head windows of all queues together hold at most maxmemory /
/// `HEAD_SHARE` of jobs: a queue's window is `HEAD_WINDOW` jobs, fewer
/// when jobs are large or queues many (50 queues of 16 KB jobs kept
/// 100 MB of heads in RAM, and a 64 MB node refused 70 % of their
/// ADDJOBs with the disk idle).
const HEAD_SHARE: u64 = 4;

/// Jobs a head window keeps at least, whatever their size.
const HEAD_MIN_JOBS: usize = 8;

/// RAM a queued job takes besides its body (record, indexes), for the
/// running mean size the windows follow.
const JOB_OVERHEAD: u64 = 160;

/// Default segment size.
pub const SEGMENT_BYTES: u32 = 64 << 20;

/// Bytes of writes in flight (bodies held twice: in the job and in the
/// write) above which no more jobs are spilled until writes complete.
const MAX_PENDING_BYTES: u64 = 32 << 20;

/// Backfill budget per cron run (records). A run that leaves work asks
/// for the next one a millisecond later (`spill_due`) instead of taking
/// longer: an engine held 10-20 ms by a 16,384-job backfill made every
/// client wait that long (a cold miss among them).
const CRON_BUDGET: usize = 2048;

/// Compaction budget per 100 ms cron run (records copied), about 2 ms of
/// engine time. Compaction keeps that pace: run every millisecond with
/// the backfill, an hour of churn held disk bytes at 1.63x live bytes on
/// average instead of 1.46x (docs/PERFORMANCE.md, run AM).
const COMPACT_BUDGET: usize = 16_384;

/// Why the parked backfill stopped with work left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Left {
    None,
    /// Its write budget: go on a millisecond later.
    Budget,
    /// The writes in flight at their cap: go on once some land.
    Capped,
}

/// Job-table slots the parked backfill looks at per run
/// (`spill_parked_backfill`): a few tens of microseconds.
const PARKED_SCAN: usize = 8_192;

/// Location-table handles a compaction run walks looking for the
/// records of the segment it empties.
const COMPACT_SCAN: usize = 1 << 18;

/// How long spilling stays off after a write failure (ms).
const FAULT_BACKOFF_MS: u64 = 10_000;

/// Where a spilled body lives: segment number, record offset and body
/// length (the record is `RECORD_HEADER` bytes longer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub seg: u32,
    pub off: u32,
    pub len: u32,
}

impl Loc {
    /// Bytes of the whole record on disk.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER + u64::from(self.len)
    }
}

/// Work for the spill thread, in the order it must be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpillOp {
    /// Append a record at `loc` (segments are written strictly in order).
    Write { loc: Loc, id: JobId, body: Bytes },
    /// Read a body back (page-in).
    Read { h: JobHandle, id: JobId, loc: Loc },
    /// Copy a record to a new place (compaction).
    Move {
        h: JobHandle,
        id: JobId,
        from: Loc,
        to: Loc,
    },
    /// Delete a segment file: none of its records is live.
    Unlink { seg: u32 },
    /// Read a whole job back (`engine::cold`): the record's ID is only on
    /// disk. `qh`/`run` say which queue's prefetch asked (`NO_QUEUE` for a
    /// read a command or a bus message needs).
    ReadCold {
        slot: u32,
        loc: Loc,
        qh: u32,
        run: u64,
    },
    /// Copy a whole job's record to a new place (compaction).
    MoveCold { slot: u32, from: Loc, to: Loc },
}

/// Why a record could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFailure {
    /// Checksum, length or ID mismatch: the bytes on disk are not this job's.
    Corrupt,
    /// The read itself failed (file missing, I/O error).
    Io,
}

/// Why spilling stopped (INFO `spill_fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillFault {
    /// The file system has no room (ENOSPC, EDQUOT).
    DiskFull,
    /// Another write error.
    WriteError,
}

impl SpillFault {
    pub fn name(self) -> &'static str {
        match self {
            SpillFault::DiskFull => "disk-full",
            SpillFault::WriteError => "write-error",
        }
    }
}

/// A result from the spill thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpillDone {
    /// Every write to `seg` below offset `end` is on disk.
    Written { seg: u32, end: u32 },
    /// Writing to `seg` failed: that segment is abandoned.
    WriteFailed { seg: u32, fault: SpillFault },
    Read {
        h: JobHandle,
        id: JobId,
        loc: Loc,
        result: Result<Bytes, ReadFailure>,
    },
    Moved {
        h: JobHandle,
        id: JobId,
        from: Loc,
        to: Loc,
        result: Result<(), ReadFailure>,
    },
    /// A whole job read back: its ID and storage record.
    ReadCold {
        slot: u32,
        loc: Loc,
        qh: u32,
        run: u64,
        result: Result<(JobId, Bytes), ReadFailure>,
    },
    MovedCold {
        slot: u32,
        from: Loc,
        to: Loc,
        result: Result<(), ReadFailure>,
    },
    /// What the spill thread is done with, handed back to be freed where
    /// it was allocated: the bodies it wrote and the emptied op lists.
    /// Freed on the spill thread, each 1 KiB record took the owner's
    /// malloc arena lock (glibc frees chunks past its thread cache into
    /// their own arena), and the two threads queued on it
    /// (docs/PERFORMANCE.md, run AN).
    Spent {
        bodies: Vec<Bytes>,
        lists: Vec<Vec<SpillOp>>,
    },
}

#[derive(Default)]
struct Segment {
    /// Records that are some job's current place (or a copy in flight).
    live: u32,
    /// Of those, whole jobs (`engine::cold`): compaction leaves the
    /// segment alone while it holds any.
    cold: u32,
    live_bytes: u64,
    /// Bytes appended so far.
    bytes: u64,
    /// `live_bytes` at the last 100 ms cron: a segment that lost a
    /// twentieth of its size since is being drained by consumers and is
    /// not compacted (copying records about to be read anyway).
    live_seen: u64,
}

/// Where a queue's backfill goes on: past `pos` jobs after the ones it
/// keeps (a queue with priority levels), or from the first job created at
/// or after `key` (the others).
#[derive(Clone, Copy, Default)]
struct Cursor {
    pos: usize,
    key: u64,
}

/// What a write in flight is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The body of a queued job: it leaves RAM if still queued.
    Body,
    /// A queued job's whole record (`engine::cold`).
    Whole,
    /// The body of a job loaded from the AOF that waits, active, for its
    /// retry to queue it again (`qtime`, when that is due): it leaves RAM
    /// only if it still waits for the same retry. Queued or delivered
    /// meanwhile, it may be at its queue's head or in a consumer's hands,
    /// where bodies stay in RAM.
    Parked { qtime: u64 },
    /// A parked job's whole record (a replica's copy, `engine::cold`): it
    /// leaves RAM if it still waits for the same retry with the same
    /// nodes.
    WholeCopy { qtime: u64, nodes: u32 },
}

/// Spill counters and gauges for INFO and /metrics.
#[derive(Clone, Debug, Default)]
pub struct SpillStats {
    pub enabled: bool,
    /// Spilling now (memory above the watermark, no fault).
    pub active: bool,
    /// Jobs whose body is only on disk (or being read back), whole jobs
    /// included.
    pub jobs: u64,
    /// Of those, jobs stored whole (`engine::cold`).
    pub whole_jobs: u64,
    /// Of those, replicas' copies waiting for their retry.
    pub whole_copies: u64,
    /// Copies acknowledged while on disk, dropped without a read (total).
    pub copies_acked_on_disk: u64,
    /// Bodies written but not yet confirmed.
    pub pending: u64,
    /// Bytes of segment files (live and dead records).
    pub disk_bytes: u64,
    /// Bytes of live records.
    pub live_bytes: u64,
    pub segments: u64,
    /// Totals since start.
    pub spilled_total: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub corrupt: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub compactions: u64,
    pub moved: u64,
    pub unlinked: u64,
    /// The last write failure, while spilling is off because of it.
    pub fault: Option<SpillFault>,
    /// The disk budget (`spill-max-disk`) is spent.
    pub disk_budget_full: bool,
}

/// The spill state the engine keeps (empty and inert unless enabled).
pub struct SpillState {
    enabled: bool,
    /// Jobs at the front of each queue that stay in RAM, at most
    /// (`Engine::spill_head` sizes the window).
    pub(crate) head: usize,
    /// A running mean of the size of the jobs queued (body and
    /// overhead): the head windows and read-aheads follow it.
    mean_job: u64,
    /// Bytes of segment files allowed; 0 = no limit.
    max_disk: u64,
    /// Percent of maxmemory where spilling starts.
    watermark: u64,
    seg_size: u32,
    slots: SlotTable,
    moving: Map<JobHandle, Loc>,
    /// Writes in flight, in the order they were issued.
    pending: VecDeque<(JobHandle, JobId, Loc, Kind)>,
    pending_bytes: u64,
    segs: BTreeMap<u32, Segment>,
    /// The segment being appended to, and its next offset.
    cur: u32,
    cur_off: u32,
    active: bool,
    fault: Option<(SpillFault, u64)>,
    /// An AOF rewrite reads segments: nothing is unlinked meanwhile.
    pinned: bool,
    /// The segment being compacted and the next handle to look at.
    compacting: Option<(u32, usize)>,
    /// Handles a compaction run walks (`COMPACT_SCAN`; tests shrink it).
    compact_scan: usize,
    /// Pops per queue since its head window was last checked; a queue is
    /// in it if it was consumed since `period_start` (`spill_keep`), when
    /// segments' `live_seen` were last taken too.
    pops: Map<u32, u32>,
    period_start: u64,
    /// Where each queue's backfill goes on.
    backfill: Map<u32, Cursor>,
    /// Queues whose lazy tail left a job in RAM (writes at their cap):
    /// their new jobs wait for the backfill too, until it has reached
    /// their end, so whole jobs still leave in creation order.
    gap: Map<u32, ()>,
    /// An AOF replay runs (`set_spill_replay`).
    replay: bool,
    /// When the next cron run is due because the last one left backfill
    /// or compaction work (sooner than the 100 ms cron).
    due: Option<u64>,
    /// Jobs whose AOF record must be rewritten once their body is back.
    relog: Map<JobHandle, ()>,
    ops: Vec<SpillOp>,
    /// Slots whose body is not in RAM (not `Pending`).
    cold: u64,
    /// Where the parked backfill goes on in the job table, and whether its
    /// last run stopped with work left (it then runs again at once rather
    /// than with the next 100 ms cron).
    parked_cursor: u32,
    parked_more: bool,
    /// Write completions applied (`spill_written` calls): producers
    /// waiting for memory run again at each (`spill_writes_landed`).
    landed: u64,
    /// Bytes of all segments (the sum of their `bytes`).
    disk_total: u64,
    stats: SpillStats,
}

impl Default for SpillState {
    fn default() -> Self {
        SpillState {
            enabled: false,
            head: HEAD_WINDOW,
            mean_job: 0,
            max_disk: 0,
            watermark: 60,
            seg_size: SEGMENT_BYTES,
            slots: SlotTable::default(),
            moving: Map::default(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            segs: BTreeMap::new(),
            cur: 1,
            cur_off: 0,
            active: false,
            fault: None,
            pinned: false,
            compacting: None,
            compact_scan: COMPACT_SCAN,
            pops: Map::default(),
            period_start: 0,
            backfill: Map::default(),
            gap: Map::default(),
            replay: false,
            due: None,
            relog: Map::default(),
            ops: Vec::new(),
            cold: 0,
            parked_cursor: 0,
            parked_more: false,
            landed: 0,
            disk_total: 0,
            stats: SpillStats::default(),
        }
    }
}

impl SpillState {
    fn disk_bytes(&self) -> u64 {
        self.disk_total
    }

    /// Place a record of `len` body bytes at the end of the current
    /// segment (a new one when it would not fit).
    fn allocate(&mut self, len: u32) -> Loc {
        let rec = RECORD_HEADER + u64::from(len);
        if self.cur_off > 0 && u64::from(self.cur_off) + rec > u64::from(self.seg_size) {
            self.cur += 1;
            self.cur_off = 0;
        }
        let loc = Loc {
            seg: self.cur,
            off: self.cur_off,
            len,
        };
        self.cur_off = self
            .cur_off
            .saturating_add(u32::try_from(rec).unwrap_or(u32::MAX));
        let seg = self.segs.entry(loc.seg).or_default();
        seg.bytes += rec;
        self.disk_total += rec;
        seg.live += 1;
        seg.live_bytes += rec;
        loc
    }

    /// A record stopped being live.
    fn dead(&mut self, loc: Loc) {
        if let Some(s) = self.segs.get_mut(&loc.seg) {
            s.live = s.live.saturating_sub(1);
            s.live_bytes = s.live_bytes.saturating_sub(loc.record_len());
        }
    }

    /// Drop a job's spill slot; its records become dead.
    fn forget(&mut self, h: JobHandle) -> Option<Slot> {
        let slot = self.slots.remove(h)?;
        self.relog.remove(&h);
        if slot.st != SlotState::Pending {
            self.cold = self.cold.saturating_sub(1);
        }
        self.dead(slot.loc);
        if let Some(to) = self.moving.remove(&h) {
            self.dead(to);
        }
        Some(slot)
    }
}

impl Engine {
    /// `spill yes|no`, `spill-max-disk` (bytes, 0 = no limit) and
    /// `spill-watermark` (percent of maxmemory where spilling starts).
    pub fn set_spill(&mut self, enabled: bool, max_disk: u64, watermark: u64) {
        let s = &mut self.spill;
        s.enabled = enabled;
        s.max_disk = max_disk;
        s.watermark = watermark.min(100);
        s.stats.enabled = enabled;
    }

    /// The disk budget in bytes (0 = no limit).
    pub fn spill_max_disk(&self) -> u64 {
        self.spill.max_disk
    }

    /// Smaller segments (tests exercise rolling and compaction with them).
    pub fn set_spill_segment_bytes(&mut self, bytes: u32) {
        self.spill.seg_size = bytes.clamp(1024, MAX_LEN);
    }

    /// An AOF rewrite runs: segments stay, jobs do not leave RAM whole.
    pub(crate) fn spill_pinned(&self) -> bool {
        self.spill.pinned
    }

    /// An AOF rewrite reads spilled bodies and whole jobs from the
    /// segments: keep every segment file until it ends (and log again the
    /// record of every job that leaves RAM whole or comes back meanwhile,
    /// `cold_settle`, `cold_read_done`).
    pub fn set_spill_pinned(&mut self, on: bool) {
        self.spill.pinned = on;
    }

    /// Reads, writes and unlinks for the spill thread, in order.
    pub fn take_spill_ops(&mut self) -> Vec<SpillOp> {
        std::mem::take(&mut self.spill.ops)
    }

    /// Where the body of a job lives when it is not in RAM: the ID (to
    /// check the record against) and the location. None for resident jobs.
    pub fn spilled_body(&self, h: JobHandle) -> Option<(JobId, Loc)> {
        let slot = self.spill.slots.get(h)?;
        if slot.st == SlotState::Pending {
            return None;
        }
        let j = self.store.get(h)?;
        if j.body.is_some() {
            return None;
        }
        Some((j.id, slot.loc))
    }

    /// Counters and gauges (INFO spill, /metrics).
    pub fn spill_stats(&self) -> SpillStats {
        let s = &self.spill;
        let mut st = s.stats.clone();
        st.active = s.active;
        st.jobs = s.cold + self.cold_jobs();
        st.whole_jobs = self.cold_jobs();
        st.whole_copies = self.cold.copies;
        st.copies_acked_on_disk = self.cold.acked_on_disk;
        st.pending = s.pending.len() as u64;
        st.disk_bytes = s.disk_bytes();
        st.live_bytes = s.segs.values().map(|x| x.live_bytes).sum();
        st.segments = s.segs.len() as u64;
        st.fault = s.fault.map(|f| f.0);
        st
    }

    /// The tier can take bodies now: enabled, no write fault, budget left
    /// (Disque's 75% memory level is skipped meanwhile, `memory_level`).
    pub(crate) fn spill_absorbs(&self) -> bool {
        let s = &self.spill;
        s.enabled && s.fault.is_none() && !s.stats.disk_budget_full
    }

    /// Memory past the refusal level will come down without anyone
    /// acknowledging a job: the tier takes bodies and has writes in flight
    /// or backfill work waiting. A deny-oom command may then wait for the
    /// writes to land (`commands::dispatch`) instead of failing with -OOM
    /// while the disk has room.
    pub fn spill_relieves(&self) -> bool {
        let s = &self.spill;
        self.spill_absorbs()
            && (s.pending_bytes > 0 || s.due.is_some() || !s.gap.is_empty() || s.parked_more)
    }

    /// How many write completions the engine has applied: a change means
    /// memory may have come down.
    pub fn spill_writes_landed(&self) -> u64 {
        self.spill.landed
    }

    /// Bytes of writes in flight allowed: `MAX_PENDING_BYTES`, or less
    /// under a small maxmemory (those bodies are held twice meanwhile).
    fn max_pending(&self) -> u64 {
        match self.memory.maxmemory {
            0 => MAX_PENDING_BYTES,
            m => MAX_PENDING_BYTES.min(m / 16),
        }
    }

    /// Spill new bodies now? Memory above the watermark (with ten points
    /// of hysteresis), no recent write failure, room on disk and in the
    /// write pipeline.
    fn spill_wanted(&mut self) -> bool {
        let s = &self.spill;
        // During a replay the writes in flight may pass their cap: the
        // loader stops at the end of its batch until they are under it
        // again (`spill_backlogged`), while a job skipped here stays in RAM
        // until the backfill, which finds the queue's runs past it and can
        // only spill its body (a 300,000-job replay left 18,000 whole).
        let capped = s.pending_bytes >= self.max_pending() && !s.replay;
        if !s.enabled || s.fault.is_some() || capped {
            return false;
        }
        let max = self.memory.maxmemory;
        let on = if s.watermark == 0 {
            true
        } else if max == 0 {
            false
        } else {
            let used = (self.memory.used)() as u64;
            let start = max / 100 * s.watermark;
            let stop = max / 100 * s.watermark.saturating_sub(10);
            if s.active {
                used > stop
            } else {
                used > start
            }
        };
        self.spill.active = on;
        on
    }

    /// Write the body of queued job `h` to disk (it leaves RAM once the
    /// write is confirmed), or the whole job when it is plain and the
    /// tier allows (`engine::cold`). False when it cannot spill.
    fn spill_job(&mut self, h: JobHandle) -> bool {
        if self
            .store
            .get(h)
            .is_none_or(|j| j.state != JobState::Queued)
        {
            return false;
        }
        self.spill_write(h, Kind::Body, 0)
    }

    /// Write the body (or, for a queued `Kind::Body` or a replica's copy,
    /// maybe the whole record) of job `h`. False when it cannot spill.
    fn spill_write(&mut self, h: JobHandle, kind: Kind, now: u64) -> bool {
        if self.spill.slots.contains(h) {
            return false;
        }
        let Some(j) = self.store.get(h) else {
            return false;
        };
        let (id, nodes) = (j.id, j.nodes_delivered.len() as u32);
        if matches!(kind, Kind::Parked { .. }) && self.cold_copy_soon(h, now) {
            return false;
        }
        let whole = match kind {
            Kind::Body if self.cold_eligible(h) => self.cold_record(h),
            Kind::Parked { .. } if self.cold_copy_eligible(h, now) => self.cold_record(h),
            _ => None,
        };
        let kind = match kind {
            _ if whole.is_none() => kind,
            Kind::Parked { qtime } => Kind::WholeCopy { qtime, nodes },
            _ => Kind::Whole,
        };
        let body = match whole {
            Some(rec) => rec,
            None => match self.store.get(h).and_then(|j| j.body.as_deref()) {
                Some(b) => Bytes::copy_from_slice(b),
                None => return false,
            },
        };
        let Ok(len) = u32::try_from(body.len()) else {
            return false;
        };
        if len > MAX_LEN {
            return false;
        }
        let rec = RECORD_HEADER + u64::from(len);
        if rec > u64::from(self.spill.seg_size) {
            return false;
        }
        let s = &mut self.spill;
        if s.max_disk != 0 && s.disk_bytes() + rec > s.max_disk {
            s.stats.disk_budget_full = true;
            return false;
        }
        s.stats.disk_budget_full = false;
        let loc = s.allocate(len);
        s.slots.insert(
            h,
            Slot {
                loc,
                st: SlotState::Pending,
            },
        );
        s.pending.push_back((h, id, loc, kind));
        s.pending_bytes += rec;
        s.ops.push(SpillOp::Write { loc, id, body });
        true
    }

    /// A job was queued (`enqueue`): the lazy tail. Once spilling, a job
    /// queued behind a full head window goes straight to disk.
    pub(crate) fn spill_on_enqueue(&mut self, qh: u32, h: JobHandle) {
        if !self.spill.enabled {
            return;
        }
        let size = self
            .store
            .get(h)
            .map_or(0, |j| j.body.as_ref().map_or(0, |b| b.len() as u64));
        let job = size + JOB_OVERHEAD;
        self.spill.mean_job = match self.spill.mean_job {
            0 => job,
            m => m - m / 64 + job / 64,
        };
        let head = self.spill_head();
        let long = self.queues.get(qh).is_some_and(|q| q.len() > head);
        if !long {
            return;
        }
        // Whole jobs join their queue's runs in creation order only: a job
        // left in RAM here and spilled later by the backfill would fall
        // inside the span of the run its successors went to, and could
        // only spill its body (a quarter of the jobs in a 30,000/s fill,
        // ~160 B of RAM each instead of ~48). So once one is left, the
        // backfill takes this queue's new jobs too, in order.
        let ordered = self.cold_on() && !self.spill.replay;
        if ordered && self.spill.gap.contains_key(&qh) {
            // Once memory asks for it, the backfill runs now, not at the
            // next 100 ms cron: a producer of 16 KB bodies filled the
            // rest of a 64 MB maxmemory in 55 ms, and its ADDJOBs were
            // refused while the disk sat idle.
            // (Not with the disk budget spent: the backfill could do
            // nothing, and each ADDJOB would ask for a tick.)
            if self.spill.due.is_none() && !self.spill.stats.disk_budget_full && self.spill_wanted()
            {
                self.spill.due = Some(0);
            }
            return;
        }
        if !(self.spill_wanted() && self.spill_job(h)) && ordered {
            self.spill.gap.insert(qh, ());
        }
    }

    /// A job registered active, waiting for its retry to queue it: one the
    /// AOF loader brought back after a crash, or a replica's copy
    /// (REPLJOB). Nothing reads its body until then, so it spills like a
    /// queue tail once memory is past the watermark. Without this a
    /// restart would need RAM for the whole backlog until every retry
    /// fired, and every node but a job's origin would hold its body in RAM
    /// (REPLICATE 3 on three nodes: two thirds of each node's jobs).
    pub fn spill_parked(&mut self, h: JobHandle, now: u64) {
        if !self.spill.enabled
            || self
                .store
                .get(h)
                .is_none_or(|j| j.state != JobState::Active)
        {
            return;
        }
        let qtime = self.store.get(h).map_or(0, |j| j.qtime);
        if self.spill_wanted() {
            self.spill_write(h, Kind::Parked { qtime }, now);
        }
    }

    /// RAM a queued job takes on average (its body and record), as last
    /// seen; a kilobyte's job before any was queued.
    pub(crate) fn spill_mean_job(&self) -> u64 {
        match self.spill.mean_job {
            0 => 1024 + JOB_OVERHEAD,
            m => m,
        }
    }

    /// A copy's requeue time moved on (its WILLQUEUE was answered QUEUED,
    /// or a WORKING came): one that came back from disk for its retry goes
    /// back whole at once, not when the cron's walk of the job table
    /// reaches it, since every copy of a backlog comes back once a RETRY
    /// and waits in RAM, body and all, until it leaves again.
    pub(crate) fn spill_copy_again(&mut self, h: JobHandle, now: u64) {
        if self.spill.enabled && self.cold_copy_eligible(h, now) && self.spill_wanted() {
            let qtime = self.store.get(h).map_or(0, |j| j.qtime);
            self.spill_write(h, Kind::Parked { qtime }, now);
        }
    }

    /// An AOF replay runs (`on`) or ended. While it runs, a queued job
    /// past the head window spills at once when memory asks for it (whole
    /// if it fits its queue's runs, else its body), never left for the
    /// backfill: the 100 ms cron's backfill is far slower than a replay,
    /// whose jobs would pile up in RAM meanwhile, while writes issued at
    /// once reach their cap and `spill_backlogged` holds the replay back.
    pub fn set_spill_replay(&mut self, on: bool) {
        self.spill.replay = on;
        if on {
            self.cold.begin_replay();
        } else {
            self.cold_replay_end();
        }
    }

    /// Between two batches of an AOF replay (the cron starts after it):
    /// jobs loaded active while memory was under the watermark leave RAM
    /// once it is passed, as the cron's walk of the job table would take
    /// them after the load. Without it a replay ended with every job it
    /// met first still in RAM, body and all, on top of the tables the rest
    /// had grown (a 1M-job replay under 64 MB: 33 MB of them).
    pub fn spill_replay_backfill(&mut self, now: u64) {
        if self.spill.enabled && self.spill.replay && self.spill_wanted() {
            self.spill_parked_backfill(now);
            // Jobs loaded queued (the controlled-restart recipe) too: left
            // in RAM, those met first held a 10M-job replay 350 MB over
            // the tables it grew (peak RSS 1.96x maxmemory).
            if self.spill_wanted() {
                self.spill_backfill();
            }
        }
    }

    /// Writes in flight are at their cap while spilling: a producer that
    /// can wait (the AOF loader) lets the disk catch up first. Its cap is
    /// also what is left under maxmemory (at least a 64th of it, so the
    /// disk stays busy): near the end of a big replay the tables alone
    /// fill most of maxmemory, and bodies waiting for the disk on top of
    /// them took a 10M-job restart to 1.15x of it (docs/PERFORMANCE.md).
    pub fn spill_backlogged(&self) -> bool {
        let s = &self.spill;
        if !s.enabled || !s.active || s.fault.is_some() {
            return false;
        }
        let max = self.memory.maxmemory;
        let mut cap = self.max_pending();
        if max > 0 {
            let room = max.saturating_sub((self.memory.used)() as u64);
            cap = cap.min(room.max(max / 64));
        }
        s.pending_bytes >= cap
    }

    /// The job table dropped `h` (`remove_record`).
    pub(crate) fn spill_forget(&mut self, h: JobHandle) {
        if self.spill.slots.is_empty() {
            return;
        }
        self.spill.forget(h);
    }

    /// Whether any job of this node has its body or record on disk.
    pub(crate) fn spill_holds_jobs(&self) -> bool {
        !self.spill.slots.is_empty() || self.cold_jobs() > 0
    }

    /// Whether the head of queue `qh` can be popped now. A job whose body
    /// is on disk cannot: its page-in is requested instead. A job whose
    /// write is still in flight can (its body is in RAM); its record is
    /// dropped as it leaves the queue.
    pub(crate) fn spill_head_ready(&mut self, qh: u32) -> bool {
        if self.spill.slots.is_empty() {
            return true;
        }
        let Some(h) = self.queues.get(qh).and_then(|q| q.first()) else {
            return true;
        };
        match self.spill.slots.get(h).map(|s| s.st) {
            None => true,
            Some(SlotState::Pending) => {
                self.spill.forget(h);
                true
            }
            Some(_) => {
                self.spill_prefetch_scan(qh);
                false
            }
        }
    }

    /// After a pop: check the head window every quarter window of pops
    /// and read back what is on disk there.
    pub(crate) fn spill_after_pop(&mut self, qh: u32) {
        if self.queues.get(qh).is_some_and(|q| q.cold > 0) {
            self.cold_prefetch(qh, false);
            self.spill.pops.entry(qh).or_insert(0);
        }
        if self.spill.slots.is_empty() {
            return;
        }
        let head = self.spill_head();
        let n = self.spill.pops.entry(qh).or_insert(0);
        *n += 1;
        if *n as usize >= head / 4 {
            *n = 0;
            self.spill_prefetch_scan(qh);
        }
    }

    /// A change to job `h` must replace its AOF record (DELJOB then
    /// LOADJOB), which needs the body. When the body is on disk, it is
    /// read back first and the records are written when it lands (true);
    /// a crash meanwhile restores the job as it was before the change.
    pub(crate) fn spill_relog_later(&mut self, h: JobHandle) -> bool {
        if self.spilled_body(h).is_none() {
            return false;
        }
        self.spill.relog.insert(h, ());
        self.spill_page_in(h);
        true
    }

    /// Read the body of `h` back if it is only on disk (a copy in flight
    /// is read when it completes).
    fn spill_page_in(&mut self, h: JobHandle) {
        let Some(slot) = self.spill.slots.get(h) else {
            return;
        };
        if slot.st != SlotState::OnDisk {
            return;
        }
        let Some(j) = self.store.get(h) else {
            return;
        };
        self.spill.slots.set_state(h, SlotState::Loading);
        let loc = slot.loc;
        self.spill.ops.push(SpillOp::Read { h, id: j.id, loc });
    }

    /// Request page-ins for the on-disk jobs among the first
    /// `prefetch_jobs` of the queue: reads run ahead of
    /// consumers by several windows, so a page-in's round trip through
    /// the spill thread is hidden while the resident ones are served.
    fn spill_prefetch_scan(&mut self, qh: u32) {
        // No body on disk (whole jobs spill, and their slots are only
        // writes in flight): nothing to find in the 512-job walk.
        if self.spill.cold == 0 {
            return;
        }
        let Some(q) = self.queues.get(qh) else {
            return;
        };
        let ahead = self.prefetch_jobs();
        let s = &mut self.spill;
        for h in q.handles().take(ahead) {
            let Some(slot) = s.slots.get(h) else {
                continue;
            };
            if slot.st != SlotState::OnDisk {
                continue;
            }
            let Some(j) = self.store.get(h) else {
                continue;
            };
            s.slots.set_state(h, SlotState::Loading);
            let loc = slot.loc;
            s.ops.push(SpillOp::Read { h, id: j.id, loc });
        }
    }

    /// Results from the spill thread.
    pub fn spill_done(&mut self, done: Vec<SpillDone>, now: u64) {
        let mut done = VecDeque::from(done);
        for d in done.iter().take(PREFETCH_AHEAD) {
            self.spill_prefetch(d);
        }
        while let Some(d) = done.pop_front() {
            if let Some(ahead) = done.get(PREFETCH_AHEAD - 1) {
                self.spill_prefetch(ahead);
            }
            match d {
                SpillDone::Written { seg, end } => self.spill_written(seg, end),
                SpillDone::WriteFailed { seg, fault } => self.spill_write_failed(seg, fault, now),
                SpillDone::Read { h, id, loc, result } => self.spill_read(h, id, loc, result),
                SpillDone::Moved {
                    h,
                    id,
                    from,
                    to,
                    result,
                } => self.spill_moved(h, id, from, to, result),
                SpillDone::ReadCold {
                    slot,
                    loc,
                    qh,
                    run,
                    result,
                } => self.cold_read_done(slot, loc, qh, run, result, now),
                SpillDone::MovedCold {
                    slot,
                    from,
                    to,
                    result,
                } => self.cold_moved(slot, from, to, result),
                SpillDone::Spent { bodies, lists } => drop((bodies, lists)),
            }
        }
        // Writes completed: a queue whose new jobs wait for the backfill,
        // or parked jobs left at the cap, get it within a millisecond, not
        // at the next 100 ms cron.
        if (!self.spill.gap.is_empty() || self.spill.parked_more) && self.spill.due.is_none() {
            self.spill.due = Some(now + 1);
        }
        // Bus messages that waited for their jobs to come back.
        for p in self.cold_ready_messages() {
            self.on_bus_message(p.link, &p.local_ip, &p.peer_ip, p.msg, now);
        }
        self.serve_ready(now);
    }

    fn spill_written(&mut self, seg: u32, end: u32) {
        self.spill.landed += 1;
        for &(_, id, _, _) in self.spill.pending.iter().take(PREFETCH_AHEAD) {
            self.store.prefetch_slot(&id);
        }
        while let Some(&(h, id, loc, kind)) = self.spill.pending.front() {
            if loc.seg > seg || (loc.seg == seg && loc.off >= end) {
                break;
            }
            self.spill.pending.pop_front();
            if let Some(&(_, ahead, _, _)) = self.spill.pending.get(PREFETCH_AHEAD - 1) {
                self.store.prefetch_slot(&ahead);
            }
            self.spill.pending_bytes = self.spill.pending_bytes.saturating_sub(loc.record_len());
            let mine = self
                .spill
                .slots
                .get(h)
                .is_some_and(|s| s.st == SlotState::Pending && s.loc == loc);
            if !mine {
                continue;
            }
            if matches!(kind, Kind::Whole | Kind::WholeCopy { .. }) {
                // The record stays live: the job now lives only there.
                self.spill.slots.remove(h);
                self.spill.relog.remove(&h);
                let evicted = match kind {
                    Kind::WholeCopy { qtime, nodes } => {
                        self.cold_evict_copy(h, id, loc, qtime, nodes)
                    }
                    _ => self.cold_evict(h, id, loc),
                };
                if evicted {
                    self.spill.stats.spilled_total += 1;
                } else {
                    self.spill.dead(loc);
                }
                continue;
            }
            let stays_cold = |j: &crate::domain::job::Job| match kind {
                Kind::Parked { qtime } => j.state == JobState::Active && j.qtime == qtime,
                _ => j.state == JobState::Queued,
            };
            match self.store.get_mut(h) {
                Some(j) if j.id == id && stays_cold(j) => {
                    j.body = None;
                    self.spill.slots.set_state(h, SlotState::OnDisk);
                    self.spill.cold += 1;
                    self.spill.stats.spilled_total += 1;
                }
                // Delivered, dequeued or gone meanwhile: it stays in RAM.
                _ => {
                    self.spill.forget(h);
                }
            }
        }
    }

    /// Warm the ID-index place a result will rewrite: a whole job read
    /// back takes its entry back from the cold tier, and the index is far
    /// larger than the cache (each such rewrite was a miss: 2 % of the
    /// owner's time in a whole-job cycle).
    fn spill_prefetch(&self, d: &SpillDone) {
        if let SpillDone::ReadCold {
            result: Ok((id, _)),
            ..
        } = d
        {
            self.store.prefetch_slot(id);
        }
    }

    fn spill_write_failed(&mut self, seg: u32, fault: SpillFault, now: u64) {
        let s = &mut self.spill;
        s.stats.write_errors += 1;
        s.fault = Some((fault, now + FAULT_BACKOFF_MS));
        s.active = false;
        // Every write at or after the failed one keeps its body in RAM.
        let failed: Vec<(JobHandle, Loc)> = s
            .pending
            .iter()
            .filter(|(_, _, l, _)| l.seg >= seg)
            .map(|&(h, _, l, _)| (h, l))
            .collect();
        s.pending.retain(|(_, _, l, _)| l.seg < seg);
        for (h, loc) in failed {
            s.pending_bytes = s.pending_bytes.saturating_sub(loc.record_len());
            if s.slots.get(h).is_some_and(|x| x.loc == loc) {
                s.forget(h);
            }
        }
        // Compaction copies into the failed segment go back to their source.
        let into: Vec<JobHandle> = s
            .moving
            .iter()
            .filter(|(_, to)| to.seg >= seg)
            .map(|(&h, _)| h)
            .collect();
        for h in into {
            if let Some(to) = s.moving.remove(&h) {
                s.dead(to);
            }
            s.slots.set_state(h, SlotState::OnDisk);
        }
        // Abandon the segment: later writes start a fresh one.
        if s.cur >= seg {
            s.cur += 1;
            s.cur_off = 0;
        }
    }

    fn spill_read(
        &mut self,
        h: JobHandle,
        id: JobId,
        loc: Loc,
        result: Result<Bytes, ReadFailure>,
    ) {
        let mine = self
            .spill
            .slots
            .get(h)
            .is_some_and(|s| s.st == SlotState::Loading && s.loc == loc)
            && self.store.get(h).is_some_and(|j| j.id == id);
        if !mine {
            return;
        }
        match result {
            Ok(body) => {
                self.spill.stats.reads += 1;
                self.spill.stats.read_bytes += body.len() as u64;
                let relog = self.spill.relog.contains_key(&h);
                self.spill.forget(h);
                if let Some(j) = self.store.get_mut(h) {
                    j.body = Some(crate::domain::job::Body::from(&body[..]));
                }
                if relog && self.aof {
                    self.out.aof.push(super::AofRecord::DelJob(id));
                    self.aof_loadjob(h);
                }
                self.spill_mark_ready(h);
            }
            Err(ReadFailure::Corrupt) => {
                // Never serve a wrong body: the job is dropped here (no
                // DELJOB to the AOF or the cluster), its replicas and the
                // AOF still have it.
                self.spill.stats.corrupt += 1;
                self.spill_mark_ready(h);
                self.dequeue(h);
                self.remove_record(h);
            }
            Err(ReadFailure::Io) => {
                // Left on disk: the next prefetch or pop asks again.
                self.spill.stats.read_errors += 1;
                self.spill.slots.set_state(h, SlotState::OnDisk);
            }
        }
    }

    /// Clients blocked on the job's queue may be served now.
    pub(super) fn spill_mark_ready(&mut self, h: JobHandle) {
        let Some(qh) = self
            .store
            .get(h)
            .filter(|j| j.state == JobState::Queued)
            .and_then(|j| j.queue.as_deref())
            .and_then(|n| self.queue_index.get(n).copied())
        else {
            return;
        };
        if let Some(q) = self.queues.get(qh) {
            if !q.blocked.is_empty() && !self.ready.contains(&q.name) {
                self.ready.push(q.name.clone());
            }
        }
    }

    fn spill_moved(
        &mut self,
        h: JobHandle,
        id: JobId,
        from: Loc,
        to: Loc,
        result: Result<(), ReadFailure>,
    ) {
        let mine = self
            .spill
            .slots
            .get(h)
            .is_some_and(|x| x.st == SlotState::Moving && x.loc == from)
            && self.spill.moving.get(&h) == Some(&to)
            && self.store.get(h).is_some_and(|j| j.id == id);
        if !mine {
            return;
        }
        let s = &mut self.spill;
        s.moving.remove(&h);
        match result {
            Ok(()) => {
                s.dead(from);
                s.stats.moved += 1;
                s.slots.insert(
                    h,
                    Slot {
                        loc: to,
                        st: SlotState::OnDisk,
                    },
                );
            }
            Err(ReadFailure::Corrupt) => {
                s.dead(to);
                s.stats.corrupt += 1;
                s.slots.set_state(h, SlotState::OnDisk);
                self.spill_mark_ready(h);
                self.dequeue(h);
                self.remove_record(h);
            }
            Err(ReadFailure::Io) => {
                s.dead(to);
                s.stats.read_errors += 1;
                s.slots.set_state(h, SlotState::OnDisk);
            }
        }
        if self.spill.relog.contains_key(&h) {
            self.spill_page_in(h);
        }
    }

    /// Queue ops for the spill thread (`engine::cold`'s reads).
    pub(super) fn spill_push_ops(&mut self, ops: Vec<SpillOp>) {
        self.spill.ops.extend(ops);
    }

    /// Room for a record of `len` bytes (`engine::cold`'s compaction).
    pub(super) fn spill_allocate(&mut self, len: u32) -> Loc {
        self.spill.allocate(len)
    }

    pub(super) fn spill_count_moved(&mut self) {
        self.spill.stats.moved += 1;
    }

    /// A record stopped being live (`engine::cold`).
    pub(super) fn spill_record_dead(&mut self, loc: Loc) {
        self.spill.dead(loc);
    }

    /// A whole job's record in `seg` became cold (true) or left (false).
    pub(super) fn spill_cold_record(&mut self, seg: u32, on: bool) {
        if let Some(s) = self.spill.segs.get_mut(&seg) {
            if on {
                s.cold += 1;
            } else {
                s.cold = s.cold.saturating_sub(1);
            }
        }
    }

    pub(super) fn spill_count_read(&mut self, bytes: usize) {
        self.spill.stats.reads += 1;
        self.spill.stats.read_bytes += bytes as u64;
    }

    pub(super) fn spill_read_error(&mut self) {
        self.spill.stats.read_errors += 1;
    }

    pub(super) fn spill_corrupt(&mut self) {
        self.spill.stats.corrupt += 1;
    }

    /// Clients blocked on job `h`'s queue may be served now.
    /// Periodic spill work (from `tick`): end a fault's back-off, backfill
    /// long queues, compact a mostly dead segment, unlink dead ones.
    pub(crate) fn spill_cron(&mut self, now: u64) {
        if !self.spill.enabled && self.spill.segs.is_empty() {
            return;
        }
        if self.spill.fault.is_some_and(|(_, until)| now >= until) {
            self.spill.fault = None;
        }
        // A 100 ms cron run, not an early run the backfill asked for.
        let period = now.saturating_sub(self.spill.period_start) >= 100;
        let more = self.spill.enabled && self.spill_wanted() && self.spill_backfill();
        let parked = self.spill.enabled && (period || self.spill.parked_more);
        let left = if parked && self.spill_wanted() {
            self.spill_parked_backfill(now)
        } else {
            Left::None
        };
        self.spill.parked_more = left != Left::None;
        let more = more || left == Left::Budget;
        // A page-in that failed is asked again for queues with waiters.
        if !self.spill.slots.is_empty() {
            let waited: Vec<u32> = self
                .queues
                .iter()
                .filter(|(_, q)| !q.blocked.is_empty() && !q.is_empty())
                .map(|(qh, _)| qh)
                .collect();
            for qh in waited {
                self.spill_head_ready(qh);
            }
        }
        self.cold_expire(now);
        if period {
            self.cold_copies_due(now);
        }
        // Queues with waiting clients and whole jobs on disk read them back.
        if self.cold_jobs() > 0 {
            let waited: Vec<u32> = self
                .queues
                .iter()
                .filter(|(_, q)| !q.blocked.is_empty() && q.cold > 0)
                .map(|(qh, _)| qh)
                .collect();
            for qh in waited {
                self.cold_head_ready(qh);
            }
        }
        // Compaction runs with the 100 ms cron only, not with the early
        // runs a backfill asks for.
        if period {
            self.spill_compact();
        }
        self.spill_reclaim();
        self.spill.due = more.then_some(now + 1);
        if period {
            self.spill.pops.clear();
            self.spill.period_start = now;
            for seg in self.spill.segs.values_mut() {
                seg.live_seen = seg.live_bytes;
            }
        }
    }

    /// Jobs at the front of queue `qh` the backfill leaves in RAM: the
    /// head window, or the whole prefetch span of a queue consumed since
    /// the last 100 ms cron. Spilling what a prefetch has just read back
    /// for a consumer only to read it again cost a write and a read per
    /// job (1.17M reads for 0.96M jobs consumed in the job cycle).
    fn spill_keep(&self, qh: u32) -> usize {
        if self.spill.pops.contains_key(&qh) {
            self.prefetch_jobs().max(self.spill_head())
        } else {
            self.spill_head()
        }
    }

    /// Jobs a queue's read-ahead keeps resident or on their way:
    /// `PREFETCH_WINDOWS` head windows, fewer when jobs are large.
    pub(crate) fn prefetch_jobs(&self) -> usize {
        let full = self.spill_head() * PREFETCH_WINDOWS;
        let budget = match self.memory.maxmemory {
            0 => PREFETCH_BYTES_MAX,
            m => (m / PREFETCH_SHARE).clamp(PREFETCH_BYTES_MIN, PREFETCH_BYTES_MAX),
        };
        let jobs = budget / self.spill.mean_job.max(1);
        usize::try_from(jobs)
            .unwrap_or(usize::MAX)
            .clamp(PREFETCH_MIN_JOBS.min(full), full)
    }

    /// Jobs at the front of each queue that stay in RAM: `HEAD_WINDOW`,
    /// fewer when the queues' windows together would pass maxmemory /
    /// `HEAD_SHARE` at the mean job size.
    pub(crate) fn spill_head(&self) -> usize {
        let max = self.spill.head;
        let (m, mean) = (self.memory.maxmemory, self.spill.mean_job);
        if m == 0 || mean == 0 {
            return max;
        }
        let per_queue = m / HEAD_SHARE / self.queues.len().max(1) as u64;
        usize::try_from(per_queue / mean)
            .unwrap_or(usize::MAX)
            .clamp(HEAD_MIN_JOBS.min(max), max)
    }

    /// When the engine wants a tick for spill work left by the last cron
    /// run (`Engine::next_deadline`).
    pub(crate) fn spill_due(&self) -> Option<u64> {
        self.spill.due
    }

    /// Spill the bodies of queued jobs past the head window, oldest first,
    /// resuming where the last pass stopped; true if the budget ran out
    /// with work left.
    fn spill_backfill(&mut self) -> bool {
        let mut budget = CRON_BUDGET;
        let queues: Vec<(u32, usize)> = self
            .queues
            .iter()
            .map(|(qh, q)| (qh, q, self.spill_keep(qh)))
            .filter(|(_, q, keep)| q.len() > *keep)
            .map(|(qh, _, keep)| (qh, keep))
            .collect();
        // A queue with nothing past what it keeps has no gap left.
        self.spill
            .gap
            .retain(|qh, _| queues.iter().any(|(q, _)| q == qh));
        for (qh, keep) in queues {
            if budget == 0 {
                break;
            }
            let from = self.spill.backfill.get(&qh).copied().unwrap_or_default();
            let Some(q) = self.queues.get(qh) else {
                continue;
            };
            let todo: Vec<JobHandle> = match q.handles_from_key(keep, from.key) {
                Some(it) => it.take(budget).collect(),
                None => q.handles_from(keep + from.pos).take(budget).collect(),
            };
            let reached_end = todo.len() < budget;
            budget -= todo.len();
            let visited = todo.len();
            let mut stopped = false;
            let mut key = from.key;
            for h in todo {
                key = self.store.get(h).map_or(key, |j| j.ctime);
                if self.spill.slots.contains(h) {
                    continue;
                }
                if !self.spill_wanted() || !self.spill_job(h) && self.spill.stats.disk_budget_full {
                    stopped = true;
                    break;
                }
            }
            // A pass that stopped or reached the queue's end starts over
            // (jobs read back since are in RAM again); one that went on
            // resumes at the last job it saw (by creation time: whole jobs
            // leave the queue as their writes land, and a position would
            // skip as many jobs as left before it).
            let next = if stopped || visited == 0 || reached_end {
                Cursor::default()
            } else {
                Cursor {
                    pos: from.pos + visited,
                    key,
                }
            };
            self.spill.backfill.insert(qh, next);
            if stopped {
                break;
            }
            if reached_end {
                self.spill.gap.remove(&qh);
            }
        }
        self.spill.backfill.retain(|_, c| c.pos != 0);
        budget == 0
    }

    /// Spill the bodies of parked jobs that stayed in RAM (`spill_parked`
    /// skips those that arrive below the watermark or while the writes in
    /// flight are at their cap), walking the job table from where the last
    /// run stopped: at most `PARKED_SCAN` slots and `CRON_BUDGET` writes a
    /// run. Parked: active and never delivered here (a replica's copy, a
    /// job an AOF replay brought back), so nothing reads its body until
    /// its retry queues it.
    fn spill_parked_backfill(&mut self, now: u64) -> Left {
        let slots = self.store.slots();
        if slots == 0 {
            return Left::None;
        }
        let mut at = (self.spill.parked_cursor as usize).min(slots);
        let mut written = 0;
        let mut left = Left::None;
        for _ in 0..PARKED_SCAN.min(slots) {
            if at >= slots {
                at = 0;
            }
            let Ok(h) = JobHandle::try_from(at) else {
                break;
            };
            at += 1;
            let qtime = match self.store.get(h) {
                Some(j)
                    if j.state == JobState::Active
                        && !j.has(F_DELIVERED)
                        && j.body.is_some()
                        && !self.spill.slots.contains(h) =>
                {
                    j.qtime
                }
                _ => continue,
            };
            if !self.spill_wanted() {
                if self.spill.pending_bytes >= self.max_pending() {
                    left = Left::Capped;
                }
                at -= 1;
                break;
            }
            if self.spill_write(h, Kind::Parked { qtime }, now) {
                written += 1;
                if written >= CRON_BUDGET {
                    left = Left::Budget;
                    break;
                }
            } else if self.spill.stats.disk_budget_full {
                break;
            }
        }
        self.spill.parked_cursor = u32::try_from(at).unwrap_or(0);
        left
    }

    /// Copy the live records of the emptiest sealed segment under half
    /// live forward, a budget at a time. The segment's records are found
    /// by walking the location table (no per-segment member list costs
    /// RAM per job), `COMPACT_SCAN` handles per run from where the last
    /// run stopped; a walk that reaches the end of the table ends that
    /// segment's pass, and the next run picks a segment again.
    fn spill_compact(&mut self) {
        if self.spill.fault.is_some() || self.spill.pinned {
            return;
        }
        let cur = self.spill.cur;
        // A segment is worth compacting once it is half dead. That alone
        // lets the tier reach 2x live bytes and more (every sealed segment
        // just over half live, plus the one being written: 2.2x in run
        // AN), so past 1.6x overall, segments up to three quarters live
        // qualify too, least live first.
        let (disk, live) = self
            .spill
            .segs
            .values()
            .fold((0u64, 0u64), |(d, l), s| (d + s.bytes, l + s.live_bytes));
        let pressed = disk * 5 > live * 8;
        let wanted = |n: u32, s: &Segment| {
            n != cur
                && s.live > 0
                && (s.live_bytes * 2 < s.bytes || (pressed && s.live_bytes * 4 < s.bytes * 3))
        };
        // Consumers draining a segment leave it alone (`live_seen`); a
        // segment being compacted loses its records to the copies too, so
        // that test only applies to picking a new one, never to one that
        // is under way (or every pass would stop a twentieth in).
        let draining = |s: &Segment| s.live_bytes + s.bytes / 20 < s.live_seen;
        // A pass under way goes on while its segment has live records,
        // whatever the pressure now (its copies are already written).
        let going = self
            .spill
            .compacting
            .filter(|(seg, _)| self.spill.segs.get(seg).is_some_and(|s| s.live > 0));
        let (seg, from) = match going {
            Some(c) => c,
            None => {
                let victim = self
                    .spill
                    .segs
                    .iter()
                    .filter(|(&n, s)| wanted(n, s) && !draining(s))
                    .min_by_key(|(_, s)| s.live_bytes)
                    .map(|(&n, _)| n);
                match victim {
                    Some(seg) => (seg, 0),
                    None => {
                        self.spill.compacting = None;
                        return;
                    }
                }
            }
        };
        let mut found: Vec<(JobHandle, Slot)> = Vec::new();
        self.spill
            .slots
            .scan(from, self.spill.compact_scan, |h, slot| {
                if slot.loc.seg == seg && slot.st == SlotState::OnDisk {
                    found.push((h, slot));
                }
                found.len() < COMPACT_BUDGET
            });
        let next = match found.last() {
            Some(&(h, _)) if found.len() == COMPACT_BUDGET => h as usize + 1,
            _ => from + self.spill.compact_scan,
        };
        self.spill.compacting = (next < self.spill.slots.end()).then_some((seg, next));
        let mut started = false;
        for (h, slot) in found {
            let Some(id) = self.store.get(h).map(|j| j.id) else {
                continue;
            };
            let to = self.spill.allocate(slot.loc.len);
            self.spill.moving.insert(h, to);
            self.spill.slots.set_state(h, SlotState::Moving);
            self.spill.ops.push(SpillOp::Move {
                h,
                id,
                from: slot.loc,
                to,
            });
            started = true;
        }
        // Whole jobs' records in it move too (`engine::cold`).
        if self.spill.segs.get(&seg).is_some_and(|s| s.cold > 0) {
            started |= self.cold_compact(seg, self.spill.compact_scan, COMPACT_BUDGET);
        }
        if started {
            self.spill.stats.compactions += 1;
        }
    }

    /// Unlink sealed segments with no live record.
    fn spill_reclaim(&mut self) {
        if self.spill.pinned {
            return;
        }
        let cur = self.spill.cur;
        let dead: Vec<u32> = self
            .spill
            .segs
            .iter()
            .filter(|(&n, s)| n != cur && s.live == 0)
            .map(|(&n, _)| n)
            .collect();
        for seg in dead {
            if let Some(s) = self.spill.segs.remove(&seg) {
                self.spill.disk_total = self.spill.disk_total.saturating_sub(s.bytes);
            }
            self.spill.stats.unlinked += 1;
            self.spill.ops.push(SpillOp::Unlink { seg });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
    use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
    use crate::engine::{AofRecord, Wake};

    /// The spill thread, in memory: records by (segment, offset).
    #[derive(Default)]
    struct Disk {
        recs: HashMap<(u32, u32), (JobId, Bytes)>,
        unlinked: Vec<u32>,
        fail_writes: bool,
        corrupt_reads: bool,
        /// Fail this many reads with an I/O error.
        io_fail_reads: u32,
    }

    impl Disk {
        fn run(&mut self, e: &mut Engine, now: u64) {
            loop {
                let ops = e.take_spill_ops();
                if ops.is_empty() {
                    return;
                }
                let mut done = Vec::new();
                for op in ops {
                    match op {
                        SpillOp::Write { loc, id, body } => {
                            if self.fail_writes {
                                done.push(SpillDone::WriteFailed {
                                    seg: loc.seg,
                                    fault: SpillFault::DiskFull,
                                });
                                continue;
                            }
                            assert_eq!(body.len() as u32, loc.len);
                            self.recs.insert((loc.seg, loc.off), (id, body));
                            done.push(SpillDone::Written {
                                seg: loc.seg,
                                end: loc.off + loc.record_len() as u32,
                            });
                        }
                        SpillOp::Read { h, id, loc } if self.io_fail_reads > 0 => {
                            self.io_fail_reads -= 1;
                            done.push(SpillDone::Read {
                                h,
                                id,
                                loc,
                                result: Err(ReadFailure::Io),
                            });
                        }
                        SpillOp::Read { h, id, loc } => {
                            let result = match self.recs.get(&(loc.seg, loc.off)) {
                                Some((rid, body)) if *rid == id && !self.corrupt_reads => {
                                    Ok(body.clone())
                                }
                                Some(_) => Err(ReadFailure::Corrupt),
                                None => Err(ReadFailure::Io),
                            };
                            done.push(SpillDone::Read { h, id, loc, result });
                        }
                        SpillOp::Move { h, id, from, to } => {
                            let result = match self.recs.get(&(from.seg, from.off)).cloned() {
                                Some((rid, body)) if rid == id => {
                                    self.recs.insert((to.seg, to.off), (rid, body));
                                    Ok(())
                                }
                                Some(_) => Err(ReadFailure::Corrupt),
                                None => Err(ReadFailure::Io),
                            };
                            done.push(SpillDone::Moved {
                                h,
                                id,
                                from,
                                to,
                                result,
                            });
                        }
                        SpillOp::ReadCold { slot, loc, qh, run } => {
                            let result = match self.recs.get(&(loc.seg, loc.off)) {
                                Some((rid, body)) if !self.corrupt_reads => {
                                    Ok((*rid, body.clone()))
                                }
                                Some(_) => Err(ReadFailure::Corrupt),
                                None => Err(ReadFailure::Io),
                            };
                            done.push(SpillDone::ReadCold {
                                slot,
                                loc,
                                qh,
                                run,
                                result,
                            });
                        }
                        SpillOp::MoveCold { slot, from, to } => {
                            let result = match self.recs.get(&(from.seg, from.off)).cloned() {
                                Some(rec) => {
                                    self.recs.insert((to.seg, to.off), rec);
                                    Ok(())
                                }
                                None => Err(ReadFailure::Io),
                            };
                            done.push(SpillDone::MovedCold {
                                slot,
                                from,
                                to,
                                result,
                            });
                        }
                        SpillOp::Unlink { seg } => {
                            assert!(!self.unlinked.contains(&seg), "unlinked twice");
                            self.recs.retain(|k, _| k.0 != seg);
                            self.unlinked.push(seg);
                        }
                    }
                }
                e.spill_done(done, now);
            }
        }
    }

    fn engine() -> Engine {
        let mut e = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, 1000);
        // Watermark 0: every tail past the head window spills.
        e.set_spill(true, 0, 0);
        e
    }

    fn add(e: &mut Engine, q: &'static [u8], body: String, now: u64) -> JobId {
        let req = AddJobRequest::new(Bytes::from_static(q), Bytes::from(body));
        let AddJobOutcome::Added(id) = e.addjob(99, req, now) else {
            panic!("ADDJOB did not add");
        };
        e.serve_ready(now);
        id
    }

    /// `n` jobs of 100-byte bodies (`{i:0>100}`) queued in `q` at 1000 with
    /// segments of `seg_bytes`, every tail written out.
    fn backlog_on_disk(seg_bytes: u32, n: usize) -> (Engine, Disk, Vec<JobId>) {
        let mut e = engine();
        e.set_spill_segment_bytes(seg_bytes);
        let mut disk = Disk::default();
        let ids = (0..n)
            .map(|i| add(&mut e, b"q", format!("{i:0>100}"), 1000))
            .collect();
        disk.run(&mut e, 1000);
        (e, disk, ids)
    }

    /// DELJOB the spilled jobs (past the head window) whose position
    /// `gone` picks; their IDs.
    fn delete_spilled(e: &mut Engine, ids: &[JobId], gone: impl Fn(usize) -> bool) -> Vec<JobId> {
        let gone: Vec<JobId> = ids[HEAD_WINDOW..]
            .iter()
            .enumerate()
            .filter(|(i, _)| gone(*i))
            .map(|(_, id)| *id)
            .collect();
        for id in &gone {
            let h = e.lookup(id).expect("job");
            e.delete_job(h, 1001);
        }
        gone
    }

    /// Twenty 100 ms cron runs (compaction runs with them) from 1602 ms.
    fn compact_for_two_seconds(e: &mut Engine, disk: &mut Disk) {
        for t in 0..20 {
            e.spill_cron(1602 + 100 * t);
            disk.run(e, 1602 + 100 * t);
        }
    }

    fn nohang(q: &'static [u8], count: u64) -> GetJobRequest {
        GetJobRequest {
            nohang: true,
            timeout: 0,
            count,
            withcounters: false,
            queues: vec![Bytes::from_static(q)],
        }
    }

    /// Drain a queue with NOHANG GETJOBs, letting the disk answer page-ins
    /// whenever the head is not resident; returns (id, body) in order.
    fn drain(e: &mut Engine, disk: &mut Disk, q: &'static [u8], now: u64) -> Vec<(JobId, Bytes)> {
        let mut got = Vec::new();
        let mut idle = 0;
        while e.queue_len(q) > 0 {
            match e.getjob(1, nohang(q, 10), now) {
                GetJobOutcome::Jobs(jobs) => {
                    idle = 0;
                    for j in jobs {
                        let body = j.body.expect("a delivered job has its body");
                        got.push((j.id, body));
                    }
                }
                _ => {
                    idle += 1;
                    assert!(idle < 3, "queue stuck with {} jobs", e.queue_len(q));
                }
            }
            disk.run(e, now);
            // A NOHANG whose head was on disk waited for it: its jobs
            // come as a wake once the read lands.
            for (c, w) in e.take_wakes() {
                if let (1, Wake::Jobs(jobs)) = (c, w) {
                    for j in jobs {
                        let body = j.body.expect("a delivered job has its body");
                        got.push((j.id, body));
                    }
                }
            }
        }
        got
    }

    #[test]
    fn queue_tails_spill_and_come_back_in_order_with_their_bodies() {
        let mut e = engine();
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..600 {
            ids.push(add(&mut e, b"q", format!("body-{i}"), 1000));
        }
        disk.run(&mut e, 1000);
        let st = e.spill_stats();
        assert_eq!(st.jobs, 600 - HEAD_WINDOW as u64);
        assert_eq!(st.spilled_total, 600 - HEAD_WINDOW as u64);
        // Spilled jobs keep their record; only the body left RAM.
        let last = e.lookup(&ids[599]).expect("job kept");
        assert!(e.job(last).is_some_and(|j| j.body.is_none()));
        assert!(e.spilled_body(last).is_some());
        let first = e.lookup(&ids[0]).expect("job kept");
        assert!(e.spilled_body(first).is_none());
        let got = drain(&mut e, &mut disk, b"q", 1001);
        assert_eq!(got.len(), 600);
        for (i, (id, body)) in got.iter().enumerate() {
            assert_eq!(*id, ids[i]);
            assert_eq!(&body[..], format!("body-{i}").as_bytes());
        }
        let st = e.spill_stats();
        assert_eq!(st.jobs, 0);
        assert!(st.reads > 0);
    }

    fn whole() -> Engine {
        let mut e = engine();
        e.set_spill_whole_jobs(true);
        e
    }

    #[test]
    fn whole_jobs_leave_ram_and_come_back_in_order() {
        let mut e = whole();
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..2000 {
            ids.push(add(&mut e, b"q", format!("body-{i}"), 1000));
        }
        disk.run(&mut e, 1000);
        let cold = 2000 - HEAD_WINDOW as u64;
        assert_eq!(e.cold_jobs(), cold);
        assert_eq!(e.spill_stats().jobs, cold);
        assert_eq!(e.queue_len(b"q"), 2000);
        // Gone from the job table; the ID is still known to be on disk.
        assert!(e.lookup(&ids[1999]).is_none());
        assert!(e.maybe_cold(&ids[1999]));
        assert!(e.lookup(&ids[0]).is_some());
        let got = drain(&mut e, &mut disk, b"q", 1001);
        assert_eq!(got.len(), 2000);
        for (i, (id, body)) in got.iter().enumerate() {
            assert_eq!(*id, ids[i], "job {i} out of order");
            assert_eq!(&body[..], format!("body-{i}").as_bytes());
        }
        assert_eq!(e.cold_jobs(), 0);
        assert_eq!(e.queue_len(b"q"), 0);
        // Every record is dead.
        assert_eq!(e.spill_stats().live_bytes, 0);
    }

    #[test]
    fn a_blocked_consumer_is_not_woken_empty_by_a_job_newer_than_those_on_disk() {
        let mut e = whole();
        let mut disk = Disk::default();
        let ids: Vec<JobId> = (0..1000)
            .map(|i| add(&mut e, b"q", format!("body-{i}"), 1000))
            .collect();
        disk.run(&mut e, 1000);
        assert!(e.cold_jobs() > 0);
        // The resident head is taken; the next jobs' reads are not back.
        while let GetJobOutcome::Jobs(_) = e.getjob(1, nohang(b"q", 1000), 1001) {}
        e.remove_waiter(1);
        let forever = GetJobRequest {
            nohang: false,
            ..nohang(b"q", 1)
        };
        assert!(matches!(e.getjob(5, forever, 1001), GetJobOutcome::Blocked));
        // A new job is resident but newer than those on disk: it marks
        // the queue ready, yet the older jobs must go first.
        add(&mut e, b"q", "newest".into(), 1002);
        let wakes = e.take_wakes();
        assert!(
            wakes.is_empty(),
            "woken before the older jobs are back: {wakes:?}"
        );
        disk.run(&mut e, 1003);
        e.serve_ready(1003);
        let wakes = e.take_wakes();
        let [(5, Wake::Jobs(jobs))] = &wakes[..] else {
            panic!("{wakes:?}");
        };
        // The oldest job still queued: the first one that went to disk.
        assert_eq!(jobs[0].id, ids[HEAD_WINDOW]);
    }

    #[test]
    fn a_read_ahead_of_large_jobs_is_bounded_in_bytes() {
        let mut e = whole();
        e.set_memory_limit(64 << 20, crate::engine::memory::Policy::Acks);
        let mut disk = Disk::default();
        let big = "x".repeat(60 << 10);
        for i in 0..400 {
            add(&mut e, b"q", format!("{i:04}{big}"), 1000);
        }
        // Writes in flight are capped (4 MB): the backfill does the rest.
        let mut now = 1000;
        while e.cold_jobs() < 400 - HEAD_WINDOW as u64 && now < 2000 {
            disk.run(&mut e, now);
            now += 100;
            e.tick(now);
        }
        assert_eq!(e.cold_jobs(), 400 - HEAD_WINDOW as u64);
        // Taking the resident head starts the read-ahead.
        let n = HEAD_WINDOW as u64;
        let got = e.getjob(1, nohang(b"q", n), now);
        assert!(matches!(got, GetJobOutcome::Jobs(j) if j.len() == HEAD_WINDOW));
        let reads = e
            .take_spill_ops()
            .iter()
            .filter(|op| matches!(op, SpillOp::ReadCold { .. }))
            .count();
        // 1 MB (64 MB / 64) of 60 KB records: 17 jobs, not all 272.
        assert!((4..=17).contains(&reads), "{reads} reads ahead");
    }

    #[test]
    fn head_windows_shrink_with_large_jobs_and_many_queues() {
        let mut e = engine();
        e.set_memory_limit(64 << 20, crate::engine::memory::Policy::Acks);
        add(&mut e, b"q0", "x".repeat(1024), 1000);
        assert_eq!(
            e.spill_head(),
            HEAD_WINDOW,
            "1 KB jobs keep the full window"
        );
        for q in 0..40 {
            let name: &'static [u8] = Box::leak(format!("q{q}").into_bytes().into_boxed_slice());
            for _ in 0..200 {
                add(&mut e, name, "x".repeat(16 << 10), 1000);
            }
        }
        // A quarter of 64 MB over 40 queues of ~16.5 KB jobs.
        assert_eq!(e.spill_head(), 25);
        assert!(e.prefetch_jobs() <= 4 * 25);
    }

    thread_local! {
        static USED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Sets the memory reading of engines made by `watermark_at_60_percent`
    /// on this test's thread.
    fn set_used(bytes: usize) {
        USED.with(|u| u.set(bytes));
    }

    /// `e` under a 1 MiB maxmemory with its spill watermark at 60 %,
    /// reading its memory from `set_used` (0 until a test sets it).
    fn watermark_at_60_percent(mut e: Engine) -> Engine {
        e.set_spill(true, 0, 60);
        e.set_memory_limit(1 << 20, crate::engine::memory::Policy::Acks);
        e.set_memory_counter(|| USED.with(|u| u.get()));
        e
    }

    #[test]
    fn a_queue_left_to_the_backfill_spills_as_soon_as_memory_asks() {
        let mut e = watermark_at_60_percent(whole());
        // Under the watermark the tail stays in RAM: the queue waits for
        // the backfill from then on.
        for i in 0..300 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        assert!(e.take_spill_ops().is_empty());
        assert_eq!(e.spill_due(), None);
        // Past it, the next job asks for the backfill at once, not at the
        // next 100 ms cron.
        set_used(900 << 10);
        add(&mut e, b"q", "b300".into(), 1001);
        assert!(e.spill_due().is_some_and(|t| t <= 1001));
        e.tick(1001);
        let writes = e
            .take_spill_ops()
            .iter()
            .filter(|op| matches!(op, SpillOp::Write { .. }))
            .count();
        assert_eq!(writes, 301 - HEAD_WINDOW);
    }

    /// Parked jobs (active, never delivered here, as a replica's copies
    /// are) that came while memory was under the watermark stay in RAM
    /// until it passes it; the next 100 ms cron writes their bodies out,
    /// and they come back with them once queued again.
    #[test]
    fn parked_jobs_left_in_ram_spill_once_memory_passes_the_watermark() {
        let mut e = watermark_at_60_percent(engine());
        let mut disk = Disk::default();
        let ids: Vec<JobId> = (0..300)
            .map(|i| add(&mut e, b"q", format!("b{i}"), 1000))
            .collect();
        let handles: Vec<JobHandle> = ids.iter().filter_map(|id| e.lookup(id)).collect();
        for &h in &handles {
            assert!(e.dequeue(h));
        }
        e.tick(1100);
        assert!(e.take_spill_ops().is_empty(), "under the watermark");
        set_used(900 << 10);
        e.tick(1200);
        disk.run(&mut e, 1200);
        assert_eq!(e.spill_stats().jobs, 300);
        assert!(handles
            .iter()
            .all(|&h| e.store.get(h).is_some_and(|j| j.body.is_none())));
        for &h in &handles {
            assert!(e.enqueue(h, false, 1300));
        }
        let got = drain(&mut e, &mut disk, b"q", 1300);
        let want: Vec<(JobId, Bytes)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, Bytes::from(format!("b{i}"))))
            .collect();
        assert_eq!(got.len(), want.len(), "first: {:?}", got.first());
        assert!(got == want, "out of order or wrong bodies");
    }

    #[test]
    fn jobs_queued_while_writes_are_at_their_cap_still_leave_whole() {
        let mut e = whole();
        // Writes in flight capped at maxmemory / 16 = 4 KiB: a few records.
        e.set_memory_limit(64 * 1024, crate::engine::memory::Policy::Acks);
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        // The spill thread answers after every 50 jobs: in between, the
        // cap stops the lazy tail and the backfill spills what it left.
        for round in 0..40u64 {
            for i in 0..50 {
                let n = round * 50 + i;
                ids.push(add(&mut e, b"q", format!("{n:0>200}"), 1000 + round));
            }
            e.spill_cron(1000 + round);
            disk.run(&mut e, 1000 + round);
        }
        for t in 0..200 {
            e.spill_cron(1100 + t);
            disk.run(&mut e, 1100 + t);
        }
        let st = e.spill_stats();
        // Every job past the head window left whole: none kept its record
        // in RAM with only its body on disk. (Under so small a maxmemory
        // the window is 45 jobs, not `HEAD_WINDOW`.)
        assert_eq!(e.spill_head(), 45);
        assert_eq!(st.whole_jobs, 2000 - 45, "{st:?}");
        assert_eq!(st.jobs, st.whole_jobs, "{st:?}");
        let got = drain(&mut e, &mut disk, b"q", 1400);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), ids);
    }

    #[test]
    fn a_command_naming_a_whole_job_on_disk_waits_for_it() {
        let mut e = whole();
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..400 {
            ids.push(add(&mut e, b"q", format!("b{i}"), 1000));
        }
        disk.run(&mut e, 1000);
        let id = ids[300];
        assert!(e.lookup(&id).is_none());
        let arg = Bytes::copy_from_slice(&id.0);
        let ticket = e.cold_fault(&[&arg[..]]).expect("a read");
        // Asking again while the read is in flight waits for the same one.
        let again = e.cold_fault(&[&arg[..]]).expect("still cold");
        assert!(e.take_cold_done().is_empty());
        disk.run(&mut e, 1001);
        let mut done = e.take_cold_done();
        done.sort_unstable();
        assert_eq!(done, vec![ticket, again]);
        let h = e.lookup(&id).expect("back in RAM");
        assert_eq!(e.job(h).map(|j| j.state), Some(JobState::Queued));
        assert_eq!(e.queue_len(b"q"), 400);
        assert!(e.cold_fault(&[&arg[..]]).is_none());
        // A resident ID or a non-ID needs nothing.
        let other = Bytes::from_static(b"not an id");
        assert!(e.cold_fault(&[&other[..]]).is_none());
        // The queue still comes out whole and in order.
        let got = drain(&mut e, &mut disk, b"q", 1002);
        let order: Vec<JobId> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(order, ids);
    }

    #[test]
    fn jobs_read_back_for_a_command_keep_their_place_when_spilled_again() {
        let mut e = whole();
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..1500 {
            ids.push(add(&mut e, b"q", format!("b{i}"), 1000 + i));
        }
        disk.run(&mut e, 2500);
        // A QPEEK-like read of the first cold jobs: they come back into
        // the middle of the queue, past its head window.
        let args: Vec<&[u8]> = ids[HEAD_WINDOW..HEAD_WINDOW + 50]
            .iter()
            .map(|id| &id.0[..])
            .collect();
        assert!(e.cold_fault(&args).is_some());
        disk.run(&mut e, 2501);
        assert!(e.lookup(&ids[HEAD_WINDOW]).is_some());
        // The backfill spills them again, never whole behind later jobs.
        for t in 0..5 {
            e.spill_cron(2502 + t);
            disk.run(&mut e, 2502 + t);
        }
        assert_eq!(
            e.spill_stats().jobs,
            1500 - HEAD_WINDOW as u64,
            "spilled again"
        );
        let got = drain(&mut e, &mut disk, b"q", 2510);
        assert_eq!(got.len(), ids.len());
        let wrong = got.iter().zip(&ids).position(|((a, _), b)| a != b);
        assert_eq!(wrong, None, "the first job out of order");
    }

    #[test]
    fn whole_jobs_on_disk_expire_without_being_read() {
        let mut e = whole();
        let mut disk = Disk::default();
        for i in 0..300 {
            let mut req =
                AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from(format!("b{i}")));
            req.ttl = Some(10);
            assert!(matches!(e.addjob(99, req, 1000), AddJobOutcome::Added(_)));
        }
        disk.run(&mut e, 1000);
        assert_eq!(e.cold_jobs(), 300 - HEAD_WINDOW as u64);
        let reads = e.spill_stats().reads;
        e.tick(20_000);
        e.spill_cron(20_000);
        disk.run(&mut e, 20_000);
        assert_eq!(e.cold_jobs(), 0);
        assert_eq!(e.queue_len(b"q"), 0);
        assert_eq!(e.spill_stats().reads, reads);
        assert_eq!(e.spill_stats().live_bytes, 0);
    }

    #[test]
    fn a_whole_job_whose_ttl_passes_while_it_is_read_back_is_forgotten() {
        let mut e = whole();
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..300 {
            let mut req =
                AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from(format!("b{i}")));
            req.ttl = Some(10);
            let AddJobOutcome::Added(id) = e.addjob(99, req, 1000) else {
                panic!("ADDJOB did not add");
            };
            ids.push(id);
        }
        disk.run(&mut e, 1000);
        let cold = e.cold_jobs();
        let id = ids[250];
        assert!(e.maybe_cold(&id));
        let arg = Bytes::copy_from_slice(&id.0);
        assert!(e.cold_fault(&[&arg[..]]).is_some());
        // The read lands after the job's TTL: it is not registered again,
        // and its ID-index entry goes with it.
        disk.run(&mut e, 20_000);
        assert!(e.lookup(&id).is_none());
        assert!(!e.maybe_cold(&id));
        assert_eq!(e.cold_jobs(), cold - 1);
        assert!(e.maybe_cold(&ids[249]), "its neighbours are still on disk");
    }

    #[test]
    fn a_corrupt_whole_record_drops_only_that_job() {
        let mut e = whole();
        let mut disk = Disk::default();
        for i in 0..200 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        let cold = e.cold_jobs();
        assert!(cold > 0);
        disk.corrupt_reads = true;
        let got = drain(&mut e, &mut disk, b"q", 1001);
        assert_eq!(got.len() as u64, 200 - cold);
        assert_eq!(e.spill_stats().corrupt, cold);
        assert_eq!(e.queue_len(b"q"), 0);
    }

    #[test]
    fn segments_of_mostly_expired_whole_jobs_are_compacted() {
        let mut e = whole();
        e.set_spill_segment_bytes(16 * 1024);
        let mut disk = Disk::default();
        let mut keep = Vec::new();
        for i in 0..1200 {
            let mut req =
                AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from(format!("b{i}")));
            // Every tenth job outlives the others.
            req.ttl = Some(if i % 10 == 0 { 100_000 } else { 10 });
            let AddJobOutcome::Added(id) = e.addjob(99, req, 1000) else {
                panic!("not added");
            };
            if i % 10 == 0 {
                keep.push((i, id));
            }
        }
        disk.run(&mut e, 1000);
        let segs = e.spill_stats().segments;
        assert!(segs > 4, "{segs} segments");
        for t in 0..40 {
            e.tick(20_000 + t * 100);
            e.spill_cron(20_000 + t * 100);
            disk.run(&mut e, 20_000 + t * 100);
        }
        let st = e.spill_stats();
        assert!(st.moved > 0, "no record moved");
        assert!(st.disk_bytes <= 2 * st.live_bytes + 16 * 1024, "{st:?}");
        assert!(st.segments < segs);
        // The stragglers come back, in order, with their bodies.
        let got = drain(&mut e, &mut disk, b"q", 30_000);
        let want: Vec<JobId> = keep
            .iter()
            .filter(|(i, _)| i % 10 == 0)
            .map(|&(_, id)| id)
            .collect();
        let ids: Vec<JobId> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, want);
        for ((_, body), (i, _)) in got.iter().zip(keep.iter().filter(|(i, _)| i % 10 == 0)) {
            assert_eq!(&body[..], format!("b{i}").as_bytes());
        }
    }

    /// The LOADJOB records among the engine's pending AOF records.
    fn loadjobs(e: &mut Engine) -> Vec<JobId> {
        e.take_aof_records()
            .into_iter()
            .filter_map(|r| match r {
                AofRecord::LoadJob(blob) => crate::protocol::job_codec::JobRecord::decode(&blob)
                    .ok()
                    .map(|(r, _)| JobId(r.id)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn with_an_aof_whole_jobs_spill_and_those_that_leave_during_a_rewrite_are_logged_again() {
        let mut e = whole();
        e.aof = true;
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..300 {
            ids.push(add(&mut e, b"q", format!("b{i}"), 1000));
        }
        disk.run(&mut e, 1000);
        let cold = 300 - HEAD_WINDOW as u64;
        assert_eq!(e.cold_jobs(), cold);
        assert_eq!(loadjobs(&mut e).len(), 300, "one LOADJOB per ADDJOB");
        // The snapshot of a rewrite finds every job on disk, in pieces.
        let (first, next) = e.cold_snapshot(0, 100);
        assert_eq!(first.len(), 100);
        let (rest, end) = e.cold_snapshot(next.expect("more to come"), 1000);
        assert_eq!(end, None);
        assert_eq!(first.len() + rest.len(), cold as usize);
        // While a rewrite runs a job that leaves RAM whole, or is read
        // back, is logged again (the snapshot may miss it in both tables).
        e.set_spill_pinned(true);
        let mut pinned = Vec::new();
        for i in 0..300 {
            pinned.push(add(&mut e, b"p", format!("p{i}"), 1001));
        }
        assert_eq!(loadjobs(&mut e).len(), 300, "one LOADJOB per ADDJOB");
        disk.run(&mut e, 1001);
        assert_eq!(e.cold_jobs(), 2 * cold, "jobs still leave whole");
        let mut evicted = loadjobs(&mut e);
        evicted.sort();
        let mut want = pinned[HEAD_WINDOW..].to_vec();
        want.sort();
        assert_eq!(evicted, want, "each job that left RAM logged again");
        let mut got = Vec::new();
        for _ in 0..3 {
            if let GetJobOutcome::Jobs(j) = e.getjob(1, nohang(b"q", 200), 1002) {
                got.extend(j.into_iter().map(|j| j.id));
            }
            disk.run(&mut e, 1002);
        }
        assert!(got.len() > HEAD_WINDOW, "only {} delivered", got.len());
        let relogged = loadjobs(&mut e);
        assert!(!relogged.is_empty());
        for id in &relogged {
            let i = ids.iter().position(|x| x == id).expect("a job of q");
            assert!(i >= HEAD_WINDOW, "job {i} was never on disk");
        }
        // After the rewrite, a job leaving RAM is not logged again.
        e.set_spill_pinned(false);
        for i in 0..300 {
            add(&mut e, b"r", format!("r{i}"), 1003);
        }
        disk.run(&mut e, 1003);
        assert_eq!(loadjobs(&mut e).len(), 300, "the ADDJOBs' alone");
        assert!(e.cold_jobs() >= 3 * cold - relogged.len() as u64);
    }

    #[test]
    fn a_replay_out_of_creation_order_still_leaves_every_job_whole_in_order() {
        let mut e = whole();
        let mut disk = Disk::default();
        // An AOF replay meets a queue's jobs out of order (a rewrite lists
        // the job table in slot order): each still joins its queue's runs,
        // in its place; runs grown past their size split.
        let n = 5000u64;
        let made = replay_shuffled(&mut e, &mut disk, n, |t| t);
        e.set_spill_replay(false);
        assert_eq!(e.cold_jobs(), n - HEAD_WINDOW as u64, "jobs left whole");
        let got = drain(&mut e, &mut disk, b"q", 20_000);
        assert_eq!(got.len() as u64, n);
        for ((t, id), (gid, body)) in made.iter().zip(&got) {
            assert_eq!(gid, id, "job made at {t} out of order");
            assert_eq!(&body[..], format!("b{t}").as_bytes());
        }
    }

    /// The same with creation times days apart (the replay's notes keep
    /// them in four bytes) and a third of the jobs deleted by later
    /// records: the rest come back in order, their queue counting them
    /// alone.
    #[test]
    fn a_replay_over_days_with_deljobs_keeps_order_and_count() {
        let mut e = whole();
        let mut disk = Disk::default();
        // A job a minute or so (ms * 1e6), over four days.
        let day0 = 1_765_000_000_000 * 1_000_000;
        let made = replay_shuffled(&mut e, &mut disk, 6000, |t| day0 + t * 59_981_000_000);
        let mut kept = Vec::new();
        for (k, (t, id)) in made.iter().enumerate() {
            if k % 3 != 1 {
                kept.push((*t, *id));
                continue;
            }
            match e.lookup(id) {
                Some(h) => e.delete_job(h, 20_000),
                None => assert!(e.drop_replayed_cold(id), "{id:?} nowhere"),
            }
        }
        e.set_spill_replay(false);
        assert_eq!(e.queue_len(b"q"), kept.len(), "the queue's count");
        let got = drain(&mut e, &mut disk, b"q", 20_000);
        assert_eq!(got.len(), kept.len());
        for ((t, id), (gid, body)) in kept.iter().zip(&got) {
            assert_eq!(gid, id, "job made at {t} out of order");
            assert_eq!(&body[..], format!("b{t}").as_bytes());
        }
    }

    /// A replay (left running) of `n` queued jobs of queue `q`, met out
    /// of creation order: job `t` (10,000 on) is created at `ctime(t)`.
    /// Their `t` and IDs in creation order.
    fn replay_shuffled(
        e: &mut Engine,
        disk: &mut Disk,
        n: u64,
        ctime: impl Fn(u64) -> u64,
    ) -> Vec<(u64, JobId)> {
        e.set_spill_replay(true);
        let mut made = Vec::new();
        for i in 0..n {
            // From the middle on: some jobs met later are older than the
            // first one.
            let t = 10_000 + (i * 7919 + n / 2) % n;
            made.push((t, load_queued_at(e, t, ctime(t), 20_000)));
            if i % 500 == 0 {
                disk.run(e, 20_000);
            }
        }
        disk.run(e, 20_000);
        made.sort_by_key(|&(t, _)| ctime(t));
        made
    }

    /// What the AOF loader does with a queued job's LOADJOB (created at
    /// `t`, body `b{t}`).
    fn load_queued(e: &mut Engine, t: u64, now: u64) -> JobId {
        load_queued_at(e, t, t, now)
    }

    /// The same, created at `ctime`.
    fn load_queued_at(e: &mut Engine, t: u64, ctime: u64, now: u64) -> JobId {
        let mut id = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-05a1";
        id[28..34].copy_from_slice(format!("{t:06}").as_bytes());
        let mut j = Engine::new_job(JobId(id));
        j.ctime = ctime;
        j.etime = 1_000_000;
        j.retry = 300;
        j.qtime = 1;
        j.queue = Some(crate::domain::job::QueueName::from(&b"q"[..]));
        j.body = Some(crate::domain::job::Body::from(format!("b{t}").as_bytes()));
        let h = e.register_with(j, None).expect("registered");
        assert!(e.enqueue(h, false, now));
        JobId(id)
    }

    /// What the AOF loader does with the LOADJOB of an active job (body
    /// `b{i}`, RETRY 10 s, requeue time 10 s after `now`).
    fn load_active(e: &mut Engine, i: u64, now: u64) -> JobId {
        let mut id = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-05a1";
        id[28..34].copy_from_slice(format!("{i:06}").as_bytes());
        let mut j = Engine::new_job(JobId(id));
        j.ctime = 10_000 + i;
        j.etime = 1_000_000;
        j.retry = 10;
        j.qtime = now + 10_000;
        j.queue = Some(crate::domain::job::QueueName::from(&b"q"[..]));
        j.body = Some(crate::domain::job::Body::from(format!("b{i}").as_bytes()));
        let h = e.register_with(j, None).expect("registered");
        e.update_awake(h, now);
        e.spill_parked(h, now);
        JobId(id)
    }

    /// An engine replaying an AOF with whole jobs, maxmemory 100 MiB,
    /// watermark 50 %, memory as `used` says.
    fn replaying(used: fn() -> usize) -> Engine {
        let mut e = whole();
        e.set_spill(true, 0, 50);
        e.set_memory_limit(100 << 20, crate::engine::memory::Policy::Acks);
        e.set_memory_counter(used);
        e.set_spill_replay(true);
        e
    }

    thread_local! {
        /// Memory as a test sets it: `set_memory_counter` takes a plain
        /// fn, and each test runs its engine on its own thread.
        static TEST_USED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn test_used() -> usize {
        TEST_USED.with(std::cell::Cell::get)
    }

    fn set_test_used(n: usize) {
        TEST_USED.with(|u| u.set(n));
    }

    /// A replay starts under the watermark, so the jobs it meets first
    /// stay in RAM; once memory passes it, they leave between two batches
    /// too, not only after the load when the cron starts.
    #[test]
    fn jobs_a_replay_kept_under_the_watermark_leave_once_it_is_passed() {
        let mut e = replaying(test_used);
        let mut disk = Disk::default();
        let now = 20_000;
        for i in 0..1000 {
            load_active(&mut e, i, now);
        }
        e.spill_replay_backfill(now);
        disk.run(&mut e, now);
        assert_eq!(e.spill_stats().whole_copies, 0, "under the watermark");
        set_test_used(90 << 20);
        for i in 1000..2000 {
            load_active(&mut e, i, now);
            if i % 100 == 99 {
                // The loader's batch ends.
                e.spill_replay_backfill(now);
                disk.run(&mut e, now);
            }
        }
        e.set_spill_replay(false);
        assert_eq!(e.spill_stats().whole_copies, 2000);
        assert_eq!(e.store.len(), 0, "records left in RAM");
    }

    /// The same with the controlled-restart recipe: jobs loaded queued
    /// while under the watermark leave RAM whole between two batches once
    /// it is passed (all but the head window), still in creation order.
    #[test]
    fn queued_jobs_a_replay_kept_under_the_watermark_leave_once_it_is_passed() {
        let mut e = replaying(test_used);
        let mut disk = Disk::default();
        let now = 20_000;
        let n = 2000u64;
        let load = |e: &mut Engine, i: u64| {
            // Out of creation order, as a rewritten file lists them.
            let t = 10_000 + (i * 7919) % n;
            (t, load_queued(e, t, now))
        };
        let mut made: Vec<(u64, JobId)> = (0..n / 2).map(|i| load(&mut e, i)).collect();
        e.spill_replay_backfill(now);
        disk.run(&mut e, now);
        assert_eq!(e.cold_jobs(), 0, "under the watermark");
        set_test_used(90 << 20);
        for i in n / 2..n {
            made.push(load(&mut e, i));
            if i % 100 == 99 {
                // The loader's batch ends.
                e.spill_replay_backfill(now);
                disk.run(&mut e, now);
            }
        }
        e.set_spill_replay(false);
        assert!(
            e.store.len() <= HEAD_WINDOW + 100,
            "{} of {n} jobs still in RAM",
            e.store.len()
        );
        set_test_used(0);
        made.sort();
        let want: Vec<JobId> = made.into_iter().map(|(_, id)| id).collect();
        let got: Vec<JobId> = drain(&mut e, &mut disk, b"q", now)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert!(
            got == want,
            "{} jobs drained, out of creation order",
            got.len()
        );
    }

    /// The loader waits for the disk once the bodies in flight fill what
    /// is left under maxmemory, well before the writes' own cap, and
    /// keeps a floor of a 64th of maxmemory when nothing is left.
    #[test]
    fn a_replay_near_maxmemory_waits_for_the_disk_sooner() {
        let mut e = whole();
        e.set_spill(true, 0, 50);
        let max: u64 = 64 << 20;
        e.set_memory_limit(max, crate::engine::memory::Policy::Acks);
        e.set_memory_counter(test_used);
        set_test_used(40 << 20);
        e.set_spill_replay(true);
        let now = 20_000;
        let mut i = 0;
        while e.spill.pending_bytes < 2 << 20 && i < 200_000 {
            load_active(&mut e, i, now);
            i += 1;
        }
        assert!(e.spill.pending_bytes >= 2 << 20, "{i} jobs loaded");
        assert!(
            !e.spill_backlogged(),
            "24 MiB left under maxmemory: the 4 MiB cap of writes applies"
        );
        set_test_used((max - (1 << 20)) as usize);
        assert!(e.spill_backlogged(), "1 MiB left, 2 MiB in flight");
        set_test_used((max + (8 << 20)) as usize);
        assert!(e.spill_backlogged(), "over maxmemory: the floor");
        e.set_memory_limit(0, crate::engine::memory::Policy::Acks);
        assert!(!e.spill_backlogged(), "no maxmemory: the writes' cap only");
    }

    /// A restart without the controlled-restart recipe brings every job
    /// back active until its retry: plain ones leave RAM whole as the
    /// replay goes (not their bodies alone, whose records would stay), a
    /// later DELJOB still deletes them, and each is queued at its retry
    /// with its body.
    #[test]
    fn jobs_replayed_active_leave_ram_whole_until_their_retry() {
        let mut e = whole();
        let mut disk = Disk::default();
        e.set_spill_replay(true);
        let now = 20_000;
        let n = 3000u64;
        let mut made = Vec::new();
        for i in 0..n {
            made.push(load_active(&mut e, i, now));
            if i % 500 == 0 {
                disk.run(&mut e, now);
            }
        }
        disk.run(&mut e, now);
        // Every third was acknowledged before the crash: its DELJOB
        // follows in the file. A second LOADJOB of a job on disk is
        // recognised as a duplicate.
        for id in made.iter().step_by(3) {
            match e.lookup(id) {
                Some(h) => e.delete_job(h, now),
                None => assert!(
                    e.drop_replayed_cold(id),
                    "{id:?} neither in RAM nor on disk"
                ),
            }
        }
        assert!(e.replayed_cold(&made[1]));
        e.set_spill_replay(false);
        let left = n - n.div_ceil(3);
        assert_eq!(e.spill_stats().whole_copies, left, "jobs whole on disk");
        assert_eq!(e.store.len(), 0, "records left in RAM");
        // Their retry comes: each is read back in time and queued.
        let mut t = now;
        while t < now + 12_000 {
            t += 100;
            e.tick(t);
            disk.run(&mut e, t);
        }
        assert_eq!(e.queue_len(b"q"), left as usize);
        let mut got = drain(&mut e, &mut disk, b"q", t);
        got.sort_by_key(|(id, _)| *id);
        let want: Vec<(JobId, Bytes)> = (0..n)
            .filter(|i| i % 3 != 0)
            .map(|i| (made[i as usize], Bytes::from(format!("b{i}"))))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_blocked_getjob_is_served_when_the_page_in_lands() {
        let mut e = engine();
        let mut disk = Disk::default();
        for i in 0..300 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        // Take the whole head window without letting the disk answer:
        // the NOHANG that finds the head on disk waits for it too.
        let mut taken = 0;
        let last = loop {
            match e.getjob(1, nohang(b"q", 1), 1001) {
                GetJobOutcome::Jobs(j) => taken += j.len(),
                other => break other,
            }
        };
        assert!(matches!(last, GetJobOutcome::Blocked));
        assert!(taken >= HEAD_WINDOW, "only {taken} resident");
        let req = GetJobRequest {
            nohang: false,
            ..nohang(b"q", 1)
        };
        assert!(matches!(e.getjob(7, req, 1002), GetJobOutcome::Blocked));
        assert!(e.take_wakes().is_empty());
        disk.run(&mut e, 1003);
        let wakes = e.take_wakes();
        let [(1, Wake::Jobs(first)), (7, Wake::Jobs(second))] = &wakes[..] else {
            panic!("unexpected wakes {wakes:?}");
        };
        assert_eq!(
            first[0].body.as_deref(),
            Some(format!("b{taken}").as_bytes())
        );
        assert_eq!(
            second[0].body.as_deref(),
            Some(format!("b{}", taken + 1).as_bytes())
        );
    }

    #[test]
    fn nohang_waits_only_for_heads_on_disk_and_not_past_its_bound() {
        let mut e = engine();
        let mut disk = Disk::default();
        for i in 0..300 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        // Nothing queued in `empty`: NOHANG answers at once although
        // this node holds jobs on disk.
        let empty = GetJobRequest {
            queues: vec![Bytes::from_static(b"empty")],
            ..nohang(b"q", 1)
        };
        assert!(matches!(e.getjob(1, empty, 1001), GetJobOutcome::NoJobs));
        while let GetJobOutcome::Jobs(_) = e.getjob(1, nohang(b"q", 1), 1001) {}
        // The head's read fails for good: the NOHANG ends empty at its
        // bound, not before.
        disk.io_fail_reads = 1_000;
        disk.run(&mut e, 1002);
        let bound = 1001 + super::super::getjob::NOHANG_DISK_WAIT_MS;
        e.expire_waiters(bound);
        assert!(e.take_wakes().is_empty());
        e.expire_waiters(bound + 1);
        let wakes = e.take_wakes();
        assert!(matches!(&wakes[..], [(1, Wake::NoJobs)]), "{wakes:?}");
        assert!(e.queue_len(b"q") > 0);
    }

    #[test]
    fn acked_and_deleted_jobs_free_whole_segments() {
        let (mut e, mut disk, ids) = backlog_on_disk(4096, 400);
        assert!(e.spill_stats().segments > 3);
        // Acknowledge every spilled job: no live record is left.
        e.ackjob(&ids[HEAD_WINDOW..], 1001);
        for id in &ids[HEAD_WINDOW..] {
            if let Some(h) = e.lookup(id) {
                e.delete_job(h, 1001);
            }
        }
        e.spill_cron(1002);
        disk.run(&mut e, 1002);
        let st = e.spill_stats();
        assert_eq!(st.jobs, 0);
        assert_eq!(st.live_bytes, 0);
        // Only the segment still being appended to remains.
        assert!(st.segments <= 1, "{st:?}");
        assert!(!disk.unlinked.is_empty());
    }

    #[test]
    fn mostly_dead_segments_are_compacted_and_freed() {
        let (mut e, mut disk, ids) = backlog_on_disk(8192, 800);
        // Keep one straggler in every 20 jobs: every segment is mostly dead.
        let gone = delete_spilled(&mut e, &ids, |i| i % 20 != 0);
        let before = e.spill_stats();
        compact_for_two_seconds(&mut e, &mut disk);
        let after = e.spill_stats();
        assert!(after.compactions > 0 && after.moved > 0, "{after:?}");
        assert!(
            after.disk_bytes <= 2 * after.live_bytes.max(8192),
            "{before:?} -> {after:?}"
        );
        // The stragglers still come back intact.
        let got = drain(&mut e, &mut disk, b"q", 1100);
        let want: Vec<JobId> = ids
            .iter()
            .filter(|id| !gone.contains(id))
            .copied()
            .collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), want);
        for (id, body) in got {
            let i = ids.iter().position(|x| *x == id).expect("known");
            assert_eq!(&body[..], format!("{i:0>100}").as_bytes());
        }
    }

    #[test]
    fn segments_just_over_half_live_are_compacted_once_the_tier_passes_1_6x() {
        let (mut e, mut disk, ids) = backlog_on_disk(8192, 800);
        // 9 jobs in every 20 go: each segment stays 55 % live, none half
        // dead, and the tier holds 1.8x its live bytes.
        let gone = delete_spilled(&mut e, &ids, |i| i % 20 < 9);
        let before = e.spill_stats();
        assert!(before.disk_bytes * 5 > before.live_bytes * 8, "{before:?}");
        compact_for_two_seconds(&mut e, &mut disk);
        let after = e.spill_stats();
        assert!(after.compactions > 0, "{after:?}");
        assert!(
            after.disk_bytes * 5 <= after.live_bytes.max(8192) * 8,
            "{before:?} -> {after:?}"
        );
        let got = drain(&mut e, &mut disk, b"q", 3700);
        assert_eq!(got.len(), ids.len() - gone.len());
    }

    #[test]
    fn a_segment_consumers_are_draining_is_left_to_them() {
        let (mut e, mut disk, ids) = backlog_on_disk(8192, 800);
        e.spill_cron(1001);
        // Consumers take the oldest spilled jobs: the first segments die
        // whole, the next one is past half dead and still shrinking.
        let per_seg = 8192 / (RECORD_HEADER as usize + 100);
        for id in &ids[HEAD_WINDOW..HEAD_WINDOW + 4 * per_seg + per_seg * 3 / 4] {
            let h = e.lookup(id).expect("job");
            e.delete_job(h, 1002);
        }
        for t in [1050, 1102] {
            e.spill_cron(t);
            disk.run(&mut e, t);
            assert_eq!(e.spill_stats().compactions, 0, "compacted at {t}");
        }
        // Consumers stopped: the segment is a straggler's now.
        e.spill_cron(1203);
        disk.run(&mut e, 1203);
        assert!(e.spill_stats().compactions > 0);
        let got = drain(&mut e, &mut disk, b"q", 1300);
        assert_eq!(got.len(), 800 - 4 * per_seg - per_seg * 3 / 4);
    }

    #[test]
    fn the_backfill_leaves_a_consumed_queue_its_prefetched_jobs() {
        let mut e = engine();
        e.set_spill(false, 0, 0);
        let mut disk = Disk::default();
        for i in 0..2000 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        e.set_spill(true, 0, 0);
        e.spill_cron(1001);
        disk.run(&mut e, 1001);
        let spilled = e.spill_stats().jobs;
        assert_eq!(spilled, 2000 - HEAD_WINDOW as u64);
        // A consumer: the prefetch reads four windows back.
        for _ in 0..8 {
            assert!(matches!(
                e.getjob(1, nohang(b"q", 10), 1050),
                GetJobOutcome::Jobs(_)
            ));
            disk.run(&mut e, 1050);
        }
        let after_prefetch = e.spill_stats().jobs;
        assert!(
            after_prefetch < spilled - HEAD_WINDOW as u64,
            "{after_prefetch}"
        );
        // The next crons leave them in RAM for the consumer (the backfill
        // starts over once it has reached the queue's end)...
        for t in [1060, 1070] {
            e.spill_cron(t);
            disk.run(&mut e, t);
        }
        assert_eq!(e.spill_stats().jobs, after_prefetch);
        // ...until the queue has not been consumed for a cron period.
        for t in [1110, 1120, 1130] {
            e.spill_cron(t);
            disk.run(&mut e, t);
        }
        assert!(e.spill_stats().jobs > after_prefetch);
    }

    #[test]
    fn compaction_walks_the_location_table_across_runs() {
        let (mut e, mut disk, ids) = backlog_on_disk(8192, 800);
        e.spill.compact_scan = 50;
        // One straggler in every 10 jobs: every sealed segment is mostly
        // dead, and its stragglers are spread over the whole table.
        let keep: Vec<JobId> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < HEAD_WINDOW || (i - HEAD_WINDOW).is_multiple_of(10))
            .map(|(_, id)| *id)
            .collect();
        for id in &ids {
            if !keep.contains(id) {
                let h = e.lookup(id).expect("job");
                e.delete_job(h, 1001);
            }
        }
        // A run walks 50 handles: it takes several to empty a segment.
        e.spill_cron(1002);
        disk.run(&mut e, 1002);
        assert!(e.spill.compacting.is_some());
        for t in 0..400 {
            e.spill_cron(1102 + 100 * t);
            disk.run(&mut e, 1102 + 100 * t);
        }
        let st = e.spill_stats();
        assert!(st.moved > 0 && st.unlinked > 0, "{st:?}");
        assert!(st.disk_bytes <= 2 * st.live_bytes.max(8192), "{st:?}");
        assert_eq!(st.jobs as usize, keep.len() - HEAD_WINDOW);
        let got = drain(&mut e, &mut disk, b"q", 2000);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), keep);
        for (id, body) in got {
            let i = ids.iter().position(|x| *x == id).expect("known");
            assert_eq!(&body[..], format!("{i:0>100}").as_bytes());
        }
    }

    #[test]
    fn a_corrupt_record_is_counted_and_never_served() {
        let mut e = engine();
        let mut disk = Disk::default();
        for i in 0..200 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        disk.corrupt_reads = true;
        let got = drain(&mut e, &mut disk, b"q", 1001);
        // The resident head is served; the corrupt ones are dropped here.
        assert_eq!(got.len(), HEAD_WINDOW);
        for (i, (_, body)) in got.iter().enumerate() {
            assert_eq!(&body[..], format!("b{i}").as_bytes());
        }
        let st = e.spill_stats();
        assert_eq!(st.corrupt, 200 - HEAD_WINDOW as u64);
        assert_eq!(e.queue_len(b"q"), 0);
    }

    #[test]
    fn a_failed_write_keeps_bodies_in_ram_and_pauses_spilling() {
        let mut e = engine();
        let mut disk = Disk {
            fail_writes: true,
            ..Disk::default()
        };
        for i in 0..200 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        let st = e.spill_stats();
        assert_eq!(st.jobs, 0);
        assert_eq!(st.fault, Some(SpillFault::DiskFull));
        assert!(st.write_errors > 0);
        // Nothing more is spilled while the fault lasts.
        add(&mut e, b"q", "more".into(), 1001);
        assert!(e.take_spill_ops().is_empty());
        // After the back-off, spilling resumes.
        disk.fail_writes = false;
        e.spill_cron(1000 + FAULT_BACKOFF_MS + 1);
        disk.run(&mut e, 1000 + FAULT_BACKOFF_MS + 1);
        assert!(e.spill_stats().jobs > 0);
        assert_eq!(e.spill_stats().fault, None);
        let got = drain(&mut e, &mut disk, b"q", 20_000);
        assert_eq!(got.len(), 201);
    }

    #[test]
    fn the_disk_budget_caps_spilling() {
        let mut e = engine();
        e.set_spill(true, 10 * (RECORD_HEADER + 3), 0);
        let mut disk = Disk::default();
        for i in 0..300 {
            add(&mut e, b"q", format!("{i:0>3}"), 1000);
        }
        disk.run(&mut e, 1000);
        let st = e.spill_stats();
        assert_eq!(st.jobs, 10);
        assert!(st.disk_budget_full);
    }

    #[test]
    fn backfill_spills_an_existing_backlog_once_spilling_starts() {
        let mut e = engine();
        e.set_spill(false, 0, 0);
        let mut disk = Disk::default();
        for i in 0..500 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        assert!(e.take_spill_ops().is_empty());
        e.set_spill(true, 0, 0);
        e.spill_cron(1001);
        disk.run(&mut e, 1001);
        assert_eq!(e.spill_stats().jobs, 500 - HEAD_WINDOW as u64);
        let got = drain(&mut e, &mut disk, b"q", 1002);
        assert_eq!(got.len(), 500);
    }

    #[test]
    fn a_compaction_under_way_keeps_its_segment_although_its_copies_drain_it() {
        let (mut e, mut disk, ids) = backlog_on_disk(65536, 2000);
        // Nine jobs in every 20 stay: every sealed segment is just under
        // half live, and a pass takes several runs of 256 handles.
        e.spill.compact_scan = 256;
        for (i, id) in ids.iter().enumerate().skip(HEAD_WINDOW) {
            if i % 20 >= 9 {
                let h = e.lookup(id).expect("job");
                e.delete_job(h, 1001);
            }
        }
        e.spill_cron(1001);
        disk.run(&mut e, 1001);
        let (seg, _) = e.spill.compacting.expect("a pass started");
        // Each run's copies take more than a twentieth of the segment: the
        // draining test must not stop the pass for another segment.
        let mut t = 1101;
        while e.spill.segs.get(&seg).is_some_and(|s| s.live > 0) {
            let now_seg = e.spill.compacting.map(|c| c.0);
            assert_eq!(now_seg, Some(seg), "the pass moved on at {t}");
            e.spill_cron(t);
            disk.run(&mut e, t);
            t += 100;
            assert!(t < 3000, "the pass never ended");
        }
    }

    #[test]
    fn a_backfill_larger_than_one_run_continues_a_millisecond_later() {
        let mut e = engine();
        e.set_spill(false, 0, 0);
        let mut disk = Disk::default();
        let n = HEAD_WINDOW + CRON_BUDGET + 100;
        for i in 0..n {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        e.set_spill(true, 0, 0);
        e.spill_cron(1001);
        disk.run(&mut e, 1001);
        // One run spills its budget and asks for the next run at once,
        // not after the 100 ms cron.
        assert_eq!(e.spill_stats().jobs, CRON_BUDGET as u64);
        assert_eq!(e.next_deadline(), Some(1002));
        e.tick(1002);
        disk.run(&mut e, 1002);
        assert_eq!(e.spill_stats().jobs, (n - HEAD_WINDOW) as u64);
        // Nothing left: no early run is asked for.
        e.tick(1003);
        assert_eq!(e.spill_due(), None);
    }

    #[test]
    fn a_dead_letter_move_of_a_spilled_job_logs_its_real_body() {
        use crate::engine::AofRecord;
        let mut e = engine();
        e.set_aof_records(true);
        let mut disk = Disk::default();
        let mut ids = Vec::new();
        for i in 0..200 {
            let mut req = AddJobRequest::new(
                Bytes::from_static(b"q"),
                Bytes::from(format!("body-{i:04}")),
            );
            req.ext = Some(Box::new(crate::domain::job_ext::JobExt {
                max_deliveries: 1,
                ..Default::default()
            }));
            let AddJobOutcome::Added(id) = e.addjob(99, req, 1000) else {
                panic!("ADDJOB did not add");
            };
            ids.push(id);
        }
        disk.run(&mut e, 1000);
        e.take_aof_records();
        let id = ids[199];
        let h = e.lookup(&id).expect("job");
        assert!(e.spilled_body(h).is_some());
        assert!(e.dead_letter(h, 1001));
        // Nothing written yet: an empty body must never reach the AOF.
        assert!(e.take_aof_records().is_empty());
        disk.run(&mut e, 1002);
        let recs = e.take_aof_records();
        assert_eq!(recs.len(), 2, "{recs:?}");
        assert_eq!(recs[0], AofRecord::DelJob(id));
        let AofRecord::LoadJob(blob) = &recs[1] else {
            panic!("{recs:?}");
        };
        let needle = b"body-0199";
        assert!(blob.windows(needle.len()).any(|w| w == needle));
        assert!(blob.windows(5).any(|w| w == b":dead"));
    }

    #[test]
    fn a_failed_page_in_is_retried_for_a_waiting_client() {
        let mut e = engine();
        let mut disk = Disk::default();
        for i in 0..300 {
            add(&mut e, b"q", format!("b{i}"), 1000);
        }
        disk.run(&mut e, 1000);
        while let GetJobOutcome::Jobs(_) = e.getjob(1, nohang(b"q", 1), 1001) {}
        disk.io_fail_reads = 1_000;
        let req = GetJobRequest {
            nohang: false,
            ..nohang(b"q", 1)
        };
        assert!(matches!(e.getjob(7, req, 1002), GetJobOutcome::Blocked));
        disk.run(&mut e, 1003);
        assert!(e.take_wakes().is_empty());
        assert!(e.spill_stats().read_errors > 0);
        // The disk recovers; the cron asks again and both clients (the
        // NOHANG that found the head on disk first) are served.
        disk.io_fail_reads = 0;
        e.spill_cron(1100);
        disk.run(&mut e, 1100);
        let wakes = e.take_wakes();
        let served = |c: super::super::ClientId| {
            wakes.iter().any(|(w, k)| {
                *w == c && matches!(k, Wake::Jobs(j) if j.len() == 1 && j[0].body.is_some())
            })
        };
        assert!(served(1) && served(7) && wakes.len() == 2, "{wakes:?}");
    }
}
