//! Client commands: the command table (names, arity, flags as Disque
//! reports them), dispatch in Disque's order (docs/COMMANDS.md#dispatch-and-common-errors), and one module per
//! command or small family. Argument errors become `-ERR ...` replies and
//! keep the connection open; only protocol errors close it. Replies are
//! encoded here from the engine's domain values, those of blocked clients
//! too (`wake`).

pub mod ackjob;
pub mod acl;
pub mod addjob;
pub mod admin;
pub mod args;
pub mod auth;
pub mod batch;
pub mod cancel;
pub mod client;
pub mod cluster_cmd;
pub mod config_cmd;
pub mod debug;
pub mod getjob;
pub mod hello;
pub mod info;
pub mod jobs;
pub mod nack;
pub mod pause;
pub mod priority;
pub mod progress;
pub mod qlimit;
pub mod queues;
pub mod redrive;
pub mod scan;
pub mod schedule;
pub mod show;
pub mod spill;
pub mod waitjob;
pub mod wake;

pub use wake::deliver_wakes;

use tokio::sync::oneshot;

use crate::domain::job::JobId;
use crate::errors::WireError;
use crate::node::{ClientState, Node};
use crate::protocol::resp::Reply;

pub type Handler = fn(&mut Ctx, &[&[u8]]) -> Outcome;

pub const F_WRITE: u8 = 1;
pub const F_READONLY: u8 = 2;
pub const F_DENYOOM: u8 = 4;
pub const F_ADMIN: u8 = 8;
pub const F_RANDOM: u8 = 16;
pub const F_LOADING: u8 = 32;
pub const F_SKIP_MONITOR: u8 = 64;
pub const F_FAST: u8 = 128;

pub const FLAG_NAMES: [(u8, &str); 8] = [
    (F_WRITE, "write"),
    (F_READONLY, "readonly"),
    (F_DENYOOM, "denyoom"),
    (F_ADMIN, "admin"),
    (F_RANDOM, "random"),
    (F_LOADING, "loading"),
    (F_SKIP_MONITOR, "skip_monitor"),
    (F_FAST, "fast"),
];

pub struct CommandSpec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: u8,
    pub handler: Handler,
}

const W: u8 = F_WRITE;
const R: u8 = F_READONLY;

