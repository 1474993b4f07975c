//! QSCAN and JSCAN (docs/COMMANDS.md#jscan): cursor iteration over the queue and
//! job tables. The cursor is a slab slot number, so an element present for
//! a whole iteration is returned at least once however the table changes.
//! JSCAN then walks the jobs stored whole on disk (`engine::cold`) by
//! slot number from `COLD_CURSOR` on; their records are read by the spill
//! thread, which answers.

use bytes::Bytes;

use super::args::Args;
use super::{err, Ctx, Outcome};
use crate::domain::job::JobState;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// JSCAN cursors from here on are cold slot numbers (offset by this).
const COLD_CURSOR: usize = 1 << 48;

struct ScanOpts {
    cursor: usize,
    count: usize,
    busyloop: bool,
}

/// Parse the options shared by both scans; `extra` tries the specific
/// ones and returns Ok(true) when it consumed one (and its value).
fn parse_common<'a>(
    args: &'a [&'a [u8]],
    mut extra: impl FnMut(&mut Args<'a>) -> Result<bool, WireError>,
) -> Result<ScanOpts, WireError> {
    let mut opts = ScanOpts {
        cursor: 0,
        count: 100,
        busyloop: false,
    };
    let mut cursor_seen = false;
    let mut a = Args::new(args);
    while !a.is_done() {
        if a.remaining() >= 2 && a.eat("count") {
            match a.int(WireError::NotInteger)? {
                c if c > 0 => opts.count = c as usize,
                _ => return Err(WireError::Syntax),
            }
            continue;
        }
        if a.eat("busyloop") {
            opts.busyloop = true;
            continue;
        }
        if extra(&mut a)? {
            continue;
        }
        if cursor_seen {
            return Err(WireError::Syntax);
        }
        let Some(c) = std::str::from_utf8(a.arg())
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return Err(WireError::InvalidCursor);
        };
        opts.cursor = c.min(usize::MAX as u64) as usize;
        cursor_seen = true;
    }
    Ok(opts)
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

pub fn qscan(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let (mut minlen, mut maxlen, mut rate) = (None, None, None);
    let opts = match parse_common(args, |a| {
        let slot = if a.eat("minlen") {
            &mut minlen
        } else if a.eat("maxlen") {
            &mut maxlen
        } else if a.eat("importrate") {
            &mut rate
        } else {
            return Ok(false);
        };
        *slot = Some(a.int(WireError::NotInteger)?);
        Ok(true)
    }) {
        Ok(o) => o,
        Err(e) => return err(e),
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

pub fn jscan(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut queue: Option<Bytes> = None;
    let mut states: Vec<JobState> = Vec::new();
    let mut reply_all = false;
    let opts = match parse_common(args, |a| {
        if a.remaining() < 2 {
            return Ok(false);
        }
        if a.eat("queue") {
            queue = Some(Bytes::copy_from_slice(a.arg()));
        } else if a.eat("state") {
            match JobState::from_name(a.arg()) {
                Some(s) => states.push(s),
                None => return Err(WireError::InvalidJobState),
            }
        } else if a.eat("reply") {
            if a.eat("all") {
                reply_all = true;
            } else if a.eat("id") {
                reply_all = false;
            } else {
                return Err(WireError::InvalidReplyType);
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }) {
        Ok(o) => o,
        Err(e) => return err(e),
    };
    if opts.cursor >= COLD_CURSOR {
        return jscan_cold(ctx, &opts, queue, &states, reply_all);
    }
    let engine = &ctx.node.engine;
    let now = ctx.now;
    let mut holes = Vec::new();
    let mut found = 0usize;
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
        let item = if reply_all {
            // Bodies on disk are read by the spill thread (`spill`).
            holes.extend(super::show::spilled_hole(
                engine,
                slot as u32,
                vec![1, found],
            ));
            super::show::describe(engine, slot as u32, now)
        } else {
            Reply::Id(j.id.0)
        };
        found += 1;
        Some(item)
    });
    // After the job table, the jobs stored whole on disk.
    let next = if next == 0 && engine.cold_jobs() > 0 {
        COLD_CURSOR
    } else {
        next
    };
    if holes.is_empty() {
        return scan_reply(next, items);
    }
    let reply = Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(items),
    ]);
    super::spill::reply_with_bodies(ctx, reply, holes)
}

/// JSCAN over the jobs stored whole on disk: all queued, their records
/// read and filtered on the spill thread, which sends the reply.
fn jscan_cold(
    ctx: &mut Ctx,
    opts: &ScanOpts,
    queue: Option<Bytes>,
    states: &[JobState],
    reply_all: bool,
) -> Outcome {
    let engine = &ctx.node.engine;
    let total = engine.cold_slot_count() as usize;
    let cold = ScanOpts {
        cursor: opts.cursor - COLD_CURSOR,
        count: opts.count,
        busyloop: opts.busyloop,
    };
    let (next, mut locs) = walk(&cold, total, |i| engine.cold_loc(i as u32));
    let next = if next == 0 { 0 } else { COLD_CURSOR + next };
    if !states.is_empty() && !states.contains(&JobState::Queued) {
        locs.clear();
    }
    let Some(io) = ctx.node.spill.io.as_ref().filter(|_| !locs.is_empty()) else {
        return scan_reply(next, Vec::new());
    };
    let now = ctx.now;
    let (tx, rx) = tokio::sync::oneshot::channel();
    io.read_records(
        locs,
        Box::new(move |recs| {
            let mut items = Vec::new();
            // A record that cannot be read is left out (counted by the
            // spill thread); its job is dropped when it is read back.
            for (id, blob) in recs.into_iter().flatten() {
                let Ok((rec, _)) = crate::protocol::job_codec::JobRecord::decode(&blob) else {
                    continue;
                };
                if queue.as_ref().is_some_and(|q| rec.queue != q) {
                    continue;
                }
                items.push(if reply_all {
                    super::show::describe_record(&rec, now)
                } else {
                    Reply::Id(id.0)
                });
            }
            let _ = tx.send(Reply::Array(vec![
                Reply::Bulk(Bytes::from(next.to_string())),
                Reply::Array(items),
            ]));
        }),
    );
    Outcome::Blocked(rx)
}
