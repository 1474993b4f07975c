//! ACL users (docs/SECURITY.md#users-and-permissions): per-command and
//! per-queue permissions, ACL LOG, users across the cluster and across
//! restarts, the DEBUG / protected CONFIG SET gates and HTTP basic auth.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, assert_bytes, POLL, WAIT};

const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const NOPERM_KEY: &[u8] = b"-NOPERM No permissions to access a key\r\n";

fn noperm(cmd: &str) -> Vec<u8> {
    format!("-NOPERM this user has no permissions to run the '{cmd}' command\r\n").into_bytes()
}

fn ok(r: Reply) {
    assert_eq!(r, Reply::Status("OK".into()));
}

fn login(s: &Server, user: &str, pw: &str) -> Client {
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["AUTH", user, pw]), b"+OK\r\n");
    c
}

#[test]
fn producer_cannot_getjob_and_denials_are_logged() {
    let s = Server::start_default();
    let mut admin = s.client();
    ok(admin.cmd(&[
        "ACL",
        "SETUSER",
        "producer",
        "on",
        ">p",
        "~*",
        "+@produce",
        "+acl|whoami",
    ]));
    let mut p = login(&s, "producer", "p");
    assert_eq!(p.cmd(&["ACL", "WHOAMI"]).text(), "producer");
    let id = addjob(&mut p, "q", "body", &[]);
    assert_bytes(&p.cmd_raw(&["GETJOB", "FROM", "q"]), &noperm("getjob"));
    assert_bytes(&p.cmd_raw(&["ACKJOB", &id]), &noperm("ackjob"));
    assert_bytes(
        &p.cmd_raw(&["CONFIG", "SET", "maxmemory", "1"]),
        &noperm("config|set"),
    );
    // Still queued: the refused GETJOB did nothing.
    assert_eq!(admin.cmd(&["QLEN", "q"]).int(), 1);
    let log = admin.cmd(&["ACL", "LOG"]);
    let entries = log.array();
    assert_eq!(entries.len(), 3, "{log:?}");
    let newest = &entries[0];
    assert_eq!(newest.field("reason").text(), "command");
    assert_eq!(newest.field("object").text(), "config|set");
    assert_eq!(newest.field("username").text(), "producer");
    assert_eq!(newest.field("context").text(), "toplevel");
    assert!(newest.field("client-info").text().contains("user=producer"));
    for f in [
        "count",
        "age-seconds",
        "entry-id",
        "timestamp-created",
        "timestamp-last-updated",
    ] {
        let _ = newest.field(f);
    }
    // A repeat bumps the count instead of adding an entry.
    assert_bytes(&p.cmd_raw(&["GETJOB", "FROM", "q"]), &noperm("getjob"));
    let log = admin.cmd(&["ACL", "LOG"]);
    assert_eq!(log.array().len(), 3);
    let getjob = log
        .array()
        .iter()
        .find(|e| e.field("object").text() == "getjob")
        .expect("getjob entry");
    assert_eq!(getjob.field("count").int(), 2);
    // A failed AUTH is logged too.
    let mut x = s.client();
    assert_bytes(&x.cmd_raw(&["AUTH", "producer", "nope"]), WRONGPASS);
    let log = admin.cmd(&["ACL", "LOG", "1"]);
    assert_eq!(log.array()[0].field("reason").text(), "auth");
    ok(admin.cmd(&["ACL", "LOG", "RESET"]));
    assert!(admin.cmd(&["ACL", "LOG"]).array().is_empty());
    // HELLO AUTH as a user; a disabled user cannot log in.
    let mut h = s.client();
    let r = h.cmd(&["HELLO", "2", "AUTH", "producer", "p"]);
    assert_eq!(r.field("server").text(), "disque");
    assert_eq!(h.cmd(&["ACL", "WHOAMI"]).text(), "producer");
    ok(admin.cmd(&["ACL", "SETUSER", "producer", "off"]));
    assert_bytes(&s.client().cmd_raw(&["AUTH", "producer", "p"]), WRONGPASS);
}

