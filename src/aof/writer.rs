//! The AOF writer: the open file, its fsync policy, and the order in which
//! records reach it.
//!
//! Records are queued in engine order (`Writer::send`, a non-blocking push
//! on the owner thread). Whoever needs them on disk writes them: normally
//! the owner, at the end of the turn that produced them and before it
//! releases the turn's replies (`Flusher::flush`, as Disque writes its AOF
//! buffer in the event loop before replying). One consumer at a time
//! drains the queue (`Queue::busy`), so records leave in order and one
//! `write()` covers every record of the turn. The
//! dedicated thread does everything that may take long: fsyncs, and with
//! `always` the writes before them too (group commit: one fsync covers all
//! records written before it),
//! the once-per-second fsync of `everysec`, rewrites, retries after a
//! write error, and the writes themselves while the disk is known to be
//! slow, so the owner never waits on the device for long.
//!
//! Why not write everything on the thread: each reply would then wait for
//! two cross-thread wake-ups (hand-off and "written") before it could
//! leave (docs/PERFORMANCE.md, "Where the CPU goes", on the AOF).
//!
//! Progress is published as sequence numbers (every record gets one, in
//! engine order): `written` (handed to the kernel) and `synced` (on disk as
//! far as the fsync policy promises). A connection waits (`SyncWait`) for
//! `written` (`everysec`, `no`) or `synced` (`always`) before it writes the
//! replies of a batch that produced records; usually the owner's
//! end-of-turn flush already did it and the wait is one atomic load.
//!
//! The queue is unbounded on purpose: the records already exist in
//! memory when they are sent, blocking the sender would stall the whole
//! node behind the disk, and dropping one would silently lose a job. The
//! backlog is visible as `aof_buffer_length` in INFO.
//!
//! Background rewrites are also performed by the thread (`super::rewrite`
//! holds one rewrite's state), so only the writer ever touches the AOF
//! path: the engine side streams snapshot chunks (`RewriteChunk`) into a
//! temp file while every record produced since `RewriteBegin` is both
//! appended to the current file and kept in a "diff" buffer, which is
//! appended to the temp file before the atomic rename in `RewriteFinish`.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::rewrite::Rewrite;
use super::AofError;
use crate::config::AppendFsync;
use crate::engine::AofRecord;

/// Reply channel for synchronous requests (sync, stop, blocking rewrite).
pub type Done = mpsc::Sender<Result<u64, AofError>>;

/// How many rounds an inline flush keeps draining records other
/// connections queued while it wrote, before leaving the rest to the thread.
const INLINE_ROUNDS: usize = 4;

pub enum Msg {
    /// Records numbered `first_seq..first_seq + recs.len()`.
    Records {
        first_seq: u64,
        recs: Vec<AofRecord>,
    },
    SetPolicy(AppendFsync),
    /// AOF switched on: adopt the file produced by the next finished rewrite.
    Enable,
    /// AOF switched off: flush, fsync and close the file.
    Disable,
    /// Start capturing records for a new file. `incremental_fsync`: fsync
    /// the temp file every 32 MB so the final fsync is short.
    RewriteBegin {
        incremental_fsync: bool,
    },
    /// Encoded LOADJOB records of a snapshot chunk.
    RewriteChunk(Vec<u8>),
    /// Jobs of a snapshot chunk whose body is spilled to disk: the record
    /// without its body and where the body is, in the spill segments of
    /// `dir` (the engine keeps those files until the rewrite ends).
    RewriteSpilled {
        dir: std::path::PathBuf,
        jobs: Vec<(crate::job_codec::JobRecord, crate::engine::spill::Loc)>,
    },
    /// Append the captured records, fsync, rename over the AOF.
    RewriteFinish {
        done: Option<Done>,
    },
    RewriteAbort,
    /// Flush and fsync everything received so far; replies with the size.
    Sync(Done),
    /// Like `Sync`, then exit the thread.
    Stop(Done),
}

/// Results a finished background rewrite leaves for the node to pick up.
#[derive(Debug, Clone)]
pub struct RewriteReport {
    pub result: Result<u64, AofError>,
    /// The new file became the live AOF.
    pub adopted: bool,
}

