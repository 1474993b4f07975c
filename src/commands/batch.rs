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

use super::args::Args;
use super::{err, Ctx, Outcome};
use crate::engine::batch::{BatchError, Callback, MAX_ID_LEN};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// A BATCH request.
enum Request<'a> {
    Create {
        id: Option<Bytes>,
        on_success: Option<Callback>,
        on_complete: Option<Callback>,
    },
    List,
    Status(&'a [u8]),
    /// COMMIT, or CANCEL when `cancel`.
    Close {
        id: &'a [u8],
        cancel: bool,
    },
}

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, WireError> {
    let mut a = Args::new(args);
    let sub = a.word();
    if sub.is("create") {
        return create(a);
    }
    if sub.is("list") {
        if !a.is_done() {
            return Err(WireError::Syntax);
        }
        return Ok(Request::List);
    }
    if !["commit", "cancel", "status"].iter().any(|s| sub.is(s)) {
        return Err(WireError::BatchUsage);
    }
    let &[id] = a.rest() else {
        return Err(WireError::WrongArity("batch"));
    };
    Ok(if sub.is("status") {
        Request::Status(id)
    } else {
        Request::Close {
            id,
            cancel: sub.is("cancel"),
        }
    })
}

/// `CREATE [<id>] [ONSUCCESS <queue> <body>] [ONCOMPLETE <queue> <body>]`.
fn create(mut a: Args<'_>) -> Result<Request<'static>, WireError> {
    let mut id = None;
    // Only the first argument may be the ID (a probe copy looks ahead).
    let mut probe = a;
    let callback_first = probe.eat("onsuccess") || probe.eat("oncomplete");
    if let Some(o) = a.peek().filter(|_| !callback_first) {
        if o.is_empty() || o.len() > MAX_ID_LEN {
            return Err(WireError::BatchId);
        }
        id = Some(Bytes::copy_from_slice(o));
        a.next();
    }
    let mut on_success = None;
    let mut on_complete = None;
    while !a.is_done() {
        let success = if a.eat("onsuccess") {
            true
        } else if a.eat("oncomplete") {
            false
        } else {
            return Err(WireError::Syntax);
        };
        let (Some(queue), Some(body)) = (a.next(), a.next()) else {
            return Err(WireError::Syntax);
        };
        if queue.is_empty() {
            return Err(WireError::BatchQueueEmpty);
        }
        let c = Some(Callback {
            queue: Bytes::copy_from_slice(queue),
            body: Bytes::copy_from_slice(body),
        });
        if success {
            on_success = c;
        } else {
            on_complete = c;
        }
    }
    Ok(Request::Create {
        id,
        on_success,
        on_complete,
    })
}

pub fn batch(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let engine = &mut ctx.node.engine;
    let (id, cancel) = match parse(args) {
        Err(e) => return err(e),
        Ok(Request::Create {
            id,
            on_success,
            on_complete,
        }) => {
            return match engine.batch_create(id, on_success, on_complete, ctx.now) {
                Ok(id) => Reply::Bulk(id).into(),
                Err(e) => err(batch_error(e)),
            }
        }
        Ok(Request::List) => {
            let ids = engine.batch_ids();
            return Reply::Array(ids.into_iter().map(Reply::Bulk).collect()).into();
        }
        Ok(Request::Status(id)) => return status(ctx, id),
        Ok(Request::Close { id, cancel }) => (id, cancel),
    };
    match engine.batch_close(id, cancel) {
        Ok(()) => Reply::ok().into(),
        Err(e) => err(batch_error(e)),
    }
}

/// The BATCH STATUS map, or a null bulk.
fn status(ctx: &mut Ctx, id: &[u8]) -> Outcome {
    let Some(s) = ctx.node.engine.batch_get(id) else {
        return Reply::NullBulk.into();
    };
    let v = s.status();
    let int = |n: usize| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let flag = |b: bool| Reply::Integer(i64::from(b));
    let state = v.phase().name();
    let fields: Vec<(&str, Reply)> = vec![
        ("id", Reply::Bulk(Bytes::copy_from_slice(id))),
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

/// The client-visible error for an engine refusal.
pub fn batch_error(e: BatchError) -> WireError {
    match e {
        BatchError::Exists => WireError::BatchExists,
        BatchError::NoBatch => WireError::NoBatch,
        BatchError::Closed => WireError::BatchClosed,
        BatchError::Full => WireError::BatchFull,
    }
}
