//! `disque-benchmark`: a load generator for Disque (Redis protocol job
//! queue), with a Redis list baseline (`--target redis`).
//!
//! Flow: parse flags (clap), connect every client (and the idle
//! connections) before the clock starts, pre-fill for `getjob`, run the
//! client tasks on a small multi-thread tokio runtime, merge the per-client
//! HDR histograms and print a report (human, one line with `-q`, CSV with
//! `--csv`, or one JSON object with every option and result with `--json`).
//! Replies are decoded by the library's client-side decoder,
//! `disque::protocol::resp::reply`, the one the integration tests use.

mod args;
mod client;
mod stats;
mod workloads;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use args::{Config, Parsed, Target, Workload};
use client::Conn;
use stats::{us, Latency};
use workloads::{ClientResult, Plan, Shared};

const EXIT_USAGE: u8 = 1;
const EXIT_CONNECT: u8 = 2;
const EXIT_ERRORS: u8 = 3;

fn main() -> ExitCode {
    let cfg = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(cfg)) => *cfg,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("disque-benchmark: cannot start runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(run(cfg));
    ExitCode::from(code)
}

/// Opens `count` connections, the i-th to `hosts[i % len]`.
async fn connect_all(
    hosts: &[String],
    count: usize,
    timeout: Duration,
) -> Result<Vec<Conn>, String> {
    let mut conns = Vec::with_capacity(count);
    for i in 0..count {
        let addr = &hosts[i % hosts.len()];
        let conn = Conn::connect(addr, timeout)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        conns.push(conn);
    }
    Ok(conns)
}

/// Roles of the connections of a run.
struct Connections {
    idle: Vec<Conn>,
    workers: Vec<Conn>,
    consumers: Vec<Conn>,
}

async fn open(cfg: &Config) -> Result<Connections, String> {
    let idle = connect_all(&cfg.hosts, cfg.idle_connections, cfg.timeout).await?;
    if !cfg.workload.is_cycle() {
        let workers = connect_all(&cfg.hosts, cfg.clients, cfg.timeout).await?;
        return Ok(Connections {
            idle,
            workers,
            consumers: Vec::new(),
        });
    }
    let (produce_hosts, consume_hosts) = match cfg.workload {
        Workload::Federated => (vec![cfg.hosts[0].clone()], vec![cfg.hosts[1].clone()]),
        _ if !cfg.consume_hosts.is_empty() => (cfg.hosts.clone(), cfg.consume_hosts.clone()),
        _ => (cfg.hosts.clone(), cfg.hosts.clone()),
    };
    let workers = connect_all(&produce_hosts, args::producers(cfg), cfg.timeout).await?;
    let consumers = connect_all(&consume_hosts, cfg.consumers, cfg.timeout).await?;
    Ok(Connections {
        idle,
        workers,
        consumers,
    })
}

async fn run(cfg: Config) -> u8 {
    let conns = match open(&cfg).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("disque-benchmark: {e}");
            return EXIT_CONNECT;
        }
    };
    let idle = conns.idle;
    let plan = Arc::new(Plan::new(cfg.clone()));
    let mut workers = conns.workers;

    if cfg.workload == Workload::GetJob && cfg.prefill > 0 {
        let t = Instant::now();
        workers = match workloads::prefill(workers, plan.clone(), cfg.prefill).await {
            Ok(w) => w,
            Err(e) => {
                eprintln!("disque-benchmark: prefill failed: {e}");
                return EXIT_CONNECT;
            }
        };
        if !cfg.quiet && !cfg.csv && !cfg.json {
            eprintln!(
                "prefilled {} jobs in {:.2} s",
                cfg.prefill,
                t.elapsed().as_secs_f64()
            );
        }
    }

    let producers = workers.len();
    let shared = Arc::new(Shared::new(cfg.requests, cfg.duration, producers).with_rate(cfg.rate));
    let mut handles = Vec::new();
    for conn in workers {
        let (plan, shared) = (plan.clone(), shared.clone());
        let cycle = cfg.workload.is_cycle();
        handles.push(tokio::spawn(async move {
            if cycle {
                workloads::producer_client(conn, &plan, &shared).await
            } else {
                workloads::request_client(conn, &plan, &shared).await
            }
        }));
    }
    let mut consumer_handles = Vec::new();
    for (i, conn) in conns.consumers.into_iter().enumerate() {
        let (plan, shared) = (plan.clone(), shared.clone());
        consumer_handles.push(tokio::spawn(async move {
            workloads::consumer_client(conn, i, &plan, &shared).await
        }));
    }

    let show_progress = !cfg.quiet && !cfg.json && std::io::stderr().is_terminal();
    let progress = show_progress.then(|| tokio::spawn(progress_loop(shared.clone())));

    let mut main_res = ClientResult::default();
    for h in handles {
        match h.await {
            Ok(r) => main_res.merge(&r),
            Err(e) => shared.error(format!("client task failed: {e}")),
        }
    }
    let produce_elapsed = shared.start.elapsed();
    let mut cons_res = ClientResult::default();
    for h in consumer_handles {
        match h.await {
            Ok(r) => cons_res.merge(&r),
            Err(e) => shared.error(format!("client task failed: {e}")),
        }
    }
    let wall = shared.start.elapsed();
    if let Some(p) = progress {
        p.abort();
        let _ = p.await;
        eprint!("\r{:70}\r", "");
    }
    drop(idle);

    let report = Report::new(&cfg, &main_res, &cons_res, produce_elapsed, wall);
    report.print(&cfg, &shared);
    if cfg.strict && shared.errors() > 0 {
        return EXIT_ERRORS;
    }
    0
}