#[derive(Default)]
pub struct Report {
    pub write_error: Option<AofError>,
    /// An fsync failed: what the kernel held may be gone although a later
    /// fsync succeeds, so only a rewrite from memory clears `write_error`.
    pub fsync_failed: bool,
    pub rewrite: Option<RewriteReport>,
}

/// What a `take_report` hands the node.
pub struct ReportTaken {
    pub write_error: Option<AofError>,
    pub fsync_failed: bool,
    pub rewrite: Option<RewriteReport>,
}

/// What the writer publishes for the rest of the node.
pub struct Published {
    synced: watch::Sender<u64>,
    /// Mirrors `synced` for the waiters' fast path.
    synced_seq: AtomicU64,
    /// The current write/fsync error: waiters give up with it instead of
    /// hanging until the disk recovers.
    failed: watch::Sender<Option<AofError>>,
    /// Mirrors `written` for waiters (everysec/no replies wait for it).
    written_w: watch::Sender<u64>,
    pub written: AtomicU64,
    pub current_size: AtomicU64,
    /// Bytes received but not yet written (INFO aof_buffer_length).
    pub backlog: AtomicU64,
    /// Set whenever `report` changed, so readers can skip the mutex.
    pub report_dirty: AtomicBool,
    pub report: Mutex<Report>,
}

impl Published {
    fn publish_report(&self, f: impl FnOnce(&mut Report)) {
        let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut r);
        self.report_dirty.store(true, Ordering::Release);
    }

    /// Take the report if it changed since the last call.
    pub fn take_report(&self) -> Option<ReportTaken> {
        // A plain load first: this runs before every write command.
        if !self.report_dirty.load(Ordering::Acquire)
            || !self.report_dirty.swap(false, Ordering::AcqRel)
        {
            return None;
        }
        let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        Some(ReportTaken {
            write_error: r.write_error.clone(),
            fsync_failed: r.fsync_failed,
            rewrite: r.rewrite.take(),
        })
    }

    fn publish_written(&self, seq: u64) {
        self.written.store(seq, Ordering::Release);
        if self.written_w.receiver_count() > 0 {
            self.written_w.send_replace(seq);
        } else {
            // Nobody waits: update quietly (no waker traffic).
            self.written_w.send_if_modified(|v| {
                *v = seq;
                false
            });
        }
    }
}

/// Which progress a `SyncWait` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Until {
    Written,
    Synced,
}

/// "Reply after write/fsync": resolves once the record numbered `seq` is
/// durable according to the policy. The caller must not claim success
/// otherwise.
pub struct SyncWait {
    core: Arc<Core>,
    until: Until,
    seq: u64,
}

/// Why a `SyncWait` did not complete.
#[derive(Debug, PartialEq, Eq)]
pub enum NotDurable {
    /// Writing or fsyncing the AOF fails (the text is the `strerror`):
    /// the records stay queued and are retried, the client is told now.
    Disk(AofError),
    /// The writer went away (shutdown).
    Gone,
}

impl SyncWait {
    fn reached(&self) -> bool {
        let p = &self.core.published;
        let at = match self.until {
            Until::Written => p.written.load(Ordering::Acquire),
            Until::Synced => p.synced_seq.load(Ordering::Acquire),
        };
        at >= self.seq
    }

    /// True when the records are already durable per the policy.
    pub fn is_done(&self) -> bool {
        self.reached()
    }

    pub async fn wait(self) -> Result<(), NotDurable> {
        // Normally the connection's own flush already wrote the records.
        if self.reached() {
            return Ok(());
        }
        // Records nobody flushed yet (another caller's `send`): write them.
        self.core.flush_inline();
        if self.reached() {
            return Ok(());
        }
        let p = &self.core.published;
        let mut rx = match self.until {
            Until::Written => p.written_w.subscribe(),
            Until::Synced => p.synced.subscribe(),
        };
        let mut failed = p.failed.subscribe();
        let seq = self.seq;
        tokio::select! {
            // Done wins over a failure reported in the same instant.
            biased;
            r = rx.wait_for(|&s| s >= seq) => r.map(|_| ()).map_err(|_| NotDurable::Gone),
            r = failed.wait_for(Option::is_some) => match r {
                Ok(e) => Err(e.clone().map_or(NotDurable::Gone, NotDurable::Disk)),
                Err(_) => Err(NotDurable::Gone),
            },
        }
    }
}

