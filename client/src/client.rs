//! The client: one connection at a time to one of several nodes, every
//! command, failover and producer-following.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::{Connection, Tls};
use crate::error::{Error, ErrorCode, Result};
use crate::options::{AddJob, GetJob, JScan, QScan};
use crate::resp::{Cmd, Value};
use crate::types::{
    Hello, Info, Job, JobId, JobInfo, JobOutcome, NodeInfo, PauseState, PeekedJob, QueueStat,
    ScanPage, jobs, text_of, uint_of,
};

#[cfg(feature = "tls")]
use crate::tls::TlsOptions;

/// The protocol a connection speaks after its handshake.
///
/// ```
/// use disque_client::{Client, Protocol};
///
/// let builder = Client::builder(&["127.0.0.1:7711"]).protocol(Protocol::Resp3);
/// # let _ = builder;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RESP2, what Disque 1.0 speaks (no HELLO handshake).
    #[default]
    Resp2,
    /// RESP3 after `HELLO 3` (a disque-rs extension): maps and typed nulls.
    /// The typed replies are the same either way.
    Resp3,
}

/// How a [`Client`] connects: the nodes, credentials, TLS, timeouts and
/// the failover and producer-following policies. Cloneable, so it also
/// serves as a client factory (the [`Worker`](crate::Worker) makes one
/// client per concurrent handler from it).
///
/// ```no_run
/// use std::time::Duration;
/// use disque_client::Client;
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let mut client = Client::builder(&["10.0.0.1:7711", "10.0.0.2:7711"])
///     .password("s3cret")
///     .connect_timeout(Duration::from_secs(2))
///     .command_timeout(Duration::from_secs(5))
///     .follow_producers(Some(200))
///     .connect()
///     .await?;
/// client.ping().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClientBuilder {
    nodes: Vec<String>,
    user: Option<String>,
    password: Option<String>,
    protocol: Protocol,
    connect_timeout: Duration,
    command_timeout: Duration,
    #[cfg(feature = "tls")]
    tls: Option<TlsOptions>,
    follow_window: Option<u64>,
    retry_on_failover: bool,
    discover: Option<bool>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password stays out of logs.
        let mut d = f.debug_struct("ClientBuilder");
        d.field("nodes", &self.nodes)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field("protocol", &self.protocol)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.field("follow_window", &self.follow_window)
            .field("retry_on_failover", &self.retry_on_failover)
            .field("discover", &self.discover)
            .finish()
    }
}

impl<S: AsRef<str>> From<&[S]> for ClientBuilder {
    fn from(nodes: &[S]) -> ClientBuilder {
        ClientBuilder::new(nodes.iter().map(|s| s.as_ref().to_string()))
    }
}

impl<S: AsRef<str>, const N: usize> From<&[S; N]> for ClientBuilder {
    fn from(nodes: &[S; N]) -> ClientBuilder {
        ClientBuilder::from(&nodes[..])
    }
}

impl<S: AsRef<str>, const N: usize> From<[S; N]> for ClientBuilder {
    fn from(nodes: [S; N]) -> ClientBuilder {
        ClientBuilder::from(&nodes[..])
    }
}

impl From<Vec<String>> for ClientBuilder {
    fn from(nodes: Vec<String>) -> ClientBuilder {
        ClientBuilder::new(nodes)
    }
}

impl From<&str> for ClientBuilder {
    fn from(node: &str) -> ClientBuilder {
        ClientBuilder::new([node])
    }
}

impl ClientBuilder {
    /// Default connect timeout (per node tried).
    ///
    /// ```
    /// use disque_client::ClientBuilder;
    /// let b = ClientBuilder::new(["127.0.0.1:7711"])
    ///     .connect_timeout(ClientBuilder::DEFAULT_CONNECT_TIMEOUT * 2);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default time a command may take, on top of the time the server is
    /// asked to block (GETJOB TIMEOUT, ADDJOB's replication timeout).
    ///
    /// ```
    /// use disque_client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_COMMAND_TIMEOUT.as_secs(), 10);
    /// ```
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default number of received jobs after which the client looks at
    /// which node produced most of them.
    ///
    /// ```
    /// use disque_client::ClientBuilder;
    /// let b = ClientBuilder::new(["127.0.0.1:7711"])
    ///     .follow_producers(Some(ClientBuilder::DEFAULT_FOLLOW_WINDOW / 2));
    /// # let _ = b;
    /// ```
    pub const DEFAULT_FOLLOW_WINDOW: u64 = 100;