#[test]
fn worker_limited_to_a_queue_pattern() {
    let s = Server::start_default();
    let mut admin = s.client();
    ok(admin.cmd(&[
        "ACL",
        "SETUSER",
        "worker",
        "on",
        ">w",
        "~emails:*",
        "+@consume",
    ]));
    let order = addjob(&mut admin, "orders", "o", &[]);
    let email = addjob(&mut admin, "emails:welcome", "e", &[]);
    let mut w = login(&s, "worker", "w");
    // One forbidden queue among several refuses the whole GETJOB.
    assert_bytes(
        &w.cmd_raw(&["GETJOB", "NOHANG", "FROM", "emails:welcome", "orders"]),
        NOPERM_KEY,
    );
    assert_bytes(
        &w.cmd_raw(&["GETJOB", "NOHANG", "FROM", "orders"]),
        NOPERM_KEY,
    );
    // ACKJOB of an orders job is checked against the job's queue.
    assert_bytes(&w.cmd_raw(&["ACKJOB", &order]), NOPERM_KEY);
    assert_bytes(&w.cmd_raw(&["ACKJOB", &email, &order]), NOPERM_KEY);
    assert_eq!(admin.cmd(&["QLEN", "orders"]).int(), 1);
    let got = w.cmd(&["GETJOB", "NOHANG", "FROM", "emails:welcome"]);
    assert_eq!(got.array()[0].array()[1].text(), email);
    assert_eq!(w.cmd(&["ACKJOB", &email]).int(), 1);
    // An unknown job ID is not a permission error.
    let unknown = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1";
    assert!(w.cmd(&["FASTACK", unknown]).as_int().is_some());
    let log = admin.cmd(&["ACL", "LOG"]);
    let e = &log.array()[0];
    assert_eq!(e.field("reason").text(), "key");
    assert_eq!(e.field("object").text(), "orders");
    // ACL DRYRUN tells without running.
    assert_eq!(
        admin.cmd(&["ACL", "DRYRUN", "worker", "GETJOB", "FROM", "emails:x"]),
        Reply::Status("OK".into())
    );
    assert!(admin
        .cmd(&["ACL", "DRYRUN", "worker", "ADDJOB", "emails:x", "b", "0"])
        .text()
        .contains("'addjob'"));
}

#[test]
fn user_inspection_replies_follow_redis() {
    let s = Server::start_default();
    let mut c = s.client();
    let list = c.cmd(&["ACL", "LIST"]);
    assert_eq!(list.array()[0].text(), "user default on nopass ~* &* +@all");
    assert_bytes(
        &c.cmd_raw(&["ACL", "SETUSER", "alice", "on", "+nosuch"]),
        b"-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
    );
    assert!(
        c.cmd(&["ACL", "GETUSER", "alice"]).is_nil(),
        "SETUSER is atomic"
    );
    ok(c.cmd(&[
        "ACL",
        "SETUSER",
        "alice",
        "on",
        ">secret",
        "~orders:*",
        "+@produce",
        "+config|get",
    ]));
    let u = c.cmd(&["ACL", "GETUSER", "alice"]);
    assert_eq!(u.field("flags").array()[0].text(), "on");
    let hash = u.field("passwords").array()[0].text();
    assert_eq!(hash.len(), 64);
    assert_eq!(u.field("commands").text(), "-@all +@produce +config|get");
    assert_eq!(u.field("keys").text(), "~orders:*");
    assert_eq!(u.field("channels").text(), "");
    assert!(u.field("selectors").array().is_empty());
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        Reply::Array(vec![
            Reply::Bulk(b"alice".to_vec()),
            Reply::Bulk(b"default".to_vec())
        ])
    );
    let line = c.cmd(&["ACL", "LIST"]).array()[0].text();
    assert_eq!(
        line,
        format!("user alice on #{hash} ~orders:* resetchannels -@all +@produce +config|get")
    );
    let cats: Vec<String> = c
        .cmd(&["ACL", "CAT"])
        .array()
        .iter()
        .map(|r| r.text())
        .collect();
    for cat in [
        "produce",
        "consume",
        "admin",
        "introspection",
        "dangerous",
        "cluster",
        "read",
    ] {
        assert!(cats.contains(&cat.to_string()), "{cats:?}");
    }
    let produce: Vec<String> = c
        .cmd(&["ACL", "CAT", "produce"])
        .array()
        .iter()
        .map(|r| r.text())
        .collect();
    assert!(produce.contains(&"addjob".to_string()));
    assert_bytes(
        &c.cmd_raw(&["ACL", "CAT", "nope"]),
        b"-ERR Unknown category 'nope'\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["ACL", "DELUSER", "default"]),
        b"-ERR The 'default' user cannot be removed\r\n",
    );
    // `#<hash>` logs in with the password it hashes.
    ok(c.cmd(&["ACL", "SETUSER", "bob", "on", &format!("#{hash}"), "+ping"]));
    let mut b = login(&s, "bob", "secret");
    assert_eq!(b.cmd(&["PING"]), Reply::Status("PONG".into()));
    // Deleting a user closes its connections.
    assert_eq!(c.cmd(&["ACL", "DELUSER", "bob", "nobody"]).int(), 1);
    b.expect_closed();
    assert_bytes(&s.client().cmd_raw(&["AUTH", "bob", "secret"]), WRONGPASS);
    // requirepass is the default user's password.
    ok(c.cmd(&["CONFIG", "SET", "requirepass", "pw"]));
    let mut d = s.client();
    assert_bytes(
        &d.cmd_raw(&["PING"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    assert_bytes(&d.cmd_raw(&["AUTH", "default", "pw"]), b"+OK\r\n");
    assert_bytes(
        &s.client().cmd_raw(&["AUTH", "alice", "secret"]),
        b"+OK\r\n",
    );
}

#[test]
fn users_reach_the_other_nodes() {
    let nodes = crate::cluster::cluster(3);
    let mut a = nodes[0].client();
    ok(a.cmd(&["ACL", "SETUSER", "carol", "on", ">c", "~*", "+@consume"]));
    for s in &nodes[1..] {
        assert!(
            wait_until(WAIT, POLL, || s.client().cmd_raw(&["AUTH", "carol", "c"])
                == b"+OK\r\n"),
            "carol never reached node {}",
            s.port()
        );
        let mut c = login(s, "carol", "c");
        assert_bytes(&c.cmd_raw(&["ADDJOB", "q", "b", "0"]), &noperm("addjob"));
    }
    // A change made on another node wins everywhere (newer version).
    let mut b = nodes[1].client();
    ok(b.cmd(&["ACL", "SETUSER", "carol", "resetpass", ">c2"]));
    assert!(wait_until(WAIT, POLL, || nodes[2]
        .client()
        .cmd_raw(&["AUTH", "carol", "c2"])
        == b"+OK\r\n"));
    assert!(wait_until(WAIT, POLL, || nodes[0]
        .client()
        .cmd_raw(&["AUTH", "carol", "c"])
        == WRONGPASS));
    // Deletions travel too, and the default user stays each node's own.
    assert_eq!(a.cmd(&["ACL", "DELUSER", "carol"]).int(), 1);
    for s in &nodes[1..] {
        assert!(wait_until(WAIT, POLL, || s
            .client()
            .cmd(&["ACL", "GETUSER", "carol"])
            .is_nil()));
    }
    ok(a.cmd(&["ACL", "SETUSER", "default", "resetpass", ">only-here"]));
    // A later change as a barrier: every change sends the whole table, so
    // once erin has arrived a replicated default user would have too.
    let mut a2 = nodes[0].client();
    ok(a2.cmd(&["AUTH", "default", "only-here"]));
    ok(a2.cmd(&["ACL", "SETUSER", "erin", "on", ">e"]));
    assert!(wait_until(WAIT, POLL, || !nodes[2]
        .client()
        .cmd(&["ACL", "GETUSER", "erin"])
        .is_nil()));
    assert_eq!(
        nodes[2].client().cmd(&["PING"]),
        Reply::Status("PONG".into())
    );
}

#[test]
fn a_node_that_joins_later_learns_the_users() {
    let a = crate::cluster::node();
    let b = crate::cluster::node();
    ok(a.client()
        .cmd(&["ACL", "SETUSER", "dave", "on", ">d", "+ping"]));
    ok(a.client()
        .cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]));
    assert!(
        wait_until(WAIT, POLL, || b.client().cmd_raw(&["AUTH", "dave", "d"])
            == b"+OK\r\n"),
        "the joining node never learned the users"
    );
}