/// The queue between the node and the file, and who consumes it.
#[derive(Default)]
struct Queue {
    msgs: VecDeque<Msg>,
    /// A consumer (an inline flush or the thread) is draining the queue;
    /// it re-checks the queue before clearing this, so nothing queued
    /// meanwhile is left behind.
    busy: bool,
    /// The thread has work: a control message, an fsync, or records an
    /// inline flush left for it.
    wanted: bool,
    /// The `Writer` is gone: flush and exit.
    closed: bool,
}

/// Shared by the node side, inline flushes and the thread.
struct Core {
    queue: Mutex<Queue>,
    /// Wakes the thread (`Queue::wanted`, `closed`, busy cleared).
    wake: Condvar,
    /// The file. The current consumer (`Queue::busy`) locks it, and the
    /// thread's periodic fsync briefly before and after the fsync (which
    /// runs unlocked), so it is hardly ever contended; the mutex is what
    /// makes that safe to share.
    state: Mutex<FileState>,
    /// `appendfsync always`: inline flushes leave the write to the thread,
    /// which writes and fsyncs whole groups.
    always: AtomicBool,
    published: Arc<Published>,
}

impl Core {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn state(&self) -> MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, msg: Msg) {
        let control = !matches!(msg, Msg::Records { .. });
        let mut q = self.queue();
        q.msgs.push_back(msg);
        if control {
            q.wanted = true;
            drop(q);
            self.wake.notify_one();
        }
    }

    /// The thread's periodic work when it needs no full round: the
    /// `everysec` fsync, made on a duplicate of the file descriptor with
    /// neither lock held, so writers go on meanwhile. False when a full
    /// round is needed instead (a failed write to retry, bytes left in the
    /// buffer, `always`).
    fn periodic_fsync(&self) -> bool {
        let (file, upto) = {
            let st = self.state();
            if st.error.is_some() || !st.buf.is_empty() || st.policy == AppendFsync::Always {
                return false;
            }
            let due = st.policy == AppendFsync::EverySec && st.dirty && st.fsync_due();
            let Some(file) = st.file.as_ref().filter(|_| due) else {
                return true;
            };
            match file.try_clone() {
                Ok(f) => (f, st.written_seq),
                Err(_) => return false,
            }
        };
        // Everything up to `upto` was handed to the kernel before the
        // fsync starts, so the fsync covers it.
        let r = timed_sync(&file);
        let mut st = self.state();
        st.after_fsync(r, upto);
        true
    }

    /// Ask the thread to run (with the queue locked).
    fn want_thread(&self, mut q: MutexGuard<'_, Queue>) {
        q.wanted = true;
        drop(q);
        self.wake.notify_one();
    }

    /// Write the queued records from the calling thread, unless another
    /// consumer is at it (it picks them up before it stops) or the work
    /// belongs to the writer thread (a control message is next, fsync
    /// policy `always`, a failing or slow disk).
    fn flush_inline(&self) {
        for _ in 0..INLINE_ROUNDS {
            let mut q = self.queue();
            if q.busy || q.msgs.is_empty() {
                return;
            }
            let records_next = matches!(q.msgs.front(), Some(Msg::Records { .. }));
            if !records_next || self.always.load(Ordering::Relaxed) || super::faults::slow_writes()
            {
                return self.want_thread(q);
            }
            q.busy = true;
            let mut batch = Vec::new();
            while let Some(Msg::Records { .. }) = q.msgs.front() {
                if let Some(m) = q.msgs.pop_front() {
                    batch.push(m);
                }
            }
            drop(q);
            let retry_on_thread = {
                let mut st = self.state();
                for m in batch {
                    st.handle(m);
                }
                st.write_out();
                st.error.is_some()
            };
            let mut q = self.queue();
            q.busy = false;
            let records_next = matches!(q.msgs.front(), Some(Msg::Records { .. }));
            if retry_on_thread || q.wanted || (!q.msgs.is_empty() && !records_next) {
                // The thread may have been waiting for us to finish.
                return self.want_thread(q);
            }
            if !records_next {
                return;
            }
        }
        let q = self.queue();
        if !q.msgs.is_empty() {
            self.want_thread(q);
        }
    }
}

