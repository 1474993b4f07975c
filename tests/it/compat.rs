//! Directives kept for compatibility: `pidfile` and `tcp-keepalive` act;
//! the ones that do nothing say so at startup.

use std::time::Duration;

use crate::harness::{wait_until, Server, ServerOpts};
use crate::util::{POLL, WAIT};

#[test]
fn pidfile_holds_the_pid_and_is_removed_on_shutdown() {
    let mut s = Server::start(ServerOpts::with_config("pidfile test.pid\n"));
    let path = s.dir().join("test.pid");
    let text = std::fs::read_to_string(&path).expect("pidfile written");
    assert_eq!(text.trim(), s.pid().to_string());
    s.sigterm();
    assert!(s.wait_exit(Duration::from_secs(20)).is_some());
    assert!(!path.exists(), "pidfile left behind");
}

#[test]
fn default_pidfile_is_not_written() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        crate::harness::ReplyExt::array(&c.cmd(&["CONFIG", "GET", "pidfile"]))[1],
        crate::harness::Reply::Bulk(b"/var/run/disque.pid".to_vec())
    );
    // Nothing to assert on /var/run itself (another server may own it):
    // the process just must not have failed or warned about it.
    assert!(!s.output().contains("Could not write the pidfile"));
}

/// The keepalive timer of the server's end of a loopback connection, from
/// /proc/<pid>/net/tcp: (timer kind, jiffies until it fires).
fn server_timer(pid: u32, server_port: u16, client_port: u16) -> Option<(u8, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    let want_local = format!(":{server_port:04X}");
    let want_remote = format!(":{client_port:04X}");
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].ends_with(&want_local) || !f[2].ends_with(&want_remote) {
            continue;
        }
        let (kind, when) = f[5].split_once(':')?;
        return Some((kind.parse().ok()?, u64::from_str_radix(when, 16).ok()?));
    }
    None
}

#[test]
fn tcp_keepalive_arms_the_keepalive_timer() {
    for (conf, armed) in [("tcp-keepalive 60\n", true), ("tcp-keepalive 0\n", false)] {
        let s = Server::start(ServerOpts::with_config(conf));
        let stream = std::net::TcpStream::connect(("127.0.0.1", s.port())).unwrap();
        let client_port = stream.local_addr().unwrap().port();
        // Timer kind 2 is the keepalive timer of an idle connection.
        let seen = wait_until(WAIT, POLL, || {
            server_timer(s.pid(), s.port(), client_port).is_some_and(|(k, _)| (k == 2) == armed)
        });
        assert!(
            seen,
            "{conf}: {:?}",
            server_timer(s.pid(), s.port(), client_port)
        );
    }
}

#[test]
fn ignored_directives_warn_at_startup() {
    let s = Server::start(ServerOpts::with_config(
        "activerehashing no\nlatency-monitor-threshold 100\nno-appendfsync-on-rewrite yes\nsyslog-ident other\n",
    ));
    for name in [
        "activerehashing",
        "latency-monitor-threshold",
        "no-appendfsync-on-rewrite",
        "syslog-ident",
    ] {
        let out = s.output();
        assert!(
            out.lines()
                .any(|l| l.contains(name) && l.contains("accepted for compatibility and ignored")),
            "no warning for {name}: {out}"
        );
    }
    let quiet = Server::start_default();
    assert!(!quiet.output().contains("accepted for compatibility"));
}
