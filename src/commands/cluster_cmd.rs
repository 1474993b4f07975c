//! CLUSTER subcommands (docs/COMMANDS.md#cluster): node listing, info, identity, MEET,
//! FORGET, RESET, LEAVING and SAVECONFIG.

use bytes::Bytes;

use super::{eq_ic, err, syntax_error, Ctx, Outcome};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn cluster(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    let now = ctx.now;
    let n = args.len();
    if eq_ic(sub, "nodes") && n == 2 {
        return Reply::Bulk(Bytes::from(ctx.node.engine.cluster().nodes_text(true))).into();
    }
    if eq_ic(sub, "myid") && n == 2 {
        return Reply::bulk(ctx.node.engine.cluster().my_id()).into();
    }
    if eq_ic(sub, "info") && n == 2 {
        let (known, reachable, size, sent, received) = ctx.node.engine.cluster_info();
        let text = format!(
            "cluster_state:ok\r\ncluster_known_nodes:{known}\r\ncluster_reachable_nodes:{reachable}\r\ncluster_size:{size}\r\ncluster_stats_messages_sent:{sent}\r\ncluster_stats_messages_received:{received}\r\n",
        );
        return Reply::Bulk(Bytes::from(text)).into();
    }
    if eq_ic(sub, "meet") && n == 4 {
        let ip = String::from_utf8_lossy(&args[2]).into_owned();
        let port_s = String::from_utf8_lossy(&args[3]).into_owned();
        let Some(port) = super::string2ll(&args[3]) else {
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
    if eq_ic(sub, "forget") && n == 3 {
        let id = &args[2];
        if id.len() != 40 {
            return err(WireError::InvalidNodeId);
        }
        let c = ctx.node.engine.cluster();
        if id.as_ref() == c.my_id().as_slice() {
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
    if eq_ic(sub, "reset") && n <= 3 {
        let hard = match args.get(2) {
            None => false,
            Some(a) if eq_ic(a, "soft") => false,
            Some(a) if eq_ic(a, "hard") => true,
            Some(_) => return syntax_error(),
        };
        ctx.node.engine.cluster_reset(hard, now);
        return Reply::ok().into();
    }
    if eq_ic(sub, "leaving") && n == 2 {
        let yes = ctx.node.engine.cluster().leaving();
        return Reply::Status(if yes { "yes" } else { "no" }.into()).into();
    }
    if eq_ic(sub, "leaving") && n == 3 {
        let on = if eq_ic(&args[2], "yes") {
            true
        } else if eq_ic(&args[2], "no") {
            false
        } else {
            return err(WireError::LeavingArg);
        };
        ctx.node.engine.set_leaving(on);
        return Reply::ok().into();
    }
    if eq_ic(sub, "saveconfig") && n == 2 {
        ctx.node.engine.request_nodes_save();
        return Reply::ok().into();
    }
    err(WireError::ClusterUsage)
}
