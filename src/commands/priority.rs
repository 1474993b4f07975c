//! JOBPRIORITY and the PRIORITY level argument shared with ADDJOB
//! (docs/COMMANDS.md#jobpriority); the engine moves the jobs
//! (`engine::priority`).

use super::args::Args;
use super::{err, parse_ids, string2ll, Ctx, Outcome};
use crate::domain::job_ext::{PRIORITY_MAX, PRIORITY_MIN};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// A PRIORITY level as parsed by `string2ll`: 1 to 9.
pub fn parse_level(n: Option<i64>) -> Result<u8, WireError> {
    n.and_then(|n| u8::try_from(n).ok())
        .filter(|l| (PRIORITY_MIN..=PRIORITY_MAX).contains(l))
        .ok_or(WireError::PriorityRange)
}

/// `JOBPRIORITY <level> <job-id> ... `: the number of jobs known here
/// whose level was set (acknowledged jobs are left alone).
pub fn jobpriority(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let level = match parse_level(a.next().and_then(string2ll)) {
        Ok(l) => l,
        Err(e) => return err(e),
    };
    let ids = match parse_ids(&mut a) {
        Ok(ids) => ids,
        Err(o) => return o,
    };
    let n = ctx.node.engine.set_priority(&ids, level);
    Reply::Integer(n as i64).into()
}
