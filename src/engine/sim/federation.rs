//! Federation streaming on the simulated network (no faults): a node
//! asked for jobs it did not have (even for a queue it did not know yet)
//! sends the ones queued afterwards at once,
//! and a node importing for busy consumers asks for the next batch before
//! its queue runs dry, so consumers there do not wait a NEEDJOBS round
//! trip per batch.

use bytes::Bytes;

use super::{Faults, Sim};
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::engine::{ClientId, Wake};

const Q: &[u8] = b"fq";

fn quiet_pair() -> Sim {
    let mut sim = Sim::new(
        2,
        7,
        Faults {
            drop: 0.0,
            dup: 0.0,
            max_delay: 1,
            retrans: 0.0,
        },
    );
    sim.join_all();
    sim
}

/// ADDJOB on `node` as a client would (commands then serve ready queues).
fn add(sim: &mut Sim, node: usize, n: usize) {
    let client = sim.client();
    let now = sim.now;
    let Some(e) = sim.nodes[node].as_mut() else {
        return;
    };
    for k in 0..n {
        let req = AddJobRequest {
            replicate: Some(1),
            retry: Some(30),
            ttl: Some(3600),
            ..AddJobRequest::new(Bytes::from_static(Q), Bytes::from(format!("j{k}")))
        };
        assert!(matches!(
            e.addjob(client, req, now),
            AddJobOutcome::Added(_)
        ));
    }
    e.serve_ready(now);
    sim.flush(node);
}

/// GETJOB on `node`; a client that blocks is registered for its answer.
fn getjob(sim: &mut Sim, node: usize, nohang: bool) -> (ClientId, GetJobOutcome) {
    let client = sim.client();
    let now = sim.now;
    let req = GetJobRequest {
        nohang,
        timeout: 60_000,
        count: 1,
        withcounters: false,
        queues: vec![Bytes::from_static(Q)],
    };
    let out = match sim.nodes[node].as_mut() {
        Some(e) => e.getjob(client, req, now),
        None => GetJobOutcome::NoJobs,
    };
    if matches!(out, GetJobOutcome::Blocked) {
        sim.blocked_on(client, node);
    }
    sim.flush(node);
    (client, out)
}

/// Block a consumer on `node`.
fn block(sim: &mut Sim, node: usize) -> ClientId {
    let (client, out) = getjob(sim, node, false);
    assert!(
        matches!(out, GetJobOutcome::Blocked),
        "consumer did not block"
    );
    client
}

/// The number of jobs a blocked consumer got; None while it waits.
fn jobs_got(sim: &mut Sim, client: ClientId) -> Option<usize> {
    match sim.answer(client) {
        None => None,
        Some(Some(Wake::Jobs(jobs))) => Some(jobs.len()),
        Some(other) => panic!("the waiting consumer got {other:?}"),
    }
}

fn qlen(sim: &Sim, node: usize) -> usize {
    sim.nodes[node]
        .as_ref()
        .and_then(|e| {
            let qh = e.queue_handle(Q)?;
            e.queues().get(qh).map(|q| q.len())
        })
        .unwrap_or(0)
}

#[test]
fn sim_a_job_queued_after_an_unanswered_needjobs_goes_to_the_waiting_node() {
    let mut sim = quiet_pair();
    // The queue exists on node 0 but is empty.
    add(&mut sim, 0, 1);
    assert!(matches!(
        getjob(&mut sim, 0, true).1,
        GetJobOutcome::Jobs(_)
    ));
    // A consumer blocks on node 1: it broadcasts NEEDJOBS, node 0 has nothing.
    let client = block(&mut sim, 1);
    sim.run_for(50);
    assert_eq!(jobs_got(&mut sim, client), None);
    // Without the remembered demand node 1 would ask again only after its
    // broadcast back-off (4 s); the job must arrive within a few hops.
    add(&mut sim, 0, 1);
    sim.run_for(50);
    assert_eq!(jobs_got(&mut sim, client), Some(1));
    assert_eq!(qlen(&sim, 0), 0);
}

#[test]
fn sim_a_consumer_waiting_before_the_queue_exists_elsewhere_gets_the_first_job() {
    let mut sim = quiet_pair();
    // Node 0 has never heard of the queue when node 1's consumer asks.
    let client = block(&mut sim, 1);
    sim.run_for(50);
    add(&mut sim, 0, 1);
    sim.run_for(50);
    assert_eq!(jobs_got(&mut sim, client), Some(1));
}

#[test]
fn sim_an_importing_queue_asks_for_more_before_it_runs_dry() {
    let mut sim = quiet_pair();
    add(&mut sim, 0, 300);
    // First batch: a blocked consumer on node 1 makes it ask.
    let client = block(&mut sim, 1);
    let mut got = 0;
    for _ in 0..100 {
        sim.step();
        if jobs_got(&mut sim, client).is_some() {
            got = 1;
            break;
        }
    }
    assert_eq!(got, 1, "no first batch");
    // Its queue emptied, so it asked for the next batch right away.
    for _ in 0..10 {
        if qlen(&sim, 1) > 0 {
            break;
        }
        sim.step();
    }
    // Then one consumer takes a job every step (10 ms, messages take 1 ms):
    // the queue must never be found empty while node 0 still has jobs.
    while qlen(&sim, 0) > 0 {
        match getjob(&mut sim, 1, true).1 {
            GetJobOutcome::Jobs(_) => got += 1,
            _ => panic!(
                "node 1 ran dry after {got} jobs with {} still on node 0",
                qlen(&sim, 0)
            ),
        }
        sim.step();
    }
    assert!(got > 100, "{got}");
}
