//! The engine: the single owner of a node's job state (jobs, queues,
//! blocked clients, scheduler, node table). It performs no I/O and reads no
//! clock: every entry point takes `now` (unix ms) and leaves its side
//! effects (AOF records, bus messages) in `Engine::out`, to be drained by the
//! shell in engine order. Blocked clients are client IDs; the end of
//! their wait leaves as a domain `Wake` in the wake outbox (`wake`).

pub mod ack;
pub mod addjob;
pub mod after;
pub mod async_repl;
pub mod batch;
pub mod cancel;
mod chunked;
pub mod cluster;
pub mod cold;
pub mod counters;
pub mod deadletter;
pub mod dedup;
pub mod ext;
pub mod forgotten;
pub mod getjob;
pub mod gossip;
pub mod id_index;
pub mod limits;
pub mod membership;
pub mod memory;
pub mod messages;
pub mod priority;
pub mod producers;
pub mod progress;
pub mod qlen_cluster;
pub mod records;
pub mod schedule;
pub mod scheduler;
#[cfg(test)]
mod sim;
pub mod spill;
mod spill_slots;
pub mod store;
pub mod waitjob;
pub mod wake;

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::domain::job::{
    Job, JobId, JobState, NodeIdx, NodeSet, F_BCAST_QUEUED, F_BCAST_WILLQUEUE,
};
use crate::domain::queue::{Queue, PAUSE_OUT};
use crate::errors::WireError;
use crate::support::slab::Slab;

pub use cluster::Cluster;
pub use getjob::GetWaiter;
pub use memory::MemoryConfig;
pub use store::{JobHandle, JobStore};
pub use wake::{DeliveredJob, JobEnd, Wake};

/// A client connection, as the shell numbers them: blocked clients are
/// these IDs, never a channel.
pub use crate::domain::queue::ClientId;

/// A message for a peer, produced by the engine and sent by the bus layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusOut {
    ReplJob {
        job: JobId,
        noreply: bool,
    },
    GotJob {
        job: JobId,
    },
    Enqueue {
        job: JobId,
        delay: u32,
    },
    Queued {
        job: JobId,
        nack: bool,
        deliv: bool,
    },
    SetAck {
        job: JobId,
        may_have: u32,
    },
    WillQueue {
        job: JobId,
    },
    GotAck {
        job: JobId,
        known: bool,
    },
    DelJob {
        job: JobId,
    },
    /// `delay`: seconds the sender will wait before queueing (NACK DELAY).
    Working {
        job: JobId,
        delay: u32,
    },
    /// Our extension: the job's dead-letter epoch changed (engine::deadletter).
    DeadLetter {
        job: JobId,
        epoch: u32,
    },
    /// Our extension: the job's PRIORITY changed (engine::priority).
    Priority {
        job: JobId,
        level: u8,
    },
    /// Our extension: a progress report (engine::progress): job ID then
    /// `job_ext::Progress` encoding.
    Progress {
        data: Bytes,
    },
    /// Our extension: a queue's QLIMIT setting (engine::limits encoding).
    QLimit {
        data: Bytes,
    },
    /// Our extension: the job was cancelled (engine::cancel).
    Cancel {
        job: JobId,
    },
    /// Our extension: a DEDUP key registration (engine::dedup).
    Dedup {
        entry: Bytes,
        window: u32,
    },
    /// Our extension: QLEN CLUSTER request / answer (engine::qlen_cluster).
    QLenReq {
        queue: Bytes,
        req: u32,
    },
    QLenRep {
        req: u32,
        len: u64,
    },
    /// Our extension: node totals request / answer (engine::qlen_cluster).
    TotalsReq {
        req: u32,
    },
    TotalsRep {
        req: u32,
        totals: crate::protocol::bus::message::NodeTotals,
    },
    NeedJobs {
        queue: Bytes,
        count: u32,
    },
    YourJobs {
        jobs: Vec<JobId>,
    },
    Pause {
        queue: Bytes,
        flags: u8,
    },
    /// Our extension: a schedule definition (engine::schedule).
    Schedule {
        data: Bytes,
    },
    /// Our extension: a batch's state or a delta of it (engine::batch).
    Batch {
        data: Bytes,
    },
    /// Our extension: questions and answers on job dependencies
    /// (engine::after).
    Deps {
        data: Bytes,
    },
}

