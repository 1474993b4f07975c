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
