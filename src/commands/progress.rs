//! `WORKING <id> [PROGRESS <0-100>] [DESC <text>] [DATA <blob>]`
//! (docs/COMMANDS.md#working): a progress report, then WORKING's own
//! postponement. The engine keeps and spreads the report
//! (`engine::progress`).

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::domain::job_ext::{PROGRESS_DATA_MAX, PROGRESS_DESC_MAX};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn working_with_progress(ctx: &mut Ctx, id: JobId, opts: &[Bytes]) -> Outcome {
    let mut percent = None;
    let mut desc = Bytes::new();
    let mut data = Bytes::new();
    let mut i = 0;
    while i < opts.len() {
        let Some(v) = opts.get(i + 1) else {
            return syntax_error();
        };
        let opt = &opts[i];
        if eq_ic(opt, "progress") {
            match string2ll(v) {
                Some(n) if (0..=100).contains(&n) => percent = Some(n as u8),
                _ => return err(WireError::ProgressRange),
            }
        } else if eq_ic(opt, "desc") {
            if v.len() > PROGRESS_DESC_MAX {
                return err(WireError::ProgressDescTooLong);
            }
            // Kept with the job: its own allocation, not a slice of the
            // read buffer.
            desc = Bytes::copy_from_slice(v);
        } else if eq_ic(opt, "data") {
            if v.len() > PROGRESS_DATA_MAX {
                return err(WireError::ProgressDataTooLarge);
            }
            data = Bytes::copy_from_slice(v);
        } else {
            return syntax_error();
        }
        i += 2;
    }
    // DESC or DATA alone keep the last percentage.
    let engine = &mut ctx.node.engine;
    if engine.is_cancelled(&id) {
        return err(WireError::Cancelled);
    }
    let percent = match percent {
        Some(p) => p,
        None => engine
            .lookup(&id)
            .and_then(|h| engine.progress_of(h))
            .map_or(0, |p| p.percent),
    };
    if !engine.report_progress(&id, percent, desc, data, ctx.now) {
        return err(WireError::NoJob);
    }
    match engine.working(&id, ctx.now) {
        Ok(retry) => Reply::Integer(i64::from(retry)).into(),
        Err(e) => err(e),
    }
}
