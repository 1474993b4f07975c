//! QLIMIT (docs/COMMANDS.md#qlimit): a queue's cluster-wide delivery
//! limits, parsed here and kept, shared and enforced by `engine::limits`.

use bytes::Bytes;

use super::{eq_ic, err, syntax_error, Ctx, Outcome};
use crate::engine::limits::{MAX_INFLIGHT, MAX_INTERVAL_MS, MAX_RATE};
use crate::errors::WireError;
use crate::protocol::resp::Reply;
use crate::support::strings::string2ll;

/// `QLIMIT <queue> [RATE <n> <ms>] [INFLIGHT <m>]`, `QLIMIT <queue> NONE`,
/// or `QLIMIT <queue>` (the current setting, nil when none).
pub fn qlimit(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let queue = args[1].clone();
    if args.len() == 2 {
        let Some(v) = ctx.node.engine.limit_of(&queue) else {
            return Reply::NullBulk.into();
        };
        return Reply::map(vec![
            ("rate", Reply::Integer(i64::from(v.limit.rate))),
            ("interval", Reply::Integer(v.limit.interval_ms as i64)),
            ("inflight", Reply::Integer(i64::from(v.limit.inflight))),
            ("rate-share", Reply::Integer(i64::from(v.rate_share))),
            (
                "inflight-share",
                Reply::Integer(i64::from(v.inflight_share)),
            ),
        ])
        .into();
    }
    let (mut rate, mut interval, mut inflight) = (0u32, 0u64, 0u32);
    let mut i = 2;
    let mut none = false;
    while i < args.len() {
        let a = &args[i];
        if eq_ic(a, "none") && args.len() == 3 {
            none = true;
            i += 1;
        } else if eq_ic(a, "rate") && rate == 0 {
            let n = args.get(i + 1).and_then(|a| string2ll(a));
            let ms = args.get(i + 2).and_then(|a| string2ll(a));
            match (n, ms) {
                (Some(n), Some(ms))
                    if (1..=i64::from(MAX_RATE)).contains(&n)
                        && (1..=MAX_INTERVAL_MS as i64).contains(&ms) =>
                {
                    rate = n as u32;
                    interval = ms as u64;
                }
                _ => return err(WireError::LimitRateRange),
            }
            i += 3;
        } else if eq_ic(a, "inflight") && inflight == 0 {
            match args.get(i + 1).and_then(|a| string2ll(a)) {
                Some(m) if (1..=i64::from(MAX_INFLIGHT)).contains(&m) => inflight = m as u32,
                _ => return err(WireError::LimitInflightRange),
            }
            i += 2;
        } else {
            return syntax_error();
        }
    }
    debug_assert!(none || rate > 0 || inflight > 0);
    ctx.node
        .engine
        .set_limit(queue, rate, interval, inflight, ctx.now);
    Reply::ok().into()
}
