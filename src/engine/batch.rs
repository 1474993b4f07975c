//! Batches with callbacks (`BATCH ...`, docs/COMMANDS.md#batch).
//!
//! This module owns the batch table: per batch, its callbacks and four
//! grow-only pieces of state, merged like acknowledgements so that no
//! order of delivery, loss or partition can undo progress:
//!
//! * the member job IDs (a member is recorded once its ADDJOB succeeded);
//! * the members seen acknowledged and the members seen dead-lettered;
//! * flags that only turn on: committed, cancelled, and "callback added"
//!   for each callback.
//!
//! A state travels as a BATCH bus frame (to every node: creation, commit
//! (with every member known here) and cancel at once, member and
//! acknowledgement deltas gathered per
//! cron run; while a committed batch is unfinished, whole again every few
//! seconds so a lost frame is repaired) and as a `BATCH` AOF record; both carry a
//! partial or whole state and the receiver merges it (set union, flag or).
//!
//! A committed batch is finished when every member is acknowledged or
//! dead. Then its callbacks are due: ONCOMPLETE always, ONSUCCESS when no
//! member is dead. Each is an ADDJOB whose DEDUP key names the batch
//! (`batch:<id>:success`, `batch:<id>:complete`), added first by the node
//! ranked first for the batch (rendezvous hashing over reachable nodes),
//! by the others after `rank × GRACE` if they have not heard of the key.
//! The key counts only once the job is replicated, so a callback is added
//! once in a calm cluster and at least once whatever fails; a node that
//! sees the key sets the "added" flag, which stops every node for good.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use super::addjob::AddJobRequest;
use super::schedule::INTERNAL_CLIENT;
use super::{AofRecord, BusOut, Engine, JobHandle};
use crate::domain::job::{JobId, NodeIdx};

/// How long the node ranked r-th waits (r × GRACE) before adding a due
/// callback it has not heard of.
pub const GRACE_MS: u64 = 2000;
/// How long a callback's ADDJOB waits for replication before it is tried
/// again.
const FIRE_TIMEOUT_MS: u64 = 5000;
/// Unfinished committed batches are sent whole this often, repairing
/// lost frames.
const RESYNC_MS: u64 = 3000;
/// Longest batch ID accepted.
pub const MAX_ID_LEN: usize = 256;
/// Most members a batch takes: its whole state (three sets of 40-byte
/// IDs) must fit one bus frame.
pub const MAX_MEMBERS: usize = 400_000;

const F_COMMITTED: u8 = 1;
const F_CANCELLED: u8 = 2;
const F_SUCCESS_DONE: u8 = 4;
const F_COMPLETE_DONE: u8 = 8;
const FORMAT: u8 = 1;

/// A callback: the job to add.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Callback {
    pub queue: Bytes,
    pub body: Bytes,
}

/// A batch's replicated state (or a delta of it: same shape, merged alike).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchState {
    pub id: Bytes,
    /// F_* flags; they only ever turn on.
    pub flags: u8,
    pub on_success: Option<Callback>,
    pub on_complete: Option<Callback>,
    pub members: BTreeSet<JobId>,
    pub acked: BTreeSet<JobId>,
    pub dead: BTreeSet<JobId>,
}

/// Where a batch stands (BATCH STATUS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchStatus {
    pub total: usize,
    pub pending: usize,
    pub acked: usize,
    pub dead: usize,
    pub committed: bool,
    pub cancelled: bool,
    pub success_added: bool,
    pub complete_added: bool,
}

/// Where a batch stands, as BATCH STATUS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPhase {
    /// Not committed: members may still join.
    Open,
    /// Committed, members pending.
    Committed,
    /// Every member acknowledged.
    Succeeded,
    /// Every member finished, one at least dead-lettered.
    Failed,
    Cancelled,
}

impl BatchPhase {
    pub fn name(self) -> &'static str {
        match self {
            BatchPhase::Open => "open",
            BatchPhase::Committed => "committed",
            BatchPhase::Succeeded => "succeeded",
            BatchPhase::Failed => "failed",
            BatchPhase::Cancelled => "cancelled",
        }
    }
}