/// The right (and duty) to write the records an owner turn just queued,
/// taken by the owner at the end of the turn, before it releases replies.
pub struct Flusher(Arc<Core>);

impl Flusher {
    /// Write the queued records now (see `Core::flush_inline`).
    pub fn flush(self) {
        self.0.flush_inline();
    }
}

/// The engine side's handle on the writer.
pub struct Writer {
    core: Arc<Core>,
    pub published: Arc<Published>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Start the thread. `open`: the AOF is on, open (or create) the file
    /// now so a failure stops startup instead of the first write.
    pub fn start(path: PathBuf, policy: AppendFsync, open: bool) -> Result<Writer, AofError> {
        let file = if open {
            Some(open_append(&path).map_err(|e| AofError::open(&path, e))?)
        } else {
            None
        };
        let size = match &file {
            Some(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            None => 0,
        };
        let (synced, _) = watch::channel(0u64);
        let published = Arc::new(Published {
            synced,
            synced_seq: AtomicU64::new(0),
            failed: watch::channel(None).0,
            written: AtomicU64::new(0),
            written_w: watch::channel(0).0,
            current_size: AtomicU64::new(size),
            backlog: AtomicU64::new(0),
            report_dirty: AtomicBool::new(false),
            report: Mutex::new(Report::default()),
        });
        let state = FileState {
            path,
            enabled: file.is_some(),
            file,
            buf: Vec::with_capacity(64 * 1024),
            buf_last_seq: 0,
            seen_seq: 0,
            written_seq: 0,
            synced_seq: 0,
            size,
            dirty: false,
            policy,
            last_fsync: Instant::now(),
            error: None,
            fsync_failed: false,
            rewrite: None,
            published: published.clone(),
        };
        let core = Arc::new(Core {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            state: Mutex::new(state),
            always: AtomicBool::new(policy == AppendFsync::Always),
            published: published.clone(),
        });
        let thread_core = core.clone();
        let thread = std::thread::Builder::new()
            .name("aof-writer".into())
            .spawn(move || run(&thread_core))
            .map_err(|e| AofError::Thread {
                source: Arc::new(e),
            })?;
        Ok(Writer {
            core,
            published,
            thread: Some(thread),
        })
    }

    /// Non-blocking hand-off (the queue is unbounded, see module docs).
    /// Records are written by the next flush (`flusher`) or wait; control
    /// messages wake the thread.
    pub fn send(&self, msg: Msg) -> bool {
        match &msg {
            Msg::Records { recs, .. } => {
                let bytes: usize = recs.iter().map(record_len).sum();
                self.published
                    .backlog
                    .fetch_add(bytes as u64, Ordering::Relaxed);
            }
            Msg::SetPolicy(p) => self
                .core
                .always
                .store(*p == AppendFsync::Always, Ordering::Relaxed),
            _ => {}
        }
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            return false;
        }
        self.core.push(msg);
        true
    }

    /// The handle that writes what was just sent, at the end of the owner's
    /// turn.
    pub fn flusher(&self) -> Flusher {
        Flusher(self.core.clone())
    }

    /// Send a request and wait for its answer (bounded).
    pub fn request(
        &self,
        make: impl FnOnce(Done) -> Msg,
        timeout: Duration,
    ) -> Result<u64, AofError> {
        let (tx, rx) = mpsc::channel();
        if !self.send(make(tx)) {
            return Err(AofError::WriterGone);
        }
        rx.recv_timeout(timeout).map_err(|_| AofError::Timeout)?
    }

    /// Completes once records up to `seq` are durable per the policy.
    pub fn sync_wait(&self, seq: u64) -> SyncWait {
        SyncWait {
            core: self.core.clone(),
            until: Until::Synced,
            seq,
        }
    }

    /// Completes once records up to `seq` were handed to the kernel.
    pub fn write_wait(&self, seq: u64) -> SyncWait {
        SyncWait {
            core: self.core.clone(),
            until: Until::Written,
            seq,
        }
    }

