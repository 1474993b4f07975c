//! The node's side of persistence (docs/PERSISTENCE.md): it numbers
//! records, hands them to
//! the writer in engine order, drives chunked snapshots for rewrites, and
//! keeps `node.aof` (INFO, MISCONF) in step with what the writer reports.
//! Every function here runs on the owner thread and never touches the
//! disk itself, except the documented blocking paths (startup, SHUTDOWN
//! REWRITE-AOF, DEBUG LOADAOF) where stalling the node is the point.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Node;
use crate::aof::reclaim::Reclaim;
use crate::aof::writer::{self, Msg, OnDisk, Writer};
use crate::aof::{loader, reader, AofError, SyncWait};
use crate::config::AppendFsync;
use crate::domain::job::JobState;
use crate::engine::records::with_storage_record;
use crate::engine::AofRecord;
use crate::errors::WireError;

/// Slots of the job table snapshotted per owner task during a
/// background rewrite, and the byte budget of one chunk: small enough that
/// a node with millions of jobs is never stalled for long.
const CHUNK_SLOTS: usize = 4096;
const CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// Spilled jobs per `RewriteSpilled` piece: the writer reads their bodies
/// back in one go, and records queued behind the piece wait for it.
const SPILLED_PER_PIECE: usize = 512;
/// Snapshot pieces the writer may have queued before the snapshot waits.
const MAX_QUEUED_PIECES: u64 = 4;
/// How long a synchronous writer request may take (full rewrite of a big
/// node included) before we give up and report an error.
const SYNC_TIMEOUT: Duration = Duration::from_secs(600);
/// Delay before retrying a failed rewrite needed to switch the AOF on.
const REWRITE_RETRY_MS: u64 = 5000;

/// Whether records are appended to the AOF (INFO `aof_enabled`, dispatch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AofState {
    Off,
    On,
    /// `CONFIG SET appendonly yes`: on once the rewrite that creates the
    /// file finishes.
    WaitRewrite,
}

impl AofState {
    /// INFO `aof_state`.
    pub fn name(self) -> &'static str {
        match self {
            AofState::Off => "off",
            AofState::On => "on",
            AofState::WaitRewrite => "wait-rewrite",
        }
    }
}

/// AOF status as seen by INFO and dispatch.
pub struct AofStatus {
    pub state: AofState,
    pub last_write_error: Option<AofError>,
    /// An fsync failed and no rewrite has replaced the file since.
    pub fsync_failed: bool,
    pub rewrite_in_progress: bool,
    pub rewrite_scheduled: bool,
    pub last_rewrite_ok: bool,
    pub last_rewrite_time_sec: i64,
    pub rewrite_start: Option<u64>,
    pub current_size: u64,
    pub base_size: u64,
    /// Set while the AOF is being loaded: commands get `-LOADING`.
    pub loading: Option<LoadingStatus>,
}

/// INFO's loading_* fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadingStatus {
    /// Unix seconds.
    pub start_time: u64,
    pub total_bytes: u64,
    pub loaded_bytes: u64,
}

impl Default for AofStatus {
    fn default() -> Self {
        AofStatus {
            state: AofState::Off,
            last_write_error: None,
            fsync_failed: false,
            rewrite_in_progress: false,
            rewrite_scheduled: false,
            last_rewrite_ok: true,
            last_rewrite_time_sec: -1,
            rewrite_start: None,
            current_size: 0,
            base_size: 0,
            loading: None,
        }
    }
}

/// The next piece of a rewrite's snapshot: the job table from a slot,
/// then the whole jobs on disk from a slot of their table.
#[derive(Clone, Copy)]
enum Cursor {
    Jobs(usize),
    Cold(u32),
}

