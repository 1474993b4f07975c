//! Leaderless recurring jobs (`SCHEDULE ...`, docs/COMMANDS.md#schedule).
//!
//! This module owns the schedule table: the definitions (replicated to
//! every node, newest version wins, kept in the AOF) and, per node, which
//! ticks are still waiting for their job.
//!
//! No node is in charge of a schedule. Every node computes the same tick
//! instants (a fixed interval counted from the Unix epoch, or a cron
//! expression in a time zone) and, for each tick, the same job: the
//! schedule's queue and body with the DEDUP key `sched:<name>:<tick ms>`.
//! The node that ranks first for the tick (rendezvous hashing of the
//! schedule name and tick over the nodes it can reach) adds it at the tick;
//! the node ranked r-th adds it `r × GRACE` ms later if by then it has not
//! heard of the key. Adding goes through ADDJOB with synchronous
//! replication to a majority of the cluster by default, and the key is
//! committed (and sent to every node) only once the job is replicated, so:
//!
//! * a tick is never lost to a crash or a partition while some majority
//!   of nodes can talk: whichever of them ranks first among the survivors
//!   adds the job, and a side without a majority cannot replicate, so it
//!   retries until it can (or the key arrives);
//! * a tick is added twice only when two nodes add it before either hears
//!   of the other's key (clock skew larger than the grace period, a lost
//!   DEDUP message followed by a slow reconnect); every node counts the
//!   ticks it added and the ticks it found already added.
//!
//! Clock skew moves *when* a node fires a tick, never *which* tick: the
//! tick instant is part of the key, so every node names a tick alike.
//!
//! A tick stays pending on a node until it sees the key, for at most the
//! DEDUP window (after that no node could tell whether it was added).
//! Pending ticks live in memory only: a node that starts takes up the
//! ticks still in some node's turn (N × GRACE and the settle delays), so
//! a rolling restart that stops every node between a tick and its turn
//! does not lose it.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use sha2::{Digest, Sha256};

use super::addjob::{AddJobOutcome, AddJobRequest};
use super::{AofRecord, BusOut, Engine};
use crate::domain::job::{JobId, JobState, NodeIdx};

/// The client ID of the ADDJOBs a schedule makes: no connection has it,
/// and wakes addressed to it are dropped.
pub const INTERNAL_CLIENT: super::ClientId = u64::MAX;
/// Default GRACE: how long the node ranked r-th waits (r × GRACE) before
/// adding a tick it has not heard of.
pub const DEFAULT_GRACE_MS: u32 = 2000;
/// How long a schedule's ADDJOB waits for replication before it gives up
/// (the tick then stays pending and is tried again).
const FIRE_TIMEOUT_MS: u64 = 5000;
/// Ticks a node keeps pending per schedule; older ones are dropped first.
const MAX_PENDING: usize = 1024;
/// Ticks enumerated per schedule per cron run.
const MAX_NEW_TICKS: usize = 4096;
/// A tick more than this late for this node (past its rank's due time)
/// is a "late" tick: one the cluster could not add when it was due, or
/// one this node could not see being added (it was cut off).
const LATE_MS: u64 = 1000;
/// A node adds late ticks only after its view of the cluster has been
/// unchanged this long, so that the keys its peers send when links come
/// up (a healed partition) arrive first.
const SETTLE_MS: u64 = 3000;
/// Prefix of the DEDUP key of a tick's job.
pub const KEY_PREFIX: &[u8] = b"sched:";

/// When ticks happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// Every `n` ms, at multiples of `n` since the Unix epoch (so every
    /// node computes the same instants).
    Every(u64),
    /// A cron expression (5 fields, or 6 with seconds first) in an IANA
    /// time zone.
    Cron { expr: String, tz: String },
}

/// Why a definition does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("invalid cron expression: {0}")]
    Cron(String),
    #[error("unknown time zone '{0}'")]
    TimeZone(String),
    #[error("interval must be at least one second")]
    Interval,
}

/// A compiled [`Spec`].
#[derive(Clone)]
pub enum Timer {
    Every(u64),
    Cron(Box<croner::Cron>, chrono_tz::Tz),
}

