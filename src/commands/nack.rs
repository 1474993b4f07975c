//! NACK (docs/COMMANDS.md#nack) with our DELAY option: `NACK <id> ... [DELAY <s>]`
//! re-queues after the delay instead of at once; without DELAY a BACKOFF
//! job waits its current back-off and a plain job is queued at once, as in
//! Disque (docs/COMPATIBILITY.md).

use super::args::Args;
use super::jobs::count_known;
use super::{err, Ctx, Outcome};
use crate::domain::job::JobState;
use crate::errors::WireError;

/// Largest accepted DELAY: ten years, far beyond any TTL.
const MAX_DELAY_S: i64 = 10 * 365 * 86400;

pub fn nack(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut ids = Args::new(args);
    let delay_ms = match ids.cut_last("delay") {
        None => None,
        Some(mut v) => match v.int_in(0..=MAX_DELAY_S, WireError::NackDelayRange) {
            Ok(s) => Some(s as u64 * 1000),
            Err(e) => return err(e),
        },
    };
    count_known(ctx, ids, |e, h, now| {
        if !e.job(h).is_some_and(|j| j.state == JobState::Active) {
            return false;
        }
        match delay_ms.or_else(|| e.nack_default_delay(h)) {
            Some(ms) if ms > 0 => e.nack_later(h, ms, now),
            _ => e.enqueue(h, true, now),
        }
    })
}
