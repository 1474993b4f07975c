//! Container and service lifecycle (docs/DEPLOY.md): `-LOADING` while the
//! AOF loads, SIGHUP reopening the log file, `maxmemory` from the cgroup
//! limit, `cluster-join` by name with retries, announced addresses, and
//! the SIGTERM drain.
//!
//! Some tests need environment variables or the line printed before the
//! ready line, which the shared harness does not offer: `Proc` starts the
//! binary for those.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts, SERVER_BIN};
use crate::util::{addjob, POLL, WAIT};

/// A server process started with extra environment variables; its output
/// lines are collected so tests can wait for one.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut cmd = Command::new(SERVER_BIN);
        cmd.args(["--port", "0", "--dir"])
            .arg(dir)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn disque-server");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for r in [
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
            let lines = lines.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                }
            });
        }
        Proc { child, lines }
    }

    /// The first output line starting with `prefix` (waits up to WAIT).
    fn line(&self, prefix: &str) -> String {
        let mut found = None;
        let ok = wait_until(WAIT, POLL, || {
            found = self
                .lines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find(|l| l.starts_with(prefix))
                .cloned();
            found.is_some()
        });
        assert!(
            ok,
            "no line starting with {prefix:?}; output:\n{}",
            self.output()
        );
        found.unwrap_or_default()
    }

    fn port(&self, prefix: &str) -> u16 {
        let line = self.line(prefix);
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("port="))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line}"))
    }

    fn output(&self) -> String {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- server output ----\n{}\n----", self.output());
        }
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "disque-deploy-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn loading_answers_loading_until_the_aof_is_in_memory() {
    let dir = temp_dir("loading");
    let mut s = Server::start(ServerOpts {
        dir: Some(dir.clone()),
        ..ServerOpts::with_args(&["--appendonly", "yes"])
    });
    let mut c = s.client();
    for i in 0..50 {
        addjob(&mut c, "q", &format!("job{i}"), &[]);
    }
    s.sigterm();
    assert!(s.wait_exit(WAIT).is_some_and(|st| st.success()));
    drop(s);

    let p = Proc::start(
        &dir,
        &["--appendonly", "yes"],
        &[("DISQUE_DEBUG_LOADING_DELAY_MS", "1500")],
    );
    let mut c = Client::connect(p.port("disque-server loading "));
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert_eq!(c.info_field("loading"), "1");
    assert!(c.info_int("loading_total_bytes") > 0);
    let loading = Reply::Error("LOADING Disque is loading the dataset in memory".into());
    assert_eq!(c.cmd(&["QLEN", "q"]), loading);
    assert_eq!(c.cmd(&["GETJOB", "FROM", "q"]), loading);
    assert_eq!(c.cmd(&["ADDJOB", "q", "x", "0"]), loading);
    assert_eq!(c.cmd(&["CLUSTER", "INFO"]), loading);
    // Then it finishes by itself and everything is there.
    assert!(wait_until(WAIT, POLL, || c.info_field("loading") == "0"));
    // Loaded jobs come back active, not queued (docs/PERSISTENCE.md).
    assert_eq!(c.info_int("registered_jobs"), 50);
    p.line("disque-server ready ");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sighup_reopens_the_log_file_and_keeps_running() {
    let mut s = Server::start(ServerOpts::with_args(&["--logfile", "disque.log"]));
    let log = s.dir().join("disque.log");
    let rotated = s.dir().join("disque.log.1");
    assert!(wait_until(WAIT, POLL, || std::fs::read_to_string(&log)
        .is_ok_and(|t| t.contains("Ready to accept connections"))));
    std::fs::rename(&log, &rotated).expect("rotate");
    let pid = i32::try_from(s.pid()).expect("pid fits");
    // SAFETY: kill(2) on the child we started and still own.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    assert!(
        wait_until(WAIT, POLL, || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("log file reopened"))),
        "no new log file after SIGHUP"
    );
    assert!(s.is_running(), "SIGHUP killed the node");
    let mut c = s.client();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    let old = std::fs::read_to_string(&rotated).expect("rotated log");
    assert!(old.contains("Ready to accept connections"));
    assert!(!old.contains("log file reopened"));
}