/// The node's AOF machinery (the `aof_writer` field of `Node`).
pub struct Aof {
    writer: Writer,
    /// Sequence number the next record gets (the first is 1).
    next_seq: u64,
    /// Where a background rewrite's snapshot goes on from.
    snapshot: Option<Cursor>,
    /// Wakes the AOF task (chunked rewrite started).
    kick: Arc<Notify>,
    retry_rewrite_at: u64,
    /// Records were queued since the last `take_flusher`.
    flush_due: bool,
    /// What a rewrite of the current file would drop (estimate).
    reclaim: Reclaim,
}

impl Aof {
    /// Bytes handed to the writer but not yet written (INFO aof_buffer_length).
    pub fn backlog(&self) -> u64 {
        self.writer.published.backlog.load(Ordering::Relaxed)
    }
}

fn aof_path(node: &Node) -> PathBuf {
    // The process runs in `dir`, and appendfilename is a bare file name.
    PathBuf::from(&node.config.appendfilename)
}

/// Records are produced while AOF is on or a rewrite needs to capture them.
fn sync_engine_flag(node: &mut Node) {
    node.engine
        .set_aof_records(node.aof.state != AofState::Off || node.aof.rewrite_in_progress);
}

/// Whether the node loads an AOF at startup.
pub fn loads_aof(node: &Node) -> bool {
    node.config.appendonly || node.config.aof_enqueue_jobs_once
}

/// Open the AOF to load, if this configuration loads one (None: nothing
/// to load). Replaying must not append, so the engine's AOF flag is off.
pub fn begin_load(node: &mut Node) -> Result<Option<loader::FileLoad>, AofError> {
    if !loads_aof(node) {
        return Ok(None);
    }
    node.engine.set_aof_records(false);
    node.engine.set_spill_replay(true);
    let opts = loader::LoadOptions {
        truncated_ok: node.config.aof_load_truncated,
        enqueue: node.config.aof_enqueue_jobs_once,
    };
    loader::FileLoad::open(&aof_path(node), opts)
}

/// After loading (`loaded` is None when nothing was read): log, reset
/// aof-enqueue-jobs-once, start the writer.
pub fn finish_load(
    node: &mut Node,
    loaded: Option<loader::Loaded>,
    started: std::time::Instant,
) -> Result<(), AofError> {
    node.engine.set_spill_replay(false);
    let path = aof_path(node);
    let enqueue = node.config.aof_enqueue_jobs_once;
    let mut loaded_size = 0;
    let (mut loaded_records, mut loaded_jobs) = (0, 0);
    if node.config.appendonly || enqueue {
        let l = loaded.unwrap_or_default();
        tracing::info!(
            jobs = l.jobs,
            records = l.records,
            bytes = l.size,
            "DB loaded from append only file: {:.3} seconds",
            started.elapsed().as_secs_f64()
        );
        loaded_size = l.size;
        loaded_records = l.records;
        loaded_jobs = l.jobs as u64;
        // The "once" in aof-enqueue-jobs-once: a later restart must not
        // re-queue (and so re-deliver) the same jobs again.
        if enqueue && node.config.config_file.is_some() {
            node.config.aof_enqueue_jobs_once = false;
            match node.config.rewrite() {
                Ok(()) => {
                    tracing::info!("aof-enqueue-jobs-once switched to no in the config file.")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Could not rewrite the config file to reset aof-enqueue-jobs-once.")
                }
            }
        }
    }
    let writer = Writer::start(path, node.config.appendfsync, node.config.appendonly)?;
    node.aof.state = if node.config.appendonly {
        AofState::On
    } else {
        AofState::Off
    };
    node.aof.base_size = loaded_size;
    node.aof.current_size = writer.published.current_size.load(Ordering::Relaxed);
    let reclaim = Reclaim::after_load(
        loaded_size,
        loaded_records,
        loaded_jobs,
        node.engine.aof_relogs(),
    );
    node.aof_writer = Some(Aof {
        writer,
        next_seq: 1,
        snapshot: None,
        kick: Arc::new(Notify::new()),
        retry_rewrite_at: 0,
        flush_due: false,
        reclaim,
    });
    sync_engine_flag(node);
    Ok(())
}

