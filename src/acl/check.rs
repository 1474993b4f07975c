//! What a connection remembers about its user, and the matching of one
//! command against a user's rules: the command (or subcommand) and every
//! queue it names. `commands::acl::check` runs it before every command.
//!
//! Cost: a connection caches the table epoch at which its user was found
//! unrestricted (`+@all ~*`, as the default user of a node without users
//! is); while the table does not change, the check is one comparison.
//! Otherwise the user is looked up, and a restricted user's command and
//! the queues it names are matched against the rules.

use super::names::COMMANDS;
use super::DEFAULT_USER;
use crate::domain::job::JobId;
use crate::protocol::resp::Reply;

fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Never an epoch (they start at 1 and count up).
const STALE: u64 = 0;

/// A connection's user and its cached verdict.
#[derive(Clone, Debug)]
pub struct ClientAcl {
    /// The user name the connection is authenticated as.
    pub user: String,
    /// `Acl::epoch` at which `user` was found unrestricted; STALE otherwise.
    unrestricted_at: u64,
}

impl Default for ClientAcl {
    fn default() -> Self {
        ClientAcl {
            user: DEFAULT_USER.to_string(),
            unrestricted_at: STALE,
        }
    }
}

impl ClientAcl {
    /// Switch to another user (AUTH, HELLO AUTH).
    pub fn login(&mut self, user: &str) {
        self.user = user.to_string();
        self.unrestricted_at = STALE;
    }

    /// The fast path: the user was unrestricted at this table epoch.
    #[inline]
    pub fn unrestricted_at(&self, epoch: u64) -> bool {
        self.unrestricted_at == epoch
    }

    pub fn set_unrestricted_at(&mut self, epoch: u64) {
        self.unrestricted_at = epoch;
    }
}

/// Why a command was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// The user was deleted since the connection authenticated.
    NoUser,
    Command(String),
    Queue(Vec<u8>),
}

/// `-NOPERM` texts, as Redis 7 words them.
pub fn noperm_command(name: &str) -> Reply {
    Reply::err(format!(
        "NOPERM this user has no permissions to run the '{name}' command"
    ))
}

pub fn noperm_key() -> Reply {
    Reply::err("NOPERM No permissions to access a key")
}

/// Whether `user` may run this command on these arguments.
pub fn judge(
    user: &super::User,
    engine: &crate::engine::Engine,
    idx: usize,
    args: &[&[u8]],
) -> Result<(), Denied> {
    let Some(&(name, _)) = COMMANDS.get(idx) else {
        return Ok(());
    };
    // AUTH and HELLO are how a connection changes user: always allowed,
    // as Redis's no-auth commands are.
    if name == "auth" || name == "hello" {
        return Ok(());
    }
    let first = args.get(1).map(|a| &a[..]);
    if !user.can_run(idx, first) {
        let name = match first {
            Some(sub) if has_subcommands(name) => {
                format!("{name}|{}", String::from_utf8_lossy(sub).to_lowercase())
            }
            _ => name.to_string(),
        };
        return Err(Denied::Command(name));
    }
    if user.allkeys {
        return Ok(());
    }
    let mut denied = None;
    for_each_queue(name, args, engine, |q| {
        if denied.is_none() && !user.can_access(q) {
            denied = Some(q.to_vec());
        }
    });
    match denied {
        Some(q) => Err(Denied::Queue(q)),
        None => Ok(()),
    }
}

/// Commands whose first argument is a subcommand (named `cmd|sub` in
/// NOPERM errors and ACL LOG, as Redis 7 does).
fn has_subcommands(name: &str) -> bool {
    matches!(
        name,
        "config" | "cluster" | "client" | "debug" | "slowlog" | "latency" | "command" | "acl"
    )
}