impl BatchStatus {
    pub fn phase(&self) -> BatchPhase {
        if self.cancelled {
            BatchPhase::Cancelled
        } else if !self.committed {
            BatchPhase::Open
        } else if self.pending > 0 {
            BatchPhase::Committed
        } else if self.dead > 0 {
            BatchPhase::Failed
        } else {
            BatchPhase::Succeeded
        }
    }
}

/// How many batches this node knows in each BATCH STATUS state (INFO,
/// /metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchTotals {
    pub open: u64,
    pub committed: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
}

impl BatchState {
    /// A fresh state carrying only the ID (deltas start from this).
    pub fn delta(id: &Bytes) -> BatchState {
        BatchState {
            id: id.clone(),
            ..BatchState::default()
        }
    }

    /// Merge `o` into self: union of the sets, or of the flags; a callback
    /// is kept once known (it is only ever set at creation). Returns true
    /// if anything changed.
    pub fn merge(&mut self, o: &BatchState) -> bool {
        let before = (
            self.flags,
            self.members.len(),
            self.acked.len(),
            self.dead.len(),
            self.on_success.is_some(),
            self.on_complete.is_some(),
        );
        self.flags |= o.flags;
        self.members.extend(o.members.iter().copied());
        self.acked.extend(o.acked.iter().copied());
        self.dead.extend(o.dead.iter().copied());
        if self.on_success.is_none() {
            self.on_success.clone_from(&o.on_success);
        }
        if self.on_complete.is_none() {
            self.on_complete.clone_from(&o.on_complete);
        }
        before
            != (
                self.flags,
                self.members.len(),
                self.acked.len(),
                self.dead.len(),
                self.on_success.is_some(),
                self.on_complete.is_some(),
            )
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// Counts over the members (an ack heard before the membership is
    /// kept, and counts once the member is known).
    pub fn status(&self) -> BatchStatus {
        let acked = self.members.intersection(&self.acked).count();
        // A member both acked and dead (a redriven job acked later) is acked.
        let dead = self
            .members
            .iter()
            .filter(|m| self.dead.contains(m) && !self.acked.contains(m))
            .count();
        BatchStatus {
            total: self.members.len(),
            pending: self.members.len() - acked - dead,
            acked,
            dead,
            committed: self.has(F_COMMITTED),
            cancelled: self.has(F_CANCELLED),
            success_added: self.has(F_SUCCESS_DONE),
            complete_added: self.has(F_COMPLETE_DONE),
        }
    }

    /// Committed, not cancelled, and every member finished.
    pub fn finished(&self) -> bool {
        self.has(F_COMMITTED) && !self.has(F_CANCELLED) && self.status().pending == 0
    }

    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u8(FORMAT);
        put_bytes(&mut out, &self.id);
        out.put_u8(self.flags);
        for cb in [&self.on_success, &self.on_complete] {
            match cb {
                Some(c) => {
                    out.put_u8(1);
                    put_bytes(&mut out, &c.queue);
                    put_bytes(&mut out, &c.body);
                }
                None => out.put_u8(0),
            }
        }
        for set in [&self.members, &self.acked, &self.dead] {
            out.put_u32_le(u32::try_from(set.len()).unwrap_or(u32::MAX));
            for id in set {
                out.put_slice(id.as_bytes());
            }
        }
        out.freeze()
    }

