//! CLIENT LIST | KILL | SETNAME | GETNAME | PAUSE | REPLY | ID (docs/COMMANDS.md#client).

use bytes::Bytes;

use super::args::Args;
use super::{err, syntax_error, Ctx, Outcome};
use crate::errors::WireError;
use crate::node::ReplyMode;
use crate::protocol::resp::Reply;

pub fn set_name(ctx: &mut Ctx, name: Bytes) -> Result<(), Outcome> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(err(WireError::ClientBadName));
    }
    if let Some(info) = ctx.node.clients.get_mut(&ctx.client.id) {
        // Kept for the connection's life: not a slice of the read buffer.
        info.name = if name.is_empty() {
            None
        } else {
            Some(Bytes::copy_from_slice(&name))
        };
    }
    Ok(())
}

pub fn client(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let sub = a.word();
    let now = ctx.now;
    if sub.is("list") && a.is_done() {
        let mut ids: Vec<&u64> = ctx.node.clients.keys().collect();
        ids.sort();
        let mut out = String::new();
        for id in ids {
            let c = &ctx.node.clients[id];
            let flags = if c.monitor {
                "O"
            } else if c.blocked.load(std::sync::atomic::Ordering::Relaxed) {
                "b"
            } else {
                "N"
            };
            out.push_str(&format!(
                "id={} addr={} fd={} name={} age={} idle={} flags={} qbuf=0 qbuf-free=0 obl=0 oll=0 omem=0 events=r cmd={}\n",
                c.id,
                c.addr,
                c.fd,
                c.name.as_ref().map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default(),
                now.saturating_sub(c.created) / 1000,
                now.saturating_sub(c.last_active) / 1000,
                flags,
                // The registry is refreshed per batch; the caller's own
                // entry is current here.
                if c.id == ctx.client.id { ctx.client.last_cmd } else { c.last_cmd }
            ));
        }
        return Reply::Bulk(Bytes::from(out)).into();
    }
    if sub.is("getname") && a.is_done() {
        return match ctx
            .node
            .clients
            .get(&ctx.client.id)
            .and_then(|c| c.name.clone())
        {
            Some(n) => Reply::Bulk(n).into(),
            None => Reply::NullBulk.into(),
        };
    }
    if sub.is("setname") && a.remaining() == 1 {
        return match set_name(ctx, Bytes::copy_from_slice(a.arg())) {
            Ok(()) => Reply::ok().into(),
            Err(e) => e,
        };
    }
    // Redis 7.2+ client libraries announce themselves on connect.
    if sub.is("setinfo") && a.remaining() == 2 {
        return Reply::ok().into();
    }
    if sub.is("id") && a.is_done() {
        return Reply::Integer(ctx.client.id as i64).into();
    }
    if sub.is("reply") && a.remaining() == 1 {
        let mode = if a.eat("on") {
            ReplyMode::On
        } else if a.eat("off") {
            ReplyMode::Off
        } else if a.eat("skip") {
            ReplyMode::Skip
        } else {
            return syntax_error();
        };
        ctx.client.reply_mode = mode;
        return Reply::ok().into();
    }
    if sub.is("pause") && a.remaining() == 1 {
        return match a.timeout() {
            Err(e) => err(e),
            Ok(t) => {
                ctx.node.clients_paused_until = now + t;
                Reply::ok().into()
            }
        };
    }
    if sub.is("kill") {
        if a.remaining() == 1 {
            let addr = a.word().text();
            let victim = ctx
                .node
                .clients
                .values()
                .find(|c| c.addr == addr)
                .map(|c| c.id);
            return match victim {
                Some(id) => {
                    kill(ctx, id);
                    Reply::ok().into()
                }
                None => err(WireError::NoSuchClient),
            };
        }
        let f = match KillFilter::parse(&mut a) {
            Ok(f) => f,
            Err(e) => return err(e),
        };
        let me = ctx.client.id;
        let victims: Vec<u64> = ctx
            .node
            .clients
            .values()
            .filter(|c| f.id.is_none_or(|id| c.id == id))
            .filter(|c| f.addr.as_ref().is_none_or(|a| &c.addr == a))
            .filter(|c| !(f.skipme && c.id == me))
            .map(|c| c.id)
            .collect();
        for &v in &victims {
            kill(ctx, v);
        }
        return Reply::Integer(victims.len() as i64).into();
    }
    err(WireError::ClientUsage)
}

/// The filters of `CLIENT KILL <filter> <value> ...`.
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    skipme: bool,
}

impl KillFilter {
    /// Filter and value pairs, in any order; a filter without a value is
    /// a syntax error.
    fn parse(a: &mut Args) -> Result<Self, WireError> {
        let mut f = KillFilter {
            id: None,
            addr: None,
            skipme: true,
        };
        while !a.is_done() {
            if a.remaining() < 2 {
                return Err(WireError::Syntax);
            }
            if a.eat("id") {
                f.id = Some(a.int(WireError::Syntax)? as u64);
            } else if a.eat("type") {
                let kind = a.word();
                if !kind.is("normal") {
                    return Err(WireError::UnknownClientType(kind.text()));
                }
            } else if a.eat("addr") {
                f.addr = Some(a.word().text());
            } else if a.eat("skipme") {
                f.skipme = if a.eat("yes") {
                    true
                } else if a.eat("no") {
                    false
                } else {
                    return Err(WireError::Syntax);
                };
            } else {
                return Err(WireError::Syntax);
            }
        }
        Ok(f)
    }
}

fn kill(ctx: &mut Ctx, id: u64) {
    if let Some(c) = ctx.node.clients.get_mut(&id) {
        if let Some(k) = c.kill.take() {
            let _ = k.send(());
        }
    }
}
