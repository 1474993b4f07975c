//! QLEN, QPEEK, QSTAT (docs/COMMANDS.md#queue-commands), with our `CLUSTER` form of QLEN and
//! QSTAT (engine::qlen_cluster).

use bytes::Bytes;

use super::{eq_ic, err, string2ll, Ctx, Outcome};
use crate::engine::qlen_cluster::CountOutcome;
use crate::errors::WireError;
use crate::queue::Queue;
use crate::resp::Reply;

/// Disque's arity (2) unless the third argument is our `CLUSTER`: any
/// other shape gets Disque's wrong-arity error, byte for byte.
fn cluster_form(args: &[Bytes], name: &'static str) -> Result<bool, Outcome> {
    match args.len() {
        2 => Ok(false),
        3 if eq_ic(&args[2], "cluster") => Ok(true),
        _ => Err(err(WireError::WrongArity(name))),
    }
}

fn counted(o: CountOutcome) -> Outcome {
    match o {
        CountOutcome::Reply(r) => Outcome::Reply(r),
        CountOutcome::Blocked(rx) => Outcome::Blocked(rx),
    }
}

pub fn qlen(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    match cluster_form(args, "qlen") {
        Err(e) => e,
        Ok(false) => Reply::Integer(ctx.node.engine.queue_len(&args[1]) as i64).into(),
        Ok(true) => counted(
            ctx.node
                .engine
                .count_cluster(args[1].clone(), None, ctx.now),
        ),
    }
}

pub fn qpeek(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let Some(count) = string2ll(&args[2]) else {
        return err(WireError::NotInteger);
    };
    let engine = &ctx.node.engine;
    let Some(q) = engine.queue(&args[1]) else {
        return Reply::Array(Vec::new()).into();
    };
    let n = count.unsigned_abs().min(q.len() as u64) as usize;
    let handles: Vec<u32> = if count >= 0 {
        q.handles().take(n).collect()
    } else {
        q.handles().rev().take(n).collect()
    };
    Reply::Array(
        handles
            .into_iter()
            .map(|h| engine.job_reply(h, false))
            .collect(),
    )
    .into()
}

pub fn qstat(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let cluster = match cluster_form(args, "qstat") {
        Ok(c) => c,
        Err(e) => return e,
    };
    let now = ctx.now;
    let engine = &ctx.node.engine;
    let Some(q) = engine.queue(&args[1]) else {
        return Reply::NullArray.into();
    };
    let now_s = now / 1000;
    let import_from: Vec<Reply> = q
        .fed
        .responders
        .keys()
        .filter_map(|&n| engine.cluster().get(n))
        .map(|n| Reply::bulk(n.id))
        .collect();
    let pairs = vec![
        ("name", Reply::Bulk(q.name.clone())),
        ("len", Reply::Integer(q.len() as i64)),
        ("age", Reply::Integer(now_s.saturating_sub(q.ctime) as i64)),
        ("idle", Reply::Integer(now_s.saturating_sub(q.atime) as i64)),
        ("blocked", Reply::Integer(q.blocked.len() as i64)),
        ("import-from", Reply::Array(import_from)),
        ("import-rate", Reply::Integer(q.fed.import_rate(now) as i64)),
        ("jobs-in", Reply::Integer(q.jobs_in as i64)),
        ("jobs-out", Reply::Integer(q.jobs_out as i64)),
        ("pause", Reply::bulk_str(Queue::pause_name(q.paused))),
    ];
    if cluster {
        return counted(
            ctx.node
                .engine
                .count_cluster(args[1].clone(), Some(pairs), now),
        );
    }
    Reply::map(pairs).into()
}
