//! Batches on the simulated network (engine::batch): members added
//! through every node, consumed and acknowledged on random nodes, the
//! batch committed, and its callbacks counted. In a calm network each
//! callback is added exactly once; with message loss, duplication and a
//! node crashing and restarting (without an AOF, so it relearns the batch
//! from its peers) each is added at least once.
//!
//! `DISQUE_SIM_SEEDS` / `DISQUE_SIM_BASE` set the seeds as for the other
//! scenarios.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rand::Rng;

use super::getjob_ids_from;
use super::net::{Faults, Sim};
use super::Wake;
use crate::domain::job::JobId;
use crate::domain::job_ext::JobExt;
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::batch::{callback_key, Callback};

const WORK: &[u8] = b"work";
const CALLBACKS: &[u8] = b"callbacks";
const BATCH: &[u8] = b"b1";
const MEMBERS: usize = 60;

/// Callback jobs consumed: DEDUP key -> distinct job IDs.
type Seen = BTreeMap<Bytes, BTreeSet<JobId>>;

/// GETJOB + ACKJOB on one node over both queues.
fn consume(sim: &mut Sim, node: usize, seen: &mut Seen) {
    for queue in [WORK, CALLBACKS] {
        let client = sim.client();
        let now = sim.clock(node);
        let Some(e) = sim.nodes[node].as_mut() else {
            return;
        };
        let Some(ids) = getjob_ids_from(e, client, now, queue) else {
            sim.flush(node);
            continue;
        };
        for id in &ids {
            let key = e
                .lookup(id)
                .and_then(|h| e.ext_of(h))
                .and_then(|x| x.dedup_key.clone());
            if let Some(k) = key {
                seen.entry(k).or_default().insert(*id);
            }
        }
        e.ackjob(&ids, now);
        sim.flush(node);
    }
}

/// A callback adding `body` to the callbacks queue.
fn cb(body: &str) -> Option<Callback> {
    Some(Callback {
        queue: Bytes::from_static(CALLBACKS),
        body: Bytes::copy_from_slice(body.as_bytes()),
    })
}

/// Runs one scenario; returns (success callbacks, complete callbacks,
/// members) as consumed.
fn run(seed: u64, faults: Faults, crash: bool) -> (usize, usize, usize) {
    let n = 3;
    let mut sim = Sim::new(n, seed, faults);
    sim.join_all();
    let now = sim.clock(0);
    if let Some(e) = sim.nodes[0].as_mut() {
        let r = e.batch_create(Some(Bytes::from_static(BATCH)), cb("ok"), cb("done"), now);
        assert!(r.is_ok(), "seed {seed}: create");
    }
    sim.flush(0);
    sim.run_for(500);

    // Members through every node; blocked ADDJOBs answered as they go.
    let mut blocked = Vec::new();
    let mut members = BTreeSet::new();
    for i in 0..MEMBERS {
        let node = i % n;
        let client = sim.client();
        let now = sim.clock(node);
        let Some(e) = sim.nodes[node].as_mut() else {
            continue;
        };
        let req = AddJobRequest {
            timeout: 5000,
            replicate: Some(2),
            retry: Some(2),
            ttl: Some(3600),
            ext: Some(Box::new(JobExt {
                batch: Some(Bytes::from_static(BATCH)),
                ..JobExt::default()
            })),
            ..AddJobRequest::new(Bytes::from_static(WORK), Bytes::from(format!("m{i}")))
        };
        match e.addjob(client, req, now) {
            AddJobOutcome::Added(id) => {
                members.insert(id);
            }
            AddJobOutcome::Blocked => {
                sim.blocked_on(client, node);
                blocked.push(client);
            }
            AddJobOutcome::Error(_) => {}
        }
        sim.flush(node);
        sim.step();
    }
    for _ in 0..2000 {
        blocked.retain(|&c| match sim.answer(c) {
            Some(Some(Wake::Added(id))) => {
                members.insert(id);
                false
            }
            Some(_) => false,
            None => true,
        });
        if blocked.is_empty() {
            break;
        }
        sim.step();
    }
    assert!(blocked.is_empty(), "seed {seed}: ADDJOBs still blocked");
    if let Some(e) = sim.nodes[0].as_mut() {
        assert!(e.batch_close(&Bytes::from_static(BATCH), false).is_ok());
    }
    sim.flush(0);

    let mut seen = Seen::new();
    let mut down = None;
    for t in 0..30_000u64 {
        if crash && t == 300 {
            let victim = sim.rng.gen_range(0..n);
            let table = sim.crash(victim);
            down = Some((victim, table));
        }
        if t == 2000 {
            if let Some((victim, table)) = down.take() {
                sim.restart(victim, table);
            }
        }
        if t % 5 == 0 {
            let node = sim.rng.gen_range(0..n);
            consume(&mut sim, node, &mut seen);
        }
        sim.step();
    }
    let count = |kind: &str| {
        seen.get(&callback_key(BATCH, kind))
            .map_or(0, BTreeSet::len)
    };
    // Every node that knows the batch ends with the same view.
    for e in sim.nodes.iter().flatten() {
        if let Some(s) = e.batch_get(BATCH) {
            let v = s.status();
            assert_eq!(v.total, members.len(), "seed {seed}: members");
            assert_eq!(v.pending, 0, "seed {seed}: pending members");
            assert!(v.success_added && v.complete_added, "seed {seed}");
        }
    }
    (count("success"), count("complete"), members.len())
}

