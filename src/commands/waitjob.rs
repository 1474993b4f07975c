//! WAITJOB <id> [TIMEOUT <ms>] (our extension, docs/COMPATIBILITY.md):
//! block until the job ends on this node. Replies `+acked`, `+expired`,
//! `+deleted` or `+dead`, or a null bulk at the timeout (0 = none).

use super::args::Args;
use super::{blocked, err, syntax_error, Ctx, Outcome};
use crate::engine::waitjob::WaitJobOutcome;
use crate::engine::JobEnd;
use crate::protocol::resp::Reply;

pub fn waitjob(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let id = match a.id() {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    let timeout = match a.remaining() {
        0 => 0,
        2 if a.eat("timeout") => match a.timeout() {
            Ok(t) => t,
            Err(e) => return err(e),
        },
        _ => return syntax_error(),
    };
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
