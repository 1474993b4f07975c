//! SHOW: the 30-element job description (WIRE 3.9), shared with JSCAN REPLY ALL.

use bytes::Bytes;

use super::{Ctx, Outcome};
use crate::engine::{Engine, JobHandle};
use crate::job::JobId;
use crate::resp::Reply;

pub fn show(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let Some(id) = JobId::parse(&args[1]) else {
        return super::err(crate::errors::WireError::BadId);
    };
    match ctx.node.engine.lookup(&id) {
        Some(h) => describe(&ctx.node.engine, h, ctx.now).into(),
        None => Reply::NullBulk.into(),
    }
}

fn node_ids(engine: &Engine, nodes: impl Iterator<Item = u32>) -> Reply {
    Reply::Array(
        nodes
            .filter_map(|n| engine.cluster.get(n))
            .map(|n| Reply::bulk(n.id))
            .collect(),
    )
}

/// The SHOW array for a job.
pub fn describe(engine: &Engine, h: JobHandle, now: u64) -> Reply {
    let Some(j) = engine.job(h) else {
        return Reply::NullBulk;
    };
    let dummy = j.is_dummy();
    let num = |v: u64| Reply::Integer(v.min(i64::MAX as u64) as i64);
    let ttl = i64::from(j.etime) - (now / 1000) as i64;
    let confirmed = match engine.confirmed.get(&h) {
        Some(c) => node_ids(engine, c.iter()),
        None => Reply::Array(Vec::new()),
    };
    let pairs: Vec<(&str, Reply)> = vec![
        ("id", Reply::bulk(j.id.0)),
        (
            "queue",
            j.queue.as_deref().map_or(Reply::NullBulk, Reply::bulk),
        ),
        ("state", Reply::bulk_str(j.state.name())),
        ("repl", num(if dummy { 0 } else { u64::from(j.repl) })),
        ("ttl", Reply::Integer(ttl.max(0))),
        ("ctime", num(if dummy { 0 } else { j.ctime })),
        ("delay", num(if dummy { 0 } else { u64::from(j.delay) })),
        ("retry", num(if dummy { 0 } else { u64::from(j.retry) })),
        ("nacks", num(u64::from(j.nacks))),
        ("additional-deliveries", num(u64::from(j.deliv))),
        (
            "nodes-delivered",
            node_ids(engine, j.nodes_delivered.iter()),
        ),
        ("nodes-confirmed", confirmed),
        (
            "next-requeue-within",
            if j.qtime == 0 {
                Reply::NullBulk
            } else {
                num(j.qtime.saturating_sub(now))
            },
        ),
        (
            "next-awake-within",
            if j.awakeme == 0 {
                Reply::NullBulk
            } else {
                num(j.awakeme.saturating_sub(now))
            },
        ),
        (
            "body",
            j.body.as_deref().map_or(Reply::NullBulk, Reply::bulk),
        ),
    ];
    // A map in RESP3; the flat 30-element array Disque sends in RESP2.
    Reply::map(pairs)
}