fn seeds() -> std::ops::Range<u64> {
    let base: u64 = std::env::var("DISQUE_SIM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let n: u64 = std::env::var("DISQUE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    base..base + n
}

#[test]
fn sim_batch_calls_back_exactly_once_in_a_calm_cluster() {
    for seed in seeds() {
        let r = std::panic::catch_unwind(|| run(seed, Faults::calm(), false));
        let Ok((success, complete, members)) = r else {
            panic!("batch simulation panicked with seed {seed} (rerun: DISQUE_SIM_BASE={seed} DISQUE_SIM_SEEDS=1)");
        };
        assert_eq!(members, MEMBERS, "seed {seed}");
        assert_eq!((success, complete), (1, 1), "seed {seed}");
    }
}

#[test]
fn sim_batch_calls_back_at_least_once_under_loss_and_a_crash() {
    let faults = || Faults {
        drop: 0.02,
        dup: 0.02,
        max_delay: 40,
        retrans: 0.02,
    };
    for seed in seeds() {
        let r = std::panic::catch_unwind(|| run(seed, faults(), true));
        let Ok((success, complete, members)) = r else {
            panic!("batch simulation panicked with seed {seed} (rerun: DISQUE_SIM_BASE={seed} DISQUE_SIM_SEEDS=1)");
        };
        assert!(members > 0, "seed {seed}");
        assert!(
            success >= 1 && complete >= 1,
            "seed {seed}: {success} {complete}"
        );
        if std::env::var("DISQUE_SIM_VERBOSE").is_ok() {
            eprintln!(
                "seed {seed}: {members} members, callbacks: {success} success, {complete} complete"
            );
        }
    }
}

/// Members added and the batch committed through one node within one
/// gathering period (the member deltas still in its outbox): the peers
/// must learn the members with the COMMIT, or one of them sees a
/// committed batch with no member, finished, and adds its callbacks
/// before any member is acknowledged.
#[test]
fn sim_batch_committed_at_once_waits_for_its_members() {
    for seed in seeds() {
        let mut sim = Sim::new(3, seed, Faults::calm());
        sim.join_all();
        let now = sim.clock(0);
        let e = sim.nodes[0].as_mut().expect("node 0");
        assert!(e
            .batch_create(Some(Bytes::from_static(BATCH)), cb("ok"), cb("done"), now)
            .is_ok());
        sim.flush(0);
        sim.run_for(500);
        let client = sim.client();
        let now = sim.clock(0);
        let e = sim.nodes[0].as_mut().expect("node 0");
        for i in 0..4 {
            let req = AddJobRequest {
                replicate: Some(1),
                ext: Some(Box::new(JobExt {
                    batch: Some(Bytes::from_static(BATCH)),
                    ..JobExt::default()
                })),
                ..AddJobRequest::new(Bytes::from_static(WORK), Bytes::from(format!("m{i}")))
            };
            assert!(
                matches!(e.addjob(client, req, now), AddJobOutcome::Added(_)),
                "seed {seed}"
            );
        }
        assert!(e.batch_close(&Bytes::from_static(BATCH), false).is_ok());
        sim.flush(0);
        // Longer than every node's grace (rank × 2 s).
        sim.run_for(6000);
        for (i, e) in sim.nodes.iter().enumerate() {
            let e = e.as_ref().expect("node");
            assert_eq!(
                e.queue_len(CALLBACKS),
                0,
                "seed {seed}: node {i} added a callback"
            );
            let v = e.batch_get(BATCH).expect("batch").status();
            assert_eq!((v.total, v.pending), (4, 4), "seed {seed}: node {i}");
            assert!(
                !v.success_added && !v.complete_added,
                "seed {seed}: node {i}"
            );
        }
    }
}
