//! Small server commands: PING, TIME, SHUTDOWN, MONITOR, SLOWLOG,
//! COMMAND, LATENCY, LOADJOB (refused from clients) and BGREWRITEAOF.

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome, COMMANDS, FLAG_NAMES};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn ping(_ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    match args.len() {
        1 => Reply::Status("PONG".into()).into(),
        2 => Reply::Bulk(args[1].clone()).into(),
        _ => err(WireError::WrongArity("ping")),
    }
}

pub fn time(_ctx: &mut Ctx, _args: &[Bytes]) -> Outcome {
    let us = crate::support::clock::unix_us();
    Reply::Array(vec![
        Reply::bulk_str(&(us / 1_000_000).to_string()),
        Reply::bulk_str(&(us % 1_000_000).to_string()),
    ])
    .into()
}

pub fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let rewrite = match args.len() {
        1 => false,
        2 if eq_ic(&args[1], "rewrite-aof") => true,
        _ => return syntax_error(),
    };
    if rewrite {
        if let Err(e) = crate::node::persistence::rewrite_now(ctx.node, ctx.now) {
            tracing::warn!(error = %e, "SHUTDOWN REWRITE-AOF failed.");
            return err(WireError::ShutdownFailed);
        }
    }
    Outcome::Shutdown {
        restart_after_ms: None,
    }
}

pub fn monitor(_ctx: &mut Ctx, _args: &[Bytes]) -> Outcome {
    Outcome::Monitor
}

pub fn slowlog(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    if eq_ic(sub, "reset") && args.len() == 2 {
        ctx.node.slowlog.clear();
        return Reply::ok().into();
    }
    if eq_ic(sub, "len") && args.len() == 2 {
        return Reply::Integer(ctx.node.slowlog.len() as i64).into();
    }
    if eq_ic(sub, "get") && args.len() <= 3 {
        let n = match args.get(2) {
            None => 10,
            Some(v) => match string2ll(v) {
                Some(n) => n,
                None => return err(WireError::NotInteger),
            },
        };
        let n = if n < 0 { usize::MAX } else { n as usize };
        let entries = ctx
            .node
            .slowlog
            .iter()
            .take(n)
            .map(|e| {
                Reply::Array(vec![
                    Reply::Integer(e.id as i64),
                    Reply::Integer(e.time as i64),
                    Reply::Integer(e.usec as i64),
                    Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                ])
            })
            .collect();
        return Reply::Array(entries).into();
    }
    err(WireError::SlowlogUsage)
}

fn command_info(i: usize) -> Reply {
    let c = &COMMANDS[i];
    let flags = FLAG_NAMES
        .iter()
        .filter(|(f, _)| c.flags & f != 0)
        .map(|(_, n)| Reply::Status((*n).to_string()))
        .collect();
    Reply::Array(vec![
        Reply::bulk_str(c.name),
        Reply::Integer(i64::from(c.arity)),
        Reply::Array(flags),
        Reply::Integer(0),
        Reply::Integer(0),
        Reply::Integer(0),
    ])
}

pub fn command(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if args.len() == 1 {
        return Reply::Array((0..COMMANDS.len()).map(command_info).collect()).into();
    }
    if eq_ic(&args[1], "count") && args.len() == 2 {
        return Reply::Integer(COMMANDS.len() as i64).into();
    }
    if eq_ic(&args[1], "info") {
        let items = args[2..]
            .iter()
            .map(|n| match super::lookup(ctx.node, n) {
                Some(i) => command_info(i),
                None => Reply::NullBulk,
            })
            .collect();
        return Reply::Array(items).into();
    }
    err(WireError::CommandUsage)
}

pub fn latency(_ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    // Latency monitoring is off (latency-monitor-threshold 0): nothing sampled.
    let sub = &args[1];
    if eq_ic(sub, "latest") {
        return Reply::Array(Vec::new()).into();
    }
    if eq_ic(sub, "history") && args.len() == 3 {
        return Reply::Array(Vec::new()).into();
    }
    if eq_ic(sub, "reset") {
        return Reply::Integer(0).into();
    }
    if eq_ic(sub, "doctor") {
        return Reply::bulk_str("Dave, no latency spike was observed during the lifetime of this Disque instance, not in the slightest bit. I honestly think you ought to sleep better.\n").into();
    }
    if eq_ic(sub, "graph") && args.len() == 3 {
        return err(WireError::NoLatencySamples(
            String::from_utf8_lossy(&args[2]).into_owned(),
        ));
    }
    syntax_error()
}

pub fn loadjob(_ctx: &mut Ctx, _args: &[Bytes]) -> Outcome {
    err(WireError::LoadJobFromClient)
}

pub fn bgrewriteaof(ctx: &mut Ctx, _args: &[Bytes]) -> Outcome {
    if ctx.node.aof.rewrite_in_progress {
        return err(WireError::RewriteInProgress);
    }
    match crate::node::persistence::start_rewrite(ctx.node, ctx.now) {
        Ok(()) => Reply::Status("Background append only file rewriting started".into()).into(),
        Err(e) => err(e.into()),
    }
}
