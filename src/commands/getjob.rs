//! GETJOB argument parsing (docs/COMMANDS.md#getjob) and the encoding of
//! the jobs it hands out; popping and blocking live in the engine.

use bytes::Bytes;

use super::args::Args;
use super::{blocked, err, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::engine::DeliveredJob;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn getjob(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let (req, pattern) = match parse(args) {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    let out = match pattern {
        // MATCH <glob> instead of FROM (our extension).
        Some(p) => {
            let queues = ctx.node.queue_patterns.queues_for(&ctx.node.engine, p);
            if queues.is_empty() {
                return Outcome::Reply(Reply::NullArray);
            }
            let req = req.with_queues(queues);
            ctx.node.engine.getjob(ctx.client.id, req, ctx.now)
        }
        None => ctx.node.engine.getjob(ctx.client.id, req, ctx.now),
    };
    match out {
        GetJobOutcome::Jobs(jobs) => Outcome::Reply(encode_jobs(jobs)),
        GetJobOutcome::NoJobs => Outcome::Reply(Reply::NullArray),
        GetJobOutcome::Blocked => blocked(ctx),
        GetJobOutcome::Error(e) => err(e),
    }
}

/// GETJOB's options, then `FROM` and the queues (at least one), or
/// `MATCH <glob>` (our extension), returned apart: the caller resolves it
/// against the node's queues.
/// The request with its queues borrowed, and MATCH's pattern.
type Parsed<'a> = (GetJobRequest<&'a [u8]>, Option<&'a [u8]>);

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Parsed<'a>, WireError> {
    let mut req = GetJobRequest {
        nohang: false,
        timeout: 0,
        count: 1,
        withcounters: false,
        queues: Vec::new(),
    };
    let mut a = Args::new(args);
    let mut from = false;
    let mut pattern: Option<&[u8]> = None;
    while !a.is_done() {
        if a.eat("nohang") {
            req.nohang = true;
        } else if a.eat("withcounters") {
            req.withcounters = true;
        } else if a.eat("timeout") {
            req.timeout = a.timeout()?;
        } else if a.eat("count") {
            req.count = a.int_in(1..=i64::MAX, WireError::CountRange)? as u64;
        } else if a.eat("from") {
            from = true;
            req.queues = a.rest().to_vec();
        } else if pattern.is_none() && a.eat("match") {
            pattern = Some(a.value()?);
        } else {
            return Err(WireError::Syntax);
        }
    }
    match pattern {
        Some(_) if from => Err(WireError::Syntax),
        Some(_) => Ok((req, pattern)),
        None if !from || req.queues.is_empty() => Err(WireError::Syntax),
        None => Ok((req, None)),
    }
}

/// GETJOB's reply: one `[queue, id, body]` array per job, with
/// `nacks` and `additional-deliveries` for WITHCOUNTERS. The job list's
/// allocation becomes the reply's (a job is twice the size of a `Reply`,
/// so the collect reuses it in place): no allocation is added to the
/// engine's.
pub fn encode_jobs(jobs: Vec<DeliveredJob>) -> Reply {
    Reply::Array(jobs.into_iter().map(encode_job).collect())
}

/// One job as GETJOB and QPEEK show it.
pub fn encode_job(j: DeliveredJob) -> Reply {
    let mut v = Vec::with_capacity(if j.counters.is_some() { 7 } else { 3 });
    v.push(j.queue.as_deref().map_or(Reply::NullBulk, Reply::bulk));
    v.push(Reply::Bulk(Bytes::copy_from_slice(&j.id.0)));
    v.push(j.body.map_or(Reply::NullBulk, Reply::Bulk));
    if let Some((nacks, deliv)) = j.counters {
        v.push(Reply::bulk_str("nacks"));
        v.push(Reply::Integer(i64::from(nacks)));
        v.push(Reply::bulk_str("additional-deliveries"));
        v.push(Reply::Integer(i64::from(deliv)));
    }
    Reply::Array(v)
}

/// The job IDs in an `encode_jobs` reply (jobs to give back to the engine
/// when the reply could not be sent).
pub fn job_ids(reply: &Reply) -> Vec<JobId> {
    let Reply::Array(jobs) = reply else {
        return Vec::new();
    };
    jobs.iter()
        .filter_map(|j| match j {
            Reply::Array(f) => match f.get(1) {
                Some(Reply::Bulk(id)) => JobId::parse(id),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u8, counters: Option<(u32, u32)>) -> DeliveredJob {
        let mut id = *b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1";
        id[39] = b'0' + n;
        DeliveredJob {
            id: JobId(id),
            queue: Some(crate::domain::job::QueueName::from(&b"q"[..])),
            body: Some(Bytes::from_static(b"body")),
            counters,
        }
    }

    #[test]
    fn jobs_encode_as_getjob_replies() {
        let r = encode_jobs(vec![job(1, None), job(2, Some((3, 4)))]);
        let Reply::Array(v) = &r else { panic!("{r:?}") };
        assert_eq!(
            v[0],
            Reply::Array(vec![
                Reply::bulk("q"),
                Reply::bulk(job(1, None).id.0),
                Reply::bulk("body"),
            ])
        );
        assert_eq!(
            v[1],
            Reply::Array(vec![
                Reply::bulk("q"),
                Reply::bulk(job(2, None).id.0),
                Reply::bulk("body"),
                Reply::bulk("nacks"),
                Reply::Integer(3),
                Reply::bulk("additional-deliveries"),
                Reply::Integer(4),
            ])
        );
        assert_eq!(job_ids(&r), vec![job(1, None).id, job(2, None).id]);
    }

    #[test]
    fn the_job_list_allocation_is_reused_for_the_reply() {
        let jobs = vec![job(1, None), job(2, None)];
        let at = jobs.as_ptr() as usize;
        let Reply::Array(v) = encode_jobs(jobs) else {
            panic!("not an array");
        };
        assert_eq!(v.as_ptr() as usize, at, "encode_jobs allocated a new list");
    }
}
