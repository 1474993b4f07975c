//! `WORKING <id> [PROGRESS <0-100>] [DESC <text>] [DATA <blob>]`
//! (docs/COMMANDS.md#working): a progress report, then WORKING's own
//! postponement. The engine keeps and spreads the report
//! (`engine::progress`).

use bytes::Bytes;

use super::args::Args;
use super::{err, string2ll, Ctx, Outcome};
use crate::domain::job::JobId;
use crate::domain::job_ext::{PROGRESS_DATA_MAX, PROGRESS_DESC_MAX};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// `opts`: the arguments after the job ID.
pub fn working_with_progress(ctx: &mut Ctx, id: JobId, mut opts: Args) -> Outcome {
    let mut percent = None;
    let mut desc = Bytes::new();
    let mut data = Bytes::new();
    while !opts.is_done() {
        let opt = opts.word();
        let v = match opts.value() {
            Ok(v) => v,
            Err(e) => return err(e),
        };
        if opt.is("progress") {
            match string2ll(v) {
                Some(n) if (0..=100).contains(&n) => percent = Some(n as u8),
                _ => return err(WireError::ProgressRange),
            }
        } else if opt.is("desc") {
            if v.len() > PROGRESS_DESC_MAX {
                return err(WireError::ProgressDescTooLong);
            }
            // Kept with the job: its own allocation, not a slice of the
            // read buffer.
            desc = Bytes::copy_from_slice(v);
        } else if opt.is("data") {
            if v.len() > PROGRESS_DATA_MAX {
                return err(WireError::ProgressDataTooLarge);
            }
            data = Bytes::copy_from_slice(v);
        } else {
            return err(WireError::Syntax);
        }
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
