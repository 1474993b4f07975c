//! Real `disque-server` processes for the tests: each on a free port
//! (`--port 0`) in its own temporary directory, killed and removed on
//! drop; clusters joined with CLUSTER MEET.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use disque_client::{Client, ClientBuilder};

/// Deadline for conditions driven by server timers.
pub const WAIT: Duration = Duration::from_secs(20);
/// Polling period for those conditions.
pub const POLL: Duration = Duration::from_millis(20);
const START_DEADLINE: Duration = Duration::from_secs(15);

/// The server binary: `DISQUE_SERVER_BIN`, else the repository's debug
/// build next to this package.
pub fn server_bin() -> PathBuf {
    let path = match std::env::var_os("DISQUE_SERVER_BIN") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/disque-server"),
    };
    assert!(
        path.is_file(),
        "disque-server not found at {}: run `cargo build --bin disque-server` at the \
         repository root, or set DISQUE_SERVER_BIN to the binary",
        path.display()
    );
    path
}

/// Poll `f` every [`POLL`] until it is true or `timeout` elapses.
pub async fn wait_for(timeout: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One server process.
pub struct Node {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    output: Arc<Mutex<String>>,
}

fn fresh_dir() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "disque-client-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Node {
    /// Start a node with `--cluster-node-timeout 2000` (fast failure
    /// detection) plus `extra`, and wait for its ready line.
    pub async fn start(extra: &[&str]) -> Node {
        let dir = fresh_dir();
        let mut child = Command::new(server_bin())
            .args(["--port", "0", "--dir"])
            .arg(&dir)
            .args(["--cluster-node-timeout", "2000"])
            .args(extra)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn disque-server");
        let output = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let out = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        let mut node = Node {
            child: Some(child),
            dir,
            port: 0,
            output,
        };
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(port) = node.ready_field("port=") {
                node.port = port;
                return node;
            }
            if let Some(c) = node.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!("disque-server exited with {status}:\n{}", node.output());
            }
            assert!(
                Instant::now() < deadline,
                "disque-server not ready within {START_DEADLINE:?}:\n{}",
                node.output()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A numeric field of the ready line (`port=`, `tls=`).
    pub fn ready_field(&self, name: &str) -> Option<u16> {
        let out = self.output();
        let line = out
            .lines()
            .find(|l| l.starts_with("disque-server ready "))?
            .to_string();
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
    }

    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A client for this node only, not following producers elsewhere.
    pub fn builder(&self) -> ClientBuilder {
        Client::builder([self.addr()])
            .follow_producers(None)
            .discover_nodes(false)
    }

    pub async fn client(&self) -> Client {
        self.builder().connect().await.unwrap()
    }

    /// SIGKILL, as a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "---- disque-server {} output ----\n{}---- end ----",
                self.port,
                self.output()
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn cluster_field(c: &mut Client, field: &str) -> Option<i64> {
    let v = c.cmd(["CLUSTER", "INFO"]).await.ok()?;
    let text = v.as_text()?;
    text.lines().find_map(|l| {
        l.trim_end_matches('\r')
            .strip_prefix(field)?
            .strip_prefix(':')?
            .parse()
            .ok()
    })
}

/// `n` nodes joined into one cluster, every node reaching every other.
pub async fn cluster(n: usize) -> Vec<Node> {
    let mut nodes = Vec::new();
    for _ in 0..n {
        nodes.push(Node::start(&[]).await);
    }
    let mut c0 = nodes[0].client().await;
    for node in &nodes[1..] {
        let port = node.port().to_string();
        c0.cmd(["CLUSTER", "MEET", "127.0.0.1", port.as_str()])
            .await
            .unwrap();
    }
    let want = i64::try_from(n).unwrap() - 1;
    for node in &nodes {
        let mut c = node.client().await;
        assert!(
            wait_for(WAIT, async || {
                cluster_field(&mut c, "cluster_reachable_nodes").await == Some(want)
            })
            .await,
            "node {} never reached its {want} peers",
            node.port()
        );
    }
    nodes
}
