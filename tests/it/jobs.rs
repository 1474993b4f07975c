//! Job commands on a single node (docs/COMMANDS.md#job-commands): ADDJOB options, validation and IDs, ACKJOB, FASTACK,
//! DELJOB, NACK, ENQUEUE, DEQUEUE, WORKING and SHOW.

use std::time::{Duration, Instant};

use crate::harness::{is_job_id, wait_until, Client, Reply, ReplyExt, Server};
use crate::util::{addjob, assert_bytes, error, wait_qlen, POLL, WAIT};

const UNKNOWN_ID: &str = "D-00000000-000000000000000000000000-0001";

fn my_id(c: &mut Client) -> String {
    c.cmd(&["CLUSTER", "MYID"]).text()
}

fn show(c: &mut Client, id: &str) -> Reply {
    c.cmd(&["SHOW", id])
}

#[test]
fn addjob_reply_is_a_status_with_a_well_formed_id() {
    let s = Server::start_default();
    let mut c = s.client();
    let me = my_id(&mut c);
    let raw = c.cmd_raw(&["ADDJOB", "q", "body", "0"]);
    assert_eq!(raw.len(), 1 + 40 + 2, "{}", String::from_utf8_lossy(&raw));
    assert!(raw.starts_with(b"+D-") && raw.ends_with(b"-05a1\r\n"));
    let id = std::str::from_utf8(&raw[1..41]).unwrap();
    assert!(is_job_id(id));
    assert_eq!(&id[2..10], &me[..8], "node prefix");
    assert!(id[11..35]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/'));
    // IDs never repeat.
    let other = addjob(&mut c, "q", "body", &[]);
    assert_ne!(other, id);
}

#[test]
fn addjob_id_ttl_field_and_parity() {
    let s = Server::start_default();
    let mut c = s.client();
    let cases: &[(&[&str], &str)] = &[
        (&[], "05a1"),
        (&["RETRY", "0"], "05a0"),
        (&["TTL", "3600"], "003d"),
        (&["TTL", "600"], "000b"),
        (&["TTL", "5"], "0001"),
        (&["TTL", "5", "RETRY", "0"], "0000"),
        (&["TTL", "3600", "RETRY", "0"], "003c"),
        (&["TTL", "59"], "0001"),
        (&["TTL", "7864320"], "ffff"),
        (&["TTL", "99999999", "RETRY", "0"], "fffe"),
    ];
    for (extra, suffix) in cases {
        let id = addjob(&mut c, "q", "b", extra);
        assert!(id.ends_with(&format!("-{suffix}")), "{extra:?}: {id}");
    }
}

#[test]
fn addjob_defaults_in_show() {
    let s = Server::start_default();
    let mut c = s.client();
    let me = my_id(&mut c);
    let cases: &[(&[&str], i64, i64)] = &[
        // extra args, expected ttl, expected retry
        (&[], 86400, 300),
        (&["TTL", "3600"], 3600, 300),
        (&["TTL", "100"], 100, 10),
        (&["TTL", "5"], 5, 1),
        (&["TTL", "100", "RETRY", "7"], 100, 7),
        (&["RETRY", "0"], 86400, 0),
    ];
    for (extra, ttl, retry) in cases {
        let id = addjob(&mut c, "dq", "b", extra);
        let r = show(&mut c, &id);
        assert_eq!(r.field("repl").int(), 1, "{extra:?}");
        let got_ttl = r.field("ttl").int();
        assert!(
            (ttl - 1..=*ttl).contains(&got_ttl),
            "{extra:?}: ttl {got_ttl}"
        );
        assert_eq!(r.field("retry").int(), *retry, "{extra:?}");
        assert_eq!(r.field("delay").int(), 0);
        assert_eq!(r.field("state").text(), "queued");
        assert_eq!(
            r.field("nodes-delivered"),
            &Reply::Array(vec![Reply::Bulk(me.clone().into_bytes())])
        );
        assert_eq!(r.field("nodes-confirmed"), &Reply::Array(vec![]));
        if *retry > 0 {
            let within = r.field("next-requeue-within").int();
            assert!(
                within > 0 && within <= retry * 1000 + 250,
                "{extra:?}: next-requeue-within {within}"
            );
        } else {
            assert_eq!(r.field("next-requeue-within"), &Reply::NilBulk);
        }
    }
}

#[test]
fn addjob_validation_errors_in_order() {
    let s = Server::start_default();
    let mut c = s.client();
    let cases: &[(&[&str], &str)] = &[
        (&["REPLICATE"], "ERR syntax error"),
        (&["FOO"], "ERR syntax error"),
        (&["TTL", "10", "BAR", "1"], "ERR syntax error"),
        (&["DELAY"], "ERR syntax error"),
        (&["REPLICATE", "0"], "ERR REPLICATE must be between 1 and 65535"),
        (&["REPLICATE", "65536"], "ERR REPLICATE must be between 1 and 65535"),
        (&["REPLICATE", "x"], "ERR REPLICATE must be between 1 and 65535"),
        (&["TTL", "0"], "ERR TTL must be a number > 0"),
        (&["TTL", "-5"], "ERR TTL must be a number > 0"),
        (&["TTL", "1.5"], "ERR TTL must be a number > 0"),
        (&["RETRY", "-1"], "ERR RETRY time must be a non negative number"),
        (&["RETRY", "z"], "ERR RETRY time must be a non negative number"),
        (&["DELAY", "-1"], "ERR DELAY time must be a non negative number"),
        (&["MAXLEN", "0"], "ERR MAXLEN must be a positive number"),
        (&["MAXLEN", "-3"], "ERR MAXLEN must be a positive number"),
        // Option errors come while parsing, left to right.
        (&["TTL", "0", "FOO"], "ERR TTL must be a number > 0"),
        (&["FOO", "TTL", "0"], "ERR syntax error"),
        (
            &["REPLICATE", "2", "RETRY", "0"],
            "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)",
        ),
        (
            &["TTL", "10", "DELAY", "10"],
            "ERR The specified DELAY is greater than TTL. Job refused since would never be delivered",
        ),
        (
            &["DELAY", "86400"],
            "ERR The specified DELAY is greater than TTL. Job refused since would never be delivered",
        ),
        (
            &["REPLICATE", "2"],
            "NOREPL Not enough reachable nodes for the requested replication level",
        ),
        (
            &["REPLICATE", "3", "ASYNC"],
            "NOREPL Not enough reachable nodes for the requested replication level",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["ADDJOB", "vq", "body", "0"];
        args.extend_from_slice(extra);
        assert_bytes(&c.cmd_raw(&args), &error(want));
    }
    // ms-timeout is checked after the options, before the rest.
    let t: &[(&[&str], &str)] = &[
        (&["abc"], "ERR timeout is not an integer or out of range"),
        (&["-1"], "ERR timeout is negative"),
        (&["abc", "TTL", "0"], "ERR TTL must be a number > 0"),
        (
            &["abc", "REPLICATE", "2", "RETRY", "0"],
            "ERR timeout is not an integer or out of range",
        ),
        (
            &["-1", "TTL", "10", "DELAY", "20"],
            "ERR timeout is negative",
        ),
    ];
    for (rest, want) in t {
        let mut args = vec!["ADDJOB", "vq", "body"];
        args.extend_from_slice(rest);
        assert_bytes(&c.cmd_raw(&args), &error(want));
    }
    // Nothing was created by any failing ADDJOB.
    assert_eq!(c.info_int("registered_jobs"), 0);
    assert_bytes(&c.cmd_raw(&["QLEN", "vq"]), b":0\r\n");
}

#[test]
fn addjob_accepts_every_option_case_insensitively() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(
        &mut c,
        "oq",
        "b",
        &[
            "replicate",
            "1",
            "Delay",
            "0",
            "retry",
            "5",
            "ttl",
            "100",
            "maxlen",
            "10",
            "async",
        ],
    );
    let r = show(&mut c, &id);
    assert_eq!(r.field("retry").int(), 5);
    assert_eq!(r.field("repl").int(), 1);
    assert!(id.ends_with("-0001"));
    // REPLICATE 1 with RETRY 0 is fine on one node.
    addjob(&mut c, "oq", "b", &["REPLICATE", "1", "RETRY", "0"]);
    // A timeout in ms is accepted (ignored with REPLICATE 1).
    assert!(c
        .cmd(&["ADDJOB", "oq", "b", "5000"])
        .text()
        .starts_with("D-"));
}

#[test]
fn addjob_maxlen_and_paused_queue() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "mq", "1", &[]);
    addjob(&mut c, "mq", "2", &["MAXLEN", "2"]);
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "mq", "3", "0", "MAXLEN", "2"]),
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "mq", "3", "0", "MAXLEN", "1"]),
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n",
    );
    addjob(&mut c, "mq", "3", &["MAXLEN", "3"]);
    assert_bytes(&c.cmd_raw(&["QLEN", "mq"]), b":3\r\n");
    // MAXLEN on a missing queue is fine.
    addjob(&mut c, "newq", "1", &["MAXLEN", "1"]);

    assert_bytes(&c.cmd_raw(&["PAUSE", "mq", "in"]), b"+in\r\n");
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "mq", "4", "0"]),
        b"-PAUSED Queue paused in input, try later\r\n",
    );
    // MAXLEN is checked before the pause.
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "mq", "4", "0", "MAXLEN", "1"]),
        b"-MAXLEN Queue is already longer than the specified MAXLEN count\r\n",
    );
    // Paused out only: ADDJOB works.
    assert_bytes(&c.cmd_raw(&["PAUSE", "mq", "out"]), b"+out\r\n");
    addjob(&mut c, "mq", "4", &[]);
    assert_bytes(&c.cmd_raw(&["QLEN", "mq"]), b":4\r\n");
}

