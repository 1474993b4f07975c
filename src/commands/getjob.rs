//! GETJOB argument parsing (docs/COMMANDS.md#getjob); popping and blocking live in the engine.

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::errors::WireError;

pub fn getjob(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut req = GetJobRequest {
        nohang: false,
        timeout: 0,
        count: 1,
        withcounters: false,
        queues: Vec::new(),
    };
    let mut i = 1;
    let mut from = false;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "nohang") {
            req.nohang = true;
        } else if eq_ic(a, "withcounters") {
            req.withcounters = true;
        } else if eq_ic(a, "timeout") {
            let Some(v) = args.get(i + 1) else {
                return syntax_error();
            };
            match string2ll(v) {
                None => return err(WireError::TimeoutNotInteger),
                Some(t) if t < 0 => return err(WireError::TimeoutNegative),
                Some(t) => req.timeout = t as u64,
            }
            i += 1;
        } else if eq_ic(a, "count") {
            let Some(v) = args.get(i + 1) else {
                return syntax_error();
            };
            match string2ll(v) {
                Some(c) if c > 0 => req.count = c as u64,
                _ => return err(WireError::CountRange),
            }
            i += 1;
        } else if eq_ic(a, "from") {
            from = true;
            req.queues = args[i + 1..].to_vec();
            break;
        } else {
            return syntax_error();
        }
        i += 1;
    }
    if !from || req.queues.is_empty() {
        return syntax_error();
    }
    match ctx.node.engine.getjob(ctx.client.id, req, ctx.now) {
        GetJobOutcome::Reply(r) => Outcome::Reply(r),
        GetJobOutcome::Blocked(rx) => Outcome::Blocked(rx),
        GetJobOutcome::Error(e) => err(e),
    }
}
