//! Typed arguments of the commands that take options.

use std::time::Duration;

use bytes::Bytes;

use crate::resp::Cmd;
use crate::types::JobState;

/// Whole seconds, rounded up so that a non-zero duration never becomes 0
/// (RETRY 0 and DELAY 0 mean something else).
fn secs_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Milliseconds, rounded up for the same reason.
fn millis_up(d: Duration) -> u64 {
    let ms = d.as_millis();
    let up = ms + u128::from(!d.as_nanos().is_multiple_of(1_000_000));
    u64::try_from(up).unwrap_or(u64::MAX)
}

/// ADDJOB's arguments: a queue, a body and Disque's options, plus this
/// project's extensions (BACKOFF, MAXDELIVERIES, DEADLETTER, DEDUP).
///
/// Durations are sent in whole seconds, rounded up (the command timeout in
/// milliseconds). Options left unset take the server's defaults.
///
/// ```no_run
/// use std::time::Duration;
/// use disque_client::{AddJob, Client};
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let mut client = Client::connect(&["127.0.0.1:7711"]).await?;
/// let job = AddJob::new("mail", "send welcome to ada@example.com")
///     .replicate(2)
///     .retry(Duration::from_secs(30))
///     .ttl(Duration::from_secs(3600))
///     .backoff(Duration::from_secs(600))
///     .max_deliveries(5)
///     .dedup("welcome-ada");
/// let id = client.add_job(&job).await?;
/// println!("queued as {id}");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddJob {
    queue: String,
    body: Bytes,
    timeout: Duration,
    replicate: Option<u32>,
    delay: Option<Duration>,
    retry: Option<Duration>,
    ttl: Option<Duration>,
    max_len: Option<u64>,
    asynchronous: bool,
    backoff: Option<Duration>,
    max_deliveries: Option<u32>,
    dead_letter: Option<String>,
    dedup: Option<String>,
}

impl AddJob {
    /// Default time ADDJOB may wait for synchronous replication.
    ///
    /// ```
    /// use disque_client::AddJob;
    /// let job = AddJob::new("q", "b").timeout(AddJob::DEFAULT_TIMEOUT * 2);
    /// # let _ = job;
    /// ```
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// A job for `queue` with `body`, every option at the server's
    /// default, replication timeout [`AddJob::DEFAULT_TIMEOUT`].
    ///
    /// ```
    /// let job = disque_client::AddJob::new("orders", b"order 42".to_vec());
    /// assert_eq!(job.queue(), "orders");
    /// ```
    pub fn new(queue: impl Into<String>, body: impl Into<Bytes>) -> AddJob {
        AddJob {
            queue: queue.into(),
            body: body.into(),
            timeout: AddJob::DEFAULT_TIMEOUT,
            replicate: None,
            delay: None,
            retry: None,
            ttl: None,
            max_len: None,
            asynchronous: false,
            backoff: None,
            max_deliveries: None,
            dead_letter: None,
            dedup: None,
        }
    }

    /// The queue.
    ///
    /// ```
    /// assert_eq!(disque_client::AddJob::new("q", "b").queue(), "q");
    /// ```
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// How long ADDJOB may wait for the requested copies (`ms-timeout`);
    /// `Duration::ZERO` waits forever. The client waits this long plus its
    /// command timeout for the reply.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let job = disque_client::AddJob::new("q", "b").timeout(Duration::from_millis(500));
    /// # let _ = job;
    /// ```
    pub fn timeout(mut self, t: Duration) -> AddJob {
        self.timeout = t;
        self
    }

    /// `REPLICATE <n>`: copies in the cluster (1..65535).
    ///
    /// ```
    /// let job = disque_client::AddJob::new("q", "b").replicate(3);
    /// # let _ = job;
    /// ```
    pub fn replicate(mut self, n: u32) -> AddJob {
        self.replicate = Some(n);
        self
    }

    /// `DELAY <sec>`: time before the job is first queued.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let job = disque_client::AddJob::new("q", "b").delay(Duration::from_secs(60));
    /// # let _ = job;
    /// ```
    pub fn delay(mut self, d: Duration) -> AddJob {
        self.delay = Some(d);
        self
    }

