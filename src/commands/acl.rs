//! ACL (docs/COMMANDS.md#acl) and the node-side glue of `crate::acl`: the
//! permission check `dispatch` runs before every command, logging in as
//! a user (AUTH, HELLO AUTH, HTTP basic auth), and the gates of DEBUG and
//! of protected CONFIG SET parameters.

use super::args::Args;
use super::{err, Ctx, Outcome};
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
    args: &[&[u8]],
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
    args: &[&[u8]],
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

pub fn acl(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let sub = a.word();
    let n = a.remaining();
    let now = ctx.now;
    let acl = &mut ctx.node.acl;
    if sub.is("setuser") && n >= 1 {
        let name = a.arg();
        if !crate::acl::user::valid_name(name) {
            return Reply::err("ERR Usernames can't contain spaces or null characters").into();
        }
        let rules: Vec<&[u8]> = a.rest().iter().map(|r| &r[..]).collect();
        return match acl.set_user(&text(name), &rules) {
            Ok(()) => {
                changed(ctx.node);
                Reply::ok().into()
            }
            Err((op, e)) => setuser_error(&op, e),
        };
    }
    if sub.is("getuser") && n == 1 {
        let Some(u) = acl.get(&text(a.arg())) else {
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
    if sub.is("deluser") && n >= 1 {
        let names = a.rest();
        let mut deleted = 0;
        for name in names {
            let name = text(name);
            if name == DEFAULT_USER {
                return Reply::err("ERR The 'default' user cannot be removed").into();
            }
        }
        let mut kill = Vec::new();
        for name in names {
            let name = text(name);
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
    if sub.is("list") && n == 0 {
        return Reply::Array(
            acl.users()
                .map(|(name, u)| Reply::bulk_str(&format!("user {name} {}", u.describe())))
                .collect(),
        )
        .into();
    }
    if sub.is("users") && n == 0 {
        return Reply::Array(acl.users().map(|(name, _)| Reply::bulk_str(name)).collect()).into();
    }
    if sub.is("whoami") && n == 0 {
        return Reply::bulk_str(&ctx.client.acl.user).into();
    }
    if sub.is("cat") && n <= 1 {
        return match a.next() {
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
    if sub.is("log") && n <= 1 {
        if a.eat("reset") {
            acl.log.reset();
            return Reply::ok().into();
        }
        let count = if a.is_done() {
            10
        } else {
            match a.int_in(0..=i64::MAX, WireError::NotInteger) {
                Ok(c) => usize::try_from(c).unwrap_or(usize::MAX),
                Err(e) => return err(e),
            }
        };
        return acl.log.reply(count, now).into();
    }
    if sub.is("save") && n == 0 {
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
    if sub.is("load") && n == 0 {
        return match store::load(acl) {
            Ok(()) => {
                sync::broadcast(&ctx.node.acl, &mut ctx.node.engine);
                Reply::ok().into()
            }
            Err(e) => Reply::err(format!("ERR {e}")).into(),
        };
    }
    if sub.is("genpass") && n <= 1 {
        let bits = if a.is_done() {
            256
        } else {
            match a.int_in(1..=4096, WireError::AclGenpassBits) {
                Ok(b) => b as usize,
                Err(e) => return err(e),
            }
        };
        return Reply::bulk_str(&genpass(bits)).into();
    }
    if sub.is("dryrun") && n >= 2 {
        let name = text(a.arg());
        let Some(u) = ctx.node.acl.get(&name) else {
            return Reply::err(format!("ERR User '{name}' not found")).into();
        };
        // The command to judge, name first (the arity check keeps it).
        let cmd = a.rest();
        let cmd_name = text(cmd.first().map_or(&[][..], |c| &c[..]));
        let Some(idx) = crate::acl::names::index(&cmd_name.to_ascii_lowercase()) else {
            return Reply::err(format!("ERR Command '{cmd_name}' not found")).into();
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
    if sub.is("help") && n == 0 {
        return Reply::Array(HELP.iter().map(|l| Reply::Status(l.to_string())).collect()).into();
    }
    Reply::err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        sub.text()
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
