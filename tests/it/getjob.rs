//! GETJOB (docs/COMMANDS.md#getjob): NOHANG, TIMEOUT, COUNT, WITHCOUNTERS, several
//! queues, blocking semantics and syntax errors.

use std::time::{Duration, Instant};

use crate::harness::{wait_until, Reply, ReplyExt, Server};
use crate::util::{addjob, assert_bytes, bulk, wait_qlen, POLL, WAIT};

#[test]
fn nohang_on_empty_queues_is_a_null_array() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "NOHANG", "FROM", "q1", "q2"]),
        b"*-1\r\n",
    );
    // Even NOHANG creates the queues (as in Disque).
    assert!(!c.cmd(&["QSTAT", "q1"]).is_nil());
}

#[test]
fn timeout_returns_null_after_the_timeout() {
    let s = Server::start_default();
    let mut c = s.client();
    let start = Instant::now();
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "300", "FROM", "q1", "q2"]),
        b"*-1\r\n",
    );
    let e = start.elapsed();
    assert!(
        e >= Duration::from_millis(300) && e < Duration::from_millis(5000),
        "{e:?}"
    );
    // The connection is usable afterwards.
    assert_bytes(&c.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn exact_reply_bytes() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "q1", "body1", &[]);
    let raw = c.cmd_raw(&["GETJOB", "FROM", "q1"]);
    let want = format!("*1\r\n*3\r\n$2\r\nq1\r\n$40\r\n{id}\r\n$5\r\nbody1\r\n");
    assert_bytes(&raw, want.as_bytes());

    let id = addjob(&mut c, "q1", "body1", &[]);
    let raw = c.cmd_raw(&["GETJOB", "WITHCOUNTERS", "COUNT", "1", "FROM", "q1"]);
    let want = format!(
        "*1\r\n*7\r\n$2\r\nq1\r\n$40\r\n{id}\r\n$5\r\nbody1\r\n$5\r\nnacks\r\n:0\r\n$21\r\nadditional-deliveries\r\n:0\r\n"
    );
    assert_bytes(&raw, want.as_bytes());
}

#[test]
fn count_and_multiple_queues_left_to_right() {
    let s = Server::start_default();
    let mut c = s.client();
    let a1 = addjob(&mut c, "qa", "a1", &[]);
    let a2 = addjob(&mut c, "qa", "a2", &[]);
    let a3 = addjob(&mut c, "qa", "a3", &[]);
    let b1 = addjob(&mut c, "qb", "b1", &[]);
    // Default COUNT is 1, first queue with a job wins.
    let r = c.cmd(&["GETJOB", "FROM", "empty", "qb", "qa"]);
    assert_eq!(r.array().len(), 1);
    assert_eq!(r.array()[0].array()[1].text(), b1);
    let b2 = addjob(&mut c, "qb", "b2", &[]);
    // Passes take one job per queue per pass: a1, b2, a2, a3.
    let r = c.cmd(&["GETJOB", "COUNT", "10", "FROM", "qa", "nothere", "qb"]);
    let got: Vec<(String, String)> = r
        .array()
        .iter()
        .map(|j| (j.array()[0].text(), j.array()[1].text()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("qa".to_string(), a1),
            ("qb".to_string(), b2),
            ("qa".to_string(), a2),
            ("qa".to_string(), a3),
        ]
    );
    // COUNT larger than available, all queues now empty -> NOHANG null.
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "NOHANG", "COUNT", "5", "FROM", "qa", "qb"]),
        b"*-1\r\n",
    );
}

#[test]
fn count_limits_the_reply() {
    let s = Server::start_default();
    let mut c = s.client();
    for i in 0..5 {
        addjob(&mut c, "cq", &i.to_string(), &[]);
    }
    let r = c.cmd(&["GETJOB", "COUNT", "3", "FROM", "cq"]);
    assert_eq!(r.array().len(), 3);
    assert_bytes(&c.cmd_raw(&["QLEN", "cq"]), b":2\r\n");
    let r = c.cmd(&["GETJOB", "COUNT", "3", "FROM", "cq", "cq"]);
    assert_eq!(r.array().len(), 2);
}

#[test]
fn syntax_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let se = b"-ERR syntax error\r\n";
    assert_bytes(&c.cmd_raw(&["GETJOB", "FROM"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "q"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "NOHANG"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "BADOPT", "FROM", "q"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "TIMEOUT"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "COUNT"]), se);
    assert_bytes(&c.cmd_raw(&["GETJOB", "NOHANG", "TIMEOUT"]), se);
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "abc", "FROM", "q"]),
        b"-ERR timeout is not an integer or out of range\r\n",
    );
    assert_bytes(
        &c.cmd_raw(&["GETJOB", "TIMEOUT", "-1", "FROM", "q"]),
        b"-ERR timeout is negative\r\n",
    );
    for bad in ["0", "-1", "x"] {
        assert_bytes(
            &c.cmd_raw(&["GETJOB", "COUNT", bad, "FROM", "q"]),
            b"-ERR COUNT must be a number greater than zero\r\n",
        );
    }
    // Options are case-insensitive; everything after FROM is a queue name.
    addjob(&mut c, "NOHANG", "b", &[]);
    let r = c.cmd(&["getjob", "nohang", "count", "2", "from", "NOHANG"]);
    assert_eq!(r.array()[0].array()[0].text(), "NOHANG");
}

