//! The tokio shell around the engine: shared state behind one mutex,
//! startup and shutdown, the client listener, connections and the timer.
//! Every client command, bus message and tick is one `with` call; effects
//! are drained while the lock is still held so they leave in engine order.

pub mod connection;
pub mod listener;
pub mod ticker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{watch, Notify};

use crate::node::Node;

/// Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix time in microseconds.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

pub struct Shared {
    node: Mutex<Node>,
    /// Wakes the ticker when an earlier deadline appears.
    pub tick_notify: Notify,
    /// The ticker's next planned wake-up (unix ms).
    pub next_tick: AtomicU64,
    pub next_client_id: AtomicU64,
    /// Flips to true once shutdown starts.
    pub shutdown_tx: watch::Sender<bool>,
    /// Idle client timeout in seconds (CONFIG SET timeout), 0 = none.
    pub idle_timeout: AtomicU64,
}

impl Shared {
    pub fn new(node: Node) -> Arc<Shared> {
        let idle = node.config.timeout;
        let (shutdown_tx, _) = watch::channel(false);
        Arc::new(Shared {
            node: Mutex::new(node),
            tick_notify: Notify::new(),
            next_tick: AtomicU64::new(0),
            next_client_id: AtomicU64::new(1),
            shutdown_tx,
            idle_timeout: AtomicU64::new(idle),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Node> {
        // A panic while holding the lock is a bug; keep serving with the
        // state as it is rather than poisoning every later command.
        self.node.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on the node with the current time, then hand off effects.
    pub fn with<R>(&self, f: impl FnOnce(&mut Node, u64) -> R) -> R {
        let mut node = self.lock();
        let now = unix_ms();
        let out = f(&mut node, now);
        self.drain_effects(&mut node);
        if let Some(d) = node.engine.next_deadline() {
            if d < self.next_tick.load(Ordering::Relaxed) {
                self.tick_notify.notify_one();
            }
        }
        out
    }

    fn drain_effects(&self, node: &mut Node) {
        let effects = std::mem::take(&mut node.engine.out);
        node.dispatch_effects(effects);
    }

    pub fn shutdown(&self) {
        let _ = self.shutdown_tx.send(true);
    }

    pub fn shutdown_rx(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }
}

/// Start a node with this configuration and serve until shutdown.
pub async fn run(config: crate::config::Config) -> Result<(), String> {
    let bound = listener::bind(&config.bind, config.port, config.tcp_backlog)
        .map_err(|e| format!("Could not bind port {}: {e}", config.port))?;
    let port = bound.port;
    let now = unix_ms();
    let myid = crate::engine::cluster::random_node_id(&mut rand::thread_rng());
    let mut engine = crate::engine::Engine::new(myid, port, rand::random(), now);
    engine.memory.maxmemory = config.maxmemory;
    engine.memory.policy = crate::node::memory_policy(&config);
    engine.memory.used = crate::memory::allocated;
    let mut config = config;
    // With `port 0` the node picked a port: report and rewrite the real one.
    config.port = port;
    let mut node = Node::new(engine, config, now);
    node.tcp_port = port;
    let shared = Shared::new(node);

    for l in bound.clients {
        tokio::spawn(listener::accept_loop(shared.clone(), l));
    }
    // The bus listeners are held so the port pair stays reserved.
    let _bus = bound.bus;
    let ticker = tokio::spawn(ticker::run(shared.clone()));

    tracing::info!(
        port,
        bus_port = port + listener::BUS_PORT_OFFSET,
        "Ready to accept connections."
    );
    println!(
        "disque-server ready port={port} bus={} pid={}",
        port + listener::BUS_PORT_OFFSET,
        std::process::id()
    );

    wait_for_shutdown(&shared).await;
    tracing::info!("Shutting down.");
    shared.shutdown();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ticker).await;
    Ok(())
}

async fn wait_for_shutdown(shared: &Shared) {
    let mut rx = shared.shutdown_rx();
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("Received SIGINT."),
        _ = term => tracing::info!("Received SIGTERM."),
        _ = rx.changed() => {}
    }
}