    /// `RETRY <sec>`: re-queue period while not acknowledged;
    /// `Duration::ZERO` is at-most-once delivery (on a cluster, set
    /// `replicate(1)` too).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let job = disque_client::AddJob::new("q", "b").retry(Duration::from_secs(30));
    /// # let _ = job;
    /// ```
    pub fn retry(mut self, d: Duration) -> AddJob {
        self.retry = Some(d);
        self
    }

    /// `TTL <sec>`: the job's lifetime.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let job = disque_client::AddJob::new("q", "b").ttl(Duration::from_secs(86400));
    /// # let _ = job;
    /// ```
    pub fn ttl(mut self, d: Duration) -> AddJob {
        self.ttl = Some(d);
        self
    }

    /// `MAXLEN <n>`: refuse the job (`-MAXLEN`) if the queue already holds
    /// n jobs on this node.
    ///
    /// ```
    /// let job = disque_client::AddJob::new("q", "b").max_len(10_000);
    /// # let _ = job;
    /// ```
    pub fn max_len(mut self, n: u64) -> AddJob {
        self.max_len = Some(n);
        self
    }

    /// `ASYNC`: reply at once and replicate in the background.
    ///
    /// ```
    /// let job = disque_client::AddJob::new("q", "b").asynchronous();
    /// # let _ = job;
    /// ```
    pub fn asynchronous(mut self) -> AddJob {
        self.asynchronous = true;
        self
    }

    /// `BACKOFF <max-sec>` (extension): re-queue after `RETRY × 2^(d-1)`
    /// seconds after the d-th delivery, at most `max`. Needs RETRY > 0.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let job = disque_client::AddJob::new("q", "b")
    ///     .retry(Duration::from_secs(5))
    ///     .backoff(Duration::from_secs(300));
    /// # let _ = job;
    /// ```
    pub fn backoff(mut self, max: Duration) -> AddJob {
        self.backoff = Some(max);
        self
    }

    /// `MAXDELIVERIES <n>` (extension): after n deliveries, move the job
    /// to its dead-letter queue instead of re-queueing it.
    ///
    /// ```
    /// let job = disque_client::AddJob::new("q", "b").max_deliveries(5);
    /// # let _ = job;
    /// ```
    pub fn max_deliveries(mut self, n: u32) -> AddJob {
        self.max_deliveries = Some(n);
        self
    }

    /// `DEADLETTER <queue>` (extension): the dead-letter queue (default
    /// `<queue>:dead`); needs [`max_deliveries`](Self::max_deliveries).
    ///
    /// ```
    /// let job = disque_client::AddJob::new("q", "b").max_deliveries(3).dead_letter("q-failed");
    /// # let _ = job;
    /// ```
    pub fn dead_letter(mut self, queue: impl Into<String>) -> AddJob {
        self.dead_letter = Some(queue.into());
        self
    }

    /// `DEDUP <key>` (extension): within the server's `dedup-window`, an
    /// ADDJOB to the same queue with the same key returns the first job's
    /// ID and adds nothing. It also makes ADDJOB safe to retry on another
    /// node after a connection failure, which the client then does.
    ///
    /// ```
    /// let job = disque_client::AddJob::new("payments", "pay 7").dedup("request-7");
    /// # let _ = job;
    /// ```
    pub fn dedup(mut self, key: impl Into<String>) -> AddJob {
        self.dedup = Some(key.into());
        self
    }

    pub(crate) fn has_dedup(&self) -> bool {
        self.dedup.is_some()
    }

    /// The server may wait this long before replying.
    pub(crate) fn server_wait(&self) -> Option<Duration> {
        if self.asynchronous {
            Some(Duration::ZERO)
        } else if self.timeout.is_zero() {
            None
        } else {
            Some(self.timeout)
        }
    }

