//! Simulation scenarios for the job controls: CANCEL racing deliveries
//! under loss, duplication, a partition and a crash (once the network is
//! healed no cancelled job is queued or delivered again, and every copy is
//! collected), and PRIORITY across federation (a consumer on a node with
//! no jobs gets the highest level first). Seeds are printed on failure.

use std::collections::HashSet;

use bytes::Bytes;
use rand::Rng;

use super::delivery::{add, poll, run_seeds, take};
use super::{Faults, Sim};
use crate::domain::job::{JobId, JobState};
use crate::domain::job_ext::JobExt;
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};

fn cancel_scenario(seed: u64) {
    let n = 5;
    let mut sim = Sim::new(n, seed, Faults::lossy());
    sim.join_all();
    let crash_node = 1 + (seed as usize % (n - 1));
    let mut table = Vec::new();
    let mut pending = Vec::new();
    let mut accepted: Vec<JobId> = Vec::new();
    let mut cancelled: HashSet<JobId> = HashSet::new();
    for t in 0..1500u64 {
        if t % 3 == 0 {
            let node = (t as usize / 3) % n;
            accepted.extend(add(&mut sim, node, b"q", None, 3, &mut pending));
        }
        if t % 5 == 0 {
            // Deliver on one node and, half the time, cancel what was just
            // delivered from another node: the cancel races the copies
            // still queued or about to be re-queued elsewhere.
            let node = (t as usize / 5) % n;
            let got = take(&mut sim, node, b"q");
            let canceller = (node + 1 + (t as usize % (n - 1))) % n;
            if t % 10 == 0 && canceller != crash_node {
                let now = sim.now;
                if let Some(e) = sim.nodes[canceller].as_mut() {
                    e.cancel(&got, now);
                    cancelled.extend(got.iter().copied());
                }
                sim.flush(canceller);
            }
        }
        if t % 7 == 0 && !accepted.is_empty() && !cancelled.is_empty() || t % 7 == 3 {
            // Cancel a random accepted job (queued, delayed or running).
            let node = sim.rng.gen_range(0..n);
            if node != crash_node && !accepted.is_empty() {
                let id = accepted[sim.rng.gen_range(0..accepted.len())];
                let now = sim.now;
                if let Some(e) = sim.nodes[node].as_mut() {
                    e.cancel(&[id], now);
                    cancelled.insert(id);
                }
                sim.flush(node);
            }
        }
        sim.partition_then_crash(t, crash_node, &mut table);
        sim.step();
        accepted.extend(poll(&mut sim, &mut pending));
    }
    sim.faults.drop = 0.0;
    sim.faults.dup = 0.0;
    sim.run_for(20_000);
    // Healed: no live copy of a cancelled job anywhere.
    for (i, e) in sim.nodes.iter().enumerate() {
        let Some(e) = e else { continue };
        for (_, j) in e.store().iter_from(0) {
            assert!(
                !(cancelled.contains(&j.id) && j.state != JobState::Acked),
                "seed {seed}: node {i} holds cancelled {:?} as {}",
                j.id,
                j.state.name()
            );
        }
    }
    // Consumers everywhere: nothing cancelled is delivered.
    for t in 0..2000u64 {
        if t % 2 == 0 {
            let node = sim.rng.gen_range(0..n);
            for id in take(&mut sim, node, b"q") {
                assert!(
                    !cancelled.contains(&id),
                    "seed {seed}: cancelled {id:?} delivered on node {node}"
                );
                let now = sim.now;
                if let Some(e) = sim.nodes[node].as_mut() {
                    e.ackjob(&[id], now);
                }
                sim.flush(node);
            }
        }
        sim.step();
    }
    sim.run_for(60_000);
    for (i, e) in sim.nodes.iter().enumerate() {
        let Some(e) = e else { continue };
        let left: Vec<JobId> = e
            .store()
            .iter_from(0)
            .map(|(_, j)| j.id)
            .filter(|id| cancelled.contains(id))
            .collect();
        assert!(
            left.is_empty(),
            "seed {seed}: node {i} never collected {} cancelled jobs, e.g. {:?}",
            left.len(),
            left.first()
        );
    }
    assert!(
        cancelled.len() > 50 && accepted.len() > 200,
        "seed {seed}: workload too small ({} cancelled of {})",
        cancelled.len(),
        accepted.len()
    );
}

