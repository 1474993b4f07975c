//! QSCAN and JSCAN (docs/COMMANDS.md#jscan): reply types,
//! completeness, COUNT/BUSYLOOP, filters and errors.

use std::collections::BTreeSet;

use crate::harness::{encode_cmd, Client, Reply, ReplyExt, Server};
use crate::util::{addjob, assert_bytes};

/// Full iteration from cursor 0 back to 0; returns every element seen.
fn full_scan(c: &mut Client, cmd: &str, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut all = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec![cmd, &cursor];
        args.extend_from_slice(extra);
        let r = c.cmd(&args);
        let a = r.array();
        assert_eq!(a.len(), 2);
        let Reply::Bulk(next) = &a[0] else {
            panic!("cursor is not a bulk string: {r:?}");
        };
        for e in a[1].array() {
            match e {
                Reply::Status(s) if cmd == "JSCAN" => all.push(s.clone()),
                Reply::Bulk(b) if cmd == "QSCAN" => {
                    all.push(String::from_utf8_lossy(b).into_owned())
                }
                other => panic!("unexpected element type {other:?}"),
            }
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        calls += 1;
        assert!(calls < 100_000, "scan does not terminate");
        if cursor == "0" {
            return all;
        }
    }
}

fn add_many(c: &mut Client, n: usize, queue_of: impl Fn(usize) -> String) -> Vec<String> {
    let mut req = Vec::new();
    for i in 0..n {
        req.extend_from_slice(&encode_cmd(&["ADDJOB", &queue_of(i), "b", "0"]));
    }
    c.send_raw(&req);
    (0..n).map(|_| c.read_reply().text()).collect()
}

#[test]
fn empty_scans() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["QSCAN"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_bytes(&c.cmd_raw(&["JSCAN"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_bytes(
        &c.cmd_raw(&["JSCAN", "0", "BUSYLOOP"]),
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
}

#[test]
fn reply_types_are_bulk_cursor_and_status_ids() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "cq2", "b", &[]);
    assert_bytes(
        &c.cmd_raw(&["QSCAN"]),
        b"*2\r\n$1\r\n0\r\n*1\r\n$3\r\ncq2\r\n",
    );
    let want = format!("*2\r\n$1\r\n0\r\n*1\r\n+{id}\r\n");
    assert_bytes(&c.cmd_raw(&["JSCAN", "0"]), want.as_bytes());
    assert_bytes(&c.cmd_raw(&["JSCAN", "REPLY", "id"]), want.as_bytes());
}

#[test]
fn jscan_is_complete_over_many_jobs() {
    let s = Server::start_default();
    let mut c = s.client();
    let ids = add_many(&mut c, 1200, |i| format!("q{}", i % 7));
    let want: BTreeSet<String> = ids.into_iter().collect();
    let got: BTreeSet<String> = full_scan(&mut c, "JSCAN", &[]).into_iter().collect();
    assert_eq!(got, want);
    let got: BTreeSet<String> = full_scan(&mut c, "JSCAN", &["COUNT", "1"])
        .into_iter()
        .collect();
    assert_eq!(got, want);
    let got: BTreeSet<String> = full_scan(&mut c, "JSCAN", &["COUNT", "1000"])
        .into_iter()
        .collect();
    assert_eq!(got, want);
    // BUSYLOOP returns everything in one call.
    let r = c.cmd(&["JSCAN", "BUSYLOOP", "COUNT", "1"]);
    assert_eq!(r.array()[0], Reply::Bulk(b"0".to_vec()));
    let got: BTreeSet<String> = r.array()[1].array().iter().map(Reply::text).collect();
    assert_eq!(got, want);
    // Default COUNT (100) bounds a single call.
    let r = c.cmd(&["JSCAN", "0"]);
    let n = r.array()[1].array().len();
    assert!((100..1200).contains(&n), "{n} elements in one call");
    assert_ne!(r.array()[0], Reply::Bulk(b"0".to_vec()));
}

#[test]
fn qscan_is_complete_over_many_queues() {
    let s = Server::start_default();
    let mut c = s.client();
    add_many(&mut c, 700, |i| format!("queue-{i}"));
    let want: BTreeSet<String> = (0..700).map(|i| format!("queue-{i}")).collect();
    let got: BTreeSet<String> = full_scan(&mut c, "QSCAN", &[]).into_iter().collect();
    assert_eq!(got, want);
    let got: BTreeSet<String> = full_scan(&mut c, "QSCAN", &["COUNT", "3"])
        .into_iter()
        .collect();
    assert_eq!(got, want);
    let r = c.cmd(&["QSCAN", "BUSYLOOP"]);
    assert_eq!(r.array()[0], Reply::Bulk(b"0".to_vec()));
    assert_eq!(r.array()[1].array().len(), 700);
}

#[test]
fn jscan_filters_are_exact() {
    let s = Server::start_default();
    let mut c = s.client();
    let q1: BTreeSet<String> = (0..30).map(|_| addjob(&mut c, "q1", "b", &[])).collect();
    let q2: BTreeSet<String> = (0..20).map(|_| addjob(&mut c, "q2", "b", &[])).collect();
    let r = c.cmd(&["GETJOB", "COUNT", "5", "FROM", "q2"]);
    let active: BTreeSet<String> = r.array().iter().map(|j| j.array()[1].text()).collect();
    let set = |c: &mut Client, extra: &[&str]| scan_all(c, "JSCAN", extra);
    assert_eq!(set(&mut c, &["QUEUE", "q1"]), q1);
    assert_eq!(set(&mut c, &["QUEUE", "q2"]), q2);
    assert!(set(&mut c, &["QUEUE", "nope"]).is_empty());
    assert_eq!(set(&mut c, &["STATE", "active"]), active);
    let queued: BTreeSet<String> = q1
        .union(&q2)
        .filter(|i| !active.contains(*i))
        .cloned()
        .collect();
    assert_eq!(set(&mut c, &["STATE", "queued"]), queued);
    let all: BTreeSet<String> = q1.union(&q2).cloned().collect();
    assert_eq!(set(&mut c, &["STATE", "queued", "STATE", "active"]), all);
    assert!(set(&mut c, &["STATE", "wait-repl"]).is_empty());
    assert!(set(&mut c, &["STATE", "acked"]).is_empty());
    let q2_queued: BTreeSet<String> = q2.difference(&active).cloned().collect();
    assert_eq!(set(&mut c, &["queue", "q2", "state", "QUEUED"]), q2_queued);
    // Filters also hold across a paged iteration.
    let paged: BTreeSet<String> = full_scan(&mut c, "JSCAN", &["COUNT", "2", "QUEUE", "q1"])
        .into_iter()
        .collect();
    assert_eq!(paged, q1);
}

#[test]
fn jscan_reply_all_has_show_layout() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "q1", "body1", &["RETRY", "30", "TTL", "3600"]);
    let r = c.cmd(&["JSCAN", "REPLY", "ALL", "BUSYLOOP"]);
    let items = r.array()[1].array();
    assert_eq!(items.len(), 1);
    let job = &items[0];
    assert_eq!(job.array().len(), 30);
    let show = c.cmd(&["SHOW", &id]);
    let keys = |r: &Reply| -> Vec<Reply> { r.array().iter().step_by(2).cloned().collect() };
    assert_eq!(keys(job), keys(&show));
    assert_eq!(job.field("id").text(), id);
    assert_eq!(job.field("queue").text(), "q1");
    assert_eq!(job.field("state").text(), "queued");
    assert_eq!(job.field("retry").int(), 30);
    assert_eq!(job.field("body").text(), "body1");
}

