//! A worker: N concurrent handlers per queue set, each with its own
//! client, heartbeats for long jobs, ACK/NACK, graceful shutdown.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::client::{Client, ClientBuilder};
use crate::error::{Error, ErrorCode, Result};
use crate::options::GetJob;
use crate::types::Job;

/// What a handler returns on failure: any error (the job is then NACKed).
///
/// ```
/// use disque_client::{HandlerError, Job};
///
/// async fn handle(job: Job) -> Result<(), HandlerError> {
///     let n: u64 = std::str::from_utf8(&job.body)?.parse()?;
///     println!("{n}");
///     Ok(())
/// }
/// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).handler(handle);
/// # let _ = w;
/// ```
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>;
type Handler = Arc<dyn Fn(Job) -> HandlerFuture + Send + Sync>;
type Factory = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Client>> + Send>> + Send + Sync>;

/// Where the worker's clients come from.
enum Clients {
    Builder(Box<ClientBuilder>),
    Factory(Factory),
}

/// Processes jobs from a set of queues with `concurrency` handlers running
/// at once, each on its own [`Client`] made from the [`ClientBuilder`]
/// (which is also how failover and producer-following apply to workers).
///
/// For each job: the handler runs; if it is still running after
/// [`first_heartbeat`](Self::first_heartbeat), the worker sends `WORKING`
/// and then again after half the period each reply names, so the job is
/// not queued again meanwhile. `Ok` acknowledges it (ACKJOB), `Err` or a
/// panic gives it back (NACK; the server applies the job's BACKOFF, if it
/// was added with one). On shutdown, workers stop fetching, in-flight jobs
/// get until [`shutdown_timeout`](Self::shutdown_timeout) to finish, and
/// the rest are NACKed so that they are delivered again elsewhere.
///
/// Progress reports: the server has no progress command, so there is
/// nothing to send beyond the WORKING heartbeats.
///
/// ```no_run
/// use disque_client::Worker;
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let report = Worker::new(&["127.0.0.1:7711", "127.0.0.1:7712"], ["emails"])
///     .concurrency(8)
///     .handler(|job| async move {
///         println!("sending {:?}", job.body);
///         Ok(())
///     })
///     .run_until(async {
///         let _ = tokio::signal::ctrl_c().await;
///     })
///     .await?;
/// println!("{} jobs done, {} given back", report.acked, report.nacked);
/// # Ok(()) }
/// ```
pub struct Worker {
    clients: Clients,
    queues: Vec<String>,
    concurrency: usize,
    handler: Option<Handler>,
    fetch_timeout: Duration,
    shutdown_timeout: Duration,
    first_heartbeat: Duration,
    nack_delay: Option<Duration>,
    fast_ack: bool,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field(
                "clients",
                match &self.clients {
                    Clients::Builder(b) => b.as_ref() as &dyn std::fmt::Debug,
                    Clients::Factory(_) => &"<factory>",
                },
            )
            .field("queues", &self.queues)
            .field("concurrency", &self.concurrency)
            .field("handler", &self.handler.as_ref().map(|_| "<fn>"))
            .field("fetch_timeout", &self.fetch_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("first_heartbeat", &self.first_heartbeat)
            .field("nack_delay", &self.nack_delay)
            .field("fast_ack", &self.fast_ack)
            .finish()
    }
}

/// What a worker did, returned when it stops.
///
/// ```no_run
/// # async fn run(worker: disque_client::Worker) -> Result<(), disque_client::Error> {
/// let report = worker.run_until(async {}).await?;
/// assert_eq!(report.failed_acks, 0);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs whose handler succeeded and that were acknowledged.
    pub acked: u64,
    /// Jobs given back with NACK: handler errors and panics, plus
    /// [`abandoned`](Self::abandoned) and [`returned`](Self::returned).
    pub nacked: u64,
    /// In-flight jobs stopped at the shutdown deadline and NACKed.
    pub abandoned: u64,
    /// Jobs that arrived after shutdown began and were NACKed unprocessed.
    pub returned: u64,
    /// WORKING heartbeats sent.
    pub heartbeats: u64,
    /// Jobs whose ACK or NACK could not be delivered (the server will
    /// queue them again after their RETRY period).
    pub failed_acks: u64,
    /// Failed GETJOB calls (each followed by a short pause and a retry,
    /// on another node when the connection was lost).
    pub fetch_errors: u64,
}

