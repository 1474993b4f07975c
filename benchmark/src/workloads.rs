//! Client tasks for each workload, the commands they send and the state
//! they share (operation budget, deadline, error count).
//!
//! * `addjob` / `getjob`: [`request_client`] sends `P` pre-encoded commands,
//!   reads `P` replies, and records for each op the time from the flush to
//!   its reply (to the ACK reply when acknowledging).
//! * `cycle` / `federated`: [`producer_client`] stamps each body with a send
//!   timestamp and a run id; [`consumer_client`] blocks on GETJOB/BRPOP,
//!   reads the stamp back and records the end-to-end latency.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::args::{AckMode, Config, Target, Workload, STAMP_LEN};
use crate::client::{ClientError, Conn};
use crate::stats::Latency;
use disque::protocol::resp::reply::{encode_command, Reply};

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Longest first-error text kept (server errors may echo a whole body).
const MAX_ERROR_TEXT: usize = 200;

/// Nanoseconds since a process-local epoch (the first call).
pub fn now_ns() -> u64 {
    ns_at(Instant::now())
}

/// `t` as nanoseconds since the process-local epoch (0 before it).
fn ns_at(t: Instant) -> u64 {
    ns(t.saturating_duration_since(*EPOCH.get_or_init(Instant::now)))
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

/// State shared by every client task of a run.
pub struct Shared {
    issued: AtomicU64,
    limit: u64,
    deadline: Option<Instant>,
    /// Completed primary operations (consumed jobs for cycle), for progress.
    pub done: AtomicU64,
    /// Jobs successfully produced (cycle).
    pub produced: AtomicU64,
    /// Fresh jobs consumed (cycle).
    pub consumed: AtomicU64,
    /// Producer tasks still running (cycle).
    pub producers_left: AtomicUsize,
    errors: AtomicU64,
    first_error: OnceLock<String>,
    /// Start of the measured phase.
    pub start: Instant,
    /// Nanoseconds between two operations when paced (`--rate`).
    interval_ns: Option<f64>,
}

impl Shared {
    /// State for a run of at most `limit` ops, started now.
    pub fn new(limit: u64, duration: Option<Duration>, producers: usize) -> Shared {
        let start = Instant::now();
        Shared {
            issued: AtomicU64::new(0),
            limit,
            deadline: duration.map(|d| start + d),
            done: AtomicU64::new(0),
            produced: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
            producers_left: AtomicUsize::new(producers),
            errors: AtomicU64::new(0),
            first_error: OnceLock::new(),
            start,
            interval_ns: None,
        }
    }

    /// Paces the run at `rate` operations per second in total.
    pub fn with_rate(mut self, rate: Option<f64>) -> Shared {
        self.interval_ns = rate.map(|r| 1e9 / r);
        self
    }

    /// With `--rate`, waits until operation `index` is due and returns
    /// the instant its latency is measured from; `None` without `--rate`
    /// (closed loop: latency runs from the actual send).
    ///
    /// An operation whose scheduled time has already passed when a client
    /// gets to it (the clients were all busy: the server is slow) is timed
    /// from its scheduled time, so the wait is counted and a stall is not
    /// hidden by sending fewer requests during it (coordinated omission).
    /// An operation a client was early for is timed from when the client
    /// woke up to send it: the runtime timer's wake-up delay (up to a
    /// millisecond) is the benchmark's, not the server's.
    pub async fn pace(&self, index: u64, res: &mut ClientResult) -> Option<Instant> {
        let iv = self.interval_ns?;
        let due = self.start + Duration::from_nanos((index as f64 * iv) as u64);
        let now = Instant::now();
        if due > now {
            tokio::time::sleep_until(due.into()).await;
            Some(Instant::now())
        } else {
            res.late += 1;
            res.max_behind = res.max_behind.max(now - due);
            Some(due)
        }
    }

    /// Reserves up to `want` operations: `(index of the first, count)`, or
    /// `None` when the budget is spent or the deadline has passed.
    pub fn claim(&self, want: u64) -> Option<(u64, u64)> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let prev = self.issued.fetch_add(want, Ordering::Relaxed);
        if prev >= self.limit {
            return None;
        }
        Some((prev, want.min(self.limit - prev)))
    }

    /// Counts one error and keeps its text if it is the first.
    pub fn error(&self, mut text: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.first_error.get().is_none() {
            if text.len() > MAX_ERROR_TEXT {
                let mut cut = MAX_ERROR_TEXT;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("...");
            }
            let _ = self.first_error.set(text);
        }
    }

    /// Errors so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Text of the first error, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.first_error.get().map(String::as_str)
    }

    /// Records `reply` if it is an error reply; returns true in that case.
    fn is_error(&self, reply: &Reply) -> bool {
        if let Reply::Error(e) = reply {
            self.error(e.clone());
            true
        } else {
            false
        }
    }

    fn producers_done(&self) -> bool {
        self.producers_left.load(Ordering::Acquire) == 0
    }
}

