//! Configuration (docs/COMMANDS.md#config, conf/disque.conf): CONFIG GET/SET/REWRITE, config
//! files, startup failures.

use std::time::Duration;

use crate::harness::{Reply, ReplyExt, Server, ServerOpts};
use crate::util::assert_bytes;

const CONFIG_ORDER: [&str; 35] = [
    "requirepass",
    "unixsocket",
    "logfile",
    "pidfile",
    "maxmemory",
    "maxmemory-samples",
    "timeout",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "slowlog-log-slower-than",
    "latency-monitor-threshold",
    "slowlog-max-len",
    "port",
    "tcp-backlog",
    "databases",
    "maxclients",
    "watchdog-period",
    "hz",
    "cluster-node-timeout",
    "tcp-keepalive",
    "no-appendfsync-on-rewrite",
    "daemonize",
    "activerehashing",
    "aof-rewrite-incremental-fsync",
    "aof-load-truncated",
    "aof-enqueue-jobs-once",
    "maxmemory-policy",
    "loglevel",
    "appendfsync",
    "syslog-facility",
    "appendonly",
    "dir",
    "client-output-buffer-limit",
    "unixsocketperm",
    "bind",
];

fn pairs(r: &Reply) -> Vec<(String, String)> {
    r.array()
        .chunks(2)
        .map(|kv| {
            assert!(
                matches!(kv[0], Reply::Bulk(_)) && matches!(kv[1], Reply::Bulk(_)),
                "{kv:?}"
            );
            (kv[0].text(), kv[1].text())
        })
        .collect()
}

fn config_get(c: &mut crate::harness::Client, name: &str) -> String {
    let p = pairs(&c.cmd(&["CONFIG", "GET", name]));
    assert_eq!(p.len(), 1, "CONFIG GET {name}: {p:?}");
    p[0].1.clone()
}

#[test]
fn config_get_star_lists_35_parameters_in_order() {
    let s = Server::start_default();
    let mut c = s.client();
    let p = pairs(&c.cmd(&["CONFIG", "GET", "*"]));
    let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    // Disque's 35 in Disque's order, then our extensions
    // (docs/COMPATIBILITY.md).
    assert_eq!(names[..35], CONFIG_ORDER);
    assert_eq!(names[35], "protected-mode");
    assert_eq!(
        names[names.len() - 12..],
        [
            "dedup-window",
            "job-max-body-size",
            "proto-max-bulk-len",
            "auto-aof-rewrite-min-reclaim",
            "spill",
            "spill-dir",
            "spill-max-disk",
            "spill-watermark",
            "spill-whole-jobs",
            "aclfile",
            "enable-debug-command",
            "enable-protected-configs"
        ]
    );
    assert!(
        names[36..names.len() - 12]
            .iter()
            .all(|n| n.starts_with("tls-")),
        "{names:?}"
    );
    let get = |k: &str| p.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(get("requirepass"), "");
    assert_eq!(get("maxmemory"), "1073741824");
    assert_eq!(get("maxmemory-policy"), "acks");
    assert_eq!(get("hz"), "10");
    assert_eq!(get("cluster-node-timeout"), "15000");
    assert_eq!(get("appendonly"), "no");
    assert_eq!(get("appendfsync"), "everysec");
    assert_eq!(get("tcp-keepalive"), "no");
    assert_eq!(get("auto-aof-rewrite-min-size"), "67108864");
    assert_eq!(get("client-output-buffer-limit"), "normal 0 0 0");
    assert_eq!(get("loglevel"), "notice");
    assert_eq!(get("port"), s.port().to_string());
    let dir = std::fs::canonicalize(s.dir()).unwrap();
    assert_eq!(
        std::fs::canonicalize(get("dir")).unwrap(),
        dir,
        "dir is the absolute cwd"
    );
}

