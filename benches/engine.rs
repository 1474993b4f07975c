//! Engine micro-benchmarks (criterion, no I/O): ADDJOB, GETJOB and ACKJOB
//! each on their own and as one add → get → ack cycle, with 1k, 100k and
//! 1M jobs already queued, in one queue and spread over as many queues;
//! plus an idle scheduler tick. Heap bytes per queued job, as counted by
//! the server's own allocator, are printed once per setup.
//!
//! Run with `cargo bench --bench engine`; `DISQUE_BENCH_MAX=100000` skips
//! the 1M case, `DISQUE_BENCH_LAYOUTS=1_queue` the many-queue setups. CI runs each benchmark once with `cargo bench -- --test`.

#![allow(clippy::expect_used)] // benchmark fixtures: a failure is a bug to see

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use disque::domain::job::JobId;
use disque::engine::addjob::{AddJobOutcome, AddJobRequest};
use disque::engine::getjob::{GetJobOutcome, GetJobRequest};
use disque::engine::Engine;

#[global_allocator]
static ALLOC: disque::os::allocator::Counting = disque::os::allocator::Counting;

const NOW: u64 = 1_800_000_000_000;
/// Operations per timed chunk: the untimed undo after each chunk keeps the
/// number of queued jobs within `CHUNK` of the setup's.
const CHUNK: u64 = 1000;

fn add(e: &mut Engine, queue: &Bytes, body: &Bytes) -> JobId {
    let req = AddJobRequest::new(queue.clone(), body.clone());
    match e.addjob(1, req, NOW) {
        AddJobOutcome::Added(id) => id,
        _ => panic!("ADDJOB failed"),
    }
}

fn get(e: &mut Engine, queue: &Bytes) -> JobId {
    let req = GetJobRequest {
        nohang: true,
        timeout: 0,
        count: 1,
        withcounters: false,
        queues: vec![queue.clone()],
    };
    let GetJobOutcome::Jobs(jobs) = e.getjob(2, req, NOW) else {
        panic!("GETJOB returned nothing");
    };
    match jobs.first() {
        Some(j) => j.id,
        None => panic!("no job"),
    }
}

fn ack(e: &mut Engine, id: JobId) {
    assert_eq!(e.ackjob(&[id], NOW), 1);
}

/// An engine holding `jobs` 100-byte jobs over `queues` queues.
struct Setup {
    engine: Engine,
    names: Vec<Bytes>,
    body: Bytes,
    /// Next queue to use, round-robin.
    next: usize,
}

impl Setup {
    fn new(jobs: usize, queues: usize) -> Setup {
        let mut engine = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, NOW);
        let body = Bytes::from(vec![b'x'; 100]);
        let names: Vec<Bytes> = (0..queues)
            .map(|i| Bytes::from(format!("queue:{i}")))
            .collect();
        let before = disque::os::allocator::allocated();
        for i in 0..jobs {
            add(&mut engine, &names[i % queues], &body);
        }
        let heap = disque::os::allocator::allocated() - before;
        let per_job = heap as f64 / jobs as f64;
        eprintln!("{jobs} jobs in {queues} queue(s): heap {per_job:.0} B/job");
        if queues == 1 {
            accounting(&engine, heap, &names[0]);
        }
        Setup {
            engine,
            names,
            body,
            next: 0,
        }
    }

    fn queue(&mut self) -> Bytes {
        self.next = (self.next + 1) % self.names.len();
        self.names[self.next].clone()
    }

    /// Runs `iters` operations in chunks; only `timed` is measured, not
    /// `before` and `after` (each operation's preparation and undo).
    fn measure<A, B>(
        &mut self,
        iters: u64,
        mut before: impl FnMut(&mut Setup) -> A,
        mut timed: impl FnMut(&mut Setup, A) -> B,
        mut after: impl FnMut(&mut Setup, B),
    ) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        let mut done = Vec::with_capacity(CHUNK as usize);
        while left > 0 {
            let n = left.min(CHUNK);
            let prepared: Vec<A> = (0..n).map(|_| before(self)).collect();
            let start = Instant::now();
            for p in prepared {
                done.push(timed(self, p));
            }
            total += start.elapsed();
            for d in done.drain(..) {
                after(self, d);
            }
            left -= n;
        }
        total
    }
}