/// Node 0 holds a backlog of low jobs and one high job per round (REPLICATE
/// 1, so only federation can move them); a consumer blocked on another
/// node must get the high one first, under message delay and duplication
/// (loss would only delay the import: NEEDJOBS is asked again).
fn federated_priority_scenario(seed: u64) {
    let n = 3;
    let mut sim = Sim::new(n, seed, Faults::duplicating());
    sim.join_all();
    let mut pending = Vec::new();
    for round in 0..5 {
        let low = |p: u8| {
            Some(JobExt {
                priority: p,
                ..JobExt::default()
            })
        };
        for _ in 0..30 {
            add(
                &mut sim,
                0,
                b"fq",
                low(1 + (round % 3) as u8),
                1,
                &mut pending,
            );
        }
        let Some(top) = add(&mut sim, 0, b"fq", low(9), 1, &mut pending) else {
            panic!("seed {seed}: REPLICATE 1 ADDJOB did not reply at once");
        };
        let consumer = 1 + round % 2;
        let client = sim.client();
        let now = sim.now;
        let req = GetJobRequest {
            nohang: false,
            timeout: 10_000,
            count: 1,
            withcounters: false,
            queues: vec![Bytes::from_static(b"fq")],
        };
        let Some(e) = sim.nodes[consumer].as_mut() else {
            panic!("seed {seed}: node down");
        };
        let first = match e.getjob(client, req, now) {
            GetJobOutcome::Jobs(jobs) => jobs.first().map(|j| j.id),
            _ => None,
        };
        sim.flush(consumer);
        let first = match first {
            Some(id) => id,
            None => {
                sim.blocked_on(client, consumer);
                let mut got = None;
                for _ in 0..2000 {
                    sim.step();
                    if let Some(w) = sim.answer(client) {
                        got = match w {
                            Some(crate::engine::Wake::Jobs(jobs)) => jobs.first().map(|j| j.id),
                            _ => None,
                        };
                        break;
                    }
                }
                got.unwrap_or_else(|| panic!("seed {seed}: round {round}: no job imported"))
            }
        };
        assert_eq!(
            first, top,
            "seed {seed}: round {round}: node {consumer} served a lower level first"
        );
        // Acknowledge everything for the next round.
        let now = sim.now;
        if let Some(e) = sim.nodes[consumer].as_mut() {
            e.ackjob(&[first], now);
        }
        sim.flush(consumer);
        for _ in 0..3 {
            for node in 0..n {
                drain_and_ack(&mut sim, node);
            }
            sim.run_for(1000);
        }
        // Let the empty GETJOBs' asks (NEEDJOBS demand) expire: a node
        // still asking gets each job pushed as it is queued, in arrival
        // order, which is not what this round checks.
        sim.run_for(3000);
    }
}

fn drain_and_ack(sim: &mut Sim, node: usize) {
    loop {
        let ids = take(sim, node, b"fq");
        if ids.is_empty() {
            return;
        }
        let now = sim.now;
        if let Some(e) = sim.nodes[node].as_mut() {
            e.ackjob(&ids, now);
        }
        sim.flush(node);
    }
}

#[test]
fn sim_cancelled_jobs_are_never_delivered_once_healed() {
    run_seeds("cancel simulation", cancel_scenario);
}

#[test]
fn sim_federation_imports_the_highest_priority_first() {
    run_seeds("federated priority simulation", federated_priority_scenario);
}
