//! Memory pressure (docs/COMMANDS.md#dispatch-and-common-errors): `maxmemory` makes deny-oom
//! commands fail without losing accepted jobs, evicts what may be evicted,
//! and expires idle queues.

use std::time::Duration;

use crate::harness::{wait_until, ReplyExt, Server};
use crate::util::{addjob, assert_bytes, POLL};

const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[test]
fn deny_oom_commands_fail_and_nothing_is_lost() {
    let s = Server::start_default();
    let mut c = s.client();
    let body = "x".repeat(1000);
    let ids: Vec<String> = (0..100).map(|_| addjob(&mut c, "mq", &body, &[])).collect();
    let active = addjob(&mut c, "aq", "b", &[]);
    c.cmd(&["GETJOB", "FROM", "aq"]);
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["ADDJOB", "mq", "b", "0"]), OOM);
    assert_bytes(&c.cmd_raw(&["ADDJOB", "newq", "b", "0", "ASYNC"]), OOM);
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &active]), OOM);
    assert_bytes(&c.cmd_raw(&["NACK", &active]), OOM);
    // Non deny-oom commands keep working.
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "mq"]), b":100\r\n");
    assert_eq!(c.info_int("registered_jobs"), 101);
    let r = c.cmd(&["GETJOB", "FROM", "mq"]);
    assert_eq!(r.array()[0].array()[1].text(), ids[0]);
    assert_bytes(&c.cmd_raw(&["ACKJOB", &ids[0]]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["DEQUEUE", &ids[1]]), b":1\r\n");
    assert_eq!(c.cmd(&["SHOW", &ids[2]]).field("state").text(), "queued");
    // Restore: everything accepted is still there and ADDJOB works again.
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1gb"]),
        b"+OK\r\n",
    );
    assert_bytes(&c.cmd_raw(&["QLEN", "mq"]), b":98\r\n");
    addjob(&mut c, "mq", "again", &[]);
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &active]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "aq"]), b":1\r\n");
}

#[test]
fn noeviction_policy_denies_even_with_evictable_jobs() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "q", "b", &["RETRY", "0"]);
    c.cmd(&["GETJOB", "FROM", "q"]);
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        b"+OK\r\n",
    );
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["ADDJOB", "q", "b", "0"]), OOM);
    // Nothing was evicted.
    assert_eq!(c.cmd(&["SHOW", &id]).field("state").text(), "active");
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1gb"]),
        b"+OK\r\n",
    );
    addjob(&mut c, "q", "b", &[]);
}

#[test]
fn eviction_removes_only_delivered_at_most_once_jobs() {
    let s = Server::start_default();
    let mut c = s.client();
    let body = "y".repeat(2000);
    let cmds: Vec<Vec<String>> = (0..50)
        .map(|_| {
            ["ADDJOB", "amo", &body, "0", "RETRY", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
        .collect();
    for r in c.pipeline(&cmds) {
        assert!(!r.is_error(), "{r:?}");
    }
    assert_eq!(
        c.cmd(&["GETJOB", "COUNT", "50", "FROM", "amo"])
            .array()
            .len(),
        50
    );
    let keep: Vec<String> = (0..10).map(|_| addjob(&mut c, "alo", &body, &[])).collect();
    let undelivered = addjob(&mut c, "amo2", &body, &["RETRY", "0"]);
    assert_eq!(c.info_int("registered_jobs"), 61);
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
    assert!(wait_until(Duration::from_secs(5), POLL, || c
        .info_int("registered_jobs")
        == 11));
    for id in &keep {
        assert_eq!(c.cmd(&["SHOW", id]).field("state").text(), "queued");
    }
    assert_eq!(
        c.cmd(&["SHOW", &undelivered]).field("state").text(),
        "queued"
    );
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1gb"]),
        b"+OK\r\n",
    );
}

#[test]
fn empty_queues_are_evicted_when_oom() {
    let s = Server::start_default();
    let mut c = s.client();
    let cmds: Vec<Vec<String>> = (0..1000)
        .map(|i| {
            ["GETJOB", "NOHANG", "FROM", &format!("queue-{i}")]
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
        .collect();
    for r in c.pipeline(&cmds) {
        assert!(r.is_nil());
    }
    assert_eq!(c.info_int("registered_queues"), 1000);
    c.cmd(&["PAUSE", "paused", "in"]);
    assert_bytes(&c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
            c.info_int("registered_queues") == 1
        }),
        "registered_queues stuck at {}",
        c.info_int("registered_queues")
    );
    // The paused queue survives eviction.
    assert_bytes(&c.cmd_raw(&["PAUSE", "paused", "state"]), b"+in\r\n");
    assert_bytes(
        &c.cmd_raw(&["CONFIG", "SET", "maxmemory", "1gb"]),
        b"+OK\r\n",
    );
    addjob(&mut c, "q", "b", &[]);
}
