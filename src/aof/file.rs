//! The writer thread's side of the AOF: the open file and everything
//! known about it (`FileState`: buffer, sequence numbers, fsync policy,
//! the rewrite in progress, the sticky error), and the thread's loop that
//! writes, fsyncs per policy, retries after errors and runs rewrites.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::progress::{Published, RewriteReport};
use super::rewrite::Rewrite;
use super::writer::{Core, Done, Msg};
use super::AofError;
use crate::config::AppendFsync;
use crate::engine::AofRecord;

pub(super) fn record_len(r: &AofRecord) -> usize {
    match r {
        AofRecord::LoadJob(b) => b.len() + 32,
        AofRecord::DelJob(_) => 63,
        AofRecord::Dedup(b) | AofRecord::Schedule(b) | AofRecord::Batch(b) => b.len() + 32,
    }
}

/// `fdatasync` of the AOF (or its injected fault), timed for the fsync
/// latency metric.
pub(super) fn timed_sync(file: &File) -> std::io::Result<()> {
    let started = Instant::now();
    let r = crate::os::faults::sync_data(file);
    crate::observe::metrics::shell()
        .fsync
        .observe(started.elapsed().as_micros() as u64);
    r
}

pub(super) fn open_append(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

/// The writer thread: waits until it is wanted (or a timer is due), then
/// takes the queue like an inline flush does, handles every message in
/// order, writes, and fsyncs per policy.
pub(super) fn run(core: &Core) {
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
        let msgs = take_round(&mut q.msgs);
        drop(q);
        let mut st = core.state();
        let mut stop = None;
        for m in msgs {
            if m.is_rewrite_data() {
                // The records before it are not kept waiting for the
                // snapshot's write (or its reads of spilled bodies).
                st.write_out();
            }
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

/// One round's messages: everything queued, up to and including the first
/// piece of rewrite work (a snapshot chunk can mean reading spilled bodies
/// from disk; the final fsync takes long). Records queued behind it then
/// go to the next inline flush instead of waiting for the rest of the
/// rewrite, and the round's replies wait for at most one such piece.
fn take_round(queue: &mut std::collections::VecDeque<Msg>) -> Vec<Msg> {
    let end = queue
        .iter()
        .position(Msg::is_rewrite_data)
        .map_or(queue.len(), |i| i + 1);
    queue.drain(..end).collect()
}

/// The open file and everything known about it.
pub(super) struct FileState {
    pub(super) path: PathBuf,
    /// Appending is on (a finished rewrite becomes the live file).
    pub(super) enabled: bool,
    pub(super) file: Option<File>,
    /// Encoded records not yet written. Our own buffer rather than a
    /// `BufWriter`: after a failed or partial write we must know exactly
    /// which bytes reached the file so the retry neither loses nor
    /// duplicates any.
    pub(super) buf: Vec<u8>,
    pub(super) buf_last_seq: u64,
    pub(super) seen_seq: u64,
    pub(super) written_seq: u64,
    pub(super) synced_seq: u64,
    pub(super) size: u64,
    /// Written but not fsynced.
    pub(super) dirty: bool,
    pub(super) policy: AppendFsync,
    pub(super) last_fsync: Instant,
    pub(super) error: Option<AofError>,
    /// Sticky after a failed fsync until a rewrite is adopted (see
    /// `Report::fsync_failed`).
    pub(super) fsync_failed: bool,
    pub(super) rewrite: Option<Rewrite>,
    pub(super) published: Arc<Published>,
}

impl FileState {
    pub(super) fn next_wakeup(&self) -> Duration {
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
    pub(super) fn handle(&mut self, msg: Msg) -> Option<Done> {
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
                self.published
                    .rewrite_pieces
                    .fetch_sub(1, Ordering::Relaxed);
                if let Some(rw) = &mut self.rewrite {
                    rw.chunk(&bytes);
                }
            }
            Msg::RewriteSpilled { dir, jobs } => {
                self.published
                    .rewrite_pieces
                    .fetch_sub(1, Ordering::Relaxed);
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

    pub(super) fn sync_result(&self) -> Result<u64, AofError> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(self.size),
        }
    }

    pub(super) fn set_error(&mut self, e: Option<AofError>) {
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
    pub(super) fn write_out(&mut self) {
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
            crate::os::faults::before_write();
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
    pub(super) fn fsync_due(&self) -> bool {
        match self.policy {
            AppendFsync::Always => true,
            AppendFsync::EverySec => self.last_fsync.elapsed() >= Duration::from_secs(1),
            AppendFsync::No => false,
        }
    }

    pub(super) fn fsync_per_policy(&mut self) {
        if self.fsync_due() {
            self.fsync();
        }
    }

    pub(super) fn fsync(&mut self) {
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
    pub(super) fn after_fsync(&mut self, r: std::io::Result<()>, upto: u64) {
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

    pub(super) fn flush_and_fsync(&mut self) {
        self.write_out();
        self.fsync();
    }

    pub(super) fn publish_synced(&mut self, seq: u64) {
        if seq > self.synced_seq {
            self.synced_seq = seq;
            self.published.synced_seq.store(seq, Ordering::Release);
            self.published.synced.send_replace(seq);
        }
    }

    pub(super) fn finish_rewrite(&mut self) -> RewriteReport {
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

    pub(super) fn abort_rewrite(&mut self) {
        if let Some(rw) = self.rewrite.take() {
            rw.abort();
        }
    }
}

/// LOADJOB records for spilled jobs, their bodies read back from the
/// spill segments (checked: a bad record fails the whole chunk).
fn spilled_loadjobs(
    dir: &std::path::Path,
    jobs: Vec<super::writer::OnDisk>,
) -> Result<Vec<u8>, crate::spill::SegmentError> {
    use super::writer::OnDisk;
    let mut files: std::collections::HashMap<u32, File> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for job in jobs {
        let loc = job.loc();
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
        match job {
            OnDisk::Body(mut rec, _) => {
                let id = crate::domain::job::JobId(rec.id);
                rec.body = crate::spill::segment::read(f, &path, &id, loc)?;
                crate::aof::reader::encode_loadjob(&rec.to_bytes(), &mut out);
            }
            // A whole job's record on disk is its LOADJOB blob.
            OnDisk::Whole(_) => match crate::spill::segment::read_any(f, &path, loc) {
                Ok((_, blob)) => crate::aof::reader::encode_loadjob(&blob, &mut out),
                // The node drops such a job when it reads it (its replicas
                // keep it): the new file goes without it rather than never
                // being written.
                Err(e) if e.is_corrupt() => {
                    tracing::warn!(error = %e, "AOF rewrite: a whole job on disk failed its checks and is left out.");
                }
                Err(e) => return Err(e),
            },
        }
    }
    Ok(out)
}