/// Hand records to the writer (called on the owner thread, in engine order).
pub fn dispatch(node: &mut Node, recs: Vec<AofRecord>, now: u64) {
    let Some(aof) = &mut node.aof_writer else {
        return;
    };
    if !recs.is_empty() {
        let first_seq = aof.next_seq;
        aof.next_seq += recs.len() as u64;
        aof.reclaim.appended(&recs, node.engine.aof_relogs());
        aof.writer.send(Msg::Records { first_seq, recs });
        aof.flush_due = true;
    }
    let p = &aof.writer.published;
    node.aof.current_size = p.current_size.load(Ordering::Relaxed);
    if let Some(report) = p.take_report() {
        node.aof.last_write_error = report.write_error;
        if report.fsync_failed && !node.aof.fsync_failed {
            // The file may have lost what the kernel failed to write: a
            // rewrite from memory replaces it (retried until it succeeds,
            // MISCONF until then).
            tracing::warn!("AOF fsync failed: rewriting the AOF from memory.");
            node.aof.rewrite_scheduled = true;
            aof.retry_rewrite_at = now;
        }
        node.aof.fsync_failed = report.fsync_failed;
        if let Some(r) = report.rewrite {
            rewrite_done(node, r, now);
        }
    }
}

/// Pick up what the writer reported (a write error, a finished rewrite)
/// now rather than at the next cron: called before each write command so
/// -MISCONF starts with the first command after a failure.
pub fn poll_writer(node: &mut Node, now: u64) {
    dispatch(node, Vec::new(), now);
}

/// The wait a connection must complete before writing the replies of the
/// batch that is about to be drained (None when it produced no record).
pub fn pending_sync(node: &Node) -> Option<SyncWait> {
    let n = node.engine.pending_aof_records() as u64;
    if n == 0 {
        return None;
    }
    let aof = node.aof_writer.as_ref()?;
    Some(wait_for(node, aof, aof.next_seq + n - 1))
}

/// `always` waits for fsync; `everysec` and `no` wait until the records
/// were handed to the kernel, so a reply never precedes its record and a
/// process crash (kill -9) right after a reply loses nothing (docs/PERSISTENCE.md).
fn wait_for(node: &Node, aof: &Aof, seq: u64) -> SyncWait {
    if node.config.appendfsync == AppendFsync::Always {
        aof.writer.sync_wait(seq)
    } else {
        aof.writer.write_wait(seq)
    }
}

/// A wait covering every record produced so far. Used for replies that
/// were produced by another call (a blocked ADDJOB answered when
/// replication completed) and for bus acknowledgements such as GOTJOB,
/// which must not leave before the replica's record is written (durable
/// with `always`).
pub fn produced_sync(node: &Node) -> Option<SyncWait> {
    if !node.engine.aof_records() {
        return None;
    }
    let aof = node.aof_writer.as_ref()?;
    let last = aof.next_seq - 1 + node.engine.pending_aof_records() as u64;
    (last > 0).then(|| wait_for(node, aof, last))
}

/// The duty to write the records queued during this owner turn: the owner
/// runs it at the end of the turn, before releasing any reply that
/// waits for them (so the wait is normally already over; Disque likewise
/// writes its AOF buffer before replying).
pub fn take_flusher(node: &mut Node) -> Option<writer::Flusher> {
    let aof = node.aof_writer.as_mut()?;
    if !std::mem::take(&mut aof.flush_due) {
        return None;
    }
    Some(aof.writer.flusher())
}

/// What the AOF task should do after a `cron` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshot {
    /// Nothing pending: the next call is due in 100 ms.
    Idle,
    /// A snapshot is in progress: call again at once.
    More,
    /// A snapshot is in progress and the writer is behind: call again soon.
    WriterBehind,
}