/// Disque 1.0's command table, in its order (COMMAND and commandstats use it).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "auth",
        // Disque's arity is 2; -2 also admits Redis 6's `AUTH default <pw>`.
        arity: -2,
        flags: R | F_LOADING | F_FAST,
        handler: auth::auth,
    },
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: R | F_FAST,
        handler: admin::ping,
    },
    CommandSpec {
        name: "info",
        arity: -1,
        flags: R | F_LOADING,
        handler: info::info,
    },
    CommandSpec {
        name: "shutdown",
        arity: -1,
        flags: R | F_ADMIN | F_LOADING,
        handler: admin::shutdown,
    },
    CommandSpec {
        name: "monitor",
        arity: 1,
        flags: R | F_ADMIN,
        handler: admin::monitor,
    },
    CommandSpec {
        name: "debug",
        arity: -2,
        flags: F_ADMIN,
        handler: debug::debug,
    },
    CommandSpec {
        name: "config",
        arity: -2,
        flags: R | F_ADMIN,
        handler: config_cmd::config,
    },
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: R | F_ADMIN,
        handler: cluster_cmd::cluster,
    },
    CommandSpec {
        name: "client",
        arity: -2,
        flags: R | F_ADMIN,
        handler: client::client,
    },
    CommandSpec {
        name: "slowlog",
        arity: -2,
        flags: R,
        handler: admin::slowlog,
    },
    CommandSpec {
        name: "time",
        arity: 1,
        flags: R | F_FAST,
        handler: admin::time,
    },
    CommandSpec {
        name: "command",
        arity: 0,
        flags: R | F_LOADING,
        handler: admin::command,
    },
    CommandSpec {
        name: "latency",
        arity: -2,
        flags: R | F_ADMIN | F_LOADING,
        handler: admin::latency,
    },
    // Disque's HELLO takes no argument; -1 also admits the Redis 6 handshake.
    CommandSpec {
        name: "hello",
        arity: -1,
        flags: R | F_FAST,
        handler: hello::hello,
    },
    CommandSpec {
        name: "addjob",
        arity: -4,
        flags: W | F_DENYOOM | F_FAST,
        handler: addjob::addjob,
    },
    CommandSpec {
        name: "getjob",
        arity: -2,
        flags: W | F_FAST,
        handler: getjob::getjob,
    },
    CommandSpec {
        name: "ackjob",
        arity: -1,
        flags: W | F_FAST,
        handler: ackjob::ackjob,
    },
    CommandSpec {
        name: "fastack",
        arity: -1,
        flags: W | F_FAST,
        handler: ackjob::fastack,
    },
    CommandSpec {
        name: "deljob",
        arity: -1,
        flags: W | F_FAST,
        handler: jobs::deljob,
    },
    CommandSpec {
        name: "show",
        arity: 2,
        flags: R | F_FAST,
        handler: show::show,
    },
    CommandSpec {
        name: "loadjob",
        arity: 2,
        flags: W,
        handler: admin::loadjob,
    },
    CommandSpec {
        name: "bgrewriteaof",
        arity: 1,
        flags: R | F_ADMIN,
        handler: admin::bgrewriteaof,
    },
    CommandSpec {
        name: "qlen",
        // 2 in Disque; -2 admits our `QLEN <q> CLUSTER`.
        arity: -2,
        flags: R | F_FAST,
        handler: queues::qlen,
    },
    CommandSpec {
        name: "qpeek",
        arity: 3,
        flags: R,
        handler: queues::qpeek,
    },
    CommandSpec {
        name: "qstat",
        // 2 in Disque; -2 admits our `QSTAT <q> CLUSTER`.
        arity: -2,
        flags: R | F_FAST,
        handler: queues::qstat,
    },
    CommandSpec {
        name: "qscan",
        arity: -1,
        flags: R,
        handler: scan::qscan,
    },
    CommandSpec {
        name: "jscan",
        arity: -1,
        flags: R,
        handler: scan::jscan,
    },
    CommandSpec {
        name: "enqueue",
        arity: -1,
        flags: W | F_DENYOOM | F_FAST,
        handler: jobs::enqueue,
    },
    CommandSpec {
        name: "nack",
        arity: -1,
        flags: W | F_DENYOOM | F_FAST,
        handler: nack::nack,
    },
    CommandSpec {
        name: "dequeue",
        arity: -1,
        flags: W | F_FAST,
        handler: jobs::dequeue,
    },
    CommandSpec {
        name: "working",
        // 2 in Disque; -2 admits our `WORKING <id> PROGRESS ...`.
        arity: -2,
        flags: W | F_FAST,
        handler: jobs::working,
    },
    CommandSpec {
        name: "pause",
        arity: -3,
        flags: R | F_FAST,
        handler: pause::pause,
    },
    // Our extensions (docs/COMPATIBILITY.md), after Disque's 32 commands.
    CommandSpec {
        name: "waitjob",
        arity: -2,
        flags: R,
        handler: waitjob::waitjob,
    },
    CommandSpec {
        name: "redrive",
        arity: -2,
        flags: W | F_FAST,
        handler: redrive::redrive,
    },
    CommandSpec {
        name: "acl",
        arity: -2,
        flags: R | F_ADMIN | F_LOADING,
        handler: acl::acl,
    },
    CommandSpec {
        name: "jobpriority",
        arity: -3,
        flags: W | F_FAST,
        handler: priority::jobpriority,
    },
    CommandSpec {
        name: "cancel",
        arity: -1,
        flags: W | F_FAST,
        handler: cancel::cancel,
    },
    CommandSpec {
        name: "schedule",
        arity: -2,
        flags: W,
        handler: schedule::schedule,
    },
    CommandSpec {
        name: "qlimit",
        arity: -2,
        flags: W | F_FAST,
        handler: qlimit::qlimit,
    },
    CommandSpec {
        name: "batch",
        arity: -2,
        flags: W,
        handler: batch::batch,
    },
];

