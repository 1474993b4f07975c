//! Server and admin commands (docs/COMMANDS.md#server-commands):
//! HELLO, INFO, PING, AUTH, TIME, COMMAND, CLIENT, SLOWLOG, MONITOR,
//! DEBUG, SHUTDOWN and SIGTERM.

use std::time::Duration;

use crate::harness::{info_value, wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, assert_bytes, bulk, error, POLL, WAIT};

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn hello_bare_lists_this_node() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = c.cmd(&["CLUSTER", "MYID"]).text();
    assert_eq!(id.len(), 40);
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let raw = c.cmd_raw(&["HELLO"]);
    let port = s.port().to_string();
    let mut want =
        format!("*3\r\n:1\r\n$40\r\n{id}\r\n*4\r\n$40\r\n{id}\r\n$0\r\n\r\n").into_bytes();
    want.extend_from_slice(&bulk(port.as_bytes()));
    want.extend_from_slice(b"$1\r\n1\r\n");
    assert_bytes(&raw, &want);
}

#[test]
fn ping_forms() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_bytes(&c.cmd_raw(&["ping", "hi"]), b"$2\r\nhi\r\n");
    assert_bytes(&c.cmd_raw(&["PING", ""]), b"$0\r\n\r\n");
}

const INFO_KEYS: &[(&str, &[&str])] = &[
    (
        "Server",
        &[
            "disque_version",
            "disque_git_sha1",
            "disque_git_dirty",
            "disque_build_id",
            "os",
            "arch_bits",
            "multiplexing_api",
            "gcc_version",
            "process_id",
            "run_id",
            "tcp_port",
            "uptime_in_seconds",
            "uptime_in_days",
            "hz",
            "executable",
            "config_file",
        ],
    ),
    (
        "Clients",
        &[
            "connected_clients",
            "client_longest_output_list",
            "client_biggest_input_buf",
            "blocked_clients",
        ],
    ),
    (
        "Memory",
        &[
            "used_memory",
            "used_memory_human",
            "used_memory_rss",
            "used_memory_peak",
            "used_memory_peak_human",
            "mem_fragmentation_ratio",
            "mem_allocator",
        ],
    ),
    ("Jobs", &["registered_jobs"]),
    ("Queues", &["registered_queues"]),
    (
        "Persistence",
        &[
            "loading",
            "aof_enabled",
            "aof_state",
            "aof_rewrite_in_progress",
            "aof_rewrite_scheduled",
            "aof_last_rewrite_time_sec",
            "aof_current_rewrite_time_sec",
            "aof_last_bgrewrite_status",
            "aof_last_write_status",
        ],
    ),
    (
        "Stats",
        &[
            "total_connections_received",
            "total_commands_processed",
            "instantaneous_ops_per_sec",
            "total_net_input_bytes",
            "total_net_output_bytes",
            "instantaneous_input_kbps",
            "instantaneous_output_kbps",
            "rejected_connections",
            "latest_fork_usec",
        ],
    ),
    (
        "CPU",
        &[
            "used_cpu_sys",
            "used_cpu_user",
            "used_cpu_sys_children",
            "used_cpu_user_children",
        ],
    ),
];

/// Split an INFO text into (title, [(key, value)]) sections, checking
/// the line structure on the way.
fn sections(info: &str) -> Vec<(String, Vec<(String, String)>)> {
    assert!(info.ends_with("\r\n"), "{info:?}");
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let blocks: Vec<&str> = info.split("\r\n\r\n").collect();
    for block in blocks {
        let block = block.trim_end_matches("\r\n");
        let mut lines = block.split("\r\n");
        let title = lines.next().unwrap();
        let title = title
            .strip_prefix("# ")
            .unwrap_or_else(|| panic!("bad title {title:?}"));
        let fields = lines
            .map(|l| {
                assert!(!l.contains('\n'), "bare LF in {l:?}");
                let (k, v) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad line {l:?}"));
                (k.to_string(), v.to_string())
            })
            .collect();
        out.push((title.to_string(), fields));
    }
    out
}

