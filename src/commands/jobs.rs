//! Per-job state commands: ENQUEUE, NACK, DEQUEUE, DELJOB (WIRE 3.5-3.8)
//! and WORKING (3.7).

use bytes::Bytes;

use super::{err, parse_ids, Ctx, Outcome};
use crate::engine::{add_ms, rand250, BusOut, Engine, JobHandle};
use crate::errors::WireError;
use crate::job::{JobId, JobState, F_BCAST_WILLQUEUE};
use crate::resp::Reply;

/// Validate every ID first (one bad ID fails the whole command), then
/// apply `f` to each known job; reply with how many `f` accepted.
pub(super) fn count_known(
    ctx: &mut Ctx,
    args: &[Bytes],
    mut f: impl FnMut(&mut Engine, JobHandle, u64) -> bool,
) -> Outcome {
    let ids = match parse_ids(&args[1..]) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    let now = ctx.now;
    let engine = &mut ctx.node.engine;
    let mut n = 0;
    for id in &ids {
        if let Some(h) = engine.lookup(id) {
            if f(engine, h, now) {
                n += 1;
            }
        }
    }
    Reply::Integer(n).into()
}

/// Only active jobs go through the enqueue procedure (WIRE 3.5).
pub fn enqueue(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    count_known(ctx, args, |e, h, now| {
        e.job(h).is_some_and(|j| j.state == JobState::Active) && e.enqueue(h, false, now)
    })
}

pub fn dequeue(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    count_known(ctx, args, |e, h, _| e.dequeue(h))
}

pub fn deljob(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    count_known(ctx, args, |e, h, now| {
        e.delete_job(h, now);
        true
    })
}

pub fn working(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let Some(id) = JobId::parse(&args[1]) else {
        return err(WireError::BadId);
    };
    let now = ctx.now;
    let engine = &mut ctx.node.engine;
    let Some(h) = engine.lookup(&id) else {
        return err(WireError::NoJob);
    };
    let Some(j) = engine.job(h) else {
        return err(WireError::NoJob);
    };
    let ctime_ms = j.ctime / 1_000_000;
    let life = (i128::from(j.etime) * 1000) - i128::from(ctime_ms);
    let elapsed = i128::from(now) - i128::from(ctime_ms);
    if life > 0 && elapsed > life / 2 {
        return err(WireError::TooLate);
    }
    engine.dequeue(h);
    let jitter = rand250(&mut engine.rng);
    let Some(j) = engine.store.get_mut(h) else {
        return err(WireError::NoJob);
    };
    j.flags |= F_BCAST_WILLQUEUE;
    if j.retry != 0 && j.qtime != 0 {
        j.qtime = add_ms(now + u64::from(j.retry) * 1000, jitter);
    }
    let retry = j.retry;
    engine.apply_backoff(h, now);
    engine.update_awake(h, now);
    engine.send_to_delivered(h, BusOut::Working { job: id, delay: 0 });
    Reply::Integer(i64::from(retry)).into()
}
