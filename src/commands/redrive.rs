//! REDRIVE (our extension, docs/COMPATIBILITY.md): move dead-lettered jobs
//! back to the queue they died in, delivery counters reset.
//!
//! * `REDRIVE <id> [<id> ...]`: the listed jobs this node holds and knows
//!   as dead; IDs are validated first, as for ACKJOB.
//! * `REDRIVE FROM <dead-queue> [COUNT <n>]`: up to n (default all) dead
//!   jobs queued here in that queue, oldest first.
//!
//! Replies the number of jobs moved.

use super::args::Args;
use super::jobs::count_known;
use super::{err, syntax_error, Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn redrive(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    if !a.eat("from") {
        return count_known(ctx, a, |e, h, now| e.redrive(h, now));
    }
    let Some(queue) = a.next() else {
        return syntax_error();
    };
    let count = match a.remaining() {
        0 => usize::MAX,
        2 if a.eat("count") => match a.int_in(1..=i64::MAX, WireError::CountRange) {
            Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Err(e) => return err(e),
        },
        _ => return syntax_error(),
    };
    let now = ctx.now;
    let engine = &mut ctx.node.engine;
    let mut moved = 0;
    for h in engine.dead_jobs_in(queue, count) {
        if engine.redrive(h, now) {
            moved += 1;
        }
    }
    Reply::Integer(moved).into()
}
