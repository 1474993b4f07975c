//! Job dependencies (engine::after) on the simulated network: chains of
//! jobs added with AFTER through different nodes of a 3-node cluster,
//! consumed and acknowledged on random nodes, with message loss,
//! duplication and a node crashing and restarting without its jobs. Every
//! job of every chain is delivered, and never before the job it waits for
//! was acknowledged. The failure policies: a dependency cancelled,
//! dead-lettered or expired (TTL) cancels, runs or dead-letters its
//! dependents as their ONFAIL says, and a cancelled dependent is never
//! delivered.
//!
//! `DISQUE_SIM_SEEDS` / `DISQUE_SIM_BASE` set the seeds as for the other
//! scenarios.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rand::Rng;

use super::delivery::run_seeds;
use super::getjob_ids_from;
use super::net::{Faults, Sim};
use crate::domain::job::{JobId, JobState};
use crate::domain::job_ext::{JobExt, ON_FAIL_CANCEL, ON_FAIL_DEADLETTER, ON_FAIL_RUN};
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::{ClientId, Wake};

const WORK: &[u8] = b"work";
const DEPS: &[u8] = b"deps";
const DYING: &[u8] = b"dying";
const CHAINS: usize = 6;
const LINKS: usize = 3;

/// ADDJOB on `node` (REPLICATE 3); waits for the answer while the
/// network runs. None when refused or the node crashed.
fn add_sync(
    sim: &mut Sim,
    node: usize,
    queue: &'static [u8],
    ttl: u32,
    ext: Option<JobExt>,
) -> Option<JobId> {
    let client: ClientId = sim.client();
    let now = sim.clock(node);
    let e = sim.nodes[node].as_mut()?;
    let req = AddJobRequest {
        timeout: 5000,
        replicate: Some(3),
        retry: Some(1),
        ttl: Some(ttl),
        ext: ext.map(Box::new),
        ..AddJobRequest::new(Bytes::from_static(queue), Bytes::from_static(b"body"))
    };
    let out = e.addjob(client, req, now);
    sim.flush(node);
    match out {
        AddJobOutcome::Added(id) => Some(id),
        AddJobOutcome::Error(_) => None,
        AddJobOutcome::Blocked => {
            sim.blocked_on(client, node);
            for _ in 0..1000 {
                match sim.answer(client) {
                    Some(Some(Wake::Added(id))) => return Some(id),
                    Some(_) => return None,
                    None => sim.step(),
                }
            }
            None
        }
    }
}

fn after(dep: JobId, on_fail: u8) -> Option<JobExt> {
    Some(JobExt {
        after: vec![Bytes::copy_from_slice(dep.as_bytes())],
        on_fail,
        ..JobExt::default()
    })
}

/// Deliveries seen: job -> first delivery time; jobs acked, with when.
#[derive(Default)]
struct Seen {
    delivered: BTreeMap<JobId, u64>,
    acked: BTreeMap<JobId, u64>,
}

/// GETJOB from `queue` on `node`, acknowledging what it got when `ack`.
fn consume(sim: &mut Sim, node: usize, queue: &'static [u8], ack: bool, seen: &mut Seen) {
    let client = sim.client();
    let now = sim.now;
    let clock = sim.clock(node);
    let Some(e) = sim.nodes[node].as_mut() else {
        return;
    };
    let ids = getjob_ids_from(e, client, clock, queue).unwrap_or_default();
    for id in &ids {
        seen.delivered.entry(*id).or_insert(now);
    }
    if ack && !ids.is_empty() {
        e.ackjob(&ids, clock);
        for id in &ids {
            seen.acked.entry(*id).or_insert(now);
        }
    }
    sim.flush(node);
}

fn chains_scenario(seed: u64) {
    let n = 3;
    let mut sim = Sim::new(n, seed, Faults::lossy());
    sim.join_all();
    // dependency of each job added.
    let mut deps: BTreeMap<JobId, Option<JobId>> = BTreeMap::new();
    for c in 0..CHAINS {
        let mut prev = None;
        for l in 0..LINKS {
            let node = (c + l) % n;
            let ext = prev.and_then(|p| after(p, ON_FAIL_CANCEL));
            let Some(id) = add_sync(&mut sim, node, WORK, 3600, ext) else {
                break;
            };
            deps.insert(id, prev);
            prev = Some(id);
        }
    }
    assert!(deps.len() >= CHAINS * 2, "seed {seed}: too few jobs added");
    let mut seen = Seen::default();
    let mut down = None;
    for t in 0..20_000u64 {
        if t == 300 {
            let victim = sim.rng.gen_range(0..n);
            let table = sim.crash(victim);
            down = Some((victim, table));
        }
        if t == 1500 {
            if let Some((victim, table)) = down.take() {
                sim.restart(victim, table);
            }
        }
        if t % 7 == 0 {
            let node = sim.rng.gen_range(0..n);
            let before: BTreeSet<JobId> = seen.delivered.keys().copied().collect();
            consume(&mut sim, node, WORK, true, &mut seen);
            for (id, &at) in &seen.delivered {
                if before.contains(id) {
                    continue;
                }
                if let Some(Some(dep)) = deps.get(id) {
                    let acked = seen.acked.get(dep).copied();
                    assert!(
                        acked.is_some_and(|a| a < at),
                        "seed {seed}: {id:?} delivered at {at} before its dependency {dep:?} was acked ({acked:?})"
                    );
                }
            }
        }
        if deps.keys().all(|id| seen.acked.contains_key(id)) {
            break;
        }
        sim.step();
    }
    let missing: Vec<&JobId> = deps
        .keys()
        .filter(|id| !seen.delivered.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "seed {seed}: never delivered {missing:?}"
    );
}

