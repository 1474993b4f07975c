//! ACL (docs/COMMANDS.md#acl) and the node-side glue of `crate::acl`: the
//! permission check `dispatch` runs before every command, logging in as
//! a user (AUTH, HELLO AUTH, HTTP basic auth), and the gates of DEBUG and
//! of protected CONFIG SET parameters.

use bytes::Bytes;

use super::{eq_ic, err, string2ll, Ctx, Outcome};
use crate::acl::check::{self, Denied};
use crate::acl::log::Reason;
use crate::acl::{categories, protect, store, sync, RuleError, DEFAULT_USER};
use crate::errors::WireError;
use crate::node::{ClientState, Node};
use crate::protocol::resp::Reply;

/// The permission check run before every command: None to go on, or the
/// refusal (logged in ACL LOG). One comparison while the connection's
/// user is unrestricted and the table unchanged.
#[inline]
pub fn check(
    node: &mut Node,
    client: &mut ClientState,
    idx: usize,
    args: &[Bytes],
    now: u64,
) -> Option<Outcome> {
    if client.acl.unrestricted_at(node.acl.epoch()) {
        return None;
    }
    check_slow(node, client, idx, args, now)
}

#[cold]
fn check_slow(
    node: &mut Node,
    client: &mut ClientState,
    idx: usize,
    args: &[Bytes],
    now: u64,
) -> Option<Outcome> {
    let verdict = match node.acl.get(&client.acl.user) {
        None => Err(Denied::NoUser),
        Some(u) if u.unrestricted() => {
            client.acl.set_unrestricted_at(node.acl.epoch());
            return None;
        }
        Some(u) => check::judge(u, &node.engine, idx, args),
    };
    let denied = verdict.err()?;
    let (reason, object, reply) = match denied {
        // The user was deleted: Redis closes its connections.
        Denied::NoUser => return Some(Outcome::Close(None)),
        Denied::Command(name) => {
            let reply = check::noperm_command(&name);
            (Reason::Command, name, reply)
        }
        Denied::Queue(q) => (
            Reason::Key,
            String::from_utf8_lossy(&q).into_owned(),
            check::noperm_key(),
        ),
    };
    let info = client_info(node, client);
    node.acl
        .log
        .add(reason, object, client.acl.user.clone(), info, now);
    Some(Outcome::Reply(reply))
}

/// ACL LOG `client-info`: Redis's CLIENT INFO line, for the fields we have.
fn client_info(node: &Node, client: &ClientState) -> String {
    let name = node
        .clients
        .get(&client.id)
        .and_then(|c| c.name.as_ref())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    format!(
        "id={} addr={} name={} cmd={} user={} resp={}",
        client.id, client.addr, name, client.last_cmd, client.acl.user, client.proto
    )
}

/// `<user> <password>` (AUTH, HELLO AUTH, HTTP basic auth): on success the
/// connection is that user; a refusal is logged in ACL LOG.
pub fn login(
    node: &mut Node,
    client: &mut ClientState,
    user: &[u8],
    pass: &[u8],
    now: u64,
) -> bool {
    let name = String::from_utf8_lossy(user).into_owned();
    let ok = node
        .acl
        .get(&name)
        .is_some_and(|u| u.enabled && u.password_ok(pass));
    if !ok {
        let info = client_info(node, client);
        node.acl
            .log
            .add(Reason::Auth, "AUTH".into(), name, info, now);
        return false;
    }
    client.authenticated = true;
    client.acl.login(&name);
    let clients = &node.clients;
    node.acl
        .session(client.id, &name, |id| clients.contains_key(&id));
    true
}

/// DEBUG under `enable-debug-command`.
pub fn debug_allowed(ctx: &Ctx) -> Result<(), Outcome> {
    let gate = ctx.node.config.enable_debug_command;
    if gate.allows(protect::is_local(&ctx.client.addr)) {
        return Ok(());
    }
    Err(Reply::err(protect::DEBUG_REFUSED).into())
}

