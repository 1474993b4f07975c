//! SHOW: the 30-element job description (docs/COMMANDS.md#show), shared with JSCAN REPLY ALL.

use super::args::Args;
use super::{Ctx, Outcome};
use crate::domain::job::{Job, JobState, F_DELIVERED};
use crate::domain::job_ext::{JobExt, ON_FAIL_DEADLETTER, ON_FAIL_RUN};
use crate::engine::{Engine, JobHandle};
use crate::protocol::resp::Reply;

pub fn show(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let id = match Args::new(args).id() {
        Ok(id) => id,
        Err(e) => return super::err(e),
    };
    match ctx.node.engine.lookup(&id) {
        Some(h) => {
            let reply = describe(&ctx.node.engine, h, ctx.now);
            let holes = spilled_hole(&ctx.node.engine, h, Vec::new())
                .into_iter()
                .collect();
            super::spill::reply_with_bodies(ctx, reply, holes)
        }
        None => Reply::NullBulk.into(),
    }
}

/// Index of the `body` pair in `describe`'s map.
const BODY_PAIR: usize = 14;

/// The hole for the body of job `h` in its `describe` reply found at
/// `path`, when that body is on disk.
pub fn spilled_hole(
    engine: &Engine,
    h: JobHandle,
    mut path: Vec<usize>,
) -> Option<super::spill::Hole> {
    let (id, loc) = engine.spilled_body(h)?;
    path.push(BODY_PAIR);
    Some(super::spill::Hole { path, id, loc })
}

fn node_ids(engine: &Engine, nodes: impl Iterator<Item = u32>) -> Reply {
    Reply::Array(
        nodes
            .filter_map(|n| engine.cluster().get(n))
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
    let confirmed = match engine.confirmed_of(h) {
        Some(c) => node_ids(engine, c.iter()),
        None => Reply::Array(Vec::new()),
    };
    let mut pairs: Vec<(&str, Reply)> = vec![
        ("id", Reply::bulk(j.id.0)),
        (
            "queue",
            j.queue.as_deref().map_or(Reply::NullBulk, Reply::bulk),
        ),
        (
            "state",
            // A job held by ADDJOB AFTER until its dependencies settle.
            if engine.is_waiting(h) {
                Reply::bulk_str("waiting")
            } else {
                Reply::bulk_str(j.state.name())
            },
        ),
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
    if let Some(x) = engine.ext_of(h) {
        extension_pairs(j, x, &mut pairs);
    }
    // A map in RESP3; the flat 30-element array Disque sends in RESP2.
    Reply::map(pairs)
}

/// The SHOW array for a job stored whole on disk (`engine::cold`), from
/// its record: a plain queued job. Its next requeue and wake-up are not
/// kept on disk (null here; SHOW reads the job back and has them).
pub fn describe_record(r: &crate::protocol::job_codec::JobRecord, now: u64) -> Reply {
    let num = |v: u64| Reply::Integer(v.min(i64::MAX as u64) as i64);
    let ttl = i64::from(r.etime) - (now / 1000) as i64;
    Reply::map(vec![
        ("id", Reply::bulk(r.id)),
        ("queue", Reply::Bulk(r.queue.clone())),
        ("state", Reply::bulk_str(JobState::Queued.name())),
        ("repl", num(u64::from(r.repl))),
        ("ttl", Reply::Integer(ttl.max(0))),
        ("ctime", num(r.ctime)),
        ("delay", num(u64::from(r.delay))),
        ("retry", num(u64::from(r.retry))),
        ("nacks", num(u64::from(r.nacks))),
        ("additional-deliveries", num(u64::from(r.deliv))),
        (
            "nodes-delivered",
            Reply::Array(r.nodes.iter().map(|n| Reply::bulk(*n)).collect()),
        ),
        ("nodes-confirmed", Reply::Array(Vec::new())),
        ("next-requeue-within", Reply::NullBulk),
        ("next-awake-within", Reply::NullBulk),
        ("body", Reply::Bulk(r.body.clone())),
    ])
}

/// Our fields, appended after Disque's 15 pairs and only for jobs created
/// with an extension option, so Disque clients see the 30 elements they
/// expect for every other job (docs/COMPATIBILITY.md).
fn extension_pairs(j: &Job, x: &JobExt, pairs: &mut Vec<(&str, Reply)>) {
    let opt = |b: &Option<bytes::Bytes>| {
        b.as_ref()
            .map_or(Reply::NullBulk, |b| Reply::Bulk(b.clone()))
    };
    let queue = j.queue.as_deref().unwrap_or_default();
    let dead_queue = if x.max_deliveries == 0 {
        Reply::NullBulk
    } else if x.is_dead() {
        Reply::bulk(queue)
    } else {
        Reply::Bulk(x.dead_queue_for(queue))
    };
    let delivered =
        u64::from(j.nacks) + u64::from(j.deliv) + u64::from(j.has(F_DELIVERED) || x.is_dead());
    pairs.push(("backoff", Reply::Integer(i64::from(x.backoff_max))));
    pairs.push((
        "max-deliveries",
        Reply::Integer(i64::from(x.max_deliveries)),
    ));
    pairs.push(("dead-letter-queue", dead_queue));
    pairs.push(("dedup-key", opt(&x.dedup_key)));
    pairs.push(("dead", Reply::Integer(i64::from(x.is_dead()))));
    pairs.push(("origin-queue", opt(&x.origin)));
    pairs.push(("deliveries", Reply::Integer(delivered as i64)));
    pairs.push(("priority", Reply::Integer(i64::from(x.priority_level()))));
    let p = x.progress.as_ref();
    pairs.push((
        "progress",
        p.map_or(Reply::NullBulk, |p| Reply::Integer(i64::from(p.percent))),
    ));
    pairs.push((
        "progress-desc",
        p.map_or(Reply::NullBulk, |p| Reply::Bulk(p.desc.clone())),
    ));
    pairs.push((
        "progress-data",
        p.map_or(Reply::NullBulk, |p| Reply::Bulk(p.data.clone())),
    ));
    // Only for jobs added with AFTER (the pairs above stay as they were).
    if !x.after.is_empty() {
        pairs.push((
            "after",
            Reply::Array(x.after.iter().cloned().map(Reply::Bulk).collect()),
        ));
        let policy = match x.on_fail {
            ON_FAIL_RUN => "run",
            ON_FAIL_DEADLETTER => "deadletter",
            _ => "cancel",
        };
        pairs.push(("on-fail", Reply::bulk_str(policy)));
    }
}
