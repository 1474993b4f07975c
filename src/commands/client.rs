//! CLIENT LIST | KILL | SETNAME | GETNAME | PAUSE | REPLY | ID (docs/COMMANDS.md#client).

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
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

pub fn client(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    let now = ctx.now;
    if eq_ic(sub, "list") && args.len() == 2 {
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
    if eq_ic(sub, "getname") && args.len() == 2 {
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
    if eq_ic(sub, "setname") && args.len() == 3 {
        return match set_name(ctx, args[2].clone()) {
            Ok(()) => Reply::ok().into(),
            Err(e) => e,
        };
    }
    // Redis 7.2+ client libraries announce themselves on connect.
    if eq_ic(sub, "setinfo") && args.len() == 4 {
        return Reply::ok().into();
    }
    if eq_ic(sub, "id") && args.len() == 2 {
        return Reply::Integer(ctx.client.id as i64).into();
    }
    if eq_ic(sub, "reply") && args.len() == 3 {
        let mode = if eq_ic(&args[2], "on") {
            ReplyMode::On
        } else if eq_ic(&args[2], "off") {
            ReplyMode::Off
        } else if eq_ic(&args[2], "skip") {
            ReplyMode::Skip
        } else {
            return syntax_error();
        };
        ctx.client.reply_mode = mode;
        return Reply::ok().into();
    }
    if eq_ic(sub, "pause") && args.len() == 3 {
        return match string2ll(&args[2]) {
            None => err(WireError::TimeoutNotInteger),
            Some(t) if t < 0 => err(WireError::TimeoutNegative),
            Some(t) => {
                ctx.node.clients_paused_until = now + t as u64;
                Reply::ok().into()
            }
        };
    }
    if eq_ic(sub, "kill") {
        if args.len() == 3 {
            let addr = String::from_utf8_lossy(&args[2]).into_owned();
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
        let mut id_filter = None;
        let mut addr_filter = None;
        let mut skipme = true;
        let mut i = 2;
        while i + 1 < args.len() + 1 && i < args.len() {
            let Some(v) = args.get(i + 1) else {
                return syntax_error();
            };
            if eq_ic(&args[i], "id") {
                match string2ll(v) {
                    Some(n) => id_filter = Some(n as u64),
                    None => return syntax_error(),
                }
            } else if eq_ic(&args[i], "type") {
                if !eq_ic(v, "normal") {
                    return err(WireError::UnknownClientType(
                        String::from_utf8_lossy(v).into_owned(),
                    ));
                }
            } else if eq_ic(&args[i], "addr") {
                addr_filter = Some(String::from_utf8_lossy(v).into_owned());
            } else if eq_ic(&args[i], "skipme") {
                if eq_ic(v, "yes") {
                    skipme = true;
                } else if eq_ic(v, "no") {
                    skipme = false;
                } else {
                    return syntax_error();
                }
            } else {
                return syntax_error();
            }
            i += 2;
        }
        let me = ctx.client.id;
        let victims: Vec<u64> = ctx
            .node
            .clients
            .values()
            .filter(|c| id_filter.is_none_or(|id| c.id == id))
            .filter(|c| addr_filter.as_ref().is_none_or(|a| &c.addr == a))
            .filter(|c| !(skipme && c.id == me))
            .map(|c| c.id)
            .collect();
        for &v in &victims {
            kill(ctx, v);
        }
        return Reply::Integer(victims.len() as i64).into();
    }
    err(WireError::ClientUsage)
}

fn kill(ctx: &mut Ctx, id: u64) {
    if let Some(c) = ctx.node.clients.get_mut(&id) {
        if let Some(k) = c.kill.take() {
            let _ = k.send(());
        }
    }
}