    pub(crate) fn to_cmd(&self) -> Cmd {
        let mut c = Cmd::new("ADDJOB");
        c.arg(&self.queue)
            .arg(&self.body)
            .arg_int(millis_up(self.timeout));
        if let Some(n) = self.replicate {
            c.arg("REPLICATE").arg_int(n);
        }
        if let Some(d) = self.delay {
            c.arg("DELAY").arg_int(secs_up(d));
        }
        if let Some(d) = self.retry {
            c.arg("RETRY").arg_int(secs_up(d));
        }
        if let Some(d) = self.ttl {
            c.arg("TTL").arg_int(secs_up(d));
        }
        if let Some(n) = self.max_len {
            c.arg("MAXLEN").arg_int(n);
        }
        if self.asynchronous {
            c.arg("ASYNC");
        }
        if let Some(d) = self.backoff {
            c.arg("BACKOFF").arg_int(secs_up(d));
        }
        if let Some(n) = self.max_deliveries {
            c.arg("MAXDELIVERIES").arg_int(n);
        }
        if let Some(q) = &self.dead_letter {
            c.arg("DEADLETTER").arg(q);
        }
        if let Some(k) = &self.dedup {
            c.arg("DEDUP").arg(k);
        }
        c
    }
}

/// GETJOB's arguments. The client always adds WITHCOUNTERS, so every
/// [`Job`](crate::Job) carries its counters.
///
/// ```no_run
/// use std::time::Duration;
/// use disque_client::{Client, GetJob};
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let mut client = Client::connect(&["127.0.0.1:7711"]).await?;
/// let req = GetJob::from_queues(["urgent", "normal"])
///     .count(10)
///     .timeout(Duration::from_secs(2));
/// for job in client.get_jobs(&req).await? {
///     client.ack_job(&job.id).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetJob {
    queues: Vec<String>,
    count: Option<u64>,
    timeout: Option<Duration>,
    nohang: bool,
}

impl GetJob {
    /// Take from these queues (left to right), blocking until a job comes.
    ///
    /// ```
    /// let req = disque_client::GetJob::from_queues(["a", "b"]);
    /// assert_eq!(req.queues(), ["a", "b"]);
    /// ```
    pub fn from_queues<I, S>(queues: I) -> GetJob
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        GetJob {
            queues: queues.into_iter().map(Into::into).collect(),
            count: None,
            timeout: None,
            nohang: false,
        }
    }

    /// The queues.
    ///
    /// ```
    /// assert_eq!(disque_client::GetJob::from_queues(["q"]).queues(), ["q"]);
    /// ```
    pub fn queues(&self) -> &[String] {
        &self.queues
    }

    /// `COUNT <n>`: take up to n jobs when some are queued (a blocked
    /// GETJOB still returns one).
    ///
    /// ```
    /// let req = disque_client::GetJob::from_queues(["q"]).count(100);
    /// # let _ = req;
    /// ```
    pub fn count(mut self, n: u64) -> GetJob {
        self.count = Some(n);
        self
    }

    /// `TIMEOUT <ms>`: block at most this long (empty result after it).
    /// Without it GETJOB blocks until a job comes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let req = disque_client::GetJob::from_queues(["q"]).timeout(Duration::from_millis(250));
    /// # let _ = req;
    /// ```
    pub fn timeout(mut self, t: Duration) -> GetJob {
        self.timeout = Some(t);
        self
    }

    /// `NOHANG`: never block.
    ///
    /// ```
    /// let req = disque_client::GetJob::from_queues(["q"]).nohang();
    /// # let _ = req;
    /// ```
    pub fn nohang(mut self) -> GetJob {
        self.nohang = true;
        self
    }

    /// How long the server may hold the reply back: `None` = forever.
    pub(crate) fn server_wait(&self) -> Option<Duration> {
        if self.nohang {
            Some(Duration::ZERO)
        } else {
            match self.timeout {
                Some(t) if !t.is_zero() => Some(t),
                _ => None,
            }
        }
    }

    pub(crate) fn to_cmd(&self) -> Cmd {
        let mut c = Cmd::new("GETJOB");
        if self.nohang {
            c.arg("NOHANG");
        }
        if let Some(t) = self.timeout {
            // TIMEOUT 0 means forever: a sub-millisecond wait must not.
            c.arg("TIMEOUT").arg_int(millis_up(t));
        }
        if let Some(n) = self.count {
            c.arg("COUNT").arg_int(n);
        }
        c.arg("WITHCOUNTERS").arg("FROM");
        for q in &self.queues {
            c.arg(q);
        }
        c
    }
}

