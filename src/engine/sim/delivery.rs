//! Simulation scenarios for our extensions (docs/COMPATIBILITY.md), on the
//! same in-memory network as the Disque scenarios: dead letters under
//! loss, partitions and a crash (a job never stays both dead-lettered and
//! queued in its original queue), DEDUP retries across nodes of a
//! connected cluster, also on a node that was cut off when the key was
//! created (never two live jobs for one key), and BACKOFF
//! periods between re-deliveries. Seeds are printed on failure.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::{Faults, Sim};
use crate::domain::job::{JobId, JobState};
use crate::domain::job_ext::JobExt;
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::engine::{ClientId, Wake};

fn ext(f: impl FnOnce(&mut JobExt)) -> Option<JobExt> {
    let mut x = JobExt::default();
    f(&mut x);
    Some(x)
}

/// ADDJOB; Some(id) when it was accepted at once, None when pending or
/// refused (pending replies are polled by the caller through `pending`).
pub(super) fn add(
    sim: &mut Sim,
    node: usize,
    queue: &'static [u8],
    req_ext: Option<JobExt>,
    replicate: u32,
    pending: &mut Vec<ClientId>,
) -> Option<JobId> {
    let client = sim.client();
    let now = sim.now;
    let e = sim.nodes[node].as_mut()?;
    let req = AddJobRequest {
        timeout: 5000,
        replicate: Some(replicate),
        retry: Some(1),
        ttl: Some(3600),
        ext: req_ext.map(Box::new),
        ..AddJobRequest::new(Bytes::from_static(queue), Bytes::from_static(b"body"))
    };
    let out = e.addjob(client, req, now);
    sim.flush(node);
    match out {
        AddJobOutcome::Added(id) => Some(id),
        AddJobOutcome::Blocked => {
            sim.blocked_on(client, node);
            pending.push(client);
            None
        }
        AddJobOutcome::Error(_) => None,
    }
}

pub(super) fn poll(sim: &mut Sim, pending: &mut Vec<ClientId>) -> Vec<JobId> {
    let mut done = Vec::new();
    pending.retain(|&client| match sim.answer(client) {
        Some(Some(Wake::Added(id))) => {
            done.push(id);
            false
        }
        Some(_) => false,
        None => true,
    });
    done
}

/// GETJOB NOHANG from `queue` on `node`; the IDs delivered.
pub(super) fn take(sim: &mut Sim, node: usize, queue: &'static [u8]) -> Vec<JobId> {
    let client = sim.client();
    let now = sim.now;
    let Some(e) = sim.nodes[node].as_mut() else {
        return Vec::new();
    };
    let req = GetJobRequest {
        nohang: true,
        timeout: 0,
        count: 10,
        withcounters: false,
        queues: vec![Bytes::from_static(queue)],
    };
    let out = e.getjob(client, req, now);
    sim.flush(node);
    let GetJobOutcome::Jobs(jobs) = out else {
        return Vec::new();
    };
    jobs.iter().map(|j| j.id).collect()
}

fn nack(sim: &mut Sim, node: usize, id: JobId) {
    let now = sim.now;
    if let Some(e) = sim.nodes[node].as_mut() {
        if let Some(h) = e.lookup(&id) {
            if e.job(h).is_some_and(|j| j.state == JobState::Active) {
                e.enqueue(h, true, now);
            }
        }
    }
    sim.flush(node);
}

/// Jobs (by ID) that some node holds dead while another holds them queued
/// in their original queue `q`.
fn dead_and_queued(sim: &Sim) -> HashSet<JobId> {
    let mut dead = HashSet::new();
    let mut queued_live = HashSet::new();
    for e in sim.nodes.iter().flatten() {
        for (h, j) in e.store().iter_from(0) {
            let is_dead = e.ext_of(h).is_some_and(|x| x.is_dead());
            if is_dead {
                dead.insert(j.id);
            } else if j.state == JobState::Queued && j.queue.as_deref() == Some(&b"q"[..]) {
                queued_live.insert(j.id);
            }
        }
    }
    dead.intersection(&queued_live).copied().collect()
}

