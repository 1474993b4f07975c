//! Simulation scenario for QLIMIT: a rate limit set on one node reaches
//! the others over a lossy bus, and from then on the deliveries of the
//! whole cluster (blocked consumers woken by the tick and NOHANG polls on
//! every node, a partition in the middle, jobs moving between nodes by
//! federation) never exceed the limit in any window of its length, while
//! the limit is still used. Seeds are printed on failure.

use bytes::Bytes;

use super::delivery::{add, poll, run_seeds, take};
use super::{Faults, Sim};
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::engine::{ClientId, Wake};

const RATE: u32 = 20;
const WINDOW: u64 = 1000;

fn limit_scenario(seed: u64) {
    let n = 3;
    let mut sim = Sim::new(n, seed, Faults::lossy());
    sim.join_all();
    let now = sim.now;
    if let Some(e) = sim.nodes[0].as_mut() {
        e.set_limit(Bytes::from_static(b"q"), RATE, WINDOW, 0, now);
    }
    sim.flush(0);
    // Propagation (and the periodic re-send if the message was lost).
    let mut all = false;
    for _ in 0..2000 {
        sim.step();
        all = sim
            .nodes
            .iter()
            .flatten()
            .all(|e| e.limit_of(b"q").is_some());
        if all {
            break;
        }
    }
    assert!(all, "seed {seed}: the limit did not reach every node");
    let mut pending = Vec::new();
    let mut delivered: Vec<u64> = Vec::new();
    let mut blocked: Vec<(ClientId, usize)> = Vec::new();
    let start = sim.now;
    for t in 0..1500u64 {
        if t % 2 == 0 {
            let node = (t as usize / 2) % n;
            add(&mut sim, node, b"q", None, 1, &mut pending);
        }
        poll(&mut sim, &mut pending);
        if t % 3 == 0 {
            let node = (t as usize / 3) % n;
            let got = take(&mut sim, node, b"q");
            delivered.extend(got.iter().map(|_| sim.now));
        }
        // Keep two blocked consumers per node.
        for node in 0..n {
            if blocked.iter().filter(|b| b.1 == node).count() < 2 {
                let client = sim.client();
                let now = sim.now;
                let Some(e) = sim.nodes[node].as_mut() else {
                    continue;
                };
                let req = GetJobRequest {
                    nohang: false,
                    timeout: 0,
                    count: 1,
                    withcounters: false,
                    queues: vec![Bytes::from_static(b"q")],
                };
                match e.getjob(client, req, now) {
                    GetJobOutcome::Jobs(j) => delivered.extend(j.iter().map(|_| now)),
                    GetJobOutcome::Blocked => {
                        sim.blocked_on(client, node);
                        blocked.push((client, node));
                    }
                    _ => {}
                }
                sim.flush(node);
            }
        }
        match t {
            500 => {
                sim.cut.insert((0, 1));
                sim.cut.insert((0, 2));
            }
            900 => sim.cut.clear(),
            _ => {}
        }
        sim.step();
        // Blocked consumers are woken during the step, at its `now`.
        let now = sim.now;
        blocked.retain(|&(c, _)| match sim.answer(c) {
            Some(Some(Wake::Jobs(j))) => {
                delivered.extend(j.iter().map(|_| now));
                false
            }
            Some(_) => false,
            None => true,
        });
    }
    let end = sim.now;
    delivered.sort_unstable();
    let span = WINDOW;
    for (i, &t) in delivered.iter().enumerate() {
        let within = delivered[i..].iter().take_while(|&&u| u < t + span).count();
        assert!(
            within <= RATE as usize,
            "seed {seed}: {within} deliveries in the window starting at {t} (limit {RATE})"
        );
    }
    // The limit is used, not just respected: the partition costs node 0's
    // consumers nothing (its share stays) but jobs do not move across it.
    let secs = (end - start) / WINDOW;
    assert!(
        delivered.len() as u64 >= secs * u64::from(RATE) * 6 / 10,
        "seed {seed}: only {} deliveries in {secs} s at {RATE}/s",
        delivered.len()
    );
}

#[test]
fn sim_rate_limit_holds_cluster_wide_in_every_window() {
    run_seeds("rate-limit simulation", limit_scenario);
}
