//! The tokio shell around the engine: the handles every task shares (the
//! owner's mailbox, the bus, notifications), startup and shutdown, the
//! client listener, connections and the timer. The node itself belongs to
//! one thread (`owner`); every client batch, bus batch and tick is one
//! task there, and effects are drained after each task, on that thread, so
//! they leave in engine order.

pub mod access;
mod batch;
pub mod bus;
pub mod connection;
pub mod drain;
mod error;
pub mod http;
pub mod join;
pub mod listener;
pub mod loading;
pub mod nodes_conf;
pub mod owner;
pub mod persistence;
pub mod signals;
mod spill;
pub mod ticker;
mod turn;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use crate::node::Node;
use crate::support::clock::unix_ms;
pub use error::ServerError;

/// How `run` ended.
pub struct Exit {
    /// DEBUG RESTART: run the binary again after this many ms.
    pub restart_after_ms: Option<u64>,
    /// The client port that was bound (a restart reuses it even after
    /// `--port 0`).
    pub port: u16,
}

pub struct Shared {
    /// The owner thread's mailbox (`owner`): the only way to the node.
    owner: owner::Handle,
    /// Wakes the ticker when an earlier deadline appears.
    pub tick_notify: Notify,
    /// Wakes the nodes.conf saver when the node table changed.
    pub save_notify: Notify,
    /// Node tables taken for nodes.conf so far (their generations).
    pub nodes_conf_taken: AtomicU64,
    /// The ticker's next planned wake-up (unix ms).
    pub next_tick: AtomicU64,
    pub next_client_id: AtomicU64,
    /// Flips to true once shutdown starts.
    pub shutdown_tx: watch::Sender<bool>,
    /// Idle client timeout in seconds (CONFIG SET timeout), 0 = none.
    pub idle_timeout: AtomicU64,
    /// `tcp-keepalive` seconds for new client sockets, 0 = off.
    pub tcp_keepalive: AtomicU64,
    /// client-output-buffer-limit soft bytes (0 = none): a client whose
    /// pending replies stay above it for `obuf_soft_secs` is closed.
    pub obuf_soft: AtomicU64,
    /// client-output-buffer-limit soft seconds.
    pub obuf_soft_secs: AtomicU64,
    /// `proto-max-bulk-len`, applied by every connection's parser.
    pub proto_max_bulk_len: AtomicU64,
    pub bus: Arc<bus::Bus>,
    connect_tx: tokio::sync::mpsc::UnboundedSender<bus::ConnectRequest>,
    /// CLUSTER MEET <host>: resolved by `join::meet_resolver`.
    pub meet_tx: tokio::sync::mpsc::UnboundedSender<join::MeetRequest>,
    meet_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<join::MeetRequest>>>,
    node_timeout: AtomicU64,
    /// `cluster-secret`: bus connections must authenticate when set.
    pub bus_secret: Option<Vec<u8>>,
    /// TLS in force for new client and bus connections (swapped by CONFIG SET).
    pub tls: Arc<crate::tls::Tls>,
    /// nodes.conf, locked for the life of the process.
    pub nodes_conf: Mutex<Option<nodes_conf::NodesConf>>,
    /// Set by DEBUG RESTART (u64::MAX = no restart).
    restart_after_ms: AtomicU64,
    /// The engine produces AOF records (`Engine::aof_records`), as of the
    /// end of the last owner task: a woken client reads it without a trip
    /// to the owner to
    /// know whether its reply must wait for the AOF. A call sees the value
    /// the previous one left, and a call that serves a waiter never flips
    /// it, so `false` read after a wake-up means no record to wait for.
    pub aof_records: AtomicBool,
}