/// Where the heap bytes of the queued jobs go, per job (docs/PERFORMANCE.md,
/// "Where the CPU goes", on memory). Capacities, as requested from the allocator;
/// the allocator's own per-allocation overhead comes on top.
fn accounting(e: &Engine, heap: usize, queue: &Bytes) {
    let f = e.store().footprint();
    let n = f.jobs.max(1) as f64;
    // The queue's order index, measured alone: the same ascending inserts
    // into a fresh queue, counted by the allocator.
    let before = disque::os::allocator::allocated();
    let mut q = disque::domain::queue::Queue::new(queue.clone(), 0);
    for h in 0..f.jobs as u32 {
        q.insert(NOW * 1_000_000 + u64::from(h), h);
    }
    let qindex = disque::os::allocator::allocated() - before;
    drop(q);
    let known = f.slab + f.bodies + f.index + f.timers + f.node_lists + qindex;
    eprintln!(
        "  per job: record {} B (slot {} B), slab {:.1}, bodies {:.1} in {:.2} allocations, \
         ID index {:.1}, queue index {:.1}, timer handles {:.1}, node lists {:.1}, \
         rest {:.1}; total {:.1}",
        f.record,
        f.slot,
        f.slab as f64 / n,
        f.bodies as f64 / n,
        f.body_allocs as f64 / n,
        f.index as f64 / n,
        qindex as f64 / n,
        f.timers as f64 / n,
        f.node_lists as f64 / n,
        (heap as f64 - known as f64) / n,
        heap as f64 / n,
    );
}

fn sizes() -> Vec<usize> {
    let max: usize = std::env::var("DISQUE_BENCH_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    [1_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|&n| n <= max)
        .collect()
}

/// `DISQUE_BENCH_LAYOUTS=1_queue` (or `n_queues`) skips the other layout's
/// setup, which criterion's name filter cannot (1M queues take minutes).
fn layout_wanted(layout: &str) -> bool {
    std::env::var("DISQUE_BENCH_LAYOUTS").map_or(true, |v| v.split(',').any(|l| l == layout))
}

fn engine(c: &mut Criterion) {
    for jobs in sizes() {
        for (layout, queues) in [("1_queue", 1), ("n_queues", jobs)] {
            if !layout_wanted(layout) {
                continue;
            }
            let mut s = Setup::new(jobs, queues);
            let mut group = c.benchmark_group(format!("engine/{layout}"));
            group.measurement_time(Duration::from_secs(3));
            group.warm_up_time(Duration::from_secs(1));
            group.bench_function(BenchmarkId::new("addjob", jobs), |b| {
                b.iter_custom(|iters| {
                    s.measure(
                        iters,
                        Setup::queue,
                        |s, q| {
                            black_box(add(&mut s.engine, &q, &s.body));
                            q
                        },
                        |s, q| {
                            let id = get(&mut s.engine, &q);
                            ack(&mut s.engine, id);
                        },
                    )
                })
            });
            group.bench_function(BenchmarkId::new("getjob", jobs), |b| {
                b.iter_custom(|iters| {
                    s.measure(
                        iters,
                        |s| {
                            let q = s.queue();
                            add(&mut s.engine, &q, &s.body);
                            q
                        },
                        |s, q| get(&mut s.engine, black_box(&q)),
                        |s, id| ack(&mut s.engine, id),
                    )
                })
            });
            group.bench_function(BenchmarkId::new("ackjob", jobs), |b| {
                b.iter_custom(|iters| {
                    s.measure(
                        iters,
                        |s| {
                            let q = s.queue();
                            add(&mut s.engine, &q, &s.body);
                            get(&mut s.engine, &q)
                        },
                        |s, id| ack(&mut s.engine, black_box(id)),
                        |_, ()| {},
                    )
                })
            });
            group.bench_function(BenchmarkId::new("add_get_ack_cycle", jobs), |b| {
                b.iter(|| {
                    let q = s.queue();
                    add(&mut s.engine, &q, &s.body);
                    let id = get(&mut s.engine, &q);
                    ack(&mut s.engine, id);
                })
            });
            // The scheduler at steady state: a tick with nothing due.
            group.bench_function(BenchmarkId::new("idle_tick", jobs), |b| {
                b.iter(|| s.engine.tick(black_box(NOW + 1)))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