#[test]
fn config_get_patterns() {
    let s = Server::start_default();
    let mut c = s.client();
    let p = pairs(&c.cmd(&["CONFIG", "GET", "maxmemory*"]));
    let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["maxmemory", "maxmemory-samples", "maxmemory-policy"]
    );
    assert_bytes(&c.cmd_raw(&["CONFIG", "GET", "nomatch"]), b"*0\r\n");
    // Case-sensitive glob.
    assert_bytes(&c.cmd_raw(&["CONFIG", "GET", "HZ"]), b"*0\r\n");
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "GET", "hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n10\r\n",
    );
    let p = pairs(&c.cmd(&["CONFIG", "GET", "a?pend*"]));
    let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["appendfsync", "appendonly"]);
}

#[test]
fn config_set_values_and_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let ok = b"+OK\r\n";
    for (k, v, shown) in [
        ("hz", "20", "20"),
        ("hz", "1000", "500"),
        ("maxmemory", "3mb", "3145728"),
        ("maxmemory", "2gb", "2147483648"),
        ("maxmemory", "1k", "1000"),
        ("maxmemory-policy", "noeviction", "noeviction"),
        ("loglevel", "warning", "warning"),
        ("appendfsync", "always", "always"),
        ("cluster-node-timeout", "3000", "3000"),
        ("timeout", "0", "0"),
        ("slowlog-max-len", "64", "64"),
        ("tcp-keepalive", "yes", "yes"),
        ("activerehashing", "no", "no"),
        ("aof-enqueue-jobs-once", "yes", "yes"),
        ("client-output-buffer-limit", "normal 1 2 3", "normal 1 2 3"),
        ("requirepass", "", ""),
        ("MaxClients", "100", "100"),
    ] {
        assert_bytes(&c.cmd_raw(&["CONFIG", "SET", k, v]), ok);
        assert_eq!(
            config_get(&mut c, &k.to_ascii_lowercase()),
            shown,
            "{k} {v}"
        );
    }
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "nosuch", "1"]),
        b"-ERR Unsupported CONFIG parameter: nosuch\r\n",
    );
    for (k, v) in [
        ("hz", "abc"),
        ("maxmemory", "lots"),
        ("maxmemory-policy", "allkeys-lru"),
        ("loglevel", "loud"),
        ("appendfsync", "sometimes"),
        ("tcp-keepalive", "maybe"),
        ("maxclients", "0"),
        ("timeout", "-1"),
        ("maxmemory-samples", "0"),
        ("client-output-buffer-limit", "normal 1 2"),
    ] {
        assert_bytes(
            &c.cmd_raw(&["CONFIG", "SET", k, v]),
            format!("-ERR Invalid argument '{v}' for CONFIG SET '{k}'\r\n").as_bytes(),
        );
    }
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "dir", "/nonexistent/dir/x"]),
        b"-ERR Changing directory: No such file or directory\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "GET"]),
        b"-ERR Wrong number of arguments for CONFIG GET\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "set", "hz"]),
        b"-ERR Wrong number of arguments for CONFIG set\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "FOO"]),
        b"-ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "REWRITE"]),
        b"-ERR The server is running without a config file\r\n",
    );
    // hz reaches INFO.
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "hz", "15"]), ok);
    assert_eq!(c.info_field("hz"), "15");
}