/// CONFIG SET of a protected parameter under `enable-protected-configs`.
pub fn config_set_allowed(ctx: &Ctx, name: &str) -> Result<(), Outcome> {
    if !protect::PROTECTED_CONFIGS.contains(&name) {
        return Ok(());
    }
    let gate = ctx.node.config.enable_protected_configs;
    if gate.allows(protect::is_local(&ctx.client.addr)) {
        return Ok(());
    }
    Err(Reply::err(protect::protected_config_refused(name)).into())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// After a local change: persist, and send the table to the cluster.
fn changed(node: &mut Node) {
    store::save(&mut node.acl);
    sync::broadcast(&node.acl, &mut node.engine);
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

pub fn acl(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    let n = args.len();
    let now = ctx.now;
    let acl = &mut ctx.node.acl;
    if eq_ic(sub, "setuser") && n >= 3 {
        let name = &args[2];
        if !crate::acl::user::valid_name(name) {
            return Reply::err("ERR Usernames can't contain spaces or null characters").into();
        }
        let rules: Vec<&[u8]> = args[3..].iter().map(|a| &a[..]).collect();
        return match acl.set_user(&text(name), &rules) {
            Ok(()) => {
                changed(ctx.node);
                Reply::ok().into()
            }
            Err((op, e)) => setuser_error(&op, e),
        };
    }
    if eq_ic(sub, "getuser") && n == 3 {
        let Some(u) = acl.get(&text(&args[2])) else {
            return Reply::NullBulk.into();
        };
        return Reply::map(vec![
            (
                "flags",
                Reply::Array(u.flags().iter().map(|f| Reply::bulk_str(f)).collect()),
            ),
            (
                "passwords",
                Reply::Array(
                    u.password_hexes()
                        .iter()
                        .map(|h| Reply::bulk_str(h))
                        .collect(),
                ),
            ),
            ("commands", Reply::bulk_str(&u.commands_text())),
            ("keys", Reply::bulk_str(&u.keys_text())),
            ("channels", Reply::bulk_str(&u.channels_text())),
            ("selectors", Reply::Array(Vec::new())),
        ])
        .into();
    }
    if eq_ic(sub, "deluser") && n >= 3 {
        let mut deleted = 0;
        for a in &args[2..] {
            let name = text(a);
            if name == DEFAULT_USER {
                return Reply::err("ERR The 'default' user cannot be removed").into();
            }
        }
        let mut kill = Vec::new();
        for a in &args[2..] {
            let name = text(a);
            if ctx.node.acl.del_user(&name) {
                deleted += 1;
                kill.extend(ctx.node.acl.sessions_of(&name));
            }
        }
        if deleted > 0 {
            changed(ctx.node);
        }
        // Connections of a deleted user end (the calling one after its
        // reply, on its next command).
        for id in kill {
            if id == ctx.client.id {
                continue;
            }
            if let Some(k) = ctx.node.clients.get_mut(&id).and_then(|c| c.kill.take()) {
                let _ = k.send(());
            }
        }
        return Reply::Integer(deleted).into();
    }
    if eq_ic(sub, "list") && n == 2 {
        return Reply::Array(
            acl.users()
                .map(|(name, u)| Reply::bulk_str(&format!("user {name} {}", u.describe())))
                .collect(),
        )
        .into();
    }
    if eq_ic(sub, "users") && n == 2 {
        return Reply::Array(acl.users().map(|(name, _)| Reply::bulk_str(name)).collect()).into();
    }
    if eq_ic(sub, "whoami") && n == 2 {
        return Reply::bulk_str(&ctx.client.acl.user).into();
    }
    if eq_ic(sub, "cat") && (n == 2 || n == 3) {
        return match args.get(2) {
            None => Reply::Array(
                categories::NAMES
                    .iter()
                    .filter(|c| **c != "all")
                    .map(|c| Reply::bulk_str(c))
                    .collect(),
            )
            .into(),
            Some(c) => match categories::members(&text(c)) {
                Some(m) => Reply::Array(m.iter().map(|c| Reply::bulk_str(c)).collect()).into(),
                None => Reply::err(format!("ERR Unknown category '{}'", text(c))).into(),
            },
        };
    }
    if eq_ic(sub, "log") && (n == 2 || n == 3) {
        let count = match args.get(2) {
            None => 10,
            Some(a) if eq_ic(a, "reset") => {
                acl.log.reset();
                return Reply::ok().into();
            }
            Some(a) => match string2ll(a) {
                Some(c) if c >= 0 => usize::try_from(c).unwrap_or(usize::MAX),
                _ => return err(WireError::NotInteger),
            },
        };
        return acl.log.reply(count, now).into();
    }
    if eq_ic(sub, "save") && n == 2 {
        if acl.files.as_ref().is_none_or(|f| f.aclfile.is_none()) {
            return Reply::err(format!("ERR {}", store::NO_ACLFILE)).into();
        }
        return match store::write_all(acl) {
            Ok(()) => Reply::ok().into(),
            Err(e) => {
                tracing::warn!(error = %e, "ACL SAVE failed.");
                Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information").into()
            }
        };
    }
    if eq_ic(sub, "load") && n == 2 {
        return match store::load(acl) {
            Ok(()) => {
                sync::broadcast(&ctx.node.acl, &mut ctx.node.engine);
                Reply::ok().into()
            }
            Err(e) => Reply::err(format!("ERR {e}")).into(),
        };
    }
    if eq_ic(sub, "genpass") && (n == 2 || n == 3) {
        let bits = match args.get(2) {
            None => 256,
            Some(a) => match string2ll(a) {
                Some(b) if (1..=4096).contains(&b) => b as usize,
                _ => {
                    return Reply::err(
                        "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                    )
                    .into()
                }
            },
        };
        return Reply::bulk_str(&genpass(bits)).into();
    }
    if eq_ic(sub, "dryrun") && n >= 4 {
        let name = text(&args[2]);
        let Some(u) = ctx.node.acl.get(&name) else {
            return Reply::err(format!("ERR User '{name}' not found")).into();
        };
        let cmd = &args[3..];
        let Some(idx) = crate::acl::names::index(&text(&cmd[0]).to_ascii_lowercase()) else {
            return Reply::err(format!("ERR Command '{}' not found", text(&cmd[0]))).into();
        };
        return match check::judge(u, &ctx.node.engine, idx, cmd) {
            Ok(()) => Reply::ok().into(),
            Err(Denied::Command(c)) => Reply::bulk_str(&format!(
                "This user has no permissions to run the '{c}' command"
            ))
            .into(),
            Err(Denied::Queue(q)) => Reply::bulk_str(&format!(
                "This user has no permissions to access the '{}' key",
                text(&q)
            ))
            .into(),
            Err(Denied::NoUser) => Reply::err(format!("ERR User '{name}' not found")).into(),
        };
    }
    if eq_ic(sub, "help") && n == 2 {
        return Reply::Array(HELP.iter().map(|l| Reply::Status(l.to_string())).collect()).into();
    }
    Reply::err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        text(sub)
    ))
    .into()
}

fn setuser_error(op: &str, e: RuleError) -> Outcome {
    Reply::err(format!(
        "ERR Error in ACL SETUSER modifier '{op}': {}",
        e.text()
    ))
    .into()
}

/// ACL GENPASS: `bits` random bits from the OS, as hex (rounded up to 4).
fn genpass(bits: usize) -> String {
    use rand::RngCore;
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(chars);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_names_follow_the_command_table() {
        let ours: Vec<(&str, bool)> = super::super::COMMANDS
            .iter()
            .map(|c| (c.name, c.flags & super::super::F_FAST != 0))
            .collect();
        assert_eq!(
            ours,
            crate::acl::names::COMMANDS.to_vec(),
            "crate::acl::names::COMMANDS must list the command table"
        );
    }

    #[test]
    fn genpass_lengths() {
        assert_eq!(genpass(256).len(), 64);
        assert_eq!(genpass(5).len(), 2);
        assert!(genpass(32).chars().all(|c| c.is_ascii_hexdigit()));
    }
}