/// A record for the append-only file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AofRecord {
    /// A storage-flavour serialized job (`job_codec`), written as `LOADJOB <blob>`.
    LoadJob(Bytes),
    DelJob(JobId),
    /// Our extension: a DEDUP key (`engine::dedup::encode_aof` payload).
    Dedup(Bytes),
    /// Our extension: a schedule definition (`ScheduleDef::encode`).
    Schedule(Bytes),
    /// Our extension: a batch's state or delta (`BatchState::encode`).
    Batch(Bytes),
}

/// Effects accumulated by engine calls, drained by the shell.
#[derive(Default)]
pub struct Effects {
    pub aof: Vec<AofRecord>,
    /// Job-level messages; turned into frames by `Engine::take_messages`.
    pub bus: Vec<(NodeIdx, BusOut)>,
    /// Ready-made membership frames (PING/PONG/MEET/FAIL).
    pub frames: Vec<(NodeIdx, crate::protocol::bus::message::Message)>,
    /// Open an outbound link to (node, ip, bus port).
    pub connect: Vec<(NodeIdx, String, u16)>,
    /// Close the outbound link of these nodes.
    pub disconnect: Vec<NodeIdx>,
}

/// A client blocked in ADDJOB until its job is replicated.
pub struct AddWaiter {
    pub client: ClientId,
    /// u64::MAX = wait forever.
    pub deadline: u64,
    /// Last time a node was added to nodes_delivered.
    pub last_add: u64,
}

/// Hash-map state of the engine's tables: foldhash with a seed drawn from
/// the engine's own seed. A server's engine seed is random, so keys a
/// client chooses (queue names, DEDUP keys, job IDs) cannot be aimed at one
/// bucket; a simulation seeds every engine, so iteration orders, and with
/// them the whole run, repeat exactly for a seed. `Default` (used by tables
/// keyed by values of ours: handles, client and request IDs, node indexes)
/// is a fixed seed: deterministic as well.
pub type HashState = foldhash::fast::FixedState;
pub type Map<K, V> = HashMap<K, V, HashState>;

pub struct Engine {
    store: JobStore,
    queues: Slab<Queue>,
    /// Queue name -> handle; two lookups per ADDJOB, so a cheap keyed hash
    /// (as for the job-ID index in `store`).
    queue_index: Map<Bytes, u32>,
    cluster: Cluster,
    /// Client IDs are ours (never chosen by a client): a cheap hash. The
    /// maps keyed by job handle likewise.
    waiters: Map<ClientId, GetWaiter>,
    waiter_timeouts: BTreeSet<(u64, ClientId)>,
    /// Blocked ADDJOB clients by job (few at a time, so kept out of `Job`).
    adders: Map<JobHandle, AddWaiter>,
    /// Wake-ups of blocked clients, taken by the shell (`wake`).
    wakes: Vec<(ClientId, Wake)>,
    /// nodes_confirmed (SHOW's `nodes-confirmed`) of wait-repl and acked jobs; absent = none.
    confirmed: Map<JobHandle, NodeSet>,
    /// Extension fields of the jobs flagged `F_EXT` (`crate::domain::job_ext`).
    ext: Map<JobHandle, crate::domain::job_ext::JobExt>,
    /// Clients blocked in WAITJOB.
    waitjobs: waitjob::JobWaiters,
    /// Producers blocked in ADDJOB ... MAXLEN WAIT until their queue has room.
    producers: producers::Producers,
    /// DEDUP keys and `dedup-window` (seconds).
    dedup: dedup::DedupTable,
    dedup_window: u64,
    /// Schedule definitions and this node's pending ticks.
    schedules: schedule::ScheduleTable,
    /// Batches and their callbacks.
    batches: batch::BatchTable,
    /// Jobs waiting for their dependencies (ADDJOB AFTER).
    deps: after::DepTable,
    /// QLEN/QSTAT CLUSTER counts waiting for peers.
    counts: qlen_cluster::ClusterCounts,
    /// Jobs with a blocked ADDJOB client, by deadline (u64::MAX = none).
    add_timeouts: BTreeSet<(u64, JobHandle)>,
    add_waiting: usize,
    /// ASYNC jobs whose copies are not all confirmed yet.
    async_repl: async_repl::AsyncRepl,
    /// Queues that gained jobs while clients were blocked on them.
    ready: Vec<Bytes>,
    /// Queues that got jobs while other nodes wait for them (federation demand).
    fed_ready: Vec<Bytes>,
    /// NEEDJOBS for queues that do not exist here (yet): (queue, (node,
    /// jobs wanted, until when)); moved into the queue when it is created,
    /// so the first jobs produced here after a consumer elsewhere started
    /// waiting go to it at once. Short-lived and capped.
    early_demand: Vec<(Bytes, (crate::domain::job::NodeIdx, u32, u64))>,
    rng: SmallRng,
    /// The ID of the next job ADDJOB creates, made one command ahead
    /// (`addjob`: its ID-index slot is prefetched meanwhile).
    next_id: Option<JobId>,
    last_ctime: u64,
    out: Effects,
    memory: MemoryConfig,
    /// When set, LOADJOB/DELJOB records are produced.
    aof: bool,
    /// LOADJOB records written again for a job that already had one (its
    /// earlier record is dead weight a rewrite would drop): read by the
    /// shell to estimate what an automatic rewrite would reclaim.
    aof_relogs: u64,
    last_need_jobs_cron: u64,
    last_queue_evict: u64,
    /// Bumped when a queue is created or destroyed (GETJOB MATCH caches
    /// the queues a pattern matches until it changes).
    queue_generation: u64,
    /// Job-lifecycle totals for INFO jobstats and /metrics.
    counters: counters::JobCounters,
    /// Recently acknowledged jobs no longer stored (late messages about
    /// them are answered with SETACK instead of reviving them).
    forgotten: forgotten::Forgotten,
    /// Recently cancelled jobs (`cancel`), stored or not.
    cancelled: forgotten::Forgotten,
    /// Job bodies on disk and the decisions about them (`spill`).
    spill: spill::SpillState,
    /// Whole jobs on disk (`cold`).
    cold: cold::ColdTier,
    /// QLIMIT: per-queue delivery limits (engine::limits).
    limits: limits::Limits,
    /// Test builds: the path that last queued each job here, so the
    /// simulation can attribute every duplicate delivery to a cause.
    #[cfg(test)]
    pub(crate) queued_why: Map<JobId, &'static str>,
    #[cfg(test)]
    why: &'static str,
}