fn dead_letter_scenario(seed: u64) {
    let n = 5;
    let mut sim = Sim::new(n, seed, Faults::lossy());
    sim.join_all();
    let mut pending = Vec::new();
    let mut accepted: HashSet<JobId> = HashSet::new();
    let crash_node = 1 + (seed as usize % (n - 1));
    let mut table = Vec::new();
    for t in 0..1500u64 {
        if t % 4 == 0 {
            let node = (t as usize / 4) % n;
            let x = ext(|x| x.max_deliveries = 2 + (t % 3) as u32);
            accepted.extend(add(&mut sim, node, b"q", x, 3, &mut pending));
        }
        if t % 5 == 0 {
            // Consume and never ack; NACK half of what we get, elsewhere.
            let node = (t as usize / 5) % n;
            for id in take(&mut sim, node, b"q") {
                if t % 10 == 0 {
                    let other = (node + 1 + (t as usize % (n - 1))) % n;
                    nack(&mut sim, other, id);
                }
            }
        }
        sim.partition_then_crash(t, crash_node, &mut table);
        sim.step();
        accepted.extend(poll(&mut sim, &mut pending));
    }
    // Healed, lossless: timers keep re-queueing the undelivered copies,
    // which dead-letters the rest; then holders must agree.
    sim.faults.drop = 0.0;
    sim.faults.dup = 0.0;
    sim.run_for(20_000);
    let first = dead_and_queued(&sim);
    sim.run_for(2_000);
    let lasting: Vec<JobId> = dead_and_queued(&sim)
        .intersection(&first)
        .copied()
        .collect();
    assert!(
        lasting.is_empty(),
        "seed {seed}: {} jobs dead-lettered on one node and queued in their queue on another, e.g. {:?}",
        lasting.len(),
        lasting.first()
    );
    // Holders agree on the epoch: one dead-lettering per job.
    let mut epochs: HashMap<JobId, HashSet<u32>> = HashMap::new();
    let mut dead_jobs = 0;
    for e in sim.nodes.iter().flatten() {
        for (h, j) in e.store().iter_from(0) {
            if j.state == JobState::Acked {
                continue;
            }
            let ep = e.ext_of(h).map_or(0, |x| x.epoch);
            epochs.entry(j.id).or_default().insert(ep);
        }
    }
    for (id, eps) in &epochs {
        assert!(
            eps.len() == 1,
            "seed {seed}: holders of {id:?} disagree: {eps:?}"
        );
        if eps.iter().any(|e| e & 1 == 1) {
            dead_jobs += 1;
        }
        assert!(
            eps.iter().all(|&e| e <= 1),
            "seed {seed}: {id:?} dead-lettered twice: {eps:?}"
        );
    }
    assert!(accepted.len() > 100, "seed {seed}: workload too small");
    assert!(dead_jobs > 0, "seed {seed}: nothing was dead-lettered");
}

