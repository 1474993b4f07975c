//! TLS on the client port (tls-port, tls-auth-clients, tls-only, AUTH,
//! reload by CONFIG SET) with a Rust client (rustls, `pki::TlsClient`), and
//! plain text / TLS mix-ups that must fail without harming other clients.
//! `scripts/redis-cli-tls.sh` (run by `.ci/run`) checks the same with
//! `redis-cli --tls`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::harness::{wait_until, Reply, ReplyExt, Server, ServerOpts};
use crate::pki::{tls_args, tls_port, Ca, Pair, TlsClient};
use crate::util::{POLL, WAIT};

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "disque-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A node with a plain port and a TLS port (free ports), using `server`
/// and trusting `ca` for client certificates.
fn tls_node(ca: &Ca, server: &Pair, extra: &[&str]) -> (Server, u16) {
    let mut args = vec!["--tls-port".to_string(), "0".to_string()];
    args.extend(tls_args(&ca.cert, server));
    args.extend(extra.iter().map(|s| s.to_string()));
    let s = Server::start(ServerOpts {
        args,
        ..Default::default()
    });
    let port = tls_port(&s);
    (s, port)
}

fn job_id(r: &Reply) -> String {
    match r {
        Reply::Status(id) => id.clone(),
        other => panic!("ADDJOB failed: {other:?}"),
    }
}

#[test]
fn rust_client_over_tls_adds_gets_and_acks_jobs() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let (s, port) = tls_node(&ca, &ca.issue("node"), &[]);
    let mut c = TlsClient::connect(port, &ca.cert, Some(&ca.issue("client"))).unwrap();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    let id = job_id(&c.cmd(&["ADDJOB", "q", "secret body", "0"]));
    let r = c.cmd(&["GETJOB", "TIMEOUT", "1000", "FROM", "q"]);
    let job = &r.array()[0];
    assert_eq!(job.array()[1].text(), id);
    assert_eq!(job.array()[2].text(), "secret body");
    assert_eq!(c.cmd(&["ACKJOB", &id]), Reply::Int(1));
    assert!(c.cmd(&["SHOW", &id]).is_nil());
    // The plain port serves the same node.
    let mut p = s.client();
    assert_eq!(p.cmd(&["QLEN", "q"]).int(), 0);
    assert_eq!(
        p.cmd(&["CONFIG", "GET", "tls-port"]).array()[1].text(),
        port.to_string()
    );
    // Blocking GETJOB over TLS is woken by a plain-text producer.
    c.tls_send(&["GETJOB", "TIMEOUT", "5000", "FROM", "wake"]);
    let id = job_id(&p.cmd(&["ADDJOB", "wake", "x", "0"]));
    let r = c.read_reply().unwrap();
    assert_eq!(r.array()[0].array()[1].text(), id);
}

#[test]
fn client_certificates_required_optional_or_not() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let other = Ca::new(&d.0.join("other"), "other-ca");
    let node = ca.issue("node");
    let good = ca.issue("client");
    let foreign = other.issue("intruder");
    // Default: tls-auth-clients yes.
    let (s, port) = tls_node(&ca, &node, &[]);
    let refused = |cert: Option<&Pair>| match TlsClient::connect(port, &ca.cert, cert) {
        // TLS 1.3: the server's verdict arrives after the client finished.
        Ok(mut c) => c.try_cmd(&["PING"]).is_err(),
        Err(_) => true,
    };
    assert!(refused(None), "a client without a certificate was served");
    assert!(
        refused(Some(&foreign)),
        "a certificate from another CA was accepted"
    );
    assert!(!refused(Some(&good)));
    assert!(wait_until(WAIT, POLL, || s
        .output()
        .contains("TLS handshake with a client failed")));
    // optional: no certificate is fine, a bad one is not.
    let (_s2, port2) = tls_node(&ca, &node, &["--tls-auth-clients", "optional"]);
    let mut c = TlsClient::connect(port2, &ca.cert, None).unwrap();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    let bad =
        TlsClient::connect(port2, &ca.cert, Some(&foreign)).and_then(|mut c| c.try_cmd(&["PING"]));
    assert!(bad.is_err(), "{bad:?}");
    // The CA may come from a directory (tls-ca-cert-dir) instead.
    let ca_dir = d.0.join("ca-dir");
    std::fs::create_dir_all(&ca_dir).unwrap();
    std::fs::copy(&ca.cert, ca_dir.join("ca.pem")).unwrap();
    std::fs::write(ca_dir.join("README"), "not a certificate").unwrap();
    let s4 = Server::start(ServerOpts::with_args(&[
        "--tls-port",
        "0",
        "--tls-cert-file",
        node.cert.to_str().unwrap(),
        "--tls-key-file",
        node.key.to_str().unwrap(),
        "--tls-ca-cert-dir",
        ca_dir.to_str().unwrap(),
    ]));
    let port4 = tls_port(&s4);
    let mut c = TlsClient::connect(port4, &ca.cert, Some(&good)).unwrap();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
    let bad =
        TlsClient::connect(port4, &ca.cert, Some(&foreign)).and_then(|mut c| c.try_cmd(&["PING"]));
    assert!(bad.is_err(), "{bad:?}");
    // no: nothing is asked.
    let (_s3, port3) = tls_node(&ca, &node, &["--tls-auth-clients", "no"]);
    let mut c = TlsClient::connect(port3, &ca.cert, None).unwrap();
    assert_eq!(c.cmd(&["PING"]), Reply::Status("PONG".into()));
}

