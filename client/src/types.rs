//! Typed replies.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::resp::Value;

/// A job ID: `D-<8 hex chars of the creating node's ID>-<24 chars>-<4 hex
/// TTL digits>`, 40 ASCII characters.
///
/// ```
/// use disque_client::JobId;
///
/// let id = JobId::from("D-ad249f8c-HFp3t4QYGJyICPooqPBy8pTY-05a1");
/// assert_eq!(id.node_prefix(), Some("ad249f8c"));
/// assert!(id.is_well_formed());
/// assert_eq!(id.as_str(), "D-ad249f8c-HFp3t4QYGJyICPooqPBy8pTY-05a1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(String);

impl JobId {
    /// The ID as text.
    ///
    /// ```
    /// let id = disque_client::JobId::from("D-ad249f8c-HFp3t4QYGJyICPooqPBy8pTY-05a1");
    /// assert_eq!(id.as_str().len(), 40);
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it has the shape the server checks (length 40 and `D-`,
    /// `-`, `-` at offsets 0, 1, 10, 35). The server replies `-BADID` to
    /// anything else.
    ///
    /// ```
    /// assert!(!disque_client::JobId::from("not-an-id").is_well_formed());
    /// ```
    pub fn is_well_formed(&self) -> bool {
        let b = self.0.as_bytes();
        b.len() == 40 && b[0] == b'D' && b[1] == b'-' && b[10] == b'-' && b[35] == b'-'
    }

    /// The first 8 characters of the ID of the node that created the job,
    /// which [`Client`](crate::Client) uses to find the node producing the
    /// jobs it receives.
    ///
    /// ```
    /// let id = disque_client::JobId::from("D-0c5d9642-B0dI7nseJNJCfUqag3cYvzw5-05a1");
    /// assert_eq!(id.node_prefix(), Some("0c5d9642"));
    /// ```
    pub fn node_prefix(&self) -> Option<&str> {
        if self.is_well_formed() {
            self.0.get(2..10)
        } else {
            None
        }
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<String> for JobId {
    fn from(s: String) -> JobId {
        JobId(s)
    }
}

impl From<&str> for JobId {
    fn from(s: &str) -> JobId {
        JobId(s.to_string())
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

/// A job taken with GETJOB (the client always asks WITHCOUNTERS).
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// use std::time::Duration;
///
/// if let Some(job) = client.get_job("orders", Duration::from_secs(1)).await? {
///     println!("{} from {}: {:?} (nacked {} times)", job.id, job.queue, job.body, job.nacks);
///     client.ack_job(&job.id).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The queue it came from.
    pub queue: String,
    /// Its ID.
    pub id: JobId,
    /// Its body.
    pub body: Bytes,
    /// How many times it was NACKed.
    pub nacks: u64,
    /// How many more times it was delivered without a NACK (retry timer,
    /// ENQUEUE).
    pub additional_deliveries: u64,
}

/// A job seen with QPEEK (not taken, so no delivery counters).
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// for job in client.qpeek("orders", 10).await? {
///     println!("{} waits in {}", job.id, job.queue);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeekedJob {
    /// The queue.
    pub queue: String,
    /// Its ID.
    pub id: JobId,
    /// Its body.
    pub body: Bytes,
}

fn text(v: &Value, command: &str) -> Result<String> {
    v.as_text().ok_or_else(|| Error::unexpected(command, v))
}

fn uint(v: &Value, command: &str) -> Result<u64> {
    v.as_int()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| Error::unexpected(command, v))
}

fn opt_text(v: &Value, command: &str) -> Result<Option<String>> {
    if v.is_nil() {
        Ok(None)
    } else {
        text(v, command).map(Some)
    }
}

fn ms(v: &Value, command: &str) -> Result<Option<Duration>> {
    if v.is_nil() {
        Ok(None)
    } else {
        uint(v, command).map(|n| Some(Duration::from_millis(n)))
    }
}

fn strings(v: &Value, command: &str) -> Result<Vec<String>> {
    match v {
        Value::Array(a) => a.iter().map(|x| text(x, command)).collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(Error::unexpected(command, other)),
    }
}

/// `[queue, id, body, ...]` entries of GETJOB and QPEEK.
pub(crate) fn jobs(reply: &Value, command: &str) -> Result<Vec<Job>> {
    let entries = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(a) => a,
        other => return Err(Error::unexpected(command, other)),
    };
    entries
        .iter()
        .map(|e| {
            let f = e.as_array().ok_or_else(|| Error::unexpected(command, e))?;
            if f.len() < 3 {
                return Err(Error::unexpected(command, e));
            }
            let mut job = Job {
                queue: text(&f[0], command)?,
                id: JobId(text(&f[1], command)?),
                body: f[2]
                    .as_bytes()
                    .ok_or_else(|| Error::unexpected(command, e))?,
                nacks: 0,
                additional_deliveries: 0,
            };
            for kv in f[3..].chunks_exact(2) {
                match kv[0].as_text().as_deref() {
                    Some("nacks") => job.nacks = uint(&kv[1], command)?,
                    Some("additional-deliveries") => {
                        job.additional_deliveries = uint(&kv[1], command)?
                    }
                    _ => {}
                }
            }
            Ok(job)
        })
        .collect()
}

/// Where a job is on the node that answered.
///
/// ```
/// use disque_client::JobState;
///
/// assert_eq!(JobState::parse("wait-repl"), JobState::WaitRepl);
/// assert_eq!(JobState::Queued.as_str(), "queued");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// ADDJOB is waiting for synchronous replication.
    WaitRepl,
    /// Held here, not queued (delivered, or a replica).
    Active,
    /// Held here and in the local queue.
    Queued,
    /// Acknowledged, waiting for garbage collection.
    Acked,
    /// A state this client does not know.
    Other(String),
}

