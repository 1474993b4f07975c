//! The AOF writer (the queue and its handle; `file` is the thread, `progress`
//! what it publishes): the open file, its fsync policy, and the order in which
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
//! appended to the current file and written to the temp file between the
//! chunks, in engine order, until the atomic rename in `RewriteFinish`.
//! The thread takes at most one piece of rewrite work per round, and the
//! snapshot waits while pieces are queued (`Published::rewrite_pieces`), so
//! neither the records behind a piece nor the node's RAM pay for a long
//! rewrite.

use std::collections::VecDeque;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::file::{open_append, record_len, run, timed_sync, FileState};
use super::progress::Until;
pub use super::progress::{NotDurable, Published, Report, ReportTaken, RewriteReport, SyncWait};
use super::AofError;
use crate::config::AppendFsync;
use crate::engine::AofRecord;

/// Reply channel for synchronous requests (sync, stop, blocking rewrite).
pub type Done = mpsc::Sender<Result<u64, AofError>>;

/// How many rounds an inline flush keeps draining records other
/// connections queued while it wrote, before leaving the rest to the thread.
const INLINE_ROUNDS: usize = 4;

/// A job of a rewrite snapshot whose bytes are in the spill segments.
pub enum OnDisk {
    /// The record without its body; the body is at the location.
    Body(
        crate::protocol::job_codec::JobRecord,
        crate::engine::spill::Loc,
    ),
    /// The whole record is at the location (`spill-whole-jobs`).
    Whole(crate::engine::spill::Loc),
}

impl OnDisk {
    pub fn loc(&self) -> crate::engine::spill::Loc {
        match self {
            OnDisk::Body(_, loc) | OnDisk::Whole(loc) => *loc,
        }
    }
}

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
        jobs: Vec<OnDisk>,
    },
    /// Write the last captured records, fsync, rename over the AOF.
    RewriteFinish {
        done: Option<Done>,
    },
    RewriteAbort,
    /// Flush and fsync everything received so far; replies with the size.
    Sync(Done),
    /// Like `Sync`, then exit the thread.
    Stop(Done),
}

impl Msg {
    /// Rewrite work that may take long: a snapshot piece or the finish.
    pub(super) fn is_rewrite_data(&self) -> bool {
        matches!(
            self,
            Msg::RewriteChunk(_) | Msg::RewriteSpilled { .. } | Msg::RewriteFinish { .. }
        )
    }
}

/// The queue between the node and the file, and who consumes it.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) msgs: VecDeque<Msg>,
    /// A consumer (an inline flush or the thread) is draining the queue;
    /// it re-checks the queue before clearing this, so nothing queued
    /// meanwhile is left behind.
    pub(super) busy: bool,
    /// The thread has work: a control message, an fsync, or records an
    /// inline flush left for it.
    pub(super) wanted: bool,
    /// The `Writer` is gone: flush and exit.
    pub(super) closed: bool,
}

/// Shared by the node side, inline flushes and the thread.
pub(super) struct Core {
    pub(super) queue: Mutex<Queue>,
    /// Wakes the thread (`Queue::wanted`, `closed`, busy cleared).
    pub(super) wake: Condvar,
    /// The file. The current consumer (`Queue::busy`) locks it, and the
    /// thread's periodic fsync briefly before and after the fsync (which
    /// runs unlocked), so it is hardly ever contended; the mutex is what
    /// makes that safe to share.
    pub(super) state: Mutex<FileState>,
    /// `appendfsync always`: inline flushes leave the write to the thread,
    /// which writes and fsyncs whole groups.
    pub(super) always: AtomicBool,
    pub(super) published: Arc<Published>,
}