    /// Decode; None when malformed.
    pub fn decode(src: &Bytes) -> Option<BatchState> {
        let mut b = src.clone();
        if get_u8(&mut b)? != FORMAT {
            return None;
        }
        let id = get_bytes(&mut b)?;
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return None;
        }
        let flags = get_u8(&mut b)?;
        let mut cbs = [None, None];
        for cb in &mut cbs {
            match get_u8(&mut b)? {
                0 => {}
                1 => {
                    let queue = get_bytes(&mut b)?;
                    let body = get_bytes(&mut b)?;
                    *cb = Some(Callback { queue, body });
                }
                _ => return None,
            }
        }
        let [on_success, on_complete] = cbs;
        let mut sets: [BTreeSet<JobId>; 3] = Default::default();
        for set in &mut sets {
            if b.remaining() < 4 {
                return None;
            }
            let n = b.get_u32_le() as usize;
            let len = 40;
            if b.remaining() < n.checked_mul(len)? {
                return None;
            }
            for _ in 0..n {
                set.insert(JobId::parse(&b.split_to(len))?);
            }
        }
        if b.has_remaining() {
            return None;
        }
        let [members, acked, dead] = sets;
        Some(BatchState {
            id,
            flags,
            on_success,
            on_complete,
            members,
            acked,
            dead,
        })
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_u32_le(u32::try_from(b.len()).unwrap_or(u32::MAX));
    out.put_slice(b);
}

fn get_u8(b: &mut Bytes) -> Option<u8> {
    b.has_remaining().then(|| b.get_u8())
}

fn get_bytes(b: &mut Bytes) -> Option<Bytes> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_u32_le() as usize;
    (b.remaining() >= n).then(|| b.split_to(n))
}

/// The DEDUP key of a batch's callback (`kind` is `success` or `complete`).
pub fn callback_key(id: &[u8], kind: &str) -> Bytes {
    let mut k = Vec::with_capacity(id.len() + 16);
    k.extend_from_slice(b"batch:");
    k.extend_from_slice(id);
    k.push(b':');
    k.extend_from_slice(kind.as_bytes());
    Bytes::from(k)
}

/// This node's bookkeeping for a batch (not replicated).
#[derive(Default)]
struct Local {
    /// When this node first saw the batch finished.
    finished_at: u64,
    /// When this node last tried to add each callback (success, complete).
    tried: [u64; 2],
    /// Last whole-state resend.
    resent: u64,
    /// Set sizes when `finished` was last computed: the sets only grow,
    /// so equal sizes mean an unchanged state and counting over every
    /// member is skipped.
    sizes: (usize, usize, usize, u8),
    finished: bool,
}

struct Entry {
    state: BatchState,
    local: Local,
}

/// Every batch known here.
#[derive(Default)]
pub struct BatchTable {
    entries: BTreeMap<Bytes, Entry>,
    /// Callbacks this node added (metrics, tests).
    pub callbacks_added: u64,
    /// IDs generated here for BATCH CREATE without an ID.
    seq: u64,
    /// Member, acknowledgement and dead-letter deltas not sent yet: sent
    /// by the next cron run as one frame per batch, so a batch acked at
    /// a high rate costs its peers a frame per run, not per job.
    outbox: BTreeMap<Bytes, BatchState>,
}

/// Why a batch operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchError {
    Exists,
    NoBatch,
    Closed,
    Full,
}

