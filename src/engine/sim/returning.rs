//! Synchronous replication against a node that comes back: a peer killed
//! just before ADDJOB REPLICATE <whole cluster> and restarted within the
//! job's timeout gets REPLJOB again and confirms it, so the ADDJOB
//! answers with the ID (Disque's behaviour), whether or not the failure
//! detector marked the peer PFAIL meanwhile. Also the ASYNC case: a copy
//! sent while the link was down is sent again once it is back.

use bytes::Bytes;

use super::{Faults, Sim};
use crate::domain::job::JobId;
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::cluster::NodeInfo;
use crate::engine::Wake;

impl Sim {
    /// kill -9 of node `i`: its peers see their links to it close (the
    /// kernel answers a dead process's sockets with RST/EOF), and its node
    /// table is kept as nodes.conf would be.
    fn kill(&mut self, i: usize) -> Vec<NodeInfo> {
        let dropped: Vec<(usize, crate::domain::job::NodeIdx)> = self
            .links
            .iter()
            .filter(|&(&(a, _), &b)| b == i && a != i)
            .map(|(&k, _)| k)
            .collect();
        let table = self.crash(i);
        let now = self.now;
        for (a, idx) in dropped {
            if let Some(e) = self.nodes[a].as_mut() {
                e.on_link_down(idx, now);
            }
            self.flush(a);
        }
        table
    }
}

fn request(body: &str, timeout: u64, asynchronous: bool) -> AddJobRequest {
    AddJobRequest {
        timeout,
        replicate: Some(3),
        retry: Some(30),
        ttl: Some(3600),
        asynchronous,
        ..AddJobRequest::new(Bytes::from_static(b"rq"), Bytes::from(body.to_string()))
    }
}

fn holds(sim: &Sim, node: usize, id: &JobId) -> bool {
    sim.nodes[node]
        .as_ref()
        .is_some_and(|e| e.lookup(id).is_some())
}

/// One round: kill `victim`, ADDJOB on node 0, restart after `down_ms`.
/// Returns the answer the client got (None: still waiting at the end).
fn round(sim: &mut Sim, victim: usize, down_ms: u64, n: usize) -> Option<Wake> {
    let table = sim.kill(victim);
    let client = sim.client();
    let now = sim.now;
    let e = sim.nodes[0].as_mut()?;
    match e.addjob(client, request(&format!("b{n}"), 20_000, false), now) {
        AddJobOutcome::Blocked => sim.blocked_on(client, 0),
        AddJobOutcome::Added(id) => return Some(Wake::Added(id)),
        AddJobOutcome::Error(err) => return Some(Wake::Error(err)),
    }
    sim.flush(0);
    sim.run_for(down_ms);
    sim.restart(victim, table);
    for _ in 0..2000 {
        sim.step();
        if let Some(a) = sim.answer(client) {
            return a;
        }
    }
    None
}

fn run(seed: u64, down_ms: u64, rounds: usize) {
    run_with(seed, down_ms, rounds, Faults::calm());
}

fn run_with(seed: u64, down_ms: u64, rounds: usize, faults: Faults) {
    let mut sim = Sim::new(3, seed, faults);
    sim.join_all();
    for n in 0..rounds {
        let victim = 1 + n % 2;
        match round(&mut sim, victim, down_ms, n) {
            Some(Wake::Added(id)) => {
                let ok = (0..3).all(|i| holds(&sim, i, &id));
                assert!(ok, "seed {seed} round {n}: {id:?} not on every node");
            }
            other => panic!(
                "seed {seed} round {n} (down {down_ms} ms): ADDJOB answered {:?} \
                 (rerun: DISQUE_SIM_BASE={seed} DISQUE_SIM_SEEDS=1)",
                other.map(|w| match w {
                    Wake::Error(e) => format!("{e:?}"),
                    Wake::Added(id) => format!("{id:?}"),
                    _ => "other".to_string(),
                })
            ),
        }
        // The cluster heals fully before the next round.
        sim.join_all();
    }
}