impl JobState {
    /// The state for its SHOW/JSCAN name.
    ///
    /// ```
    /// assert_eq!(disque_client::JobState::parse("active"), disque_client::JobState::Active);
    /// ```
    pub fn parse(s: &str) -> JobState {
        match s {
            "wait-repl" => JobState::WaitRepl,
            "active" => JobState::Active,
            "queued" => JobState::Queued,
            "acked" => JobState::Acked,
            other => JobState::Other(other.to_string()),
        }
    }

    /// Its SHOW/JSCAN name.
    ///
    /// ```
    /// assert_eq!(disque_client::JobState::Acked.as_str(), "acked");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            JobState::WaitRepl => "wait-repl",
            JobState::Active => "active",
            JobState::Queued => "queued",
            JobState::Acked => "acked",
            JobState::Other(s) => s,
        }
    }
}

/// The extension fields SHOW adds for jobs created with BACKOFF,
/// MAXDELIVERIES or DEDUP (this project's extensions).
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
/// if let Some(info) = client.show(&id).await? {
///     if let Some(ext) = info.extensions {
///         println!("dead: {}, deliveries: {}", ext.dead, ext.deliveries);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobExtensions {
    /// BACKOFF cap in seconds (0 = off).
    pub backoff: u64,
    /// MAXDELIVERIES (0 = off).
    pub max_deliveries: u64,
    /// The dead-letter queue.
    pub dead_letter_queue: Option<String>,
    /// The DEDUP key.
    pub dedup_key: Option<String>,
    /// Whether the job was moved to its dead-letter queue.
    pub dead: bool,
    /// For a dead job, the queue it came from.
    pub origin_queue: Option<String>,
    /// Deliveries counted so far.
    pub deliveries: u64,
}

/// Everything SHOW tells about a job.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
/// match client.show(&id).await? {
///     Some(info) => println!("{:?} in {:?}, retry {}s", info.state, info.queue, info.retry),
///     None => println!("not known on this node"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    /// Its ID.
    pub id: JobId,
    /// Its queue (`None` for an acknowledgement record).
    pub queue: Option<String>,
    /// Its state on this node.
    pub state: JobState,
    /// Requested number of copies.
    pub repl: u64,
    /// Seconds left to live.
    pub ttl: u64,
    /// Creation time: unix ms × 1,000,000 + a tie counter.
    pub ctime: u64,
    /// DELAY in seconds.
    pub delay: u64,
    /// RETRY in seconds.
    pub retry: u64,
    /// NACKs so far.
    pub nacks: u64,
    /// Additional deliveries so far.
    pub additional_deliveries: u64,
    /// IDs of the nodes that may hold a copy.
    pub nodes_delivered: Vec<String>,
    /// IDs of the nodes that confirmed (replication or acknowledgement).
    pub nodes_confirmed: Vec<String>,
    /// Time until the next re-queue, if one is scheduled.
    pub next_requeue_within: Option<Duration>,
    /// Time until the node next looks at the job, if scheduled.
    pub next_awake_within: Option<Duration>,
    /// Its body (`None` for an acknowledgement record).
    pub body: Option<Bytes>,
    /// Extension fields, for jobs created with an extension option.
    pub extensions: Option<JobExtensions>,
}

