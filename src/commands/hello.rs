//! HELLO: Disque's node-list reply (docs/COMMANDS.md#hello) when called bare, and the
//! Redis 6+ handshake `HELLO <2|3> [AUTH user pass] [SETNAME name]` that
//! modern client libraries send on connect.

use bytes::Bytes;

use super::args::Args;
use super::{err, Ctx, Outcome};
use crate::engine::cluster::{FLAG_FAIL, FLAG_LEAVING, FLAG_PFAIL};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn hello(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    if a.is_done() {
        if ctx.node.requires_auth() && !ctx.client.authenticated {
            return err(WireError::NoAuth);
        }
        return disque_hello(ctx);
    }
    let proto = match a.int(WireError::HelloProtoNotInteger) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    let mut auth: Option<(Bytes, Bytes)> = None;
    let mut setname: Option<Bytes> = None;
    while !a.is_done() {
        if a.remaining() >= 3 && a.eat("auth") {
            auth = Some((
                Bytes::copy_from_slice(a.arg()),
                Bytes::copy_from_slice(a.arg()),
            ));
        } else if a.remaining() >= 2 && a.eat("setname") {
            setname = Some(Bytes::copy_from_slice(a.arg()));
        } else {
            return err(WireError::HelloOption(a.word().text()));
        }
    }
    if !(2..=3).contains(&proto) {
        return err(WireError::NoProto);
    }
    if let Some((user, pass)) = auth {
        if !super::auth::login(ctx, &user, &pass) {
            super::auth::log_failure(ctx, "HELLO AUTH");
            return err(WireError::WrongPass);
        }
    }
    if ctx.node.requires_auth() && !ctx.client.authenticated {
        return err(WireError::HelloNoAuth);
    }
    if let Some(name) = setname {
        if let Err(e) = super::client::set_name(ctx, name) {
            return e;
        }
    }
    ctx.client.proto = proto as u8;
    let pairs = vec![
        ("server", Reply::bulk_str("disque")),
        ("version", Reply::bulk_str(crate::VERSION)),
        ("proto", Reply::Integer(proto)),
        ("id", Reply::Integer(ctx.client.id as i64)),
        ("mode", Reply::bulk_str("cluster")),
        ("role", Reply::bulk_str("master")),
        ("modules", Reply::Array(Vec::new())),
    ];
    Reply::map(pairs).into()
}

fn disque_hello(ctx: &mut Ctx) -> Outcome {
    let engine = &ctx.node.engine;
    let mut out = vec![Reply::Integer(1), Reply::bulk(engine.cluster().my_id())];
    for (i, n) in engine.cluster().live() {
        let mut prio = 1;
        if i != 0 && !n.link {
            prio = 5;
        }
        if n.has(FLAG_PFAIL) {
            prio = 10;
        }
        if n.has(FLAG_FAIL | FLAG_LEAVING) {
            prio = 100;
        }
        out.push(Reply::Array(vec![
            Reply::bulk(n.id),
            Reply::bulk_str(&n.ip),
            Reply::bulk_str(&n.port.to_string()),
            Reply::bulk_str(&prio.to_string()),
        ]));
    }
    Reply::Array(out).into()
}
