//! Engine micro-benchmarks (no I/O): the ADDJOB → GETJOB → ACKJOB cycle
//! with 1k, 100k and 1M jobs already queued, in one queue and spread over
//! as many queues, plus heap bytes per queued job as counted by the
//! server's own allocator. Run with `cargo bench --bench engine`;
//! `DISQUE_BENCH_MAX=100000` skips the 1M case.

#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use disque::engine::addjob::{AddJobOutcome, AddJobRequest};
use disque::engine::getjob::{GetJobOutcome, GetJobRequest};
use disque::engine::Engine;
use disque::job::JobId;
use disque::resp::Reply;

#[global_allocator]
static ALLOC: disque::memory::Counting = disque::memory::Counting;

const NOW: u64 = 1_800_000_000_000;

fn add(e: &mut Engine, queue: &Bytes, body: &Bytes, now: u64) -> JobId {
    let req = AddJobRequest::new(queue.clone(), body.clone());
    match e.addjob(1, req, now) {
        AddJobOutcome::Reply(Reply::Status(id)) => JobId::parse(id.as_bytes()).expect("valid id"),
        _ => panic!("ADDJOB failed"),
    }
}

fn get(e: &mut Engine, queue: &Bytes, now: u64) -> JobId {
    let req = GetJobRequest {
        nohang: true,
        timeout: 0,
        count: 1,
        withcounters: false,
        queues: vec![queue.clone()],
    };
    let GetJobOutcome::Reply(Reply::Array(jobs)) = e.getjob(2, req, now) else {
        panic!("GETJOB returned nothing");
    };
    match &jobs[0] {
        Reply::Array(f) => match &f[1] {
            Reply::Bulk(id) => JobId::parse(id).expect("valid id"),
            _ => panic!("bad reply"),
        },
        _ => panic!("bad reply"),
    }
}

fn queue_name(i: usize) -> Bytes {
    Bytes::from(format!("queue:{i}"))
}

fn bench(n: usize, queues: usize) {
    let mut e = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, NOW);
    let body = Bytes::from(vec![b'x'; 100]);
    let names: Vec<Bytes> = (0..queues).map(queue_name).collect();
    let before = disque::memory::allocated();
    for i in 0..n {
        add(&mut e, &names[i % queues], &body, NOW);
    }
    let per_job = (disque::memory::allocated() - before) as f64 / n as f64;
    let iters = 200_000usize;
    let start = Instant::now();
    for i in 0..iters {
        let q = &names[i % queues];
        add(&mut e, q, &body, NOW);
        let id = get(&mut e, q, NOW);
        black_box(e.ackjob(&[id], NOW));
    }
    let ns = start.elapsed().as_nanos() as f64 / iters as f64;
    // The scheduler at steady state: a tick with nothing due.
    let start = Instant::now();
    for _ in 0..10_000 {
        e.tick(NOW + 1);
    }
    let tick_ns = start.elapsed().as_nanos() as f64 / 10_000.0;
    println!(
        "{n:>8} jobs in {queues:>7} queue(s): add+get+ack cycle {ns:>7.0} ns, idle tick {tick_ns:>7.0} ns, heap {per_job:>6.0} B/job"
    );
}

fn main() {
    let max: usize = std::env::var("DISQUE_BENCH_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    for n in [1_000, 100_000, 1_000_000] {
        if n > max {
            continue;
        }
        bench(n, 1);
        bench(n, n);
    }
}