/// What one client task measured.
#[derive(Clone, Debug, Default)]
pub struct ClientResult {
    /// Completed operations (consumed fresh jobs for cycle consumers).
    pub ops: u64,
    /// Per-operation latency (round trip, from the scheduled send time
    /// with `--rate`; for producers the ADDJOB RTT).
    pub latency: Latency,
    /// End-to-end produce-to-consume latency (cycle consumers).
    pub e2e: Latency,
    /// Consume attempts that found no job.
    pub empty: u64,
    /// Jobs consumed that were not produced by this run.
    pub stale: u64,
    /// Jobs produced (cycle producers).
    pub produced: u64,
    /// Time since start of the last completed operation.
    pub last_op: Duration,
    /// `--rate`: batches already overdue when a client got to them.
    pub late: u64,
    /// `--rate`: how far behind schedule the latest of those was.
    pub max_behind: Duration,
}

impl ClientResult {
    /// Folds `other` into `self`.
    pub fn merge(&mut self, other: &ClientResult) {
        self.ops += other.ops;
        self.latency.merge(&other.latency);
        self.e2e.merge(&other.e2e);
        self.empty += other.empty;
        self.stale += other.stale;
        self.produced += other.produced;
        self.last_op = self.last_op.max(other.last_op);
        self.late += other.late;
        self.max_behind = self.max_behind.max(other.max_behind);
    }
}

/// Static description of the run: names, body, pre-encoded commands.
pub struct Plan {
    pub cfg: Config,
    queues: Vec<Vec<u8>>,
    body: Vec<u8>,
    nonce: [u8; 8],
    /// Pre-encoded produce command per queue (fixed body).
    produce: Vec<Vec<u8>>,
    /// Pre-encoded non-blocking consume command per queue.
    consume: Vec<Vec<u8>>,
    /// Pre-encoded blocking consume commands over all queues (cycle), one
    /// per rotation of the queue list so consumers do not all favour queue 0.
    block: Vec<Vec<u8>>,
}