    /// Flush, fsync and stop the thread (graceful shutdown).
    pub fn stop(mut self, timeout: Duration) -> Result<u64, AofError> {
        let r = self.request(Msg::Stop, timeout);
        if r.is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Like a closed channel: the thread flushes, fsyncs and exits.
        let mut q = self.core.queue();
        q.closed = true;
        drop(q);
        self.core.wake.notify_one();
    }
}

fn record_len(r: &AofRecord) -> usize {
    match r {
        AofRecord::LoadJob(b) => b.len() + 32,
        AofRecord::DelJob(_) => 63,
        AofRecord::Dedup(b) => b.len() + 32,
    }
}

/// `fdatasync` of the AOF (or its injected fault), timed for the fsync
/// latency metric.
fn timed_sync(file: &File) -> std::io::Result<()> {
    let started = Instant::now();
    let r = super::faults::sync_data(file);
    crate::metrics::shell()
        .fsync
        .observe(started.elapsed().as_micros() as u64);
    r
}

fn open_append(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

/// The writer thread: waits until it is wanted (or a timer is due), then
/// takes the queue like an inline flush does, handles every message in
/// order, writes, and fsyncs per policy.
fn run(core: &Core) {
    'rounds: loop {
        let timeout = core.state().next_wakeup();
        let deadline = Instant::now() + timeout;
        let mut q = core.queue();
        loop {
            if !q.busy && (q.wanted || q.closed) {
                break;
            }
            if Instant::now() >= deadline {
                // Periodic work. The everysec fsync runs beside whoever is
                // writing and leaves the records to their producers' inline
                // flushes; taking the queue for it made this thread the
                // writer for as long as records kept coming (every reply
                // then waited for a wake-up from here).
                drop(q);
                if core.periodic_fsync() {
                    continue 'rounds;
                }
                q = core.queue();
                if !q.busy {
                    break;
                }
                // An inline flush is running: it wakes us when it stops.
                q.wanted = true;
            }
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100));
            q = core
                .wake
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        q.busy = true;
        q.wanted = false;
        let closed = q.closed;
        let msgs = std::mem::take(&mut q.msgs);
        drop(q);
        let mut st = core.state();
        let mut stop = None;
        for m in msgs {
            // Nothing is sent after Stop.
            if stop.is_none() {
                stop = st.handle(m);
            }
        }
        st.write_out();
        st.fsync_per_policy();
        if let Some(done) = stop {
            st.flush_and_fsync();
            st.abort_rewrite();
            let _ = done.send(st.sync_result());
            return;
        }
        if closed {
            st.flush_and_fsync();
            st.abort_rewrite();
            return;
        }
        drop(st);
        let mut q = core.queue();
        q.busy = false;
        if !q.msgs.is_empty() {
            // Queued while we worked (group commit: the next round takes
            // them all at once).
            q.wanted = true;
        }
    }
}

/// The open file and everything known about it.
struct FileState {
    path: PathBuf,
    /// Appending is on (a finished rewrite becomes the live file).
    enabled: bool,
    file: Option<File>,
    /// Encoded records not yet written. Our own buffer rather than a
    /// `BufWriter`: after a failed or partial write we must know exactly
    /// which bytes reached the file so the retry neither loses nor
    /// duplicates any.
    buf: Vec<u8>,
    buf_last_seq: u64,
    seen_seq: u64,
    written_seq: u64,
    synced_seq: u64,
    size: u64,
    /// Written but not fsynced.
    dirty: bool,
    policy: AppendFsync,
    last_fsync: Instant,
    error: Option<AofError>,
    /// Sticky after a failed fsync until a rewrite is adopted (see
    /// `Report::fsync_failed`).
    fsync_failed: bool,
    rewrite: Option<Rewrite>,
    published: Arc<Published>,
}

impl FileState {
    fn next_wakeup(&self) -> Duration {
        if self.error.is_some() || !self.buf.is_empty() {
            // Retry a failed write once per second (Redis does the same).
            return Duration::from_secs(1);
        }
        if self.dirty && self.policy == AppendFsync::EverySec {
            return Duration::from_secs(1).saturating_sub(self.last_fsync.elapsed());
        }
        Duration::from_secs(1)
    }