#[test]
fn users_survive_a_restart_with_and_without_an_aclfile() {
    let mut s = Server::start(ServerOpts::with_config("aclfile users.acl\n"));
    let mut c = s.client();
    ok(c.cmd(&["ACL", "SETUSER", "erin", "on", ">e", "~q", "+@produce"]));
    let text = std::fs::read_to_string(s.dir().join("users.acl")).unwrap();
    assert!(text.contains("user erin on #"), "{text}");
    assert!(
        text.contains("user default on nopass ~* &* +@all"),
        "{text}"
    );
    s.restart();
    let mut e = login(&s, "erin", "e");
    addjob(&mut e, "q", "b", &[]);
    // An operator's edit of the aclfile applies at the next start.
    let edited = std::fs::read_to_string(s.dir().join("users.acl"))
        .unwrap()
        .replace("user erin on", "user erin off");
    std::fs::write(s.dir().join("users.acl"), edited).unwrap();
    s.restart();
    assert_bytes(&s.client().cmd_raw(&["AUTH", "erin", "e"]), WRONGPASS);
    // ACL SAVE needs an aclfile.
    let mut t = Server::start_default();
    let mut c = t.client();
    assert!(c
        .cmd(&["ACL", "SAVE"])
        .text()
        .contains("not configured to use an ACL file"));
    ok(c.cmd(&["ACL", "SETUSER", "frank", "on", ">f", "+ping"]));
    assert!(t.dir().join("nodes.users").exists());
    t.restart();
    login(&t, "frank", "f");
}

