//! The command table as the rules see it: names in `commands::COMMANDS`
//! order (rule bitsets index it) and whether each is fast (the `fast` and
//! `slow` categories). Kept here because the ACL sits below the command
//! layer; `commands` checks in a test that both lists agree.

/// (name, fast) in command-table order.
pub const COMMANDS: [(&str, bool); 40] = [
    ("auth", true),
    ("ping", true),
    ("info", false),
    ("shutdown", false),
    ("monitor", false),
    ("debug", false),
    ("config", false),
    ("cluster", false),
    ("client", false),
    ("slowlog", false),
    ("time", true),
    ("command", false),
    ("latency", false),
    ("hello", true),
    ("addjob", true),
    ("getjob", true),
    ("ackjob", true),
    ("fastack", true),
    ("deljob", true),
    ("show", true),
    ("loadjob", false),
    ("bgrewriteaof", false),
    ("qlen", true),
    ("qpeek", false),
    ("qstat", true),
    ("qscan", false),
    ("jscan", false),
    ("enqueue", true),
    ("nack", true),
    ("dequeue", true),
    ("working", true),
    ("pause", true),
    ("waitjob", false),
    ("redrive", true),
    ("acl", false),
    ("jobpriority", true),
    ("cancel", true),
    ("schedule", false),
    ("qlimit", true),
    ("batch", false),
];

/// Table index of a command by its (lower-case) name.
pub fn index(name: &str) -> Option<usize> {
    COMMANDS.iter().position(|(n, _)| *n == name)
}