#[test]
fn info_sections_and_field_order() {
    let s = Server::start_default();
    let mut c = s.client();
    c.cmd(&["PING"]);
    let info = c.cmd(&["INFO"]).text();
    let secs = sections(&info);
    let titles: Vec<&str> = secs.iter().map(|(t, _)| t.as_str()).collect();
    let want_titles: Vec<&str> = INFO_KEYS.iter().map(|(t, _)| *t).collect();
    assert_eq!(titles, want_titles);
    for ((_, fields), (title, keys)) in secs.iter().zip(INFO_KEYS) {
        let got: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(&got, keys, "section {title}");
    }
    let default_titles: Vec<String> = sections(&c.cmd(&["INFO", "default"]).text())
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(default_titles, want_titles);
    let get = |k: &str| info_value(&info, k).unwrap();
    assert_eq!(get("disque_version"), "1.0-rc1");
    assert_eq!(get("process_id"), s.pid().to_string());
    assert_eq!(get("tcp_port"), s.port().to_string());
    assert_eq!(get("hz"), "10");
    assert_eq!(get("arch_bits"), "64");
    assert_eq!(get("config_file"), "");
    let run_id = get("run_id");
    assert_eq!(run_id.len(), 40);
    assert!(run_id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(std::path::Path::new(&get("executable")).is_absolute());
    assert_eq!(get("aof_state"), "off");
    assert_eq!(get("aof_enabled"), "0");
    assert_eq!(get("aof_last_rewrite_time_sec"), "-1");
    assert_eq!(get("aof_current_rewrite_time_sec"), "-1");
    assert_eq!(get("connected_clients"), "1");
    assert_eq!(get("blocked_clients"), "0");
    assert_eq!(get("registered_jobs"), "0");
    assert_eq!(get("registered_queues"), "0");
    for k in [
        "instantaneous_input_kbps",
        "used_cpu_sys",
        "mem_fragmentation_ratio",
    ] {
        let v = get(k);
        let (_, dec) = v.split_once('.').unwrap_or_else(|| panic!("{k}:{v}"));
        assert_eq!(dec.len(), 2, "{k}:{v}");
    }
    // A run id is fresh per start.
    let other = Server::start_default();
    assert_ne!(other.client().info_field("run_id"), run_id);
}

#[test]
fn info_single_sections_and_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["INFO", "jobs"]),
        b"$27\r\n# Jobs\r\nregistered_jobs:0\r\n\r\n",
    );
    addjob(&mut c, "q1", "b", &[]);
    addjob(&mut c, "q2", "b", &[]);
    c.cmd(&["GETJOB", "NOHANG", "FROM", "q3"]);
    assert_bytes(
        &c.cmd_raw(&["INFO", "JOBS"]),
        b"$27\r\n# Jobs\r\nregistered_jobs:2\r\n\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["INFO", "Queues"]),
        b"$31\r\n# Queues\r\nregistered_queues:3\r\n\r\n",
    );
    assert_bytes(&c.cmd_raw(&["INFO", "foo"]), b"$0\r\n\r\n");
    assert_bytes(&c.cmd_raw(&["INFO", "a", "b"]), b"-ERR syntax error\r\n");
    // commandstats only in `all` / on request, in command-table order.
    let default = c.cmd(&["INFO"]).text();
    assert!(!default.contains("# Commandstats"));
    let all = c.cmd(&["INFO", "all"]).text();
    assert!(all.contains("\r\n\r\n# Commandstats\r\n"), "{all}");
    let cs = c.cmd(&["INFO", "commandstats"]).text();
    let lines: Vec<&str> = cs.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], "# Commandstats");
    let names: Vec<&str> = lines[1..]
        .iter()
        .map(|l| {
            l.strip_prefix("cmdstat_")
                .unwrap()
                .split(':')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(names, ["info", "addjob", "getjob"]);
    let addjob_line = lines
        .iter()
        .find(|l| l.starts_with("cmdstat_addjob:"))
        .unwrap();
    assert!(
        addjob_line.starts_with("cmdstat_addjob:calls=2,usec="),
        "{addjob_line}"
    );
    let per_call = addjob_line.split("usec_per_call=").nth(1).unwrap();
    assert_eq!(per_call.split_once('.').unwrap().1.len(), 2);
    // CONFIG RESETSTAT clears them.
    assert_bytes(&c.cmd_raw(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    let cs = c.cmd(&["INFO", "commandstats"]).text();
    assert!(!cs.contains("cmdstat_addjob"), "{cs}");
}

#[test]
fn info_counts_jobs_queues_and_memory() {
    let s = Server::start_default();
    let mut c = s.client();
    let base = c.info_int("used_memory");
    assert!(
        base > 10_000 && base < 100 * 1024 * 1024,
        "used_memory {base}"
    );
    let body = "x".repeat(10_000);
    let mut req = Vec::new();
    for i in 0..1000 {
        req.extend_from_slice(&crate::harness::encode_cmd(&[
            "ADDJOB",
            &format!("mq{}", i % 10),
            &body,
            "0",
        ]));
    }
    c.send_raw(&req);
    for _ in 0..1000 {
        assert!(matches!(c.read_reply(), Reply::Status(_)));
    }
    assert_eq!(c.info_int("registered_jobs"), 1000);
    assert_eq!(c.info_int("registered_queues"), 10);
    let used = c.info_int("used_memory");
    assert!(used >= base + 10_000_000, "used_memory {base} -> {used}");
    let human = c.info_field("used_memory_human");
    assert!(human.ends_with('M'), "{human}");
    assert!(c.info_int("used_memory_peak") >= used);
    // DEBUG FLUSHALL empties both tables.
    assert_bytes(&c.cmd_raw(&["DEBUG", "FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.info_int("registered_jobs"), 0);
    assert_eq!(c.info_int("registered_queues"), 0);
    let after = c.info_int("used_memory");
    assert!(
        after < used - 8_000_000,
        "used_memory after flush {after} (was {used})"
    );
}

#[test]
fn auth_without_password() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["AUTH", "x"]),
        b"-ERR Client sent AUTH, but no password is set\r\n",
    );
}

#[test]
fn requirepass_noauth_and_auth_flow() {
    let s = Server::start(ServerOpts::with_args(&["--requirepass", "s3cret"]));
    let mut c = s.client();
    let noauth = b"-NOAUTH Authentication required.\r\n";
    assert_bytes(&c.cmd_raw(&["PING"]), noauth);
    assert_bytes(&c.cmd_raw(&["ADDJOB", "q", "b", "0"]), noauth);
    assert_bytes(&c.cmd_raw(&["INFO"]), noauth);
    assert_bytes(&c.cmd_raw(&["HELLO"]), noauth);
    // Unknown names and arity are checked before authentication.
    assert_bytes(&c.cmd_raw(&["NOPE"]), b"-ERR unknown command 'NOPE'\r\n");
    assert_bytes(
        &c.cmd_raw(&["QLEN"]),
        b"-ERR wrong number of arguments for 'qlen' command\r\n",
    );
    assert_bytes(&c.cmd_raw(&["AUTH", "wrong"]), b"-ERR invalid password\r\n");
    assert_bytes(&c.cmd_raw(&["PING"]), noauth);
    assert_bytes(&c.cmd_raw(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    // A failed AUTH de-authenticates the connection.
    assert_bytes(&c.cmd_raw(&["AUTH", "wrong"]), b"-ERR invalid password\r\n");
    assert_bytes(&c.cmd_raw(&["PING"]), noauth);
    // Each connection authenticates on its own; QUIT needs no auth.
    let mut d = s.client();
    assert_bytes(&d.cmd_raw(&["QLEN", "q"]), noauth);
    d.send(&["QUIT"]);
    assert_bytes(&d.expect_closed(), b"+OK\r\n");
    // CONFIG SET requirepass "" lifts the requirement.
    assert_bytes(&c.cmd_raw(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "requirepass", ""]),
        b"+OK\r\n",
    );
    assert_bytes(&s.client().cmd_raw(&["PING"]), b"+PONG\r\n");
    // Passwords are limited to 512 bytes.
    let long = "p".repeat(600);
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "requirepass", &long]),
        format!("-ERR Invalid argument '{long}' for CONFIG SET 'requirepass'\r\n").as_bytes(),
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "requirepass", "x"]),
        b"+OK\r\n",
    );
    let mut e = s.client();
    assert_bytes(&e.cmd_raw(&["AUTH", &long]), b"-ERR invalid password\r\n");
    assert_bytes(&e.cmd_raw(&["AUTH", "x"]), b"+OK\r\n");
}