#[test]
fn blocked_client_is_served_exactly_one_job() {
    let s = Server::start_default();
    let mut blocked = s.client();
    let mut c = s.client();
    blocked.send(&["GETJOB", "COUNT", "10", "WITHCOUNTERS", "FROM", "bq"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    // Adding several jobs in one pipeline: the blocked client gets exactly one.
    let mut req = Vec::new();
    for i in 0..3 {
        req.extend_from_slice(&crate::harness::encode_cmd(&[
            "ADDJOB",
            "bq",
            &format!("b{i}"),
            "0",
        ]));
    }
    c.send_raw(&req);
    let first = c.read_reply().text();
    c.read_reply();
    c.read_reply();
    let r = blocked.read_reply();
    let jobs = r.array();
    assert_eq!(jobs.len(), 1, "{r:?}");
    let j = jobs[0].array();
    assert_eq!(j.len(), 7);
    assert_eq!(j[0].text(), "bq");
    assert_eq!(j[1].text(), first);
    assert_eq!(j[2].text(), "b0");
    assert_bytes(&c.cmd_raw(&["QLEN", "bq"]), b":2\r\n");
    assert_eq!(c.info_int("blocked_clients"), 0);
    // The connection is normal again.
    assert_bytes(&blocked.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn blocked_clients_are_served_fifo() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut clients: Vec<_> = (0..3).map(|_| s.client()).collect();
    for (i, b) in clients.iter_mut().enumerate() {
        b.send(&["GETJOB", "FROM", "other", "fq"]);
        assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == i as i64 + 1));
    }
    let ids: Vec<String> = (0..3)
        .map(|i| addjob(&mut c, "fq", &format!("j{i}"), &[]))
        .collect();
    for (i, b) in clients.iter_mut().enumerate() {
        let r = b.read_reply();
        assert_eq!(r.array()[0].array()[1].text(), ids[i], "client {i}");
    }
    assert_bytes(&c.cmd_raw(&["QLEN", "fq"]), b":0\r\n");
}

#[test]
fn blocked_client_disconnect_does_not_lose_the_job() {
    let s = Server::start_default();
    let mut c = s.client();
    {
        let mut b = s.client();
        b.send(&["GETJOB", "FROM", "dq"]);
        assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    }
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 0));
    let id = addjob(&mut c, "dq", "b", &[]);
    assert_bytes(&c.cmd_raw(&["QLEN", "dq"]), b":1\r\n");
    let r = c.cmd(&["SHOW", &id]);
    assert_eq!(r.field("state").text(), "queued");
    assert_eq!(r.field("additional-deliveries").int(), 0);
}

#[test]
fn blocked_client_on_several_queues_gets_the_first_job_added() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut b = s.client();
    b.send(&["GETJOB", "TIMEOUT", "10000", "FROM", "x1", "x2", "x3"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    let qs = c.cmd(&["QSTAT", "x2"]);
    assert_eq!(qs.field("blocked").int(), 1);
    let id = addjob(&mut c, "x3", "body3", &[]);
    let raw = b.read_reply_raw();
    let mut want = b"*1\r\n*3\r\n".to_vec();
    want.extend_from_slice(&bulk(b"x3"));
    want.extend_from_slice(&bulk(id.as_bytes()));
    want.extend_from_slice(&bulk(b"body3"));
    assert_bytes(&raw, &want);
    assert_eq!(c.cmd(&["QSTAT", "x2"]).field("blocked").int(), 0);
}

#[test]
fn commands_pipelined_behind_a_blocked_getjob_run_after_it() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut b = s.client();
    let mut req = crate::harness::encode_cmd(&["GETJOB", "FROM", "pq"]);
    req.extend_from_slice(&crate::harness::encode_cmd(&["QLEN", "pq"]));
    b.send_raw(&req);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    assert!(b.try_read_reply(Duration::from_millis(200)).is_none());
    addjob(&mut c, "pq", "1", &[]);
    let r = b.read_reply();
    assert_eq!(r.array().len(), 1);
    // QLEN ran after the GETJOB was served.
    assert_eq!(b.read_reply(), Reply::Int(0));
    assert_bytes(&b.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn commands_sent_while_a_getjob_is_blocked_run_after_it() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut b = s.client();
    b.send(&["GETJOB", "FROM", "wq"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    // Arrives while the GETJOB waits: read and kept, not run yet.
    b.send(&["QLEN", "wq"]);
    assert!(b.try_read_reply(Duration::from_millis(200)).is_none());
    addjob(&mut c, "wq", "1", &[]);
    assert_eq!(b.read_reply().array().len(), 1);
    // Run once the GETJOB was answered, without the client sending more.
    assert_eq!(
        b.try_read_reply(Duration::from_secs(5)),
        Some(Reply::Int(0))
    );
}

#[test]
fn paused_out_queue_blocks_getjob_until_unpaused() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "poq", "b", &[]);
    assert_bytes(&c.cmd_raw(&["PAUSE", "poq", "out"]), b"+out\r\n");
    assert_bytes(&c.cmd_raw(&["GETJOB", "NOHANG", "FROM", "poq"]), b"*-1\r\n");
    let mut b = s.client();
    b.send(&["GETJOB", "FROM", "poq"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    assert!(b.try_read_reply(Duration::from_millis(200)).is_none());
    assert_bytes(&c.cmd_raw(&["PAUSE", "poq", "none"]), b"+none\r\n");
    let r = b.read_reply();
    assert_eq!(r.array()[0].array()[2].text(), "b");
    assert!(wait_qlen(&mut c, "poq", 0));
}