#[test]
fn addjob_delay_queues_the_job_later() {
    let s = Server::start_default();
    let mut c = s.client();
    let start = Instant::now();
    let id = addjob(&mut c, "delayq", "b", &["DELAY", "1"]);
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "active");
    assert_eq!(r.field("delay").int(), 1);
    assert_bytes(&c.cmd_raw(&["QLEN", "delayq"]), b":0\r\n");
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "NOHANG", "FROM", "delayq"]),
        b"*-1\r\n",
    );
    assert!(wait_qlen(&mut c, "delayq", 1));
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(700),
        "queued after {elapsed:?}"
    );
    assert_eq!(show(&mut c, &id).field("state").text(), "queued");
    // The delayed first queueing is still silent.
    let r = show(&mut c, &id);
    assert_eq!(r.field("additional-deliveries").int(), 0);
}

#[test]
fn addjob_ttl_expiry_removes_the_job() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "tq", "b", &["TTL", "1"]);
    let id2 = addjob(
        &mut c,
        "tq2",
        "b",
        &["TTL", "1", "DELAY", "0", "RETRY", "0"],
    );
    assert_eq!(c.info_int("registered_jobs"), 2);
    assert!(wait_until(WAIT, POLL, || c.info_int("registered_jobs") == 0));
    assert_bytes(&c.cmd_raw(&["SHOW", &id]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["SHOW", &id2]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "tq"]), b":0\r\n");
}

