//! QSCAN and JSCAN (docs/COMMANDS.md#jscan): cursor iteration over the queue and
//! job tables. The cursor is a slab slot number, so an element present for
//! a whole iteration is returned at least once however the table changes.

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::domain::job::JobState;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

struct ScanOpts {
    cursor: usize,
    count: usize,
    busyloop: bool,
}

/// Parse the options shared by both scans; `extra` handles the specific
/// ones and returns Ok(true) when it consumed `args[i]` (and maybe its value).
fn parse_common(
    args: &[Bytes],
    mut extra: impl FnMut(&[u8], Option<&Bytes>, &mut usize) -> Result<bool, Outcome>,
) -> Result<ScanOpts, Outcome> {
    let mut opts = ScanOpts {
        cursor: 0,
        count: 100,
        busyloop: false,
    };
    let mut cursor_seen = false;
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if eq_ic(a, "count") && next.is_some() {
            match next.and_then(|v| string2ll(v)) {
                Some(c) if c > 0 => opts.count = c as usize,
                Some(_) => return Err(syntax_error()),
                None => return Err(err(WireError::NotInteger)),
            }
            i += 2;
            continue;
        }
        if eq_ic(a, "busyloop") {
            opts.busyloop = true;
            i += 1;
            continue;
        }
        if extra(a, next, &mut i)? {
            continue;
        }
        if cursor_seen {
            return Err(syntax_error());
        }
        let Some(c) = std::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return Err(err(WireError::InvalidCursor));
        };
        opts.cursor = c.min(usize::MAX as u64) as usize;
        cursor_seen = true;
        i += 1;
    }
    Ok(opts)
}

fn int_opt(next: Option<&Bytes>) -> Result<i64, Outcome> {
    next.and_then(|v| string2ll(v))
        .ok_or_else(|| err(WireError::NotInteger))
}

/// Walk `slots` from the cursor; returns (next cursor, matches).
fn walk<T>(
    opts: &ScanOpts,
    slots: usize,
    mut visit: impl FnMut(usize) -> Option<T>,
) -> (usize, Vec<T>) {
    let mut out = Vec::new();
    let mut i = opts.cursor;
    let mut steps = 0;
    while i < slots {
        if let Some(v) = visit(i) {
            out.push(v);
        }
        i += 1;
        steps += 1;
        if !opts.busyloop && (out.len() >= opts.count || steps >= opts.count * 10) {
            break;
        }
    }
    let next = if i >= slots { 0 } else { i };
    (next, out)
}

fn scan_reply(cursor: usize, items: Vec<Reply>) -> Outcome {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(cursor.to_string())),
        Reply::Array(items),
    ])
    .into()
}

pub fn qscan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (mut minlen, mut maxlen, mut rate) = (None, None, None);
    let opts = match parse_common(args, |a, next, i| {
        let slot = if eq_ic(a, "minlen") {
            &mut minlen
        } else if eq_ic(a, "maxlen") {
            &mut maxlen
        } else if eq_ic(a, "importrate") {
            &mut rate
        } else {
            return Ok(false);
        };
        *slot = Some(int_opt(next)?);
        *i += 2;
        Ok(true)
    }) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let engine = &ctx.node.engine;
    let now = ctx.now;
    let (next, items) = walk(&opts, engine.queues().capacity_slots(), |slot| {
        let q = engine.queues().get(slot as u32)?;
        let len = q.len() as i64;
        if minlen.is_some_and(|m| len < m) || maxlen.is_some_and(|m| len > m) {
            return None;
        }
        if rate.is_some_and(|r| (q.fed.import_rate(now) as i64) < r) {
            return None;
        }
        Some(Reply::Bulk(q.name.clone()))
    });
    scan_reply(next, items)
}

pub fn jscan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut queue: Option<Bytes> = None;
    let mut states: Vec<JobState> = Vec::new();
    let mut reply_all = false;
    let opts = match parse_common(args, |a, next, i| {
        if eq_ic(a, "queue") && next.is_some() {
            queue = next.cloned();
        } else if eq_ic(a, "state") && next.is_some() {
            match next.and_then(|s| JobState::from_name(s)) {
                Some(s) => states.push(s),
                None => return Err(err(WireError::InvalidJobState)),
            }
        } else if eq_ic(a, "reply") && next.is_some() {
            match next {
                Some(v) if eq_ic(v, "all") => reply_all = true,
                Some(v) if eq_ic(v, "id") => reply_all = false,
                _ => return Err(err(WireError::InvalidReplyType)),
            }
        } else {
            return Ok(false);
        }
        *i += 2;
        Ok(true)
    }) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let engine = &ctx.node.engine;
    let now = ctx.now;
    let (next, items) = walk(&opts, engine.store().slots(), |slot| {
        let j = engine.store().get(slot as u32)?;
        if j.nodes_delivered.is_empty() {
            return None;
        }
        if !states.is_empty() && !states.contains(&j.state) {
            return None;
        }
        if let Some(q) = &queue {
            if j.queue.as_deref() != Some(&q[..]) {
                return None;
            }
        }
        Some(if reply_all {
            super::show::describe(engine, slot as u32, now)
        } else {
            Reply::Id(j.id.0)
        })
    });
    scan_reply(next, items)
}
