//! CLUSTER subcommands (docs/COMMANDS.md#cluster): node listing, info, identity, MEET,
//! FORGET, RESET, LEAVING and SAVECONFIG.

use bytes::Bytes;

use super::args::Args;
use super::{err, syntax_error, Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn cluster(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let sub = a.word();
    let now = ctx.now;
    let n = a.remaining();
    if sub.is("nodes") && n == 0 {
        return Reply::Bulk(Bytes::from(ctx.node.engine.cluster().nodes_text(true))).into();
    }
    if sub.is("myid") && n == 0 {
        return Reply::bulk(ctx.node.engine.cluster().my_id()).into();
    }
    if sub.is("info") && n == 0 {
        let (known, reachable, size, sent, received) = ctx.node.engine.cluster_info();
        let text = format!(
            "cluster_state:ok\r\ncluster_known_nodes:{known}\r\ncluster_reachable_nodes:{reachable}\r\ncluster_size:{size}\r\ncluster_stats_messages_sent:{sent}\r\ncluster_stats_messages_received:{received}\r\n",
        );
        return Reply::Bulk(Bytes::from(text)).into();
    }
    if sub.is("meet") && n == 2 {
        let ip = a.word().text();
        let port = a.word();
        let port_s = port.text();
        let Some(port) = super::string2ll(port.bytes()) else {
            return err(WireError::InvalidPort(port_s));
        };
        if !(1..=55535).contains(&port) {
            return err(WireError::InvalidAddress(format!("{ip}:{port_s}")));
        }
        let Ok(addr) = ip.parse::<std::net::IpAddr>() else {
            // A host name (our extension): the shell resolves it first.
            return match crate::config::deploy::parse_host_port(&format!("{ip}:{port}")) {
                Some((host, port)) if !host.contains(':') => Outcome::MeetHost { host, port },
                _ => err(WireError::InvalidAddress(format!("{ip}:{port_s}"))),
            };
        };
        ctx.node
            .engine
            .cluster_meet(addr.to_string(), port as u16, now);
        return Reply::ok().into();
    }
    if sub.is("forget") && n == 1 {
        let id = a.arg();
        if id.len() != 40 {
            return err(WireError::InvalidNodeId);
        }
        let c = ctx.node.engine.cluster();
        if id == c.my_id().as_slice() {
            return err(WireError::ForgetMyself);
        }
        let Some(idx) = c.find(id) else {
            return err(WireError::UnknownNode(
                String::from_utf8_lossy(id).into_owned(),
            ));
        };
        ctx.node.engine.cluster_forget(idx, now);
        return Reply::ok().into();
    }
    if sub.is("reset") && n <= 1 {
        let hard = if a.is_done() || a.eat("soft") {
            false
        } else if a.eat("hard") {
            true
        } else {
            return syntax_error();
        };
        ctx.node.engine.cluster_reset(hard, now);
        return Reply::ok().into();
    }
    if sub.is("leaving") && n == 0 {
        let yes = ctx.node.engine.cluster().leaving();
        return Reply::Status(if yes { "yes" } else { "no" }.into()).into();
    }
    if sub.is("leaving") && n == 1 {
        let on = if a.eat("yes") {
            true
        } else if a.eat("no") {
            false
        } else {
            return err(WireError::LeavingArg);
        };
        ctx.node.engine.set_leaving(on);
        return Reply::ok().into();
    }
    if sub.is("saveconfig") && n == 0 {
        ctx.node.engine.request_nodes_save();
        return Reply::ok().into();
    }
    err(WireError::ClusterUsage)
}