impl Plan {
    /// Builds names and commands from the configuration.
    pub fn new(cfg: Config) -> Plan {
        let queues: Vec<Vec<u8>> = (0..cfg.queues)
            .map(|i| format!("{}:{i}", cfg.queue_prefix).into_bytes())
            .collect();
        let body = vec![b'x'; cfg.size];
        let mut seed = now_ns() ^ u64::from(std::process::id()).rotate_left(32);
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            seed ^= d.as_nanos() as u64;
        }
        let mut nonce = [0u8; 8];
        write_hex(&mut nonce, (seed ^ (seed >> 32)) & 0xffff_ffff);
        let mut plan = Plan {
            cfg,
            queues,
            body,
            nonce,
            produce: Vec::new(),
            consume: Vec::new(),
            block: Vec::new(),
        };
        plan.produce = (0..plan.queues.len())
            .map(|q| {
                let mut out = Vec::new();
                plan.encode_produce(&mut out, q, &plan.body);
                out
            })
            .collect();
        plan.consume = plan
            .queues
            .iter()
            .map(|q| {
                let mut out = Vec::new();
                match plan.cfg.target {
                    Target::Disque => {
                        encode_command::<&[u8]>(&mut out, &[b"GETJOB", b"NOHANG", b"FROM", q])
                    }
                    Target::Redis => encode_command::<&[u8]>(&mut out, &[b"RPOP", q]),
                }
                out
            })
            .collect();
        plan.block = (0..plan.queues.len())
            .map(|r| plan.encode_block(r))
            .collect();
        plan
    }

    fn encode_produce(&self, out: &mut Vec<u8>, queue: usize, body: &[u8]) {
        let q = &self.queues[queue];
        match self.cfg.target {
            Target::Redis => encode_command::<&[u8]>(out, &[b"LPUSH", q, body]),
            Target::Disque => {
                let mut args: Vec<&[u8]> = vec![b"ADDJOB", q, body, b"0"];
                let rep = self.cfg.replicate.map(|r| r.to_string());
                if let Some(r) = &rep {
                    args.push(b"REPLICATE");
                    args.push(r.as_bytes());
                }
                let retry = self.cfg.retry.map(|r| r.to_string());
                if let Some(r) = &retry {
                    args.push(b"RETRY");
                    args.push(r.as_bytes());
                }
                if self.cfg.async_add {
                    args.push(b"ASYNC");
                }
                encode_command(out, &args);
            }
        }
    }

    fn encode_block(&self, rotation: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut queues: Vec<&[u8]> = self.queues.iter().map(Vec::as_slice).collect();
        queues.rotate_left(rotation);
        match self.cfg.target {
            Target::Disque => {
                let ms = self.cfg.block.as_millis().max(1).to_string();
                let count = self.cfg.pipeline.to_string();
                let mut args: Vec<&[u8]> = vec![
                    b"GETJOB",
                    b"TIMEOUT",
                    ms.as_bytes(),
                    b"COUNT",
                    count.as_bytes(),
                    b"FROM",
                ];
                args.extend(&queues);
                encode_command(&mut out, &args);
            }
            Target::Redis => {
                let secs = format!("{:.3}", self.cfg.block.as_secs_f64().max(0.001));
                let mut args: Vec<&[u8]> = vec![b"BRPOP"];
                args.extend(&queues);
                args.push(secs.as_bytes());
                encode_command(&mut out, &args);
            }
        }
        out
    }

    fn queue_index(&self, op: u64) -> usize {
        (op % self.queues.len() as u64) as usize
    }

    fn encode_ack(&self, out: &mut Conn, id: &[u8]) {
        match self.cfg.ack {
            AckMode::AckJob => out.queue(&[b"ACKJOB", id]),
            AckMode::FastAck => out.queue(&[b"FASTACK", id]),
            AckMode::None => {}
        }
    }
}

/// A consumed job: id (empty for Redis) and body.
struct Job {
    id: Vec<u8>,
    body: Vec<u8>,
}

/// Extracts jobs from a consume reply (error replies already handled).
fn extract_jobs(target: Target, reply: Reply) -> Result<Vec<Job>, String> {
    match (target, reply) {
        (_, Reply::NilBulk | Reply::NilArray) => Ok(Vec::new()),
        (Target::Redis, Reply::Bulk(body)) => Ok(vec![Job {
            id: Vec::new(),
            body,
        }]),
        (Target::Redis, Reply::Array(items)) => match <[Reply; 2]>::try_from(items) {
            Ok([_, Reply::Bulk(body)]) => Ok(vec![Job {
                id: Vec::new(),
                body,
            }]),
            _ => Err("unexpected BRPOP reply shape".to_string()),
        },
        (Target::Disque, Reply::Array(jobs)) => jobs
            .into_iter()
            .map(|job| match job {
                Reply::Array(fields) if fields.len() >= 3 => {
                    let mut f = fields.into_iter().skip(1);
                    match (f.next(), f.next()) {
                        (Some(Reply::Bulk(id)), Some(Reply::Bulk(body))) => Ok(Job { id, body }),
                        _ => Err("GETJOB job entry without id/body strings".to_string()),
                    }
                }
                other => Err(format!("unexpected GETJOB job entry: {}", other.describe())),
            })
            .collect(),
        (_, other) => Err(format!("unexpected consume reply: {}", other.describe())),
    }
}

fn write_hex(out: &mut [u8], mut v: u64) {
    for b in out.iter_mut().rev() {
        *b = b"0123456789abcdef"[(v & 0xf) as usize];
        v >>= 4;
    }
}

fn read_hex(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some((acc << 4) | u64::from(v))
    })
}

