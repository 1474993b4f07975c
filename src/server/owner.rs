//! The node's single owner: one OS thread holds `Node` (the engine plus
//! the shell state commands read) and runs everything that touches it in
//! turns, as Disque's event loop does. Connections, bus links, the timer
//! and the HTTP endpoint run on the tokio runtime's I/O threads; they read
//! and parse, then hand owned work to the owner and await its answer.
//!
//! A turn takes every task that is ready (up to `MAX_TURN`), runs them one
//! after another, then ends like Redis's `beforeSleep`: one `write()` of
//! every AOF record the turn produced (with `appendfsync always`, handed to
//! the writer thread, which writes and fsyncs), the turn's bus frames
//! handed to the links, and only then the turn's answers released. A
//! connection writes a reply only once its records are written (fsynced
//! with `always`), and nothing is ever locked: the state has one thread.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Shared;
use crate::node::Node;
use crate::support::clock::unix_ms;

/// Work for the owner: runs with the node, the current time, and the turn
/// it belongs to (where it leaves what must wait for the end of the turn).
pub type Task = Box<dyn FnOnce(&mut Node, u64, &mut Turn) + Send>;

/// Tasks run per turn at most, so the end-of-turn work (the AOF write,
/// releasing answers) is never postponed for long under load.
const MAX_TURN: usize = 512;

/// What a turn releases once its AOF records are written.
#[derive(Default)]
pub struct Turn {
    releases: Vec<Box<dyn FnOnce() + Send>>,
    /// Bus frames of the turn's tasks, in engine order.
    frames: Vec<(
        crate::domain::job::NodeIdx,
        crate::protocol::bus::message::Message,
    )>,
    /// The task's answer waits for its AOF records itself (a client
    /// batch's `SyncWait` writes what is queued): the lock owner leaves
    /// the write to it, so connections ready at the same moment share it.
    answer_writes_aof: bool,
}

impl Turn {
    /// Run `f` at the end of the turn, after the AOF write.
    pub fn release(&mut self, f: impl FnOnce() + Send + 'static) {
        self.releases.push(Box::new(f));
    }

    /// The answer of this task waits for its AOF records and writes them
    /// if nobody did (`SyncWait::wait`).
    pub fn answer_writes_aof(&mut self) {
        self.answer_writes_aof = true;
    }
}

/// How tasks reach the node (`owner-thread`).
pub enum Handle {
    /// `owner-thread yes`: the owner thread's mailbox.
    Thread(mpsc::UnboundedSender<Submitted>),
    /// `owner-thread no` (the default): the submitting thread runs the
    /// task itself, holding the node's lock for that one task, which is a
    /// turn of its own (`Inline::run_here`).
    Inline(Box<Inline>),
}

/// A task with the span it was submitted in (the client or bus link a log
/// line it writes is about).
type Submitted = (tracing::Span, Task);

impl Handle {
    /// The node behind its lock, when tasks run on the submitting thread
    /// (`owner-thread no`): a caller may then run its work directly
    /// (`Inline::run_here`) instead of boxing it and awaiting its answer.
    pub fn inline(&self) -> Option<&Inline> {
        match self {
            Handle::Thread(_) => None,
            Handle::Inline(inline) => Some(inline),
        }
    }

    /// Run or queue a task. The owner thread lives as long as the
    /// process, so a send only fails while the process is exiting: then
    /// there is nobody left to answer, and the task is dropped (its answer
    /// channel with it).
    pub fn submit(&self, shared: &Shared, task: Task) {
        match self {
            Handle::Thread(tx) => {
                let _ = tx.send((tracing::Span::current(), task));
            }
            Handle::Inline(inline) => inline.run_here(shared, task),
        }
    }
}

/// Start the node's owner with this node: a thread of its own
/// (`owner-thread yes`; `Starter::spawn` starts it once `Shared` holds
/// the handle), or the node behind a lock that every submitter takes.
pub fn start(node: Node, thread: bool) -> (Handle, Option<Starter>) {
    if thread {
        let (tx, rx) = mpsc::unbounded_channel();
        (Handle::Thread(tx), Some(Starter { node, rx }))
    } else {
        let inline = Inline {
            node: std::sync::Mutex::new(node),
        };
        (Handle::Inline(Box::new(inline)), None)
    }
}

