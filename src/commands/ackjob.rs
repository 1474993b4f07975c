//! ACKJOB and FASTACK (docs/COMMANDS.md#ackjob).

use super::args::Args;
use super::{parse_ids, Ctx, Outcome};
use crate::protocol::resp::Reply;

pub fn ackjob(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let ids = match parse_ids(&mut Args::new(args)) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Reply::Integer(ctx.node.engine.ackjob(&ids, ctx.now)).into()
}

pub fn fastack(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let ids = match parse_ids(&mut Args::new(args)) {
        Ok(ids) => ids,
        Err(e) => return e,
    };
    Reply::Integer(ctx.node.engine.fastack(&ids, ctx.now)).into()
}
