//! The Redis 6 handshake (`HELLO 2|3 [AUTH user pass] [SETNAME name]`) and
//! RESP3 reply types: nulls become `_`, SHOW/QSTAT become maps, the rest
//! keeps its RESP2 shape.

use crate::harness::{Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, assert_bytes};

fn hello3(c: &mut Client) -> Reply {
    let r = c.cmd(&["HELLO", "3"]);
    assert!(matches!(r, Reply::Map(_)), "HELLO 3 is not a map: {r:?}");
    r
}

#[test]
fn hello_3_returns_a_map_and_switches_protocol() {
    let s = Server::start_default();
    let mut c = s.client();
    let raw = c.cmd_raw(&["HELLO", "3"]);
    assert!(raw.starts_with(b"%"), "{}", String::from_utf8_lossy(&raw));
    let r = crate::harness::decode(&raw).unwrap().unwrap().0;
    assert_eq!(r.field("server").text(), "disque");
    assert_eq!(r.field("version").text(), "1.0-rc1");
    assert_eq!(r.field("proto"), &Reply::Int(3));
    r.field("id").int();
    r.field("mode").text();
    r.field("role").text();
    assert_eq!(r.field("modules"), &Reply::Array(vec![]));

    // Nulls are `_` now.
    assert_bytes(
        &c.cmd_raw(&["SHOW", "D-00000000-000000000000000000000000-0001"]),
        b"_\r\n",
    );
    assert_bytes(&c.cmd_raw(&["GETJOB", "NOHANG", "FROM", "q"]), b"_\r\n");
    assert_bytes(&c.cmd_raw(&["QSTAT", "nope"]), b"_\r\n");
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"_\r\n");
    // Unchanged shapes.
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "q"]), b":0\r\n");
    let raw = c.cmd_raw(&["ADDJOB", "q", "body", "0"]);
    assert!(raw.starts_with(b"+D-"));
    let id = String::from_utf8_lossy(&raw[1..41]).into_owned();
    let raw = c.cmd_raw(&["QPEEK", "q", "1"]);
    assert_bytes(
        &raw,
        format!("*1\r\n*3\r\n$1\r\nq\r\n$40\r\n{id}\r\n$4\r\nbody\r\n").as_bytes(),
    );

    // SHOW and QSTAT are maps with the same keys in the same order.
    let raw = c.cmd_raw(&["SHOW", &id]);
    assert!(
        raw.starts_with(b"%15\r\n$2\r\nid\r\n"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    let show = crate::harness::decode(&raw).unwrap().unwrap().0;
    assert_eq!(show.field("body").text(), "body");
    assert_eq!(show.field("state").text(), "queued");
    assert_eq!(show.field("nodes-confirmed"), &Reply::Array(vec![]));
    let raw = c.cmd_raw(&["QSTAT", "q"]);
    assert!(
        raw.starts_with(b"%10\r\n$4\r\nname\r\n$1\r\nq\r\n"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    // JSCAN REPLY ALL elements are maps too.
    let r = c.cmd(&["JSCAN", "REPLY", "ALL"]);
    let items = r.array()[1].array();
    assert!(matches!(items[0], Reply::Map(_)), "{r:?}");
    assert_eq!(items[0].field("id").text(), id);

    // Back to RESP2.
    let r = c.cmd(&["HELLO", "2"]);
    assert!(matches!(r, Reply::Array(ref a) if a.len() == 14), "{r:?}");
    assert_eq!(r.field("proto"), &Reply::Int(2));
    assert_bytes(&c.cmd_raw(&["QSTAT", "nope"]), b"*-1\r\n");
    assert_bytes(
        &c.cmd_raw(&["SHOW", "D-00000000-000000000000000000000000-0001"]),
        b"$-1\r\n",
    );
    assert!(c.cmd_raw(&["SHOW", &id]).starts_with(b"*30\r\n"));
}

#[test]
fn hello_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["HELLO", "4"]),
        b"-NOPROTO unsupported protocol version\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["HELLO", "x"]),
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["HELLO", "3", "FOO"]),
        b"-ERR Syntax error in HELLO option 'FOO'\r\n",
    );
    // Still RESP2 after the failures.
    assert_bytes(&c.cmd_raw(&["QSTAT", "nope"]), b"*-1\r\n");
}

#[test]
fn hello_3_setname() {
    let s = Server::start_default();
    let mut c = s.client();
    let r = c.cmd(&["HELLO", "3", "SETNAME", "lib-client"]);
    assert!(matches!(r, Reply::Map(_)));
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"$10\r\nlib-client\r\n");
}

#[test]
fn hello_3_auth_with_requirepass() {
    let s = Server::start(ServerOpts::with_args(&["--requirepass", "pw"]));
    let mut c = s.client();
    let r = c.cmd(&["HELLO", "3"]);
    assert!(
        matches!(&r, Reply::Error(e) if e.starts_with("NOAUTH")),
        "{r:?}"
    );
    assert_bytes(
        &c.cmd_raw(&["HELLO", "3", "AUTH", "default", "bad"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["PING"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    let r = c.cmd(&["HELLO", "3", "AUTH", "default", "pw"]);
    assert_eq!(r.field("proto"), &Reply::Int(3));
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_bytes(&c.cmd_raw(&["QSTAT", "nope"]), b"_\r\n");
    // Plain AUTH then HELLO 3 also works.
    let mut d = s.client();
    assert_bytes(&d.cmd_raw(&["AUTH", "pw"]), b"+OK\r\n");
    hello3(&mut d);
    // Bare Disque HELLO after auth is the node list.
    let r = d.cmd(&["HELLO"]);
    assert_eq!(r.array()[0], Reply::Int(1));
}

#[test]
fn resp3_blocked_getjob_timeout_is_null() {
    let s = Server::start_default();
    let mut c = s.client();
    hello3(&mut c);
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "50", "FROM", "q"]),
        b"_\r\n",
    );
    addjob(&mut c, "q", "b", &[]);
    let r = c.cmd(&["GETJOB", "WITHCOUNTERS", "FROM", "q"]);
    let j = r.array()[0].array();
    assert_eq!(j.len(), 7);
    assert_eq!(j[4], Reply::Int(0));
}