impl Shared {
    /// The shared handles, and the node's owner thread, started.
    pub fn new(
        node: Node,
    ) -> std::io::Result<(
        Arc<Shared>,
        tokio::sync::mpsc::UnboundedReceiver<bus::ConnectRequest>,
    )> {
        let idle = node.config.timeout;
        let keepalive = node.config.tcp_keepalive;
        let obuf = node.config.client_output_buffer_limit;
        let max_bulk = node.config.proto_max_bulk_len;
        let node_timeout = node.config.cluster_node_timeout;
        let bus_secret = node.config.cluster_secret.clone().map(String::into_bytes);
        let tls = node.tls.clone();
        let (shutdown_tx, _) = watch::channel(false);
        let (connect_tx, connect_rx) = tokio::sync::mpsc::unbounded_channel();
        let (meet_tx, meet_rx) = tokio::sync::mpsc::unbounded_channel();
        let thread = node.config.deploy.owner_thread;
        let (owner, starter) = owner::start(node, thread);
        let shared = Arc::new(Shared {
            owner,
            tick_notify: Notify::new(),
            save_notify: Notify::new(),
            nodes_conf_taken: AtomicU64::new(0),
            next_tick: AtomicU64::new(0),
            next_client_id: AtomicU64::new(1),
            shutdown_tx,
            idle_timeout: AtomicU64::new(idle),
            tcp_keepalive: AtomicU64::new(keepalive),
            obuf_soft: AtomicU64::new(obuf.soft),
            obuf_soft_secs: AtomicU64::new(obuf.soft_seconds),
            proto_max_bulk_len: AtomicU64::new(max_bulk),
            bus: Arc::new(bus::Bus::default()),
            connect_tx,
            meet_tx,
            meet_rx: Mutex::new(Some(meet_rx)),
            node_timeout: AtomicU64::new(node_timeout),
            nodes_conf: Mutex::new(None),
            restart_after_ms: AtomicU64::new(u64::MAX),
            aof_records: AtomicBool::new(true),
            bus_secret,
            tls,
        });
        if let Some(starter) = starter {
            starter.spawn(shared.clone())?;
        }
        Ok((shared, connect_rx))
    }

    /// DEBUG RESTART: after the shutdown that follows, run again.
    pub fn request_restart(&self, delay_ms: u64) {
        self.restart_after_ms
            .store(delay_ms.min(u64::MAX - 1), Ordering::Relaxed);
    }

    fn restart_requested(&self) -> Option<u64> {
        let v = self.restart_after_ms.load(Ordering::Relaxed);
        (v != u64::MAX).then_some(v)
    }

    pub fn node_timeout(&self) -> u64 {
        self.node_timeout.load(Ordering::Relaxed)
    }