/// Periodic work (the AOF task calls it every 100 ms, and back to back
/// while a snapshot is in progress): pick up writer reports, produce the
/// next snapshot chunk, start automatic rewrites.
pub fn cron(node: &mut Node, now: u64) -> Snapshot {
    dispatch(node, Vec::new(), now);
    let step = snapshot_step(node);
    if step != Snapshot::Idle {
        return step;
    }
    let a = &node.aof;
    if a.rewrite_in_progress {
        return Snapshot::Idle;
    }
    if a.rewrite_scheduled {
        let due = node
            .aof_writer
            .as_ref()
            .is_some_and(|w| now >= w.retry_rewrite_at);
        if due {
            node.aof.rewrite_scheduled = false;
            if let Err(e) = start_rewrite(node, now) {
                tracing::warn!(error = %e, "Could not start the scheduled AOF rewrite.");
            }
        }
        return Snapshot::Idle;
    }
    let pct = node.config.auto_aof_rewrite_percentage;
    if a.state == AofState::On && pct > 0 && a.current_size > node.config.auto_aof_rewrite_min_size
    {
        let base = a.base_size.max(1);
        let growth = a.current_size.saturating_sub(base) * 100 / base;
        let min_reclaim = node.config.auto_aof_rewrite_min_reclaim;
        let worth = node
            .aof_writer
            .as_ref()
            .is_none_or(|w| w.reclaim.worth_rewriting(a.current_size, min_reclaim));
        if a.current_size > base && growth >= pct && worth {
            tracing::info!(growth_pct = growth, "Starting automatic rewriting of AOF.");
            if let Err(e) = start_rewrite(node, now) {
                tracing::warn!(error = %e, "Could not start the automatic AOF rewrite.");
            }
        }
    }
    Snapshot::Idle
}

/// One snapshot chunk: LOADJOB for every active/queued job in the next
/// slots of the job table. Jobs created in slots already passed are
/// covered by the records captured since the rewrite began.
fn snapshot_step(node: &mut Node) -> Snapshot {
    let Some(aof) = &mut node.aof_writer else {
        return Snapshot::Idle;
    };
    let Some(cursor) = aof.snapshot else {
        return Snapshot::Idle;
    };
    let queued = aof.writer.published.rewrite_pieces.load(Ordering::Relaxed);
    if queued >= MAX_QUEUED_PIECES {
        return Snapshot::WriterBehind;
    }
    let next = snapshot_piece(&node.engine, &aof.writer, node.spill.io.as_ref(), cursor);
    aof.snapshot = next;
    if next.is_none() {
        aof.writer.send(Msg::RewriteFinish { done: None });
        Snapshot::Idle
    } else {
        Snapshot::More
    }
}

/// Queue the snapshot's piece at `cursor`; where the next one starts
/// (None: the snapshot is complete).
fn snapshot_piece(
    engine: &crate::engine::Engine,
    writer: &writer::Writer,
    io: Option<&crate::spill::SpillIo>,
    cursor: Cursor,
) -> Option<Cursor> {
    match cursor {
        Cursor::Jobs(from) => {
            let (chunk, next, spilled) = encode_chunk(engine, from);
            send_chunk(writer, io, chunk, spilled);
            if next < engine.store().slots() {
                Some(Cursor::Jobs(next))
            } else if engine.cold_jobs() > 0 {
                Some(Cursor::Cold(0))
            } else {
                None
            }
        }
        Cursor::Cold(from) => {
            let (locs, next) = engine.cold_snapshot(from, CHUNK_SLOTS);
            let whole = locs.into_iter().map(OnDisk::Whole).collect();
            send_chunk(writer, io, Vec::new(), whole);
            next.map(Cursor::Cold)
        }
    }
}