fn held_anywhere(sim: &Sim, id: &JobId) -> bool {
    sim.nodes.iter().flatten().any(|e| {
        e.lookup(id)
            .and_then(|h| e.job(h))
            .is_some_and(|j| j.state != JobState::Acked)
    })
}

fn dead_anywhere(sim: &Sim, id: &JobId) -> bool {
    sim.nodes.iter().flatten().any(|e| {
        e.lookup(id)
            .and_then(|h| e.ext_of(h))
            .is_some_and(|x| x.is_dead())
    })
}

fn policies_scenario(seed: u64) {
    let n = 3;
    let mut sim = Sim::new(n, seed, Faults::lossy());
    sim.join_all();
    // Three dependencies: one to cancel, one dead-lettered (delivered and
    // never acknowledged: its retry exceeds MAXDELIVERIES 1), one to expire.
    let cancelled = add_sync(&mut sim, 0, DEPS, 3600, None).expect("add");
    let dead_ext = Some(JobExt {
        max_deliveries: 1,
        ..JobExt::default()
    });
    let dead = add_sync(&mut sim, 1, DYING, 3600, dead_ext).expect("add");
    let expiring = add_sync(&mut sim, 2, DEPS, 5, None).expect("add");
    // Their dependents, added through other nodes.
    let mut want_run = BTreeSet::new();
    let mut want_cancel = BTreeSet::new();
    let mut want_dead = BTreeSet::new();
    for (k, dep) in [cancelled, dead, expiring].into_iter().enumerate() {
        for (p, policy) in [ON_FAIL_CANCEL, ON_FAIL_RUN, ON_FAIL_DEADLETTER]
            .into_iter()
            .enumerate()
        {
            let node = (k + p + 1) % n;
            let id = add_sync(&mut sim, node, WORK, 3600, after(dep, policy)).expect("add");
            match policy {
                ON_FAIL_RUN => want_run.insert(id),
                ON_FAIL_DEADLETTER => want_dead.insert(id),
                _ => want_cancel.insert(id),
            };
        }
    }
    let now = sim.clock(1);
    if let Some(e) = sim.nodes[1].as_mut() {
        e.cancel(&[cancelled], now);
    }
    sim.flush(1);
    let mut seen = Seen::default();
    for t in 0..6000u64 {
        if t % 7 == 0 {
            let node = sim.rng.gen_range(0..n);
            consume(&mut sim, node, WORK, true, &mut seen);
            consume(&mut sim, node, DYING, false, &mut seen);
            for id in seen.delivered.keys() {
                assert!(
                    !want_cancel.contains(id) && !want_dead.contains(id),
                    "seed {seed}: {id:?} delivered though its dependency failed"
                );
            }
        }
        sim.step();
    }
    for id in &want_run {
        assert!(
            seen.delivered.contains_key(id),
            "seed {seed}: ONFAIL RUN job {id:?} never delivered"
        );
    }
    for id in &want_cancel {
        assert!(
            !held_anywhere(&sim, id),
            "seed {seed}: ONFAIL CANCEL job {id:?} still held unacknowledged"
        );
    }
    for id in &want_dead {
        assert!(
            dead_anywhere(&sim, id),
            "seed {seed}: ONFAIL DEADLETTER job {id:?} not dead-lettered"
        );
    }
    for e in sim.nodes.iter().flatten() {
        assert_eq!(e.waiting_count(), 0, "seed {seed}: jobs still waiting");
    }
}

#[test]
fn sim_dependents_run_only_after_their_dependency_is_acked() {
    run_seeds("dependency chains simulation", chains_scenario);
}

#[test]
fn sim_failed_dependencies_resolve_per_onfail() {
    run_seeds("dependency failure-policy simulation", policies_scenario);
}