#[test]
fn time_is_two_bulk_strings() {
    let s = Server::start_default();
    let mut c = s.client();
    let raw = c.cmd_raw(&["TIME"]);
    let r = crate::harness::decode(&raw).unwrap().unwrap().0;
    let a = r.array();
    assert_eq!(a.len(), 2);
    let (Reply::Bulk(secs), Reply::Bulk(usec)) = (&a[0], &a[1]) else {
        panic!("TIME fields are not bulk strings: {r:?}");
    };
    let secs: u64 = String::from_utf8_lossy(secs).parse().unwrap();
    let usec: u64 = String::from_utf8_lossy(usec).parse().unwrap();
    assert!(secs.abs_diff(unix_now()) <= 2);
    assert!(usec < 1_000_000);
}

#[test]
fn command_count_info_and_table() {
    let s = Server::start_default();
    let mut c = s.client();
    // Disque's 32 plus our WAITJOB, REDRIVE, ACL, JOBPRIORITY, CANCEL,
    // SCHEDULE, QLIMIT and BATCH (docs/COMPATIBILITY.md).
    assert_bytes(&c.cmd_raw(&["COMMAND", "COUNT"]), b":40\r\n");
    let r = c.cmd(&["COMMAND"]);
    assert_eq!(r.array().len(), 40);
    let find = |name: &str| -> Reply {
        r.array()
            .iter()
            .find(|e| e.array()[0].text() == name)
            .unwrap_or_else(|| panic!("{name} missing from COMMAND"))
            .clone()
    };
    let st = |s: &str| Reply::Status(s.to_string());
    let addjob = find("addjob");
    assert_eq!(
        addjob,
        Reply::Array(vec![
            Reply::Bulk(b"addjob".to_vec()),
            Reply::Int(-4),
            Reply::Array(vec![st("write"), st("denyoom"), st("fast")]),
            Reply::Int(0),
            Reply::Int(0),
            Reply::Int(0),
        ])
    );
    assert_eq!(find("show").array()[1], Reply::Int(2));
    assert_eq!(find("ackjob").array()[1], Reply::Int(-1));
    assert_eq!(find("command").array()[1], Reply::Int(0));
    assert_eq!(
        find("auth").array()[2],
        Reply::Array(vec![st("readonly"), st("loading"), st("fast")])
    );
    let info = c.cmd(&["COMMAND", "INFO", "qlen", "nope"]);
    assert_eq!(info.array().len(), 2);
    assert_eq!(info.array()[0], find("qlen"));
    assert_eq!(info.array()[1], Reply::NilBulk);
    assert_bytes(
        &c.cmd_raw(&["COMMAND", "FOO"]),
        b"-ERR Unknown subcommand or wrong number of arguments.\r\n",
    );
}

