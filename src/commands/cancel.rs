//! CANCEL (docs/COMMANDS.md#cancel): by job ID, or every job of a queue
//! held here that no consumer has yet, optionally only those whose body
//! matches a glob. The engine cancels (`engine::cancel`).

use bytes::Bytes;

use super::{eq_ic, parse_ids, syntax_error, Ctx, Outcome};
use crate::config::glob::glob_match;
use crate::protocol::resp::Reply;

pub fn cancel(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if args.get(1).is_some_and(|a| eq_ic(a, "queue")) {
        return cancel_queue(ctx, args);
    }
    let ids = match parse_ids(&args[1..]) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Reply::Integer(ctx.node.engine.cancel(&ids, ctx.now)).into()
}

/// `CANCEL QUEUE <queue> [MATCH <glob>]`.
fn cancel_queue(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pattern = match args.len() {
        3 => None,
        5 if eq_ic(&args[3], "match") => Some(&args[4]),
        _ => return syntax_error(),
    };
    let ids: Vec<_> = ctx
        .node
        .engine
        .cancel_candidates(&args[2], ctx.now)
        .into_iter()
        .filter(|(_, body)| {
            pattern.is_none_or(|p| glob_match(p, body.as_deref().unwrap_or_default(), false))
        })
        .map(|(id, _)| id)
        .collect();
    Reply::Integer(ctx.node.engine.cancel(&ids, ctx.now)).into()
}