/// `rand() % 500 - 250`: desynchronises timers across nodes.
pub fn rand250(rng: &mut SmallRng) -> i64 {
    rng.gen_range(-250..250)
}

pub fn add_ms(t: u64, delta: i64) -> u64 {
    t.saturating_add_signed(delta)
}

impl Engine {
    pub fn new(myself: [u8; 40], port: u16, seed: u64, now: u64) -> Engine {
        let mut rng = SmallRng::seed_from_u64(seed);
        let keyed = HashState::with_seed(rng.gen());
        Engine {
            store: JobStore::default(),
            queues: Slab::default(),
            queue_index: Map::with_hasher(keyed.clone()),
            cluster: Cluster::new(myself, port, now),
            waiters: Map::default(),
            waiter_timeouts: BTreeSet::new(),
            adders: Map::default(),
            confirmed: Map::default(),
            ext: Map::default(),
            waitjobs: waitjob::JobWaiters::with_hasher(keyed.clone()),
            producers: producers::Producers::new(keyed.clone()),
            dedup: dedup::DedupTable::with_hasher(keyed.clone()),
            dedup_window: dedup::DEFAULT_WINDOW,
            schedules: schedule::ScheduleTable::default(),
            batches: batch::BatchTable::default(),
            deps: after::DepTable::default(),
            counts: qlen_cluster::ClusterCounts::default(),
            add_timeouts: BTreeSet::new(),
            add_waiting: 0,
            async_repl: Default::default(),
            wakes: Vec::new(),
            ready: Vec::new(),
            fed_ready: Vec::new(),
            early_demand: Vec::new(),
            rng,
            next_id: None,
            last_ctime: 0,
            out: Effects::default(),
            memory: MemoryConfig::default(),
            aof: false,
            aof_relogs: 0,
            last_need_jobs_cron: 0,
            last_queue_evict: 0,
            queue_generation: 0,
            counters: counters::JobCounters::default(),
            forgotten: forgotten::Forgotten::default(),
            cancelled: forgotten::Forgotten::default(),
            spill: spill::SpillState::default(),
            cold: cold::ColdTier::default(),
            limits: limits::Limits::default(),
            #[cfg(test)]
            queued_why: Map::with_hasher(keyed),
            #[cfg(test)]
            why: "other",
        }
    }

    // ----- what the shell and the commands may see and change -----

    /// The job table (read-only: jobs change through engine calls).
    pub fn store(&self) -> &JobStore {
        &self.store
    }

    /// Jobs this node holds, in the job table or whole on disk (INFO's
    /// `registered_jobs`).
    pub fn registered_jobs(&self) -> usize {
        self.store.len() + self.cold_jobs() as usize
    }