impl JobInfo {
    /// Parse a SHOW reply or a JSCAN REPLY ALL entry (flat array or map).
    pub(crate) fn from_value(v: &Value, command: &str) -> Result<JobInfo> {
        let pairs = v.pairs().ok_or_else(|| Error::unexpected(command, v))?;
        let mut info = JobInfo {
            id: JobId(String::new()),
            queue: None,
            state: JobState::Other(String::new()),
            repl: 0,
            ttl: 0,
            ctime: 0,
            delay: 0,
            retry: 0,
            nacks: 0,
            additional_deliveries: 0,
            nodes_delivered: Vec::new(),
            nodes_confirmed: Vec::new(),
            next_requeue_within: None,
            next_awake_within: None,
            body: None,
            extensions: None,
        };
        let mut ext = JobExtensions::default();
        let mut has_ext = false;
        for (k, val) in pairs {
            match k.as_str() {
                "id" => info.id = JobId(text(val, command)?),
                "queue" => info.queue = opt_text(val, command)?,
                "state" => info.state = JobState::parse(&text(val, command)?),
                "repl" => info.repl = uint(val, command)?,
                "ttl" => info.ttl = uint(val, command)?,
                "ctime" => info.ctime = uint(val, command)?,
                "delay" => info.delay = uint(val, command)?,
                "retry" => info.retry = uint(val, command)?,
                "nacks" => info.nacks = uint(val, command)?,
                "additional-deliveries" => info.additional_deliveries = uint(val, command)?,
                "nodes-delivered" => info.nodes_delivered = strings(val, command)?,
                "nodes-confirmed" => info.nodes_confirmed = strings(val, command)?,
                "next-requeue-within" => info.next_requeue_within = ms(val, command)?,
                "next-awake-within" => info.next_awake_within = ms(val, command)?,
                "body" => info.body = val.as_bytes(),
                "backoff" => {
                    has_ext = true;
                    ext.backoff = uint(val, command)?
                }
                "max-deliveries" => {
                    has_ext = true;
                    ext.max_deliveries = uint(val, command)?
                }
                "dead-letter-queue" => {
                    has_ext = true;
                    ext.dead_letter_queue = opt_text(val, command)?
                }
                "dedup-key" => {
                    has_ext = true;
                    ext.dedup_key = opt_text(val, command)?
                }
                "dead" => {
                    has_ext = true;
                    ext.dead = uint(val, command)? != 0
                }
                "origin-queue" => {
                    has_ext = true;
                    ext.origin_queue = opt_text(val, command)?
                }
                "deliveries" => {
                    has_ext = true;
                    ext.deliveries = uint(val, command)?
                }
                _ => {}
            }
        }
        if has_ext {
            info.extensions = Some(ext);
        }
        Ok(info)
    }
}

/// A queue's pause state (PAUSE's reply, QSTAT's `pause` field).
///
/// ```
/// use disque_client::PauseState;
///
/// assert_eq!(PauseState::parse("all"), Some(PauseState::All));
/// assert_eq!(PauseState::In.as_str(), "in");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PauseState {
    /// Not paused.
    None,
    /// New jobs refused.
    In,
    /// No delivery.
    Out,
    /// Both.
    All,
}

impl PauseState {
    /// The state for its name.
    ///
    /// ```
    /// assert_eq!(disque_client::PauseState::parse("bogus"), None);
    /// ```
    pub fn parse(s: &str) -> Option<PauseState> {
        match s {
            "none" => Some(PauseState::None),
            "in" => Some(PauseState::In),
            "out" => Some(PauseState::Out),
            "all" => Some(PauseState::All),
            _ => None,
        }
    }

    /// Its name, as PAUSE takes and replies it.
    ///
    /// ```
    /// assert_eq!(disque_client::PauseState::Out.as_str(), "out");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            PauseState::None => "none",
            PauseState::In => "in",
            PauseState::Out => "out",
            PauseState::All => "all",
        }
    }

    pub(crate) fn from_value(v: &Value, command: &str) -> Result<PauseState> {
        v.as_text()
            .and_then(|t| PauseState::parse(&t))
            .ok_or_else(|| Error::unexpected(command, v))
    }
}