/// JSCAN's arguments. Use with [`Client::jscan`](crate::Client::jscan)
/// (job IDs) or [`Client::jscan_jobs`](crate::Client::jscan_jobs) (the
/// SHOW fields of each job).
///
/// ```no_run
/// use disque_client::{JScan, JobState};
///
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// let mut scan = JScan::new().queue("orders").state(JobState::Queued).count(500);
/// loop {
///     let page = client.jscan(&scan).await?;
///     println!("{} queued jobs", page.items.len());
///     if page.is_last() {
///         break;
///     }
///     scan = scan.cursor(page.cursor);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JScan {
    cursor: u64,
    count: Option<u64>,
    busyloop: bool,
    queue: Option<String>,
    states: Vec<JobState>,
}

impl JScan {
    /// A scan from the start, no filter.
    ///
    /// ```
    /// let scan = disque_client::JScan::new();
    /// # let _ = scan;
    /// ```
    pub fn new() -> JScan {
        JScan::default()
    }

    /// Continue from the cursor a previous page returned.
    ///
    /// ```
    /// let scan = disque_client::JScan::new().cursor(42);
    /// # let _ = scan;
    /// ```
    pub fn cursor(mut self, cursor: u64) -> JScan {
        self.cursor = cursor;
        self
    }

    /// `COUNT <n>`: work per call.
    ///
    /// ```
    /// let scan = disque_client::JScan::new().count(1000);
    /// # let _ = scan;
    /// ```
    pub fn count(mut self, n: u64) -> JScan {
        self.count = Some(n);
        self
    }

    /// `BUSYLOOP`: everything in one call.
    ///
    /// ```
    /// let scan = disque_client::JScan::new().busyloop();
    /// # let _ = scan;
    /// ```
    pub fn busyloop(mut self) -> JScan {
        self.busyloop = true;
        self
    }

    /// `QUEUE <queue>`: only jobs of this queue.
    ///
    /// ```
    /// let scan = disque_client::JScan::new().queue("orders");
    /// # let _ = scan;
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> JScan {
        self.queue = Some(queue.into());
        self
    }

    /// `STATE <state>`: only jobs in this state (repeat to OR states).
    ///
    /// ```
    /// use disque_client::{JScan, JobState};
    /// let scan = JScan::new().state(JobState::Queued).state(JobState::Active);
    /// # let _ = scan;
    /// ```
    pub fn state(mut self, state: JobState) -> JScan {
        self.states.push(state);
        self
    }

    pub(crate) fn to_cmd(&self, reply_all: bool) -> Cmd {
        let mut c = Cmd::new("JSCAN");
        c.arg_int(self.cursor);
        if let Some(n) = self.count {
            c.arg("COUNT").arg_int(n);
        }
        if self.busyloop {
            c.arg("BUSYLOOP");
        }
        if let Some(q) = &self.queue {
            c.arg("QUEUE").arg(q);
        }
        for s in &self.states {
            c.arg("STATE").arg(s.as_str());
        }
        c.arg("REPLY").arg(if reply_all { "ALL" } else { "ID" });
        c
    }
}

/// QSCAN's arguments.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// let page = client.qscan(&disque_client::QScan::new().busyloop().min_len(1)).await?;
/// println!("non-empty queues: {:?}", page.items);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QScan {
    cursor: u64,
    count: Option<u64>,
    busyloop: bool,
    min_len: Option<u64>,
    max_len: Option<u64>,
    import_rate: Option<u64>,
}

impl QScan {
    /// A scan from the start, no filter.
    ///
    /// ```
    /// let scan = disque_client::QScan::new();
    /// # let _ = scan;
    /// ```
    pub fn new() -> QScan {
        QScan::default()
    }

    /// Continue from the cursor a previous page returned.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().cursor(7);
    /// # let _ = scan;
    /// ```
    pub fn cursor(mut self, cursor: u64) -> QScan {
        self.cursor = cursor;
        self
    }