#[test]
fn protocols_and_cipher_suites_are_enforced() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let node = ca.issue("node");
    let (_s, port) = tls_node(
        &ca,
        &node,
        &["--tls-auth-clients", "no", "--tls-protocols", "TLSv1.2"],
    );
    let c = TlsClient::connect(port, &ca.cert, None).unwrap();
    assert_eq!(c.negotiated().0, "Some(TLSv1_2)");
    let (s, port) = tls_node(
        &ca,
        &node,
        &[
            "--tls-auth-clients",
            "no",
            "--tls-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256",
        ],
    );
    let mut c = TlsClient::connect(port, &ca.cert, None).unwrap();
    assert_eq!(
        c.negotiated(),
        (
            "Some(TLSv1_3)".into(),
            "Some(TLS13_CHACHA20_POLY1305_SHA256)".into()
        )
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "tls-ciphersuites"]).array()[1].text(),
        "TLS_CHACHA20_POLY1305_SHA256"
    );
    // Changed at run time for new connections.
    let r = s.client().cmd(&[
        "CONFIG",
        "SET",
        "tls-ciphersuites",
        "TLS_AES_128_GCM_SHA256",
    ]);
    assert_eq!(r, Reply::Status("OK".into()));
    let c = TlsClient::connect(port, &ca.cert, None).unwrap();
    assert_eq!(c.negotiated().1, "Some(TLS13_AES_128_GCM_SHA256)");
    let r = s
        .client()
        .cmd(&["CONFIG", "SET", "tls-ciphersuites", "TLS_NOPE"]);
    assert!(matches!(r, Reply::Error(_)), "{r:?}");
}

#[test]
fn the_client_checks_the_server_certificate() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let other = Ca::new(&d.0.join("other"), "other-ca");
    let (_s, port) = tls_node(&ca, &ca.issue("node"), &["--tls-auth-clients", "no"]);
    assert!(TlsClient::connect(port, &other.cert, None).is_err());
}

/// Read until EOF, error or `limit`; what the peer sent.
fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn plain_text_on_the_tls_port_and_tls_on_the_plain_port_fail_cleanly() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let client = ca.issue("client");
    let (s, port) = tls_node(&ca, &ca.issue("node"), &[]);
    let mut tls_before = TlsClient::connect(port, &ca.cert, Some(&client)).unwrap();
    let mut plain_before = s.client();
    // RESP on the TLS port: the handshake fails and the connection closes;
    // no reply ever comes back in plain text.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let got = read_all(&mut raw);
    assert!(!String::from_utf8_lossy(&got).contains("PONG"), "{got:?}");
    // A TLS client on the plain port fails its handshake (bounded by the
    // client's timeout) without a RESP reply being taken for TLS.
    let r = TlsClient::connect(s.port(), &ca.cert, Some(&client));
    assert!(r.is_err(), "TLS handshake succeeded on the plain port");
    // Everybody else is unaffected.
    assert_eq!(tls_before.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert_eq!(plain_before.cmd(&["PING"]), Reply::Status("PONG".into()));
    let mut tls_after = TlsClient::connect(port, &ca.cert, Some(&client)).unwrap();
    assert_eq!(tls_after.cmd(&["PING"]), Reply::Status("PONG".into()));
}

#[test]
fn tls_only_serves_no_plain_text() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let (s, port) = tls_node(&ca, &ca.issue("node"), &["--tls-only", "yes"]);
    assert_eq!(s.port(), 0, "the ready line reports port=0 when TLS only");
    // The bus sits beside the TLS port, as in Redis's TLS-only setup.
    assert_eq!(s.bus_port(), port + 10000);
    let mut c = TlsClient::connect(port, &ca.cert, Some(&ca.issue("client"))).unwrap();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "tls-only"]).array()[1].text(),
        "yes"
    );
    // HELLO advertises the TLS port as this node's client port.
    let hello = c.cmd(&["HELLO"]);
    assert_eq!(hello.array()[2].array()[2].text(), port.to_string());
}

#[test]
fn bad_tls_files_refuse_to_start() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let node = ca.issue("node");
    let missing = d.0.join("missing.key");
    let ex = Server::run_to_exit(
        ServerOpts::with_args(&[
            "--tls-port",
            "0",
            "--tls-cert-file",
            node.cert.to_str().unwrap(),
            "--tls-key-file",
            missing.to_str().unwrap(),
            "--tls-ca-cert-file",
            ca.cert.to_str().unwrap(),
        ]),
        Duration::from_secs(10),
    );
    assert!(!ex.status.success());
    assert!(ex.output.contains("missing.key"), "{}", ex.output);
    // tls-auth-clients yes without a CA cannot verify anybody.
    let ex = Server::run_to_exit(
        ServerOpts::with_args(&[
            "--tls-port",
            "0",
            "--tls-cert-file",
            node.cert.to_str().unwrap(),
            "--tls-key-file",
            node.key.to_str().unwrap(),
        ]),
        Duration::from_secs(10),
    );
    assert!(!ex.status.success());
    assert!(ex.output.contains("tls-ca-cert-file"), "{}", ex.output);
}

