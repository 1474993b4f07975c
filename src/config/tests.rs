//! Tests for parsing: directives and their error messages, the FATAL banner,
//! command-line handling, glob matching, memory units and argument splitting.
//! Helpers here (cwd lock, temp dirs) are shared with `tests_runtime.rs`.

// Tests are allowed to panic on unexpected errors; that is how they fail.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default,
    clippy::type_complexity
)]

use super::*;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// Tests that chdir (or compare whole configs, whose `dir` comes from the
/// cwd) must not overlap: the cwd is process-wide.
static CWD_LOCK: Mutex<()> = Mutex::new(());

pub(super) struct CwdGuard {
    saved: PathBuf,
    _lock: MutexGuard<'static, ()>,
}

impl Drop for CwdGuard {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.saved);
    }
}

pub(super) fn cwd_guard() -> CwdGuard {
    let lock = CWD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    CwdGuard {
        saved: std::env::current_dir().unwrap(),
        _lock: lock,
    }
}

pub(super) use crate::support::temp_dir::TempDir;

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_str(text, Config::default())
}

fn err_msg(text: &str) -> String {
    parse(text).unwrap_err().message
}

#[test]
fn defaults_match_spec() {
    let c = Config::default();
    assert_eq!(c.port, 7711);
    assert!(c.bind.is_empty());
    assert_eq!(c.tcp_backlog, 511);
    assert_eq!((c.unixsocket.clone(), c.unixsocketperm), (None, 0));
    assert_eq!((c.timeout, c.tcp_keepalive), (0, 0));
    assert_eq!(c.loglevel, LogLevel::Notice);
    assert_eq!(c.logfile, "");
    assert!(!c.syslog_enabled);
    assert_eq!(c.syslog_ident, "disque");
    assert_eq!(c.syslog_facility, SyslogFacility::Local0);
    assert!(!c.daemonize);
    assert_eq!(c.pidfile, "/var/run/disque.pid");
    assert_eq!(c.databases, 16);
    assert_eq!(c.maxclients, 10000);
    assert_eq!(c.maxmemory, 1073741824);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::Acks);
    assert_eq!(c.maxmemory_samples, 5);
    assert!(c.activerehashing);
    assert_eq!(c.hz, 10);
    assert!(!c.appendonly);
    assert_eq!(c.appendfilename, "disque.aof");
    assert_eq!(c.appendfsync, AppendFsync::EverySec);
    assert!(!c.no_appendfsync_on_rewrite);
    assert_eq!(c.auto_aof_rewrite_percentage, 100);
    assert_eq!(c.auto_aof_rewrite_min_size, 64 << 20);
    assert!(c.aof_rewrite_incremental_fsync && c.aof_load_truncated);
    assert!(!c.aof_enqueue_jobs_once);
    assert_eq!(c.requirepass, None);
    assert_eq!(c.cluster_config_file, "nodes.conf");
    assert_eq!(c.cluster_node_timeout, 15000);
    assert_eq!(c.slowlog_log_slower_than, 10000);
    assert_eq!(c.slowlog_max_len, 128);
    assert_eq!(c.latency_monitor_threshold, 0);
    assert_eq!(
        c.client_output_buffer_limit,
        ClientOutputBufferLimit::default()
    );
    assert_eq!(c.config_file, None);
    assert!(c.rename_commands.is_empty());
    assert_eq!(c.watchdog_period, 0);
}