    /// `COUNT <n>`: work per call.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().count(100);
    /// # let _ = scan;
    /// ```
    pub fn count(mut self, n: u64) -> QScan {
        self.count = Some(n);
        self
    }

    /// `BUSYLOOP`: everything in one call.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().busyloop();
    /// # let _ = scan;
    /// ```
    pub fn busyloop(mut self) -> QScan {
        self.busyloop = true;
        self
    }

    /// `MINLEN <n>`: queues with at least n jobs.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().min_len(1);
    /// # let _ = scan;
    /// ```
    pub fn min_len(mut self, n: u64) -> QScan {
        self.min_len = Some(n);
        self
    }

    /// `MAXLEN <n>`: queues with at most n jobs.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().max_len(10);
    /// # let _ = scan;
    /// ```
    pub fn max_len(mut self, n: u64) -> QScan {
        self.max_len = Some(n);
        self
    }

    /// `IMPORTRATE <n>`: queues importing at least n jobs/s.
    ///
    /// ```
    /// let scan = disque_client::QScan::new().import_rate(1);
    /// # let _ = scan;
    /// ```
    pub fn import_rate(mut self, n: u64) -> QScan {
        self.import_rate = Some(n);
        self
    }

    pub(crate) fn to_cmd(&self) -> Cmd {
        let mut c = Cmd::new("QSCAN");
        c.arg_int(self.cursor);
        if let Some(n) = self.count {
            c.arg("COUNT").arg_int(n);
        }
        if self.busyloop {
            c.arg("BUSYLOOP");
        }
        if let Some(n) = self.min_len {
            c.arg("MINLEN").arg_int(n);
        }
        if let Some(n) = self.max_len {
            c.arg("MAXLEN").arg_int(n);
        }
        if let Some(n) = self.import_rate {
            c.arg("IMPORTRATE").arg_int(n);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn wire(c: &Cmd) -> String {
        let mut out = BytesMut::new();
        c.encode(&mut out);
        // Only the arguments, space-separated, for readable assertions.
        let s = String::from_utf8(out.to_vec()).unwrap();
        s.split("\r\n")
            .skip(1)
            .filter(|l| !l.starts_with('$') && !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn addjob_options_in_order() {
        let j = AddJob::new("q", "body")
            .timeout(Duration::from_micros(1500))
            .replicate(2)
            .delay(Duration::from_millis(1))
            .retry(Duration::ZERO)
            .ttl(Duration::from_secs(60))
            .max_len(9)
            .asynchronous()
            .backoff(Duration::from_secs(30))
            .max_deliveries(4)
            .dead_letter("dl")
            .dedup("k");
        assert_eq!(
            wire(&j.to_cmd()),
            "ADDJOB q body 2 REPLICATE 2 DELAY 1 RETRY 0 TTL 60 MAXLEN 9 ASYNC \
             BACKOFF 30 MAXDELIVERIES 4 DEADLETTER dl DEDUP k"
        );
        assert_eq!(wire(&AddJob::new("q", "b").to_cmd()), "ADDJOB q b 5000");
    }

    #[test]
    fn getjob_and_scans() {
        let g = GetJob::from_queues(["a", "b"])
            .count(3)
            .timeout(Duration::from_micros(10))
            .nohang();
        assert_eq!(
            wire(&g.to_cmd()),
            "GETJOB NOHANG TIMEOUT 1 COUNT 3 WITHCOUNTERS FROM a b"
        );
        let j = JScan::new()
            .cursor(5)
            .count(10)
            .busyloop()
            .queue("q")
            .state(JobState::Queued)
            .state(JobState::Acked);
        assert_eq!(
            wire(&j.to_cmd(true)),
            "JSCAN 5 COUNT 10 BUSYLOOP QUEUE q STATE queued STATE acked REPLY ALL"
        );
        let q = QScan::new().min_len(1).max_len(9).import_rate(2);
        assert_eq!(wire(&q.to_cmd()), "QSCAN 0 MINLEN 1 MAXLEN 9 IMPORTRATE 2");
    }
}