#[test]
fn client_setname_getname_list_kill() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["CLIENT", "SETNAME", "worker-1"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"$8\r\nworker-1\r\n");
    assert_bytes(
        &c.cmd_raw(&["CLIENT", "SETNAME", "bad name"]),
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"$8\r\nworker-1\r\n");
    assert_bytes(
        &c.cmd_raw(&["CLIENT", "FOO"]),
        b"-ERR Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | SETNAME connection-name)\r\n",
    );

    let mut victim = s.client();
    assert_bytes(&victim.cmd_raw(&["PING"]), b"+PONG\r\n");
    let victim_addr = victim.stream().local_addr().unwrap().to_string();
    let my_addr = c.stream().local_addr().unwrap().to_string();
    let list = c.cmd(&["CLIENT", "LIST"]).text();
    let lines: Vec<&str> = list.split_terminator('\n').collect();
    assert_eq!(lines.len(), 2, "{list:?}");
    let keys = [
        "id",
        "addr",
        "fd",
        "name",
        "age",
        "idle",
        "flags",
        "qbuf",
        "qbuf-free",
        "obl",
        "oll",
        "omem",
        "events",
        "cmd",
    ];
    for l in &lines {
        let got: Vec<&str> = l
            .split(' ')
            .map(|kv| kv.split('=').next().unwrap())
            .collect();
        assert_eq!(got, keys, "{l}");
    }
    let mine = lines
        .iter()
        .find(|l| l.contains(&format!("addr={my_addr} ")))
        .unwrap();
    assert!(mine.contains(" name=worker-1 "), "{mine}");
    assert!(mine.ends_with(" cmd=client"), "{mine}");
    assert!(lines
        .iter()
        .any(|l| l.contains(&format!("addr={victim_addr} "))));

    assert_bytes(
        &c.cmd_raw(&["CLIENT", "KILL", "127.0.0.1:1"]),
        b"-ERR No such client\r\n",
    );
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", &victim_addr]), b"+OK\r\n");
    assert_bytes(&victim.expect_closed(), b"");
    let mut v2 = s.client();
    v2.cmd(&["PING"]);
    let v2_addr = v2.stream().local_addr().unwrap().to_string();
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", "ADDR", &v2_addr]), b":1\r\n");
    v2.expect_closed();
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", "ADDR", &v2_addr]), b":0\r\n");
    // SKIPME defaults to yes: killing by our own address kills nobody.
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", "ADDR", &my_addr]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn slowlog_records_and_resets() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        b"+OK\r\n",
    );
    c.cmd(&["QLEN", "slow-queue"]);
    let r = c.cmd(&["SLOWLOG", "GET", "1"]);
    let entries = r.array();
    assert_eq!(entries.len(), 1);
    let e = entries[0].array();
    assert_eq!(e.len(), 4, "{e:?}");
    e[0].int();
    assert!(e[1].int().abs_diff(unix_now() as i64) <= 2);
    assert!(e[2].int() >= 0);
    assert_eq!(
        e[3],
        Reply::Array(vec![
            Reply::Bulk(b"QLEN".to_vec()),
            Reply::Bulk(b"slow-queue".to_vec())
        ])
    );
    assert!(c.cmd(&["SLOWLOG", "LEN"]).int() >= 2);
    assert!(c.cmd(&["SLOWLOG", "GET"]).array().len() <= 10);
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "slowlog-log-slower-than", "1000000"]),
        b"+OK\r\n",
    );
    assert_bytes(&c.cmd_raw(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["SLOWLOG", "LEN"]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["SLOWLOG", "GET"]), b"*0\r\n");
    assert_bytes(
        &c.cmd_raw(&["SLOWLOG", "FOO"]),
        b"-ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["SLOWLOG", "GET", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
}

