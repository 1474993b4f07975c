//! Tests for CONFIG GET / SET / REWRITE, including the rewrite -> re-parse
//! round trip the cluster tests depend on.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default,
    clippy::type_complexity
)]

use super::tests::{cwd_guard, TempDir};
use super::*;

fn names(pairs: &[(String, String)]) -> Vec<&str> {
    pairs.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn get_all_order_and_format() {
    let _g = cwd_guard();
    let mut c = Config::default();
    c.port = 7790;
    c.logfile = "log.txt".into();
    let mut all = c.get(b"*");
    // Our extensions follow Disque's 35 parameters (docs/COMPATIBILITY.md).
    let ext: Vec<String> = all.drain(35..).map(|(n, _)| n).collect();
    let want: Vec<&str> = super::security::GET_NAMES
        .iter()
        .chain(super::extensions::GET_NAMES.iter())
        .chain(super::acl::GET_NAMES.iter())
        .copied()
        .collect();
    assert_eq!(ext, want);
    let cwd = std::env::current_dir().unwrap();
    let expected: Vec<(&str, String)> = vec![
        ("requirepass", "".into()),
        ("unixsocket", "".into()),
        ("logfile", "log.txt".into()),
        ("pidfile", "/var/run/disque.pid".into()),
        ("maxmemory", "1073741824".into()),
        ("maxmemory-samples", "5".into()),
        ("timeout", "0".into()),
        ("auto-aof-rewrite-percentage", "100".into()),
        ("auto-aof-rewrite-min-size", "67108864".into()),
        ("slowlog-log-slower-than", "10000".into()),
        ("latency-monitor-threshold", "0".into()),
        ("slowlog-max-len", "128".into()),
        ("port", "7790".into()),
        ("tcp-backlog", "511".into()),
        ("databases", "16".into()),
        ("maxclients", "10000".into()),
        ("watchdog-period", "0".into()),
        ("hz", "10".into()),
        ("cluster-node-timeout", "15000".into()),
        ("tcp-keepalive", "no".into()),
        ("no-appendfsync-on-rewrite", "no".into()),
        ("daemonize", "no".into()),
        ("activerehashing", "yes".into()),
        ("aof-rewrite-incremental-fsync", "yes".into()),
        ("aof-load-truncated", "yes".into()),
        ("aof-enqueue-jobs-once", "no".into()),
        ("maxmemory-policy", "acks".into()),
        ("loglevel", "notice".into()),
        ("appendfsync", "everysec".into()),
        ("syslog-facility", "local0".into()),
        ("appendonly", "no".into()),
        ("dir", cwd.to_string_lossy().into_owned()),
        ("client-output-buffer-limit", "normal 0 0 0".into()),
        ("unixsocketperm", "0".into()),
        ("bind", "".into()),
    ];
    let got: Vec<(&str, String)> = all.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    assert_eq!(got, expected);
}

#[test]
fn get_formats_non_defaults_and_filters() {
    let _g = cwd_guard();
    let mut c = Config::default();
    c.tcp_keepalive = 60;
    c.unixsocketperm = 0o755;
    c.bind = vec!["127.0.0.1".into(), "::1".into()];
    c.requirepass = Some("pw".into());
    c.client_output_buffer_limit = ClientOutputBufferLimit {
        hard: 10,
        soft: 5,
        soft_seconds: 3,
    };
    c.auto_aof_rewrite_min_size = 1 << 30;
    let one = |p: &str| c.get(p.as_bytes());
    assert_eq!(
        one("tcp-keepalive"),
        vec![("tcp-keepalive".into(), "yes".into())]
    );
    assert_eq!(one("unixsocketperm")[0].1, "755");
    assert_eq!(one("bind")[0].1, "127.0.0.1 ::1");
    assert_eq!(one("requirepass")[0].1, "pw");
    assert_eq!(one("client-output-buffer-limit")[0].1, "normal 10 5 3");
    assert_eq!(one("auto-aof-rewrite-min-size")[0].1, "1073741824");
    assert!(one("nosuch").is_empty());
    assert!(one("PORT").is_empty(), "pattern is case-sensitive");
    assert_eq!(
        names(&one("maxmemory*")),
        vec!["maxmemory", "maxmemory-samples", "maxmemory-policy"]
    );
    assert_eq!(
        names(&one("*fsync*")),
        vec![
            "no-appendfsync-on-rewrite",
            "aof-rewrite-incremental-fsync",
            "appendfsync"
        ]
    );
    assert_eq!(names(&one("?ir")), vec!["dir"]);
}

/// (param, value, check) for every settable parameter.
#[test]
fn set_each_parameter() {
    let _g = cwd_guard();
    let t = TempDir::new("set");
    let mut c = Config::default();
    let ok = |c: &mut Config, n: &str, v: &str| c.set(n, v.as_bytes()).unwrap();
    assert_eq!(ok(&mut c, "requirepass", "pw"), "requirepass");
    assert_eq!(c.requirepass.as_deref(), Some("pw"));
    ok(&mut c, "requirepass", "");
    assert_eq!(c.requirepass, None, "empty clears");
    ok(&mut c, "maxclients", "5");
    assert_eq!(c.maxclients, 5);
    ok(&mut c, "appendonly", "yes");
    assert!(c.appendonly);
    assert_eq!(ok(&mut c, "DIR", t.path().to_str().unwrap()), "dir");
    assert_eq!(c.dir, t.path());
    assert_eq!(std::env::current_dir().unwrap(), t.path());
    ok(&mut c, "client-output-buffer-limit", "normal 100 50 10");
    assert_eq!(
        c.client_output_buffer_limit,
        ClientOutputBufferLimit {
            hard: 100,
            soft: 50,
            soft_seconds: 10
        }
    );
    ok(
        &mut c,
        "client-output-buffer-limit",
        "normal 1 2 3 normal 4 5 6",
    );
    assert_eq!(c.client_output_buffer_limit.hard, 4, "last group wins");
    for (name, get) in [
        ("aof-rewrite-incremental-fsync", |c: &Config| {
            c.aof_rewrite_incremental_fsync
        }),
        ("aof-load-truncated", |c: &Config| c.aof_load_truncated),
        ("activerehashing", |c: &Config| c.activerehashing),
        ("aof-enqueue-jobs-once", |c: &Config| {
            c.aof_enqueue_jobs_once
        }),
    ] as [(&str, fn(&Config) -> bool); 4]
    {
        ok(&mut c, name, "no");
        assert!(!get(&c), "{name}");
        ok(&mut c, name, "YES");
        assert!(get(&c), "{name}");
    }
    ok(&mut c, "tcp-keepalive", "yes");
    assert_eq!(c.tcp_keepalive, 300);
    ok(&mut c, "tcp-keepalive", "60");
    ok(&mut c, "tcp-keepalive", "yes");
    assert_eq!(c.tcp_keepalive, 60, "yes keeps an existing period");
    ok(&mut c, "tcp-keepalive", "no");
    assert_eq!(c.tcp_keepalive, 0);
    let nums: [(&str, &str, fn(&Config) -> i128, i128); 12] = [
        ("maxmemory-samples", "7", |c| c.maxmemory_samples as i128, 7),
        ("timeout", "0", |c| c.timeout as i128, 0),
        ("timeout", "99", |c| c.timeout as i128, 99),
        (
            "auto-aof-rewrite-percentage",
            "0",
            |c| c.auto_aof_rewrite_percentage as i128,
            0,
        ),
        (
            "auto-aof-rewrite-min-size",
            "1mb",
            |c| c.auto_aof_rewrite_min_size as i128,
            1 << 20,
        ),
        (
            "slowlog-log-slower-than",
            "0",
            |c| c.slowlog_log_slower_than as i128,
            0,
        ),
        ("slowlog-max-len", "10", |c| c.slowlog_max_len as i128, 10),
        (
            "latency-monitor-threshold",
            "5",
            |c| c.latency_monitor_threshold as i128,
            5,
        ),
        (
            "cluster-node-timeout",
            "3000",
            |c| c.cluster_node_timeout as i128,
            3000,
        ),
        ("hz", "1000", |c| c.hz as i128, 500),
        ("watchdog-period", "200", |c| c.watchdog_period as i128, 200),
        ("maxmemory", "2gb", |c| c.maxmemory as i128, 2 << 30),
    ];
    for (name, v, get, want) in nums {
        ok(&mut c, name, v);
        assert_eq!(get(&c), want, "{name} {v}");
    }
    ok(&mut c, "hz", "0");
    assert_eq!(c.hz, 1, "hz clamps up");
    ok(&mut c, "loglevel", "Warning");
    assert_eq!(c.loglevel, LogLevel::Warning);
    ok(&mut c, "maxmemory-policy", "noeviction");
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::NoEviction);
    ok(&mut c, "appendfsync", "no");
    assert_eq!(c.appendfsync, AppendFsync::No);
    assert_eq!(c.get(b"appendfsync")[0].1, "no");
}