/// What the connection must do after a command.
pub enum Outcome {
    Reply(Reply),
    /// Wait for the engine to answer (blocked GETJOB, ADDJOB, WAITJOB,
    /// QLEN/QSTAT CLUSTER): the reply to its wake comes on the receiver.
    Blocked(oneshot::Receiver<Reply>),
    /// Send the reply (if any), then close the connection.
    Close(Option<Reply>),
    /// Shut the server down (SHUTDOWN): no reply. DEBUG RESTART asks the
    /// shell to run the binary again after this many ms.
    Shutdown {
        restart_after_ms: Option<u64>,
    },
    /// Switch the connection to MONITOR mode after replying +OK.
    Monitor,
    /// CLUSTER MEET with a host name: the shell resolves it, meets the
    /// address and replies.
    MeetHost {
        host: String,
        port: u16,
    },
    /// Jobs the command names are stored whole on disk: run it again
    /// once they are back in RAM (the receiver fires).
    PageIn(oneshot::Receiver<()>),
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Reply(r)
    }
}

/// Everything a command may touch.
pub struct Ctx<'a> {
    pub node: &'a mut Node,
    pub client: &'a mut ClientState,
    /// Unix milliseconds.
    pub now: u64,
}

/// The engine blocked the client: wait for the reply to its wake.
pub fn blocked(ctx: &mut Ctx) -> Outcome {
    Outcome::Blocked(ctx.node.block_client(ctx.client.id))
}

pub fn err(e: WireError) -> Outcome {
    Outcome::Reply(e.reply())
}

impl From<WireError> for Outcome {
    fn from(e: WireError) -> Self {
        err(e)
    }
}

pub fn syntax_error() -> Outcome {
    err(WireError::Syntax)
}

/// Strict decimal integer (Redis `string2ll`).
pub use crate::support::strings::string2ll;

/// Parse all remaining arguments as IDs first; any bad one fails the
/// whole command (docs/COMMANDS.md#job-ids).
pub fn parse_ids(args: &mut args::Args) -> Result<Vec<JobId>, Outcome> {
    args.rest()
        .iter()
        .map(|a| JobId::parse(a).ok_or_else(|| err(WireError::BadId)))
        .collect()
}

pub fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// (lower-case name, command-table index) for every command, after
/// `rename-command` (an empty new name removes the command).
pub fn name_table(renames: &[(String, String)]) -> Vec<(Vec<u8>, usize)> {
    let mut names = std::collections::HashMap::new();
    for (i, c) in COMMANDS.iter().enumerate() {
        names.insert(c.name.as_bytes().to_vec(), i);
    }
    for (old, new) in renames {
        if let Some(i) = names.remove(old.to_ascii_lowercase().as_bytes()) {
            if !new.is_empty() {
                names.insert(new.to_ascii_lowercase().into_bytes(), i);
            }
        }
    }
    let mut table: Vec<(Vec<u8>, usize)> = names.into_iter().collect();
    // `lookup` scans in this order: the job commands first, then the
    // table's order. (A HashMap's order differs per process, so ADDJOB's
    // lookup cost would depend on the run.)
    table.sort_by_key(|&(_, i)| (!HOT.contains(&COMMANDS[i].name), i));
    table
}

/// Commands a busy node runs most, looked up first.
const HOT: [&str; 6] = ["addjob", "getjob", "ackjob", "fastack", "nack", "working"];

/// Command-table index for a name as sent (case-insensitive, honouring
/// rename-command). A scan of ~32 short names beats hashing here.
pub fn lookup(node: &Node, name: &[u8]) -> Option<usize> {
    node.command_names
        .iter()
        .find(|(n, _)| n.len() == name.len() && n.eq_ignore_ascii_case(name))
        .map(|&(_, i)| i)
}

