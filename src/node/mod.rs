//! Everything the owner thread holds: the engine plus server-level
//! state that commands read or change (configuration, client registry,
//! statistics, slow log, monitors, persistence status), and the reply
//! channels of blocked clients, which the engine knows by ID only
//! (`commands::wake` answers them).
//!
//! The node sits between the commands and the engine: commands reach the
//! engine and the node's own state through it; it drives the AOF writer
//! (`persistence`) but knows nothing of sockets or of the command table.

pub mod command_stats;
pub mod persistence;
pub mod queue_patterns;
mod readiness;
pub mod spill;

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::engine::qlen_cluster::PeerTotals;
use crate::engine::{ClientId, Engine, Wake};
use crate::protocol::resp::Reply;

/// Per-connection state owned by the connection task.
pub struct ClientState {
    pub id: u64,
    pub addr: String,
    /// 2 or 3 (HELLO 3 switches to RESP3).
    pub proto: u8,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    /// Name of the last command run (CLIENT LIST `cmd=`).
    pub last_cmd: &'static str,
    /// The ACL user and its cached verdict (`acl::check`).
    pub acl: crate::acl::ClientAcl,
    /// The command being run again already waited for its jobs on disk
    /// (`Outcome::PageIn`): QPEEK shows what is resident now rather than
    /// fault again, since a job read back may be spilled anew meanwhile.
    pub paged_in: bool,
    /// When (ms) this client started waiting for the spill tier to bring
    /// memory down (`node::spill::wait_memory`); cleared by the first
    /// command that finds memory under the refusal level, so once the wait
    /// ran out the rest of a pipeline is refused without waiting again.
    pub oom_wait_since: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    Skip,
}

/// What CLIENT LIST / KILL need to know about a connection.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub fd: i64,
    pub name: Option<Bytes>,
    pub created: u64,
    pub last_active: u64,
    pub last_cmd: &'static str,
    /// Blocked in GETJOB or ADDJOB; shared with the connection, which
    /// clears it on wake-up without a trip to the owner thread.
    pub blocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub monitor: bool,
    pub kill: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
pub struct Stats {
    pub total_connections: u64,
    pub total_commands: u64,
    pub net_input: u64,
    pub net_output: u64,
    pub rejected_connections: u64,
    /// (calls, usec) per command-table index.
    pub cmd: Vec<(u64, u64)>,
    pub ops_sample_time: u64,
    pub ops_sample_count: u64,
    pub ops_per_sec: u64,
    pub in_sample: u64,
    pub out_sample: u64,
    pub in_kbps: f64,
    pub out_kbps: f64,
}

pub struct SlowlogEntry {
    pub id: u64,
    pub time: u64,
    pub usec: u64,
    pub args: Vec<Bytes>,
}

pub struct Node {
    pub engine: Engine,
    pub config: Config,
    /// (lower-case name, command-table index), after rename-command.
    pub command_names: Vec<(Vec<u8>, usize)>,
    /// Looked up once per batch of every connection; the IDs are ours, so
    /// a cheap hash.
    pub clients: HashMap<u64, ClientInfo, foldhash::fast::RandomState>,
    pub stats: Stats,
    pub slowlog: VecDeque<SlowlogEntry>,
    pub slowlog_next_id: u64,
    /// GETJOB MATCH: the queues each pattern matched.
    pub queue_patterns: queue_patterns::PatternCache,
    pub monitors: Vec<mpsc::Sender<Bytes>>,
    pub run_id: String,
    pub start_time: u64,
    pub executable: String,
    pub tcp_port: u16,
    pub aof: persistence::AofStatus,
    /// The AOF writer and rewrite driver; None until the AOF is loaded.
    pub aof_writer: Option<persistence::Aof>,
    /// Commands wait until this unix-ms time (CLIENT PAUSE).
    pub clients_paused_until: u64,
    /// TLS configurations in force (CONFIG SET of tls-* rebuilds them).
    pub tls: std::sync::Arc<crate::tls::Tls>,
    /// Where engine effects go (AOF writer, bus); None drops them.
    pub effect_sink: Option<Box<dyn Fn(crate::engine::Effects) + Send>>,
    /// Latency histograms and refusal counts for /metrics.
    pub command_stats: command_stats::CommandStats,
    /// Reply channels of the blocked clients (GETJOB, ADDJOB, WAITJOB,
    /// QLEN/QSTAT CLUSTER), answered when the engine wakes them. A cheap
    /// hash: the IDs are ours.
    pub waiters: HashMap<ClientId, oneshot::Sender<Reply>, foldhash::fast::FixedState>,
    /// The engine's wake outbox is moved here to be answered; kept for its
    /// allocation.
    pub wake_buf: Vec<(ClientId, Wake)>,
    /// The dashboard's node-totals requests, by engine request number.
    totals_waiters: HashMap<u32, oneshot::Sender<PeerTotals>, foldhash::fast::FixedState>,
    /// ACL users, permissions and ACL LOG (`crate::acl`).
    pub acl: crate::acl::Acl,
    /// The spill thread and its status (`spill`).
    pub spill: spill::SpillTier,
}

