//! CONFIG GET | SET | RESETSTAT | REWRITE (docs/COMMANDS.md#config). Parsing and
//! formatting live in `crate::config`; this applies changes to the node.

use super::args::Args;
use super::{Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn config(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let sub = a.word();
    let wrong = || super::err(WireError::ConfigArity(sub.text()));
    if sub.is("get") {
        if a.remaining() != 1 {
            return wrong();
        }
        let pairs = ctx.node.config.get(a.arg());
        let mut out = Vec::with_capacity(pairs.len() * 2);
        for (k, v) in pairs {
            out.push(Reply::bulk_str(&k));
            out.push(Reply::bulk_str(&v));
        }
        return Reply::Array(out).into();
    }
    if sub.is("set") {
        if a.remaining() != 2 {
            return wrong();
        }
        let name = a.word().text().to_ascii_lowercase();
        let value = a.arg();
        // enable-protected-configs (default local) for the paths.
        if let Err(refused) = super::acl::config_set_allowed(ctx, &name) {
            return refused;
        }
        if crate::config::security::reloads_tls(&name) {
            return set_tls(ctx, &name, value);
        }
        return match ctx.node.config.set(&name, value) {
            Ok(canonical) => match ctx.node.apply_config(canonical, ctx.now) {
                Ok(()) => Reply::ok().into(),
                Err(e) => super::err(e),
            },
            Err(e) => super::err(e.wire()),
        };
    }
    if sub.is("resetstat") {
        if !a.is_done() {
            return wrong();
        }
        let n = ctx.node.stats.cmd.len();
        ctx.node.stats = crate::node::Stats {
            cmd: vec![(0, 0); n],
            ..Default::default()
        };
        return Reply::ok().into();
    }
    if sub.is("rewrite") {
        if !a.is_done() {
            return wrong();
        }
        return match ctx.node.config.rewrite() {
            Ok(()) => Reply::ok().into(),
            Err(e) => super::err(e.wire()),
        };
    }
    super::err(WireError::ConfigUsage)
}

/// CONFIG SET of a tls-* parameter: re-read every certificate and key file
/// (also when the value is unchanged: that is how rotated files are picked
/// up) and swap the TLS configuration for new connections. If anything
/// fails to load, the old value and configuration stay, as in Redis.
fn set_tls(ctx: &mut Ctx, name: &str, value: &[u8]) -> Outcome {
    let old = ctx.node.config.tls.clone();
    if let Err(e) = ctx.node.config.set(name, value) {
        return super::err(e.wire());
    }
    match ctx.node.tls.configure(&ctx.node.config.tls) {
        Ok(()) => {
            tracing::info!(parameter = name, "TLS configuration reloaded.");
            Reply::ok().into()
        }
        Err(e) => {
            tracing::warn!(parameter = name, error = %e, "TLS configuration not changed.");
            ctx.node.config.tls = old;
            super::err(crate::errors::WireError::TlsReload)
        }
    }
}
