//! ADDJOB argument parsing in Disque's validation order (docs/COMMANDS.md#addjob); the engine does the rest.

use bytes::Bytes;

use super::{blocked, eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::domain::job_ext::JobExt;
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn addjob(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let max_body = ctx.node.config.job_max_body_size;
    if max_body != 0 && args[2].len() as u64 > max_body {
        return err(WireError::BodyTooLarge(args[2].len() as u64, max_body));
    }
    let mut req = AddJobRequest::new(args[1].clone(), args[2].clone());
    let mut i = 4;
    while i < args.len() {
        let opt = &args[i];
        let value = args.get(i + 1);
        let needs_value = [
            "replicate",
            "delay",
            "retry",
            "ttl",
            "maxlen",
            "backoff",
            "maxdeliveries",
            "deadletter",
            "dedup",
            "wait",
        ]
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
        let n = string2ll(value);
        if let Some(r) = ext_option(&mut req, opt, value, n) {
            match r {
                Ok(()) => {
                    i += 2;
                    continue;
                }
                Err(e) => return err(e),
            }
        }
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
    match string2ll(&args[3]) {
        None => return err(WireError::TimeoutNotInteger),
        Some(t) if t < 0 => return err(WireError::TimeoutNegative),
        Some(t) => req.timeout = t as u64,
    }
    if req.wait.is_some() && req.maxlen.is_none() {
        return err(WireError::WaitNeedsMaxlen);
    }
    if let Err(e) = check_ext(&req) {
        return err(e);
    }
    match ctx.node.engine.addjob(ctx.client.id, req, ctx.now) {
        AddJobOutcome::Added(id) => Outcome::Reply(encode_added(id)),
        AddJobOutcome::Blocked => blocked(ctx),
        AddJobOutcome::Error(e) => err(e),
    }
}

/// ADDJOB's reply: the job ID as a status line.
pub fn encode_added(id: JobId) -> Reply {
    Reply::Id(id.0)
}

/// Our ADDJOB options (docs/COMPATIBILITY.md). None: not one of ours.
/// (WAIT is not job data: it stays out of `JobExt`.)
fn ext_option(
    req: &mut AddJobRequest,
    opt: &[u8],
    value: &Bytes,
    n: Option<i64>,
) -> Option<Result<(), WireError>> {
    let r = if eq_ic(opt, "backoff") {
        match n {
            Some(n) if n > 0 => {
                ext_fields(req).backoff_max = n.min(i64::from(u32::MAX)) as u32;
                Ok(())
            }
            _ => Err(WireError::BackoffRange),
        }
    } else if eq_ic(opt, "maxdeliveries") {
        match n {
            Some(n) if (1..=65535).contains(&n) => {
                ext_fields(req).max_deliveries = n as u32;
                Ok(())
            }
            _ => Err(WireError::MaxDeliveriesRange),
        }
    } else if eq_ic(opt, "deadletter") {
        if value.is_empty() {
            Err(WireError::DeadLetterEmpty)
        } else {
            // Kept with the job: its own allocation, not a slice of the
            // read buffer (src/protocol/resp/parse.rs).
            ext_fields(req).dead_queue = Some(Bytes::copy_from_slice(value));
            Ok(())
        }
    } else if eq_ic(opt, "wait") {
        match n {
            Some(n) if n >= 0 => {
                req.wait = Some(n as u64);
                Ok(())
            }
            _ => Err(WireError::WaitRange),
        }
    } else if eq_ic(opt, "dedup") {
        if value.is_empty() {
            Err(WireError::DedupEmpty)
        } else {
            ext_fields(req).dedup_key = Some(Bytes::copy_from_slice(value));
            Ok(())
        }
    } else {
        return None;
    };
    Some(r)
}

/// Checks across our options, after Disque's own per-option checks.
fn check_ext(req: &AddJobRequest) -> Result<(), WireError> {
    let Some(x) = &req.ext else { return Ok(()) };
    if x.dead_queue.is_some() && x.max_deliveries == 0 {
        return Err(WireError::DeadLetterNeedsMax);
    }
    if x.dead_queue.as_ref().is_some_and(|d| *d == req.queue) {
        return Err(WireError::DeadLetterSameQueue);
    }
    if (x.backoff_max > 0 || x.max_deliveries > 0) && req.retry == Some(0) {
        return Err(WireError::ExtNeedsRetry);
    }
    Ok(())
}

fn ext_fields(req: &mut AddJobRequest) -> &mut JobExt {
    req.ext.get_or_insert_with(JobExt::default)
}