/// QSTAT's reply.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// if let Some(stat) = client.qstat("orders").await? {
///     println!("{} queued, {} consumers blocked, paused {:?}", stat.len, stat.blocked, stat.pause);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStat {
    /// The queue's name.
    pub name: String,
    /// Jobs queued on this node.
    pub len: u64,
    /// Seconds since the queue was created.
    pub age: u64,
    /// Seconds since the last enqueue or pop.
    pub idle: u64,
    /// Clients blocked on it.
    pub blocked: u64,
    /// Nodes this node imports jobs from.
    pub import_from: Vec<String>,
    /// Jobs per second imported.
    pub import_rate: u64,
    /// Jobs enqueued.
    pub jobs_in: u64,
    /// Jobs popped.
    pub jobs_out: u64,
    /// Its pause state.
    pub pause: PauseState,
    /// `QSTAT <q> CLUSTER` (extension): jobs queued on every reachable node.
    pub len_cluster: Option<u64>,
}

impl QueueStat {
    pub(crate) fn from_value(v: &Value, command: &str) -> Result<QueueStat> {
        let pairs = v.pairs().ok_or_else(|| Error::unexpected(command, v))?;
        let mut s = QueueStat {
            name: String::new(),
            len: 0,
            age: 0,
            idle: 0,
            blocked: 0,
            import_from: Vec::new(),
            import_rate: 0,
            jobs_in: 0,
            jobs_out: 0,
            pause: PauseState::None,
            len_cluster: None,
        };
        for (k, val) in pairs {
            match k.as_str() {
                "name" => s.name = text(val, command)?,
                "len" => s.len = uint(val, command)?,
                "age" => s.age = uint(val, command)?,
                "idle" => s.idle = uint(val, command)?,
                "blocked" => s.blocked = uint(val, command)?,
                "import-from" => s.import_from = strings(val, command)?,
                "import-rate" => s.import_rate = uint(val, command)?,
                "jobs-in" => s.jobs_in = uint(val, command)?,
                "jobs-out" => s.jobs_out = uint(val, command)?,
                "pause" => s.pause = PauseState::from_value(val, command)?,
                "len-cluster" => s.len_cluster = Some(uint(val, command)?),
                _ => {}
            }
        }
        Ok(s)
    }
}

/// How a job ended, as WAITJOB (extension) reports it.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
/// use disque_client::JobOutcome;
/// use std::time::Duration;
///
/// match client.wait_job(&id, Some(Duration::from_secs(30))).await? {
///     Some(JobOutcome::Acked) => println!("done"),
///     Some(other) => println!("ended: {other:?}"),
///     None => println!("still running after 30 s"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobOutcome {
    /// Acknowledged.
    Acked,
    /// Its TTL elapsed.
    Expired,
    /// Deleted (DELJOB).
    Deleted,
    /// Moved to its dead-letter queue.
    Dead,
    /// An outcome this client does not know.
    Other(String),
}

impl JobOutcome {
    pub(crate) fn parse(s: &str) -> JobOutcome {
        match s {
            "acked" => JobOutcome::Acked,
            "expired" => JobOutcome::Expired,
            "deleted" => JobOutcome::Deleted,
            "dead" => JobOutcome::Dead,
            other => JobOutcome::Other(other.to_string()),
        }
    }
}

/// One node of bare HELLO's list.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// for node in client.hello().await?.nodes {
///     println!("{} at {} (priority {})", node.id, node.addr(), node.priority);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's 40-character ID.
    pub id: String,
    /// Its IP (empty before the node learned it).
    pub ip: String,
    /// Its client port.
    pub port: u16,
    /// 1 healthy, 5 no bus link, 10 possibly failing, 100 failing or
    /// leaving: lower is better.
    pub priority: u32,
}

impl NodeInfo {
    /// `ip:port` (`[ip]:port` for IPv6).
    ///
    /// ```
    /// let n = disque_client::NodeInfo {
    ///     id: "ad249f8c9b2240cd45f72fd233bd3d5a42a6709d".into(),
    ///     ip: "::1".into(),
    ///     port: 7711,
    ///     priority: 1,
    /// };
    /// assert_eq!(n.addr(), "[::1]:7711");
    /// ```
    pub fn addr(&self) -> String {
        if self.ip.contains(':') {
            format!("[{}]:{}", self.ip, self.port)
        } else {
            format!("{}:{}", self.ip, self.port)
        }
    }