/// try_lock attempts before sleeping on the node's lock: a task takes a
/// few microseconds, and its holder is almost always running on the other
/// core, so spinning is cheaper than a futex sleep and wake-up.
const SPIN_TRIES: u32 = 2000;

/// The node behind a lock, for `owner-thread no`: the thread that submits
/// a task runs it, so no task crosses threads. Measured on two cores with
/// the load generator beside the server, this costs less CPU per command
/// than handing every batch to an owner thread (docs/PERFORMANCE.md).
pub struct Inline {
    node: std::sync::Mutex<Node>,
}

impl Inline {
    /// Run one task as a turn of its own: the task, its wakes and effects
    /// and the end of the turn under the lock; the AOF write and the
    /// task's answers after releasing it, so other threads run meanwhile.
    /// The answer comes back once the turn's AOF write and releases are
    /// done, exactly when a released answer would have. A client batch
    /// runs here directly on the default owner: no box, no channel, and
    /// the batch is not moved to and fro (a per-command cost without
    /// pipelining); a submitted `Task` answers by its releases.
    pub fn run_here<R>(
        &self,
        shared: &Shared,
        task: impl FnOnce(&mut Node, u64, &mut Turn) -> R,
    ) -> R {
        let mut turn = Turn::default();
        let (answer, flusher) = {
            let mut node = self.lock();
            let _guard = AbortOnPanic;
            let now = unix_ms();
            let answer = task(&mut node, now, &mut turn);
            after_task(shared, &mut node, now, &mut turn);
            end_turn_notify(shared, &mut node);
            if !turn.frames.is_empty() {
                shared.send_frames(&mut node, std::mem::take(&mut turn.frames));
            }
            (answer, crate::node::persistence::take_flusher(&mut node))
        };
        // A client batch writes its records after letting the other
        // connections ready on its thread queue theirs (one `write()` for
        // all of them, as Disque writes its AOF buffer once per loop turn).
        if let Some(f) = flusher.filter(|_| !turn.answer_writes_aof) {
            f.flush();
        }
        for r in turn.releases.drain(..) {
            r();
        }
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Node> {
        for _ in 0..SPIN_TRIES {
            match self.node.try_lock() {
                Ok(g) => return g,
                Err(std::sync::TryLockError::Poisoned(_)) => poisoned(),
                Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
            }
        }
        self.node.lock().unwrap_or_else(|_| poisoned())
    }
}

/// A task panicked while holding the node's lock (`AbortOnPanic` aborts
/// first; this is for a lock poisoned some other way).
#[cold]
fn poisoned() -> ! {
    tracing::error!("The node's lock is poisoned: the node state may be half-updated. Aborting.");
    eprintln!(
        "disque-server: the node's lock is poisoned; the node state may be half-updated. Aborting."
    );
    std::process::abort()
}

/// The owner, not yet running (it needs the `Shared` that holds its handle).
pub struct Starter {
    node: Node,
    rx: mpsc::UnboundedReceiver<Submitted>,
}

impl Starter {
    /// Spawn the owner thread. It enters the runtime of the caller, so
    /// effects can spawn tasks and start timers there.
    pub fn spawn(self, shared: Arc<Shared>) -> std::io::Result<()> {
        let Starter { node, rx } = self;
        let runtime = tokio::runtime::Handle::current();
        std::thread::Builder::new()
            .name("disque-owner".into())
            .spawn(move || {
                let _rt = runtime.enter();
                run(shared, node, rx)
            })
            .map(|_| ())
    }
}

/// A panic inside a task left the node's state possibly half-updated (a
/// job dequeued but not delivered, an index out of step with the table):
/// serving on from it could lose or duplicate jobs, so stop here, loudly.
/// Replicas and the AOF recover the jobs on restart.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!("A command panicked on the node's owner thread: the node state may be half-updated. Aborting.");
            eprintln!("disque-server: a command panicked on the owner thread; the node state may be half-updated. Aborting.");
            std::process::abort();
        }
    }
}

fn run(shared: Arc<Shared>, mut node: Node, mut rx: mpsc::UnboundedReceiver<Submitted>) {
    let _guard = AbortOnPanic;
    let mut tasks: Vec<Submitted> = Vec::with_capacity(MAX_TURN);
    let mut turn = Turn::default();
    loop {
        match next_task(&mut rx) {
            Some(t) => tasks.push(t),
            None => return,
        }
        while tasks.len() < MAX_TURN {
            match rx.try_recv() {
                Ok(t) => tasks.push(t),
                Err(_) => break,
            }
        }
        for (span, task) in tasks.drain(..) {
            let now = unix_ms();
            let _in = span.enter();
            task(&mut node, now, &mut turn);
            after_task(&shared, &mut node, now, &mut turn);
        }
        end_turn(&shared, &mut node, &mut turn);
    }
}