#[test]
fn config_user_lines_and_bad_ones() {
    let s = Server::start(ServerOpts::with_config(
        "user grace on >g ~jobs:* +@consume\nuser default on nopass ~* &* +@all\n",
    ));
    let mut g = login(&s, "grace", "g");
    assert_bytes(&g.cmd_raw(&["QLEN", "jobs:a"]), &noperm("qlen"));
    let out = Server::run_to_exit(
        ServerOpts::with_config("user grace on +nosuch\n"),
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    assert!(
        out.output
            .contains("Unknown command or category name in ACL"),
        "{}",
        out.output
    );
}

/// A client whose source address is 127.0.0.2: on the loopback
/// interface, but not "local" for Redis's `islocalClient` (127.0.0.1, ::1
/// and Unix sockets only), so it plays a remote client on one machine.
fn remote_client(port: u16) -> Option<Client> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let from: SocketAddr = "127.0.0.2:0".parse().ok()?;
    sock.bind(&from.into()).ok()?;
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    sock.connect(&to.into()).ok()?;
    Some(Client::from_stream(TcpStream::from(sock)))
}

const DEBUG_REFUSED: &[u8] = b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";

#[test]
fn debug_and_protected_configs_are_local_only_by_default() {
    let s = Server::start_default();
    let Some(mut remote) = remote_client(s.port()) else {
        // No 127.0.0.2 here: `acl::protect`'s unit tests cover the decision.
        eprintln!("skipping: cannot bind 127.0.0.2");
        return;
    };
    assert_bytes(&remote.cmd_raw(&["DEBUG", "SLEEP", "0"]), DEBUG_REFUSED);
    assert_bytes(
        &remote.cmd_raw(&["CONFIG", "SET", "dir", "/tmp"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n",
    );
    // Other commands and CONFIG SET of unprotected parameters are served.
    assert_eq!(remote.cmd(&["PING"]), Reply::Status("PONG".into()));
    ok(remote.cmd(&["CONFIG", "SET", "timeout", "0"]));
    let mut local = s.client();
    ok(local.cmd(&["DEBUG", "SLEEP", "0"]));
    assert_eq!(
        local
            .cmd(&["CONFIG", "GET", "enable-debug-command"])
            .array()[1]
            .text(),
        "local"
    );

    let open = Server::start(ServerOpts::with_config(
        "enable-debug-command yes\nenable-protected-configs yes\n",
    ));
    let mut remote = remote_client(open.port()).expect("127.0.0.2 worked above");
    ok(remote.cmd(&["DEBUG", "SLEEP", "0"]));
    let closed = Server::start(ServerOpts::with_config("enable-debug-command no\n"));
    assert_bytes(
        &closed.client().cmd_raw(&["DEBUG", "SLEEP", "0"]),
        DEBUG_REFUSED,
    );
}

#[test]
fn http_basic_auth_with_a_read_only_user() {
    use crate::observe::http;
    use base64::Engine as _;
    let s = Server::start(ServerOpts::with_args(&[
        "--http-port",
        "auto",
        "--http-bind",
        "127.0.0.1",
        "--requirepass",
        "adm",
    ]));
    let mut c = login(&s, "default", "adm");
    ok(c.cmd(&[
        "ACL",
        "SETUSER",
        "viewer",
        "on",
        ">v",
        "~*",
        "+@introspection",
    ]));
    addjob(&mut c, "q", "b", &[]);
    let basic = |u: &str, p: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        )
    };
    let viewer = basic("viewer", "v");
    let admin = basic("default", "adm");
    let port = s.http_port();
    for path in [
        "/",
        "/metrics",
        "/api/overview",
        "/api/queues",
        "/api/cluster",
        "/api/queues/q/jobs",
    ] {
        let (st, body) = http(port, "GET", path, &[("Authorization", &viewer)], "");
        assert_eq!(st, 200, "{path}: {body}");
    }
    assert_eq!(
        http(
            port,
            "GET",
            "/api/overview",
            &[("Authorization", &basic("viewer", "x"))],
            ""
        )
        .0,
        401
    );
    let pause = r#"{"mode":"in"}"#;
    let action = |auth: &str| {
        http(
            port,
            "POST",
            "/api/queues/q/pause",
            &[
                ("Authorization", auth),
                ("Content-Type", "application/json"),
                ("X-Disque-Action", "1"),
            ],
            pause,
        )
    };
    let (st, body) = action(&viewer);
    assert_eq!(st, 403, "{body}");
    assert!(body.contains("NOPERM"), "{body}");
    assert_eq!(action(&admin).0, 200);
    // A user limited to other queues cannot read this one's jobs.
    ok(c.cmd(&[
        "ACL",
        "SETUSER",
        "other",
        "on",
        ">o",
        "~other:*",
        "+@introspection",
    ]));
    let (st, body) = http(
        port,
        "GET",
        "/api/queues/q/jobs",
        &[("Authorization", &basic("other", "o"))],
        "",
    );
    assert_eq!(st, 403, "{body}");
}