#[test]
fn every_directive_parses() {
    let _g = cwd_guard();
    let t = TempDir::new("alldirs");
    let text = format!(
        "port 7000\nbind 127.0.0.1 ::1\ntcp-backlog 100\nunixsocket /tmp/x.sock\n\
         unixsocketperm 700\ntimeout 30\ntcp-keepalive 60\ndir {}\nloglevel DEBUG\n\
         logfile log.txt\nsyslog-enabled yes\nsyslog-ident dq\nsyslog-facility LOCAL3\n\
         daemonize YES\npidfile /tmp/p.pid\ndatabases 4\nmaxclients 50\nmaxmemory 2mb\n\
         maxmemory-policy noeviction\nmaxmemory-samples 3\nactiverehashing no\nhz 100\n\
         appendonly yes\nappendfilename x.aof\nappendfsync always\n\
         no-appendfsync-on-rewrite yes\nauto-aof-rewrite-percentage 0\n\
         auto-aof-rewrite-min-size 1k\naof-rewrite-incremental-fsync no\n\
         aof-load-truncated no\naof-enqueue-jobs-once yes\nrequirepass secret\n\
         rename-command DEBUG \"\"\nrename-command config cfg\ncluster-config-file n.conf\n\
         cluster-node-timeout 3000\nslowlog-log-slower-than -1\nslowlog-max-len 5\n\
         latency-monitor-threshold 7\nclient-output-buffer-limit normal 1mb 2kb 30\n",
        t.path().display()
    );
    let c = parse(&text).unwrap();
    assert_eq!(c.port, 7000);
    assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
    assert_eq!(c.tcp_backlog, 100);
    assert_eq!(c.unixsocket.as_deref(), Some("/tmp/x.sock"));
    assert_eq!(c.unixsocketperm, 0o700);
    assert_eq!((c.timeout, c.tcp_keepalive), (30, 60));
    assert_eq!(c.dir, t.path());
    assert_eq!(std::env::current_dir().unwrap(), t.path());
    assert_eq!(c.loglevel, LogLevel::Debug);
    assert_eq!(c.logfile, "log.txt");
    assert!(
        t.path().join("log.txt").exists(),
        "logfile is opened at parse"
    );
    assert!(c.syslog_enabled);
    assert_eq!(c.syslog_ident, "dq");
    assert_eq!(c.syslog_facility, SyslogFacility::Local3);
    assert!(c.daemonize);
    assert_eq!(c.pidfile, "/tmp/p.pid");
    assert_eq!(c.databases, 4);
    assert_eq!(c.maxclients, 50);
    assert_eq!(c.maxmemory, 2 << 20);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::NoEviction);
    assert_eq!(c.maxmemory_samples, 3);
    assert!(!c.activerehashing);
    assert_eq!(c.hz, 100);
    assert!(c.appendonly);
    assert_eq!(c.appendfilename, "x.aof");
    assert_eq!(c.appendfsync, AppendFsync::Always);
    assert!(c.no_appendfsync_on_rewrite);
    assert_eq!(c.auto_aof_rewrite_percentage, 0);
    assert_eq!(c.auto_aof_rewrite_min_size, 1000);
    assert!(!c.aof_rewrite_incremental_fsync && !c.aof_load_truncated);
    assert!(c.aof_enqueue_jobs_once);
    assert_eq!(c.requirepass.as_deref(), Some("secret"));
    assert_eq!(
        c.rename_commands,
        vec![
            ("DEBUG".to_string(), String::new()),
            ("config".to_string(), "cfg".to_string())
        ]
    );
    assert_eq!(c.cluster_config_file, "n.conf");
    assert_eq!(c.cluster_node_timeout, 3000);
    assert_eq!(c.slowlog_log_slower_than, -1);
    assert_eq!(c.slowlog_max_len, 5);
    assert_eq!(c.latency_monitor_threshold, 7);
    assert_eq!(
        c.client_output_buffer_limit,
        ClientOutputBufferLimit {
            hard: 1 << 20,
            soft: 2048,
            soft_seconds: 30
        }
    );
}