/// Queue one chunk of the snapshot: the resident jobs' records, and the
/// spilled ones in pieces, in the order of their bodies on disk, for the
/// writer thread to read back (never the owner).
fn send_chunk(
    writer: &writer::Writer,
    io: Option<&crate::spill::SpillIo>,
    chunk: Vec<u8>,
    mut spilled: Vec<OnDisk>,
) {
    if !chunk.is_empty() {
        writer.send(Msg::RewriteChunk(chunk));
    }
    let Some(io) = io.filter(|_| !spilled.is_empty()) else {
        return;
    };
    spilled.sort_unstable_by_key(|j| {
        let loc = j.loc();
        (loc.seg, loc.off)
    });
    while !spilled.is_empty() {
        let rest = spilled.split_off(spilled.len().min(SPILLED_PER_PIECE));
        writer.send(Msg::RewriteSpilled {
            dir: io.dir().to_path_buf(),
            jobs: std::mem::replace(&mut spilled, rest),
        });
    }
}

/// Every live DEDUP key as AOF records.
fn encode_dedup_keys(engine: &crate::engine::Engine) -> Vec<u8> {
    let mut out = Vec::new();
    for payload in engine.dedup_snapshot() {
        reader::encode_record(&crate::engine::AofRecord::Dedup(payload), &mut out);
    }
    for payload in engine.batch_snapshot() {
        reader::encode_record(&crate::engine::AofRecord::Batch(payload), &mut out);
    }
    for payload in engine.schedule_snapshot() {
        reader::encode_record(&crate::engine::AofRecord::Schedule(payload), &mut out);
    }
    out
}

/// Encode the live jobs of slots `from..` up to the chunk budget; returns
/// the bytes, the next slot to visit, and the jobs whose body is spilled.
fn encode_chunk(engine: &crate::engine::Engine, from: usize) -> (Vec<u8>, usize, Vec<OnDisk>) {
    // Room for a chunk of small jobs up front: grown by doubling, the
    // chunk was copied once more on the way (realloc, 1 % of the server's
    // samples under pipelined ADDJOBs with rewrites, run AR).
    let mut out = Vec::with_capacity(CHUNK_BYTES.min(CHUNK_SLOTS * 512));
    let mut spilled = Vec::new();
    let mut next = (from + CHUNK_SLOTS).min(engine.store().slots());
    for (h, j) in engine.store().iter_from(from) {
        let ext = engine.ext_of(h);
        let h = h as usize;
        if h >= next {
            break;
        }
        if matches!(j.state, JobState::Active | JobState::Queued) {
            if let Some((_, loc)) = engine.spilled_body(h as u32) {
                let flavor = crate::engine::records::Flavor::Storage;
                if let Some(rec) = engine.job_record(h as u32, flavor, 0) {
                    spilled.push(OnDisk::Body(rec, loc));
                }
                continue;
            }
            // Straight into the chunk: a rewrite snapshots every job on
            // the owner thread (15 % of its samples under pipelined
            // ADDJOBs with the AOF on, run AQ, when each job got a buffer
            // of its own first).
            with_storage_record(j, ext, engine.cluster(), |rec| {
                reader::encode_loadjob_with(rec.encoded_len(), &mut out, |o| rec.put(o));
            });
        }
        if out.len() >= CHUNK_BYTES {
            next = h + 1;
            break;
        }
    }
    (out, next, spilled)
}