#[test]
fn set_errors() {
    let _g = cwd_guard();
    let mut c = Config::default();
    let before = c.clone();
    let invalid = [
        ("maxclients", "0"),
        ("maxclients", "x"),
        ("appendonly", "1"),
        ("client-output-buffer-limit", "normal 1 2"),
        ("client-output-buffer-limit", "pubsub 1 2 3"),
        ("client-output-buffer-limit", "normal 1 2 -3"),
        ("client-output-buffer-limit", "normal 1 2 3 slave 1 2 3"),
        ("activerehashing", "maybe"),
        ("tcp-keepalive", "-1"),
        ("maxmemory-samples", "0"),
        ("timeout", "-1"),
        ("auto-aof-rewrite-percentage", "-1"),
        ("auto-aof-rewrite-min-size", "x"),
        ("slowlog-log-slower-than", "-1"),
        ("slowlog-max-len", "-1"),
        ("latency-monitor-threshold", "1.5"),
        ("cluster-node-timeout", "0"),
        ("hz", "-1"),
        ("watchdog-period", "-1"),
        ("maxmemory", "0"),
        ("maxmemory", "lots"),
        ("loglevel", "loud"),
        ("maxmemory-policy", "volatile-lru"),
        ("appendfsync", "sometimes"),
    ];
    for (name, v) in invalid {
        let e = c.set(name, v.as_bytes()).unwrap_err();
        assert_eq!(
            e.reply_text(),
            format!("ERR Invalid argument '{v}' for CONFIG SET '{name}'")
        );
    }
    let long = "p".repeat(513);
    assert!(matches!(
        c.set("requirepass", long.as_bytes()),
        Err(SetError::Invalid { .. })
    ));
    assert_eq!(c, before, "failed SETs change nothing");
    // Name shown as typed.
    let e = c.set("MaxClients", b"0").unwrap_err();
    assert_eq!(
        e.reply_text(),
        "ERR Invalid argument '0' for CONFIG SET 'MaxClients'"
    );
    for name in [
        "port",
        "bind",
        "daemonize",
        "no-appendfsync-on-rewrite",
        "databases",
        "nosuch",
    ] {
        let e = c.set(name, b"1").unwrap_err();
        assert_eq!(
            e.reply_text(),
            format!("ERR Unsupported CONFIG parameter: {name}")
        );
    }
    let e = c.set("dir", b"/nonexistent/disque-dir").unwrap_err();
    assert_eq!(
        e.reply_text(),
        "ERR Changing directory: No such file or directory"
    );
    assert_eq!(c, before);
}