    /// Handle one message; returns the reply channel when it is `Stop`.
    fn handle(&mut self, msg: Msg) -> Option<Done> {
        match msg {
            Msg::Records { first_seq, recs } => {
                let mut seq = first_seq;
                for r in &recs {
                    if self.file.is_some() {
                        super::reader::encode_record(r, &mut self.buf);
                        self.buf_last_seq = seq;
                    }
                    if let Some(rw) = &mut self.rewrite {
                        rw.capture(r);
                    }
                    self.published
                        .backlog
                        .fetch_sub(record_len(r) as u64, Ordering::Relaxed);
                    seq += 1;
                }
                self.seen_seq = self.seen_seq.max(seq.saturating_sub(1));
            }
            Msg::SetPolicy(p) => self.policy = p,
            Msg::Enable => self.enabled = true,
            Msg::Disable => {
                self.flush_and_fsync();
                self.enabled = false;
                self.file = None;
                // Whatever could not be written is not going anywhere now.
                self.buf.clear();
                self.set_error(None);
            }
            Msg::RewriteBegin { incremental_fsync } => {
                self.abort_rewrite();
                self.rewrite = Some(Rewrite::begin(&self.path, incremental_fsync));
            }
            Msg::RewriteChunk(bytes) => {
                if let Some(rw) = &mut self.rewrite {
                    rw.chunk(&bytes);
                }
            }
            Msg::RewriteSpilled { dir, jobs } => {
                if let Some(rw) = &mut self.rewrite {
                    match spilled_loadjobs(&dir, jobs) {
                        Ok(bytes) => rw.chunk(&bytes),
                        Err(e) => {
                            // A job missing from the new file would be lost
                            // at the next restart: keep the old file.
                            tracing::warn!(error = %e, "Background AOF rewrite aborted: a spilled job could not be read.");
                            self.abort_rewrite();
                        }
                    }
                }
            }
            Msg::RewriteFinish { done } => {
                // Records before this point must be in the diff first.
                let report = self.finish_rewrite();
                // A synchronous caller gets the result directly; a
                // background rewrite leaves it for the node's cron.
                match done {
                    Some(d) => {
                        let _ = d.send(report.result);
                    }
                    None => self.published.publish_report(|r| r.rewrite = Some(report)),
                }
            }
            Msg::RewriteAbort => self.abort_rewrite(),
            Msg::Sync(done) => {
                self.flush_and_fsync();
                let _ = done.send(self.sync_result());
            }
            Msg::Stop(done) => return Some(done),
        }
        None
    }