async fn progress_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut last = 0u64;
    loop {
        tick.tick().await;
        let done = shared.done.load(Ordering::Relaxed);
        let secs = shared.start.elapsed().as_secs_f64();
        if secs >= 2.0 {
            eprint!(
                "\r{:>6.1}s  ops {:>10}  current {:>10} ops/s  errors {}   ",
                secs,
                done,
                done - last,
                shared.errors()
            );
            let _ = std::io::stderr().flush();
        }
        last = done;
    }
}

/// Final numbers of a run.
struct Report {
    ops: u64,
    elapsed: Duration,
    latency: Latency,
    /// Cycle only: producer side.
    produce: Option<(u64, Duration, Latency)>,
    empty: u64,
    stale: u64,
    /// `--rate`: batches sent behind schedule, and the worst lag.
    late: u64,
    max_behind: Duration,
}

impl Report {
    fn new(
        cfg: &Config,
        main: &ClientResult,
        cons: &ClientResult,
        produce_elapsed: Duration,
        wall: Duration,
    ) -> Report {
        if cfg.workload.is_cycle() {
            // Consumers may wait one blocking timeout after the last job:
            // measure up to the last consumed job.
            let elapsed = if cons.ops > 0 { cons.last_op } else { wall };
            Report {
                ops: cons.ops,
                elapsed,
                latency: cons.e2e.clone(),
                produce: Some((main.produced, produce_elapsed, main.latency.clone())),
                empty: cons.empty,
                stale: cons.stale,
                late: main.late,
                max_behind: main.max_behind,
            }
        } else {
            Report {
                ops: main.ops,
                elapsed: wall,
                latency: main.latency.clone(),
                produce: None,
                empty: main.empty,
                stale: 0,
                late: main.late,
                max_behind: main.max_behind,
            }
        }
    }

    fn ops_per_sec(&self) -> f64 {
        rate(self.ops, self.elapsed)
    }

    fn print(&self, cfg: &Config, shared: &Shared) {
        let h = &self.latency;
        if cfg.json {
            println!("{}", self.json(cfg, shared));
            return;
        }
        if cfg.csv {
            if cfg.csv_header {
                println!(
                    "target,workload,clients,pipeline,size,ops_per_sec,p50_us,p99_us,p999_us,max_us,ops,errors"
                );
            }
            println!(
                "{},{},{},{},{},{:.1},{},{},{},{},{},{}",
                cfg.target.name(),
                cfg.workload.name(),
                cfg.clients,
                cfg.pipeline,
                cfg.size,
                self.ops_per_sec(),
                us(h.percentile(50.0)),
                us(h.percentile(99.0)),
                us(h.percentile(99.9)),
                us(h.max()),
                self.ops,
                shared.errors()
            );
        } else if cfg.quiet {
            println!(
                "{} {}: {:.2} ops/s, p50={} p99={} p999={} max={} us, errors={}",
                cfg.target.name(),
                cfg.workload.name(),
                self.ops_per_sec(),
                us(h.percentile(50.0)),
                us(h.percentile(99.0)),
                us(h.percentile(99.9)),
                us(h.max()),
                shared.errors()
            );
        } else {
            self.print_long(cfg, shared);
        }
        if let Some(e) = shared.first_error() {
            eprintln!("first error: {e}");
        }
    }