#[test]
fn monitor_streams_commands_of_other_clients() {
    let s = Server::start_default();
    let mut m = s.client();
    assert_bytes(&m.cmd_raw(&["MONITOR"]), b"+OK\r\n");
    let mut c = s.client();
    let addr = c.stream().local_addr().unwrap().to_string();
    assert_bytes(&c.cmd_raw(&["qlen", "some queue"]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["ping", "a\"b\n"]), b"$4\r\na\"b\n\r\n");
    let line = m.read_reply();
    let Reply::Status(text) = line else {
        panic!("MONITOR line is not a status: {line:?}");
    };
    let (ts, rest) = text.split_once(' ').unwrap();
    let (secs, usec) = ts.split_once('.').unwrap();
    assert_eq!(usec.len(), 6, "{text}");
    assert!(secs.parse::<u64>().unwrap().abs_diff(unix_now()) <= 2);
    assert_eq!(rest, format!("[{addr}] \"qlen\" \"some queue\""));
    let line = m.read_reply().text();
    assert!(
        line.ends_with(&format!("[{addr}] \"ping\" \"a\\\"b\\n\"")),
        "{line}"
    );
}

#[test]
fn debug_subcommands() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["DEBUG", "ERROR", "FOO bar"]), b"-FOO bar\r\n");
    assert_bytes(
        &c.cmd_raw(&["DEBUG", "nope"]),
        b"-ERR Unknown DEBUG subcommand or wrong number of arguments for 'nope'\r\n",
    );
    assert_bytes(&c.cmd_raw(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
    assert_bytes(
        &c.cmd_raw(&["LOADJOB", "x"]),
        b"-ERR LOADJOB is a special command only processed from AOF\r\n",
    );
}

#[test]
fn debug_flushall_unblocks_blocked_clients() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "other", "b", &[]);
    c.cmd(&["PAUSE", "pq", "all"]);
    let mut b1 = s.client();
    let mut b2 = s.client();
    b1.send(&["GETJOB", "FROM", "fq"]);
    b2.send(&[
        "GETJOB",
        "TIMEOUT",
        "60000",
        "WITHCOUNTERS",
        "FROM",
        "fq",
        "gq",
    ]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 2));
    assert_bytes(&c.cmd_raw(&["DEBUG", "FLUSHALL"]), b"+OK\r\n");
    assert_bytes(&b1.read_reply_raw(), b"*-1\r\n");
    assert_bytes(&b2.read_reply_raw(), b"*-1\r\n");
    assert_eq!(c.info_int("blocked_clients"), 0);
    assert_eq!(c.info_int("registered_jobs"), 0);
    assert_eq!(c.info_int("registered_queues"), 0);
    assert_bytes(&c.cmd_raw(&["QSTAT", "pq"]), b"*-1\r\n");
    assert_bytes(&b1.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn shutdown_closes_without_reply_and_exits_zero() {
    let mut s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["SHUTDOWN", "foo"]), &error("ERR syntax error"));
    assert_bytes(
        &c.cmd_raw(&["SHUTDOWN", "a", "b"]),
        &error("ERR syntax error"),
    );
    c.send(&["SHUTDOWN"]);
    assert_bytes(&c.expect_closed(), b"");
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("server did not exit");
    assert_eq!(st.code(), Some(0), "{}", s.output());
}