#[test]
fn rewrite_error_texts() {
    let c = Config::default();
    assert_eq!(
        c.rewrite().unwrap_err().reply_text(),
        "ERR The server is running without a config file"
    );
    let mut c = Config::default();
    c.config_file = Some("/nonexistent/dir/disque.conf".into());
    assert_eq!(
        c.rewrite().unwrap_err().reply_text(),
        "ERR Rewriting config file: No such file or directory"
    );
}

/// Disque's test-harness config file, then CONFIG SET of appendonly and
/// the node timeout, then CONFIG REWRITE.
#[test]
fn rewrite_spec_example() {
    let _g = cwd_guard();
    let t = TempDir::new("rwspec");
    std::fs::create_dir(t.path().join("disque_0")).unwrap();
    let file = t.path().join("disque.conf");
    std::fs::write(
        &file,
        "port 7790\ndir ./disque_0\nlogfile log.txt\nloglevel notice\ncluster-config-file nodes.conf\n",
    )
    .unwrap();
    std::env::set_current_dir(t.path()).unwrap();
    let Startup::Run(mut c) = from_args(&[file.to_string_lossy().into_owned()]).unwrap() else {
        panic!("expected Run");
    };
    c.set("appendonly", b"yes").unwrap();
    c.set("cluster-node-timeout", b"2000").unwrap();
    c.rewrite().unwrap();
    let abs = t.path().join("disque_0");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!(
            "port 7790\ndir \"{}\"\nlogfile \"log.txt\"\nloglevel notice\n\
             cluster-config-file \"nodes.conf\"\n# Generated by CONFIG REWRITE\n\
             appendonly yes\ncluster-node-timeout 2000\n",
            abs.display()
        )
    );
    // Restart from the same file (from another cwd) yields the same config.
    std::env::set_current_dir(t.path()).unwrap();
    let Startup::Run(again) = from_args(&[file.to_string_lossy().into_owned()]).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(again, c);
    // A second rewrite is stable.
    let before = std::fs::read_to_string(&file).unwrap();
    again.rewrite().unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn rewrite_keeps_unknown_blanks_duplicates_and_unsets() {
    let _g = cwd_guard();
    let t = TempDir::new("rwkeep");
    std::env::set_current_dir(t.path()).unwrap();
    let mut c = Config::default();
    c.requirepass = None;
    c.bind = Vec::new();
    c.port = 9000;
    let old = "# my comment\n\
               include /etc/other.conf\n\
               rename-command DEBUG \"\"\n\
               requirepass secret\n\
               bind 1.2.3.4\n\
               PORT 1\n\n\n\n\
               port 2\n\
               broken \"quote\n\
               futuredirective 42\n\
               maxmemory 1gb\n";
    let new = c.rewrite_content(old);
    let dir = t.path().display();
    assert_eq!(
        new,
        format!(
            "# my comment\ninclude /etc/other.conf\nrename-command DEBUG \"\"\n\n\
             port 9000\n\n# ??? broken \"quote\nfuturedirective 42\nmaxmemory 1gb\n\
             # Generated by CONFIG REWRITE\ndir \"{dir}\"\n"
        )
    );
}

