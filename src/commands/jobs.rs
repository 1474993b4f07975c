//! Per-job state commands: ENQUEUE, NACK, DEQUEUE, DELJOB (docs/COMMANDS.md)
//! and WORKING (3.7).

use super::args::Args;
use super::{err, parse_ids, Ctx, Outcome};
use crate::domain::job::JobState;
use crate::engine::{Engine, JobHandle};
use crate::protocol::resp::Reply;

/// Validate every ID first (one bad ID fails the whole command), then
/// apply `f` to each known job; reply with how many `f` accepted.
pub(super) fn count_known(
    ctx: &mut Ctx,
    mut ids: Args,
    mut f: impl FnMut(&mut Engine, JobHandle, u64) -> bool,
) -> Outcome {
    let ids = match parse_ids(&mut ids) {
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

/// Only active jobs go through the enqueue procedure (docs/COMMANDS.md#enqueue).
pub fn enqueue(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    count_known(ctx, Args::new(args), |e, h, now| {
        e.job(h).is_some_and(|j| j.state == JobState::Active) && e.enqueue(h, false, now)
    })
}

pub fn dequeue(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    count_known(ctx, Args::new(args), |e, h, _| e.dequeue(h))
}

pub fn deljob(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    count_known(ctx, Args::new(args), |e, h, now| {
        e.delete_job(h, now);
        true
    })
}

pub fn working(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let id = match a.id() {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    if !a.is_done() {
        return super::progress::working_with_progress(ctx, id, a);
    }
    match ctx.node.engine.working(&id, ctx.now) {
        Ok(retry) => Reply::Integer(i64::from(retry)).into(),
        Err(e) => err(e),
    }
}
