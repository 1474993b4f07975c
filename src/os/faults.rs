//! Injected disk faults for tests and drills (`DEBUG DISK-FAULT`): make the
//! AOF writer's fsyncs fail with EIO, or delay each of its writes and the
//! spill thread's. A full disk needs no hook (tests run the server under a
//! file-size limit, `RLIMIT_FSIZE` with SIGXFSZ ignored, so writes past it
//! fail as on a full disk); a failing fsync and a slow device cannot be
//! produced honestly without root-only device-mapper tricks, so the writers
//! ask this module before touching the device. Process-wide and off by
//! default; every check is one relaxed load.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

static FSYNC_FAILS: AtomicBool = AtomicBool::new(false);
static WRITE_DELAY_MS: AtomicU64 = AtomicU64::new(0);

/// The fault currently injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Every fsync of an AOF file (live or rewrite temp) fails with EIO.
    FsyncError,
    /// Every write to an AOF file or a spill segment first sleeps this long.
    SlowWrites(Duration),
}

pub fn set(fault: Fault) {
    let (fail, delay) = match fault {
        Fault::None => (false, 0),
        Fault::FsyncError => (true, 0),
        Fault::SlowWrites(d) => (false, d.as_millis() as u64),
    };
    FSYNC_FAILS.store(fail, Relaxed);
    WRITE_DELAY_MS.store(delay, Relaxed);
    if fault != Fault::None {
        tracing::warn!(?fault, "Disk fault injected (DEBUG DISK-FAULT).");
    }
}

fn fsync_fault() -> std::io::Result<()> {
    if FSYNC_FAILS.load(Relaxed) {
        return Err(std::io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// `File::sync_data`, unless fsyncs are made to fail.
pub fn sync_data(f: &File) -> std::io::Result<()> {
    fsync_fault()?;
    f.sync_data()
}

/// `File::sync_all`, unless fsyncs are made to fail.
pub fn sync_all(f: &File) -> std::io::Result<()> {
    fsync_fault()?;
    f.sync_all()
}

/// Called before each write: the injected latency of a slow device. A
/// device that recovers (`slow-writes 0`, `none`) lets the writes already
/// waiting go within 10 ms, so a test can hold writes and then release
/// them.
pub fn before_write() {
    let ms = WRITE_DELAY_MS.load(Relaxed);
    let until = std::time::Instant::now() + Duration::from_millis(ms);
    while WRITE_DELAY_MS.load(Relaxed) > 0 {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
}

/// Writes are being delayed: the device is known to be slow, so writes
/// stay on the writer thread instead of the owner thread.
pub fn slow_writes() -> bool {
    WRITE_DELAY_MS.load(Relaxed) > 0
}