/// Start a background rewrite (BGREWRITEAOF, automatic, appendonly yes).
pub fn start_rewrite(node: &mut Node, now: u64) -> Result<(), AofError> {
    if node.aof.rewrite_in_progress {
        return Err(AofError::RewriteInProgress);
    }
    let incremental_fsync = node.config.aof_rewrite_incremental_fsync;
    let Some(aof) = &mut node.aof_writer else {
        return Err(AofError::WriterGone);
    };
    // Records still pending from this batch arrive after RewriteBegin and
    // land in the captured diff as well: harmless, replay is idempotent
    // for them (duplicate LOADJOBs are ignored, DELJOB of a missing job too).
    aof.writer.send(Msg::RewriteBegin { incremental_fsync });
    // DEDUP keys outlive their jobs, so the snapshot carries them too.
    let keys = encode_dedup_keys(&node.engine);
    if !keys.is_empty() {
        aof.writer.send(Msg::RewriteChunk(keys));
    }
    aof.snapshot = Some(Cursor::Jobs(0));
    aof.reclaim.rewrite_began();
    aof.kick.notify_one();
    // The snapshot reads spilled bodies from the segments: keep them.
    node.engine.set_spill_pinned(true);
    node.aof.rewrite_in_progress = true;
    node.aof.rewrite_scheduled = false;
    node.aof.rewrite_start = Some(now);
    sync_engine_flag(node);
    tracing::info!("Background append only file rewriting started.");
    Ok(())
}