    /// The `--json` object: tool, version, every resolved option, results.
    fn json(&self, cfg: &Config, shared: &Shared) -> serde_json::Value {
        let produce = self.produce.as_ref().map(|(ops, elapsed, lat)| {
            serde_json::json!({
                "ops": ops,
                "elapsed_s": elapsed.as_secs_f64(),
                "ops_per_sec": rate(*ops, *elapsed),
                "latency": lat.summary(),
            })
        });
        let schedule = cfg.rate.map(|r| {
            serde_json::json!({
                "rate": r,
                "late_batches": self.late,
                "max_behind_ms": self.max_behind.as_secs_f64() * 1000.0,
            })
        });
        serde_json::json!({
            "tool": "disque-benchmark",
            "version": env!("CARGO_PKG_VERSION"),
            "options": cfg,
            "results": {
                "ops": self.ops,
                "elapsed_s": self.elapsed.as_secs_f64(),
                "ops_per_sec": self.ops_per_sec(),
                "errors": shared.errors(),
                "first_error": shared.first_error(),
                "latency_kind": if cfg.workload.is_cycle() { "end_to_end" } else { "round_trip" },
                "latency_from": if cfg.rate.is_some() { "scheduled_send" } else { "send" },
                "latency": self.latency.summary(),
                "empty": self.empty,
                "stale": self.stale,
                "schedule": schedule,
                "produce": produce,
            },
        })
    }

    fn print_long(&self, cfg: &Config, shared: &Shared) {
        let h = &self.latency;
        println!(
            "====== {} {} ======",
            cfg.target.name(),
            cfg.workload.name()
        );
        println!("  nodes:       {}", cfg.hosts.join(", "));
        if cfg.workload.is_cycle() {
            println!(
                "  clients:     {} producers, {} consumers",
                args::producers(cfg),
                cfg.consumers
            );
        } else {
            println!("  clients:     {}", cfg.clients);
        }
        println!(
            "  pipeline:    {}   body: {} bytes   queues: {}{}",
            cfg.pipeline,
            cfg.size,
            cfg.queues,
            if cfg.idle_connections > 0 {
                format!("   idle connections: {}", cfg.idle_connections)
            } else {
                String::new()
            }
        );
        println!(
            "  completed:   {} ops in {:.3} s",
            self.ops,
            self.elapsed.as_secs_f64()
        );
        println!("  throughput:  {:.2} ops/s", self.ops_per_sec());
        let what = if cfg.workload.is_cycle() {
            "end-to-end latency"
        } else {
            "latency"
        };
        println!("  {what} (us): {}", latency_line(h));
        if let Some((produced, elapsed, lat)) = &self.produce {
            println!(
                "  produced:    {} jobs, {:.2} ops/s; {} RTT (us): {}",
                produced,
                rate(*produced, *elapsed),
                match cfg.target {
                    Target::Disque => "ADDJOB",
                    Target::Redis => "LPUSH",
                },
                latency_line(lat)
            );
        }
        if self.empty > 0 {
            println!("  empty:       {} consume calls found no job", self.empty);
        }
        if self.stale > 0 {
            println!(
                "  stale:       {} jobs from earlier runs consumed",
                self.stale
            );
        }
        if let Some(r) = cfg.rate {
            println!(
                "  schedule:    {r} ops/s; latency from the scheduled send time; {} batches sent late (at most {:.3} ms)",
                self.late,
                self.max_behind.as_secs_f64() * 1000.0
            );
        }
        println!("  errors:      {}", shared.errors());
    }
}

fn latency_line(h: &Latency) -> String {
    format!(
        "p50={} p99={} p999={} max={} (min={} mean={:.1})",
        us(h.percentile(50.0)),
        us(h.percentile(99.0)),
        us(h.percentile(99.9)),
        us(h.max()),
        us(h.min()),
        h.mean() / 1000.0
    )
}

fn rate(ops: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        ops as f64 / s
    } else {
        0.0
    }
}