    fn sync_result(&self) -> Result<u64, AofError> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(self.size),
        }
    }

    fn set_error(&mut self, e: Option<AofError>) {
        if e.is_none() && self.fsync_failed {
            // Only an adopted rewrite clears an fsync failure.
            return;
        }
        if self.error != e {
            if let Some(msg) = &e {
                tracing::warn!(error = %msg, "Error writing to the AOF file.");
            } else {
                tracing::info!("AOF write error solved: the AOF can be written again.");
            }
            self.error = e.clone();
            let fsync_failed = self.fsync_failed;
            // Report first: a waiter told of the failure and retrying at
            // once must find the node already refusing writes.
            self.published.publish_report(|r| {
                r.write_error = e.clone();
                r.fsync_failed = fsync_failed;
            });
            self.published.failed.send_replace(e);
        }
    }

    /// Hand the buffer to the kernel, keeping exactly the unwritten bytes.
    fn write_out(&mut self) {
        let Some(file) = &mut self.file else {
            // Not appending: nothing to wait for.
            if self.seen_seq > self.written_seq {
                self.written_seq = self.seen_seq;
                self.published.publish_written(self.seen_seq);
            }
            self.publish_synced(self.seen_seq);
            return;
        };
        if !self.buf.is_empty() {
            super::faults::before_write();
        }
        let mut done = 0;
        let mut err = None;
        while done < self.buf.len() {
            match file.write(&self.buf[done..]) {
                Ok(0) => {
                    err = Some(AofError::WriteZero {
                        path: self.path.clone(),
                    });
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    err = Some(AofError::write(&self.path, e));
                    break;
                }
            }
        }
        if err.is_some() && done > 0 && file.set_len(self.size).is_ok() {
            // A full disk took part of the buffer: cut the file back so it
            // ends on a record boundary (loadable as is) and retry it all.
            done = 0;
        }
        if done > 0 {
            self.size += done as u64;
            self.dirty = true;
            self.buf.drain(..done);
            self.published
                .current_size
                .store(self.size, Ordering::Relaxed);
        }
        if self.buf.is_empty() {
            self.written_seq = self.buf_last_seq.max(self.written_seq);
            self.published.publish_written(self.written_seq);
        }
        if self.buf.capacity() > 4 * 1024 * 1024 && self.buf.is_empty() {
            self.buf = Vec::with_capacity(64 * 1024);
        }
        match err {
            Some(e) => self.set_error(Some(e)),
            None if self.buf.is_empty() => self.set_error(None),
            None => {}
        }
        if self.policy == AppendFsync::No && self.buf.is_empty() {
            // `no` promises nothing beyond "handed to the kernel".
            self.publish_synced(self.written_seq);
        }
    }

    /// The policy asks for an fsync now.
    fn fsync_due(&self) -> bool {
        match self.policy {
            AppendFsync::Always => true,
            AppendFsync::EverySec => self.last_fsync.elapsed() >= Duration::from_secs(1),
            AppendFsync::No => false,
        }
    }

    fn fsync_per_policy(&mut self) {
        if self.fsync_due() {
            self.fsync();
        }
    }

    fn fsync(&mut self) {
        let Some(file) = &self.file else { return };
        if !self.dirty {
            self.publish_synced(self.written_seq);
            return;
        }
        let upto = self.written_seq;
        let r = timed_sync(file);
        self.after_fsync(r, upto);
    }

    /// Record an fsync's outcome; `upto`: the last record written before
    /// it started.
    fn after_fsync(&mut self, r: std::io::Result<()>, upto: u64) {
        match r {
            Ok(()) => {
                // Writes made while it ran are not covered by it.
                if self.written_seq == upto {
                    self.dirty = false;
                }
                self.last_fsync = Instant::now();
                self.publish_synced(upto);
            }
            Err(e) => {
                // The kernel may have dropped the pages it failed to write
                // and a later fsync would not notice: the file is suspect
                // until a rewrite from memory replaces it.
                self.fsync_failed = true;
                self.set_error(Some(AofError::fsync(&self.path, e)));
            }
        }
    }

    fn flush_and_fsync(&mut self) {
        self.write_out();
        self.fsync();
    }

    fn publish_synced(&mut self, seq: u64) {
        if seq > self.synced_seq {
            self.synced_seq = seq;
            self.published.synced_seq.store(seq, Ordering::Release);
            self.published.synced.send_replace(seq);
        }
    }

    fn finish_rewrite(&mut self) -> RewriteReport {
        let Some(rw) = self.rewrite.take() else {
            // Begin failed (already reported) or the rewrite was aborted.
            return RewriteReport {
                result: Err(AofError::NoRewrite),
                adopted: false,
            };
        };
        let (file, size) = match rw.finish(&self.path) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "Background AOF rewrite failed.");
                return RewriteReport {
                    result: Err(e),
                    adopted: false,
                };
            }
        };
        let adopted = self.enabled;
        if adopted {
            // Everything received so far is in the new file, fsynced; the
            // old file's unwritten tail (if a write failed) is superseded.
            self.file = Some(file);
            self.buf.clear();
            self.size = size;
            self.dirty = false;
            self.written_seq = self.seen_seq;
            self.buf_last_seq = self.seen_seq;
            self.published.publish_written(self.written_seq);
            self.published.current_size.store(size, Ordering::Relaxed);
            self.publish_synced(self.seen_seq);
            self.fsync_failed = false;
            self.set_error(None);
        }
        tracing::info!(
            bytes = size,
            "Background AOF rewrite finished successfully."
        );
        RewriteReport {
            result: Ok(size),
            adopted,
        }
    }

    fn abort_rewrite(&mut self) {
        if let Some(rw) = self.rewrite.take() {
            rw.abort();
        }
    }
}

