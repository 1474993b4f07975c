//! A seeded random workload against one real spilling node with the AOF
//! on (docs/PERSISTENCE.md#9-spill-tiers), checked against a model of
//! every job after each step: ADDJOB in pipelined batches, GETJOB NOHANG,
//! a consumer blocked until a producer arrives, ACKJOB, FASTACK, DELJOB,
//! NACK, DEQUEUE, ENQUEUE, QLEN, SHOW, QPEEK, BGREWRITEAOF and kill -9
//! with a restart. A job is never lost, never comes back once
//! acknowledged or deleted, always has its own body, and a blocked
//! consumer is never woken empty. The seed picks whole jobs or bodies
//! only, `aof-enqueue-jobs-once` and the rewrite rule; a failure prints
//! the seed to rerun (`DISQUE_SPILL_MODEL_BASE=<seed>
//! DISQUE_SPILL_MODEL_SEEDS=1`; `DISQUE_SPILL_MODEL_STEPS` for longer
//! runs).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{env_u64, POLL, WAIT};

const QUEUES: [&str; 3] = ["mq0", "mq1", "mq2"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Queued,
    Active,
}

struct Job {
    queue: usize,
    body: String,
    state: State,
}

struct Run {
    seed: u64,
    rng: SmallRng,
    server: Server,
    c: Client,
    jobs: BTreeMap<String, Job>,
    gone: BTreeSet<String>,
    seq: u64,
}

impl Run {
    #[track_caller]
    fn fail(&self, what: String) -> ! {
        let s = self.seed;
        panic!(
            "seed {s}: {what}\n(rerun: DISQUE_SPILL_MODEL_BASE={s} DISQUE_SPILL_MODEL_SEEDS=1)\n{}",
            self.server.output()
        );
    }