impl Spec {
    /// Parse and check: the cron expression with croner (5 or 6 fields),
    /// the zone with chrono-tz.
    pub fn compile(&self) -> Result<Timer, SpecError> {
        match self {
            // SCHEDULE ADD takes whole seconds; a shorter interval can only
            // come from a corrupt or foreign definition, and would make
            // every node enumerate thousands of ticks per cron run.
            Spec::Every(ms) if *ms < 1000 => Err(SpecError::Interval),
            Spec::Every(ms) => Ok(Timer::Every(*ms)),
            Spec::Cron { expr, tz } => {
                let fields = expr.split_whitespace().count();
                if !(5..=6).contains(&fields) {
                    return Err(SpecError::Cron(format!(
                        "expected 5 or 6 fields, got {fields}"
                    )));
                }
                let cron = croner::parser::CronParser::builder()
                    .seconds(croner::parser::Seconds::Optional)
                    .year(croner::parser::Year::Disallowed)
                    .build()
                    .parse(expr)
                    .map_err(|e| SpecError::Cron(e.to_string()))?;
                let zone: chrono_tz::Tz =
                    tz.parse().map_err(|_| SpecError::TimeZone(tz.clone()))?;
                Ok(Timer::Cron(Box::new(cron), zone))
            }
        }
    }
}

impl Timer {
    /// The first tick strictly after `after` (unix ms).
    pub fn next_after(&self, after: u64) -> Option<u64> {
        match self {
            Timer::Every(n) => (after / n).checked_add(1)?.checked_mul(*n),
            Timer::Cron(cron, tz) => {
                use chrono::TimeZone;
                let at = tz
                    .timestamp_millis_opt(i64::try_from(after).ok()?)
                    .single()?;
                let next = cron.find_next_occurrence(&at, false).ok()?;
                u64::try_from(next.timestamp_millis()).ok()
            }
        }
    }
}

/// One schedule's definition: what every node stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleDef {
    pub name: Bytes,
    pub spec: Spec,
    pub queue: Bytes,
    pub body: Bytes,
    /// REPLICATE of the tick jobs; 0 = a majority of the cluster.
    pub replicate: u32,
    pub retry: Option<u32>,
    pub ttl: Option<u32>,
    /// Seconds of missed ticks a node adds when it (re)starts or learns
    /// the schedule; 0 = none.
    pub catchup: u32,
    pub grace: u32,
    /// OVERLAP skip: do not add a tick while the previous tick's job is
    /// still unacknowledged (as far as this node can tell).
    pub skip_overlap: bool,
    pub paused: bool,
    /// A deletion is a newer version with this flag (a tombstone), so a
    /// node that missed it cannot bring the schedule back.
    pub deleted: bool,
    /// Creation of the first version (unix ms): no tick before it.
    pub created: u64,
    /// Last-writer-wins order: (ms, ID of the node that wrote it).
    pub version: u64,
    pub origin: [u8; 40],
}

const FLAG_PAUSED: u8 = 1;
const FLAG_DELETED: u8 = 2;
const FLAG_SKIP: u8 = 4;
const FLAG_RETRY: u8 = 8;
const FLAG_TTL: u8 = 16;
const KIND_EVERY: u8 = 0;
const KIND_CRON: u8 = 1;