#[test]
fn unacked_job_is_requeued_after_retry_with_counters() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "rq", "b", &["RETRY", "1"]);
    let r = c.cmd(&["GETJOB", "WITHCOUNTERS", "FROM", "rq"]);
    let job = r.array()[0].array();
    assert_eq!(job[1].text(), id);
    assert_eq!(job[4], Reply::Int(0));
    assert_eq!(job[6], Reply::Int(0));
    assert_eq!(show(&mut c, &id).field("state").text(), "active");
    let start = Instant::now();
    assert!(wait_qlen(&mut c, "rq", 1), "job not requeued");
    assert!(start.elapsed() >= Duration::from_millis(500));
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "queued");
    assert_eq!(r.field("nacks").int(), 0);
    assert_eq!(r.field("additional-deliveries").int(), 1);
    let r = c.cmd(&["GETJOB", "WITHCOUNTERS", "FROM", "rq"]);
    let job = r.array()[0].array();
    assert_eq!(job[1].text(), id);
    assert_eq!(job[4], Reply::Int(0));
    assert_eq!(job[6], Reply::Int(1));
    // ACK stops further deliveries.
    assert_bytes(&c.cmd_raw(&["ACKJOB", &id]), b":1\r\n");
    assert!(wait_until(WAIT, POLL, || show(&mut c, &id).is_nil()));
    assert_bytes(&c.cmd_raw(&["QLEN", "rq"]), b":0\r\n");
}

#[test]
fn retry_zero_job_is_never_requeued() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "amo", "b", &["RETRY", "0"]);
    assert_eq!(c.cmd(&["GETJOB", "FROM", "amo"]).array().len(), 1);
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "active");
    assert_eq!(r.field("next-requeue-within"), &Reply::NilBulk);
    // Delivered at-most-once jobs cannot be queued again by hand either.
    assert_bytes(&c.cmd_raw(&["NACK", &id]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &id]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "amo"]), b":0\r\n");
}