    /// Up to `k` IDs of jobs in `state`, picked at random.
    fn pick(&mut self, state: State, k: usize) -> Vec<String> {
        let all: Vec<&String> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == state)
            .map(|(id, _)| id)
            .collect();
        all.choose_multiple(&mut self.rng, k.min(all.len()))
            .map(|s| s.to_string())
            .collect()
    }

    fn pick_gone(&mut self, k: usize) -> Vec<String> {
        let all: Vec<&String> = self.gone.iter().collect();
        all.choose_multiple(&mut self.rng, k.min(all.len()))
            .map(|s| s.to_string())
            .collect()
    }

    fn new_body(&mut self) -> String {
        self.seq += 1;
        let len = *[10, 300, 1500, 3000].choose(&mut self.rng).unwrap_or(&10);
        format!("b{}-{}-{}", self.seed, self.seq, "x".repeat(len))
    }

    fn add(&mut self, q: usize, body: String, reply: &Reply) {
        let Some(id) = reply.as_text().filter(|t| t.starts_with("D-")) else {
            self.fail(format!("ADDJOB -> {reply:?}"));
        };
        self.jobs.insert(
            id,
            Job {
                queue: q,
                body,
                state: State::Queued,
            },
        );
    }

    fn addjob_cmd(q: usize, body: &str) -> Vec<String> {
        [
            "ADDJOB", QUEUES[q], body, "0", "RETRY", "3600", "TTL", "86400",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Jobs a GETJOB delivered: each must be queued in the model, in that
    /// queue, with its body; they become active.
    fn delivered(&mut self, r: &Reply, what: &str) {
        let Some(items) = r.as_array() else {
            return;
        };
        for item in items {
            let f = item.array();
            let (queue, id, body) = (f[0].text(), f[1].text(), f[2].text());
            let ok = self.jobs.get(&id).is_some_and(|j| {
                j.state == State::Queued && QUEUES[j.queue] == queue && j.body == body
            });
            if !ok {
                let known = self.jobs.get(&id).map(|j| j.state);
                let gone = self.gone.contains(&id);
                self.fail(format!(
                    "{what} delivered {id}: model {known:?}, gone {gone}"
                ));
            }
            if let Some(j) = self.jobs.get_mut(&id) {
                j.state = State::Active;
            }
        }
    }

    fn check_qlen(&mut self, when: &str) {
        for (q, name) in QUEUES.iter().enumerate() {
            let want = self
                .jobs
                .values()
                .filter(|j| j.queue == q && j.state == State::Queued)
                .count() as i64;
            let got = self.c.cmd(&["QLEN", name]).int();
            if got != want {
                self.fail(format!("{when}: QLEN {name} = {got}, model {want}"));
            }
        }
    }

    /// SHOW of `ids`: each known job with its state and body, each gone
    /// job nil. `learn`: take the state from the node (after a restart).
    fn check_show(&mut self, ids: &[String], learn: bool, when: &str) {
        for chunk in ids.chunks(500) {
            let cmds: Vec<Vec<String>> = chunk
                .iter()
                .map(|id| vec!["SHOW".to_string(), id.clone()])
                .collect();
            for (id, r) in chunk.iter().zip(self.c.pipeline(&cmds)) {
                let Some(j) = self.jobs.get(id) else {
                    if !r.is_nil() {
                        self.fail(format!("{when}: {id} came back after it was gone"));
                    }
                    continue;
                };
                if r.is_nil() {
                    self.fail(format!("{when}: {id} ({:?}) lost", j.state));
                }
                let state = match r.field("state").text().as_str() {
                    "queued" => State::Queued,
                    "active" => State::Active,
                    other => self.fail(format!("{when}: {id} in state {other}")),
                };
                if r.field("body").text() != j.body {
                    self.fail(format!("{when}: {id} has another body"));
                }
                if learn {
                    if let Some(j) = self.jobs.get_mut(id) {
                        j.state = state;
                    }
                } else if state != j.state {
                    self.fail(format!("{when}: {id} {state:?}, model {:?}", j.state));
                }
            }
        }
    }

    fn step(&mut self, step: usize) {
        let ops = [
            ("add", 30),
            ("get", 15),
            ("ack", 8),
            ("fastack", 3),
            ("del", 3),
            ("nack", 5),
            ("dequeue", 3),
            ("enqueue", 3),
            ("qlen", 4),
            ("show", 3),
            ("peek", 2),
            ("blocked", 4),
            ("rewrite", 1),
            ("kill", 1),
        ];
        let op = ops
            .choose_weighted(&mut self.rng, |o| o.1)
            .map_or("qlen", |o| o.0);
        match op {
            "add" => {
                let n = self.rng.gen_range(1..=200);
                let batch: Vec<(usize, String)> = (0..n)
                    .map(|_| (self.rng.gen_range(0..QUEUES.len()), self.new_body()))
                    .collect();
                let cmds: Vec<Vec<String>> =
                    batch.iter().map(|(q, b)| Self::addjob_cmd(*q, b)).collect();
                let replies = self.c.pipeline(&cmds);
                for ((q, body), r) in batch.into_iter().zip(replies) {
                    self.add(q, body, &r);
                }
            }
            "get" => {
                let q = QUEUES[self.rng.gen_range(0..QUEUES.len())];
                let count = self.rng.gen_range(1..=200).to_string();
                let r = self
                    .c
                    .cmd(&["GETJOB", "NOHANG", "COUNT", &count, "FROM", q]);
                self.delivered(&r, "GETJOB NOHANG");
            }
            "ack" | "fastack" | "del" => {
                let k = self.rng.gen_range(0..100);
                let mut ids = self.pick(State::Active, k);
                let queued = self.rng.gen_range(0..20);
                ids.extend(self.pick(State::Queued, queued));
                let stale = self.rng.gen_range(0..3);
                ids.extend(self.pick_gone(stale));
                if ids.is_empty() {
                    return;
                }
                let cmd = match op {
                    "ack" => "ACKJOB",
                    "fastack" => "FASTACK",
                    _ => "DELJOB",
                };
                let known = ids.iter().filter(|id| self.jobs.contains_key(*id)).count();
                let mut args = vec![cmd.to_string()];
                args.extend(ids.iter().cloned());
                let got = self.c.cmd(&args).int();
                if got != known as i64 {
                    self.fail(format!(
                        "{cmd} of {} IDs -> {got}, model {known}",
                        ids.len()
                    ));
                }
                for id in ids {
                    if self.jobs.remove(&id).is_some() {
                        self.gone.insert(id);
                    }
                }
            }
            "nack" | "enqueue" | "dequeue" => {
                let (from, to, cmd) = match op {
                    "nack" => (State::Active, State::Queued, "NACK"),
                    "enqueue" => (State::Active, State::Queued, "ENQUEUE"),
                    _ => (State::Queued, State::Active, "DEQUEUE"),
                };
                let k = self.rng.gen_range(1..50);
                let ids = self.pick(from, k);
                if ids.is_empty() {
                    return;
                }
                let mut args = vec![cmd.to_string()];
                args.extend(ids.iter().cloned());
                let got = self.c.cmd(&args).int();
                if got != ids.len() as i64 {
                    self.fail(format!("{cmd} of {} jobs -> {got}", ids.len()));
                }
                for id in ids {
                    if let Some(j) = self.jobs.get_mut(&id) {
                        j.state = to;
                    }
                }
            }
            "qlen" => self.check_qlen(&format!("step {step}")),
            "show" => {
                let mut ids = self.pick(State::Queued, 20);
                ids.extend(self.pick(State::Active, 20));
                ids.extend(self.pick_gone(10));
                self.check_show(&ids, false, &format!("step {step}"));
            }
            "peek" => {
                let q = QUEUES[self.rng.gen_range(0..QUEUES.len())];
                let n = ["1", "5", "50", "-5"].choose(&mut self.rng).unwrap_or(&"1");
                let r = self.c.cmd(&["QPEEK", q, n]);
                for item in r.array() {
                    let id = item.array()[1].text();
                    if self.jobs.get(&id).is_none_or(|j| j.state != State::Queued) {
                        self.fail(format!("QPEEK {q} showed {id}, not queued in the model"));
                    }
                }
            }
            "blocked" => self.blocked_consumer(),
            "rewrite" => {
                // "Background append only file rewriting started", or
                // already in progress: both fine.
                self.c.cmd(&["BGREWRITEAOF"]);
            }
            _ => self.restart(step),
        }
    }

    /// A consumer blocked without a timeout, then a producer (an ADDJOB,
    /// or an ENQUEUE of active jobs): the consumer gets jobs, never an
    /// empty reply.
    fn blocked_consumer(&mut self) {
        let q = self.rng.gen_range(0..QUEUES.len());
        let count = self.rng.gen_range(1..=50).to_string();
        let mut consumer = self.server.client();
        consumer.send(&["GETJOB", "TIMEOUT", "0", "COUNT", &count, "FROM", QUEUES[q]]);
        // Served at once (jobs queued or on their way from disk), or
        // blocked: only then does the producer run.
        let blocked = wait_until(WAIT, POLL, || {
            self.c.info_int("blocked_clients") == 1 || consumer_has_reply(&consumer)
        });
        if !blocked {
            self.fail("the consumer neither blocked nor got a reply".into());
        }
        if consumer_has_reply(&consumer) {
            let r = consumer.read_reply();
            self.delivered(&r, "a GETJOB served at once");
            if r.is_nil() {
                self.fail(format!("GETJOB TIMEOUT 0 on {} answered nil", QUEUES[q]));
            }
            return;
        }
        // Active jobs of this queue: an ENQUEUE of another queue's jobs
        // would leave the consumer waiting.
        let k = self.rng.gen_range(1..20);
        let active: Vec<String> = self
            .pick(State::Active, usize::MAX)
            .into_iter()
            .filter(|id| self.jobs.get(id).is_some_and(|j| j.queue == q))
            .take(k)
            .collect();
        if self.rng.gen_bool(0.3) && !active.is_empty() {
            let mut args = vec!["ENQUEUE".to_string()];
            args.extend(active.iter().cloned());
            self.c.cmd(&args);
            for id in active {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.state = State::Queued;
                }
            }
        } else {
            let body = self.new_body();
            let r = self.c.cmd(&Self::addjob_cmd(q, &body));
            self.add(q, body, &r);
        }
        let Some(r) = consumer.try_read_reply(Duration::from_secs(10)) else {
            self.fail(format!("a blocked GETJOB on {} got no reply", QUEUES[q]));
        };
        if r.is_nil() || r.as_array().is_some_and(|a| a.is_empty()) {
            let qlen = self.c.cmd(&["QLEN", QUEUES[q]]).int();
            self.fail(format!(
                "a blocked GETJOB (no timeout) on {} answered {r:?} with QLEN {qlen}",
                QUEUES[q]
            ));
        }
        self.delivered(&r, "a blocked GETJOB");
    }

    /// kill -9 and restart: every job back with its body, no gone job
    /// back; states are learnt from the node (a restart may queue active
    /// jobs again).
    fn restart(&mut self, step: usize) {
        self.server.restart();
        self.c = self.server.client();
        let ids: Vec<String> = self.jobs.keys().cloned().collect();
        let when = format!("restart at step {step}");
        self.check_show(&ids, true, &when);
        let gone: Vec<String> = self.gone.iter().cloned().collect();
        self.check_show(&gone, false, &when);
        self.check_qlen(&when);
    }

    /// Every job queued again and drained: each delivered once, with its
    /// body; nothing else.
    fn drain(&mut self) {
        self.check_qlen("the end");
        let active = self.pick(State::Active, usize::MAX);
        for chunk in active.chunks(500) {
            let mut args = vec!["ENQUEUE".to_string()];
            args.extend(chunk.iter().cloned());
            self.c.cmd(&args);
            for id in chunk {
                if let Some(j) = self.jobs.get_mut(id) {
                    j.state = State::Queued;
                }
            }
        }
        self.check_qlen("the end, every job queued");
        for q in QUEUES {
            loop {
                let r = self.c.cmd(&["GETJOB", "NOHANG", "COUNT", "500", "FROM", q]);
                if r.is_nil() {
                    break;
                }
                self.delivered(&r, "the final drain");
                let mut args = vec!["ACKJOB".to_string()];
                args.extend(r.array().iter().map(|j| j.array()[1].text()));
                self.c.cmd(&args);
            }
        }
        let left: Vec<&String> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == State::Queued)
            .map(|(id, _)| id)
            .collect();
        if !left.is_empty() {
            self.fail(format!("{} jobs never delivered by the drain", left.len()));
        }
    }
}

