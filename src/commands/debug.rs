//! DEBUG subcommands (docs/COMMANDS.md#debug) used by operators and test harnesses.

use bytes::Bytes;

use super::args::Args;
use super::{Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn debug(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    // enable-debug-command (default local), whatever the user's rights.
    if let Err(refused) = super::acl::debug_allowed(ctx) {
        return refused;
    }
    let mut a = Args::new(args);
    let sub = a.word();
    let n = a.remaining();
    if sub.is("flushall") && n == 0 {
        ctx.node.engine.flushall(ctx.now);
        return Reply::ok().into();
    }
    if sub.is("error") && n == 1 {
        let msg: String = a
            .word()
            .text()
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        return Reply::from(WireError::Verbatim(msg)).into();
    }
    if sub.is("sleep") && n == 1 {
        let secs: f64 = std::str::from_utf8(a.arg())
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        // DEBUG SLEEP deliberately stalls the whole node (it exists to test that).
        if secs > 0.0 && secs.is_finite() {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
        }
        return Reply::ok().into();
    }
    if sub.is("loadaof") && n == 0 {
        return match crate::node::persistence::debug_reload(ctx.node, ctx.now) {
            Ok(()) => Reply::ok().into(),
            Err(e) => Reply::from(WireError::from(e)).into(),
        };
    }
    if sub.is("disk-fault") && (n == 1 || n == 2) {
        // Test and drill hook (docs/PERSISTENCE.md, "Disk faults").
        use crate::os::faults::{self, Fault};
        let f = a.word();
        let fault = match a.is_done() {
            true if f.is("none") => Fault::None,
            true if f.is("fsync-error") => Fault::FsyncError,
            false if f.is("slow-writes") => {
                match a.int_in(0..=60_000, WireError::Other("invalid delay".into())) {
                    Ok(ms) => Fault::SlowWrites(std::time::Duration::from_millis(ms as u64)),
                    Err(e) => return Reply::from(e).into(),
                }
            }
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
    if sub.is("structsize") && n == 0 {
        let text = format!(
            "bits:{} job:{} queue:{} nodeset:{}\r\n",
            usize::BITS,
            std::mem::size_of::<crate::domain::job::Job>(),
            std::mem::size_of::<crate::domain::queue::Queue>(),
            std::mem::size_of::<crate::domain::job::NodeSet>()
        );
        return Reply::Bulk(Bytes::from(text)).into();
    }
    if (sub.is("segfault") || sub.is("assert") || sub.is("oom")) && n == 0 {
        tracing::warn!("DEBUG crash requested by a client.");
        std::process::abort();
    }
    if (sub.is("restart") || sub.is("crash-and-recover")) && n <= 1 {
        let delay_ms = if a.is_done() {
            0
        } else {
            match a.int_in(0..=i64::MAX, WireError::InvalidRestartDelay) {
                Ok(ms) => ms as u64,
                Err(e) => return Reply::from(e).into(),
            }
        };
        if sub.is("restart") {
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
    Reply::from(WireError::DebugUsage(sub.text())).into()
}