    /// Run `f` on the node's owner thread with the current time and await
    /// its result (released after the AOF write of the turn it ran in).
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, u64) -> R + Send + 'static,
    ) -> R {
        owner::call(self, f).await
    }

    /// `call` from a thread outside the runtime (a blocking task), which
    /// may wait.
    pub fn call_blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, u64) -> R + Send + 'static,
    ) -> R {
        owner::call_blocking(self, f)
    }

    /// The node's lock when the default owner (`owner-thread no`) runs
    /// tasks on the submitting thread.
    pub fn inline_owner(&self) -> Option<&owner::Inline> {
        self.owner.inline()
    }

    /// Hand the owner a task that answers by itself (`owner::Turn::release`).
    pub fn submit(&self, task: owner::Task) {
        self.owner.submit(self, task);
    }

    /// Take a task's effects: its bus frames join `frames` (sent at the
    /// end of the turn, `send_frames`), the rest is handed on now.
    pub(crate) fn drain_effects(
        &self,
        node: &mut Node,
        now: u64,
        frames: &mut Vec<(
            crate::domain::job::NodeIdx,
            crate::protocol::bus::message::Message,
        )>,
    ) {
        let taken = node.engine.take_messages(now);
        if frames.is_empty() {
            *frames = taken;
        } else {
            frames.extend(taken);
        }
        let mut effects = node.engine.take_effects();
        for idx in effects.disconnect.drain(..) {
            self.bus.disconnect(idx);
        }
        for req in effects.connect.drain(..) {
            let _ = self.connect_tx.send(req);
        }
        node.dispatch_effects(effects, now);
        // Settings the shell reads without asking the owner. Stored only
        // when they changed: an unconditional store on every task would
        // move these cache lines to the owner's core each time, and every
        // read turn of every connection reads them (`idle_timeout`).
        let c = &node.config;
        for (cell, v) in [
            (&self.idle_timeout, c.timeout),
            (&self.tcp_keepalive, c.tcp_keepalive),
            (&self.node_timeout, c.cluster_node_timeout),
            (&self.obuf_soft, c.client_output_buffer_limit.soft),
            (
                &self.obuf_soft_secs,
                c.client_output_buffer_limit.soft_seconds,
            ),
            (&self.proto_max_bulk_len, c.proto_max_bulk_len),
        ] {
            if cell.load(Ordering::Relaxed) != v {
                cell.store(v, Ordering::Relaxed);
            }
        }
    }

    /// Hand a turn's bus frames to the links: each link's task is woken
    /// once and writes them with one syscall.
    pub(crate) fn send_frames(
        &self,
        node: &mut Node,
        frames: Vec<(
            crate::domain::job::NodeIdx,
            crate::protocol::bus::message::Message,
        )>,
    ) {
        // With appendfsync always a replica's GOTJOB must not leave before
        // its LOADJOB record is on disk (the origin then tells its client).
        let is_gotjob = |m: &crate::protocol::bus::message::Message| {
            matches!(
                m.body,
                crate::protocol::bus::message::Body::Job {
                    kind: crate::protocol::bus::message::JobMsg::GotJob,
                    ..
                }
            )
        };
        let durable = frames
            .iter()
            .any(|(_, m)| is_gotjob(m))
            .then(|| crate::node::persistence::produced_sync(node))
            .flatten();
        for (_, msg) in &frames {
            crate::observe::metrics::shell().bus_sent(msg.body.msg_type());
        }
        if let Some(wait) = durable {
            let deferred: Vec<(crate::domain::job::NodeIdx, bytes::Bytes)> = frames
                .iter()
                .filter(|(_, m)| is_gotjob(m))
                .map(|(to, m)| (*to, m.to_bytes()))
                .collect();
            self.bus.send_all(
                frames
                    .iter()
                    .filter(|(_, m)| !is_gotjob(m))
                    .map(|(to, m)| (*to, m)),
            );
            let bus = self.bus.clone();
            tokio::spawn(async move {
                if wait.wait().await.is_ok() {
                    for (to, frame) in deferred {
                        bus.send(to, &frame);
                    }
                }
            });
        } else {
            self.bus.send_all(frames.iter().map(|(to, m)| (*to, m)));
        }
    }

    pub async fn shutdown(&self) {
        let _ = self.shutdown_tx.send(true);
        // Client connections wait on their kill oneshot only (cheaper to
        // poll than the watch): fire them all. One registering later sees
        // the watch set and gets no sender (`connection::handle`).
        self.call(|node, _| {
            for c in node.clients.values_mut() {
                if let Some(k) = c.kill.take() {
                    let _ = k.send(());
                }
            }
        })
        .await;
    }

    pub fn shutdown_rx(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }
}