fn seeds() -> std::ops::Range<u64> {
    let base: u64 = std::env::var("DISQUE_SIM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    base..base + super::seeds()
}

#[test]
fn sim_addjob_waits_for_a_peer_back_before_the_node_timeout() {
    for seed in seeds() {
        run(seed, 2000, 6);
    }
}

/// The same on a network that loses (breaking links), duplicates and
/// reorders messages.
#[test]
fn sim_addjob_waits_for_a_peer_back_on_a_lossy_network() {
    for seed in seeds() {
        let faults = Faults {
            drop: 0.01,
            dup: 0.01,
            max_delay: 10,
            retrans: 0.02,
        };
        run_with(seed, 2000, 6, faults);
    }
}

#[test]
fn sim_addjob_waits_for_a_peer_back_after_being_marked_failing() {
    for seed in seeds() {
        run(seed, 5000, 3);
    }
}

/// Whatever the allocator says, "used" is 2 GB: with maxmemory 1 GB the
/// node is above 95%.
fn huge() -> usize {
    2 << 30
}

fn out_of_memory(sim: &mut Sim, node: usize) {
    if let Some(e) = sim.nodes[node].as_mut() {
        e.set_memory_counter(huge);
        e.set_memory_limit(1 << 30, crate::engine::memory::Policy::Acks);
    }
}

fn add_async(sim: &mut Sim, node: usize, replicate: u32) -> JobId {
    let client = sim.client();
    let now = sim.now;
    let Some(e) = sim.nodes[node].as_mut() else {
        panic!("node {node} is down");
    };
    let req = AddJobRequest {
        replicate: Some(replicate),
        ..request("async", 0, true)
    };
    let id = match e.addjob(client, req, now) {
        AddJobOutcome::Added(id) => id,
        AddJobOutcome::Blocked => panic!("ASYNC blocked"),
        AddJobOutcome::Error(err) => panic!("ASYNC failed: {err:?}"),
    };
    sim.flush(node);
    id
}

fn holders(sim: &Sim, id: &JobId) -> Vec<usize> {
    (0..sim.nodes.len())
        .filter(|&i| holds(sim, i, id))
        .collect()
}

fn pending_async(sim: &Sim, node: usize) -> usize {
    sim.nodes[node].as_ref().map_or(0, |e| e.async_repl.len())
}

/// A copy for a peer whose link was down when the job was added is made
/// once the peer is back (Disque would never send it).
#[test]
fn sim_async_copy_reaches_a_peer_that_comes_back() {
    for seed in seeds() {
        let mut sim = Sim::new(3, seed, Faults::calm());
        sim.join_all();
        let table = sim.kill(2);
        let id = add_async(&mut sim, 0, 3);
        sim.run_for(2000);
        assert_eq!(holders(&sim, &id), vec![0, 1], "seed {seed}");
        assert_eq!(pending_async(&sim, 0), 1, "seed {seed}");
        sim.restart(2, table);
        sim.run_for(3000);
        assert_eq!(holders(&sim, &id), vec![0, 1, 2], "seed {seed}");
        assert_eq!(pending_async(&sim, 0), 0, "seed {seed}");
    }
}

/// A receiver out of memory refuses REPLJOB without a word: the origin
/// stops waiting for it and copies the job to another node instead.
#[test]
fn sim_async_copy_refused_out_of_memory_goes_to_another_node() {
    for seed in seeds() {
        let mut sim = Sim::new(4, seed, Faults::calm());
        sim.join_all();
        out_of_memory(&mut sim, 1);
        for n in 0..6 {
            let id = add_async(&mut sim, 0, 3);
            sim.run_for(3000);
            let h = holders(&sim, &id);
            assert!(!h.contains(&1), "seed {seed} job {n}: {h:?}");
            assert_eq!(h, vec![0, 2, 3], "seed {seed} job {n}");
            assert_eq!(pending_async(&sim, 0), 0, "seed {seed} job {n}");
        }
    }
}

/// The origin out of memory hands an ASYNC job off: the replicas hold it,
/// exactly one of them queues it, and the origin keeps no copy.
#[test]
fn sim_async_job_from_an_origin_out_of_memory_is_handed_off() {
    for seed in seeds() {
        let mut sim = Sim::new(3, seed, Faults::calm());
        sim.join_all();
        out_of_memory(&mut sim, 0);
        let id = add_async(&mut sim, 0, 2);
        sim.run_for(2000);
        assert_eq!(holders(&sim, &id), vec![1, 2], "seed {seed}");
        let queued: usize = (1..3)
            .map(|i| sim.nodes[i].as_ref().map_or(0, |e| e.queue_len(b"rq")))
            .sum();
        assert_eq!(queued, 1, "seed {seed}");
        assert_eq!(pending_async(&sim, 0), 0, "seed {seed}");
    }
}
