//! What the AOF writer publishes for the rest of the node: the sequence
//! numbers records have reached (`written`, `synced`), the error and
//! rewrite report the node picks up, and `SyncWait`, the "reply after
//! write/fsync" a connection waits on before it releases replies.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::writer::Core;
use super::AofError;

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
    pub(super) synced: watch::Sender<u64>,
    /// Mirrors `synced` for the waiters' fast path.
    pub(super) synced_seq: AtomicU64,
    /// The current write/fsync error: waiters give up with it instead of
    /// hanging until the disk recovers.
    pub(super) failed: watch::Sender<Option<AofError>>,
    /// Mirrors `written` for waiters (everysec/no replies wait for it).
    pub(super) written_w: watch::Sender<u64>,
    pub written: AtomicU64,
    pub current_size: AtomicU64,
    /// Bytes received but not yet written (INFO aof_buffer_length).
    pub backlog: AtomicU64,
    /// Snapshot pieces (`RewriteChunk`, `RewriteSpilled`) queued and not
    /// yet written: the snapshot waits while the writer is behind, so a
    /// rewrite never queues the whole node's jobs in RAM.
    pub rewrite_pieces: AtomicU64,
    /// Set whenever `report` changed, so readers can skip the mutex.
    pub report_dirty: AtomicBool,
    pub report: Mutex<Report>,
}

impl Published {
    pub(super) fn publish_report(&self, f: impl FnOnce(&mut Report)) {
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

    pub(super) fn publish_written(&self, seq: u64) {
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
pub(super) enum Until {
    Written,
    Synced,
}

/// "Reply after write/fsync": resolves once the record numbered `seq` is
/// durable according to the policy. The caller must not claim success
/// otherwise.
pub struct SyncWait {
    pub(super) core: Arc<Core>,
    pub(super) until: Until,
    pub(super) seq: u64,
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
    pub(super) fn reached(&self) -> bool {
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