#[test]
fn config_rewrite_round_trips_through_restart() {
    let text = "# my config\nloglevel notice\nhz 10\nmaxmemory 1gb\nrename-command DEBUG DEBUG\n";
    let mut s = Server::start(ServerOpts::with_config(text));
    let mut c = s.client();
    let conf = s.config_path().unwrap().to_path_buf();
    assert_eq!(
        c.info_field("config_file"),
        conf.display().to_string(),
        "config_file is the absolute path"
    );
    for (k, v) in [
        ("cluster-node-timeout", "3000"),
        ("hz", "25"),
        ("maxmemory", "3mb"),
        ("appendfsync", "no"),
        ("slowlog-max-len", "77"),
        ("tcp-keepalive", "yes"),
        // Last: from here on this connection must authenticate.
        ("requirepass", "a \"quoted\" pw"),
    ] {
        assert_bytes(&c.cmd_raw(&["CONFIG", "SET", k, v]), b"+OK\r\n");
    }
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "REWRITE"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    assert_bytes(&c.cmd_raw(&["AUTH", "a \"quoted\" pw"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let written = std::fs::read_to_string(&conf).unwrap();
    assert!(written.contains("# my config"), "comments kept:\n{written}");
    assert!(written.contains("rename-command DEBUG DEBUG"), "{written}");
    assert!(written.contains("hz 25"), "{written}");
    assert!(written.contains("maxmemory 3mb"), "{written}");
    assert!(
        written.contains("# Generated by CONFIG REWRITE"),
        "{written}"
    );
    assert!(written.contains("cluster-node-timeout 3000"), "{written}");
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["PING"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    assert_bytes(&c.cmd_raw(&["AUTH", "a \"quoted\" pw"]), b"+OK\r\n");
    for (k, v) in [
        ("cluster-node-timeout", "3000"),
        ("hz", "25"),
        ("maxmemory", "3145728"),
        ("appendfsync", "no"),
        ("slowlog-max-len", "77"),
        ("requirepass", "a \"quoted\" pw"),
        ("tcp-keepalive", "yes"),
        ("loglevel", "notice"),
    ] {
        assert_eq!(config_get(&mut c, k), v, "{k} after restart");
    }
    // A second rewrite of the rewritten file is stable.
    assert_bytes(&c.cmd_raw(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let again = std::fs::read_to_string(&conf).unwrap();
    assert_eq!(again, written);
}

#[test]
fn invalid_config_file_is_fatal_and_names_the_line() {
    let text = "port 0\nhz 10\nfoobar yes\n";
    let r = Server::run_to_exit(ServerOpts::with_config(text), Duration::from_secs(10));
    assert_ne!(r.status.code(), Some(0), "{}", r.output);
    assert!(
        r.output.contains(
            "*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line 3\n>>> 'foobar yes'\nBad directive or wrong number of arguments"
        ),
        "{}",
        r.output
    );
    let text = "loglevel loud\n";
    let r = Server::run_to_exit(ServerOpts::with_config(text), Duration::from_secs(10));
    assert_ne!(r.status.code(), Some(0));
    assert!(r.output.contains("at line 1"), "{}", r.output);
    assert!(r.output.contains(">>> 'loglevel loud'"), "{}", r.output);
    assert!(
        r.output
            .contains("Invalid log level. Must be one of debug, verbose, notice, warning"),
        "{}",
        r.output
    );
    let r = Server::run_to_exit(
        ServerOpts::with_config("maxmemory 0\n"),
        Duration::from_secs(10),
    );
    assert_ne!(r.status.code(), Some(0));
    assert!(
        r.output
            .contains("You need to specify a memory limit greater than zero"),
        "{}",
        r.output
    );
}

#[test]
fn port_out_of_range_fails_to_start() {
    for port in ["70000", "55536"] {
        let r = Server::run_to_exit(
            ServerOpts::with_args(&["--port", port]),
            Duration::from_secs(10),
        );
        assert_ne!(r.status.code(), Some(0), "port {port}: {}", r.output);
        assert!(!r.output.contains("disque-server ready"), "{}", r.output);
    }
    let r = Server::run_to_exit(
        ServerOpts::with_args(&["--port", "70000"]),
        Duration::from_secs(10),
    );
    assert!(r.output.contains("Invalid port"), "{}", r.output);
}

#[test]
fn command_line_options_override_the_file() {
    let s = Server::start(ServerOpts {
        config_file_text: Some("hz 30\nslowlog-max-len 5\n".into()),
        args: vec!["--hz".into(), "40".into()],
        ..Default::default()
    });
    let mut c = s.client();
    assert_eq!(config_get(&mut c, "hz"), "40");
    assert_eq!(config_get(&mut c, "slowlog-max-len"), "5");
}

#[test]
fn logfile_directive_moves_logs_out_of_stdout() {
    let s = Server::start(ServerOpts::with_args(&["--logfile", "log.txt"]));
    let mut c = s.client();
    assert_eq!(config_get(&mut c, "logfile"), "log.txt");
    let log = s.dir().join("log.txt");
    assert!(crate::harness::wait_until(
        Duration::from_secs(5),
        crate::util::POLL,
        || std::fs::metadata(&log)
            .map(|m| m.len() > 0)
            .unwrap_or(false)
    ));
}