impl ScheduleDef {
    /// Binary record (bus SCHEDULE frames and AOF `SCHEDULE` records):
    /// u8 format (1), u64 version, origin[40], u64 created, u8 flags,
    /// u8 kind, u64 interval ms, u32 replicate, u32 retry, u32 ttl,
    /// u32 catchup, u32 grace, then five u32-length-prefixed strings:
    /// name, cron expression, time zone, queue, body (big-endian).
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(128 + self.body.len());
        b.put_u8(1);
        b.put_u64(self.version);
        b.put_slice(&self.origin);
        b.put_u64(self.created);
        let mut flags = 0;
        for (on, f) in [
            (self.paused, FLAG_PAUSED),
            (self.deleted, FLAG_DELETED),
            (self.skip_overlap, FLAG_SKIP),
            (self.retry.is_some(), FLAG_RETRY),
            (self.ttl.is_some(), FLAG_TTL),
        ] {
            if on {
                flags |= f;
            }
        }
        b.put_u8(flags);
        let (kind, every, expr, tz) = match &self.spec {
            Spec::Every(ms) => (KIND_EVERY, *ms, "", ""),
            Spec::Cron { expr, tz } => (KIND_CRON, 0, expr.as_str(), tz.as_str()),
        };
        b.put_u8(kind);
        b.put_u64(every);
        for v in [
            self.replicate,
            self.retry.unwrap_or(0),
            self.ttl.unwrap_or(0),
            self.catchup,
            self.grace,
        ] {
            b.put_u32(v);
        }
        for s in [
            &self.name[..],
            expr.as_bytes(),
            tz.as_bytes(),
            &self.queue[..],
            &self.body[..],
        ] {
            b.put_u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
            b.put_slice(s);
        }
        b.freeze()
    }

    /// Inverse of [`ScheduleDef::encode`]; None for anything malformed
    /// (wrong format byte, short, trailing bytes, non-UTF-8 spec).
    pub fn decode(src: &Bytes) -> Option<ScheduleDef> {
        let mut pos = 0usize;
        let mut take = |n: usize| -> Option<Bytes> {
            let end = pos.checked_add(n)?;
            if end > src.len() {
                return None;
            }
            let s = src.slice(pos..end);
            pos = end;
            Some(s)
        };
        let u8_ = |b: Bytes| b.first().copied();
        let u32_ = |b: Bytes| Some(u32::from_be_bytes(b[..].try_into().ok()?));
        let u64_ = |b: Bytes| Some(u64::from_be_bytes(b[..].try_into().ok()?));
        if u8_(take(1)?)? != 1 {
            return None;
        }
        let version = u64_(take(8)?)?;
        let origin: [u8; 40] = take(40)?[..].try_into().ok()?;
        let created = u64_(take(8)?)?;
        let flags = u8_(take(1)?)?;
        let kind = u8_(take(1)?)?;
        let every = u64_(take(8)?)?;
        let mut ints = [0u32; 5];
        for v in &mut ints {
            *v = u32_(take(4)?)?;
        }
        let mut strs: Vec<Bytes> = Vec::with_capacity(5);
        for _ in 0..5 {
            let n = u32_(take(4)?)? as usize;
            strs.push(take(n)?);
        }
        if pos != src.len() {
            return None;
        }
        let text = |b: &Bytes| String::from_utf8(b.to_vec()).ok();
        let spec = match kind {
            KIND_EVERY => Spec::Every(every),
            KIND_CRON => Spec::Cron {
                expr: text(&strs[1])?,
                tz: text(&strs[2])?,
            },
            _ => return None,
        };
        let [replicate, retry, ttl, catchup, grace] = ints;
        Some(ScheduleDef {
            name: strs[0].clone(),
            spec,
            queue: strs[3].clone(),
            body: strs[4].clone(),
            replicate,
            retry: (flags & FLAG_RETRY != 0).then_some(retry),
            ttl: (flags & FLAG_TTL != 0).then_some(ttl),
            catchup,
            grace,
            skip_overlap: flags & FLAG_SKIP != 0,
            paused: flags & FLAG_PAUSED != 0,
            deleted: flags & FLAG_DELETED != 0,
            created,
            version,
            origin,
        })
    }

    fn newer_than(&self, other: &ScheduleDef) -> bool {
        (self.version, self.origin) > (other.version, other.origin)
    }
}

/// The DEDUP key of a schedule's tick.
pub fn tick_key(name: &[u8], tick: u64) -> Bytes {
    let mut k = Vec::with_capacity(KEY_PREFIX.len() + name.len() + 21);
    k.extend_from_slice(KEY_PREFIX);
    k.extend_from_slice(name);
    k.push(b':');
    k.extend_from_slice(tick.to_string().as_bytes());
    Bytes::from(k)
}

/// This node's view of one schedule's ticks (not replicated).
#[derive(Default, Clone, Debug)]
struct Local {
    /// Ticks at or before this instant were enumerated.
    cursor: u64,
    /// Ticks waiting for their key: tick -> when this node last tried
    /// to add it (0 = never).
    pending: BTreeMap<u64, u64>,
    /// The newest tick known added, and its job.
    last_tick: u64,
    last_job: Option<JobId>,
    stats: TickStats,
}

/// Tick counters (per schedule, and the table's totals).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickStats {
    /// Ticks settled after this node tried to add them.
    pub fired: u64,
    /// Ticks settled by another node's job, without trying here.
    pub deduplicated: u64,
    /// Ticks not added because the previous tick was unacknowledged.
    pub skipped: u64,
    /// Ticks given up after the DEDUP window without seeing their key.
    pub expired: u64,
}

impl TickStats {
    fn add(&mut self, o: &TickStats) {
        self.fired += o.fired;
        self.deduplicated += o.deduplicated;
        self.skipped += o.skipped;
        self.expired += o.expired;
    }
}

struct Entry {
    def: ScheduleDef,
    timer: Option<Timer>,
    local: Local,
}

