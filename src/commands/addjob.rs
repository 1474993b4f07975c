//! ADDJOB argument parsing (WIRE 3.1 validation order); the engine does the rest.

use bytes::Bytes;

use super::{eq_ic, err, parse_i64, syntax_error, Ctx, Outcome};
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::errors::WireError;

pub fn addjob(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut req = AddJobRequest::new(args[1].clone(), args[2].clone());
    let mut i = 4;
    while i < args.len() {
        let opt = &args[i];
        let value = args.get(i + 1);
        let needs_value = ["replicate", "delay", "retry", "ttl", "maxlen"]
            .iter()
            .any(|o| eq_ic(opt, o));
        if eq_ic(opt, "async") {
            req.asynchronous = true;
            i += 1;
            continue;
        }
        let Some(value) = value.filter(|_| needs_value) else {
            return syntax_error();
        };
        let n = parse_i64(value);
        if eq_ic(opt, "replicate") {
            match n {
                Some(n) if (1..=65535).contains(&n) => req.replicate = Some(n as u32),
                _ => return err(WireError::ReplicateRange),
            }
        } else if eq_ic(opt, "ttl") {
            match n {
                Some(n) if n > 0 => req.ttl = Some(n.min(i64::from(u32::MAX)) as u32),
                _ => return err(WireError::TtlRange),
            }
        } else if eq_ic(opt, "retry") {
            match n {
                Some(n) if n >= 0 => req.retry = Some(n.min(i64::from(u32::MAX)) as u32),
                _ => return err(WireError::RetryRange),
            }
        } else if eq_ic(opt, "delay") {
            match n {
                Some(n) if n >= 0 => req.delay = n.min(i64::from(u32::MAX)) as u32,
                _ => return err(WireError::DelayRange),
            }
        } else {
            match n {
                Some(n) if n > 0 => req.maxlen = Some(n as u64),
                _ => return err(WireError::MaxlenRange),
            }
        }
        i += 2;
    }
    match parse_i64(&args[3]) {
        None => return err(WireError::TimeoutNotInteger),
        Some(t) if t < 0 => return err(WireError::TimeoutNegative),
        Some(t) => req.timeout = t as u64,
    }
    match ctx.node.engine.addjob(ctx.client.id, req, ctx.now) {
        AddJobOutcome::Reply(r) => Outcome::Reply(r),
        AddJobOutcome::Blocked(rx) => Outcome::Blocked(rx),
        AddJobOutcome::Error(e) => err(e),
    }
}