/// Run one command in Disque's dispatch order (docs/COMMANDS.md#dispatch-and-common-errors).
pub fn dispatch(node: &mut Node, client: &mut ClientState, args: &[&[u8]], now: u64) -> Outcome {
    let Some(name) = args.first() else {
        return Outcome::Reply(Reply::NullBulk);
    };
    if eq_ic(name, "quit") {
        return Outcome::Close(Some(Reply::ok()));
    }
    let Some(idx) = lookup(node, name) else {
        return err(WireError::UnknownCommand(
            String::from_utf8_lossy(name).into_owned(),
        ));
    };
    let spec = &COMMANDS[idx];
    client.last_cmd = spec.name;
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || (spec.arity < 0 && argc < -spec.arity) {
        return err(WireError::WrongArity(spec.name));
    }
    if node.requires_auth() && !client.authenticated && spec.name != "auth" && spec.name != "hello"
    {
        return err(WireError::NoAuth);
    }
    // Jobs stored whole on disk come back before anything looks at them
    // (ACL checks included), so no command needs to know about them.
    if node.engine.cold_jobs() > 0 {
        if let Some(t) = node.engine.cold_fault(&args[1..]) {
            return Outcome::PageIn(crate::node::spill::wait_cold(node, t));
        }
    }
    if let Some(refused) = acl::check(node, client, idx, args, now) {
        return refused;
    }
    // PING stays answered too (a liveness probe); readiness is INFO's
    // loading:0 (docs/COMPATIBILITY.md).
    if node.aof.loading.is_some() && spec.flags & F_LOADING == 0 && spec.name != "ping" {
        return err(WireError::Loading);
    }
    if node.engine.maxmemory() != 0 {
        let ok = node.engine.free_memory_if_needed(now);
        if !ok && spec.flags & F_DENYOOM != 0 {
            // A spilling node whose writes are behind its producers makes
            // them wait for the disk rather than refuse them, for a while.
            // The wait is the client's, not each command's: once it ran
            // out, the rest of a pipeline is refused at once until memory
            // comes down, instead of waiting again command by command.
            if node.engine.spill_relieves() {
                let since = *client.oom_wait_since.get_or_insert(now);
                let until = since + crate::node::spill::MEMORY_WAIT_MS;
                if now < until {
                    return Outcome::PageIn(crate::node::spill::wait_memory(node, until));
                }
            }
            node.command_stats.oom_refused += 1;
            return err(WireError::Oom);
        }
        if ok {
            client.oom_wait_since = None;
        }
    }
    if spec.flags & F_WRITE != 0 || spec.name == "ping" {
        crate::node::persistence::poll_writer(node, now);
        if let Some(e) = node.aof_write_error() {
            return err(e.misconf());
        }
    }
    if node.monitors_active() {
        node.feed_monitors(client, args, now);
    }
    // quanta reads the TSC directly: 9 ns against 22 for the vDSO's
    // clock_gettime here, and two reads per command were 5.5 % of a
    // pipelined ADDJOB's CPU (docs/PERFORMANCE.md, run BA).
    let start = quanta::Instant::now();
    let mut ctx = Ctx { node, client, now };
    let out = (spec.handler)(&mut ctx, args);
    let node = ctx.node;
    node.engine.serve_ready(now);
    let usec = start.elapsed().as_micros() as u64;
    node.record_call(idx, usec, args, now);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_commands_are_looked_up_first_and_renames_apply() {
        let t = name_table(&[
            ("getjob".into(), "fetch".into()),
            ("debug".into(), String::new()),
        ]);
        assert_eq!(t[0].0, b"addjob");
        assert_eq!(t[1].0, b"fetch");
        assert_eq!(t.len(), COMMANDS.len() - 1);
        assert!(t.iter().all(|(n, _)| n != b"getjob" && n != b"debug"));
        let rest: Vec<usize> = t[HOT.len()..].iter().map(|&(_, i)| i).collect();
        assert!(rest.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn table_has_32_commands() {
        // Disque's 32 plus WAITJOB, REDRIVE, ACL, JOBPRIORITY, CANCEL,
        // SCHEDULE, QLIMIT and BATCH.
        assert_eq!(COMMANDS.len(), 40);
    }
}