#[test]
fn bad_values_give_precise_messages() {
    let yn = "argument must be 'yes' or 'no'";
    let cases: &[(&str, &str)] = &[
        ("port 55536", "Invalid port"),
        ("port 65535", "Invalid port"),
        ("port -1", "Invalid port"),
        ("port abc", "Invalid port"),
        ("tcp-backlog -1", "Invalid backlog value"),
        ("unixsocketperm 800", "Invalid socket file permissions"),
        ("unixsocketperm 1777", "Invalid socket file permissions"),
        ("timeout -1", "Invalid timeout value"),
        ("tcp-keepalive x", "Invalid tcp-keepalive value"),
        (
            "loglevel loud",
            "Invalid log level. Must be one of debug, verbose, notice, warning",
        ),
        ("syslog-enabled maybe", yn),
        (
            "syslog-facility kern",
            "Invalid log facility. Must be one of USER or between LOCAL0-LOCAL7",
        ),
        ("daemonize 1", yn),
        ("databases 0", "Invalid number of databases"),
        ("maxclients 0", "Invalid max clients limit"),
        (
            "maxmemory 0",
            "You need to specify a memory limit greater than zero",
        ),
        (
            "maxmemory lots",
            "You need to specify a memory limit greater than zero",
        ),
        ("maxmemory-policy allkeys-lru", "Invalid maxmemory policy"),
        ("maxmemory-samples 0", "maxmemory-samples must be 1 or greater"),
        ("activerehashing on", yn),
        ("hz fast", "Invalid hz value"),
        ("appendonly true", yn),
        (
            "appendfilename dir/x.aof",
            "appendfilename can't be a path, just a filename",
        ),
        (
            "appendfsync sometimes",
            "argument must be 'no', 'always' or 'everysec'",
        ),
        ("no-appendfsync-on-rewrite x", yn),
        (
            "auto-aof-rewrite-percentage -5",
            "Invalid negative percentage for AOF auto rewrite",
        ),
        (
            "auto-aof-rewrite-min-size 5xb",
            "Invalid auto-aof-rewrite-min-size value",
        ),
        ("aof-rewrite-incremental-fsync x", yn),
        ("aof-load-truncated x", yn),
        ("aof-enqueue-jobs-once x", yn),
        (
            "cluster-node-timeout 0",
            "cluster node timeout must be 1 or greater",
        ),
        (
            "cluster-node-timeout -5",
            "cluster node timeout must be 1 or greater",
        ),
        (
            "slowlog-log-slower-than x",
            "Invalid slowlog-log-slower-than value",
        ),
        ("slowlog-max-len -1", "Invalid slowlog-max-len value"),
        (
            "latency-monitor-threshold -1",
            "The latency threshold can't be negative",
        ),
        (
            "client-output-buffer-limit slave 0 0 0",
            "Unrecognized client limit class",
        ),
        (
            "client-output-buffer-limit normal 0 0 -1",
            "Negative number of seconds in soft limit is invalid",
        ),
        (
            "client-output-buffer-limit normal x 0 0",
            "Invalid hard limit in client-output-buffer-limit",
        ),
        (
            "bind 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
            "Too many bind addresses specified",
        ),
        ("include /nonexistent/disque-x.conf", "Fatal error, can't open config file '/nonexistent/disque-x.conf': No such file or directory"),
        ("dir /nonexistent/disque-x", "Can't chdir to '/nonexistent/disque-x': No such file or directory"),
        ("port \"7000", "Unbalanced quotes in configuration line"),
    ];
    for (line, msg) in cases {
        assert_eq!(&err_msg(line), msg, "line {line:?}");
    }
    let long = format!("requirepass {}", "x".repeat(513));
    assert_eq!(
        err_msg(&long),
        "Password is longer than DISQUE_AUTHPASS_MAX_LEN"
    );
    assert!(parse(&format!("requirepass {}", "x".repeat(512))).is_ok());
}

#[test]
fn arity_and_unknown_directives() {
    let bad = "Bad directive or wrong number of arguments";
    for line in [
        "nosuch 1",
        "port",
        "port 1 2",
        "bind",
        "rename-command a",
        "client-output-buffer-limit normal 0 0",
        "include",
        "watchdog-period 10",
        "save 900 1",
    ] {
        assert_eq!(err_msg(line), bad, "line {line:?}");
    }
}