/// Every schedule this node knows, tombstones included.
#[derive(Default)]
pub struct ScheduleTable {
    entries: BTreeMap<Bytes, Entry>,
    /// Counters of schedules that were deleted since (so totals never go down).
    retired: TickStats,
    /// Since when the set of reachable nodes is unchanged (late ticks
    /// wait for `SETTLE_MS` of it), and that set's size.
    stable_since: u64,
    reachable: usize,
    /// The first cron run of this process: a node that just started
    /// fires nothing for `SETTLE_MS`, since its peers may still count it
    /// as failed (and rank without it) while it ranks with them.
    started: u64,
}

impl ScheduleTable {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A schedule as SCHEDULE LIST / SHOW and the dashboard show it.
#[derive(Clone, Debug)]
pub struct ScheduleView {
    pub def: ScheduleDef,
    /// The next tick after now (None when paused or the cron never fires again).
    pub next_tick: Option<u64>,
    /// The newest tick this node knows was added, 0 = none yet.
    pub last_tick: u64,
    pub last_job: Option<JobId>,
    pub pending: usize,
    pub stats: TickStats,
}

/// Rendezvous score of a node for a tick: the same on every node.
fn score(node: &[u8; 40], name: &[u8], tick: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(node);
    h.update(name);
    h.update(tick.to_be_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

impl Engine {
    /// A local SCHEDULE ADD / DEL / PAUSE / RESUME: stamp the definition
    /// newer than any version this node has seen, adopt it and send it to
    /// every node.
    pub fn schedule_put(&mut self, mut def: ScheduleDef, now: u64) {
        let old = self.schedules.entries.get(&def.name).map(|e| &e.def);
        def.version = now.max(old.map_or(0, |o| o.version.saturating_add(1)));
        def.origin = self.cluster.my_id();
        def.created = match old {
            Some(o) if !o.deleted => o.created,
            _ => now,
        };
        if self.schedule_adopt(def.clone(), now) {
            self.broadcast(BusOut::Schedule { data: def.encode() });
        }
    }

    /// The definition of `name` (tombstones are None).
    pub fn schedule_def(&self, name: &[u8]) -> Option<&ScheduleDef> {
        self.schedules
            .entries
            .get(name)
            .map(|e| &e.def)
            .filter(|d| !d.deleted)
    }

    /// Keep `def` if it is newer than what we have. Returns true if kept.
    fn schedule_adopt(&mut self, def: ScheduleDef, now: u64) -> bool {
        if let Some(e) = self.schedules.entries.get(&def.name) {
            if !def.newer_than(&e.def) {
                return false;
            }
        }
        // A definition that does not compile here (a zone this build does
        // not know) is kept, so it replicates and persists, but fires nothing.
        let timer = def.spec.compile().ok();
        if self.aof {
            self.out.aof.push(AofRecord::Schedule(def.encode()));
        }
        let catchup = u64::from(def.catchup) * 1000;
        let start = def.created.max(now.saturating_sub(catchup));
        match self.schedules.entries.get_mut(&def.name) {
            Some(e) => {
                let revived = e.def.deleted && !def.deleted;
                if def.deleted {
                    self.schedules.retired.add(&e.local.stats);
                    e.local = Local::default();
                } else if revived || e.def.spec != def.spec {
                    e.local.pending.clear();
                    e.local.cursor = start;
                }
                e.def = def;
                e.timer = timer;
            }
            None => {
                // First sight (a start, or a definition from a peer): the
                // ticks still in some rank's turn are taken up too, so a
                // rolling restart that stops every node between a tick and
                // its turn loses none (peers' keys arrive before it adds).
                let in_turn = self.schedule_in_turn(def.grace);
                let local = Local {
                    cursor: def.created.max(now.saturating_sub(catchup.max(in_turn))),
                    ..Local::default()
                };
                self.schedules
                    .entries
                    .insert(def.name.clone(), Entry { def, timer, local });
            }
        }
        true
    }

    /// SCHEDULE frame from a peer.
    pub(crate) fn on_schedule(&mut self, data: &Bytes, now: u64) {
        if let Some(def) = ScheduleDef::decode(data) {
            self.schedule_adopt(def, now);
        }
    }

    /// A link to `peer` came up: send it every definition (tombstones too),
    /// so a new or restarted node learns them.
    pub(crate) fn schedule_sync_to(&mut self, peer: NodeIdx, now: u64) {
        // A link came up: keys from that peer may be on their way.
        self.schedules.stable_since = now;
        let all: Vec<Bytes> = self
            .schedules
            .entries
            .values()
            .map(|e| e.def.encode())
            .collect();
        for data in all {
            self.out.bus.push((peer, BusOut::Schedule { data }));
        }
    }

    /// AOF `SCHEDULE` record; false if malformed.
    pub fn schedule_load(&mut self, payload: &Bytes, now: u64) -> bool {
        match ScheduleDef::decode(payload) {
            Some(def) => {
                self.schedule_adopt(def, now);
                true
            }
            None => false,
        }
    }

    /// What a restart with the AOF leaves of the schedule table: the
    /// definitions, loaded again at `now`; pending ticks and counters are
    /// gone with the process (the simulation's restarts).
    #[cfg(test)]
    pub(crate) fn schedule_reload(&mut self, now: u64) {
        let defs = self.schedule_snapshot();
        self.schedules = ScheduleTable::default();
        for d in defs {
            self.schedule_load(&d, now);
        }
    }

    /// Every definition as AOF payloads (rewrites).
    pub fn schedule_snapshot(&self) -> Vec<Bytes> {
        self.schedules
            .entries
            .values()
            .map(|e| e.def.encode())
            .collect()
    }

    /// Live schedules, by name.
    pub fn schedule_views(&self, now: u64) -> Vec<ScheduleView> {
        self.schedules
            .entries
            .values()
            .filter(|e| !e.def.deleted)
            .map(|e| ScheduleView {
                def: e.def.clone(),
                next_tick: if e.def.paused {
                    None
                } else {
                    e.timer.as_ref().and_then(|t| t.next_after(now))
                },
                last_tick: e.local.last_tick,
                last_job: e.local.last_job,
                pending: e.local.pending.len(),
                stats: e.local.stats,
            })
            .collect()
    }

    /// Live schedules (metrics).
    pub fn schedule_count(&self) -> usize {
        self.schedules
            .entries
            .values()
            .filter(|e| !e.def.deleted)
            .count()
    }

    /// Totals over every schedule, deleted ones included (metrics).
    pub fn schedule_totals(&self) -> TickStats {
        let mut t = self.schedules.retired;
        for e in self.schedules.entries.values() {
            t.add(&e.local.stats);
        }
        t
    }

    /// How long after its instant a tick may still wait for some node's
    /// turn: every rank's GRACE, then the settle delay a changed view adds
    /// and the lateness margin. 0 for a node alone (no one else's turn).
    fn schedule_in_turn(&self, grace: u32) -> u64 {
        let nodes = self.cluster.size() as u64;
        if nodes < 2 {
            return 0;
        }
        nodes * u64::from(grace) + SETTLE_MS + LATE_MS
    }

    /// Where this node ranks for `tick` of `name` among the nodes it can
    /// reach (0 = preferred).
    fn schedule_rank(&self, name: &[u8], tick: u64) -> u64 {
        let me = self.cluster.my_id();
        let mine = (score(&me, name, tick), me);
        self.cluster
            .reachable
            .iter()
            .filter_map(|&i| self.cluster.get(i))
            .filter(|n| (score(&n.id, name, tick), n.id) > mine)
            .count() as u64
    }

    /// Every ~100 ms: enumerate due ticks, settle the ones whose key is
    /// known, add the ones this node is due to add.
    pub(crate) fn schedule_cron(&mut self, now: u64) {
        if self.schedules.is_empty() {
            return;
        }
        let names: Vec<Bytes> = self
            .schedules
            .entries
            .iter()
            .filter(|(_, e)| !e.def.deleted && !e.def.paused && e.timer.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        if self.schedules.started == 0 {
            self.schedules.started = now;
        }
        let reachable = self.cluster.reachable.len();
        if reachable != self.schedules.reachable {
            self.schedules.reachable = reachable;
            self.schedules.stable_since = now;
        }
        for name in names {
            self.schedule_enumerate(&name, now);
            self.schedule_settle(&name, now);
        }
    }

    fn schedule_enumerate(&mut self, name: &Bytes, now: u64) {
        let Some(e) = self.schedules.entries.get_mut(name) else {
            return;
        };
        let Some(timer) = e.timer.as_ref() else {
            return;
        };
        for _ in 0..MAX_NEW_TICKS {
            match timer.next_after(e.local.cursor) {
                Some(t) if t <= now => {
                    e.local.cursor = t;
                    e.local.pending.insert(t, 0);
                }
                _ => break,
            }
        }
        while e.local.pending.len() > MAX_PENDING {
            e.local.pending.pop_first();
            e.local.stats.expired += 1;
        }
    }

    fn schedule_settle(&mut self, name: &Bytes, now: u64) {
        let Some(e) = self.schedules.entries.get(name) else {
            return;
        };
        let def = e.def.clone();
        let ticks: Vec<(u64, u64)> = e.local.pending.iter().map(|(&t, &a)| (t, a)).collect();
        let window = self.dedup_window.saturating_mul(1000);
        let size = self.cluster.size() as u32;
        let repl = if def.replicate == 0 {
            size / 2 + 1
        } else {
            def.replicate
        };
        // OVERLAP skip decides a tick on the previous tick's job: while
        // an earlier tick is being added here, later ones wait for it.
        let mut earlier_in_flight = false;
        for (tick, tried) in ticks {
            let key = tick_key(name, tick);
            if let Some(id) = self.dedup_lookup(&def.queue, &key, now) {
                if let Some(e) = self.schedules.entries.get_mut(name) {
                    e.local.pending.remove(&tick);
                    // A tick this node tried counts as its own, even if
                    // another node's job for it won (smaller ID).
                    if tried != 0 {
                        e.local.stats.fired += 1;
                    } else {
                        e.local.stats.deduplicated += 1;
                    }
                    if tick >= e.local.last_tick {
                        e.local.last_tick = tick;
                        e.local.last_job = Some(id);
                    }
                }
                continue;
            }
            if now.saturating_sub(tick) >= window {
                if let Some(e) = self.schedules.entries.get_mut(name) {
                    e.local.pending.remove(&tick);
                    e.local.stats.expired += 1;
                }
                continue;
            }
            if tried != 0 && now < tried + FIRE_TIMEOUT_MS + 200 {
                earlier_in_flight = true;
                continue;
            }
            if def.skip_overlap && earlier_in_flight {
                continue;
            }
            // Without enough reachable nodes the ADDJOB would only fail:
            // wait for the cluster (or the key) quietly.
            if repl > self.cluster.reachable.len() as u32 + 1 {
                continue;
            }
            // Ranks stay staggered after a wait, so that the nodes
            // released by one event do not all add the tick at once.
            let stagger = self.schedule_rank(name, tick) * u64::from(def.grace);
            let mut due = tick + stagger;
            if now > due + LATE_MS {
                due = due.max(self.schedules.stable_since + SETTLE_MS + stagger);
            }
            due = due.max(self.schedules.started + SETTLE_MS + stagger);
            if now < due {
                continue;
            }
            if def.skip_overlap && self.schedule_previous_unacked(name) {
                self.schedule_skip(name, &def.queue, key, tick, now);
                continue;
            }
            self.schedule_fire(&def, repl, key, tick, now);
            earlier_in_flight = true;
        }
    }

    /// OVERLAP skip: the previous tick's job is here and not acknowledged.
    fn schedule_previous_unacked(&self, name: &Bytes) -> bool {
        let Some(id) = self
            .schedules
            .entries
            .get(name)
            .and_then(|e| e.local.last_job)
        else {
            return false;
        };
        self.lookup(&id)
            .and_then(|h| self.job(h))
            .is_some_and(|j| j.state != JobState::Acked)
    }

    /// Settle a tick without a job: its key names the previous tick's job,
    /// and every node learns it like any DEDUP key.
    fn schedule_skip(&mut self, name: &Bytes, queue: &Bytes, key: Bytes, tick: u64, now: u64) {
        let Some(e) = self.schedules.entries.get_mut(name) else {
            return;
        };
        let Some(prev) = e.local.last_job else { return };
        e.local.pending.remove(&tick);
        e.local.stats.skipped += 1;
        self.dedup_record(queue.clone(), key, prev, now);
    }

    fn schedule_fire(&mut self, def: &ScheduleDef, repl: u32, key: Bytes, tick: u64, now: u64) {
        let ext = crate::domain::job_ext::JobExt {
            dedup_key: Some(key),
            schedule_tick: true,
            ..Default::default()
        };
        let req = AddJobRequest {
            timeout: FIRE_TIMEOUT_MS,
            replicate: Some(repl),
            retry: def.retry,
            ttl: def.ttl,
            ext: Some(Box::new(ext)),
            ..AddJobRequest::new(def.queue.clone(), def.body.clone())
        };
        // An error (NOREPL: the cluster changed since the check) leaves
        // the tick pending like a replication timeout: tried again later.
        let _ = matches!(
            self.addjob(INTERNAL_CLIENT, req, now),
            AddJobOutcome::Error(_)
        );
        if let Some(t) = self
            .schedules
            .entries
            .get_mut(&def.name)
            .and_then(|e| e.local.pending.get_mut(&tick))
        {
            *t = now;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn def() -> ScheduleDef {
        ScheduleDef {
            name: Bytes::from_static(b"nightly"),
            spec: Spec::Cron {
                expr: "0 3 * * *".into(),
                tz: "Europe/Paris".into(),
            },
            queue: Bytes::from_static(b"reports"),
            body: Bytes::from_static(b"run"),
            replicate: 2,
            retry: Some(30),
            ttl: None,
            catchup: 600,
            grace: 1500,
            skip_overlap: true,
            paused: false,
            deleted: false,
            created: 5,
            version: 7,
            origin: [b'a'; 40],
        }
    }

    #[test]
    fn definitions_round_trip_and_reject_garbage() {
        let d = def();
        let b = d.encode();
        assert_eq!(ScheduleDef::decode(&b), Some(d.clone()));
        for cut in 0..b.len() {
            assert_eq!(ScheduleDef::decode(&b.slice(..cut)), None, "cut {cut}");
        }
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(ScheduleDef::decode(&Bytes::from(long)), None);
        let mut every = d;
        every.spec = Spec::Every(1000);
        every.retry = None;
        assert_eq!(ScheduleDef::decode(&every.encode()), Some(every));
    }

    #[test]
    fn intervals_tick_on_epoch_multiples() {
        let t = Spec::Every(1000).compile().unwrap();
        assert_eq!(t.next_after(0), Some(1000));
        assert_eq!(t.next_after(1999), Some(2000));
        assert_eq!(t.next_after(2000), Some(3000));
        assert_eq!(Spec::Every(0).compile().err(), Some(SpecError::Interval));
        assert_eq!(Spec::Every(999).compile().err(), Some(SpecError::Interval));
    }

    #[test]
    fn cron_ticks_follow_the_time_zone() {
        // 2026-03-28 12:00 UTC; Paris switches to summer time on the 29th.
        let start = 1_774_699_200_000;
        let t = def().spec.compile().unwrap();
        let first = t.next_after(start).unwrap();
        // 03:00 Paris on the 29th is 01:00 UTC (UTC+2 from 02:00 that night).
        assert_eq!(first, 1_774_746_000_000);
        let second = t.next_after(first).unwrap();
        assert_eq!(second - first, 86_400_000);
        let secs = Spec::Cron {
            expr: "*/5 * * * * *".into(),
            tz: "UTC".into(),
        }
        .compile()
        .unwrap();
        assert_eq!(secs.next_after(1_000), Some(5_000));
    }

    #[test]
    fn bad_specs_are_refused() {
        for (expr, tz) in [
            ("* * *", "UTC"),
            ("61 * * * *", "UTC"),
            ("* * * * * * *", "UTC"),
            ("* * * * *", "Mars/Olympus"),
        ] {
            assert!(
                Spec::Cron {
                    expr: expr.into(),
                    tz: tz.into()
                }
                .compile()
                .is_err(),
                "{expr} {tz}"
            );
        }
    }

    #[test]
    fn newest_version_wins_ties_broken_by_origin() {
        let a = def();
        let mut b = def();
        b.origin = [b'b'; 40];
        assert!(b.newer_than(&a));
        assert!(!a.newer_than(&b));
        let mut c = def();
        c.version = 8;
        assert!(c.newer_than(&b));
    }

    const T0: u64 = 1_800_000_000_000;

    fn every(name: &str, secs: u64) -> ScheduleDef {
        ScheduleDef {
            name: Bytes::copy_from_slice(name.as_bytes()),
            spec: Spec::Every(secs * 1000),
            queue: Bytes::from_static(b"q"),
            replicate: 1,
            retry: Some(30),
            skip_overlap: false,
            catchup: 0,
            ..def()
        }
    }

    /// Run the engine's timer every 100 ms up to `until`.
    fn run(e: &mut Engine, from: u64, until: u64) {
        let mut t = from;
        while t <= until {
            e.tick(t);
            t += 100;
        }
    }

    fn stats(e: &Engine, name: &str) -> TickStats {
        e.schedule_views(0)
            .into_iter()
            .find(|v| &v.def.name[..] == name.as_bytes())
            .map(|v| v.stats)
            .unwrap()
    }

    #[test]
    fn a_single_node_adds_every_tick_once() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        e.schedule_put(every("s", 1), T0);
        // A tick is counted when its key is seen, at the next run after
        // it was added.
        run(&mut e, T0, T0 + 10_200);
        // Ticks T0+1s..T0+10s; the first ones wait for the start delay
        // and are added late, none twice.
        let missing: Vec<u64> = (1..=10)
            .filter(|k| {
                e.dedup_lookup(b"q", &tick_key(b"s", T0 + k * 1000), T0 + 10_000)
                    .is_none()
            })
            .collect();
        assert_eq!(missing, Vec::<u64>::new());
        assert_eq!(e.queue_len(b"q"), 10);
        assert_eq!(stats(&e, "s").fired, 10);
        for k in 1..=10 {
            let key = tick_key(b"s", T0 + k * 1000);
            assert!(
                e.dedup_lookup(b"q", &key, T0 + 10_000).is_some(),
                "tick {k}"
            );
        }
    }

    #[test]
    fn paused_and_deleted_schedules_add_nothing() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        e.schedule_put(
            ScheduleDef {
                paused: true,
                ..every("p", 1)
            },
            T0,
        );
        e.schedule_put(every("d", 1), T0);
        e.schedule_put(
            ScheduleDef {
                deleted: true,
                ..every("d", 1)
            },
            T0 + 1,
        );
        run(&mut e, T0, T0 + 6_000);
        assert_eq!(e.queue_len(b"q"), 0);
        assert!(e.schedule_def(b"d").is_none());
        assert_eq!(e.schedule_count(), 1);
    }

    #[test]
    fn overlap_skip_waits_for_the_previous_tick_to_be_acked() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        e.schedule_put(
            ScheduleDef {
                skip_overlap: true,
                ..every("o", 1)
            },
            T0,
        );
        run(&mut e, T0, T0 + 3_000);
        // The start delay released ticks 1..3 together: the first is
        // added, the others fold into it.
        assert_eq!(e.queue_len(b"q"), 1);
        run(&mut e, T0 + 3_100, T0 + 6_000);
        assert_eq!(e.queue_len(b"q"), 1, "unacked: every later tick skipped");
        let s = stats(&e, "o");
        assert_eq!((s.fired, s.skipped), (1, 5));
        // A skipped tick's key names the job that covered it.
        let first = e.dedup_lookup(b"q", &tick_key(b"o", T0 + 1000), T0 + 6_000);
        let fifth = e.dedup_lookup(b"q", &tick_key(b"o", T0 + 5000), T0 + 6_000);
        assert!(first.is_some());
        assert_eq!(first, fifth);
        let id = first.unwrap();
        assert_eq!(e.ackjob(&[id], T0 + 6_050), 1);
        run(&mut e, T0 + 6_100, T0 + 7_200);
        assert_eq!(stats(&e, "o").fired, 2, "acked: the next tick is added");
    }

    #[test]
    fn catchup_adds_missed_ticks_after_a_restart_within_its_bound() {
        // The definition was written an hour ago (an AOF record), the
        // node starts now: ticks of the last CATCHUP seconds are added.
        let old = ScheduleDef {
            catchup: 5,
            created: T0 - 3_600_000,
            version: T0 - 3_600_000,
            ..every("c", 1)
        };
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        assert!(e.schedule_load(&old.encode(), T0));
        run(&mut e, T0, T0 + 4_000);
        // T0-5s+1s .. T0 (5 ticks caught up) and T0+1s..T0+4s.
        assert_eq!(e.queue_len(b"q"), 9);
        let none = ScheduleDef {
            catchup: 0,
            ..old.clone()
        };
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        assert!(e.schedule_load(&none.encode(), T0));
        run(&mut e, T0, T0 + 4_000);
        assert_eq!(e.queue_len(b"q"), 4);
        assert!(!e.schedule_load(&Bytes::from_static(b"junk"), T0));
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, T0);
        e.schedule_put(every("v", 1), T0);
        let current = e.schedule_def(b"v").cloned().unwrap();
        let stale = ScheduleDef {
            version: current.version - 1,
            origin: [b'z'; 40],
            spec: Spec::Every(5000),
            ..current.clone()
        };
        e.on_schedule(&stale.encode(), T0);
        assert_eq!(e.schedule_def(b"v"), Some(&current));
        let newer = ScheduleDef {
            version: current.version + 1,
            ..stale
        };
        e.on_schedule(&newer.encode(), T0);
        assert_eq!(
            e.schedule_def(b"v").map(|d| &d.spec),
            Some(&Spec::Every(5000))
        );
        // A local edit is stamped past anything seen, whatever the clock.
        e.schedule_put(every("v", 2), T0 - 10_000);
        assert!(e.schedule_def(b"v").unwrap().version > newer.version);
    }

    #[test]
    fn keys_name_schedule_and_tick() {
        assert_eq!(&tick_key(b"s", 1234)[..], b"sched:s:1234");
    }
}