#[test]
fn single_node_fifo_of_100_jobs() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut req = Vec::new();
    for i in 0..100 {
        req.extend_from_slice(&crate::harness::encode_cmd(&[
            "ADDJOB",
            "fifo",
            &format!("{i}"),
            "0",
        ]));
    }
    c.send_raw(&req);
    let ids: Vec<String> = (0..100).map(|_| c.read_reply().text()).collect();
    let peek = c.cmd(&["QPEEK", "fifo", "100"]);
    let peeked: Vec<String> = peek.array().iter().map(|j| j.array()[1].text()).collect();
    assert_eq!(peeked, ids);
    let r = c.cmd(&["GETJOB", "COUNT", "100", "FROM", "fifo"]);
    let got: Vec<(String, String)> = r
        .array()
        .iter()
        .map(|j| (j.array()[1].text(), j.array()[2].text()))
        .collect();
    let want: Vec<(String, String)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), i.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn show_has_the_30_element_layout() {
    let s = Server::start_default();
    let mut c = s.client();
    let me = my_id(&mut c);
    let id = addjob(&mut c, "sq", "body1", &["RETRY", "30", "TTL", "3600"]);
    let r = show(&mut c, &id);
    let a = r.array();
    assert_eq!(a.len(), 30);
    let keys: Vec<String> = a.iter().step_by(2).map(Reply::text).collect();
    assert_eq!(
        keys,
        [
            "id",
            "queue",
            "state",
            "repl",
            "ttl",
            "ctime",
            "delay",
            "retry",
            "nacks",
            "additional-deliveries",
            "nodes-delivered",
            "nodes-confirmed",
            "next-requeue-within",
            "next-awake-within",
            "body"
        ]
    );
    assert_eq!(a[1], Reply::Bulk(id.clone().into_bytes()));
    assert_eq!(a[3], Reply::Bulk(b"sq".to_vec()));
    assert_eq!(a[5], Reply::Bulk(b"queued".to_vec()));
    assert_eq!(a[7], Reply::Int(1));
    assert!(matches!(a[9], Reply::Int(3599..=3600)), "{:?}", a[9]);
    let ctime = a[11].int();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        * 1_000_000;
    assert!(
        (now_ns - 10_000 * 1_000_000..=now_ns + 1_000_000_000).contains(&ctime),
        "ctime {ctime} vs now {now_ns}"
    );
    assert_eq!(a[13], Reply::Int(0));
    assert_eq!(a[15], Reply::Int(30));
    assert_eq!(a[17], Reply::Int(0));
    assert_eq!(a[19], Reply::Int(0));
    assert_eq!(a[21], Reply::Array(vec![Reply::Bulk(me.into_bytes())]));
    assert_eq!(a[23], Reply::Array(vec![]));
    let requeue = a[25].int();
    assert!((29_000..=30_250).contains(&requeue), "{requeue}");
    let awake = a[27].int();
    assert!(
        awake <= requeue && awake >= 28_000,
        "awake {awake} requeue {requeue}"
    );
    assert_eq!(a[29], Reply::Bulk(b"body1".to_vec()));
    // Raw prefix, exactly as Disque sends it.
    let raw = c.cmd_raw(&["SHOW", &id]);
    let prefix = format!(
        "*30\r\n$2\r\nid\r\n$40\r\n{id}\r\n$5\r\nqueue\r\n$2\r\nsq\r\n$5\r\nstate\r\n$6\r\nqueued\r\n$4\r\nrepl\r\n:1\r\n$3\r\nttl\r\n:"
    );
    assert!(
        raw.starts_with(prefix.as_bytes()),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    assert!(raw.ends_with(b"$4\r\nbody\r\n$5\r\nbody1\r\n"));
}

#[test]
fn show_unknown_and_bad_ids() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(&c.cmd_raw(&["SHOW", UNKNOWN_ID]), b"$-1\r\n");
    for bad in [
        "bad",
        "",
        "D-00000000-000000000000000000000000-00011",
        "X-00000000-000000000000000000000000-0001",
        "D_00000000-000000000000000000000000-0001",
        "D-00000000_000000000000000000000000-0001",
        "D-00000000-000000000000000000000000_0001",
    ] {
        assert_bytes(
            &c.cmd_raw(&["SHOW", bad]),
            b"-BADID Invalid Job ID format.\r\n",
        );
    }
    // Only length and the four fixed positions are checked.
    assert_bytes(
        &c.cmd_raw(&["SHOW", "D-zzzzzzzz-!!!!!!!!!!!!!!!!!!!!!!!!-qqqq"]),
        b"$-1\r\n",
    );
}

