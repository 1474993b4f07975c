//! Memory grows in bounded steps: a node with a small
//! `maxmemory` fed ADDJOBs one after another must cross the 75% level
//! (replicate externally) before the 95% one (-OOM), because the job
//! table never grows by one large contiguous reallocation.
//!
//! The loop, run `DISQUE_MEMORY_RUNS` times per REPLICATE
//! level and body size on one 7-node cluster, flushed between runs: ADDJOB
//! then SHOW until SHOW answers nil, i.e. the job went only to other
//! nodes. Any -OOM on the way fails the test.
//!
//! `cargo test` makes 3 runs (a fresh node, then twice after a flush, to
//! keep the suite's time budget); 20 runs are a soak that `.ci/run`
//! makes with `DISQUE_MEMORY_RUNS=20`.

use std::time::{Duration, Instant};

use crate::cluster::cluster;
use crate::harness::{wait_until, Client, Reply, Server};
use crate::util::env_u64;

const MAXMEMORY: u64 = 3 * 1024 * 1024;
/// Request bytes pipelined per round trip (replies are all checked):
/// small next to the 20% between the two levels, so the test's own input
/// buffer is not a step of its own.
const BATCH_BYTES: usize = 64 * 1024;
/// More jobs than can fit in 3 MB: the loop must have ended by then.
const MAX_JOBS: usize = 40_000;

fn flush_all(nodes: &[Server]) {
    for s in nodes {
        assert_eq!(
            s.client().cmd(&["DEBUG", "FLUSHALL"]),
            Reply::Status("OK".into())
        );
    }
}

/// Run the ADDJOB/SHOW loop once; returns (jobs added, the last job's ID).
fn until_external(c: &mut Client, repl: &str, body: &str) -> (usize, String) {
    let mut added = 0;
    let batch = (BATCH_BYTES / body.len()).clamp(1, 128);
    while added < MAX_JOBS {
        let adds: Vec<Vec<String>> = (0..batch)
            .map(|_| {
                ["ADDJOB", "q", body, "5000", "REPLICATE", repl]
                    .map(String::from)
                    .to_vec()
            })
            .collect();
        let ids: Vec<String> = c
            .pipeline(&adds)
            .into_iter()
            .map(|r| match r {
                Reply::Status(id) => id,
                other => panic!("ADDJOB #{added} REPLICATE {repl} failed: {other:?}"),
            })
            .collect();
        let shows: Vec<Vec<String>> = ids
            .iter()
            .map(|id| vec!["SHOW".to_string(), id.clone()])
            .collect();
        for (id, r) in ids.iter().zip(c.pipeline(&shows)) {
            added += 1;
            if r == Reply::NilBulk {
                return (added, id.clone());
            }
        }
    }
    panic!("no external replication after {MAX_JOBS} jobs");
}

fn check_loop(nodes: &[Server], repl: usize, body: &str) {
    let mut c = nodes[0].client();
    for run in 0..env_u64("DISQUE_MEMORY_RUNS", 3) {
        flush_all(nodes);
        // The previous run's memory is back under the 75% level.
        assert!(wait_until(
            Duration::from_secs(10),
            Duration::from_millis(20),
            || (c.info_int("used_memory") as u64) < MAXMEMORY / 100 * 75
        ));
        let (added, id) = until_external(&mut c, &repl.to_string(), body);
        // External replication: at least REPLICATE other nodes hold the
        // job. More is Disque's rule, not a fault: a synchronous ADDJOB
        // still waiting for its copies after 50 ms sends the job to one more
        // node, which happens when the machine is loaded.
        let held: Vec<Reply> = nodes[1..]
            .iter()
            .map(|s| s.client().cmd(&["SHOW", &id]))
            .filter(|r| *r != Reply::NilBulk)
            .collect();
        assert!(
            held.len() >= repl,
            "run {run}: job {id} after {added} jobs is held by {held:?}"
        );
    }
}

#[test]
fn addjob_under_maxmemory_replicates_externally_before_oom() {
    let start = Instant::now();
    let nodes = cluster(7);
    let mut c = nodes[0].client();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", &MAXMEMORY.to_string()]),
        Reply::Status("OK".into())
    );
    for repl in [1, 2] {
        // The plain loop (tiny body, 5000 ms replication timeout): the
        // job table itself is most of the memory.
        check_loop(&nodes, repl, "body");
        // Large bodies: each job is a visible step of its own.
        check_loop(&nodes, repl, &"x".repeat(5000));
    }
    eprintln!("memory growth loop: {:?}", start.elapsed());
}
