//! BATCH (our extension, docs/COMMANDS.md#batch): groups of jobs with
//! callbacks. This module parses the subcommands and encodes their
//! replies; the table, its replication and the callbacks are
//! `engine::batch`.
//!
//! * `BATCH CREATE [<id>] [ONSUCCESS <queue> <body>] [ONCOMPLETE <queue> <body>]`:
//!   the batch ID (generated when not given).
//! * `BATCH COMMIT <id>` / `BATCH CANCEL <id>`: `+OK`, or `-NOBATCH`.
//! * `BATCH STATUS <id>`: a map of counters and flags, or a null bulk.
//! * `BATCH LIST`: the IDs known here, sorted.
//!
//! Members join with `ADDJOB ... BATCH <id>` (commands::addjob).

use bytes::Bytes;

use super::{eq_ic, err, syntax_error, Ctx, Outcome};
use crate::engine::batch::{BatchError, Callback, MAX_ID_LEN};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn batch(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    let rest = &args[2..];
    if eq_ic(sub, "create") {
        return create(ctx, rest);
    }
    if eq_ic(sub, "list") {
        if !rest.is_empty() {
            return syntax_error();
        }
        let ids = ctx.node.engine.batch_ids();
        return Reply::Array(ids.into_iter().map(Reply::Bulk).collect()).into();
    }
    if !["commit", "cancel", "status"].iter().any(|s| eq_ic(sub, s)) {
        return err(WireError::BatchUsage);
    }
    let [id] = rest else {
        return err(WireError::WrongArity("batch"));
    };
    let engine = &mut ctx.node.engine;
    if eq_ic(sub, "status") {
        return match engine.batch_get(id) {
            Some(s) => {
                let v = s.status();
                let int = |n: usize| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
                let flag = |b: bool| Reply::Integer(i64::from(b));
                let state = if v.cancelled {
                    "cancelled"
                } else if !v.committed {
                    "open"
                } else if v.pending > 0 {
                    "committed"
                } else if v.dead > 0 {
                    "failed"
                } else {
                    "succeeded"
                };
                let fields: Vec<(&str, Reply)> = vec![
                    ("id", Reply::Bulk(id.clone())),
                    ("state", Reply::Bulk(Bytes::from_static(state.as_bytes()))),
                    ("total", int(v.total)),
                    ("pending", int(v.pending)),
                    ("acked", int(v.acked)),
                    ("dead", int(v.dead)),
                    ("success-added", flag(v.success_added)),
                    ("complete-added", flag(v.complete_added)),
                ];
                Reply::Map(
                    fields
                        .into_iter()
                        .map(|(k, v)| (Reply::Bulk(Bytes::from_static(k.as_bytes())), v))
                        .collect(),
                )
                .into()
            }
            None => Reply::NullBulk.into(),
        };
    }
    match engine.batch_close(id, eq_ic(sub, "cancel")) {
        Ok(()) => Reply::ok().into(),
        Err(e) => err(batch_error(e)),
    }
}

/// The client-visible error for an engine refusal.
pub fn batch_error(e: BatchError) -> WireError {
    match e {
        BatchError::Exists => WireError::BatchExists,
        BatchError::NoBatch => WireError::NoBatch,
        BatchError::Closed => WireError::BatchClosed,
        BatchError::Full => WireError::BatchFull,
    }
}

fn create(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut id = None;
    let mut on_success = None;
    let mut on_complete = None;
    let mut i = 0;
    while i < args.len() {
        let o = &args[i];
        let cb = eq_ic(o, "onsuccess") || eq_ic(o, "oncomplete");
        if !cb {
            // Only the first argument may be the ID.
            if i != 0 {
                return syntax_error();
            }
            if o.is_empty() || o.len() > MAX_ID_LEN {
                return err(WireError::BatchId);
            }
            id = Some(o.clone());
            i += 1;
            continue;
        }
        let (Some(queue), Some(body)) = (args.get(i + 1), args.get(i + 2)) else {
            return syntax_error();
        };
        if queue.is_empty() {
            return err(WireError::BatchQueueEmpty);
        }
        let c = Some(Callback {
            queue: queue.clone(),
            body: body.clone(),
        });
        if eq_ic(o, "onsuccess") {
            on_success = c;
        } else {
            on_complete = c;
        }
        i += 3;
    }
    match ctx
        .node
        .engine
        .batch_create(id, on_success, on_complete, ctx.now)
    {
        Ok(id) => Reply::Bulk(id).into(),
        Err(e) => err(batch_error(e)),
    }
}