impl Core {
    pub(super) fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn state(&self) -> MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn push(&self, msg: Msg) {
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
    pub(super) fn periodic_fsync(&self) -> bool {
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
    pub(super) fn want_thread(&self, mut q: MutexGuard<'_, Queue>) {
        q.wanted = true;
        drop(q);
        self.wake.notify_one();
    }

    /// Write the queued records from the calling thread, unless another
    /// consumer is at it (it picks them up before it stops) or the work
    /// belongs to the writer thread (a control message is next, fsync
    /// policy `always`, a failing or slow disk).
    pub(super) fn flush_inline(&self) {
        for _ in 0..INLINE_ROUNDS {
            let mut q = self.queue();
            if q.busy || q.msgs.is_empty() {
                return;
            }
            let records_next = matches!(q.msgs.front(), Some(Msg::Records { .. }));
            if !records_next
                || self.always.load(Ordering::Relaxed)
                || crate::os::faults::slow_writes()
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
        let mut size = match &file {
            Some(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            None => 0,
        };
        // A new file starts with its format version; an existing one
        // (possibly older, without it) is appended to as it is and gets
        // the record at its next rewrite.
        if let (Some(mut f), 0) = (file.as_ref(), size) {
            let mut header = Vec::new();
            super::reader::encode_version(&mut header);
            f.write_all(&header)
                .map_err(|e| AofError::write(&path, e))?;
            size = header.len() as u64;
        }
        let (synced, _) = watch::channel(0u64);
        let published = Arc::new(Published {
            synced,
            synced_seq: AtomicU64::new(0),
            failed: watch::channel(None).0,
            written: AtomicU64::new(0),
            written_w: watch::channel(0).0,
            current_size: AtomicU64::new(size),
            backlog: AtomicU64::new(0),
            rewrite_pieces: AtomicU64::new(0),
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
            Msg::RewriteChunk(_) | Msg::RewriteSpilled { .. } => {
                self.published
                    .rewrite_pieces
                    .fetch_add(1, Ordering::Relaxed);
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::aof::reader::{AofReader, Record, AOF_FORMAT_VERSION};
    use crate::domain::job::JobId;
    use crate::support::temp_dir::TempDir;

    fn id(n: u8) -> JobId {
        let mut b = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";
        b[39] = b'0' + n;
        JobId(b)
    }

    /// The file's records after its leading format version record.
    fn read(path: &std::path::Path) -> Vec<Record> {
        let f = std::fs::File::open(path).unwrap();
        let mut r = AofReader::new(f);
        let mut v = Vec::new();
        while let Some((_, rec)) = r.next_record().unwrap() {
            v.push(rec);
        }
        assert_eq!(v.first(), Some(&Record::Version(AOF_FORMAT_VERSION)));
        v.remove(0);
        v
    }

    #[test]
    fn new_files_start_with_the_version_and_old_ones_are_kept_as_they_are() {
        let dir = TempDir::new("aof-version");
        let fresh = dir.join("new.aof");
        let w = Writer::start(fresh.clone(), AppendFsync::Always, true).unwrap();
        assert_eq!(w.stop(Duration::from_secs(10)), Ok(28));
        assert!(read(&fresh).is_empty());
        // A file written before the record existed: appended to unchanged.
        let old = dir.join("old.aof");
        let mut before = Vec::new();
        crate::aof::reader::encode_record(&AofRecord::DelJob(id(1)), &mut before);
        std::fs::write(&old, &before).unwrap();
        let w = Writer::start(old.clone(), AppendFsync::Always, true).unwrap();
        assert_eq!(w.stop(Duration::from_secs(10)), Ok(63));
        assert_eq!(std::fs::read(&old).unwrap(), before);
    }

    #[test]
    fn always_publishes_synced_after_write() {
        let dir = TempDir::new("aof-always");
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
        assert_eq!(w.stop(Duration::from_secs(10)), Ok(28 + 126));
    }

    #[test]
    fn rewrite_keeps_records_produced_during_it() {
        let dir = TempDir::new("aof-rewrite");
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
        assert_eq!(size, 28 + 126);
        w.send(Msg::Records {
            first_seq: 3,
            recs: vec![AofRecord::DelJob(id(4))],
        });
        w.stop(Duration::from_secs(10)).unwrap();
        // Engine order: the record sent before the chunk, the chunk, then
        // later appends.
        assert_eq!(
            read(&path),
            vec![
                Record::DelJob(id(2)),
                Record::DelJob(id(3)),
                Record::DelJob(id(4))
            ]
        );
    }

    #[test]
    fn disabled_writer_does_not_block_waiters() {
        let dir = TempDir::new("aof-off");
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