fn score(node: &[u8; 40], id: &[u8]) -> u64 {
    let mut h = Sha256::new();
    h.update(node);
    h.update(id);
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

impl Engine {
    /// BATCH CREATE: a new open batch. With no ID, one is made from this
    /// node's ID, the time and a counter.
    pub fn batch_create(
        &mut self,
        id: Option<Bytes>,
        on_success: Option<Callback>,
        on_complete: Option<Callback>,
        now: u64,
    ) -> Result<Bytes, BatchError> {
        let id = match id {
            Some(id) => id,
            None => {
                self.batches.seq += 1;
                let me = self.cluster.my_id();
                let s = format!(
                    "{}-{:x}-{}",
                    String::from_utf8_lossy(&me[..8]),
                    now,
                    self.batches.seq
                );
                Bytes::from(s)
            }
        };
        if self.batches.entries.contains_key(&id) {
            return Err(BatchError::Exists);
        }
        let st = BatchState {
            on_success,
            on_complete,
            ..BatchState::delta(&id)
        };
        self.batch_apply(st, true);
        Ok(id)
    }

    /// May a job be added to `id` here? (open: known, neither committed
    /// nor cancelled).
    pub fn batch_check_open(&self, id: &[u8]) -> Result<(), BatchError> {
        match self.batches.entries.get(id) {
            None => Err(BatchError::NoBatch),
            Some(e) if e.state.has(F_COMMITTED) || e.state.has(F_CANCELLED) => {
                Err(BatchError::Closed)
            }
            Some(e) if e.state.members.len() >= MAX_MEMBERS => Err(BatchError::Full),
            Some(_) => Ok(()),
        }
    }

    /// Batches neither cancelled nor with every callback added.
    pub fn batch_open_count(&self) -> usize {
        self.batches
            .entries
            .values()
            .filter(|e| !batch_done(&e.state))
            .count()
    }

    /// Batches known here by BATCH STATUS state (one pass over the
    /// member sets: for INFO and scrapes, not per command).
    pub fn batch_totals(&self) -> BatchTotals {
        let mut t = BatchTotals::default();
        for e in self.batches.entries.values() {
            let n = match e.state.status().phase() {
                BatchPhase::Open => &mut t.open,
                BatchPhase::Committed => &mut t.committed,
                BatchPhase::Succeeded => &mut t.succeeded,
                BatchPhase::Failed => &mut t.failed,
                BatchPhase::Cancelled => &mut t.cancelled,
            };
            *n += 1;
        }
        t
    }

    /// BATCH COMMIT / CANCEL.
    pub fn batch_close(&mut self, id: &[u8], cancel: bool) -> Result<(), BatchError> {
        let Some(e) = self.batches.entries.get(id) else {
            return Err(BatchError::NoBatch);
        };
        if cancel && e.state.has(F_SUCCESS_DONE | F_COMPLETE_DONE) {
            return Err(BatchError::Closed);
        }
        // A COMMIT carries every member known here: the member deltas
        // still waiting for the next gathering must not arrive after it,
        // or a peer sees a committed batch with no member as finished and
        // adds its callbacks at once.
        let mut d = if cancel {
            BatchState::delta(&e.state.id)
        } else {
            self.batches.outbox.remove(id);
            e.state.clone()
        };
        d.flags = if cancel { F_CANCELLED } else { F_COMMITTED };
        self.batch_apply(d, true);
        Ok(())
    }

    /// The state of `id`, if known here.
    pub fn batch_get(&self, id: &[u8]) -> Option<&BatchState> {
        self.batches.entries.get(id).map(|e| &e.state)
    }

    /// Every batch ID known here, sorted.
    pub fn batch_ids(&self) -> Vec<Bytes> {
        self.batches.entries.keys().cloned().collect()
    }

    /// Callbacks this node added.
    pub fn batch_callbacks_added(&self) -> u64 {
        self.batches.callbacks_added
    }

    /// Merge a (partial) state; when it changed anything, persist it and,
    /// if `send`, send it to every node. Returns true if it changed.
    fn batch_apply(&mut self, d: BatchState, send: bool) -> bool {
        let changed = match self.batches.entries.get_mut(&d.id) {
            Some(e) => e.state.merge(&d),
            None => {
                self.batches.entries.insert(
                    d.id.clone(),
                    Entry {
                        state: d.clone(),
                        local: Local::default(),
                    },
                );
                true
            }
        };
        if changed {
            let data = d.encode();
            if self.aof {
                self.out.aof.push(AofRecord::Batch(data.clone()));
            }
            if send {
                self.broadcast(BusOut::Batch { data });
            }
        }
        changed
    }

    /// Merge a delta here (and in the AOF) now; send it with the next
    /// cron run.
    fn batch_apply_later(&mut self, d: BatchState) {
        if self.batch_apply(d.clone(), false) {
            match self.batches.outbox.get_mut(&d.id) {
                Some(o) => {
                    o.merge(&d);
                }
                None => {
                    self.batches.outbox.insert(d.id.clone(), d);
                }
            }
        }
    }

    /// A job carrying a batch ID was added (its ADDJOB succeeded here).
    pub(crate) fn batch_member_added(&mut self, h: JobHandle) {
        let Some(batch) = self.ext_of(h).and_then(|x| x.batch.clone()) else {
            return;
        };
        let Some(id) = self.store.get(h).map(|j| j.id) else {
            return;
        };
        let mut d = BatchState::delta(&batch);
        d.members.insert(id);
        self.batch_apply_later(d);
    }

    /// A batch member was acknowledged (`dead` = dead-lettered) here.
    pub(crate) fn batch_member_done(&mut self, h: JobHandle, dead: bool) {
        let Some(batch) = self.ext_of(h).and_then(|x| x.batch.clone()) else {
            return;
        };
        let Some(id) = self.store.get(h).map(|j| j.id) else {
            return;
        };
        let mut d = BatchState::delta(&batch);
        if dead {
            d.dead.insert(id);
        } else {
            d.acked.insert(id);
        }
        self.batch_apply_later(d);
    }

    /// BATCH frame from a peer.
    pub(crate) fn on_batch(&mut self, data: &Bytes) {
        if let Some(d) = BatchState::decode(data) {
            self.batch_apply(d, false);
        }
    }

    /// A link to `peer` came up: send it every batch not yet done.
    pub(crate) fn batch_sync_to(&mut self, peer: NodeIdx) {
        let all: Vec<Bytes> = self
            .batches
            .entries
            .values()
            .filter(|e| !batch_done(&e.state))
            .map(|e| e.state.encode())
            .collect();
        for data in all {
            self.out.bus.push((peer, BusOut::Batch { data }));
        }
    }

    /// AOF `BATCH` record; false if malformed.
    pub fn batch_load(&mut self, payload: &Bytes) -> bool {
        match BatchState::decode(payload) {
            Some(d) => {
                // Already in the AOF: merge without writing it again.
                let aof = std::mem::replace(&mut self.aof, false);
                self.batch_apply(d, false);
                self.aof = aof;
                true
            }
            None => false,
        }
    }

    /// Every batch as one AOF payload each (rewrites).
    pub fn batch_snapshot(&self) -> Vec<Bytes> {
        self.batches
            .entries
            .values()
            .map(|e| e.state.encode())
            .collect()
    }

    /// Where this node ranks for `id` among the nodes it can reach.
    fn batch_rank(&self, id: &[u8]) -> u64 {
        let me = self.cluster.my_id();
        let mine = (score(&me, id), me);
        self.cluster
            .reachable
            .iter()
            .filter_map(|&i| self.cluster.get(i))
            .filter(|n| (score(&n.id, id), n.id) > mine)
            .count() as u64
    }

    /// Every ~100 ms: resend unfinished batches now and then, and add the
    /// callbacks of finished ones.
    pub(crate) fn batch_cron(&mut self, now: u64) {
        if self.batches.entries.is_empty() {
            return;
        }
        for (_, d) in std::mem::take(&mut self.batches.outbox) {
            self.broadcast(BusOut::Batch { data: d.encode() });
        }
        let ids: Vec<Bytes> = self
            .batches
            .entries
            .iter()
            .filter(|(_, e)| e.state.has(F_COMMITTED) && !batch_done(&e.state))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.batch_settle(&id, now);
        }
    }

    fn batch_settle(&mut self, id: &Bytes, now: u64) {
        let rank = self.batch_rank(id);
        let Some(e) = self.batches.entries.get_mut(id) else {
            return;
        };
        // A big state costs every node a decode and a merge: resend it
        // less often (links that come up get it at once anyway).
        let every = RESYNC_MS + e.state.members.len() as u64 / 10;
        if now.saturating_sub(e.local.resent) >= every {
            e.local.resent = now;
            let data = e.state.encode();
            self.broadcast(BusOut::Batch { data });
        }
        let Some(e) = self.batches.entries.get_mut(id) else {
            return;
        };
        let sizes = (
            e.state.members.len(),
            e.state.acked.len(),
            e.state.dead.len(),
            e.state.flags,
        );
        if sizes != e.local.sizes {
            e.local.sizes = sizes;
            e.local.finished = e.state.finished();
        }
        if !e.local.finished {
            return;
        }
        if e.local.finished_at == 0 {
            e.local.finished_at = now;
        }
        let due = e.local.finished_at + rank * GRACE_MS;
        let failed = e.state.status().dead > 0;
        let state = e.state.clone();
        let tried = e.local.tried;
        let calls = [
            (
                0usize,
                "success",
                F_SUCCESS_DONE,
                state.on_success.clone().filter(|_| !failed),
            ),
            (
                1usize,
                "complete",
                F_COMPLETE_DONE,
                state.on_complete.clone(),
            ),
        ];
        for (slot, kind, flag, cb) in calls {
            if state.has(flag) {
                continue;
            }
            let Some(cb) = cb else {
                // Nothing to add: done as far as this callback goes.
                let mut d = BatchState::delta(id);
                d.flags = flag;
                self.batch_apply(d, true);
                continue;
            };
            let key = callback_key(id, kind);
            if self.dedup_lookup(&cb.queue, &key, now).is_some() {
                let mut d = BatchState::delta(id);
                d.flags = flag;
                self.batch_apply(d, true);
                continue;
            }
            if now < due || (tried[slot] != 0 && now < tried[slot] + FIRE_TIMEOUT_MS + 200) {
                continue;
            }
            let size = self.cluster.size() as u32;
            let repl = size.min(3).max(size / 2 + 1).min(size);
            if repl > self.cluster.reachable.len() as u32 + 1 {
                continue;
            }
            let ext = crate::domain::job_ext::JobExt {
                dedup_key: Some(key),
                // Commit the key only once the job is replicated.
                schedule_tick: true,
                ..Default::default()
            };
            let req = AddJobRequest {
                timeout: FIRE_TIMEOUT_MS,
                replicate: Some(repl),
                ext: Some(Box::new(ext)),
                ..AddJobRequest::new(cb.queue.clone(), cb.body.clone())
            };
            // An error leaves the callback due: tried again later.
            let _ = self.addjob(INTERNAL_CLIENT, req, now);
            self.batches.callbacks_added += 1;
            if let Some(e) = self.batches.entries.get_mut(id) {
                e.local.tried[slot] = now;
            }
        }
    }
}

