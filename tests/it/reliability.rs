//! Reliability with real processes: synchronous replication that waits
//! for a peer killed just before ADDJOB and restarted within the job's
//! timeout (REPLJOB is sent again to the returning node, as in Disque).

use std::time::{Duration, Instant};

use crate::cluster::wait_full_mesh;
use crate::harness::{is_job_id, wait_until, Reply, ReplyExt, Server, ServerOpts};

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// Three nodes whose failure detector is slower than the restart below,
/// so the killed peer is never PFAIL while ADDJOB waits for it.
fn cluster3(node_timeout: &str) -> Vec<Server> {
    let nodes: Vec<Server> = (0..3)
        .map(|_| {
            Server::start(ServerOpts::with_args(&[
                "--cluster-node-timeout",
                node_timeout,
            ]))
        })
        .collect();
    let mut c0 = nodes[0].client();
    for s in &nodes[1..] {
        let r = c0.cmd(&["CLUSTER", "MEET", "127.0.0.1", &s.port().to_string()]);
        assert_eq!(r, Reply::Status("OK".into()));
    }
    wait_full_mesh(&nodes);
    nodes
}

/// Kill a peer, send ADDJOB REPLICATE 3 (the whole cluster) at once,
/// restart the peer 2 s later: the ADDJOB must answer with an ID, and the
/// restarted node must hold the job. Repeated, alternating the victim.
fn kill_addjob_restart(node_timeout: &str, rounds: usize) {
    let mut nodes = cluster3(node_timeout);
    for round in 0..rounds {
        let victim = 1 + round % 2;
        nodes[victim].kill9();
        let port0 = nodes[0].port();
        let adder = std::thread::spawn(move || {
            let mut c = crate::harness::Client::connect(port0);
            c.send(&[
                "ADDJOB",
                "rq",
                "body",
                "15000",
                "REPLICATE",
                "3",
                "RETRY",
                "30",
            ]);
            c.try_read_reply(Duration::from_secs(25))
        });
        // The scenario itself: the peer stays down for 2 s.
        let down = Instant::now();
        while down.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(50));
        }
        nodes[victim].restart();
        let reply = adder.join().expect("adder thread");
        let id = match reply {
            Some(Reply::Status(id)) if is_job_id(&id) => id,
            other => panic!(
                "round {round}: ADDJOB answered {other:?} instead of an ID; node 0 sees:\n{}",
                nodes[0].client().cmd(&["CLUSTER", "NODES"]).text()
            ),
        };
        let mut cv = nodes[victim].client();
        assert!(
            wait_until(WAIT, POLL, || !cv.cmd(&["SHOW", &id]).is_nil()),
            "round {round}: the restarted node never got {id}"
        );
        // The job was confirmed by every node before the ADDJOB answered.
        let mut c0 = nodes[0].client();
        let delivered = c0.cmd(&["SHOW", &id]).field("nodes-delivered").clone();
        assert_eq!(delivered.array().len(), 3, "round {round}: {delivered:?}");
        assert_eq!(c0.cmd(&["ACKJOB", &id]).int(), 1);
        wait_full_mesh(&nodes);
    }
}

#[test]
fn addjob_waits_for_a_killed_peer_that_restarts_before_the_node_timeout() {
    kill_addjob_restart("10000", 8);
}

/// The same with a node timeout shorter than the outage: the peer goes
/// PFAIL while ADDJOB waits, and its return clears that and gets REPLJOB.
#[test]
fn addjob_waits_for_a_killed_peer_that_restarts_after_being_marked_failing() {
    kill_addjob_restart("1000", 4);
}

/// ASYNC with a peer down: the copy it missed is made once it is back
/// (Disque sends ASYNC copies once and forgets them).
#[test]
fn an_async_copy_missed_by_a_killed_peer_is_made_when_it_restarts() {
    let mut nodes = cluster3("10000");
    nodes[2].kill9();
    let mut c0 = nodes[0].client();
    let r = c0.cmd(&["ADDJOB", "aq", "body", "0", "REPLICATE", "3", "ASYNC"]);
    let id = r.text();
    assert!(is_job_id(&id), "{r:?}");
    let mut c1 = nodes[1].client();
    assert!(wait_until(WAIT, POLL, || !c1.cmd(&["SHOW", &id]).is_nil()));
    // The missing copy is counted while its node is down.
    assert_eq!(c0.info_int("async_copies_pending"), 1);
    nodes[2].restart();
    let mut c2 = nodes[2].client();
    assert!(
        wait_until(WAIT, POLL, || !c2.cmd(&["SHOW", &id]).is_nil()),
        "the restarted node never got its copy of {id}"
    );
    assert!(wait_until(WAIT, POLL, || c0
        .info_int("async_copies_pending")
        == 0));
    // Still queued once, on the origin.
    assert_eq!(c0.cmd(&["QLEN", "aq"]).int(), 1);
    assert_eq!(c2.cmd(&["QLEN", "aq"]).int(), 0);
}