#[test]
fn rewrite_round_trips_many_settings() {
    let _g = cwd_guard();
    let t = TempDir::new("rwround");
    std::env::set_current_dir(t.path()).unwrap();
    let file = t.path().join("node.conf");
    std::fs::write(
        &file,
        "# initial\nport 7000\nmaxmemory 100mb\nhz 20\nhz 30\n",
    )
    .unwrap();
    let Startup::Run(base) = from_args(&args(&["node.conf"])).unwrap() else {
        panic!("expected Run");
    };
    let mut c = *base;
    c.port = 0;
    c.bind = vec!["127.0.0.1".into(), "::1".into()];
    c.tcp_backlog = 128;
    c.unixsocket = Some("/tmp/dq test.sock".into());
    c.unixsocketperm = 0o700;
    c.timeout = 10;
    c.tcp_keepalive = 60;
    c.loglevel = LogLevel::Verbose;
    c.logfile = "log \"quoted\".txt".into();
    c.syslog_enabled = true;
    c.syslog_ident = "ident\twith tab".into();
    c.syslog_facility = SyslogFacility::User;
    c.daemonize = true;
    c.pidfile = "/tmp/é.pid".into();
    c.databases = 1;
    c.maxclients = 3;
    c.maxmemory = 1000;
    c.maxmemory_policy = MaxmemoryPolicy::NoEviction;
    c.maxmemory_samples = 9;
    c.activerehashing = false;
    c.hz = 500;
    c.appendonly = true;
    c.appendfilename = "a.aof".into();
    c.appendfsync = AppendFsync::Always;
    c.no_appendfsync_on_rewrite = true;
    c.auto_aof_rewrite_percentage = 0;
    c.auto_aof_rewrite_min_size = 3 << 20;
    c.aof_rewrite_incremental_fsync = false;
    c.aof_load_truncated = false;
    c.aof_enqueue_jobs_once = true;
    c.requirepass = Some("p\\a\"ss".into());
    c.cluster_config_file = "n.conf".into();
    c.cluster_node_timeout = 3000;
    c.slowlog_log_slower_than = -1;
    c.slowlog_max_len = 0;
    c.latency_monitor_threshold = 100;
    c.client_output_buffer_limit = ClientOutputBufferLimit {
        hard: 1 << 30,
        soft: 100 << 10,
        soft_seconds: 60,
    };
    c.rewrite().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("# initial\nport 0\nmaxmemory 1000\nhz 500\n\n"),
        "{text}"
    );
    assert!(
        text.contains("client-output-buffer-limit normal 1gb 100kb 60\n"),
        "{text}"
    );
    assert!(text.contains("auto-aof-rewrite-min-size 3mb\n"), "{text}");
    let Startup::Run(again) = from_args(&args(&["node.conf"])).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(*again, c);
    // Back to defaults: the remaining lines are rewritten with default
    // values (present in the file) and unset strings disappear.
    let mut d = Config::default();
    d.config_file = c.config_file.clone();
    d.dir = c.dir.clone();
    d.rewrite().unwrap();
    // The file keeps its maxmemory line, so it is explicit when read back.
    d.maxmemory_set = true;
    let Startup::Run(again) = from_args(&args(&["node.conf"])).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(*again, d);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("requirepass") && !text.contains("unixsocket ") && !text.contains("bind")
    );
}

#[test]
fn rewrite_creates_missing_file() {
    let _g = cwd_guard();
    let t = TempDir::new("rwnew");
    std::env::set_current_dir(t.path()).unwrap();
    let mut c = Config::default();
    c.config_file = Some(t.path().join("fresh.conf"));
    c.cluster_node_timeout = 3000;
    c.rewrite().unwrap();
    let text = std::fs::read_to_string(t.path().join("fresh.conf")).unwrap();
    assert_eq!(
        text,
        format!(
            "# Generated by CONFIG REWRITE\ndir \"{}\"\ncluster-node-timeout 3000\n",
            t.path().display()
        )
    );
    let leftovers: Vec<_> = std::fs::read_dir(t.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp files left behind");
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
