//! CANCEL (docs/COMMANDS.md#cancel): by job ID, or every job of a queue
//! held here that no consumer has yet, optionally only those whose body
//! matches a glob. The engine cancels (`engine::cancel`).

use super::args::Args;
use super::{parse_ids, syntax_error, Ctx, Outcome};
use crate::config::glob::glob_match;
use crate::protocol::resp::Reply;

pub fn cancel(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    if a.eat("queue") {
        return cancel_queue(ctx, a);
    }
    let ids = match parse_ids(&mut a) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Reply::Integer(ctx.node.engine.cancel(&ids, ctx.now)).into()
}

/// `CANCEL QUEUE <queue> [MATCH <glob>]`; `a` is after QUEUE.
fn cancel_queue(ctx: &mut Ctx, mut a: Args) -> Outcome {
    let Some(queue) = a.next() else {
        return syntax_error();
    };
    let pattern = match a.remaining() {
        0 => None,
        2 if a.eat("match") => a.next(),
        _ => return syntax_error(),
    };
    let ids: Vec<_> = ctx
        .node
        .engine
        .cancel_candidates(queue, ctx.now)
        .into_iter()
        .filter(|(_, body)| {
            pattern.is_none_or(|p| glob_match(p, body.as_deref().unwrap_or_default(), false))
        })
        .map(|(id, _)| id)
        .collect();
    Reply::Integer(ctx.node.engine.cancel(&ids, ctx.now)).into()
}