/// Nothing left to do for this batch: cancelled, or both callbacks added.
fn batch_done(s: &BatchState) -> bool {
    s.has(F_CANCELLED) || s.has(F_SUCCESS_DONE) && s.has(F_COMPLETE_DONE)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn jid(n: u8) -> JobId {
        let mut s = *b"D-00000000-000000000000000000000000-0000";
        s[2] = b'0' + n / 10;
        s[3] = b'0' + n % 10;
        JobId::parse(&s).unwrap()
    }

    fn st(members: &[u8], acked: &[u8], dead: &[u8], flags: u8) -> BatchState {
        BatchState {
            id: Bytes::from_static(b"b1"),
            flags,
            on_success: Some(Callback {
                queue: Bytes::from_static(b"q"),
                body: Bytes::from_static(b"ok"),
            }),
            on_complete: None,
            members: members.iter().map(|&n| jid(n)).collect(),
            acked: acked.iter().map(|&n| jid(n)).collect(),
            dead: dead.iter().map(|&n| jid(n)).collect(),
        }
    }

    #[test]
    fn merge_is_a_union_and_order_does_not_matter() {
        let a = st(&[1, 2], &[1], &[], F_COMMITTED);
        let b = st(&[2, 3], &[3], &[2], 0);
        let c = st(&[], &[2], &[], F_SUCCESS_DONE);
        let mut x = a.clone();
        x.merge(&b);
        x.merge(&c);
        let mut y = c.clone();
        y.merge(&b);
        y.merge(&a);
        assert_eq!(x, y);
        assert_eq!(x.members.len(), 3);
        // Idempotent: merging again changes nothing.
        assert!(!x.merge(&a) && !x.merge(&b));
        assert!(x.has(F_COMMITTED) && x.has(F_SUCCESS_DONE));
    }

    #[test]
    fn status_counts_members_only_and_acked_wins_over_dead() {
        let s = st(&[1, 2, 3], &[1, 9], &[2, 1], F_COMMITTED);
        let v = s.status();
        assert_eq!((v.total, v.acked, v.dead, v.pending), (3, 1, 1, 1));
        assert!(!s.finished());
        let s = st(&[1, 2], &[1], &[2], F_COMMITTED);
        assert!(s.finished());
        // Not committed, or cancelled: never finished.
        assert!(!st(&[1], &[1], &[], 0).finished());
        assert!(!st(&[1], &[1], &[], F_COMMITTED | F_CANCELLED).finished());
    }

    #[test]
    fn encoding_round_trips_and_rejects_garbage() {
        let s = st(&[1, 2], &[1], &[2], F_COMMITTED);
        assert_eq!(BatchState::decode(&s.encode()).unwrap(), s);
        let enc = s.encode();
        for n in 0..enc.len() {
            assert!(BatchState::decode(&enc.slice(..n)).is_none(), "prefix {n}");
        }
        let mut long = enc.to_vec();
        long.push(0);
        assert!(BatchState::decode(&Bytes::from(long)).is_none());
    }

    const T0: u64 = 1_800_000_000_000;

    fn add(e: &mut Engine, body: &str, max_deliveries: u32, now: u64) -> JobId {
        let req = AddJobRequest {
            replicate: Some(1),
            retry: Some(1),
            ext: Some(Box::new(crate::domain::job_ext::JobExt {
                batch: Some(Bytes::from_static(b"b1")),
                max_deliveries,
                ..Default::default()
            })),
            ..AddJobRequest::new(Bytes::from_static(b"work"), Bytes::from(body.to_string()))
        };
        match e.addjob(1, req, now) {
            super::super::addjob::AddJobOutcome::Added(id) => id,
            _ => panic!("addjob"),
        }
    }

    fn get(e: &mut Engine, now: u64) -> Vec<JobId> {
        let req = super::super::getjob::GetJobRequest {
            nohang: true,
            timeout: 0,
            count: 10,
            withcounters: false,
            queues: vec![Bytes::from_static(b"work")],
        };
        match e.getjob(2, req, now) {
            super::super::getjob::GetJobOutcome::Jobs(j) => j.iter().map(|j| j.id).collect(),
            _ => Vec::new(),
        }
    }

    fn run(e: &mut Engine, from: u64, until: u64) {
        let mut t = from;
        while t <= until {
            e.tick(t);
            t += 100;
        }
    }

    #[test]
    fn a_dead_member_fails_the_batch_complete_fires_success_does_not() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        let cb = |q: &'static [u8]| {
            Some(Callback {
                queue: Bytes::from_static(q),
                body: Bytes::from_static(b"x"),
            })
        };
        let id = Bytes::from_static(b"b1");
        e.batch_create(Some(id.clone()), cb(b"ok"), cb(b"done"), T0)
            .unwrap();
        let a = add(&mut e, "a", 0, T0);
        let b = add(&mut e, "b", 1, T0);
        e.batch_close(&id, false).unwrap();
        assert_eq!(e.batch_check_open(b"b1"), Err(BatchError::Closed));
        let got = get(&mut e, T0 + 10);
        assert_eq!(got.len(), 2);
        e.ackjob(&[a], T0 + 20);
        run(&mut e, T0 + 100, T0 + 900);
        // b is unacknowledged: nothing yet.
        assert_eq!(e.queue_len(b"done"), 0);
        // Its retry dead-letters it (MAXDELIVERIES 1).
        run(&mut e, T0 + 1000, T0 + 6000);
        let v = e.batch_get(b"b1").unwrap().status();
        assert_eq!((v.total, v.acked, v.dead, v.pending), (2, 1, 1, 0), "{b:?}");
        assert_eq!(e.queue_len(b"done"), 1);
        assert_eq!(e.queue_len(b"ok"), 0);
        assert!(v.complete_added && v.success_added);
        assert_eq!(e.batch_callbacks_added(), 1);
        assert_eq!(e.batch_open_count(), 0);
    }

    #[test]
    fn keys_name_the_batch() {
        assert_eq!(&callback_key(b"b1", "success")[..], b"batch:b1:success");
    }
}