#[test]
fn sigterm_exits_zero() {
    let mut s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "q", "b", &[]);
    let mut blocked = s.client();
    blocked.send(&["GETJOB", "FROM", "empty"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    s.sigterm();
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("server did not exit");
    assert_eq!(st.code(), Some(0), "{}", s.output());
    // Connections are closed.
    let rest = blocked.expect_closed();
    assert!(rest.is_empty() || rest == b"*-1\r\n", "{rest:?}");
}

#[test]
fn restart_keeps_port_and_dir() {
    let mut s = Server::start_default();
    let port = s.port();
    s.kill9();
    s.restart();
    assert_eq!(s.port(), port);
    let mut c: Client = s.client();
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.info_field("tcp_port"), port.to_string());
}

#[test]
fn idle_clients_are_closed_after_timeout_but_blocked_ones_are_not() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    let mut idle = s.client();
    assert_bytes(&idle.cmd_raw(&["PING"]), b"+PONG\r\n");
    let mut blocked = s.client();
    blocked.send(&["GETJOB", "FROM", "never"]);
    // The idle connection is closed without a reply.
    assert_bytes(&idle.expect_closed(), b"");
    // So is `c`, idle just as long.
    assert_bytes(&c.expect_closed(), b"");
    // The blocked one survived the same idle period and is still served.
    addjob(&mut s.client(), "never", "late", &[]);
    let r = blocked.read_reply();
    assert_eq!(r.array()[0].array()[2].text(), "late");
}

#[test]
fn client_reply_off_on_skip() {
    let s = Server::start_default();
    let mut c = s.client();
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["PING", "hidden"]);
    c.send(&["ADDJOB", "rq", "b", "0"]);
    assert_bytes(&c.cmd_raw(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "rq"]), b":1\r\n");
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["PING", "skipped"]);
    assert_bytes(&c.cmd_raw(&["PING", "shown"]), &bulk(b"shown"));
}

