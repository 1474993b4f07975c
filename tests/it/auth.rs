//! Client authentication (requirepass: Disque's `AUTH <pw>`, Redis 6's
//! `AUTH default <pw>` and `HELLO <proto> AUTH default <pw>`) and Redis's
//! protected mode (our extension, docs/SECURITY.md).

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::harness::{Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, assert_bytes};

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

#[test]
fn auth_default_user_and_other_users() {
    let s = Server::start(ServerOpts::with_args(&["--requirepass", "s3cret"]));
    let mut c = s.client();
    // Nothing but AUTH, HELLO and QUIT is served before authentication.
    for cmd in [
        &["PING"][..],
        &["GETJOB", "FROM", "q"],
        &["ACKJOB", "D-00000000-000000000000000000000000-0000"],
        &["CONFIG", "GET", "requirepass"],
        &["CLUSTER", "NODES"],
        &["HELLO"],
    ] {
        assert_bytes(&c.cmd_raw(cmd), NOAUTH);
    }
    assert_bytes(&c.cmd_raw(&["AUTH", "nobody", "s3cret"]), WRONGPASS);
    // User names are case-sensitive, as in Redis.
    assert_bytes(&c.cmd_raw(&["AUTH", "DEFAULT", "s3cret"]), WRONGPASS);
    assert_bytes(&c.cmd_raw(&["AUTH", "default", "wrong"]), WRONGPASS);
    assert_bytes(&c.cmd_raw(&["PING"]), NOAUTH);
    assert_bytes(
        &c.cmd_raw(&["AUTH", "default", "s3cret", "x"]),
        b"-ERR syntax error\r\n",
    );
    assert_bytes(&c.cmd_raw(&["AUTH", "default", "s3cret"]), b"+OK\r\n");
    addjob(&mut c, "q", "body", &[]);
    // Disque's one-argument form keeps Disque's texts.
    let mut d = s.client();
    assert_bytes(&d.cmd_raw(&["AUTH", "nope"]), b"-ERR invalid password\r\n");
    assert_bytes(&d.cmd_raw(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(d.cmd(&["QLEN", "q"]).int(), 1);
    // Every failure was logged with the peer address.
    let peer = c.stream().local_addr().unwrap().to_string();
    // The log lines reach the test through a reader thread: poll for them.
    crate::harness::wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        s.output().matches("Failed authentication attempt").count() >= 4
    });
    let log = s.output();
    let failures = log
        .lines()
        .filter(|l| l.contains("Failed authentication attempt"))
        .collect::<Vec<_>>();
    assert_eq!(failures.len(), 4, "{log}");
    assert!(failures.iter().take(3).all(|l| l.contains(&peer)), "{log}");
}

#[test]
fn hello_auth_and_setname() {
    let s = Server::start(ServerOpts::with_args(&["--requirepass", "pw"]));
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["HELLO", "3", "AUTH", "default", "bad"]),
        WRONGPASS,
    );
    assert_bytes(
        &c.cmd_raw(&["HELLO", "2", "AUTH", "other", "pw"]),
        WRONGPASS,
    );
    let r = c.cmd_raw(&["HELLO", "3"]);
    assert!(r.starts_with(b"-NOAUTH HELLO must be called"), "{r:?}");
    assert_bytes(&c.cmd_raw(&["PING"]), NOAUTH);
    let r = c.cmd(&["HELLO", "3", "AUTH", "default", "pw", "SETNAME", "worker-1"]);
    assert_eq!(r.field("proto"), &Reply::Int(3));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).text(), "worker-1");
    addjob(&mut c, "q", "b", &[]);
    // RESP2 through HELLO 2 AUTH on a fresh connection.
    let mut d = s.client();
    let r = d.cmd(&["HELLO", "2", "AUTH", "default", "pw"]);
    assert!(!r.is_error(), "{r:?}");
    assert_eq!(d.cmd(&["QLEN", "q"]).int(), 1);
}

