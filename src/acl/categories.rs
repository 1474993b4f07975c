//! ACL categories (`+@produce`, `ACL CAT`): which commands each one
//! names. Redis's own categories are kept where they mean something for a
//! job queue (`read`, `write`, `fast`, `slow`, `admin`, `dangerous`,
//! `connection`); `produce`, `consume`, `introspection` and `cluster` are
//! ours. An entry is a whole command (`qlen`) or one subcommand
//! (`config|get`), so a read-only user can be given `CONFIG GET` without
//! `CONFIG SET`.

use super::names::COMMANDS;

/// Category names in `ACL CAT` order.
pub const NAMES: [&str; 12] = [
    "read",
    "write",
    "fast",
    "slow",
    "admin",
    "dangerous",
    "connection",
    "produce",
    "consume",
    "introspection",
    "cluster",
    "all",
];

/// Members of the categories that are not derived from command flags.
fn listed(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "read" => &[
            "show", "qlen", "qpeek", "qstat", "qscan", "jscan", "waitjob",
        ],
        "write" => &[
            "addjob",
            "getjob",
            "ackjob",
            "fastack",
            "deljob",
            "loadjob",
            "enqueue",
            "nack",
            "dequeue",
            "working",
            "pause",
            "redrive",
            "jobpriority",
            "schedule",
            "qlimit",
            "batch",
        ],
        "admin" => &[
            "shutdown",
            "monitor",
            "debug",
            "config",
            "cluster",
            "client",
            "slowlog",
            "latency",
            "bgrewriteaof",
            "loadjob",
            "acl",
            "deljob",
            "dequeue",
            "pause",
            "redrive",
            "schedule",
            "qlimit",
        ],
        "dangerous" => &[
            "shutdown",
            "monitor",
            "debug",
            "config",
            "cluster",
            "client",
            "slowlog",
            "latency",
            "bgrewriteaof",
            "loadjob",
            "acl",
        ],
        "connection" => &["auth", "ping", "hello", "client", "acl|whoami"],
        // Producers add jobs and may wait for them to be processed.
        "produce" => &["addjob", "enqueue", "waitjob", "jobpriority", "cancel"],
        // Workers fetch jobs, report progress and acknowledge them.
        "consume" => &["getjob", "ackjob", "fastack", "nack", "working"],
        // Everything a dashboard or a monitoring probe reads, nothing it
        // could change (subcommands where the command also writes).
        "introspection" => &[
            "ping",
            "time",
            "info",
            "hello",
            "command",
            "qlen",
            "qstat",
            "qpeek",
            "qscan",
            "jscan",
            "show",
            "cluster|info",
            "cluster|nodes",
            "cluster|myid",
            "config|get",
            "client|list",
            "client|getname",
            "client|id",
            "slowlog|get",
            "slowlog|len",
            "latency|latest",
            "latency|history",
            "latency|doctor",
            "acl|whoami",
            "acl|cat",
            "schedule|list",
            "schedule|show",
        ],
        "cluster" => &["cluster", "hello"],
        _ => return None,
    })
}

/// The entries of a category (lower-case command or `command|sub`), None
/// for an unknown name. `fast`, `slow` and `all` follow the command table.
pub fn members(name: &str) -> Option<Vec<&'static str>> {
    let name = name.to_ascii_lowercase();
    match name.as_str() {
        "fast" => Some(COMMANDS.iter().filter(|c| c.1).map(|c| c.0).collect()),
        "slow" => Some(COMMANDS.iter().filter(|c| !c.1).map(|c| c.0).collect()),
        "all" => Some(COMMANDS.iter().map(|c| c.0).collect()),
        other => listed(other).map(<[&str]>::to_vec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_member_is_a_command() {
        for cat in NAMES {
            let Some(m) = members(cat) else {
                panic!("{cat} has no members")
            };
            assert!(!m.is_empty(), "{cat}");
            for e in m {
                let cmd = e.split('|').next().unwrap_or(e);
                assert!(
                    COMMANDS.iter().any(|c| c.0 == cmd),
                    "{cat}: {e} is not a command"
                );
            }
        }
        assert!(members("nope").is_none());
    }
}