/// Polls before parking: under load the next batch is usually a few
/// microseconds away, and a park costs a futex sleep here plus a futex
/// wake-up in the I/O thread that submits it.
const SPIN_POLLS: u32 = 200;

/// The next task, spinning briefly before sleeping; None once every
/// sender is gone.
fn next_task(rx: &mut mpsc::UnboundedReceiver<Submitted>) -> Option<Submitted> {
    for _ in 0..SPIN_POLLS {
        match rx.try_recv() {
            Ok(t) => return Some(t),
            Err(mpsc::error::TryRecvError::Empty) => std::hint::spin_loop(),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
        }
    }
    rx.blocking_recv()
}

/// Redis's `beforeSleep`: wake the timer and the nodes.conf saver when
/// needed, write the turn's AOF records with one `write()`, hand the
/// turn's bus frames to the links (one wake-up per peer), then release the
/// turn's answers (batches, calls, completed blocked commands).
/// After each task: deliver the engine's wakes (before the effects: jobs
/// handed back by a vanished client may produce more of them), then take
/// its effects.
fn after_task(shared: &Shared, node: &mut Node, now: u64, turn: &mut Turn) {
    let replies = crate::commands::deliver_wakes(node, now);
    if !replies.is_empty() {
        turn.release(move || {
            for (tx, reply) in replies {
                let _ = tx.send(reply);
            }
        });
    }
    shared.drain_effects(node, now, &mut turn.frames);
}

fn end_turn(shared: &Shared, node: &mut Node, turn: &mut Turn) {
    end_turn_notify(shared, node);
    if let Some(f) = crate::node::persistence::take_flusher(node) {
        f.flush();
    }
    if !turn.frames.is_empty() {
        shared.send_frames(node, std::mem::take(&mut turn.frames));
    }
    for r in turn.releases.drain(..) {
        r();
    }
}

/// The notifications a turn ends with: the timer when an earlier
/// deadline appeared, the nodes.conf saver when the table changed, and
/// the AOF flag woken clients read.
fn end_turn_notify(shared: &Shared, node: &mut Node) {
    if let Some(d) = node.engine.next_deadline() {
        if d < shared.next_tick.load(Ordering::Relaxed) {
            shared.tick_notify.notify_one();
        }
    }
    // Persist a changed node table right away, as Disque does before its
    // event loop sleeps again (a node killed just after learning its peers
    // must find them in nodes.conf on restart).
    if node.engine.nodes_conf_dirty() {
        shared.save_notify.notify_one();
    }
    let aof = node.engine.aof_records();
    if shared.aof_records.load(Ordering::Relaxed) != aof {
        shared.aof_records.store(aof, Ordering::Release);
    }
}

/// Submit `f`, its result answered on the returned channel at the end of
/// the turn it ran in.
fn submit_answered<R: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce(&mut Node, u64) -> R + Send + 'static,
) -> oneshot::Receiver<R> {
    let (tx, rx) = oneshot::channel();
    shared.submit(Box::new(move |node, now, turn| {
        let out = f(node, now);
        turn.release(move || {
            let _ = tx.send(out);
        });
    }));
    rx
}

/// Run `f` on the owner and await its result, released at the end of the
/// turn it ran in.
pub async fn call<R: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce(&mut Node, u64) -> R + Send + 'static,
) -> R {
    match submit_answered(shared, f).await {
        Ok(r) => r,
        // The owner never drops a task without running it while the
        // process runs; if it did, there is no state left to serve from.
        Err(_) => owner_gone(),
    }
}

/// `call` for a thread that may block (not a runtime worker).
pub fn call_blocking<R: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce(&mut Node, u64) -> R + Send + 'static,
) -> R {
    match submit_answered(shared, f).blocking_recv() {
        Ok(r) => r,
        Err(_) => owner_gone(),
    }
}

#[cold]
pub(crate) fn owner_gone() -> ! {
    tracing::error!("The node's owner thread is gone. Aborting.");
    eprintln!("disque-server: the node's owner thread is gone. Aborting.");
    std::process::abort()
}