/// Reads the send timestamp from a body stamped by this run, or `None`
/// for bodies from another run (or not stamped at all).
fn read_stamp(body: &[u8], nonce: &[u8; 8]) -> Option<u64> {
    if body.len() < STAMP_LEN || &body[16..STAMP_LEN] != nonce {
        return None;
    }
    read_hex(&body[..16])
}

/// Runs an `addjob` or `getjob` client until the budget or deadline ends.
pub async fn request_client(mut conn: Conn, plan: &Plan, shared: &Shared) -> ClientResult {
    let mut res = ClientResult::default();
    if let Err(e) = request_loop(&mut conn, plan, shared, &mut res).await {
        shared.error(format!("{}: {e}", conn.addr()));
    }
    res
}

async fn request_loop(
    conn: &mut Conn,
    plan: &Plan,
    shared: &Shared,
    res: &mut ClientResult,
) -> Result<(), ClientError> {
    let cfg = &plan.cfg;
    let consuming = cfg.workload == Workload::GetJob;
    let acking = consuming && cfg.ack != AckMode::None;
    let cmds = if consuming {
        &plan.consume
    } else {
        &plan.produce
    };
    let mut ids: Vec<Vec<u8>> = Vec::new();
    let mut lat: Vec<u64> = Vec::with_capacity(cfg.pipeline);
    while let Some((first, n)) = shared.claim(cfg.pipeline as u64) {
        let scheduled = shared.pace(first, res).await;
        for i in 0..n {
            conn.queue_raw(&cmds[plan.queue_index(first + i)]);
        }
        let t0 = scheduled.unwrap_or_else(Instant::now);
        conn.flush().await?;
        ids.clear();
        lat.clear();
        for _ in 0..n {
            let reply = conn.read_reply().await?;
            lat.push(ns(t0.elapsed()));
            if shared.is_error(&reply) {
                continue;
            }
            if consuming {
                match extract_jobs(cfg.target, reply) {
                    Ok(jobs) if jobs.is_empty() => res.empty += 1,
                    Ok(jobs) => ids.extend(jobs.into_iter().map(|j| j.id)),
                    Err(e) => shared.error(e),
                }
            } else {
                check_produce_reply(cfg.target, &reply, shared);
            }
        }
        if acking && !ids.is_empty() {
            for id in &ids {
                plan.encode_ack(conn, id);
            }
            conn.flush().await?;
            for _ in 0..ids.len() {
                let reply = conn.read_reply().await?;
                if !shared.is_error(&reply) && !matches!(reply, Reply::Int(_)) {
                    shared.error(format!("unexpected ACK reply: {}", reply.describe()));
                }
            }
            let t = ns(t0.elapsed());
            lat.iter_mut().for_each(|l| *l = t);
        }
        for &l in &lat {
            res.latency.record(l);
        }
        res.ops += n;
        res.last_op = shared.start.elapsed();
        shared.done.fetch_add(n, Ordering::Relaxed);
    }
    Ok(())
}

/// Returns true if the produce reply is the expected kind (errors recorded).
fn check_produce_reply(target: Target, reply: &Reply, shared: &Shared) -> bool {
    let ok = match target {
        Target::Disque => matches!(reply, Reply::Bulk(_) | Reply::Status(_)),
        Target::Redis => matches!(reply, Reply::Int(_)),
    };
    if !ok {
        shared.error(format!("unexpected produce reply: {}", reply.describe()));
    }
    ok
}

/// Inserts `count` jobs round-robin over the queues through `conns`
/// (pipelined, unmeasured). Returns the connections for reuse.
pub async fn prefill(
    conns: Vec<Conn>,
    plan: std::sync::Arc<Plan>,
    count: u64,
) -> Result<Vec<Conn>, String> {
    let budget = std::sync::Arc::new(Shared::new(count, None, 0));
    let mut handles = Vec::new();
    for mut conn in conns {
        let plan = plan.clone();
        let budget = budget.clone();
        handles.push(tokio::spawn(async move {
            let r: Result<(), String> = async {
                while let Some((first, n)) = budget.claim(64) {
                    for i in 0..n {
                        conn.queue_raw(&plan.produce[plan.queue_index(first + i)]);
                    }
                    conn.flush().await.map_err(|e| e.to_string())?;
                    for _ in 0..n {
                        let reply = conn.read_reply().await.map_err(|e| e.to_string())?;
                        if let Reply::Error(e) = &reply {
                            return Err(e.clone());
                        }
                        if !check_produce_reply(plan.cfg.target, &reply, &budget) {
                            return Err(format!("unexpected reply {}", reply.describe()));
                        }
                    }
                }
                Ok(())
            }
            .await;
            r.map(|()| conn)
        }));
    }
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.map_err(|e| format!("prefill task failed: {e}"))??);
    }
    Ok(out)
}