#[derive(Default)]
struct Counters {
    acked: AtomicU64,
    nacked: AtomicU64,
    abandoned: AtomicU64,
    returned: AtomicU64,
    heartbeats: AtomicU64,
    failed_acks: AtomicU64,
    fetch_errors: AtomicU64,
}

impl Counters {
    fn add(n: &AtomicU64) {
        n.fetch_add(1, Ordering::Relaxed);
    }

    fn report(&self) -> WorkerReport {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        WorkerReport {
            acked: get(&self.acked),
            nacked: get(&self.nacked),
            abandoned: get(&self.abandoned),
            returned: get(&self.returned),
            heartbeats: get(&self.heartbeats),
            failed_acks: get(&self.failed_acks),
            fetch_errors: get(&self.fetch_errors),
        }
    }
}

/// Settings every slot reads.
struct Config {
    queues: Vec<String>,
    handler: Handler,
    fetch_timeout: Duration,
    first_heartbeat: Duration,
    nack_delay: Option<Duration>,
    fast_ack: bool,
}

/// The shutdown deadline, once shutdown began.
type Stop = watch::Receiver<Option<Instant>>;

impl Worker {
    /// A worker for `queues`, connecting with `client` (node addresses or
    /// a [`ClientBuilder`]); concurrency 1, no handler yet.
    ///
    /// ```
    /// use disque_client::{Client, Worker};
    ///
    /// let w1 = Worker::new(&["127.0.0.1:7711"], ["q"]);
    /// let w2 = Worker::new(Client::builder(&["127.0.0.1:7711"]).password("pw"), ["q1", "q2"]);
    /// # let _ = (w1, w2);
    /// ```
    pub fn new<I, S>(client: impl Into<ClientBuilder>, queues: I) -> Worker
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Worker {
            clients: Clients::Builder(Box::new(client.into())),
            queues: queues.into_iter().map(Into::into).collect(),
            concurrency: 1,
            handler: None,
            fetch_timeout: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(30),
            first_heartbeat: Duration::from_millis(500),
            nack_delay: None,
            fast_ack: false,
        }
    }

    /// A worker whose clients come from `factory`, called once per
    /// concurrent handler when the worker starts (for set-up a
    /// [`ClientBuilder`] cannot express, such as a first command on each
    /// connection).
    ///
    /// ```
    /// use disque_client::{Client, Worker};
    ///
    /// let w = Worker::with_client_factory(
    ///     || async {
    ///         let mut c = Client::connect(&["127.0.0.1:7711"]).await?;
    ///         c.cmd(["CLIENT", "SETNAME", "image-worker"]).await?;
    ///         Ok(c)
    ///     },
    ///     ["images"],
    /// );
    /// # let _ = w;
    /// ```
    pub fn with_client_factory<F, Fut, I, S>(factory: F, queues: I) -> Worker
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Client>> + Send + 'static,
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut w = Worker::new(ClientBuilder::new(Vec::<String>::new()), queues);
        w.clients = Clients::Factory(Box::new(move || Box::pin(factory())));
        w
    }

    /// How many handlers run at once (each with its own connection).
    ///
    /// ```
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).concurrency(16);
    /// # let _ = w;
    /// ```
    pub fn concurrency(mut self, n: usize) -> Worker {
        self.concurrency = n;
        self
    }

    /// The job handler: `Ok(())` acknowledges the job, `Err` NACKs it.
    /// Each call runs as its own tokio task.
    ///
    /// ```
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).handler(|job| async move {
    ///     let text = std::str::from_utf8(&job.body)?;
    ///     println!("{text}");
    ///     Ok(())
    /// });
    /// # let _ = w;
    /// ```
    pub fn handler<F, Fut>(mut self, f: F) -> Worker
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |job| Box::pin(f(job))));
        self
    }

    /// How long one GETJOB may block (default 1 s): the longest a slot
    /// takes to notice shutdown while idle.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).fetch_timeout(Duration::from_millis(200));
    /// # let _ = w;
    /// ```
    pub fn fetch_timeout(mut self, t: Duration) -> Worker {
        self.fetch_timeout = t;
        self
    }

    /// How long in-flight jobs may run after shutdown began (default
    /// 30 s) before they are stopped and NACKed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).shutdown_timeout(Duration::from_secs(5));
    /// # let _ = w;
    /// ```
    pub fn shutdown_timeout(mut self, t: Duration) -> Worker {
        self.shutdown_timeout = t;
        self
    }

    /// When the first WORKING heartbeat of a still-running job is sent
    /// (default 500 ms; the job's RETRY is not known before its first
    /// WORKING reply, and RETRY is at least 1 s).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).first_heartbeat(Duration::from_secs(5));
    /// # let _ = w;
    /// ```
    pub fn first_heartbeat(mut self, t: Duration) -> Worker {
        self.first_heartbeat = t;
        self
    }

    /// NACK failed jobs with `DELAY` (extension) instead of queueing them
    /// again at once (or after their BACKOFF). `None` (default): plain NACK.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).nack_delay(Some(Duration::from_secs(10)));
    /// # let _ = w;
    /// ```
    pub fn nack_delay(mut self, delay: Option<Duration>) -> Worker {
        self.nack_delay = delay;
        self
    }

    /// Acknowledge with FASTACK instead of ACKJOB (cheaper; a copy on a
    /// node that misses the message may be delivered again).
    ///
    /// ```
    /// let w = disque_client::Worker::new(&["127.0.0.1:7711"], ["q"]).fast_ack(true);
    /// # let _ = w;
    /// ```
    pub fn fast_ack(mut self, fast: bool) -> Worker {
        self.fast_ack = fast;
        self
    }

    /// Run until `shutdown` completes, then shut down gracefully and
    /// report. Fails at once if the settings are unusable or no node can
    /// be reached at start; later connection errors are retried.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), disque_client::Error> {
    /// use std::time::Duration;
    /// use disque_client::Worker;
    ///
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let worker = Worker::new(&["127.0.0.1:7711"], ["q"]).handler(|_job| async { Ok(()) });
    /// let running = tokio::spawn(worker.run_until(async { let _ = stopped.await; }));
    /// tokio::time::sleep(Duration::from_secs(10)).await;
    /// let _ = stop.send(());
    /// let report = running.await.map_err(|e| disque_client::Error::Config(e.to_string()))??;
    /// println!("{report:?}");
    /// # Ok(()) }
    /// ```
    pub async fn run_until<F>(self, shutdown: F) -> Result<WorkerReport>
    where
        F: Future<Output = ()>,
    {
        let handler = self
            .handler
            .ok_or_else(|| Error::Config("Worker needs a handler".into()))?;
        if self.queues.is_empty() {
            return Err(Error::Config("Worker needs at least one queue".into()));
        }
        if self.concurrency == 0 {
            return Err(Error::Config(
                "Worker concurrency must be at least 1".into(),
            ));
        }
        let mut clients = Vec::with_capacity(self.concurrency);
        for _ in 0..self.concurrency {
            clients.push(match &self.clients {
                Clients::Builder(b) => b.connect().await?,
                Clients::Factory(f) => f().await?,
            });
        }
        let cfg = Arc::new(Config {
            queues: self.queues,
            handler,
            fetch_timeout: self.fetch_timeout,
            first_heartbeat: self.first_heartbeat,
            nack_delay: self.nack_delay,
            fast_ack: self.fast_ack,
        });
        let counters = Arc::new(Counters::default());
        let (tx, rx) = watch::channel(None);
        let mut slots = JoinSet::new();
        for client in clients {
            slots.spawn(slot(client, cfg.clone(), rx.clone(), counters.clone()));
        }
        shutdown.await;
        let _ = tx.send(Some(Instant::now() + self.shutdown_timeout));
        while slots.join_next().await.is_some() {}
        Ok(counters.report())
    }
}

