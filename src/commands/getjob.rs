//! GETJOB argument parsing (docs/COMMANDS.md#getjob) and the encoding of
//! the jobs it hands out; popping and blocking live in the engine.

use bytes::Bytes;

use super::{blocked, eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
use crate::engine::DeliveredJob;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

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
        GetJobOutcome::Jobs(jobs) => Outcome::Reply(encode_jobs(jobs)),
        GetJobOutcome::NoJobs => Outcome::Reply(Reply::NullArray),
        GetJobOutcome::Blocked => blocked(ctx),
        GetJobOutcome::Error(e) => err(e),
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