#[test]
fn maxmemory_defaults_to_80_percent_of_the_cgroup_limit() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroup");
    let root = fixtures.join("v2-container");
    let root = root.to_str().expect("utf-8 path");
    for (args, want) in [
        (&[][..], "214748320"),
        (&["--maxmemory", "100mb"][..], "104857600"),
    ] {
        let dir = temp_dir("cgroup");
        let p = Proc::start(&dir, args, &[("DISQUE_CGROUP_ROOT", root)]);
        let mut c = Client::connect(p.port("disque-server ready "));
        let r = c.cmd(&["CONFIG", "GET", "maxmemory"]);
        assert_eq!(r.array()[1].text(), want, "{args:?}");
        if args.is_empty() {
            assert!(
                wait_until(WAIT, POLL, || p.output().contains("cgroup memory limit")),
                "{}",
                p.output()
            );
        }
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn cluster_field(c: &mut Client, field: &str) -> i64 {
    let info = c.cmd(&["CLUSTER", "INFO"]).text();
    crate::harness::info_value(&info, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// A client port whose bus port is free too, for a node that must be
/// named before it starts (the seed of `cluster-join`).
fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let Ok(l) = std::net::TcpListener::bind("0.0.0.0:0") else {
            continue;
        };
        let Ok(addr) = l.local_addr() else { continue };
        let p = addr.port();
        if p <= 55535 && std::net::TcpListener::bind(("0.0.0.0", p + 10000)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

#[test]
fn cluster_join_by_name_keeps_trying_until_the_seed_is_up() {
    let seed_port = free_port_pair();
    let seed_addr = format!("localhost:{seed_port}");
    let a = Server::start(ServerOpts::with_args(&["--cluster-join", &seed_addr]));
    let mut ca = a.client();
    // Nobody to meet yet: the joiner stays alone and keeps trying.
    assert_eq!(cluster_field(&mut ca, "cluster_reachable_nodes"), 0);
    let b = Server::start(ServerOpts {
        port: Some(seed_port),
        ..ServerOpts::default()
    });
    let mut cb = b.client();
    assert!(
        wait_until(WAIT, POLL, || cluster_field(
            &mut ca,
            "cluster_reachable_nodes"
        ) == 1
            && cluster_field(&mut cb, "cluster_reachable_nodes") == 1),
        "no join; joiner output:\n{}",
        a.output()
    );
    assert!(wait_until(WAIT, POLL, || a
        .output()
        .contains("cluster-join: joined the cluster")));
    // The seed is known by its resolved numeric address.
    let nodes = ca.cmd(&["CLUSTER", "NODES"]).text();
    assert!(nodes.contains(&format!("127.0.0.1:{seed_port}")), "{nodes}");
}

#[test]
fn cluster_meet_resolves_host_names() {
    let a = Server::start_default();
    let b = Server::start_default();
    let mut ca = a.client();
    let port = b.port().to_string();
    assert_eq!(
        ca.cmd(&["CLUSTER", "MEET", "localhost", &port]),
        Reply::Status("OK".into())
    );
    assert!(wait_until(WAIT, POLL, || cluster_field(
        &mut ca,
        "cluster_reachable_nodes"
    ) == 1));
    let bad = ca.cmd(&["CLUSTER", "MEET", "no-such-node.invalid", "7711"]);
    assert_eq!(
        bad,
        Reply::Error("ERR Invalid node address specified: no-such-node.invalid:7711".into())
    );
    let bad = ca.cmd(&["CLUSTER", "MEET", "not/a/host", "7711"]);
    assert_eq!(
        bad,
        Reply::Error("ERR Invalid node address specified: not/a/host:7711".into())
    );
}

fn healthcheck(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(SERVER_BIN);
    cmd.arg("--healthcheck").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run --healthcheck");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn healthcheck_is_ready_only_after_loading() {
    let dir = temp_dir("health");
    std::fs::write(dir.join("disque.aof"), b"").expect("aof");
    let p = Proc::start(
        &dir,
        &["--appendonly", "yes", "--requirepass", "pw"],
        &[("DISQUE_DEBUG_LOADING_DELAY_MS", "3000")],
    );
    let addr = format!("127.0.0.1:{}", p.port("disque-server loading "));
    let pw = [("DISQUE_PASSWORD", "pw")];
    let (ok, why) = healthcheck(&[&addr], &pw);
    assert!(!ok && why.contains("loading"), "{why}");
    assert!(
        healthcheck(&["--live", &addr], &pw).0,
        "alive while loading"
    );
    let (ok, why) = healthcheck(&[&addr], &[]);
    assert!(!ok && why.contains("NOAUTH"), "{why}");
    p.line("disque-server ready ");
    assert!(healthcheck(&[&addr], &pw).0);
    drop(p);
    let (ok, why) = healthcheck(&[&addr], &pw);
    assert!(!ok, "nobody listens any more: {why}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_drains_queued_jobs_to_a_consumer_elsewhere() {
    let mut a = Server::start(ServerOpts::with_args(&["--shutdown-drain-timeout", "20"]));
    let b = Server::start_default();
    let (mut ca, mut cb) = (a.client(), b.client());
    ca.cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]);
    assert!(wait_until(WAIT, POLL, || cluster_field(
        &mut ca,
        "cluster_reachable_nodes"
    ) == 1
        && cluster_field(&mut cb, "cluster_reachable_nodes") == 1));
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(addjob(&mut ca, "q", &format!("j{i}"), &["REPLICATE", "1"]));
    }
    a.sigterm();
    // Consumers on B ask for the queue; A hands its jobs over, then exits.
    let mut got = Vec::new();
    let ok = wait_until(Duration::from_secs(20), POLL, || {
        let r = cb.cmd(&["GETJOB", "TIMEOUT", "200", "COUNT", "10", "FROM", "q"]);
        if let Reply::Array(jobs) = r {
            for j in jobs {
                let id = j.array()[1].text();
                cb.cmd(&["ACKJOB", &id]);
                got.push(id);
            }
        }
        got.len() >= ids.len()
    });
    assert!(ok, "got {got:?}; A output:\n{}", a.output());
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    assert!(a.wait_exit(WAIT).is_some_and(|s| s.success()));
    assert!(a.wait_output("Drained", WAIT), "{}", a.output());
    // The drain's LEAVING flag is not persisted: A comes back a member.
    let conf = std::fs::read_to_string(a.dir().join("nodes.conf")).expect("nodes.conf");
    let me = conf.lines().find(|l| l.contains("myself")).unwrap_or("");
    assert!(!me.contains("leaving"), "{conf}");
}

/// A port mapping (what a NAT or `docker -p` does): connections to the
/// returned port are relayed to `to` on loopback. Counts connections.
fn forwarder(to: u16) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = std::net::TcpListener::bind("0.0.0.0:0").expect("bind forwarder");
    let port = l.local_addr().expect("addr").port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for down in l.incoming().map_while(Result::ok) {
            seen.fetch_add(1, Ordering::Relaxed);
            let Ok(up) = std::net::TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            for (mut from, mut to) in [
                (down.try_clone(), up.try_clone()),
                (up.try_clone(), down.try_clone()),
            ]
            .into_iter()
            .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
            {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    (port, count)
}

#[test]
fn announced_address_and_ports_are_what_peers_use() {
    let port = free_port_pair();
    let (client_fwd, _) = forwarder(port);
    let (bus_fwd, bus_conns) = forwarder(port + 10000);
    let a = Server::start(ServerOpts {
        port: Some(port),
        ..ServerOpts::with_args(&[
            "--cluster-announce-ip",
            "127.0.0.2",
            "--cluster-announce-port",
            &client_fwd.to_string(),
            "--cluster-announce-bus-port",
            &bus_fwd.to_string(),
        ])
    });
    let b = Server::start_default();
    let (mut ca, mut cb) = (a.client(), b.client());
    // B meets A at its real address; A's PONG/PING announce the mapped one.
    cb.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string()]);
    let want = format!("127.0.0.2:{client_fwd}");
    assert!(
        wait_until(WAIT, POLL, || cb
            .cmd(&["CLUSTER", "NODES"])
            .text()
            .contains(&want)
            && cluster_field(&mut ca, "cluster_reachable_nodes") == 1
            && cluster_field(&mut cb, "cluster_reachable_nodes") == 1),
        "{}",
        cb.cmd(&["CLUSTER", "NODES"]).text()
    );
    // B's bus link to A goes through the announced bus port.
    assert!(wait_until(WAIT, POLL, || bus_conns
        .load(std::sync::atomic::Ordering::Relaxed)
        > 0));
    // A reports the announced IP as its own.
    let mine = ca.cmd(&["CLUSTER", "NODES"]).text();
    assert!(
        mine.lines()
            .any(|l| l.contains("myself") && l.contains("127.0.0.2:")),
        "{mine}"
    );
    // And a job replicated across the mapping works.
    let id = addjob(&mut ca, "q", "x", &["REPLICATE", "2"]);
    assert!(cb.cmd(&["SHOW", &id]).array().len() > 2);
}

#[test]
fn a_node_back_with_a_new_address_keeps_its_id_and_peers_follow() {
    let dir = temp_dir("moved");
    let mut b = Server::start(ServerOpts {
        dir: Some(dir.clone()),
        ..ServerOpts::default()
    });
    let a = Server::start_default();
    let mut ca = a.client();
    ca.cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]);
    assert!(wait_until(WAIT, POLL, || cluster_field(
        &mut ca,
        "cluster_reachable_nodes"
    ) == 1));
    let mut cb = b.client();
    assert!(wait_until(WAIT, POLL, || cluster_field(
        &mut cb,
        "cluster_reachable_nodes"
    ) == 1));
    let id = cb.cmd(&["CLUSTER", "MYID"]).text();
    let port = b.port();
    b.sigterm();
    assert!(b.wait_exit(WAIT).is_some());
    drop(b);
    // Same nodes.conf, new address (127.0.0.3 stands for a new pod IP).
    let b = Server::start(ServerOpts {
        dir: Some(dir.clone()),
        port: Some(port),
        ..ServerOpts::with_args(&["--cluster-announce-ip", "127.0.0.3"])
    });
    assert_eq!(b.client().cmd(&["CLUSTER", "MYID"]).text(), id);
    let want = format!("{id} 127.0.0.3:{port}");
    assert!(
        wait_until(WAIT, POLL, || ca
            .cmd(&["CLUSTER", "NODES"])
            .text()
            .contains(&want)
            && cluster_field(&mut ca, "cluster_reachable_nodes") == 1),
        "A: {}\nB: {}",
        ca.cmd(&["CLUSTER", "NODES"]).text(),
        b.client().cmd(&["CLUSTER", "NODES"]).text()
    );
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}