#[test]
fn special_values() {
    let _g = cwd_guard();
    assert_eq!(parse("port 0").unwrap().port, 0, "port 0 = pick a free one");
    assert_eq!(parse("port 55535").unwrap().port, 55535);
    assert_eq!(parse("hz 0").unwrap().hz, 1);
    assert_eq!(parse("hz -4").unwrap().hz, 1);
    assert_eq!(parse("hz 100000").unwrap().hz, 500);
    assert_eq!(parse("requirepass \"\"").unwrap().requirepass, None);
    assert_eq!(
        parse("PoRt 1234").unwrap().port,
        1234,
        "names case-insensitive"
    );
    assert_eq!(parse("port 1\nport 2").unwrap().port, 2, "later lines win");
    let c = parse("  # comment\n\n\t\r\n   port 3  \r\n# port 4").unwrap();
    assert_eq!(c.port, 3);
    let c = parse("bind 1.2.3.4\nbind 5.6.7.8").unwrap();
    assert_eq!(c.bind, vec!["5.6.7.8"], "bind replaces, not appends");
    assert_eq!(parse("maxmemory 1GB").unwrap().maxmemory, 1 << 30);
}

#[test]
fn fatal_banner_text_and_line_numbers() {
    let e = parse("# header\nport 7000\n\n  loglevel chatty  \nport 1").unwrap_err();
    assert_eq!(e.line_no, 4);
    assert_eq!(e.line, "loglevel chatty");
    assert_eq!(
        e.to_string(),
        "\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line 4\n\
         >>> 'loglevel chatty'\nInvalid log level. Must be one of debug, verbose, notice, warning\n"
    );
    let e = parse("foo bar baz").unwrap_err();
    assert_eq!(
        e.to_string(),
        "\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line 1\n\
         >>> 'foo bar baz'\nBad directive or wrong number of arguments\n"
    );
    let plain = ConfigError::plain("Fatal error, can't open config file '/x': No such file");
    assert_eq!(
        plain.to_string(),
        "Fatal error, can't open config file '/x': No such file\n"
    );
}

#[test]
fn include_loads_in_place() {
    let _g = cwd_guard();
    let t = TempDir::new("include");
    let inc = t.path().join("inc.conf");
    std::fs::write(&inc, "port 8000\nloglevel warning\n").unwrap();
    let text = format!("port 7000\ninclude {}\nloglevel debug\n", inc.display());
    let c = parse(&text).unwrap();
    assert_eq!(c.port, 8000, "include overrides earlier lines");
    assert_eq!(c.loglevel, LogLevel::Debug, "later lines override include");

    // Errors inside the included file report its own line.
    std::fs::write(&inc, "\nhz x\n").unwrap();
    let e = parse(&text).unwrap_err();
    assert_eq!((e.line_no, e.line.as_str()), (2, "hz x"));

    // A self-include is stopped instead of recursing forever.
    std::fs::write(&inc, format!("include {}\n", inc.display())).unwrap();
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("Too many nested include"), "{e}");
}

#[test]
fn sample_config_parses_to_defaults() {
    let _g = cwd_guard();
    let text = include_str!("../../conf/disque.conf");
    let c = parse(text).unwrap();
    // The sample names `maxmemory 1gb`, so no cgroup-derived value.
    let expected = Config {
        maxmemory_set: true,
        ..Config::default()
    };
    assert_eq!(c, expected);
    // And the sample really mentions every directive.
    for name in super::runtime::GET_ORDER {
        if name == "watchdog-period" {
            continue; // CONFIG SET only
        }
        assert!(text.contains(&format!("{name} ")), "sample lacks {name}");
    }
    for name in super::security::GET_NAMES {
        assert!(text.contains(&format!("{name} ")), "sample lacks {name}");
    }
    for name in [
        "include ",
        "rename-command ",
        "syslog-enabled ",
        "syslog-ident ",
    ] {
        assert!(text.contains(name), "sample lacks {name}");
    }
}