fn dedup_scenario(seed: u64) {
    let n = 5;
    let mut sim = Sim::new(n, seed, Faults::duplicating());
    sim.join_all();
    let mut answers: HashMap<u64, HashSet<JobId>> = HashMap::new();
    for k in 0..60u64 {
        let key = Bytes::from(format!("key-{k}"));
        let first_node = (k as usize) % n;
        // Every fifth key is created while one node is cut off; that node
        // must learn the key when its links come back.
        let isolated = (k % 5 == 0).then_some((first_node + 2) % n);
        if let Some(iso) = isolated {
            for j in (0..n).filter(|&j| j != iso) {
                sim.cut.insert((iso.min(j), iso.max(j)));
            }
            sim.run_for(100);
        }
        let mut pending = Vec::new();
        let x = ext(|x| x.dedup_key = Some(key.clone()));
        let repl = 1 + (k % 3) as u32;
        let mut got: Vec<JobId> = add(&mut sim, first_node, b"q", x, repl, &mut pending)
            .into_iter()
            .collect();
        // The producer retries (after the first reply, as a client with a
        // timeout would) on other nodes.
        for _ in 0..200 {
            if !pending.is_empty() {
                got.extend(poll(&mut sim, &mut pending));
            }
            if pending.is_empty() && !got.is_empty() {
                break;
            }
            sim.step();
        }
        if isolated.is_some() {
            sim.run_for(200);
            sim.cut.clear();
            sim.run_for(3000);
        }
        for r in 0..3 {
            sim.run_for(50);
            let node = match (r, isolated) {
                (0, Some(iso)) => iso,
                _ => (first_node + 1 + r + (k as usize)) % n,
            };
            let x = ext(|x| x.dedup_key = Some(key.clone()));
            got.extend(add(&mut sim, node, b"q", x, 1, &mut pending));
            for _ in 0..200 {
                if pending.is_empty() {
                    break;
                }
                sim.step();
                got.extend(poll(&mut sim, &mut pending));
            }
        }
        answers.entry(k).or_default().extend(got);
        // Consume some of them, so retries also hit acked / collected jobs.
        if k % 2 == 0 {
            for node in 0..n {
                let ids = take(&mut sim, node, b"q");
                let now = sim.now;
                if let Some(e) = sim.nodes[node].as_mut() {
                    e.ackjob(&ids, now);
                }
                sim.flush(node);
            }
        }
    }
    for (k, ids) in &answers {
        assert_eq!(ids.len(), 1, "seed {seed}: key-{k} answered with {ids:?}");
    }
    // Every job created carries a distinct key: no key made two jobs.
    let mut by_key: HashMap<Bytes, HashSet<JobId>> = HashMap::new();
    for e in sim.nodes.iter().flatten() {
        for (h, j) in e.store().iter_from(0) {
            if let Some(key) = e.ext_of(h).and_then(|x| x.dedup_key.clone()) {
                by_key.entry(key).or_default().insert(j.id);
            }
        }
    }
    for (key, ids) in by_key {
        assert_eq!(
            ids.len(),
            1,
            "seed {seed}: key {key:?} has live jobs {ids:?}"
        );
    }
}

fn backoff_scenario(seed: u64) {
    let n = 3;
    let mut sim = Sim::new(
        n,
        seed,
        Faults {
            drop: 0.0,
            dup: 0.02,
            max_delay: 30,
            retrans: 0.0,
        },
    );
    sim.join_all();
    let mut pending = Vec::new();
    let x = ext(|x| x.backoff_max = 16);
    let mut id = add(&mut sim, 0, b"q", x, 3, &mut pending);
    while id.is_none() {
        sim.step();
        id = poll(&mut sim, &mut pending).first().copied();
    }
    // A consumer on every node that never acknowledges: each delivery is
    // followed by a re-queue after the job's current back-off. Two holders
    // whose timers fire within one message delay may both queue it (the
    // usual best-effort double queueing, as in Disque); such near-simultaneous
    // deliveries are one round. Double counting only lengthens later
    // periods, so the bound below is a lower one (plus a sanity cap).
    let mut rounds: Vec<u64> = Vec::new();
    while rounds.len() < 7 && sim.now < super::START + 300_000 {
        for node in 0..n {
            if !take(&mut sim, node, b"q").is_empty()
                && rounds.last().is_none_or(|&t| sim.now - t > 600)
            {
                rounds.push(sim.now);
            }
        }
        sim.step();
    }
    assert_eq!(rounds.len(), 7, "seed {seed}: too few deliveries");
    for (d, w) in rounds.windows(2).enumerate() {
        let period = (1000u64 << d).min(16_000);
        let gap = w[1] - w[0];
        assert!(
            gap + 300 >= period && gap <= (period * 4).min(16_000) + 1000,
            "seed {seed}: delivery {} came {gap} ms after the previous one, back-off is {period} ms",
            d + 2
        );
    }
}

pub(super) fn run_seeds(name: &str, f: fn(u64)) {
    let base: u64 = std::env::var("DISQUE_SIM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for seed in base..base + super::seeds() {
        if std::panic::catch_unwind(|| f(seed)).is_err() {
            panic!(
                "{name} failed with seed {seed} (rerun: DISQUE_SIM_BASE={seed} DISQUE_SIM_SEEDS=1)"
            );
        }
    }
}

#[test]
fn sim_dead_letters_never_both_dead_and_queued() {
    run_seeds("dead-letter simulation", dead_letter_scenario);
}

#[test]
fn sim_dedup_never_yields_two_jobs_while_connected() {
    run_seeds("dedup simulation", dedup_scenario);
}

#[test]
fn sim_backoff_periods_are_respected() {
    run_seeds("back-off simulation", backoff_scenario);
}