/// Runs a cycle producer until the budget or deadline ends.
pub async fn producer_client(mut conn: Conn, plan: &Plan, shared: &Shared) -> ClientResult {
    let mut res = ClientResult::default();
    if let Err(e) = producer_loop(&mut conn, plan, shared, &mut res).await {
        shared.error(format!("{}: {e}", conn.addr()));
    }
    shared.producers_left.fetch_sub(1, Ordering::AcqRel);
    res
}

async fn producer_loop(
    conn: &mut Conn,
    plan: &Plan,
    shared: &Shared,
    res: &mut ClientResult,
) -> Result<(), ClientError> {
    let mut body = plan.body.clone();
    body[16..STAMP_LEN].copy_from_slice(&plan.nonce);
    let mut enc = Vec::new();
    while let Some((first, n)) = shared.claim(plan.cfg.pipeline as u64) {
        let scheduled = shared.pace(first, res).await;
        enc.clear();
        for i in 0..n {
            // End-to-end latency runs from the scheduled time too.
            write_hex(&mut body[..16], scheduled.map_or_else(now_ns, ns_at));
            plan.encode_produce(&mut enc, plan.queue_index(first + i), &body);
        }
        conn.queue_raw(&enc);
        let t0 = scheduled.unwrap_or_else(Instant::now);
        conn.flush().await?;
        let mut ok = 0;
        for _ in 0..n {
            let reply = conn.read_reply().await?;
            res.latency.record(ns(t0.elapsed()));
            if !shared.is_error(&reply) && check_produce_reply(plan.cfg.target, &reply, shared) {
                ok += 1;
            }
        }
        res.produced += ok;
        shared.produced.fetch_add(ok, Ordering::Release);
    }
    Ok(())
}

/// Runs a cycle consumer until producers are done and every produced job
/// was consumed (or a blocking wait comes back empty after they are done).
/// `index` picks which rotation of the queue list this consumer asks for.
pub async fn consumer_client(
    mut conn: Conn,
    index: usize,
    plan: &Plan,
    shared: &Shared,
) -> ClientResult {
    let mut res = ClientResult::default();
    let cmd = &plan.block[index % plan.block.len()];
    if let Err(e) = consumer_loop(&mut conn, cmd, plan, shared, &mut res).await {
        shared.error(format!("{}: {e}", conn.addr()));
    }
    res
}

