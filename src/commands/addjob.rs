//! ADDJOB argument parsing in Disque's validation order (docs/COMMANDS.md#addjob); the engine does the rest.

use bytes::Bytes;

use super::args::{Args, Word};
use super::{blocked, err, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::domain::job_ext::{JobExt, ON_FAIL_CANCEL, ON_FAIL_DEADLETTER, ON_FAIL_RUN};
use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
use crate::engine::after::{classify, Dep};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn addjob(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    // Checked first: a body over the limit is refused whatever else is
    // wrong with the request.
    let max_body = ctx.node.config.job_max_body_size;
    let mut a = Args::new(args);
    a.next();
    let body_len = a.arg().len() as u64;
    if max_body != 0 && body_len > max_body {
        return err(WireError::BodyTooLarge(body_len, max_body));
    }
    let req = match parse(args) {
        Ok(req) => req,
        Err(e) => return err(e),
    };
    if let Some(b) = req.ext.as_ref().and_then(|x| x.batch.as_ref()) {
        if let Err(e) = ctx.node.engine.batch_check_open(b) {
            return err(super::batch::batch_error(e));
        }
    }
    // A batch dependency must name a batch this node knows (every node
    // gets every batch); a job ID is looked for across the cluster later.
    for d in req.ext.iter().flat_map(|x| x.after.iter()) {
        if let Dep::Batch(b) = classify(d) {
            if ctx.node.engine.batch_get(&b).is_none() {
                return err(WireError::NoBatch);
            }
        }
    }
    match ctx.node.engine.addjob(ctx.client.id, req, ctx.now) {
        AddJobOutcome::Added(id) => Outcome::Reply(encode_added(id)),
        AddJobOutcome::Blocked => blocked(ctx),
        AddJobOutcome::Error(e) => err(e),
    }
}

/// `ADDJOB <queue> <body> <timeout> [options]`, checked in Disque's order:
/// each option as it comes, then the timeout, then the checks across
/// options.
fn parse<'a>(args: &'a [&'a [u8]]) -> Result<AddJobRequest<&'a [u8]>, WireError> {
    let mut a = Args::new(args);
    let queue = a.arg();
    let mut req = AddJobRequest::new(queue, a.arg());
    // Disque checks the timeout after the options.
    let mut timeout = a;
    a.next();
    while !a.is_done() {
        if a.eat("async") {
            req.asynchronous = true;
            continue;
        }
        let opt = a.word();
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
            "priority",
            "batch",
            "after",
            "onfail",
        ]
        .iter()
        .any(|o| opt.is(o));
        if !needs_value || a.is_done() {
            return Err(WireError::Syntax);
        }
        if let Some(r) = ext_option(&mut req, opt, &mut a) {
            r?;
            continue;
        }
        let max = i64::MAX;
        if opt.is("replicate") {
            req.replicate = Some(a.int_in(1..=65535, WireError::ReplicateRange)? as u32);
        } else if opt.is("ttl") {
            let n = a.int_in(1..=max, WireError::TtlRange)?;
            req.ttl = Some(n.min(i64::from(u32::MAX)) as u32);
        } else if opt.is("retry") {
            let n = a.int_in(0..=max, WireError::RetryRange)?;
            req.retry = Some(n.min(i64::from(u32::MAX)) as u32);
        } else if opt.is("delay") {
            let n = a.int_in(0..=max, WireError::DelayRange)?;
            req.delay = n.min(i64::from(u32::MAX)) as u32;
        } else {
            req.maxlen = Some(a.int_in(1..=max, WireError::MaxlenRange)? as u64);
        }
    }
    req.timeout = timeout.timeout()?;
    if req.wait.is_some() && req.maxlen.is_none() {
        return Err(WireError::WaitNeedsMaxlen);
    }
    check_ext(&req)?;
    Ok(req)
}

/// ADDJOB's reply: the job ID as a status line.
pub fn encode_added(id: JobId) -> Reply {
    Reply::Id(id.0)
}

/// Our ADDJOB options (docs/COMPATIBILITY.md), `a` at the value. None:
/// not one of ours. (WAIT is not job data: it stays out of `JobExt`.)
fn ext_option(
    req: &mut AddJobRequest<&[u8]>,
    opt: Word,
    a: &mut Args,
) -> Option<Result<(), WireError>> {
    let r = if opt.is("backoff") {
        a.int_in(1..=i64::MAX, WireError::BackoffRange).map(|n| {
            ext_fields(req).backoff_max = n.min(i64::from(u32::MAX)) as u32;
        })
    } else if opt.is("maxdeliveries") {
        a.int_in(1..=65535, WireError::MaxDeliveriesRange)
            .map(|n| ext_fields(req).max_deliveries = n as u32)
    } else if opt.is("deadletter") {
        let value = a.arg();
        if value.is_empty() {
            Err(WireError::DeadLetterEmpty)
        } else {
            // Kept with the job: its own allocation, not a slice of the
            // read buffer (src/protocol/resp/parse.rs).
            ext_fields(req).dead_queue = Some(Bytes::copy_from_slice(value));
            Ok(())
        }
    } else if opt.is("wait") {
        a.int_in(0..=i64::MAX, WireError::WaitRange)
            .map(|n| req.wait = Some(n as u64))
    } else if opt.is("priority") {
        let n = a.next().and_then(super::string2ll);
        super::priority::parse_level(n).map(|level| ext_fields(req).priority = level)
    } else if opt.is("batch") {
        let value = a.arg();
        if value.is_empty() {
            Err(WireError::BatchEmpty)
        } else {
            ext_fields(req).batch = Some(Bytes::copy_from_slice(value));
            Ok(())
        }
    } else if opt.is("after") {
        let value = a.arg();
        let x = ext_fields(req);
        if value.is_empty() {
            Err(WireError::AfterEmpty)
        } else if x.after.len() >= crate::engine::after::MAX_AFTER {
            Err(WireError::AfterTooMany)
        } else {
            x.after.push(Bytes::copy_from_slice(value));
            Ok(())
        }
    } else if opt.is("onfail") {
        let w = a.word();
        let policy = if w.is("cancel") {
            Ok(ON_FAIL_CANCEL)
        } else if w.is("deadletter") {
            Ok(ON_FAIL_DEADLETTER)
        } else if w.is("run") {
            Ok(ON_FAIL_RUN)
        } else {
            Err(WireError::OnFailPolicy)
        };
        policy.map(|p| {
            let x = ext_fields(req);
            x.on_fail = p;
            // Remembered even for CANCEL (the default), so ONFAIL without
            // AFTER is caught below.
            x.on_fail_given = true;
        })
    } else if opt.is("dedup") {
        let value = a.arg();
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
fn check_ext(req: &AddJobRequest<&[u8]>) -> Result<(), WireError> {
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
    if x.on_fail_given && x.after.is_empty() {
        return Err(WireError::OnFailNeedsAfter);
    }
    Ok(())
}

fn ext_fields<B>(req: &mut AddJobRequest<B>) -> &mut JobExt {
    req.ext.get_or_insert_with(Box::default)
}
