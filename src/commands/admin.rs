//! Small server commands: PING, TIME, SHUTDOWN, MONITOR, SLOWLOG,
//! COMMAND, LATENCY, LOADJOB (refused from clients) and BGREWRITEAOF.

use bytes::Bytes;

use super::args::Args;
use super::{err, syntax_error, Ctx, Outcome, COMMANDS, FLAG_NAMES};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn ping(_ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    match (a.next(), a.is_done()) {
        (None, _) => Reply::Status("PONG".into()).into(),
        (Some(message), true) => Reply::Bulk(Bytes::copy_from_slice(message)).into(),
        _ => err(WireError::WrongArity("ping")),
    }
}

pub fn time(_ctx: &mut Ctx, _args: &[&[u8]]) -> Outcome {
    let us = crate::support::clock::unix_us();
    Reply::Array(vec![
        Reply::bulk_str(&(us / 1_000_000).to_string()),
        Reply::bulk_str(&(us % 1_000_000).to_string()),
    ])
    .into()
}

pub fn shutdown(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let rewrite = a.eat("rewrite-aof");
    if !a.is_done() {
        return syntax_error();
    }
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

pub fn monitor(_ctx: &mut Ctx, _args: &[&[u8]]) -> Outcome {
    Outcome::Monitor
}

pub fn slowlog(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let sub = a.word();
    if sub.is("reset") && a.is_done() {
        ctx.node.slowlog.clear();
        return Reply::ok().into();
    }
    if sub.is("len") && a.is_done() {
        return Reply::Integer(ctx.node.slowlog.len() as i64).into();
    }
    if sub.is("get") && a.remaining() <= 1 {
        let n = if a.is_done() {
            10
        } else {
            match a.int(WireError::NotInteger) {
                Ok(n) => n,
                Err(e) => return err(e),
            }
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

pub fn command(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    if a.is_done() {
        return Reply::Array((0..COMMANDS.len()).map(command_info).collect()).into();
    }
    let sub = a.word();
    if sub.is("count") && a.is_done() {
        return Reply::Integer(COMMANDS.len() as i64).into();
    }
    if sub.is("info") {
        let items = a
            .rest()
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

pub fn latency(_ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    // Latency monitoring is off (latency-monitor-threshold 0): nothing sampled.
    let mut a = Args::new(args);
    let sub = a.word();
    if sub.is("latest") {
        return Reply::Array(Vec::new()).into();
    }
    if sub.is("history") && a.remaining() == 1 {
        return Reply::Array(Vec::new()).into();
    }
    if sub.is("reset") {
        return Reply::Integer(0).into();
    }
    if sub.is("doctor") {
        return Reply::bulk_str("Dave, no latency spike was observed during the lifetime of this Disque instance, not in the slightest bit. I honestly think you ought to sleep better.\n").into();
    }
    if sub.is("graph") && a.remaining() == 1 {
        return err(WireError::NoLatencySamples(a.word().text()));
    }
    syntax_error()
}

pub fn loadjob(_ctx: &mut Ctx, _args: &[&[u8]]) -> Outcome {
    err(WireError::LoadJobFromClient)
}

pub fn bgrewriteaof(ctx: &mut Ctx, _args: &[&[u8]]) -> Outcome {
    if ctx.node.aof.rewrite_in_progress {
        return err(WireError::RewriteInProgress);
    }
    match crate::node::persistence::start_rewrite(ctx.node, ctx.now) {
        Ok(()) => Reply::Status("Background append only file rewriting started".into()).into(),
        Err(e) => err(e.into()),
    }
}