/// Call `f` with every queue the command names, directly or through the
/// jobs it names (a job's queue; jobs this node does not hold are skipped:
/// an unknown ID is not a permission error).
pub fn for_each_queue(
    name: &str,
    args: &[&[u8]],
    engine: &crate::engine::Engine,
    mut f: impl FnMut(&[u8]),
) {
    let rest = args.get(1..).unwrap_or(&[]);
    let mut job = |a: &&[u8]| {
        if let Some(j) = JobId::parse(a)
            .and_then(|id| engine.lookup(&id))
            .and_then(|h| engine.job(h))
        {
            if let Some(q) = &j.queue {
                f(q);
            }
        }
    };
    match name {
        "qlen" | "qstat" | "qpeek" | "pause" | "qlimit" => {
            if let Some(q) = rest.first() {
                f(q);
            }
        }
        "addjob" => {
            if let Some(q) = rest.first() {
                f(q);
            }
            // ADDJOB <queue> <body> <timeout> [options]: DEADLETTER names
            // a second queue.
            let mut i = 4;
            while i < args.len() {
                if eq_ic(args[i], "async") {
                    i += 1;
                    continue;
                }
                if eq_ic(args[i], "deadletter") {
                    if let Some(q) = args.get(i + 1) {
                        f(q);
                    }
                }
                i += 2;
            }
        }
        "getjob" => {
            // As GETJOB parses: options, then FROM and the queues.
            let mut i = 1;
            while i < args.len() {
                let a = &args[i];
                if eq_ic(a, "from") {
                    for q in &args[i + 1..] {
                        f(q);
                    }
                    break;
                } else if eq_ic(a, "match") {
                    // MATCH may reach any queue: as JSCAN without QUEUE.
                    f(b"*");
                    i += 2;
                } else if eq_ic(a, "timeout") || eq_ic(a, "count") {
                    i += 2;
                } else {
                    i += 1;
                }
            }
        }
        "jscan" => {
            let mut named = false;
            for w in args.windows(2) {
                if eq_ic(w[0], "queue") {
                    f(w[1]);
                    named = true;
                }
            }
            // Scanning every queue reads jobs of queues the user may not
            // access: such a user must name one.
            if !named {
                f(b"*");
            }
        }
        // The queue a schedule adds its jobs to; the other subcommands
        // name schedules, not queues.
        "schedule" if rest.first().is_some_and(|a| eq_ic(a, "add")) => {
            if let Some(q) = rest.get(2) {
                f(q);
            }
        }
        // The callback queues a batch adds its jobs to.
        "batch" if rest.first().is_some_and(|a| eq_ic(a, "create")) => {
            for (i, a) in rest.iter().enumerate() {
                if eq_ic(a, "onsuccess") || eq_ic(a, "oncomplete") {
                    if let Some(q) = rest.get(i + 1) {
                        f(q);
                    }
                }
            }
        }
        "redrive" => {
            if rest.first().is_some_and(|a| eq_ic(a, "from")) {
                if let Some(q) = rest.get(1) {
                    f(q);
                }
            } else {
                rest.iter().for_each(&mut job);
            }
        }
        "ackjob" | "fastack" | "deljob" | "show" | "enqueue" | "nack" | "dequeue" | "waitjob" => {
            rest.iter().for_each(&mut job)
        }
        // WORKING <id> [PROGRESS ...]: the option values are not jobs.
        "working" => rest.iter().take(1).for_each(&mut job),
        // JOBPRIORITY <level> <id> ...
        "jobpriority" => rest.iter().skip(1).for_each(&mut job),
        // CANCEL QUEUE <queue> [MATCH <glob>] | CANCEL <id> ...
        "cancel" => {
            if rest.first().is_some_and(|a| eq_ic(a, "queue")) {
                if let Some(q) = rest.get(1) {
                    f(q);
                }
            } else {
                rest.iter().for_each(&mut job);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::acl::user::command_index;
    use crate::acl::User;

    fn args(s: &str) -> Vec<&[u8]> {
        s.split_whitespace().map(|w| w.as_bytes()).collect()
    }

    fn queues(cmd: &str) -> Vec<String> {
        let a = args(cmd);
        let engine = crate::engine::Engine::new([b'a'; 40], 7711, 1, 0);
        let mut out = Vec::new();
        for_each_queue(
            &a[0]
                .to_ascii_lowercase()
                .iter()
                .map(|&c| c as char)
                .collect::<String>(),
            &a,
            &engine,
            |q| out.push(String::from_utf8_lossy(q).into_owned()),
        );
        out
    }

    #[test]
    fn queues_named_by_commands() {
        assert_eq!(queues("GETJOB TIMEOUT 10 COUNT 2 FROM a b"), ["a", "b"]);
        assert_eq!(queues("GETJOB NOHANG FROM x"), ["x"]);
        assert_eq!(
            queues("ADDJOB q body 0 RETRY 1 ASYNC DEADLETTER d"),
            ["q", "d"]
        );
        assert_eq!(queues("QLEN q CLUSTER"), ["q"]);
        assert_eq!(queues("JSCAN 0 QUEUE q"), ["q"]);
        assert_eq!(queues("JSCAN 0 COUNT 10"), ["*"]);
        assert_eq!(queues("REDRIVE FROM q:dead"), ["q:dead"]);
        assert!(queues("ACKJOB D-00000000-000000000000000000000000-0000").is_empty());
        assert!(queues("QSCAN").is_empty());
    }

    #[test]
    fn judge_commands_and_queues() {
        let engine = crate::engine::Engine::new([b'a'; 40], 7711, 1, 0);
        let u = User::from_rules(
            "on ~emails:* +@consume +@produce"
                .split_whitespace()
                .map(str::as_bytes),
        )
        .unwrap();
        let j = |cmd: &str| {
            let a = args(cmd);
            let name = String::from_utf8_lossy(a[0]).to_lowercase();
            judge(&u, &engine, command_index(&name).unwrap(), &a)
        };
        assert_eq!(j("GETJOB FROM emails:a"), Ok(()));
        assert_eq!(
            j("GETJOB FROM emails:a orders"),
            Err(Denied::Queue(b"orders".to_vec()))
        );
        assert_eq!(
            j("CONFIG SET x y"),
            Err(Denied::Command("config|set".into()))
        );
        assert_eq!(j("QLEN emails:a"), Err(Denied::Command("qlen".into())));
        assert_eq!(j("AUTH x y"), Ok(()));
    }
}