/// Start a node with this configuration and serve until shutdown.
pub async fn run(config: crate::config::Config) -> Result<Exit, ServerError> {
    // Registered before anything is printed: a SIGTERM that arrives right
    // after the ready line must take the clean path (AOF flushed, pidfile
    // removed), not the default action.
    let mut stop_signals = StopSignals::register();
    warn_unsupported(&config);
    // The command clock calibrates the TSC on its first read (0.6 ms
    // here): done now, not in the first client's command.
    let _ = quanta::Instant::now();
    let mut config = config;
    crate::os::cgroup::size_maxmemory(&mut config);
    let now = unix_ms();
    let (nodes_conf, loaded) = nodes_conf::NodesConf::open(&config.cluster_config_file, now)?;
    let tls = Arc::new(crate::tls::Tls::default());
    tls.configure(&config.tls).map_err(ServerError::Tls)?;
    let listeners = listener::bind_clients(&config)?;
    let bound = listeners.pair;
    let port = bound.port;
    // DEBUG RESTART passes `--port` again; TLS only stays TLS only.
    let plain_port = if listeners.plain { port } else { 0 };
    let pidfile = write_pidfile(&config);
    let mut engine = match loaded {
        Some(l) => {
            // `parse` guarantees index 0 is the myself line.
            let me = l.nodes[0].id;
            let mut e = crate::engine::Engine::new(me, port, rand::random(), now);
            e.restore_nodes(l.nodes);
            e.restore_limits(l.limits);
            tracing::info!(node_id = %String::from_utf8_lossy(&me), "Node configuration loaded.");
            e
        }
        None => {
            let myid = crate::engine::cluster::random_node_id(&mut rand::thread_rng());
            tracing::info!(node_id = %String::from_utf8_lossy(&myid), "No cluster configuration found, I'm a new node.");
            crate::engine::Engine::new(myid, port, rand::random(), now)
        }
    };
    // The persisted LEAVING flag and address come with the myself line;
    // the port is always the one bound now.
    engine.set_node_timeout(config.cluster_node_timeout);
    engine.set_announce(crate::engine::cluster::Announced {
        ip: config.deploy.announce_ip,
        port: config.deploy.announce_port,
        bus_port: config.deploy.announce_bus_port,
    });
    engine.set_port(port);
    engine.set_memory_counter(crate::os::allocator::allocated);
    engine.set_memory_limit(config.maxmemory, crate::node::memory_policy(&config));
    engine.set_dedup_window(config.dedup_window);
    // With `port 0` the node picked a port: report and rewrite the real one.
    config.port = plain_port;
    if let Some(t) = listeners.tls_port {
        config.tls.port = Some(t);
    }
    let unix_path = config.unixsocket.clone();
    let unix_perm = config.unixsocketperm;
    let names = crate::commands::name_table(&config.rename_commands);
    let mut node = Node::new(engine, config, names, crate::commands::COMMANDS.len(), now);
    crate::acl::store::startup(&mut node.acl, &node.config, node.engine.cluster().my_id())?;
    node.tcp_port = port;
    node.tls = tls;
    let (shared, connect_rx) = Shared::new(node).map_err(ServerError::OwnerThread)?;
    if let Ok(mut g) = shared.nodes_conf.lock() {
        *g = Some(nodes_conf);
    }
    ticker::save_nodes_conf(&shared).await;
    signals::spawn_hangup_handler();

    // Clients are accepted while the AOF loads (after nodes.conf, so
    // nodes_delivered resolves) and get -LOADING meanwhile; the bus and the
    // timer start once the dataset is in memory. A bad file refuses to start.
    loading::mark(&shared).await;
    let tls_on_pair = !listeners.plain;
    for l in bound.clients {
        tokio::spawn(listener::accept_loop(shared.clone(), l, tls_on_pair));
    }
    for l in listeners.tls {
        tokio::spawn(listener::accept_loop(shared.clone(), l, true));
    }
    if let Some(path) = unix_path.clone().filter(|p| !p.is_empty()) {
        let l =
            listener::bind_unix(&path, unix_perm).map_err(|source| listener::BindError::Unix {
                path: path.clone(),
                source,
            })?;
        tracing::info!(path = %path, "Listening on the Unix socket.");
        tokio::spawn(listener::accept_unix_loop(shared.clone(), l, path));
    }
    // Probes answer during the load too (/readyz says "loading").
    let http_endpoint = http::start(&shared).await?;
    // Fields are appended, never reordered: scripts parse these lines.
    let http_field = http_endpoint
        .as_ref()
        .map(|e| format!(" http={}", e.port))
        .unwrap_or_default();
    // `tls=` only when a TLS port is open; `port=0` means TLS only.
    let tls_field = listeners
        .tls_port
        .map(|t| format!(" tls={t}"))
        .unwrap_or_default();
    let ports = format!(
        "port={plain_port} bus={}{tls_field}",
        port + listener::BUS_PORT_OFFSET
    );
    println!(
        "disque-server loading {ports} pid={}{http_field}",
        std::process::id()
    );
    spill::start(&shared).await;
    loading::load(&shared).await?;
    for l in bound.bus {
        tokio::spawn(bus::accept_loop(shared.clone(), l));
    }
    tokio::spawn(bus::connector(shared.clone(), connect_rx));
    if let Some(rx) = shared.meet_rx.lock().ok().and_then(|mut g| g.take()) {
        tokio::spawn(join::meet_resolver(shared.clone(), rx));
    }
    let seeds = shared.call(|node, _| node.config.deploy.join.clone()).await;
    if !seeds.is_empty() {
        tokio::spawn(join::join(shared.clone(), seeds));
    }
    let ticker = tokio::spawn(ticker::run(shared.clone()));
    tokio::spawn(ticker::nodes_conf_saver(shared.clone()));
    tokio::spawn(persistence::run_task(shared.clone()));
    if let Some(e) = &http_endpoint {
        e.started();
    }

    let tls_port = listeners.tls_port.unwrap_or(0);
    tracing::info!(
        port = plain_port,
        tls_port,
        bus_port = port + listener::BUS_PORT_OFFSET,
        tls_cluster = shared.tls.bus().is_some(),
        "Ready to accept connections."
    );
    println!(
        "disque-server ready {ports} pid={}{http_field}",
        std::process::id()
    );

    if wait_for_shutdown(&shared, &mut stop_signals).await {
        drain::drain(&shared).await;
    }
    tracing::info!("Shutting down.");
    shared.shutdown().await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ticker).await;
    ticker::save_nodes_conf(&shared).await;
    persistence::shutdown(&shared).await;
    if let Some(path) = unix_path.filter(|p| !p.is_empty()) {
        let _ = std::fs::remove_file(path);
    }
    if let Some(path) = pidfile {
        let _ = std::fs::remove_file(path);
    }
    Ok(Exit {
        restart_after_ms: shared.restart_requested(),
        port: plain_port,
    })
}