#[test]
fn every_id_command_rejects_bad_ids_and_does_nothing() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "bq", "b", &[]);
    let active = addjob(&mut c, "bq2", "b", &[]);
    assert_eq!(c.cmd(&["GETJOB", "FROM", "bq2"]).array().len(), 1);
    let badid = b"-BADID Invalid Job ID format.\r\n";
    for cmd in ["ACKJOB", "FASTACK", "DELJOB", "DEQUEUE"] {
        assert_bytes(&c.cmd_raw(&[cmd, &id, "nope"]), badid);
        assert_bytes(&c.cmd_raw(&[cmd, "nope", &id]), badid);
    }
    for cmd in ["NACK", "ENQUEUE"] {
        assert_bytes(&c.cmd_raw(&[cmd, &active, "nope"]), badid);
    }
    assert_bytes(&c.cmd_raw(&["WORKING", "nope"]), badid);
    assert_bytes(&c.cmd_raw(&["SHOW", "nope"]), badid);
    // Nothing happened to either job.
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "queued");
    let r = show(&mut c, &active);
    assert_eq!(r.field("state").text(), "active");
    assert_eq!(r.field("nacks").int(), 0);
    assert_bytes(&c.cmd_raw(&["QLEN", "bq"]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "bq2"]), b":0\r\n");
    assert_eq!(c.info_int("registered_jobs"), 2);
}

#[test]
fn ackjob_counts_and_garbage_collects_on_one_node() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = addjob(&mut c, "aq", "1", &[]);
    let b = addjob(&mut c, "aq", "2", &[]);
    assert_bytes(&c.cmd_raw(&["ACKJOB", &a, &a, UNKNOWN_ID]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "aq"]), b":1\r\n");
    // Single node: the acked job is collected at once (or nearly).
    assert!(wait_until(WAIT, POLL, || show(&mut c, &a).is_nil()));
    assert_bytes(&c.cmd_raw(&["ACKJOB", &a]), b":0\r\n");
    // Unknown IDs create no dummy ACK on a one-node cluster.
    assert_bytes(&c.cmd_raw(&["SHOW", UNKNOWN_ID]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["ACKJOB"]), b":0\r\n");
    // An active (delivered) job can be acked too.
    assert_eq!(c.cmd(&["GETJOB", "FROM", "aq"]).array().len(), 1);
    assert_bytes(&c.cmd_raw(&["ACKJOB", &b]), b":1\r\n");
    assert!(wait_until(WAIT, POLL, || c.info_int("registered_jobs") == 0));
}

#[test]
fn fastack_and_deljob_delete_at_once() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = addjob(&mut c, "fq", "1", &[]);
    let b = addjob(&mut c, "fq", "2", &[]);
    let d = addjob(&mut c, "fq", "3", &[]);
    assert_bytes(&c.cmd_raw(&["FASTACK", &a, UNKNOWN_ID, &a]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["SHOW", &a]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "fq"]), b":2\r\n");
    assert_bytes(&c.cmd_raw(&["FASTACK"]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["DELJOB", &b, &d, UNKNOWN_ID]), b":2\r\n");
    assert_bytes(&c.cmd_raw(&["SHOW", &b]), b"$-1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "fq"]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["DELJOB", &b]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["DELJOB"]), b":0\r\n");
    assert_eq!(c.info_int("registered_jobs"), 0);
    // DELJOB also removes active and acked jobs.
    let e = addjob(&mut c, "fq", "4", &[]);
    c.cmd(&["GETJOB", "FROM", "fq"]);
    assert_bytes(&c.cmd_raw(&["DELJOB", &e]), b":1\r\n");
    assert_eq!(c.info_int("registered_jobs"), 0);
}

#[test]
fn nack_counts_and_requeues_active_jobs_only() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "nq", "b", &["RETRY", "30"]);
    // Queued, not active: NACK does nothing.
    assert_bytes(&c.cmd_raw(&["NACK", &id]), b":0\r\n");
    c.cmd(&["GETJOB", "FROM", "nq"]);
    assert_bytes(&c.cmd_raw(&["NACK", &id, UNKNOWN_ID]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "nq"]), b":1\r\n");
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "queued");
    assert_eq!(r.field("nacks").int(), 1);
    assert_eq!(r.field("additional-deliveries").int(), 0);
    let r = c.cmd(&["GETJOB", "WITHCOUNTERS", "FROM", "nq"]);
    let j = r.array()[0].array();
    assert_eq!(j[3].text(), "nacks");
    assert_eq!(j[4], Reply::Int(1));
    assert_eq!(j[5].text(), "additional-deliveries");
    assert_eq!(j[6], Reply::Int(0));
    // A second NACK after redelivery.
    assert_bytes(&c.cmd_raw(&["NACK", &id]), b":1\r\n");
    assert_eq!(show(&mut c, &id).field("nacks").int(), 2);
}