/// A bulk reply's bytes (empty for anything else).
fn bulk(r: &Reply) -> &[u8] {
    match r {
        Reply::Bulk(b) => b,
        _ => &[],
    }
}

/// A body made of every byte value, so a copy that mangles it shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Jobs of 1 MB and 16 MB replicated to three nodes, consumed and
/// acknowledged (the acknowledgement removes every copy); a body above
/// `job-max-body-size` is refused with a clear error.
#[test]
fn big_bodies_replicate_to_three_nodes_and_the_body_limit_holds() {
    let nodes = cluster3("3000");
    for s in &nodes {
        let r = s
            .client()
            .cmd(&["CONFIG", "SET", "job-max-body-size", "16mb"]);
        assert_eq!(r, Reply::Status("OK".into()));
    }
    let mut c0 = nodes[0].client();
    for size in [1 << 20, 16 << 20] {
        let body = pattern(size);
        let r = c0.cmd(&[
            b"ADDJOB".as_slice(),
            b"bq",
            &body,
            b"30000",
            b"REPLICATE",
            b"3",
        ]);
        let id = r.text();
        assert!(is_job_id(&id), "{size}: {r:?}");
        for s in &nodes[1..] {
            let mut c = s.client();
            let shown = c.cmd(&["SHOW", &id]);
            assert!(
                bulk(shown.field("body")) == &body[..],
                "{size}: body differs"
            );
        }
        let got = c0.cmd(&["GETJOB", "TIMEOUT", "5000", "FROM", "bq"]);
        let job = got.array()[0].array();
        assert_eq!(job[1].text(), id);
        assert!(bulk(&job[2]) == &body[..], "{size}: body differs");
        assert_eq!(c0.cmd(&["ACKJOB", &id]).int(), 1);
        for s in &nodes {
            let mut c = s.client();
            assert!(
                wait_until(WAIT, POLL, || c.cmd(&["SHOW", &id]).is_nil()),
                "{size}: {id} still on {}",
                s.port()
            );
        }
    }
    let over = vec![b'x'; (16 << 20) + 1];
    let r = c0.cmd(&[b"ADDJOB".as_slice(), b"bq", &over, b"0"]);
    assert_eq!(
        r,
        Reply::Error(
            "ERR job body too large (16777217 bytes, job-max-body-size is 16777216)".into()
        )
    );
    assert_eq!(
        c0.cmd(&["CONFIG", "GET", "job-max-body-size"]).array()[1].text(),
        "16777216"
    );
}

/// Big jobs, once acknowledged, leave no memory behind: in particular the
/// slow log keeps copies of the short arguments it shows, not slices that
/// would pin each request's whole buffer (body included).
#[test]
fn big_jobs_acknowledged_leave_no_memory_behind() {
    let nodes = cluster3("3000");
    let mut c = nodes[0].client();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        Reply::Status("OK".into())
    );
    let before = c.info_int("used_memory");
    let body = vec![b'b'; 4 << 20];
    for _ in 0..20 {
        let r = c.cmd(&[
            b"ADDJOB".as_slice(),
            b"mq",
            &body,
            b"10000",
            b"REPLICATE",
            b"3",
        ]);
        let id = r.text();
        assert!(is_job_id(&id), "{r:?}");
        let got = c.cmd(&["GETJOB", "FROM", "mq"]);
        assert_eq!(got.array()[0].array()[1].text(), id);
        assert_eq!(c.cmd(&["ACKJOB", &id]).int(), 1);
    }
    assert!(c.cmd(&["SLOWLOG", "LEN"]).int() >= 60);
    // The acknowledged jobs are collected everywhere...
    for s in &nodes {
        let mut cs = s.client();
        assert!(wait_until(WAIT, POLL, || cs.info_int("registered_jobs") == 0));
    }
    // ...and a few MB of buffers may stay (one request's worth), not 20 x 4 MB.
    let grown = c.info_int("used_memory") - before;
    assert!(grown < 24 << 20, "used_memory grew by {grown} bytes");
}