    /// Settings for these nodes (`host:port`), tried in this order.
    ///
    /// ```
    /// let b = disque_client::ClientBuilder::new(["127.0.0.1:7711", "127.0.0.1:7712"]);
    /// # let _ = b;
    /// ```
    pub fn new<I, S>(nodes: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientBuilder {
            nodes: nodes.into_iter().map(Into::into).collect(),
            user: None,
            password: None,
            protocol: Protocol::Resp2,
            connect_timeout: ClientBuilder::DEFAULT_CONNECT_TIMEOUT,
            command_timeout: ClientBuilder::DEFAULT_COMMAND_TIMEOUT,
            #[cfg(feature = "tls")]
            tls: None,
            follow_window: Some(ClientBuilder::DEFAULT_FOLLOW_WINDOW),
            retry_on_failover: true,
            discover: None,
        }
    }

    /// The nodes given.
    ///
    /// ```
    /// let b = disque_client::ClientBuilder::new(["127.0.0.1:7711"]);
    /// assert_eq!(b.nodes(), ["127.0.0.1:7711"]);
    /// ```
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// Authenticate with `AUTH <password>` (the node's `requirepass`).
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).password("s3cret");
    /// # let _ = b;
    /// ```
    pub fn password(mut self, password: impl Into<String>) -> ClientBuilder {
        self.password = Some(password.into());
        self
    }

    /// Authenticate with `AUTH <user> <password>` (Redis 6 form; the only
    /// user disque-rs knows is `default`).
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).user_password("default", "s3cret");
    /// # let _ = b;
    /// ```
    pub fn user_password(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> ClientBuilder {
        self.user = Some(user.into());
        self.password = Some(password.into());
        self
    }

    /// The protocol to speak (default RESP2).
    ///
    /// ```
    /// use disque_client::{Client, Protocol};
    /// let b = Client::builder(&["127.0.0.1:7711"]).protocol(Protocol::Resp3);
    /// # let _ = b;
    /// ```
    pub fn protocol(mut self, protocol: Protocol) -> ClientBuilder {
        self.protocol = protocol;
        self
    }

    /// Time allowed to connect (and handshake) to one node.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).connect_timeout(Duration::from_secs(1));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, t: Duration) -> ClientBuilder {
        self.connect_timeout = t;
        self
    }

    /// Time allowed for a reply, beyond the time the server is asked to
    /// block. A command that times out drops its connection.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).command_timeout(Duration::from_secs(3));
    /// # let _ = b;
    /// ```
    pub fn command_timeout(mut self, t: Duration) -> ClientBuilder {
        self.command_timeout = t;
        self
    }

    /// Connect with TLS (feature `tls`).
    ///
    /// ```
    /// use disque_client::{Client, TlsOptions};
    /// let b = Client::builder(&["127.0.0.1:7712"]).tls(TlsOptions::new());
    /// # let _ = b;
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: TlsOptions) -> ClientBuilder {
        self.tls = Some(tls);
        self
    }

    /// Disque's client guidance: count which node created the jobs this
    /// client receives (the 8 characters after `D-` in their IDs) and,
    /// every `Some(n)` jobs, when more than half came from one other node,
    /// move to that node before the next GETJOB, so jobs stop travelling
    /// through federation. `None` stays on the node first connected to.
    /// Default [`ClientBuilder::DEFAULT_FOLLOW_WINDOW`].
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).follow_producers(None);
    /// # let _ = b;
    /// ```
    pub fn follow_producers(mut self, window: Option<u64>) -> ClientBuilder {
        self.follow_window = window.filter(|&n| n > 0);
        self
    }

    /// Whether a command that is safe to repeat is sent again, once, to
    /// another node after a connection error or a `-LEAVING`/`-LOADING`
    /// reply (default true). Safe: GETJOB (an undelivered reply only
    /// delays the job to its next retry), ACKJOB, FASTACK, NACK, WORKING,
    /// PING, HELLO, and ADDJOB with [`AddJob::dedup`]. Commands whose
    /// answer is about one node (QLEN, SHOW, JSCAN, DELJOB...) are not.
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).retry_on_failover(false);
    /// # let _ = b;
    /// ```
    pub fn retry_on_failover(mut self, retry: bool) -> ClientBuilder {
        self.retry_on_failover = retry;
        self
    }

    /// Whether the nodes HELLO lists are used for failover and producer
    /// following, beside the nodes given. Default: yes without TLS; no
    /// with TLS, since HELLO reports the plain-text ports.
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]).discover_nodes(false);
    /// # let _ = b;
    /// ```
    pub fn discover_nodes(mut self, discover: bool) -> ClientBuilder {
        self.discover = Some(discover);
        self
    }

    /// A client with these settings, not connected yet: the first command
    /// connects.
    ///
    /// ```
    /// let client = disque_client::Client::builder(&["127.0.0.1:7711"]).build()?;
    /// assert!(client.current_addr().is_none());
    /// # Ok::<(), disque_client::Error>(())
    /// ```
    pub fn build(&self) -> Result<Client> {
        if self.nodes.is_empty() {
            return Err(Error::Config("no node address given".into()));
        }
        #[cfg(feature = "tls")]
        let tls = self.tls.as_ref().map(TlsOptions::build).transpose()?;
        #[cfg(not(feature = "tls"))]
        let tls: Option<Tls> = None;
        let discover = self.discover.unwrap_or(tls.is_none());
        Ok(Client {
            settings: Arc::new(Settings {
                nodes: self.nodes.clone(),
                user: self.user.clone(),
                password: self.password.clone(),
                protocol: self.protocol,
                connect_timeout: self.connect_timeout,
                command_timeout: self.command_timeout,
                tls,
                follow_window: self.follow_window,
                retry_on_failover: self.retry_on_failover,
                discover,
            }),
            conn: None,
            node_id: None,
            known: Vec::new(),
            prefix_addr: HashMap::new(),
            avoid: None,
            produced: HashMap::new(),
            seen: 0,
            move_to: None,
        })
    }

    /// [`build`](Self::build), then connect to the first reachable node.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), disque_client::Error> {
    /// let client = disque_client::Client::builder(&["127.0.0.1:7711"]).connect().await?;
    /// println!("connected to {:?}", client.current_addr());
    /// # Ok(()) }
    /// ```
    pub async fn connect(&self) -> Result<Client> {
        let mut c = self.build()?;
        c.connect_any().await?;
        Ok(c)
    }
}