#[test]
fn enqueue_and_dequeue() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "eq", "b", &["RETRY", "30"]);
    // Already queued.
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &id]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["DEQUEUE", &id, UNKNOWN_ID]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "eq"]), b":0\r\n");
    assert_eq!(show(&mut c, &id).field("state").text(), "active");
    assert_bytes(&c.cmd_raw(&["DEQUEUE", &id]), b":0\r\n");
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &id, UNKNOWN_ID]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "eq"]), b":1\r\n");
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "queued");
    // Queued before, so this counts as an additional delivery.
    assert_eq!(r.field("additional-deliveries").int(), 1);
    assert_eq!(r.field("nacks").int(), 0);
    // The job can be consumed after ENQUEUE.
    let r = c.cmd(&["GETJOB", "FROM", "eq"]);
    assert_eq!(r.array()[0].array()[1].text(), id);
}

#[test]
fn working_returns_retry_and_postpones_requeue() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["WORKING", UNKNOWN_ID]),
        b"-NOJOB Job not known in the context of this node.\r\n",
    );
    let id = addjob(&mut c, "wq", "b", &["RETRY", "1"]);
    // WORKING on a queued job dequeues it.
    assert_bytes(&c.cmd_raw(&["WORKING", &id]), b":1\r\n");
    assert_bytes(&c.cmd_raw(&["QLEN", "wq"]), b":0\r\n");
    assert_eq!(show(&mut c, &id).field("state").text(), "active");
    // Keep postponing for ~2.5 s: the job must not come back meanwhile.
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert_bytes(&c.cmd_raw(&["WORKING", &id]), b":1\r\n");
        assert_bytes(&c.cmd_raw(&["QLEN", "wq"]), b":0\r\n");
        let within = show(&mut c, &id).field("next-requeue-within").int();
        assert!(
            within > 500,
            "requeue due in {within} ms right after WORKING"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Stop refreshing: it gets requeued.
    assert!(wait_qlen(&mut c, "wq", 1));
    let id30 = addjob(&mut c, "wq2", "b", &["RETRY", "30"]);
    assert_bytes(&c.cmd_raw(&["WORKING", &id30]), b":30\r\n");
}

#[test]
fn working_too_late_after_half_the_ttl() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "tl", "b", &["TTL", "2"]);
    let mut saw_ok = false;
    let toolate = b"-TOOLATE Half of job TTL already elapsed, you are no longer allowed to postpone the next delivery.\r\n";
    let got = wait_until(Duration::from_secs(3), POLL, || {
        let r = c.cmd_raw(&["WORKING", &id]);
        if r == b":1\r\n" {
            saw_ok = true;
            false
        } else {
            assert_bytes(&r, toolate);
            true
        }
    });
    assert!(got, "never TOOLATE");
    assert!(saw_ok, "TOOLATE right away");
}

#[test]
fn empty_body_and_enqueue_of_delayed_job() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "eb", "", &[]);
    let raw = c.cmd_raw(&["GETJOB", "FROM", "eb"]);
    assert_bytes(
        &raw,
        format!("*1\r\n*3\r\n$2\r\neb\r\n$40\r\n{id}\r\n$0\r\n\r\n").as_bytes(),
    );
    // A delayed job is active and can be queued early by hand; that first
    // queueing is silent.
    let id = addjob(&mut c, "dly", "b", &["DELAY", "100"]);
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "active");
    let awake = r.field("next-awake-within").int();
    assert!(awake > 90_000, "next-awake-within {awake}");
    assert_bytes(&c.cmd_raw(&["ENQUEUE", &id]), b":1\r\n");
    let r = show(&mut c, &id);
    assert_eq!(r.field("state").text(), "queued");
    assert_eq!(r.field("additional-deliveries").int(), 0);
    assert_bytes(&c.cmd_raw(&["QLEN", "dly"]), b":1\r\n");
}
