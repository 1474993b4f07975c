//! The node's side of the spill tier (docs/PERSISTENCE.md#9-spill-tiers):
//! the handle to the spill thread, handing it the engine's spill ops after
//! every task, and the INFO `spill` section. The policy is the engine's
//! (`engine::spill`), the file I/O the spill thread's (`crate::spill`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::Node;
use crate::spill::SpillIo;

/// The spill tier as the node holds it.
#[derive(Default)]
pub struct SpillTier {
    /// The spill thread; None when `spill no` or it could not start.
    pub io: Option<SpillIo>,
    /// Why the tier is off although `spill yes` (startup failure).
    pub error: Option<String>,
    /// Commands waiting for whole jobs on disk to come back, by ticket
    /// (`Engine::cold_fault`): each runs again when its ticket is done.
    pub cold_waits: HashMap<u64, oneshot::Sender<()>>,
    /// Deny-oom commands waiting for spill writes to bring memory under
    /// the refusal level (`wait_memory`), with when (ms) their wait ends;
    /// each runs again at the next write completion or at that time.
    pub memory_waits: Vec<(u64, oneshot::Sender<()>)>,
    /// `Engine::spill_writes_landed` when the waiters were last woken.
    landed_seen: u64,
    /// Waits for memory (`wait_memory`) instead of failing with -OOM; a
    /// command woken while memory is still high waits again, counted again.
    pub memory_waited: u64,
}

/// How long a deny-oom command waits, in all, for the spill tier to
/// bring memory under the refusal level before it fails with -OOM: writes
/// land in milliseconds, so a wait this long means the disk cannot keep
/// up with what must stay in RAM, and the producer is told so.
pub const MEMORY_WAIT_MS: u64 = 1000;

/// Hand the ops the engine decided on to the spill thread, and wake the
/// commands whose jobs are back.
pub fn dispatch(node: &mut Node, now: u64) {
    if let Some(io) = &node.spill.io {
        let ops = node.engine.take_spill_ops();
        io.submit(ops);
    }
    for t in node.engine.take_cold_done() {
        if let Some(tx) = node.spill.cold_waits.remove(&t) {
            let _ = tx.send(());
        }
    }
    if !node.spill.memory_waits.is_empty() {
        wake_memory_waits(node, now);
    }
}

/// Run the commands waiting for memory again once a write has landed,
/// at once when the tier can no longer relieve memory (a fault, the disk
/// budget), and each at the end of its wait, when it fails with -OOM.
fn wake_memory_waits(node: &mut Node, now: u64) {
    let landed = node.engine.spill_writes_landed();
    let waits = &mut node.spill.memory_waits;
    if landed != node.spill.landed_seen || !node.engine.spill_relieves() {
        node.spill.landed_seen = landed;
        for (_, tx) in waits.drain(..) {
            let _ = tx.send(());
        }
        return;
    }
    if waits.iter().any(|(until, _)| *until <= now) {
        for (_, tx) in waits.extract_if(.., |(until, _)| *until <= now) {
            let _ = tx.send(());
        }
    }
}

/// Park a deny-oom command until the next spill write lands, or until
/// `until` (ms) at the latest.
pub fn wait_memory(node: &mut Node, until: u64) -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    node.spill.landed_seen = node.engine.spill_writes_landed();
    node.spill.memory_waits.push((until, tx));
    node.spill.memory_waited += 1;
    rx
}

/// Park a command until the whole jobs it names are back in RAM.
pub fn wait_cold(node: &mut Node, ticket: u64) -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    node.spill.cold_waits.insert(ticket, tx);
    rx
}

/// The INFO `spill` section's fields (after its header).
pub fn info(node: &Node, out: &mut String) {
    let st = node.engine.spill_stats();
    let io = node.spill.io.as_ref().map(|io| &io.stats);
    let load = |f: fn(&crate::spill::IoStats) -> u64| io.map_or(0, |s| f(s));
    let status = if !node.config.spill {
        "off".to_string()
    } else if let Some(e) = &node.spill.error {
        format!("failed: {e}")
    } else if let Some(f) = st.fault {
        format!("paused: {}", f.name())
    } else if st.disk_budget_full {
        "paused: disk-budget".to_string()
    } else if st.active {
        "spilling".to_string()
    } else {
        "idle".to_string()
    };
    let last_error = io
        .and_then(|s| s.last_error.lock().ok().and_then(|g| g.clone()))
        .unwrap_or_default();
    let fields: [(&str, String); 24] = [
        ("spill_enabled", u8::from(node.config.spill).to_string()),
        ("spill_status", status.replace(['\r', '\n'], " ")),
        (
            "spill_dir",
            node.spill
                .io
                .as_ref()
                .map(|io| io.dir().display().to_string())
                .unwrap_or_default(),
        ),
        ("spill_max_disk", node.engine.spill_max_disk().to_string()),
        ("spilled_jobs", st.jobs.to_string()),
        ("spilled_whole_jobs", st.whole_jobs.to_string()),
        ("spilled_whole_copies", st.whole_copies.to_string()),
        (
            "spill_copies_acked_on_disk",
            st.copies_acked_on_disk.to_string(),
        ),
        (
            "spill_whole_table_bytes",
            node.engine.cold_bytes().to_string(),
        ),
        ("spill_pending_writes", st.pending.to_string()),
        ("spill_memory_waits", node.spill.memory_waited.to_string()),
        ("spill_disk_bytes", st.disk_bytes.to_string()),
        ("spill_live_bytes", st.live_bytes.to_string()),
        ("spill_segments", st.segments.to_string()),
        ("spill_jobs_written", st.spilled_total.to_string()),
        ("spill_disk_reads", st.reads.to_string()),
        ("spill_disk_read_bytes", st.read_bytes.to_string()),
        (
            "spill_reply_reads",
            load(|s| s.reply_reads.load(Ordering::Relaxed)).to_string(),
        ),
        ("spill_compactions", st.compactions.to_string()),
        ("spill_records_moved", st.moved.to_string()),
        ("spill_segments_deleted", st.unlinked.to_string()),
        (
            "spill_corrupt_records",
            (st.corrupt.max(load(|s| s.corrupt.load(Ordering::Relaxed)))).to_string(),
        ),
        (
            "spill_io_errors",
            (st.write_errors + load(|s| s.io_errors.load(Ordering::Relaxed))).to_string(),
        ),
        ("spill_last_error", last_error.replace(['\r', '\n'], " ")),
    ];
    for (k, v) in fields {
        out.push_str(k);
        out.push(':');
        out.push_str(&v);
        out.push_str("\r\n");
    }
}