    /// The 8 characters job IDs created by this node carry.
    ///
    /// ```
    /// let n = disque_client::NodeInfo {
    ///     id: "ad249f8c9b2240cd45f72fd233bd3d5a42a6709d".into(),
    ///     ip: "127.0.0.1".into(),
    ///     port: 7711,
    ///     priority: 1,
    /// };
    /// assert_eq!(n.prefix(), "ad249f8c");
    /// ```
    pub fn prefix(&self) -> &str {
        self.id.get(..8).unwrap_or(&self.id)
    }
}

/// Bare HELLO's reply: the node's ID and the nodes it knows.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// let hello = client.hello().await?;
/// println!("connected to {}, {} nodes known", hello.my_id, hello.nodes.len());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Format version (1).
    pub version: i64,
    /// The answering node's ID.
    pub my_id: String,
    /// Every node it knows, itself included.
    pub nodes: Vec<NodeInfo>,
}

impl Hello {
    pub(crate) fn from_value(v: &Value) -> Result<Hello> {
        let bad = || Error::unexpected("HELLO", v);
        let a = v.as_array().ok_or_else(bad)?;
        if a.len() < 2 {
            return Err(bad());
        }
        let version = a[0].as_int().ok_or_else(bad)?;
        let my_id = a[1].as_text().ok_or_else(bad)?;
        let mut nodes = Vec::with_capacity(a.len() - 2);
        for n in &a[2..] {
            let f = n.as_array().ok_or_else(bad)?;
            if f.len() < 4 {
                return Err(bad());
            }
            nodes.push(NodeInfo {
                id: f[0].as_text().ok_or_else(bad)?,
                ip: f[1].as_text().ok_or_else(bad)?,
                port: f[2]
                    .as_int()
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(bad)?,
                priority: f[3]
                    .as_int()
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(bad)?,
            });
        }
        Ok(Hello {
            version,
            my_id,
            nodes,
        })
    }
}

/// INFO's reply: `field:value` lines under `# Section` headers.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// let info = client.info(Some("jobs")).await?;
/// println!("{} jobs", info.get("registered_jobs").unwrap_or("?"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// The text as the server sent it.
    pub text: String,
}

impl Info {
    /// The value of `field`, in any section.
    ///
    /// ```
    /// let info = disque_client::Info { text: "# Jobs\r\nregistered_jobs:4\r\n".into() };
    /// assert_eq!(info.get("registered_jobs"), Some("4"));
    /// ```
    pub fn get(&self, field: &str) -> Option<&str> {
        self.text.lines().find_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(field)
                .and_then(|rest| rest.strip_prefix(':'))
        })
    }

    /// Every `(field, value)` pair in order, section headers left out.
    ///
    /// ```
    /// let info = disque_client::Info { text: "# Jobs\r\nregistered_jobs:4\r\n".into() };
    /// assert_eq!(info.fields().collect::<Vec<_>>(), [("registered_jobs", "4")]);
    /// ```
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.text
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once(':'))
    }
}

/// One page of a JSCAN or QSCAN iteration.
///
/// ```no_run
/// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
/// use disque_client::QScan;
///
/// let mut scan = QScan::new();
/// loop {
///     let page = client.qscan(&scan).await?;
///     for queue in &page.items {
///         println!("{queue}");
///     }
///     if page.is_last() {
///         break;
///     }
///     scan = scan.cursor(page.cursor);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPage<T> {
    /// The cursor for the next call; 0 when the iteration is complete.
    pub cursor: u64,
    /// The items of this page.
    pub items: Vec<T>,
}

impl<T> ScanPage<T> {
    /// Whether this was the last page.
    ///
    /// ```
    /// let page = disque_client::ScanPage::<String> { cursor: 0, items: vec![] };
    /// assert!(page.is_last());
    /// ```
    pub fn is_last(&self) -> bool {
        self.cursor == 0
    }

    pub(crate) fn from_value(
        v: &Value,
        command: &str,
        item: impl Fn(&Value) -> Result<T>,
    ) -> Result<ScanPage<T>> {
        let a = v.as_array().ok_or_else(|| Error::unexpected(command, v))?;
        if a.len() != 2 {
            return Err(Error::unexpected(command, v));
        }
        let cursor = uint(&a[0], command)?;
        let items = match &a[1] {
            Value::Array(items) => items.iter().map(item).collect::<Result<_>>()?,
            other => return Err(Error::unexpected(command, other)),
        };
        Ok(ScanPage { cursor, items })
    }
}

pub(crate) fn text_of(v: &Value, command: &str) -> Result<String> {
    text(v, command)
}

pub(crate) fn uint_of(v: &Value, command: &str) -> Result<u64> {
    uint(v, command)
}
