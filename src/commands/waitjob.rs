//! WAITJOB <id> [TIMEOUT <ms>] (our extension, docs/COMPATIBILITY.md):
//! block until the job ends on this node. Replies `+acked`, `+expired`,
//! `+deleted` or `+dead`, or a null bulk at the timeout (0 = none).

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::engine::waitjob::WaitJobOutcome;
use crate::errors::WireError;
use crate::job::JobId;

pub fn waitjob(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let Some(id) = JobId::parse(&args[1]) else {
        return err(WireError::BadId);
    };
    let mut timeout = 0u64;
    match args.len() {
        2 => {}
        4 if eq_ic(&args[2], "timeout") => match string2ll(&args[3]) {
            None => return err(WireError::TimeoutNotInteger),
            Some(t) if t < 0 => return err(WireError::TimeoutNegative),
            Some(t) => timeout = t as u64,
        },
        _ => return syntax_error(),
    }
    match ctx.node.engine.waitjob(ctx.client.id, id, timeout, ctx.now) {
        WaitJobOutcome::Reply(r) => Outcome::Reply(r),
        WaitJobOutcome::Blocked(rx) => Outcome::Blocked(rx),
    }
}