/// A finished background rewrite, as reported by the writer.
fn rewrite_done(node: &mut Node, r: writer::RewriteReport, now: u64) {
    node.aof.rewrite_in_progress = false;
    node.engine.set_spill_pinned(false);
    if let Some(s) = node.aof.rewrite_start.take() {
        node.aof.last_rewrite_time_sec = (now.saturating_sub(s) / 1000) as i64;
    }
    if let Some(a) = &mut node.aof_writer {
        a.reclaim.rewrite_ended(r.result.is_ok() && r.adopted);
    }
    match r.result {
        Ok(size) => {
            node.aof.last_rewrite_ok = true;
            if r.adopted {
                node.aof.base_size = size;
                node.aof.current_size = size;
                if node.aof.state == AofState::WaitRewrite {
                    node.aof.state = AofState::On;
                    tracing::info!("AOF rewrite completed: the append only file is now on.");
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "Background AOF rewrite terminated with error.");
            node.aof.last_rewrite_ok = false;
            if node.aof.state == AofState::WaitRewrite || node.aof.fsync_failed {
                node.aof.rewrite_scheduled = true;
                if let Some(a) = &mut node.aof_writer {
                    a.retry_rewrite_at = now + REWRITE_RETRY_MS;
                }
            }
        }
    }
    sync_engine_flag(node);
}

/// Send this batch's pending records now, so a synchronous operation that
/// follows sees them in the file first.
pub fn dispatch_pending(node: &mut Node, now: u64) {
    let recs = node.engine.take_aof_records();
    dispatch(node, recs, now);
}

/// Synchronous full rewrite (SHUTDOWN REWRITE-AOF), even with AOF off.
/// Runs entirely in one owner task: nothing can change while it runs, so the
/// snapshot alone is the complete state.
pub fn rewrite_now(node: &mut Node, now: u64) -> Result<(), AofError> {
    let started = Instant::now();
    dispatch_pending(node, now);
    let incremental_fsync = node.config.aof_rewrite_incremental_fsync;
    let Some(aof) = &mut node.aof_writer else {
        return Err(AofError::WriterGone);
    };
    if aof.snapshot.take().is_some() || node.aof.rewrite_in_progress {
        aof.writer.send(Msg::RewriteAbort);
        aof.reclaim.rewrite_ended(false);
        node.aof.rewrite_in_progress = false;
        node.aof.rewrite_start = None;
        node.engine.set_spill_pinned(false);
    }
    aof.writer.send(Msg::RewriteBegin { incremental_fsync });
    // DEDUP keys outlive their jobs, so the snapshot carries them too.
    let keys = encode_dedup_keys(&node.engine);
    if !keys.is_empty() {
        aof.writer.send(Msg::RewriteChunk(keys));
    }
    let mut cursor = Some(Cursor::Jobs(0));
    while let Some(at) = cursor {
        // As in the background snapshot: never queue more than a few
        // pieces (the node is stopping and serves nobody meanwhile).
        while aof.writer.published.rewrite_pieces.load(Ordering::Relaxed) >= MAX_QUEUED_PIECES
            && started.elapsed() < SYNC_TIMEOUT
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        cursor = snapshot_piece(&node.engine, &aof.writer, node.spill.io.as_ref(), at);
    }
    let result = aof
        .writer
        .request(|d| Msg::RewriteFinish { done: Some(d) }, SYNC_TIMEOUT);
    node.aof.last_rewrite_time_sec = started.elapsed().as_secs() as i64;
    match result {
        Ok(size) => {
            node.aof.last_rewrite_ok = true;
            aof.reclaim.rewritten();
            if node.aof.state != AofState::Off {
                node.aof.base_size = size;
                node.aof.current_size = size;
                node.aof.state = AofState::On;
            }
            tracing::info!(bytes = size, "Synchronous AOF rewrite completed.");
            sync_engine_flag(node);
            Ok(())
        }
        Err(e) => {
            node.aof.last_rewrite_ok = false;
            sync_engine_flag(node);
            Err(e)
        }
    }
}

/// DEBUG LOADAOF: flush the AOF, drop every job, load the file again.
pub fn debug_reload(node: &mut Node, now: u64) -> Result<(), AofError> {
    dispatch_pending(node, now);
    if node.aof.state != AofState::Off {
        if let Some(aof) = &node.aof_writer {
            aof.writer.request(Msg::Sync, SYNC_TIMEOUT)?;
        }
    }
    // Neither the flush nor the replay may append to the file we read.
    node.engine.set_aof_records(false);
    node.engine.flushall(now);
    let opts = loader::LoadOptions {
        truncated_ok: node.config.aof_load_truncated,
        enqueue: node.config.aof_enqueue_jobs_once,
    };
    let path = aof_path(node);
    node.engine.set_spill_replay(true);
    let r = loader::load_file(&mut node.engine, &path, opts, now);
    node.engine.set_spill_replay(false);
    node.engine.take_aof_records();
    sync_engine_flag(node);
    r.map(|_| ())
}

/// CONFIG SET appendonly: `yes` starts a rewrite whose result becomes the
/// live file (state wait-rewrite until then); `no` stops appending now.
pub fn set_appendonly(node: &mut Node, now: u64) -> Result<(), WireError> {
    let on = node.config.appendonly;
    if on && node.aof.state == AofState::Off {
        let Some(aof) = &node.aof_writer else {
            return Err(WireError::AofCantTurnOn);
        };
        aof.writer.send(Msg::Enable);
        node.aof.state = AofState::WaitRewrite;
        // A rewrite already running captures everything since it began, so
        // its result can become the live file as well.
        if !node.aof.rewrite_in_progress {
            if let Err(e) = start_rewrite(node, now) {
                tracing::warn!(error = %e, "Could not start the AOF rewrite for appendonly yes.");
                return Err(WireError::AofCantTurnOn);
            }
        }
    } else if !on && node.aof.state != AofState::Off {
        dispatch_pending(node, now);
        if let Some(aof) = &node.aof_writer {
            aof.writer.send(Msg::Disable);
        }
        node.aof.state = AofState::Off;
        node.aof.last_write_error = None;
    }
    sync_engine_flag(node);
    Ok(())
}

/// CONFIG SET appendfsync.
pub fn set_fsync_policy(node: &mut Node) {
    if let Some(aof) = &node.aof_writer {
        aof.writer.send(Msg::SetPolicy(node.config.appendfsync));
    }
}

/// The notifier that wakes the AOF task when a chunked rewrite starts.
pub fn kick(node: &Node) -> Option<Arc<Notify>> {
    node.aof_writer.as_ref().map(|a| a.kick.clone())
}

/// Shutdown: hand over what is pending and give the writer to the caller,
/// which stops it off the owner thread.
pub fn take_writer(node: &mut Node, now: u64) -> Option<Writer> {
    dispatch_pending(node, now);
    node.engine.set_aof_records(false);
    node.aof_writer.take().map(|a| a.writer)
}
