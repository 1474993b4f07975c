//! QLIMIT (docs/COMMANDS.md#qlimit): a queue's cluster-wide delivery
//! limits, parsed here and kept, shared and enforced by `engine::limits`.

use bytes::Bytes;

use super::args::Args;
use super::{err, Ctx, Outcome};
use crate::engine::limits::{MAX_INFLIGHT, MAX_INTERVAL_MS, MAX_RATE};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// A QLIMIT request.
enum Request<'a> {
    /// `QLIMIT <queue>`: the current setting.
    Show(&'a [u8]),
    /// Set (all zero for `NONE`, which clears).
    Set {
        queue: &'a [u8],
        rate: u32,
        interval: u64,
        inflight: u32,
    },
}

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, WireError> {
    let mut a = Args::new(args);
    let queue = a.arg();
    if a.is_done() {
        return Ok(Request::Show(queue));
    }
    // NONE is only NONE alone.
    let lone = a.remaining() == 1;
    let (mut rate, mut interval, mut inflight) = (0u32, 0u64, 0u32);
    let mut none = false;
    while !a.is_done() {
        if lone && a.eat("none") {
            none = true;
        } else if rate == 0 && a.eat("rate") {
            let bad = || WireError::LimitRateRange;
            let n = a.int(bad())?;
            let ms = a.int(bad())?;
            if !(1..=i64::from(MAX_RATE)).contains(&n)
                || !(1..=MAX_INTERVAL_MS as i64).contains(&ms)
            {
                return Err(bad());
            }
            rate = n as u32;
            interval = ms as u64;
        } else if inflight == 0 && a.eat("inflight") {
            match a.int(WireError::LimitInflightRange)? {
                m if (1..=i64::from(MAX_INFLIGHT)).contains(&m) => inflight = m as u32,
                _ => return Err(WireError::LimitInflightRange),
            }
        } else {
            return Err(WireError::Syntax);
        }
    }
    debug_assert!(none || rate > 0 || inflight > 0);
    Ok(Request::Set {
        queue,
        rate,
        interval,
        inflight,
    })
}

/// `QLIMIT <queue> [RATE <n> <ms>] [INFLIGHT <m>]`, `QLIMIT <queue> NONE`,
/// or `QLIMIT <queue>` (the current setting, nil when none).
pub fn qlimit(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let (queue, rate, interval, inflight) = match parse(args) {
        Ok(Request::Set {
            queue,
            rate,
            interval,
            inflight,
        }) => (queue, rate, interval, inflight),
        Ok(Request::Show(queue)) => return show(ctx, queue),
        Err(e) => return err(e),
    };
    ctx.node.engine.set_limit(
        Bytes::copy_from_slice(queue),
        rate,
        interval,
        inflight,
        ctx.now,
    );
    Reply::ok().into()
}

fn show(ctx: &mut Ctx, queue: &[u8]) -> Outcome {
    let Some(v) = ctx.node.engine.limit_of(queue) else {
        return Reply::NullBulk.into();
    };
    Reply::map(vec![
        ("rate", Reply::Integer(i64::from(v.limit.rate))),
        ("interval", Reply::Integer(v.limit.interval_ms as i64)),
        ("inflight", Reply::Integer(i64::from(v.limit.inflight))),
        ("rate-share", Reply::Integer(i64::from(v.rate_share))),
        (
            "inflight-share",
            Reply::Integer(i64::from(v.inflight_share)),
        ),
    ])
    .into()
}