impl Node {
    /// `command_names`: (lower-case name, command-table index) after
    /// rename-command; `commands`: the size of the command table.
    pub fn new(
        engine: Engine,
        config: Config,
        command_names: Vec<(Vec<u8>, usize)>,
        commands: usize,
        now: u64,
    ) -> Node {
        let mut run_id = String::with_capacity(40);
        for _ in 0..40 {
            run_id.push(char::from(
                b"0123456789abcdef"[rand::random::<usize>() % 16],
            ));
        }
        Node {
            engine,
            config,
            command_names,
            clients: HashMap::default(),
            stats: Stats {
                cmd: vec![(0, 0); commands],
                ..Default::default()
            },
            slowlog: VecDeque::new(),
            slowlog_next_id: 0,
            queue_patterns: Default::default(),
            monitors: Vec::new(),
            run_id,
            start_time: now,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            tcp_port: 0,
            aof: persistence::AofStatus::default(),
            clients_paused_until: 0,
            effect_sink: None,
            tls: Default::default(),
            aof_writer: None,
            command_stats: command_stats::CommandStats::new(commands),
            waiters: HashMap::default(),
            wake_buf: Vec::new(),
            totals_waiters: HashMap::default(),
            acl: crate::acl::Acl::default(),
            spill: spill::SpillTier::default(),
        }
    }

    /// New connections must AUTH first: the default user has a password
    /// (`requirepass`) or is off.
    #[inline]
    pub fn requires_auth(&self) -> bool {
        self.acl.requires_auth()
    }

    pub fn aof_write_error(&self) -> Option<&crate::aof::AofError> {
        self.aof.last_write_error.as_ref()
    }

    pub fn monitors_active(&self) -> bool {
        !self.monitors.is_empty()
    }

    /// One MONITOR line per executed command: `+<sec>.<usec> [<addr>] "arg" ...`.
    pub fn feed_monitors(&mut self, client: &crate::node::ClientState, args: &[&[u8]], now: u64) {
        let mut line = format!(
            "+{}.{:06} [{}]",
            now / 1000,
            (now % 1000) * 1000,
            client.addr
        );
        for a in args {
            line.push(' ');
            line.push_str(&crate::support::strings::repr(a));
        }
        line.push_str("\r\n");
        let msg = Bytes::from(line);
        self.monitors.retain(|m| m.try_send(msg.clone()).is_ok());
    }

    /// Bookkeeping after a command: stats, commandstats and the slow log.
    pub fn record_call(&mut self, idx: usize, usec: u64, args: &[&[u8]], now: u64) {
        self.stats.total_commands += 1;
        if let Some(c) = self.stats.cmd.get_mut(idx) {
            c.0 += 1;
            c.1 += usec;
        }
        self.command_stats.observe_command(idx, usec);
        let threshold = self.config.slowlog_log_slower_than;
        if threshold >= 0 && usec >= threshold as u64 {
            self.slowlog_push(usec, args, now);
        }
    }