    /// Every queue, by handle (SCAN cursors are handles).
    pub fn queues(&self) -> &Slab<Queue> {
        &self.queues
    }

    /// The node table.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// nodes_confirmed of a wait-repl or acked job (SHOW).
    pub fn confirmed_of(&self, h: JobHandle) -> Option<&NodeSet> {
        self.confirmed.get(&h)
    }

    /// Startup: the node table loaded from nodes.conf (index 0 is this
    /// node), and the port bound now.
    pub fn restore_nodes(&mut self, nodes: Vec<cluster::NodeInfo>) {
        self.cluster.nodes = nodes;
    }

    /// Startup / CONFIG SET: the address this node was bound to and the
    /// failure-detection timeout.
    pub fn set_port(&mut self, port: u16) {
        self.cluster.myself_mut().port = port;
        self.cluster.refresh_reachable();
    }

    pub fn set_node_timeout(&mut self, ms: u64) {
        self.cluster.node_timeout = ms;
    }

    /// maxmemory (0 = no limit) and what to do when it is reached, and the
    /// process's allocated-bytes counter.
    pub fn set_memory_limit(&mut self, maxmemory: u64, policy: memory::Policy) {
        self.memory.maxmemory = maxmemory;
        self.memory.policy = policy;
    }

    pub fn set_memory_counter(&mut self, used: fn() -> usize) {
        self.memory.used = used;
    }

    pub fn maxmemory(&self) -> u64 {
        self.memory.maxmemory
    }

    /// CLUSTER LEAVING yes|no: flips this node's LEAVING flag, which the
    /// next PING/PONG carries to every peer, and saves nodes.conf.
    /// `cluster-announce-ip/port/bus-port`: sent in PING/PONG/MEET, and the
    /// announced IP is this node's own address in the node table.
    pub fn set_announce(&mut self, a: cluster::Announced) {
        self.cluster.announce = a;
        if let Some(ip) = a.ip {
            self.cluster.myself_mut().ip = ip.to_string();
            self.cluster.dirty = true;
        }
    }

    pub fn set_leaving(&mut self, on: bool) {
        let me = self.cluster.myself_mut();
        if on {
            me.flags |= cluster::FLAG_LEAVING;
        } else {
            me.flags &= !cluster::FLAG_LEAVING;
        }
        self.cluster.dirty = true;
    }

    /// CLUSTER SAVECONFIG: save nodes.conf at the next opportunity.
    pub fn request_nodes_save(&mut self) {
        self.cluster.dirty = true;
    }

    /// The node table changed since nodes.conf was last saved.
    pub fn nodes_conf_dirty(&self) -> bool {
        self.cluster.dirty
    }

    /// The nodes.conf text, if the table changed since the last call.
    pub fn take_nodes_conf(&mut self) -> Option<String> {
        if !self.cluster.dirty {
            return None;
        }
        self.cluster.dirty = false;
        Some(self.cluster.nodes_text(false) + &self.limits_conf_text())
    }

    /// CLUSTER INFO: (known, reachable, size, messages sent, received).
    pub fn cluster_info(&mut self) -> (usize, usize, usize, u64, u64) {
        let c = &mut self.cluster;
        c.refresh_reachable();
        (
            c.known(),
            c.reachable.len(),
            c.size(),
            c.stats_sent,
            c.stats_received,
        )
    }

    /// Whether LOADJOB/DELJOB records are produced (AOF on, or a rewrite
    /// capturing them).
    pub fn set_aof_records(&mut self, on: bool) {
        self.aof = on;
    }

    pub fn aof_records(&self) -> bool {
        self.aof
    }

    /// AOF records produced since the effects were last taken.
    pub fn pending_aof_records(&self) -> usize {
        self.out.aof.len()
    }

    /// Take the AOF records produced so far (a synchronous operation must
    /// see them in the file first).
    pub fn take_aof_records(&mut self) -> Vec<AofRecord> {
        std::mem::take(&mut self.out.aof)
    }

