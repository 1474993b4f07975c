//! QLEN, QPEEK, QSTAT (docs/COMMANDS.md#queue-commands), with our `CLUSTER` form of QLEN and
//! QSTAT (engine::qlen_cluster).

use bytes::Bytes;

use super::args::Args;
use super::{blocked, err, Ctx, Outcome};
use crate::domain::queue::Queue;
use crate::engine::qlen_cluster::{CountOutcome, QStat};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// The queue, and whether our `CLUSTER` follows it: Disque's arity (2)
/// otherwise, and any other shape gets Disque's wrong-arity error, byte
/// for byte.
fn cluster_form<'a>(args: &'a [&'a [u8]], name: &'static str) -> Result<(&'a [u8], bool), Outcome> {
    let mut a = Args::new(args);
    let queue = a.arg();
    match a.remaining() {
        0 => Ok((queue, false)),
        1 if a.eat("cluster") => Ok((queue, true)),
        _ => Err(err(WireError::WrongArity(name))),
    }
}

/// Start a CLUSTER count; `qstat` for QSTAT CLUSTER.
fn count(ctx: &mut Ctx, queue: &[u8], qstat: Option<QStat>) -> Outcome {
    let client = ctx.client.id;
    match ctx
        .node
        .engine
        .count_cluster(client, Bytes::copy_from_slice(queue), qstat, ctx.now)
    {
        CountOutcome::Counted { total, qstat } => encode_count(total, qstat).into(),
        CountOutcome::Blocked => blocked(ctx),
    }
}

/// The reply to QLEN CLUSTER (the total), or to QSTAT CLUSTER (QSTAT's
/// fields with `len-cluster`).
pub fn encode_count(total: u64, qstat: Option<QStat>) -> Reply {
    let n = i64::try_from(total).unwrap_or(i64::MAX);
    match qstat {
        None => Reply::Integer(n),
        Some(s) => encode_qstat(s, Some(n)),
    }
}

/// QSTAT's map, in Disque's field order, then our fields in the order
/// they were added: `len-cluster` (CLUSTER form only), `producers-waiting`
/// (while producers wait, and always in the CLUSTER form).
fn encode_qstat(s: QStat, len_cluster: Option<i64>) -> Reply {
    let mut pairs = Vec::with_capacity(12);
    pairs.extend([
        ("name", Reply::Bulk(s.name)),
        ("len", Reply::Integer(s.len as i64)),
        ("age", Reply::Integer(s.age as i64)),
        ("idle", Reply::Integer(s.idle as i64)),
        ("blocked", Reply::Integer(s.blocked as i64)),
        (
            "import-from",
            Reply::Array(s.import_from.into_iter().map(Reply::bulk).collect()),
        ),
        ("import-rate", Reply::Integer(s.import_rate as i64)),
        ("jobs-in", Reply::Integer(s.jobs_in as i64)),
        ("jobs-out", Reply::Integer(s.jobs_out as i64)),
        ("pause", Reply::bulk_str(Queue::pause_name(s.paused))),
    ]);
    if let Some(n) = len_cluster {
        pairs.push(("len-cluster", Reply::Integer(n)));
    }
    // Only while producers wait (they opted in with WAIT), or in the
    // CLUSTER form (ours anyway): a plain QSTAT stays Disque's 20
    // elements, byte for byte, for deployments that never use WAIT.
    if s.producers > 0 || len_cluster.is_some() {
        pairs.push(("producers-waiting", Reply::Integer(s.producers as i64)));
    }
    // Only while jobs of the queue wait for dependencies (ADDJOB AFTER).
    if s.waiting > 0 {
        pairs.push(("jobs-waiting", Reply::Integer(s.waiting as i64)));
    }
    // Only for a queue given a QLIMIT (an extension).
    if let Some(l) = s.limit {
        let lim = l.limit;
        pairs.extend([
            ("limit-rate", Reply::Integer(i64::from(lim.rate))),
            ("limit-interval", Reply::Integer(lim.interval_ms as i64)),
            ("limit-inflight", Reply::Integer(i64::from(lim.inflight))),
            ("limit-rate-share", Reply::Integer(i64::from(l.rate_share))),
            (
                "limit-inflight-share",
                Reply::Integer(i64::from(l.inflight_share)),
            ),
            ("limit-window-used", Reply::Integer(l.window_used as i64)),
            (
                "limit-inflight-used",
                Reply::Integer(l.inflight_used as i64),
            ),
        ]);
    }
    Reply::map(pairs)
}

pub fn qlen(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    match cluster_form(args, "qlen") {
        Err(e) => e,
        Ok((queue, false)) => Reply::Integer(ctx.node.engine.queue_len(queue) as i64).into(),
        Ok((queue, true)) => count(ctx, queue, None),
    }
}

pub fn qpeek(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let queue = a.arg();
    let count = match a.int(WireError::NotInteger) {
        Ok(n) => n,
        Err(e) => return err(e),
    };
    // Jobs stored whole on disk among those shown come back first, once.
    let fault = if ctx.client.paged_in {
        None
    } else {
        ctx.node.engine.cold_fault_peek(queue, count)
    };
    if let Some(t) = fault {
        return Outcome::PageIn(crate::node::spill::wait_cold(ctx.node, t));
    }
    let engine = &ctx.node.engine;
    let Some(q) = engine.queue(queue) else {
        return Reply::Array(Vec::new()).into();
    };
    let n = count.unsigned_abs().min(q.len() as u64) as usize;
    let handles: Vec<u32> = if count >= 0 {
        q.handles().take(n).collect()
    } else {
        q.handles().rev().take(n).collect()
    };
    // Bodies on disk are read by the spill thread (`spill`).
    let holes: Vec<super::spill::Hole> = handles
        .iter()
        .enumerate()
        .filter_map(|(i, &h)| {
            let (id, loc) = engine.spilled_body(h)?;
            Some(super::spill::Hole {
                path: vec![i, 2],
                id,
                loc,
            })
        })
        .collect();
    let reply = Reply::Array(
        handles
            .into_iter()
            .map(|h| {
                engine
                    .delivered(h, false)
                    .map_or(Reply::NullBulk, super::getjob::encode_job)
            })
            .collect(),
    );
    super::spill::reply_with_bodies(ctx, reply, holes)
}

pub fn qstat(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let (queue, cluster) = match cluster_form(args, "qstat") {
        Ok(c) => c,
        Err(e) => return e,
    };
    let Some(stat) = ctx.node.engine.qstat(queue, ctx.now) else {
        return Reply::NullArray.into();
    };
    if cluster {
        return count(ctx, queue, Some(stat));
    }
    encode_qstat(stat, None).into()
}
