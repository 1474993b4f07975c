//! `owner-thread yes`: the node's state on a thread of its own, the other
//! shell the rest of the suite runs on `no`. The paths that differ
//! between the two: batches handed over and back, blocked clients woken
//! from the owner, the AOF written at the end of a turn (`always` too),
//! bus batches and synchronous replication.

use std::time::Duration;

use crate::harness::{wait_until, Reply, ReplyExt, Server, ServerOpts};

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

fn owner_node(extra: &[&str]) -> Server {
    let mut args = vec!["--owner-thread", "yes", "--cluster-node-timeout", "2000"];
    args.extend_from_slice(extra);
    Server::start(ServerOpts::with_args(&args))
}

fn id_of(r: Reply) -> String {
    match r {
        Reply::Status(id) => id,
        other => panic!("ADDJOB failed: {other:?}"),
    }
}

#[test]
fn owner_thread_serves_the_job_cycle_and_blocked_consumers() {
    let s = owner_node(&[]);
    let mut c = s.client();
    let mut consumer = s.client();
    consumer.send(&["GETJOB", "TIMEOUT", "10000", "FROM", "oq"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    // Sent while the GETJOB waits: runs once it is answered.
    consumer.send(&["QLEN", "oq"]);
    let id = id_of(c.cmd(&["ADDJOB", "oq", "body", "0"]));
    let got = consumer.read_reply();
    assert_eq!(got.array()[0].array()[1].text(), id);
    assert_eq!(consumer.read_reply(), Reply::Int(0));
    assert_eq!(consumer.cmd(&["ACKJOB", &id]), Reply::Int(1));
    // Pipelined: one batch, replies in order.
    let mut req = Vec::new();
    for i in 0..50 {
        req.extend(crate::harness::encode_cmd(&[
            "ADDJOB",
            "oq",
            &i.to_string(),
            "0",
        ]));
    }
    c.send_raw(&req);
    for _ in 0..50 {
        assert!(matches!(c.read_reply(), Reply::Status(_)));
    }
    assert_eq!(c.cmd(&["QLEN", "oq"]), Reply::Int(50));
    // A GETJOB timeout is decided by the engine's tick on the owner.
    assert!(c
        .cmd(&["GETJOB", "TIMEOUT", "100", "FROM", "empty"])
        .is_nil());
}

#[test]
fn owner_thread_writes_the_aof_before_replying_and_reloads_it() {
    let mut s = owner_node(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.client();
    let ids: Vec<String> = (0..20)
        .map(|i| id_of(c.cmd(&["ADDJOB", "aq", &i.to_string(), "0"])))
        .collect();
    s.kill9();
    s.restart();
    let mut c = s.client();
    // Loaded jobs are active (queued again when their retry fires), so
    // look for each one rather than at QLEN.
    for id in ids {
        assert!(!c.cmd(&["SHOW", &id]).is_nil(), "{id} lost after kill -9");
    }
    assert!(c.info_int("registered_jobs") >= 20);
}

#[test]
fn owner_thread_nodes_replicate_synchronously() {
    let a = owner_node(&[]);
    let b = owner_node(&[]);
    let mut ca = a.client();
    let r = ca.cmd(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()]);
    assert_eq!(r, Reply::Status("OK".into()));
    assert!(wait_until(WAIT, POLL, || {
        ca.cmd(&["CLUSTER", "INFO"])
            .text()
            .contains("cluster_reachable_nodes:1")
    }));
    let id = id_of(ca.cmd(&["ADDJOB", "rq", "x", "5000", "REPLICATE", "2"]));
    let mut cb = b.client();
    assert!(wait_until(WAIT, POLL, || !cb.cmd(&["SHOW", &id]).is_nil()));
}
