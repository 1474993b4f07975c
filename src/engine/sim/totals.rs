//! Node totals for the dashboard's cluster view (engine::qlen_cluster):
//! every linked peer's totals arrive, a crashed peer is reported unknown
//! once the QLEN CLUSTER wait is over, and a peer answering the short
//! QLENREP form (one that predates totals) is unknown rather than zero.

use bytes::Bytes;

use super::{Faults, Sim};
use crate::domain::job::NodeIdx;
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::qlen_cluster::{PeerTotals, MAX_WAIT_MS};
use crate::protocol::bus::message::NodeTotals;

fn add(sim: &mut Sim, node: usize, queue: &'static [u8], n: usize) {
    for _ in 0..n {
        let client = sim.client();
        let now = sim.now;
        let Some(e) = sim.nodes[node].as_mut() else {
            return;
        };
        let req = AddJobRequest {
            replicate: Some(1),
            ..AddJobRequest::new(Bytes::from_static(queue), Bytes::from_static(b"b"))
        };
        let out = e.addjob(client, req, now);
        assert!(
            matches!(out, AddJobOutcome::Added(_)),
            "ADDJOB REPLICATE 1 is accepted at once"
        );
        sim.flush(node);
    }
}

/// Node 0's index for sim node `i`.
fn idx(sim: &Sim, i: usize) -> NodeIdx {
    sim.nodes[0]
        .as_ref()
        .and_then(|e| e.cluster().find(&sim.ids[i]))
        .expect("node 0 knows the node")
}

/// Step until node 0 answers request `req` (at most `ms` of simulated time).
fn wait(sim: &mut Sim, req: u32, ms: u64) -> Option<PeerTotals> {
    for _ in 0..ms / super::net::STEP {
        if let Some(v) = sim.totals_of(0, req) {
            return Some(v);
        }
        sim.step();
    }
    sim.totals_of(0, req)
}

/// Ask node 0 for the cluster's totals: the request number.
fn ask(sim: &mut Sim) -> u32 {
    let now = sim.now;
    let req = sim.nodes[0]
        .as_mut()
        .expect("node 0 up")
        .cluster_totals(now);
    sim.flush(0);
    req
}

fn of(v: &PeerTotals, i: NodeIdx) -> Option<NodeTotals> {
    v.iter().find(|(n, _)| *n == i).and_then(|(_, t)| *t)
}

#[test]
fn sim_node_totals_reach_the_asker_and_missing_peers_are_unknown() {
    let mut sim = Sim::new(3, 7, Faults::calm());
    sim.join_all();
    add(&mut sim, 0, b"a", 1);
    add(&mut sim, 1, b"b", 2);
    add(&mut sim, 1, b"b2", 1);
    add(&mut sim, 2, b"c", 4);
    let (n1, n2) = (idx(&sim, 1), idx(&sim, 2));

    let req = ask(&mut sim);
    let v = wait(&mut sim, req, MAX_WAIT_MS).expect("answered");
    let t = |queued, queues| NodeTotals {
        queued,
        jobs: queued,
        queues,
        blocked: 0,
    };
    assert_eq!(of(&v, n1), Some(t(3, 2)), "{v:?}");
    assert_eq!(of(&v, n2), Some(t(4, 1)), "{v:?}");
    let local = sim.nodes[0].as_ref().map(|e| e.node_totals());
    assert_eq!(local, Some(t(1, 1)));

    // Node 1 answers with the short QLENREP (a node that predates totals).
    let req = ask(&mut sim);
    let now = sim.now;
    if let Some(e) = sim.nodes[0].as_mut() {
        let req = e.counts.next_req;
        e.on_qlen_rep(n1, req, 9, now);
    }
    let v = wait(&mut sim, req, MAX_WAIT_MS).expect("answered");
    assert_eq!(of(&v, n1), None, "{v:?}");
    assert_eq!(of(&v, n2), Some(t(4, 1)), "{v:?}");

    // A crashed node: unknown once the wait is over, never zero.
    sim.crash(2);
    let req = ask(&mut sim);
    let v = wait(&mut sim, req, MAX_WAIT_MS + 100).expect("answered in time");
    assert_eq!(of(&v, n1), Some(t(3, 2)), "{v:?}");
    assert_eq!(of(&v, n2), None, "{v:?}");
}
