//! Queue commands (docs/COMMANDS.md#queue-commands): QLEN, QPEEK, QSTAT, PAUSE.

use crate::harness::{Reply, ReplyExt, Server};
use crate::util::{addjob, assert_bytes};

#[test]
fn qlen_of_missing_queue_is_zero() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["QLEN", "nope"]), b":0\r\n");
    addjob(&mut c, "q", "b", &[]);
    addjob(&mut c, "q", "b", &[]);
    assert_bytes(&c.cmd_raw(&["QLEN", "q"]), b":2\r\n");
    // Queue names are case-sensitive.
    assert_bytes(&c.cmd_raw(&["QLEN", "Q"]), b":0\r\n");
}

#[test]
fn qpeek_positive_and_negative_counts() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["QPEEK", "nope", "10"]), b"*0\r\n");
    let ids: Vec<String> = (0..4)
        .map(|i| addjob(&mut c, "q1", &format!("body{i}"), &[]))
        .collect();
    let ids_of = |r: &Reply| -> Vec<String> {
        r.array()
            .iter()
            .map(|j| {
                let j = j.array();
                assert_eq!(j.len(), 3);
                assert_eq!(j[0].text(), "q1");
                j[1].text()
            })
            .collect()
    };
    assert_eq!(ids_of(&c.cmd(&["QPEEK", "q1", "2"])), ids[..2].to_vec());
    assert_eq!(ids_of(&c.cmd(&["QPEEK", "q1", "10"])), ids);
    assert_eq!(ids_of(&c.cmd(&["QPEEK", "q1", "-1"])), vec![ids[3].clone()]);
    let rev: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(ids_of(&c.cmd(&["QPEEK", "q1", "-10"])), rev);
    assert_bytes(&c.cmd_raw(&["QPEEK", "q1", "0"]), b"*0\r\n");
    let raw = c.cmd_raw(&["QPEEK", "q1", "1"]);
    let want = format!(
        "*1\r\n*3\r\n$2\r\nq1\r\n$40\r\n{}\r\n$5\r\nbody0\r\n",
        ids[0]
    );
    assert_bytes(&raw, want.as_bytes());
    for bad in ["x", "1.5", ""] {
        assert_bytes(
            &c.cmd_raw(&["QPEEK", "q1", bad]),
            b"-ERR value is not an integer or out of range\r\n",
        );
    }
    // QPEEK does not consume.
    assert_bytes(&c.cmd_raw(&["QLEN", "q1"]), b":4\r\n");
}

#[test]
fn qstat_layout_and_counters() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["QSTAT", "nope"]), b"*-1\r\n");
    addjob(&mut c, "q1", "a", &[]);
    addjob(&mut c, "q1", "b", &[]);
    addjob(&mut c, "q1", "c", &[]);
    c.cmd(&["GETJOB", "FROM", "q1"]);
    let r = c.cmd(&["QSTAT", "q1"]);
    let a = r.array();
    assert_eq!(a.len(), 20);
    let keys: Vec<String> = a.iter().step_by(2).map(Reply::text).collect();
    assert_eq!(
        keys,
        [
            "name",
            "len",
            "age",
            "idle",
            "blocked",
            "import-from",
            "import-rate",
            "jobs-in",
            "jobs-out",
            "pause"
        ]
    );
    assert_eq!(a[1], Reply::Bulk(b"q1".to_vec()));
    assert_eq!(a[3], Reply::Int(2));
    assert!(matches!(a[5], Reply::Int(0..=2)));
    assert!(matches!(a[7], Reply::Int(0..=2)));
    assert_eq!(a[9], Reply::Int(0));
    assert_eq!(a[11], Reply::Array(vec![]));
    assert_eq!(a[13], Reply::Int(0));
    assert_eq!(a[15], Reply::Int(3));
    assert_eq!(a[17], Reply::Int(1));
    assert_eq!(a[19], Reply::Bulk(b"none".to_vec()));

    assert_bytes(&c.cmd_raw(&["PAUSE", "pq", "all"]), b"+all\r\n");
    let raw = c.cmd_raw(&["QSTAT", "pq"]);
    let prefix = b"*20\r\n$4\r\nname\r\n$2\r\npq\r\n$3\r\nlen\r\n:0\r\n$3\r\nage\r\n:";
    assert!(raw.starts_with(prefix), "{}", String::from_utf8_lossy(&raw));
    assert!(raw.ends_with(
        b"$7\r\nblocked\r\n:0\r\n$11\r\nimport-from\r\n*0\r\n$11\r\nimport-rate\r\n:0\r\n$7\r\njobs-in\r\n:0\r\n$8\r\njobs-out\r\n:0\r\n$5\r\npause\r\n$3\r\nall\r\n"
    ), "{}", String::from_utf8_lossy(&raw));
}

#[test]
fn pause_semantics_and_replies() {
    let s = Server::start_default();
    let mut c = s.client();
    // State of a missing queue, which is not created.
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "state"]), b"+none\r\n");
    assert_bytes(&c.cmd_raw(&["QSTAT", "q"]), b"*-1\r\n");
    // `none` on a missing queue does not create it either.
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "none"]), b"+none\r\n");
    assert_bytes(&c.cmd_raw(&["QSTAT", "q"]), b"*-1\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "in"]), b"+in\r\n");
    assert_eq!(c.cmd(&["QSTAT", "q"]).field("pause").text(), "in");
    // A new set replaces the old one.
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "out"]), b"+out\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "state"]), b"+out\r\n");
    // Options accumulate left to right, `none` resets.
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "in", "out"]), b"+all\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "all", "none", "in"]), b"+in\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "OUT", "BCAST"]), b"+out\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "state", "bcast"]), b"+out\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "none"]), b"+none\r\n");
    assert_bytes(
        &c.cmd_raw(&["PAUSE", "q", "in", "bogus"]),
        b"-ERR syntax error\r\n",
    );
    assert_bytes(&c.cmd_raw(&["PAUSE", "q", "state"]), b"+none\r\n");
}

#[test]
fn paused_in_queue_postpones_retry_requeue() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "piq", "b", &["RETRY", "1"]);
    c.cmd(&["GETJOB", "FROM", "piq"]);
    assert_bytes(&c.cmd_raw(&["PAUSE", "piq", "in"]), b"+in\r\n");
    // The requeue deadline keeps being pushed while paused in.
    let show = |c: &mut crate::harness::Client| c.cmd(&["SHOW", &id]);
    assert!(crate::harness::wait_until(
        std::time::Duration::from_secs(5),
        crate::util::POLL,
        || {
            let r = show(&mut c);
            assert_eq!(r.field("state").text(), "active");
            // Passed the first deadline (about 1 s) and still active.
            c.cmd(&["QSTAT", "piq"]).field("age").int() >= 3
        }
    ));
    assert_bytes(&c.cmd_raw(&["QLEN", "piq"]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["PAUSE", "piq", "none"]), b"+none\r\n");
    assert!(crate::util::wait_qlen(&mut c, "piq", 1));
}