#[test]
fn without_password_default_user_is_nopass() {
    // As Redis's default user without requirepass: any password works for
    // `default`, other users do not exist.
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["AUTH", "default", "anything"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["AUTH", "alice", "anything"]), WRONGPASS);
    let r = c.cmd(&["HELLO", "3", "AUTH", "default", "x"]);
    assert!(!r.is_error(), "{r:?}");
    assert_bytes(
        &c.cmd_raw(&["AUTH", "x"]),
        b"-ERR Client sent AUTH, but no password is set\r\n",
    );
}

#[test]
fn wrong_passwords_do_not_slow_other_clients() {
    let s = Server::start(ServerOpts::with_args(&["--requirepass", "pw"]));
    let mut guesser = s.client();
    let n = 2000;
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend_from_slice(&crate::harness::encode_cmd(&["AUTH", &format!("guess{i}")]));
    }
    guesser.send_raw(&batch);
    // Another client is served while the guesses are answered: no sleep
    // anywhere on the failure path.
    let mut other = s.client();
    assert_bytes(&other.cmd_raw(&["AUTH", "pw"]), b"+OK\r\n");
    assert_bytes(&other.cmd_raw(&["PING"]), b"+PONG\r\n");
    let start = Instant::now();
    for _ in 0..n {
        assert_bytes(&guesser.read_reply_raw(), b"-ERR invalid password\r\n");
    }
    // Generous bound: thousands of sleeps of any size would blow it.
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// A local address that is not loopback (the connection's source address
/// is then that address too), or a clear failure: protected mode cannot be
/// tested without one.
fn non_loopback_ip() -> IpAddr {
    for probe in ["192.0.2.1:9", "10.255.255.1:9", "172.16.0.1:9"] {
        if let Ok(sock) = UdpSocket::bind("0.0.0.0:0") {
            if sock.connect(probe).is_ok() {
                if let Ok(a) = sock.local_addr() {
                    if !a.ip().is_loopback() && !a.ip().is_unspecified() {
                        return a.ip();
                    }
                }
            }
        }
    }
    panic!("this machine has no non-loopback IPv4 address: protected mode needs one to be tested");
}

/// Connect from a non-loopback address, send PING, return everything read
/// until the server closes or goes quiet.
fn ping_from(ip: IpAddr, port: u16) -> Vec<u8> {
    let mut s = TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let _ = s.write_all(b"PING\r\n");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

#[test]
fn protected_mode_serves_only_loopback_without_password_or_bind() {
    let ip = non_loopback_ip();
    let s = Server::start_default();
    let denied = ping_from(ip, s.port());
    let text = String::from_utf8_lossy(&denied);
    assert!(
        text.starts_with("-DENIED Disque is running in protected mode"),
        "{text}"
    );
    assert!(text.contains("'CONFIG SET protected-mode no'"), "{text}");
    assert!(text.ends_with("\r\n"), "{text}");
    let mut c = s.client();
    assert_eq!(c.info_int("rejected_connections"), 1);
    assert!(
        s.wait_output("protected mode", Duration::from_secs(10)),
        "refusal logged"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "protected-mode"]).array()[1].text(),
        "yes"
    );
    // Turning it off from loopback serves everyone.
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "protected-mode", "no"]),
        b"+OK\r\n",
    );
    assert_bytes(&ping_from(ip, s.port()), b"+PONG\r\n");
    // A password lifts protected mode too (clients must then AUTH).
    c.cmd(&["CONFIG", "SET", "protected-mode", "yes"]);
    c.cmd(&["CONFIG", "SET", "requirepass", "pw"]);
    assert_bytes(&ping_from(ip, s.port()), NOAUTH);
}

#[test]
fn protected_mode_off_on_the_command_line_and_with_bind() {
    let ip = non_loopback_ip();
    let s = Server::start(ServerOpts::with_args(&["--protected-mode", "no"]));
    assert_bytes(&ping_from(ip, s.port()), b"+PONG\r\n");
    // An explicit bind (here every IPv4 address) also means "I chose who
    // may connect".
    let s = Server::start(ServerOpts::with_args(&["--bind", "0.0.0.0"]));
    assert_bytes(&ping_from(ip, s.port()), b"+PONG\r\n");
    assert_eq!(s.client().info_int("rejected_connections"), 0);
}