/// LOADJOB records for spilled jobs, their bodies read back from the
/// spill segments (checked: a bad record fails the whole chunk).
fn spilled_loadjobs(
    dir: &std::path::Path,
    jobs: Vec<(crate::job_codec::JobRecord, crate::engine::spill::Loc)>,
) -> Result<Vec<u8>, crate::spill::SegmentError> {
    let mut files: std::collections::HashMap<u32, File> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (mut rec, loc) in jobs {
        let path = crate::spill::segment::path(dir, loc.seg);
        let f = match files.entry(loc.seg) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let f = File::open(&path).map_err(|source| crate::spill::SegmentError::Open {
                    path: path.clone(),
                    source,
                })?;
                v.insert(f)
            }
        };
        let id = crate::job::JobId(rec.id);
        rec.body = crate::spill::segment::read(f, &path, &id, loc)?;
        crate::aof::reader::encode_loadjob(&rec.to_bytes(), &mut out);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::aof::reader::{AofReader, Record};
    use crate::job::JobId;

    fn id(n: u8) -> JobId {
        let mut b = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";
        b[39] = b'0' + n;
        JobId(b)
    }

    fn read(path: &std::path::Path) -> Vec<Record> {
        let f = File::open(path).unwrap();
        let mut r = AofReader::new(f);
        let mut v = Vec::new();
        while let Some((_, rec)) = r.next_record().unwrap() {
            v.push(rec);
        }
        v
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("disque-aof-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn always_publishes_synced_after_write() {
        let dir = tmpdir("always");
        let path = dir.join("a.aof");
        let w = Writer::start(path.clone(), AppendFsync::Always, true).unwrap();
        let recs = vec![AofRecord::DelJob(id(1)), AofRecord::DelJob(id(2))];
        assert!(w.send(Msg::Records { first_seq: 1, recs }));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ok = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), w.sync_wait(2).wait()).await
        });
        assert_eq!(ok, Ok(Ok(())));
        assert_eq!(w.published.written.load(Ordering::Acquire), 2);
        assert_eq!(
            read(&path),
            vec![Record::DelJob(id(1)), Record::DelJob(id(2))]
        );
        assert_eq!(w.stop(Duration::from_secs(10)), Ok(126));
    }

    #[test]
    fn rewrite_keeps_records_produced_during_it() {
        let dir = tmpdir("rewrite");
        let path = dir.join("b.aof");
        // The rename target is relative to the cwd in production; use an
        // absolute path here and accept the temp file in the cwd.
        let w = Writer::start(path.clone(), AppendFsync::EverySec, true).unwrap();
        w.send(Msg::Records {
            first_seq: 1,
            recs: vec![AofRecord::DelJob(id(1))],
        });
        w.send(Msg::RewriteBegin {
            incremental_fsync: true,
        });
        w.send(Msg::Records {
            first_seq: 2,
            recs: vec![AofRecord::DelJob(id(2))],
        });
        let mut chunk = Vec::new();
        crate::aof::reader::encode_record(&AofRecord::DelJob(id(3)), &mut chunk);
        w.send(Msg::RewriteChunk(chunk));
        let size = w
            .request(
                |d| Msg::RewriteFinish { done: Some(d) },
                Duration::from_secs(10),
            )
            .unwrap();
        assert_eq!(size, 126);
        w.send(Msg::Records {
            first_seq: 3,
            recs: vec![AofRecord::DelJob(id(4))],
        });
        w.stop(Duration::from_secs(10)).unwrap();
        // Snapshot first, then the diff, then later appends.
        assert_eq!(
            read(&path),
            vec![
                Record::DelJob(id(3)),
                Record::DelJob(id(2)),
                Record::DelJob(id(4))
            ]
        );
    }

    #[test]
    fn disabled_writer_does_not_block_waiters() {
        let dir = tmpdir("off");
        let path = dir.join("c.aof");
        let w = Writer::start(path.clone(), AppendFsync::Always, false).unwrap();
        w.send(Msg::Records {
            first_seq: 1,
            recs: vec![AofRecord::DelJob(id(1))],
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ok = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), w.sync_wait(1).wait()).await
        });
        assert_eq!(ok, Ok(Ok(())));
        w.stop(Duration::from_secs(10)).unwrap();
        assert!(!path.exists());
    }
}