async fn consumer_loop(
    conn: &mut Conn,
    cmd: &[u8],
    plan: &Plan,
    shared: &Shared,
    res: &mut ClientResult,
) -> Result<(), ClientError> {
    let per_read = conn.timeout() + plan.cfg.block;
    let acks = plan.cfg.target == Target::Disque && plan.cfg.ack != AckMode::None;
    let with_next = acks && plan.cfg.ack_with_next;
    // --ack-with-next: IDs of the jobs consumed last turn, acknowledged in
    // the same write as the next GETJOB.
    let mut unacked: Vec<Vec<u8>> = Vec::new();
    loop {
        let done = shared.producers_done()
            && shared.consumed.load(Ordering::Acquire) >= shared.produced.load(Ordering::Acquire);
        // Last turn's acknowledgements go first, in this turn's write.
        for id in &unacked {
            plan.encode_ack(conn, id);
        }
        let pending_acks = std::mem::take(&mut unacked).len();
        if done {
            conn.flush().await?;
            read_acks(conn, shared, pending_acks).await?;
            return Ok(());
        }
        conn.queue_raw(cmd);
        let t0 = Instant::now();
        conn.flush().await?;
        read_acks(conn, shared, pending_acks).await?;
        let reply = conn.read_reply_within(per_read).await?;
        if shared.is_error(&reply) {
            // A server refusing to serve consumers would make us spin: stop.
            return Ok(());
        }
        let jobs = match extract_jobs(plan.cfg.target, reply) {
            Ok(jobs) => jobs,
            Err(e) => {
                shared.error(e);
                return Ok(());
            }
        };
        if jobs.is_empty() {
            res.empty += 1;
            if shared.producers_done() {
                return Ok(());
            }
            continue;
        }
        let now = now_ns();
        let mut fresh = 0;
        for job in &jobs {
            match read_stamp(&job.body, &plan.nonce) {
                Some(sent) => {
                    res.e2e.record(now.saturating_sub(sent));
                    fresh += 1;
                }
                None => res.stale += 1,
            }
        }
        if with_next {
            unacked.extend(jobs.into_iter().map(|j| j.id));
        } else if acks {
            for job in &jobs {
                plan.encode_ack(conn, &job.id);
            }
            conn.flush().await?;
            read_acks(conn, shared, jobs.len()).await?;
        }
        res.latency.record(ns(t0.elapsed()));
        res.ops += fresh;
        res.last_op = shared.start.elapsed();
        shared.consumed.fetch_add(fresh, Ordering::AcqRel);
        shared.done.fetch_add(fresh, Ordering::Relaxed);
    }
}

/// Reads `n` ACKJOB/FASTACK replies (integers).
async fn read_acks(conn: &mut Conn, shared: &Shared, n: usize) -> Result<(), ClientError> {
    for _ in 0..n {
        let reply = conn.read_reply().await?;
        if !shared.is_error(&reply) && !matches!(reply, Reply::Int(_)) {
            shared.error(format!("unexpected ACK reply: {}", reply.describe()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trip() {
        let nonce = *b"0badcafe";
        let mut body = vec![b'x'; 40];
        write_hex(&mut body[..16], 0x0123_4567_89ab_cdef);
        body[16..24].copy_from_slice(&nonce);
        assert_eq!(read_stamp(&body, &nonce), Some(0x0123_4567_89ab_cdef));
        assert_eq!(read_stamp(&body, b"deadbeef"), None);
        assert_eq!(read_stamp(b"short", &nonce), None);
        body[3] = b'z';
        assert_eq!(read_stamp(&body, &nonce), None);
    }

    #[test]
    fn claim_respects_limit() {
        let s = Shared::new(10, None, 0);
        assert_eq!(s.claim(4), Some((0, 4)));
        assert_eq!(s.claim(4), Some((4, 4)));
        assert_eq!(s.claim(4), Some((8, 2)));
        assert_eq!(s.claim(4), None);
        let s = Shared::new(u64::MAX, Some(Duration::ZERO), 0);
        assert_eq!(s.claim(1), None);
    }

    #[test]
    fn extract_disque_and_redis_jobs() {
        let job = |id: &[u8], body: &[u8]| {
            Reply::Array(vec![
                Reply::Bulk(b"q".to_vec()),
                Reply::Bulk(id.to_vec()),
                Reply::Bulk(body.to_vec()),
            ])
        };
        let jobs = extract_jobs(
            Target::Disque,
            Reply::Array(vec![job(b"D1", b"a"), job(b"D2", b"b")]),
        )
        .expect("jobs");
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (jobs[1].id.as_slice(), jobs[1].body.as_slice()),
            (&b"D2"[..], &b"b"[..])
        );
        assert!(extract_jobs(Target::Disque, Reply::NilArray)
            .expect("nil")
            .is_empty());
        assert!(extract_jobs(Target::Disque, Reply::Int(3)).is_err());
        let brpop = Reply::Array(vec![Reply::Bulk(b"q".to_vec()), Reply::Bulk(b"v".to_vec())]);
        assert_eq!(
            extract_jobs(Target::Redis, brpop).expect("brpop")[0].body,
            b"v"
        );
        assert_eq!(
            extract_jobs(Target::Redis, Reply::Bulk(b"w".to_vec())).expect("rpop")[0].body,
            b"w"
        );
        assert!(extract_jobs(Target::Redis, Reply::NilBulk)
            .expect("nil")
            .is_empty());
    }
}
