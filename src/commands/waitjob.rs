//! WAITJOB <id> [TIMEOUT <ms>] (our extension, docs/COMPATIBILITY.md):
//! block until the job ends on this node. Replies `+acked`, `+expired`,
//! `+deleted` or `+dead`, or a null bulk at the timeout (0 = none).

use bytes::Bytes;

use super::{blocked, eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::engine::waitjob::WaitJobOutcome;
use crate::engine::JobEnd;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

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
        WaitJobOutcome::Ended(end) => Outcome::Reply(encode_end(end)),
        WaitJobOutcome::Blocked => blocked(ctx),
        WaitJobOutcome::Error(e) => err(e),
    }
}

/// WAITJOB's reply: `+acked` and the like, a null bulk at the timeout.
pub fn encode_end(end: JobEnd) -> Reply {
    match end.name() {
        Some(word) => Reply::Status(word.into()),
        None => Reply::NullBulk,
    }
}