#[test]
fn certificates_reload_with_config_set() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let next = Ca::new(&d.0.join("next"), "next-ca");
    // One CA file trusted for client certificates holds both CAs.
    let both = d.0.join("both.crt");
    let mut pem = std::fs::read(&ca.cert).unwrap();
    pem.extend(std::fs::read(&next.cert).unwrap());
    std::fs::write(&both, pem).unwrap();
    let node = ca.issue("node");
    let client = ca.issue("client");
    let mut args = vec!["--tls-port".to_string(), "0".to_string()];
    args.extend(tls_args(&both, &node));
    let s = Server::start(ServerOpts {
        args,
        ..Default::default()
    });
    let port = tls_port(&s);
    let mut before = TlsClient::connect(port, &ca.cert, Some(&client)).unwrap();
    assert!(TlsClient::connect(port, &next.cert, Some(&client)).is_err());
    // Rotate: new files at the same paths, then CONFIG SET re-reads them.
    let rotated = next.issue("node-2026");
    std::fs::copy(&rotated.cert, &node.cert).unwrap();
    std::fs::copy(&rotated.key, &node.key).unwrap();
    let mut admin = s.client();
    let r = admin.cmd(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        node.cert.to_str().unwrap(),
    ]);
    assert_eq!(r, Reply::Status("OK".into()));
    let mut after = TlsClient::connect(port, &next.cert, Some(&client)).unwrap();
    assert_eq!(after.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert!(TlsClient::connect(port, &ca.cert, Some(&client)).is_err());
    // Established sessions keep working.
    assert_eq!(before.cmd(&["PING"]), Reply::Status("PONG".into()));
    // A file that does not load changes nothing.
    let r = admin.cmd(&["CONFIG", "SET", "tls-key-file", "/nonexistent/key.pem"]);
    assert_eq!(
        r,
        Reply::Error("ERR Unable to update TLS configuration. Check server logs.".into())
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "tls-key-file"]).array()[1].text(),
        node.key.to_str().unwrap()
    );
    let mut again = TlsClient::connect(port, &next.cert, Some(&client)).unwrap();
    assert_eq!(again.cmd(&["PING"]), Reply::Status("PONG".into()));
    assert!(s.wait_output("TLS configuration reloaded", Duration::from_secs(10)));
}

/// AUTH over TLS with a client certificate, sent the two ways `redis-cli
/// --tls` sends it (`--user default --pass pw`: `AUTH default pw`; `-a pw`:
/// `AUTH pw`). `scripts/redis-cli-tls.sh` (run by `.ci/run`) repeats this
/// with redis-cli itself.
#[test]
fn auth_over_tls_with_a_client_certificate() {
    let d = TempDir::new("tls");
    let ca = Ca::new(&d.0, "ca");
    let client = ca.issue("client");
    let (_s, port) = tls_node(&ca, &ca.issue("node"), &["--requirepass", "pw"]);
    let connect = || TlsClient::connect(port, &ca.cert, Some(&client)).unwrap();
    let ok = Reply::Status("OK".into());
    let noauth = Reply::Error("NOAUTH Authentication required.".into());
    let mut c = connect();
    assert_eq!(c.cmd(&["AUTH", "default", "pw"]), ok);
    let id = job_id(&c.cmd(&["ADDJOB", "q", "over tls", "0"]));
    let mut c = connect();
    assert_eq!(c.cmd(&["AUTH", "pw"]), ok);
    let r = c.cmd(&["GETJOB", "FROM", "q"]);
    let job = r.array()[0].array();
    let fields: Vec<String> = job.iter().map(|f| f.text()).collect();
    assert_eq!(fields, ["q", id.as_str(), "over tls"]);
    let mut c = connect();
    assert_eq!(c.cmd(&["AUTH", "default", "pw"]), ok);
    assert_eq!(c.cmd(&["ACKJOB", &id]), Reply::Int(1));
    // A wrong user or password is refused, and the session stays
    // unauthenticated.
    let mut c = connect();
    assert_eq!(
        c.cmd(&["AUTH", "alice", "pw"]),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(c.cmd(&["PING"]), noauth);
    assert!(matches!(c.cmd(&["AUTH", "wrong"]), Reply::Error(_)));
    assert_eq!(c.cmd(&["ADDJOB", "q", "x", "0"]), noauth);
    // A valid certificate is not a password.
    let mut c = connect();
    assert_eq!(c.cmd(&["PING"]), noauth);
    assert_eq!(c.cmd(&["QLEN", "q"]), noauth);
}