#[test]
fn qscan_length_filters_are_exact() {
    let s = Server::start_default();
    let mut c = s.client();
    for (q, n) in [("l1", 1), ("l2", 2), ("l3", 3), ("l5", 5)] {
        for _ in 0..n {
            addjob(&mut c, q, "b", &[]);
        }
    }
    c.cmd(&["GETJOB", "NOHANG", "FROM", "l0"]); // creates an empty queue
    let set = |c: &mut Client, extra: &[&str]| scan_all(c, "QSCAN", extra);
    let names = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(set(&mut c, &[]), names(&["l0", "l1", "l2", "l3", "l5"]));
    assert_eq!(set(&mut c, &["MINLEN", "2"]), names(&["l2", "l3", "l5"]));
    assert_eq!(set(&mut c, &["MAXLEN", "2"]), names(&["l0", "l1", "l2"]));
    assert_eq!(
        set(&mut c, &["MINLEN", "2", "MAXLEN", "3"]),
        names(&["l2", "l3"])
    );
    assert_eq!(set(&mut c, &["MINLEN", "6"]), names(&[]));
    assert_eq!(set(&mut c, &["IMPORTRATE", "1"]), names(&[]));
    let paged: BTreeSet<String> = full_scan(&mut c, "QSCAN", &["COUNT", "1", "MINLEN", "3"])
        .into_iter()
        .collect();
    assert_eq!(paged, names(&["l3", "l5"]));
}

#[test]
fn scan_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let not_int = b"-ERR value is not an integer or out of range\r\n";
    for cmd in ["QSCAN", "JSCAN"] {
        assert_bytes(
            &c.cmd_raw(&[cmd, "abc"]),
            b"-ERR invalid cursor or option name\r\n",
        );
        assert_bytes(
            &c.cmd_raw(&[cmd, "-1"]),
            b"-ERR invalid cursor or option name\r\n",
        );
        assert_bytes(&c.cmd_raw(&[cmd, "0", "0"]), b"-ERR syntax error\r\n");
        assert_bytes(&c.cmd_raw(&[cmd, "COUNT", "x"]), not_int);
    }
    for opt in ["MINLEN", "MAXLEN", "IMPORTRATE"] {
        assert_bytes(&c.cmd_raw(&["QSCAN", opt, "x"]), not_int);
    }
    assert_bytes(
        &c.cmd_raw(&["JSCAN", "STATE", "foo"]),
        b"-ERR Invalid job state name\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["JSCAN", "REPLY", "foo"]),
        b"-ERR Invalid REPLY type, try ID or ALL\r\n",
    );
    // Options are case-insensitive; the cursor may come after options.
    assert_bytes(
        &c.cmd_raw(&["jscan", "count", "5", "0"]),
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
}

/// Everything a `<cmd> BUSYLOOP <extra...>` scan returns, as a set.
fn scan_all(c: &mut Client, cmd: &str, extra: &[&str]) -> BTreeSet<String> {
    let mut args = vec![cmd, "BUSYLOOP"];
    args.extend_from_slice(extra);
    c.cmd(&args).array()[1]
        .array()
        .iter()
        .map(Reply::text)
        .collect()
}