/// Whether a reply waits on the consumer's socket (without reading it).
fn consumer_has_reply(c: &Client) -> bool {
    let s = c.stream();
    let mut b = [0u8; 1];
    let _ = s.set_nonblocking(true);
    let has = matches!(s.peek(&mut b), Ok(n) if n > 0);
    let _ = s.set_nonblocking(false);
    has
}

fn run(seed: u64, steps: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let whole = if rng.gen_bool(0.7) { "yes" } else { "no" };
    let once = if rng.gen_bool(0.5) { "yes" } else { "no" };
    let pct = if rng.gen_bool(0.5) { "30" } else { "100" };
    let server = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--spill",
        "yes",
        "--spill-whole-jobs",
        whole,
        "--spill-watermark",
        "0",
        "--maxmemory",
        "64mb",
        "--auto-aof-rewrite-min-size",
        "1mb",
        "--auto-aof-rewrite-percentage",
        pct,
        "--aof-enqueue-jobs-once",
        once,
    ]));
    let c = server.client();
    let mut r = Run {
        seed,
        rng,
        server,
        c,
        jobs: BTreeMap::new(),
        gone: BTreeSet::new(),
        seq: 0,
    };
    for step in 0..steps {
        r.step(step);
    }
    r.drain();
}

#[test]
fn a_random_workload_with_restarts_keeps_every_job_on_a_spilling_node() {
    let base = env_u64("DISQUE_SPILL_MODEL_BASE", 1);
    let seeds = env_u64("DISQUE_SPILL_MODEL_SEEDS", 4);
    let steps = env_u64("DISQUE_SPILL_MODEL_STEPS", 250) as usize;
    for seed in base..base + seeds {
        run(seed, steps);
    }
}