/// Wait `d`, or less if shutdown begins.
async fn pause(stop: &mut Stop, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.changed() => {}
    }
}

/// One handler's loop: fetch a job, run it, settle it.
async fn slot(mut client: Client, cfg: Arc<Config>, mut stop: Stop, n: Arc<Counters>) {
    let req = GetJob::from_queues(cfg.queues.iter().cloned()).timeout(cfg.fetch_timeout);
    let mut error_pause = Duration::from_millis(50);
    loop {
        if stop.borrow().is_some() {
            return;
        }
        let job = match client.get_jobs(&req).await {
            Ok(jobs) => {
                error_pause = Duration::from_millis(50);
                match jobs.into_iter().next() {
                    Some(job) => job,
                    None => continue,
                }
            }
            Err(_) => {
                Counters::add(&n.fetch_errors);
                pause(&mut stop, error_pause).await;
                error_pause = (error_pause * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        if stop.borrow().is_some() {
            Counters::add(&n.returned);
            settle(&mut client, &cfg, &n, &job, false).await;
            return;
        }
        let handle = tokio::spawn((cfg.handler)(job.clone()));
        match supervise(&mut client, &cfg, &mut stop, &n, &job, handle).await {
            Finished::Ok => settle(&mut client, &cfg, &n, &job, true).await,
            Finished::Failed => settle(&mut client, &cfg, &n, &job, false).await,
            Finished::Abandoned => {
                Counters::add(&n.abandoned);
                settle(&mut client, &cfg, &n, &job, false).await;
            }
        }
    }
}

enum Finished {
    Ok,
    Failed,
    Abandoned,
}

/// Wait for the handler, sending WORKING while it runs, and stop it at the
/// shutdown deadline.
async fn supervise(
    client: &mut Client,
    cfg: &Config,
    stop: &mut Stop,
    n: &Counters,
    job: &Job,
    mut handle: JoinHandle<Result<(), HandlerError>>,
) -> Finished {
    let mut next_beat = Some(Instant::now() + cfg.first_heartbeat);
    let mut watching = true;
    loop {
        let deadline = *stop.borrow();
        tokio::select! {
            r = &mut handle => {
                return match r {
                    Ok(Ok(())) => Finished::Ok,
                    // A handler error or panic: give the job back.
                    Ok(Err(_)) | Err(_) => Finished::Failed,
                };
            }
            _ = sleep_until_opt(next_beat) => {
                Counters::add(&n.heartbeats);
                next_beat = match client.working(&job.id).await {
                    // Half the period leaves room for a slow round trip.
                    Ok(retry) if !retry.is_zero() => {
                        Some(Instant::now() + (retry / 2).max(Duration::from_millis(100)))
                    }
                    // RETRY 0: never queued again, nothing to postpone.
                    Ok(_) => None,
                    Err(e) if matches!(e.code(), Some(ErrorCode::TooLate | ErrorCode::NoJob)) => None,
                    Err(_) => Some(Instant::now() + Duration::from_millis(500)),
                };
            }
            _ = sleep_until_opt(deadline) => {
                handle.abort();
                return Finished::Abandoned;
            }
            r = stop.changed(), if watching => {
                if r.is_err() {
                    watching = false;
                }
            }
        }
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// ACK (`done`) or NACK the job.
async fn settle(client: &mut Client, cfg: &Config, n: &Counters, job: &Job, done: bool) {
    let ids = [&job.id];
    let r = if done {
        if cfg.fast_ack {
            client.fast_ack(ids).await
        } else {
            client.ack_jobs(ids).await
        }
    } else {
        match cfg.nack_delay {
            Some(d) => client.nack_with_delay(ids, d).await,
            None => client.nack(ids).await,
        }
    };
    match (r, done) {
        (Ok(_), true) => Counters::add(&n.acked),
        (Ok(_), false) => Counters::add(&n.nacked),
        (Err(_), _) => Counters::add(&n.failed_acks),
    }
}