struct Settings {
    nodes: Vec<String>,
    user: Option<String>,
    password: Option<String>,
    protocol: Protocol,
    connect_timeout: Duration,
    command_timeout: Duration,
    tls: Option<Tls>,
    follow_window: Option<u64>,
    retry_on_failover: bool,
    discover: bool,
}

/// How long the server may hold a reply back.
#[derive(Clone, Copy)]
enum Wait {
    /// Not at all: the command timeout applies.
    No,
    /// This long (`None` = forever) plus the command timeout.
    Server(Option<Duration>),
}

/// Whether a command may be sent again to another node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retry {
    Never,
    Safe,
}

/// An async Disque client: one connection at a time, to one node of a
/// cluster, reconnecting to another node when the connection fails.
///
/// Commands take `&mut self` and run one at a time, like a Redis
/// connection; make one client per concurrent task (clients are cheap:
/// [`ClientBuilder`] is `Clone`). Dropping a command future half-way is
/// safe: the connection is discarded and the next command reconnects.
///
/// ```no_run
/// use std::time::Duration;
/// use disque_client::{AddJob, Client};
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let mut client = Client::connect(&["127.0.0.1:7711", "127.0.0.1:7712"]).await?;
/// let id = client.add_job(&AddJob::new("orders", "order 42")).await?;
/// if let Some(job) = client.get_job("orders", Duration::from_secs(1)).await? {
///     assert_eq!(job.id, id);
///     client.ack_job(&job.id).await?;
/// }
/// # Ok(()) }
/// ```
pub struct Client {
    settings: Arc<Settings>,
    conn: Option<Connection>,
    /// ID of the node `conn` is connected to.
    node_id: Option<String>,
    /// The node list of the last HELLO.
    known: Vec<NodeInfo>,
    /// Job-ID prefix → address, from the nodes connected to and HELLO.
    prefix_addr: HashMap<String, String>,
    /// The address that failed last: tried last on reconnect.
    avoid: Option<String>,
    /// Job-ID prefix → jobs received in the current window.
    produced: HashMap<String, u64>,
    seen: u64,
    /// Prefix of the node to move to before the next GETJOB.
    move_to: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.current_addr())
            .field("node_id", &self.node_id)
            .field("known", &self.known)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Settings for these nodes; see [`ClientBuilder`].
    ///
    /// ```
    /// let b = disque_client::Client::builder(&["127.0.0.1:7711"]);
    /// # let _ = b;
    /// ```
    pub fn builder<I, S>(nodes: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientBuilder::new(nodes.into_iter().map(|s| s.as_ref().to_string()))
    }

    /// Connect to the first reachable of these nodes (`host:port`) with
    /// default settings.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), disque_client::Error> {
    /// let mut client = disque_client::Client::connect(&["127.0.0.1:7711", "127.0.0.1:7712"]).await?;
    /// client.ping().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect<S: AsRef<str>>(nodes: &[S]) -> Result<Client> {
        Client::builder(nodes).connect().await
    }

    /// Address of the node connected to, if connected.
    ///
    /// ```no_run
    /// # async fn run(client: disque_client::Client) {
    /// println!("on {:?}", client.current_addr());
    /// # }
    /// ```
    pub fn current_addr(&self) -> Option<&str> {
        self.conn.as_ref().map(|c| c.addr.as_str())
    }

    /// ID of the node connected to, if connected.
    ///
    /// ```no_run
    /// # async fn run(client: disque_client::Client) {
    /// println!("node {:?}", client.current_node_id());
    /// # }
    /// ```
    pub fn current_node_id(&self) -> Option<&str> {
        self.conn.as_ref().and(self.node_id.as_deref())
    }

    /// The nodes the last HELLO listed (refreshed on every connect).
    ///
    /// ```no_run
    /// # async fn run(client: disque_client::Client) {
    /// for n in client.known_nodes() {
    ///     println!("{} {}", n.id, n.addr());
    /// }
    /// # }
    /// ```
    pub fn known_nodes(&self) -> &[NodeInfo] {
        &self.known
    }

    /// Close the connection; the next command connects again (to the
    /// first reachable node, in the usual order).
    ///
    /// ```no_run
    /// # async fn run(mut client: disque_client::Client) {
    /// client.disconnect();
    /// assert!(client.current_addr().is_none());
    /// # }
    /// ```
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    // ---- connection management ----

    /// Candidate addresses: the configured nodes in order, then the
    /// discovered ones by priority, the one that failed last at the end.
    fn candidates(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |a: &str| {
            if !a.is_empty() && !out.iter().any(|x| x == a) {
                out.push(a.to_string());
            }
        };
        for n in &self.settings.nodes {
            push(n);
        }
        if self.settings.discover {
            let mut known: Vec<&NodeInfo> =
                self.known.iter().filter(|n| !n.ip.is_empty()).collect();
            known.sort_by_key(|n| n.priority);
            for n in known {
                push(&n.addr());
            }
        }
        if let Some(bad) = &self.avoid
            && let Some(pos) = out.iter().position(|a| a == bad)
        {
            let a = out.remove(pos);
            out.push(a);
        }
        out
    }

    async fn connect_any(&mut self) -> Result<()> {
        let mut attempts = Vec::new();
        for addr in self.candidates() {
            match self.open(&addr).await {
                Ok((conn, hello)) => {
                    self.adopt(conn, hello);
                    return Ok(());
                }
                // A node still loading its AOF, or leaving: try another.
                Err(e @ Error::Server { .. })
                    if matches!(e.code(), Some(ErrorCode::Loading | ErrorCode::Leaving)) =>
                {
                    attempts.push(format!("{addr}: {e}"));
                }
                // Wrong credentials or a refusal are the same on every node.
                Err(e @ Error::Server { .. }) | Err(e @ Error::Tls(_)) => return Err(e),
                Err(e) => attempts.push(format!("{addr}: {e}")),
            }
        }
        Err(Error::NoNodeReachable { attempts })
    }

    /// Connect to `addr`, authenticate, and read its node list.
    async fn open(&self, addr: &str) -> Result<(Connection, Hello)> {
        let s = &self.settings;
        let mut conn = Connection::open(addr, s.tls.as_ref(), s.connect_timeout).await?;
        let t = Some(s.connect_timeout);
        match s.protocol {
            Protocol::Resp3 => {
                let mut c = Cmd::new("HELLO");
                c.arg("3");
                if let Some(pw) = &s.password {
                    c.arg("AUTH")
                        .arg(s.user.as_deref().unwrap_or("default"))
                        .arg(pw);
                }
                check(conn.request(&c, t).await?)?;
            }
            Protocol::Resp2 => {
                if let Some(pw) = &s.password {
                    let mut c = Cmd::new("AUTH");
                    if let Some(u) = &s.user {
                        c.arg(u);
                    }
                    c.arg(pw);
                    check(conn.request(&c, t).await?)?;
                }
            }
        }
        let hello = Hello::from_value(&check(conn.request(&Cmd::new("HELLO"), t).await?)?)?;
        Ok((conn, hello))
    }

    fn adopt(&mut self, conn: Connection, hello: Hello) {
        if let Some(prefix) = hello.my_id.get(..8) {
            self.prefix_addr
                .insert(prefix.to_string(), conn.addr.clone());
        }
        self.learn(hello);
        self.conn = Some(conn);
        self.avoid = None;
        self.produced.clear();
        self.seen = 0;
        self.move_to = None;
    }

    /// Take in a node list: the connected node's ID, and where the nodes
    /// that create jobs can be reached (addresses already learned by
    /// connecting win over HELLO's, which may not be reachable as given).
    fn learn(&mut self, hello: Hello) {
        if self.settings.discover {
            for n in &hello.nodes {
                if !n.ip.is_empty() {
                    self.prefix_addr
                        .entry(n.prefix().to_string())
                        .or_insert_with(|| n.addr());
                }
            }
        }
        self.node_id = Some(hello.my_id);
        self.known = hello.nodes;
    }

    /// Drop the connection after a failure and remember to try its node
    /// last next time.
    fn abandon(&mut self) {
        if let Some(c) = self.conn.take() {
            self.avoid = Some(c.addr);
        }
    }

    async fn call_once(&mut self, cmd: &Cmd, wait: Wait) -> Result<Value> {
        if self.conn.as_ref().is_some_and(Connection::is_poisoned) {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.connect_any().await?;
        }
        let timeout = match wait {
            Wait::No => Some(self.settings.command_timeout),
            Wait::Server(Some(d)) => Some(d + self.settings.command_timeout),
            Wait::Server(None) => None,
        };
        match self.conn.as_mut() {
            Some(conn) => conn.request(cmd, timeout).await,
            None => Err(Error::NoNodeReachable {
                attempts: Vec::new(),
            }),
        }
    }

    /// Run `cmd`; an error reply becomes [`Error::Server`].
    async fn call(&mut self, cmd: &Cmd, wait: Wait, retry: Retry) -> Result<Value> {
        let may_retry = retry == Retry::Safe && self.settings.retry_on_failover;
        let mut retried = false;
        loop {
            let err = match self.call_once(cmd, wait).await {
                Ok(Value::Error(line)) => {
                    let e = Error::from_reply(&line);
                    if !matches!(e.code(), Some(ErrorCode::Leaving | ErrorCode::Loading)) {
                        return Err(e);
                    }
                    // The node asks to be left alone: go elsewhere.
                    self.abandon();
                    e
                }
                Ok(v) => return Ok(v),
                Err(e @ Error::NoNodeReachable { .. }) => return Err(e),
                Err(e) if e.is_connection_error() => {
                    self.abandon();
                    e
                }
                Err(e) => return Err(e),
            };
            if !may_retry || retried {
                return Err(err);
            }
            retried = true;
        }
    }

    /// Move to the node producing most received jobs, when one was picked.
    async fn follow(&mut self) {
        let Some(prefix) = self.move_to.take() else {
            return;
        };
        let Some(addr) = self.prefix_addr.get(&prefix).cloned() else {
            return;
        };
        if self.current_addr() == Some(addr.as_str()) {
            return;
        }
        // Staying put is fine if the producer cannot be reached.
        if let Ok((conn, hello)) = self.open(&addr).await {
            self.adopt(conn, hello);
        }
    }

    fn count_producers(&mut self, jobs: &[Job]) {
        let Some(window) = self.settings.follow_window else {
            return;
        };
        for j in jobs {
            if let Some(p) = j.id.node_prefix() {
                *self.produced.entry(p.to_string()).or_insert(0) += 1;
                self.seen += 1;
            }
        }
        if self.seen < window {
            return;
        }
        let mine = self.node_id.as_deref().and_then(|id| id.get(..8));
        let best = self
            .produced
            .iter()
            .max_by_key(|&(_, &n)| n)
            .map(|(p, &n)| (p.clone(), n));
        if let Some((prefix, n)) = best
            && n * 2 > self.seen
            && Some(prefix.as_str()) != mine
        {
            self.move_to = Some(prefix);
        }
        self.produced.clear();
        self.seen = 0;
    }

    async fn ids_command<I>(&mut self, name: &str, ids: I, retry: Retry) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut c = Cmd::new(name);
        for id in ids {
            c.arg(id.as_ref());
        }
        let v = self.call(&c, Wait::No, retry).await?;
        uint_of(&v, c.name())
    }

    // ---- commands ----

    /// Send any command and return its raw reply (an error reply becomes
    /// [`Error::Server`]). Not retried on another node.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let reply = client.cmd(["CLUSTER", "MEET", "127.0.0.1", "7712"]).await?;
    /// println!("{reply:?}");
    /// # Ok(()) }
    /// ```
    pub async fn cmd<I>(&mut self, args: I) -> Result<Value>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut it = args.into_iter();
        let Some(first) = it.next() else {
            return Err(Error::Config("empty command".into()));
        };
        let mut c = Cmd::new(&String::from_utf8_lossy(first.as_ref()));
        for a in it {
            c.arg(a);
        }
        self.call(&c, Wait::No, Retry::Never).await
    }

    /// `ADDJOB`: add a job, reply its ID. Retried on another node after a
    /// connection error only when the job has a DEDUP key.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// use disque_client::AddJob;
    /// let id = client.add_job(&AddJob::new("orders", "order 42")).await?;
    /// println!("{id}");
    /// # Ok(()) }
    /// ```
    pub async fn add_job(&mut self, job: &AddJob) -> Result<JobId> {
        let retry = if job.has_dedup() {
            Retry::Safe
        } else {
            Retry::Never
        };
        let v = self
            .call(&job.to_cmd(), Wait::Server(job.server_wait()), retry)
            .await?;
        match v {
            Value::Status(id) => Ok(JobId::from(id)),
            other => Err(Error::unexpected("ADDJOB", &other)),
        }
    }

    /// `GETJOB`: take jobs as `req` says; empty when none came in time.
    ///
    /// Before sending, the client may move to the node that produced most
    /// recently received jobs ([`ClientBuilder::follow_producers`]).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// use disque_client::GetJob;
    /// for job in client.get_jobs(&GetJob::from_queues(["q"]).count(10).nohang()).await? {
    ///     client.ack_job(&job.id).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_jobs(&mut self, req: &GetJob) -> Result<Vec<Job>> {
        if req.queues().is_empty() {
            return Err(Error::Config("GETJOB needs at least one queue".into()));
        }
        self.follow().await;
        let v = self
            .call(&req.to_cmd(), Wait::Server(req.server_wait()), Retry::Safe)
            .await?;
        let jobs = jobs(&v, "GETJOB")?;
        self.count_producers(&jobs);
        Ok(jobs)
    }

    /// `GETJOB TIMEOUT <ms> FROM <queue>`: one job, or `None` after
    /// `timeout` (`Duration::ZERO` blocks until a job comes).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// use std::time::Duration;
    /// if let Some(job) = client.get_job("orders", Duration::from_secs(5)).await? {
    ///     client.ack_job(&job.id).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_job(&mut self, queue: &str, timeout: Duration) -> Result<Option<Job>> {
        let mut req = GetJob::from_queues([queue]);
        if !timeout.is_zero() {
            req = req.timeout(timeout);
        }
        Ok(self.get_jobs(&req).await?.into_iter().next())
    }

    /// `ACKJOB <id>`: acknowledge one job. True when this node knew it and
    /// had not acknowledged it yet (on a cluster, an unknown job is still
    /// acknowledged everywhere through an acknowledgement record).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.ack_job(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_job(&mut self, id: &JobId) -> Result<bool> {
        Ok(self.ack_jobs([id]).await? > 0)
    }

    /// `ACKJOB <id> ...`: acknowledge jobs; replies how many this node knew.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, ids: Vec<disque_client::JobId>) -> Result<(), disque_client::Error> {
    /// let n = client.ack_jobs(&ids).await?;
    /// # let _ = n; Ok(()) }
    /// ```
    pub async fn ack_jobs<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("ACKJOB", ids, Retry::Safe).await
    }

    /// `FASTACK <id> ...`: delete jobs cluster-wide without waiting for
    /// confirmation; replies how many were deleted here.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.fast_ack([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn fast_ack<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("FASTACK", ids, Retry::Safe).await
    }

    /// `NACK <id> ...`: give jobs back to be queued again now (a BACKOFF
    /// job waits its back-off); replies how many were queued.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.nack([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn nack<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("NACK", ids, Retry::Safe).await
    }

    /// `NACK <id> ... DELAY <sec>` (extension): queue the jobs again after
    /// `delay` (whole seconds, rounded up).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// use std::time::Duration;
    /// client.nack_with_delay([&id], Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn nack_with_delay<I>(&mut self, ids: I, delay: Duration) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut c = Cmd::new("NACK");
        for id in ids {
            c.arg(id.as_ref());
        }
        let secs = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
        c.arg("DELAY").arg_int(secs);
        let v = self.call(&c, Wait::No, Retry::Safe).await?;
        uint_of(&v, "NACK")
    }

    /// `WORKING <id>`: postpone the job's next re-queue; replies the job's
    /// RETRY period, the time before WORKING should be sent again.
    /// `-NOJOB` and `-TOOLATE` come back as [`Error::Server`].
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// let again_within = client.working(&id).await?;
    /// println!("send WORKING again within {again_within:?}");
    /// # Ok(()) }
    /// ```
    pub async fn working(&mut self, id: &JobId) -> Result<Duration> {
        let mut c = Cmd::new("WORKING");
        c.arg(id.as_str());
        let v = self.call(&c, Wait::No, Retry::Safe).await?;
        Ok(Duration::from_secs(uint_of(&v, "WORKING")?))
    }

    /// `ENQUEUE <id> ...`: queue active jobs held by this node now.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.enqueue([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("ENQUEUE", ids, Retry::Never).await
    }

    /// `DEQUEUE <id> ...`: take queued jobs out of this node's queue.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.dequeue([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn dequeue<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("DEQUEUE", ids, Retry::Never).await
    }

    /// `DELJOB <id> ...`: delete jobs from this node only.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.del_jobs([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn del_jobs<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("DELJOB", ids, Retry::Never).await
    }

    /// `SHOW <id>`: the job as this node knows it, or `None`.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// if let Some(info) = client.show(&id).await? {
    ///     println!("{:?}", info.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show(&mut self, id: &JobId) -> Result<Option<JobInfo>> {
        let mut c = Cmd::new("SHOW");
        c.arg(id.as_str());
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        if v.is_nil() {
            return Ok(None);
        }
        JobInfo::from_value(&v, "SHOW").map(Some)
    }

    /// `WAITJOB <id> [TIMEOUT <ms>]` (extension): wait until the job ends
    /// on this node; `None` when `timeout` elapsed first (`None` timeout:
    /// wait forever).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// use std::time::Duration;
    /// let outcome = client.wait_job(&id, Some(Duration::from_secs(10))).await?;
    /// println!("{outcome:?}");
    /// # Ok(()) }
    /// ```
    pub async fn wait_job(
        &mut self,
        id: &JobId,
        timeout: Option<Duration>,
    ) -> Result<Option<JobOutcome>> {
        let mut c = Cmd::new("WAITJOB");
        c.arg(id.as_str());
        let mut wait = None;
        if let Some(t) = timeout.filter(|t| !t.is_zero()) {
            let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1);
            c.arg("TIMEOUT").arg_int(ms);
            wait = Some(t);
        }
        let v = self.call(&c, Wait::Server(wait), Retry::Never).await?;
        if v.is_nil() {
            return Ok(None);
        }
        Ok(Some(JobOutcome::parse(&text_of(&v, "WAITJOB")?)))
    }

    /// `REDRIVE <id> ...` (extension): move dead jobs back to their queue.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client, id: disque_client::JobId) -> Result<(), disque_client::Error> {
    /// client.redrive([&id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive<I>(&mut self, ids: I) -> Result<u64>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.ids_command("REDRIVE", ids, Retry::Never).await
    }

    /// `REDRIVE FROM <dead-queue> [COUNT <n>]` (extension): move up to
    /// `count` (all if `None`) dead jobs queued here back to their queues.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let moved = client.redrive_from("mail:dead", Some(100)).await?;
    /// # let _ = moved; Ok(()) }
    /// ```
    pub async fn redrive_from(&mut self, dead_queue: &str, count: Option<u64>) -> Result<u64> {
        let mut c = Cmd::new("REDRIVE");
        c.arg("FROM").arg(dead_queue);
        if let Some(n) = count {
            c.arg("COUNT").arg_int(n);
        }
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        uint_of(&v, "REDRIVE")
    }

    /// `JSCAN ... REPLY ID`: one page of job IDs held by this node.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let page = client.jscan(&disque_client::JScan::new().busyloop()).await?;
    /// println!("{} jobs", page.items.len());
    /// # Ok(()) }
    /// ```
    pub async fn jscan(&mut self, scan: &JScan) -> Result<ScanPage<JobId>> {
        let v = self
            .call(&scan.to_cmd(false), Wait::No, Retry::Never)
            .await?;
        ScanPage::from_value(&v, "JSCAN", |x| text_of(x, "JSCAN").map(JobId::from))
    }

    /// `JSCAN ... REPLY ALL`: one page of jobs with their SHOW fields.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let page = client.jscan_jobs(&disque_client::JScan::new().queue("orders")).await?;
    /// for job in page.items {
    ///     println!("{} {:?}", job.id, job.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn jscan_jobs(&mut self, scan: &JScan) -> Result<ScanPage<JobInfo>> {
        let v = self
            .call(&scan.to_cmd(true), Wait::No, Retry::Never)
            .await?;
        ScanPage::from_value(&v, "JSCAN", |x| JobInfo::from_value(x, "JSCAN"))
    }

    /// `QLEN <queue>`: jobs queued in it on this node.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// println!("{}", client.qlen("orders").await?);
    /// # Ok(()) }
    /// ```
    pub async fn qlen(&mut self, queue: &str) -> Result<u64> {
        let mut c = Cmd::new("QLEN");
        c.arg(queue);
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        uint_of(&v, "QLEN")
    }

    /// `QLEN <queue> CLUSTER` (extension): jobs queued in it on this node
    /// and every reachable node.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// println!("{}", client.qlen_cluster("orders").await?);
    /// # Ok(()) }
    /// ```
    pub async fn qlen_cluster(&mut self, queue: &str) -> Result<u64> {
        let mut c = Cmd::new("QLEN");
        c.arg(queue).arg("CLUSTER");
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        uint_of(&v, "QLEN")
    }

    /// `QPEEK <queue> <count>`: up to |count| queued jobs without taking
    /// them, oldest first (newest first for a negative count).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let newest = client.qpeek("orders", -1).await?;
    /// # let _ = newest; Ok(()) }
    /// ```
    pub async fn qpeek(&mut self, queue: &str, count: i64) -> Result<Vec<PeekedJob>> {
        let mut c = Cmd::new("QPEEK");
        c.arg(queue).arg_int(count);
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        Ok(jobs(&v, "QPEEK")?
            .into_iter()
            .map(|j| PeekedJob {
                queue: j.queue,
                id: j.id,
                body: j.body,
            })
            .collect())
    }

    /// `QSTAT <queue>`: the queue's figures on this node, `None` if it does
    /// not exist here.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let stat = client.qstat("orders").await?;
    /// # let _ = stat; Ok(()) }
    /// ```
    pub async fn qstat(&mut self, queue: &str) -> Result<Option<QueueStat>> {
        self.qstat_with(queue, false).await
    }

    /// `QSTAT <queue> CLUSTER` (extension): as [`qstat`](Self::qstat) plus
    /// [`QueueStat::len_cluster`].
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// if let Some(stat) = client.qstat_cluster("orders").await? {
    ///     println!("{:?} queued cluster-wide", stat.len_cluster);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn qstat_cluster(&mut self, queue: &str) -> Result<Option<QueueStat>> {
        self.qstat_with(queue, true).await
    }

    async fn qstat_with(&mut self, queue: &str, cluster: bool) -> Result<Option<QueueStat>> {
        let mut c = Cmd::new("QSTAT");
        c.arg(queue);
        if cluster {
            c.arg("CLUSTER");
        }
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        if v.is_nil() {
            return Ok(None);
        }
        QueueStat::from_value(&v, "QSTAT").map(Some)
    }

    /// `QSCAN ...`: one page of queue names on this node.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let page = client.qscan(&disque_client::QScan::new().busyloop()).await?;
    /// # let _ = page; Ok(()) }
    /// ```
    pub async fn qscan(&mut self, scan: &QScan) -> Result<ScanPage<String>> {
        let v = self.call(&scan.to_cmd(), Wait::No, Retry::Never).await?;
        ScanPage::from_value(&v, "QSCAN", |x| text_of(x, "QSCAN"))
    }

    /// `PAUSE <queue> <state> [bcast]`: set the queue's pause state here
    /// (and on every node with `broadcast`); replies the new state.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// use disque_client::PauseState;
    /// client.pause("orders", PauseState::In, true).await?;
    /// client.pause("orders", PauseState::None, true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(
        &mut self,
        queue: &str,
        state: PauseState,
        broadcast: bool,
    ) -> Result<PauseState> {
        let mut c = Cmd::new("PAUSE");
        c.arg(queue).arg(state.as_str());
        if broadcast {
            c.arg("bcast");
        }
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        PauseState::from_value(&v, "PAUSE")
    }

    /// `PAUSE <queue> state`: the queue's pause state, unchanged.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// println!("{:?}", client.pause_state("orders").await?);
    /// # Ok(()) }
    /// ```
    pub async fn pause_state(&mut self, queue: &str) -> Result<PauseState> {
        let mut c = Cmd::new("PAUSE");
        c.arg(queue).arg("state");
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        PauseState::from_value(&v, "PAUSE")
    }

    /// `INFO [<section>]`.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let info = client.info(None).await?;
    /// println!("{:?}", info.get("disque_version"));
    /// # Ok(()) }
    /// ```
    pub async fn info(&mut self, section: Option<&str>) -> Result<Info> {
        let mut c = Cmd::new("INFO");
        if let Some(s) = section {
            c.arg(s);
        }
        let v = self.call(&c, Wait::No, Retry::Never).await?;
        Ok(Info {
            text: text_of(&v, "INFO")?,
        })
    }

    /// Bare `HELLO`: the node's ID and the cluster's nodes (also refreshes
    /// [`known_nodes`](Self::known_nodes)).
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// let hello = client.hello().await?;
    /// println!("{} nodes", hello.nodes.len());
    /// # Ok(()) }
    /// ```
    pub async fn hello(&mut self) -> Result<Hello> {
        let v = self.call(&Cmd::new("HELLO"), Wait::No, Retry::Safe).await?;
        let hello = Hello::from_value(&v)?;
        self.learn(hello.clone());
        Ok(hello)
    }

    /// `PING`.
    ///
    /// ```no_run
    /// # async fn run(client: &mut disque_client::Client) -> Result<(), disque_client::Error> {
    /// client.ping().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ping(&mut self) -> Result<()> {
        let v = self.call(&Cmd::new("PING"), Wait::No, Retry::Safe).await?;
        match v {
            Value::Status(_) | Value::Bulk(_) => Ok(()),
            other => Err(Error::unexpected("PING", &other)),
        }
    }
}

fn check(v: Value) -> Result<Value> {
    match v {
        Value::Error(line) => Err(Error::from_reply(&line)),
        v => Ok(v),
    }
}
