//! DEBUG subcommands (docs/COMMANDS.md#debug) used by operators and test harnesses.

use bytes::Bytes;

use super::{eq_ic, Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn debug(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    // enable-debug-command (default local), whatever the user's rights.
    if let Err(refused) = super::acl::debug_allowed(ctx) {
        return refused;
    }
    let sub = &args[1];
    let n = args.len();
    if eq_ic(sub, "flushall") && n == 2 {
        ctx.node.engine.flushall(ctx.now);
        return Reply::ok().into();
    }
    if eq_ic(sub, "error") && n == 3 {
        let msg: String = String::from_utf8_lossy(&args[2])
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        return Reply::from(WireError::Verbatim(msg)).into();
    }
    if eq_ic(sub, "sleep") && n == 3 {
        let secs: f64 = std::str::from_utf8(&args[2])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        // DEBUG SLEEP deliberately stalls the whole node (it exists to test that).
        if secs > 0.0 && secs.is_finite() {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
        }
        return Reply::ok().into();
    }
    if eq_ic(sub, "loadaof") && n == 2 {
        return match crate::node::persistence::debug_reload(ctx.node, ctx.now) {
            Ok(()) => Reply::ok().into(),
            Err(e) => Reply::from(WireError::from(e)).into(),
        };
    }
    if eq_ic(sub, "disk-fault") && (n == 3 || n == 4) {
        // Test and drill hook (docs/PERSISTENCE.md, "Disk faults").
        use crate::aof::faults::{self, Fault};
        let fault = match (args.get(2), args.get(3)) {
            (Some(f), None) if eq_ic(f, "none") => Fault::None,
            (Some(f), None) if eq_ic(f, "fsync-error") => Fault::FsyncError,
            (Some(f), Some(ms)) if eq_ic(f, "slow-writes") => match super::string2ll(ms) {
                Some(ms) if (0..=60_000).contains(&ms) => {
                    Fault::SlowWrites(std::time::Duration::from_millis(ms as u64))
                }
                _ => return Reply::from(WireError::Other("invalid delay".into())).into(),
            },
            _ => {
                return Reply::from(WireError::Other(
                    "DEBUG DISK-FAULT none | fsync-error | slow-writes <ms>".into(),
                ))
                .into()
            }
        };
        faults::set(fault);
        return Reply::ok().into();
    }
    if eq_ic(sub, "structsize") && n == 2 {
        let text = format!(
            "bits:{} job:{} queue:{} nodeset:{}\r\n",
            usize::BITS,
            std::mem::size_of::<crate::domain::job::Job>(),
            std::mem::size_of::<crate::domain::queue::Queue>(),
            std::mem::size_of::<crate::domain::job::NodeSet>()
        );
        return Reply::Bulk(Bytes::from(text)).into();
    }
    if (eq_ic(sub, "segfault") || eq_ic(sub, "assert") || eq_ic(sub, "oom")) && n == 2 {
        tracing::warn!("DEBUG crash requested by a client.");
        std::process::abort();
    }
    if (eq_ic(sub, "restart") || eq_ic(sub, "crash-and-recover")) && n <= 3 {
        let delay_ms = match args.get(2) {
            None => 0,
            Some(v) => match super::string2ll(v) {
                Some(ms) if ms >= 0 => ms as u64,
                _ => return Reply::from(WireError::InvalidRestartDelay).into(),
            },
        };
        if eq_ic(sub, "restart") {
            // RESTART keeps the configuration changes made at runtime.
            if let Err(e) = ctx.node.config.rewrite() {
                if !matches!(e, crate::config::RewriteError::NoConfigFile) {
                    return Reply::from(e.wire()).into();
                }
            }
        }
        return Outcome::Shutdown {
            restart_after_ms: Some(delay_ms),
        };
    }
    Reply::from(WireError::DebugUsage(
        String::from_utf8_lossy(sub).into_owned(),
    ))
    .into()
}