/// `pidfile`: written when set to something other than the default path
/// (or with `daemonize yes`, as Redis does), relative to `dir`, removed on
/// a clean shutdown. A failure is logged, not fatal (as in Redis).
fn write_pidfile(c: &crate::config::Config) -> Option<String> {
    let wanted = c.daemonize || c.pidfile != crate::config::defaults::PIDFILE;
    if !wanted || c.pidfile.is_empty() {
        return None;
    }
    match std::fs::write(&c.pidfile, format!("{}\n", std::process::id())) {
        Ok(()) => Some(c.pidfile.clone()),
        Err(e) => {
            tracing::warn!(path = %c.pidfile, error = %e, "Could not write the pidfile.");
            None
        }
    }
}

/// Directives accepted for compatibility that this server does not act on:
/// say so at startup when one is set to anything but its default, instead
/// of ignoring it silently (docs/COMPATIBILITY.md).
fn warn_unsupported(c: &crate::config::Config) {
    use crate::config::defaults as d;
    if c.daemonize {
        tracing::warn!(
            "daemonize yes is accepted for compatibility and ignored: running in the foreground (use a service manager)."
        );
    }
    if c.syslog_enabled
        || c.syslog_ident != d::SYSLOG_IDENT
        || c.syslog_facility != crate::config::SyslogFacility::Local0
    {
        tracing::warn!(
            "syslog-enabled / syslog-ident / syslog-facility are accepted for compatibility and ignored: logging to the logfile or stdout."
        );
    }
    if !c.activerehashing {
        tracing::warn!("activerehashing is accepted for compatibility and ignored (there is no incremental rehashing to turn off).");
    }
    if c.latency_monitor_threshold != d::LATENCY_MONITOR_THRESHOLD {
        tracing::warn!("latency-monitor-threshold is accepted for compatibility and ignored: LATENCY reports no samples.");
    }
    if c.no_appendfsync_on_rewrite {
        tracing::warn!("no-appendfsync-on-rewrite is accepted for compatibility and ignored: the AOF is fsynced per appendfsync during rewrites too (they run on the writer thread).");
    }
}

/// SIGTERM and SIGINT streams, registered once at startup.
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn register() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let open = |kind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, signal = name, "Could not install a signal handler.");
                None
            }
        };
        StopSignals {
            term: open(SignalKind::terminate(), "SIGTERM"),
            int: open(SignalKind::interrupt(), "SIGINT"),
        }
    }
}

async fn recv_or_pending(s: &mut Option<tokio::signal::unix::Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// True when the shutdown was asked by SIGTERM (which may drain first).
async fn wait_for_shutdown(shared: &Shared, signals: &mut StopSignals) -> bool {
    let mut rx = shared.shutdown_rx();
    tokio::select! {
        _ = recv_or_pending(&mut signals.int) => {
            tracing::info!("Received SIGINT.");
            false
        }
        _ = recv_or_pending(&mut signals.term) => {
            tracing::info!("Received SIGTERM.");
            true
        }
        _ = rx.changed() => false,
    }
}