#[test]
fn client_pause_delays_other_clients() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["CLIENT", "PAUSE", "abc"]),
        b"-ERR timeout is not an integer or out of range\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CLIENT", "PAUSE", "-1"]),
        b"-ERR timeout is negative\r\n",
    );
    let mut other = s.client();
    assert_bytes(&c.cmd_raw(&["CLIENT", "PAUSE", "400"]), b"+OK\r\n");
    let start = std::time::Instant::now();
    assert_bytes(&other.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn client_setname_empty_clears_and_kill_by_id_or_self() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["CLIENT", "SETNAME", "n1"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CLIENT", "SETNAME", ""]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    let mut v = s.client();
    let v_addr = v.stream().local_addr().unwrap().to_string();
    v.cmd(&["PING"]);
    let list = c.cmd(&["CLIENT", "LIST"]).text();
    let line = list
        .lines()
        .find(|l| l.contains(&format!("addr={v_addr} ")))
        .unwrap();
    let id = line.strip_prefix("id=").unwrap().split(' ').next().unwrap();
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", "ID", id]), b":1\r\n");
    v.expect_closed();
    assert_bytes(&c.cmd_raw(&["CLIENT", "KILL", "ID", id]), b":0\r\n");
    assert_bytes(
        &c.cmd_raw(&["CLIENT", "KILL", "BOGUS", "x"]),
        b"-ERR syntax error\r\n",
    );
    // The old form may kill the caller itself: reply first, then close.
    let my_addr = c.stream().local_addr().unwrap().to_string();
    c.send(&["CLIENT", "KILL", &my_addr]);
    assert_bytes(&c.expect_closed(), b"+OK\r\n");
}

#[test]
fn stats_count_connections_and_commands() {
    let s = Server::start_default();
    let mut c = s.client();
    let conns = c.info_int("total_connections_received");
    let cmds = c.info_int("total_commands_processed");
    for _ in 0..3 {
        s.client().cmd(&["PING"]);
    }
    assert_eq!(c.info_int("total_connections_received"), conns + 3);
    assert!(c.info_int("total_commands_processed") >= cmds + 4);
    let _d = s.client();
    assert!(wait_until(WAIT, POLL, || c.info_int("connected_clients") == 2));
}

/// client-output-buffer-limit hard: a reply larger than the limit closes
/// that client; other clients and the data are unaffected.
#[test]
fn output_buffer_hard_limit_closes_the_client() {
    let s = Server::start_default();
    let mut c = s.client();
    for i in 0..100 {
        c.cmd(&["ADDJOB", "big", &format!("{i:0>300}"), "0"]);
    }
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 4096 0 0"
        ]),
        Reply::Status("OK".into())
    );
    let mut victim = s.client();
    // Small replies fit the first 16 KB and are fine.
    assert_eq!(victim.cmd(&["QLEN", "big"]), Reply::Int(100));
    victim.send(&["QPEEK", "big", "100"]);
    victim.expect_closed();
    let mut other = s.client();
    assert_eq!(other.cmd(&["QLEN", "big"]), Reply::Int(100));
}

/// DEBUG RESTART rewrites the config, exits cleanly and runs the binary
/// again: same port, same node ID, runtime config changes kept.
#[test]
fn debug_restart_reexecutes_on_the_same_port() {
    let s = Server::start(ServerOpts::with_config("loglevel notice\n"));
    let mut c = s.client();
    let id = c.cmd(&["CLUSTER", "MYID"]).text();
    let old_run = info_value(&c.cmd(&["INFO", "server"]).text(), "run_id").expect("run_id");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "2gb"]),
        Reply::Status("OK".into())
    );
    c.send(&["DEBUG", "RESTART"]);
    c.expect_closed();
    let port = s.port();
    // The old process keeps accepting until its shutdown completes (same
    // pid after exec): only a new run_id proves the restarted process.
    let back = wait_until(WAIT, POLL, || {
        let Ok(mut t) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        use std::io::{Read, Write};
        let _ = t.set_read_timeout(Some(Duration::from_secs(2)));
        if t.write_all(b"INFO server\r\n").is_err() {
            return false;
        }
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&text).contains("\r\nrun_id:")
            || !text.ends_with(b"\r\n\r\n")
        {
            match t.read(&mut buf) {
                Ok(n) if n > 0 => text.extend_from_slice(&buf[..n]),
                _ => return false,
            }
        }
        let text = String::from_utf8_lossy(&text);
        info_value(&text, "run_id").is_some_and(|r| r != old_run)
    });
    assert!(back, "node did not come back after DEBUG RESTART");
    let mut c2 = s.client();
    assert_eq!(c2.cmd(&["CLUSTER", "MYID"]).text(), id);
    let mm = c2.cmd(&["CONFIG", "GET", "maxmemory"]);
    assert_eq!(mm.array()[1].text(), "2147483648");
}