    /// Take every effect produced so far (after `take_messages`).
    pub fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.out)
    }

    /// WORKING: postpone the next delivery by a retry period and tell the
    /// other holders. Returns the retry period in seconds.
    pub fn working(&mut self, id: &JobId, now: u64) -> Result<u32, WireError> {
        if self.is_cancelled(id) {
            return Err(WireError::Cancelled);
        }
        let Some(h) = self.lookup(id) else {
            return Err(WireError::NoJob);
        };
        let Some(j) = self.job(h) else {
            return Err(WireError::NoJob);
        };
        let ctime_ms = j.ctime / 1_000_000;
        let life = (i128::from(j.etime) * 1000) - i128::from(ctime_ms);
        let elapsed = i128::from(now) - i128::from(ctime_ms);
        if life > 0 && elapsed > life / 2 {
            return Err(WireError::TooLate);
        }
        self.dequeue(h);
        let jitter = rand250(&mut self.rng);
        let Some(j) = self.store.get_mut(h) else {
            return Err(WireError::NoJob);
        };
        j.flags |= F_BCAST_WILLQUEUE;
        if j.retry != 0 && j.qtime != 0 {
            j.qtime = add_ms(now + u64::from(j.retry) * 1000, jitter);
        }
        let retry = j.retry;
        self.apply_backoff(h, now);
        self.update_awake(h, now);
        self.send_to_delivered(h, BusOut::Working { job: *id, delay: 0 });
        Ok(retry)
    }

    /// Creation time for a new job: unix ms * 1e6, strictly increasing.
    pub fn next_ctime(&mut self, now: u64) -> u64 {
        let mut c = now.saturating_mul(1_000_000);
        if c <= self.last_ctime {
            c = self.last_ctime + 1;
        }
        self.last_ctime = c;
        c
    }

    pub fn lookup(&self, id: &JobId) -> Option<JobHandle> {
        self.store.lookup(id)
    }

    pub fn job(&self, h: JobHandle) -> Option<&Job> {
        self.store.get(h)
    }

    // ----- queues -----

    pub fn queue_handle(&self, name: &[u8]) -> Option<u32> {
        self.queue_index.get(name).copied()
    }

    pub fn queue(&self, name: &[u8]) -> Option<&Queue> {
        self.queue_handle(name).and_then(|h| self.queues.get(h))
    }

    pub fn queue_mut(&mut self, name: &[u8]) -> Option<&mut Queue> {
        let h = self.queue_handle(name)?;
        self.queues.get_mut(h)
    }

    /// Get or create a queue. Returns its handle.
    pub fn queue_create(&mut self, name: &[u8], now: u64) -> u32 {
        if let Some(h) = self.queue_handle(name) {
            return h;
        }
        let name = Bytes::copy_from_slice(name);
        let mut q = Queue::new(name.clone(), now / 1000);
        // Nodes that asked for this queue's jobs before it existed here.
        if !self.early_demand.is_empty() {
            self.early_demand.retain(|(n, d)| {
                if n != &name {
                    return d.2 >= now;
                }
                if d.2 >= now {
                    q.fed.demand.push(*d);
                }
                false
            });
        }
        let h = self.queues.insert(q);
        self.queue_index.insert(name, h);
        self.queue_generation += 1;
        h
    }

    /// Changes whenever the set of queues changes.
    pub fn queue_generation(&self) -> u64 {
        self.queue_generation
    }

    pub fn queue_len(&self, name: &[u8]) -> usize {
        self.queue(name).map_or(0, |q| q.len())
    }

    pub fn queue_destroy(&mut self, h: u32) {
        if let Some(q) = self.queues.remove(h) {
            self.queue_index.remove(&q.name);
            self.queue_generation += 1;
        }
    }

    /// Evict the queue if empty, idle for `max_idle` s, unblocked and unpaused.
    pub fn queue_maybe_evict(&mut self, h: u32, now: u64, max_idle: u64) -> bool {
        let Some(q) = self.queues.get(h) else {
            return false;
        };
        if q.is_empty()
            && q.blocked.is_empty()
            && q.paused == 0
            && (now / 1000).saturating_sub(q.atime) >= max_idle
        {
            self.queue_destroy(h);
            return true;
        }
        false
    }

    // ----- job lifecycle -----

    /// Register a new job; None if the ID is already present.
    pub fn register(&mut self, job: Job) -> Option<JobHandle> {
        self.store.insert_new(job)
    }

    /// Wake-up time for a job (re-queue, WILLQUEUE, expiry or GC), with a fresh GC back-off for acked jobs.
    fn compute_awake(&mut self, h: JobHandle, now: u64) -> u64 {
        let jitter = rand250(&mut self.rng);
        let Some(j) = self.store.get(h) else {
            return 0;
        };
        let mut when = u64::from(j.etime) * 1000 + 1000;
        match j.state {
            JobState::Acked => {
                let backoff = (1000u64 << j.gc_retry.min(8)).min(180_000);
                when = when.min(add_ms(now + backoff, jitter));
            }
            JobState::Active | JobState::Queued if j.qtime != 0 => {
                let q = if j.has(F_BCAST_WILLQUEUE) {
                    j.qtime.saturating_sub(500)
                } else {
                    j.qtime
                };
                when = when.min(q);
            }
            _ => {}
        }
        when.max(1)
    }

    /// Name the path about to queue jobs (test builds record it per job).
    #[inline]
    pub(crate) fn cause(&mut self, _why: &'static str) {
        #[cfg(test)]
        {
            self.why = _why;
        }
    }

    pub fn update_awake(&mut self, h: JobHandle, now: u64) {
        let when = self.compute_awake(h, now);
        self.store.schedule(h, when);
    }

    pub(crate) fn aof_loadjob(&mut self, h: JobHandle) {
        if !self.aof {
            return;
        }
        if let Some(j) = self.store.get(h) {
            let blob = records::storage_bytes(j, self.ext_of(h), &self.cluster);
            self.out.aof.push(AofRecord::LoadJob(blob));
        }
    }

    /// `aof_loadjob` for a job whose earlier LOADJOB is now out of date.
    pub(crate) fn aof_relog(&mut self, h: JobHandle) {
        if self.aof {
            self.aof_relogs += 1;
        }
        self.aof_loadjob(h);
    }

    /// How many LOADJOB records superseded an earlier one (`aof_relog`).
    pub fn aof_relogs(&self) -> u64 {
        self.aof_relogs
    }

    fn aof_deljob(&mut self, id: JobId) {
        if self.aof {
            self.out.aof.push(AofRecord::DelJob(id));
        }
    }

    /// Send a message to every node of the job's nodes_delivered except self.
    pub fn send_to_delivered(&mut self, h: JobHandle, msg: BusOut) {
        let Some(j) = self.store.get(h) else { return };
        let targets: Vec<NodeIdx> = j.nodes_delivered.iter().filter(|&n| n != 0).collect();
        for n in targets {
            self.out.bus.push((n, msg.clone()));
        }
    }

    /// Send to every known node with a link except self and handshakes.
    pub fn broadcast(&mut self, msg: BusOut) {
        for t in self.cluster.linked_peers() {
            self.out.bus.push((t, msg.clone()));
        }
    }

    /// Queue a frame for one peer whose body the node built (the ACL
    /// table's replication, `acl::sync`); it leaves with this call's frames.
    pub fn send_body(&mut self, to: NodeIdx, body: crate::protocol::bus::message::Body) {
        let msg = crate::protocol::bus::message::Message::new(self.header(0), body);
        self.out.frames.push((to, msg));
    }

    /// Remove a job from its queue if queued (state -> active), as DEQUEUE does.
    pub fn dequeue(&mut self, h: JobHandle) -> bool {
        let Some(j) = self.store.get_mut(h) else {
            return false;
        };
        if j.state != JobState::Queued {
            return false;
        }
        j.state = JobState::Active;
        let ctime = j.ctime;
        let qname = j.queue.clone();
        let has_ext = j.has(crate::domain::job::F_EXT);
        let level = self.level_of(has_ext, h);
        if let Some(n) = qname {
            if let Some(q) = self.queue_mut(&n) {
                q.remove_prio(level, ctime, h);
            }
            if !self.producers.is_empty() {
                self.producers.note_room(&n);
            }
        }
        true
    }

    /// Local enqueue procedure, as in Disque. Returns true if the job got queued.
    pub fn enqueue(&mut self, h: JobHandle, nack: bool, now: u64) -> bool {
        if self.deadletter_due(h, nack) {
            return self.dead_letter(h, now);
        }
        let jitter = rand250(&mut self.rng);
        let Some(j) = self.store.get_mut(h) else {
            return false;
        };
        // A job waiting for its dependencies is never queued (engine::after).
        if j.has(crate::domain::job::F_EXT) && self.ext.get(&h).is_some_and(|x| x.is_waiting()) {
            j.qtime = 0;
            return false;
        }
        if matches!(j.state, JobState::Queued | JobState::Acked)
            || j.qtime == 0
            || (j.retry == 0 && j.has(crate::domain::job::F_DELIVERED))
        {
            return false;
        }
        if j.queue.is_none() {
            return false;
        }
        j.state = JobState::Queued;
        if j.retry > 0 {
            j.flags |= F_BCAST_WILLQUEUE;
            j.qtime = add_ms(now + u64::from(j.retry) * 1000, jitter);
        } else {
            j.qtime = 0;
        }
        let broadcast = j.has(F_BCAST_QUEUED) || nack;
        if broadcast {
            if nack {
                self.counters.nacked += 1;
                j.nacks = j.nacks.saturating_add(1);
            } else {
                j.deliv = j.deliv.saturating_add(1);
            }
        } else {
            j.flags |= F_BCAST_QUEUED;
        }
        let id = j.id;
        let key = j.ctime;
        let has_ext = j.has(crate::domain::job::F_EXT);
        #[cfg(test)]
        self.queued_why.insert(id, self.why);
        if broadcast {
            self.send_to_delivered(
                h,
                BusOut::Queued {
                    job: id,
                    nack,
                    deliv: !nack,
                },
            );
        }
        self.apply_backoff(h, now);
        // Look the queue up through the job's own name (disjoint fields, no
        // Arc clone: no atomic refcount traffic on a name every job of the
        // queue shares).
        let existing = self
            .store
            .get(h)
            .and_then(|j| j.queue.as_deref())
            .and_then(|n| self.queue_index.get(n).copied());
        let qh = match existing {
            Some(qh) => qh,
            None => {
                let Some(name) = self.store.get(h).and_then(|j| j.queue.clone()) else {
                    return false;
                };
                self.queue_create(&name, now)
            }
        };
        let level = self.level_of(has_ext, h);
        if let Some(q) = self.queues.get_mut(qh) {
            q.insert_prio(level, key, h);
            q.atime = now / 1000;
            q.jobs_in += 1;
            if !q.blocked.is_empty() && q.paused & PAUSE_OUT == 0 {
                self.ready.push(q.name.clone());
            } else if !q.fed.demand.is_empty() {
                self.fed_ready.push(q.name.clone());
            }
        }
        self.spill_on_enqueue(qh, h);
        // Share the queue's name allocation instead of one copy per job.
        if let (Some(q), Some(j)) = (self.queues.get(qh), self.store.get_mut(h)) {
            let shared = j
                .queue
                .as_ref()
                .is_some_and(|n| crate::domain::job::QueueName::ptr_eq(n, &q.shared_name));
            if !shared {
                j.queue = Some(q.shared_name.clone());
            }
        }
        self.update_awake(h, now);
        true
    }

    /// Pop the oldest job of a queue for delivery.
    pub fn pop(&mut self, qh: u32, now: u64) -> Option<JobHandle> {
        if !self.head_ready(qh) {
            return None;
        }
        let q = self.queues.get_mut(qh)?;
        let h = q.pop()?;
        q.atime = now / 1000;
        q.jobs_out += 1;
        if !self.producers.is_empty() {
            let name = q.name.clone();
            self.producers.note_room(&name);
        }
        if let Some(j) = self.store.get_mut(h) {
            j.state = JobState::Active;
            j.flags |= crate::domain::job::F_DELIVERED;
        }
        self.spill_after_pop(qh);
        Some(h)
    }

    /// Whether queue `qh`'s head may be popped now. A head whose body is
    /// on disk waits for its page-in; a resident head newer than jobs of
    /// its queue still on disk waits for them (both reads are asked for
    /// here).
    pub(crate) fn head_ready(&mut self, qh: u32) -> bool {
        self.spill_head_ready(qh)
            && (self.queues.get(qh).is_none_or(|q| q.cold == 0) || self.cold_head_ready(qh))
    }

    /// Drop a job from the table and every side map (no other effect).
    pub fn remove_record(&mut self, h: JobHandle) -> Option<Job> {
        // Most jobs never get an entry (single node, REPLICATE 1): skip
        // hashing the handle for nothing.
        if !self.confirmed.is_empty() {
            self.confirmed.remove(&h);
        }
        if self
            .store
            .get(h)
            .is_some_and(|j| j.has(crate::domain::job::F_EXT))
        {
            self.ext.remove(&h);
        }
        self.spill_forget(h);
        self.store.remove(h)
    }

    /// Delete a job locally: unqueue, unschedule, AOF DELJOB for live jobs,
    /// fail a blocked ADDJOB. Broadcasts DELJOB only for wait-repl jobs.
    pub fn delete_job(&mut self, h: JobHandle, now: u64) {
        self.dequeue(h);
        let Some(job) = self.remove_record(h) else {
            return;
        };
        if job.state == JobState::Acked {
            self.forgotten.insert(&job.id, now);
        }
        self.job_finished(&job.id, JobEnd::Deleted);
        match job.state {
            JobState::Active | JobState::Queued => self.aof_deljob(job.id),
            JobState::WaitRepl => {
                for n in job.nodes_delivered.iter().filter(|&n| n != 0) {
                    self.out.bus.push((n, BusOut::DelJob { job: job.id }));
                }
            }
            JobState::Acked => {}
        }
        if self.adders.is_empty() {
            return;
        }
        if let Some(w) = self.adders.remove(&h) {
            self.finish_add_waiter(h, w, Wake::Error(WireError::NoReplExpired));
        }
    }

    pub fn finish_add_waiter(&mut self, h: JobHandle, w: AddWaiter, wake: Wake) {
        self.add_timeouts.remove(&(w.deadline, h));
        self.add_waiting = self.add_waiting.saturating_sub(1);
        self.wake(w.client, wake);
    }

    /// Delete every job and queue; blocked GETJOB clients get no jobs.
    pub fn flushall(&mut self, now: u64) {
        for h in self.store.handles() {
            self.delete_job(h, now);
        }
        self.store.clear();
        self.cold_clear();
        self.confirmed.clear();
        self.ext.clear();
        self.dedup = dedup::DedupTable::default();
        self.forgotten.clear();
        self.cancelled.clear();
        self.deps = after::DepTable::default();
        let ids: Vec<ClientId> = self.waiters.keys().copied().collect();
        for id in ids {
            if self.remove_waiter(id).is_some() {
                self.wake(id, Wake::NoJobs);
            }
        }
        self.queues.clear();
        self.queue_index.clear();
        self.queue_generation += 1;
        self.ready.clear();
        self.fed_ready.clear();
        self.early_demand.clear();
    }

    /// Mark the job as acked (docs/COMMANDS.md#ackjob).
    pub fn acknowledge(&mut self, h: JobHandle, now: u64) {
        if self.mark_acked(h) {
            self.update_awake(h, now);
        }
    }

    /// `acknowledge` without scheduling the GC retry; false when the job
    /// is unknown or already acked.
    pub(crate) fn mark_acked(&mut self, h: JobHandle) -> bool {
        let Some(j) = self.store.get(h) else {
            return false;
        };
        if j.state == JobState::Acked {
            return false;
        }
        let id = j.id;
        let live = matches!(j.state, JobState::Active | JobState::Queued);
        self.dequeue(h);
        if let Some(j) = self.store.get_mut(h) {
            j.state = JobState::Acked;
        }
        if !self.confirmed.is_empty() {
            self.confirmed.remove(&h);
        }
        if live {
            self.aof_deljob(id);
        }
        self.batch_member_done(h, false);
        self.job_finished(&id, JobEnd::Acked);
        true
    }

    /// Earliest instant the engine needs a tick for.
    pub fn next_deadline(&self) -> Option<u64> {
        let mut t = self.store.next_awake();
        for cand in [
            self.waiter_timeouts.first().map(|x| x.0),
            self.waitjobs.next_deadline(),
            self.counts.next_deadline(),
            self.producers.next_deadline(),
            self.limits_deadline(),
            self.spill_due(),
            self.add_timeouts
                .first()
                .map(|x| x.0)
                .filter(|&t| t != u64::MAX),
        ]
        .into_iter()
        .flatten()
        {
            t = Some(t.map_or(cand, |x| x.min(cand)));
        }
        t
    }

    /// Number of clients blocked in GETJOB, ADDJOB (replication or room
    /// in the queue) or WAITJOB.
    pub fn blocked_clients(&self) -> usize {
        self.waiters.len() + self.add_waiting + self.waitjobs.len() + self.producers.len()
    }

    /// Drop all bookkeeping for a client that disconnected.
    pub fn client_gone(&mut self, client: ClientId, now: u64) {
        self.remove_waiter(client);
        self.forget_job_waiter(client);
        self.producer_gone(client, now);
        // An ADDJOB client that left: delete its pending job (docs/COMMANDS.md#addjob).
        let pending: Vec<JobHandle> = self
            .add_timeouts
            .iter()
            .map(|&(_, h)| h)
            .filter(|h| self.adders.get(h).is_some_and(|w| w.client == client))
            .collect();
        for h in pending {
            self.delete_job(h, now);
        }
    }

    /// A new empty job with defaults filled in.
    pub fn new_job(id: JobId) -> Job {
        Job {
            id,
            state: JobState::Active,
            gc_retry: 0,
            flags: 0,
            repl: 0,
            nacks: 0,
            deliv: 0,
            etime: 0,
            delay: 0,
            retry: 0,
            ctime: 0,
            qtime: 0,
            awakeme: 0,
            queue: None,
            body: None,
            nodes_delivered: NodeSet::default(),
        }
    }
}
