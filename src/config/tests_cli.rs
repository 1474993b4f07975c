//! Tests for command-line handling: config file + `--name value` overrides,
//! absolute config paths, and the special startup modes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::{cwd_guard, TempDir};
use super::*;

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn cli_overrides_file_and_later_wins() {
    let _g = cwd_guard();
    let t = TempDir::new("cli");
    let file = t.path().join("disque.conf");
    std::fs::write(&file, "port 7790\nloglevel notice\nlogfile log.txt\n").unwrap();
    std::env::set_current_dir(t.path()).unwrap();
    let a = args(&[
        "disque.conf",
        "--port",
        "7000",
        "--loglevel",
        "debug",
        "--port",
        "7001",
    ]);
    let Startup::Run(c) = from_args(&a).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(c.port, 7001, "later --port wins");
    assert_eq!(c.loglevel, LogLevel::Debug);
    assert_eq!(c.logfile, "log.txt");
    assert_eq!(
        c.config_file.as_deref(),
        Some(file.as_path()),
        "absolute path"
    );

    // Multi-value options and values with spaces.
    let a = args(&["--bind", "127.0.0.1", "::1", "--pidfile", "/tmp/a b.pid"]);
    let Startup::Run(c) = from_args(&a).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
    assert_eq!(c.pidfile, "/tmp/a b.pid");
    assert_eq!(c.config_file, None);

    // The path is absolute even though `dir` moves the cwd while parsing.
    let sub = t.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(&file, "dir ./sub\n").unwrap();
    let Startup::Run(c) = from_args(&args(&["./disque.conf"])).unwrap() else {
        panic!("expected Run");
    };
    assert_eq!(c.config_file.as_deref(), Some(file.as_path()));
    assert_eq!(c.dir, sub);

    // Errors in CLI options count lines after the file content.
    std::fs::write(&file, "port 1\n").unwrap();
    std::env::set_current_dir(t.path()).unwrap();
    let e = from_args(&args(&["disque.conf", "--port", "99999"])).unwrap_err();
    assert_eq!((e.line_no, e.line.as_str()), (3, "port \"99999\""));
    assert_eq!(e.message, "Invalid port");
}

#[test]
fn cli_special_modes() {
    assert_eq!(from_args(&args(&["-v"])).unwrap(), Startup::Version);
    assert_eq!(from_args(&args(&["--version"])).unwrap(), Startup::Version);
    assert_eq!(from_args(&args(&["-h"])).unwrap(), Startup::Help);
    assert_eq!(from_args(&args(&["--help"])).unwrap(), Startup::Help);
    assert_eq!(
        from_args(&args(&["--test-memory", "64"])).unwrap(),
        Startup::TestMemory(64)
    );
    assert!(from_args(&args(&["--test-memory"])).is_err());
    assert!(from_args(&args(&["--test-memory", "x"])).is_err());
    let ca = |v: &[&str]| from_args(&args(v));
    assert_eq!(
        ca(&["--check-aof", "a.aof"]).unwrap(),
        Startup::CheckAof {
            file: "a.aof".into(),
            fix: false
        }
    );
    assert_eq!(
        ca(&["--check-aof", "a.aof", "--fix"]).unwrap(),
        Startup::CheckAof {
            file: "a.aof".into(),
            fix: true
        }
    );
    assert_eq!(
        ca(&["--check-aof", "--fix", "a.aof"]).unwrap(),
        Startup::CheckAof {
            file: "a.aof".into(),
            fix: true
        }
    );
    assert!(ca(&["--check-aof"]).is_err());
    assert!(ca(&["--check-aof", "a", "b"]).is_err());
    let e = from_args(&args(&["/nonexistent/dq.conf"])).unwrap_err();
    assert_eq!(e.line_no, 0);
    assert_eq!(
        e.to_string(),
        "Fatal error, can't open config file '/nonexistent/dq.conf': No such file or directory\n"
    );
    let _g = cwd_guard();
    assert!(matches!(from_args(&[]).unwrap(), Startup::Run(_)));
}