    fn slowlog_push(&mut self, usec: u64, args: &[&[u8]], now: u64) {
        let max_len = self.config.slowlog_max_len as usize;
        let mut kept: Vec<Bytes> = Vec::new();
        let limit = args.len().min(32);
        for (i, a) in args.iter().take(limit).enumerate() {
            if i == 31 && args.len() > 32 {
                kept.push(Bytes::from(format!(
                    "... ({} more arguments)",
                    args.len() - 31
                )));
                break;
            }
            if a.len() > 128 {
                let mut v = a[..128].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                kept.push(Bytes::from(v));
            } else {
                // A copy: the argument is a slice of the request's read
                // buffer, which a clone would keep alive (a big ADDJOB's
                // body pinned by its short arguments for the life of the
                // entry).
                kept.push(Bytes::copy_from_slice(a));
            }
        }
        self.slowlog.push_front(SlowlogEntry {
            id: self.slowlog_next_id,
            time: now / 1000,
            usec,
            args: kept,
        });
        self.slowlog_next_id += 1;
        while self.slowlog.len() > max_len {
            self.slowlog.pop_back();
        }
    }
}

impl Node {
    /// Push a CONFIG SET change into the running node.
    pub fn apply_config(&mut self, name: &str, now: u64) -> Result<(), crate::errors::WireError> {
        match name {
            "maxmemory" | "maxmemory-policy" => {
                let policy = memory_policy(&self.config);
                self.engine.set_memory_limit(self.config.maxmemory, policy);
                if name == "maxmemory" {
                    self.engine.free_memory_if_needed(now);
                }
            }
            "appendonly" => persistence::set_appendonly(self, now)?,
            "appendfsync" => persistence::set_fsync_policy(self),
            "loglevel" => crate::observe::logging::set_level(self.config.loglevel),
            "cluster-node-timeout" => {
                self.engine
                    .set_node_timeout(self.config.cluster_node_timeout);
            }
            "dedup-window" => self.engine.set_dedup_window(self.config.dedup_window),
            // requirepass is the default user's password, as in Redis 6.
            "requirepass" => crate::acl::store::set_requirepass(&mut self.acl, &self.config),
            _ => {}
        }
        Ok(())
    }
}

pub fn memory_policy(config: &Config) -> crate::engine::memory::Policy {
    match config.maxmemory_policy {
        crate::config::MaxmemoryPolicy::Acks => crate::engine::memory::Policy::Acks,
        crate::config::MaxmemoryPolicy::NoEviction => crate::engine::memory::Policy::NoEviction,
    }
}

impl Node {
    /// Hand engine effects to the AOF writer and the bus (non-blocking).
    pub fn dispatch_effects(&mut self, mut effects: crate::engine::Effects, now: u64) {
        // AOF first: a record is queued for the disk before any bus
        // message of the same call can leave.
        persistence::dispatch(self, std::mem::take(&mut effects.aof), now);
        spill::dispatch(self, now);
        if let Some(tx) = &self.effect_sink {
            tx(effects);
        }
    }
}

impl Node {
    /// A command blocked `client` in the engine: the receiver its
    /// connection waits on for the reply to the engine's wake.
    pub fn block_client(&mut self, client: ClientId) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        self.waiters.insert(client, tx);
        rx
    }

    /// Forget a connection that closed: its reply channel and its state
    /// in the engine (an ADDJOB it waited for is deleted).
    pub fn client_gone(&mut self, client: ClientId, now: u64) {
        self.waiters.remove(&client);
        self.engine.client_gone(client, now);
    }

    /// The dashboard's cluster view: ask every peer for its totals; the
    /// receiver gets them when all answered or after the QLEN CLUSTER
    /// wait (`deliver_totals`).
    pub fn cluster_totals(&mut self, now: u64) -> oneshot::Receiver<PeerTotals> {
        let (tx, rx) = oneshot::channel();
        let req = self.engine.cluster_totals(now);
        self.totals_waiters.insert(req, tx);
        rx
    }

    /// Send the totals the engine finished to their requesters.
    pub fn deliver_totals(&mut self) {
        for (req, totals) in self.engine.take_totals() {
            if let Some(tx) = self.totals_waiters.remove(&req) {
                let _ = tx.send(totals);
            }
        }
    }
}
