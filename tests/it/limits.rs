//! QLIMIT with real processes: a rate limit and a concurrency cap on one
//! node (skipped queues, blocked consumers woken when the limit allows,
//! QSTAT, precise errors, a restart keeps the limit), and a limit set on
//! one node reaching the others with shares that add up to it.

use std::time::{Duration, Instant};

use crate::cluster::cluster;
use crate::harness::{wait_until, Reply, ReplyExt, Server};
use crate::util::{addjob, POLL, WAIT};

fn ids(r: &Reply) -> Vec<String> {
    r.array().iter().map(|j| j.array()[1].text()).collect()
}

#[test]
fn rate_limit_skips_the_queue_and_wakes_the_blocked_consumer() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["QLIMIT", "rq", "RATE", "3", "1000"]),
        Reply::Status("OK".into())
    );
    for i in 0..6 {
        addjob(&mut c, "rq", &format!("j{i}"), &[]);
    }
    let other = addjob(&mut c, "free", "x", &[]);
    let t0 = Instant::now();
    let got = c.cmd(&["GETJOB", "NOHANG", "COUNT", "10", "FROM", "rq"]);
    assert_eq!(ids(&got).len(), 3, "three per second");
    // The limited queue is skipped; the other queue still serves.
    let got = c.cmd(&["GETJOB", "NOHANG", "COUNT", "10", "FROM", "rq", "free"]);
    assert_eq!(ids(&got), vec![other]);
    let st = c.cmd(&["QSTAT", "rq"]);
    assert_eq!(st.field("limit-rate").int(), 3);
    assert_eq!(st.field("limit-interval").int(), 1000);
    assert_eq!(st.field("limit-window-used").int(), 3);
    assert_eq!(st.field("len").int(), 3);
    // A blocked consumer is served when the window moves on, not before.
    let mut w = s.client();
    w.send(&["GETJOB", "TIMEOUT", "5000", "FROM", "rq"]);
    let r = w.try_read_reply(WAIT).expect("woken by the limiter");
    assert_eq!(r.array().len(), 1);
    assert!(
        t0.elapsed() >= Duration::from_millis(1000),
        "served {:?} after the window opened",
        t0.elapsed()
    );
    // A plain QSTAT of an unlimited queue is unchanged (no limit fields).
    assert!(c.cmd(&["QSTAT", "free"]).array().len() == 20);
}

#[test]
fn inflight_cap_counts_until_the_ack() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["QLIMIT", "cq", "INFLIGHT", "2"]),
        Reply::Status("OK".into())
    );
    for i in 0..3 {
        addjob(&mut c, "cq", &format!("j{i}"), &[]);
    }
    let got = ids(&c.cmd(&["GETJOB", "NOHANG", "COUNT", "10", "FROM", "cq"]));
    assert_eq!(got.len(), 2);
    let mut w = s.client();
    w.send(&["GETJOB", "TIMEOUT", "10000", "FROM", "cq"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    assert!(w.try_read_reply(Duration::from_millis(300)).is_none());
    assert_eq!(c.cmd(&["ACKJOB", &got[0]]).int(), 1);
    let r = w.try_read_reply(WAIT).expect("woken by the ACK");
    assert_eq!(r.array().len(), 1);
    // Removing the limit serves at once.
    assert_eq!(c.cmd(&["QLIMIT", "cq", "NONE"]), Reply::Status("OK".into()));
    assert_eq!(c.cmd(&["QLIMIT", "cq"]), Reply::NilBulk);
}

#[test]
fn qlimit_arguments_get_precise_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let rate =
        "ERR RATE needs a count between 1 and 1000000 and an interval between 1 and 86400000 ms";
    for bad in [
        vec!["RATE", "0", "1000"],
        vec!["RATE", "10", "0"],
        vec!["RATE", "x", "1000"],
        vec!["RATE", "10"],
        vec!["RATE", "1000001", "1"],
    ] {
        let mut args = vec!["QLIMIT", "q"];
        args.extend(bad);
        assert_eq!(c.cmd(&args), Reply::Error(rate.into()), "{args:?}");
    }
    assert_eq!(
        c.cmd(&["QLIMIT", "q", "INFLIGHT", "0"]),
        Reply::Error("ERR INFLIGHT must be between 1 and 1000000".into())
    );
    assert_eq!(
        c.cmd(&["QLIMIT", "q", "BOGUS"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["QLIMIT", "q", "NONE", "INFLIGHT", "3"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(c.cmd(&["QLIMIT", "q"]), Reply::NilBulk);
}

#[test]
fn limit_survives_a_restart() {
    let mut s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["QLIMIT", "pq", "RATE", "5", "2000", "INFLIGHT", "4"]),
        Reply::Status("OK".into())
    );
    let conf = s.dir().join("nodes.conf");
    assert!(wait_until(WAIT, POLL, || std::fs::read_to_string(&conf)
        .is_ok_and(|t| t.contains("qlimit "))));
    s.restart();
    let mut c = s.client();
    let r = c.cmd(&["QLIMIT", "pq"]);
    assert_eq!(r.field("rate").int(), 5);
    assert_eq!(r.field("interval").int(), 2000);
    assert_eq!(r.field("inflight").int(), 4);
}

#[test]
fn limit_reaches_every_node_and_shares_add_up() {
    let nodes = cluster(3);
    let mut c0 = nodes[0].client();
    assert_eq!(
        c0.cmd(&["QLIMIT", "sq", "RATE", "100", "1000", "INFLIGHT", "7"]),
        Reply::Status("OK".into())
    );
    let mut rate_shares = 0;
    let mut cap_shares = 0;
    for s in &nodes {
        let mut c = s.client();
        assert!(
            wait_until(WAIT, POLL, || c.cmd(&["QLIMIT", "sq"]) != Reply::NilBulk),
            "node {} never learned the limit",
            s.port()
        );
        let r = c.cmd(&["QLIMIT", "sq"]);
        assert_eq!(r.field("rate").int(), 100);
        rate_shares += r.field("rate-share").int();
        cap_shares += r.field("inflight-share").int();
    }
    assert_eq!(rate_shares, 100);
    assert_eq!(cap_shares, 7);
    // The newest setting wins everywhere, wherever it was made.
    let mut c2 = nodes[2].client();
    assert_eq!(
        c2.cmd(&["QLIMIT", "sq", "NONE"]),
        Reply::Status("OK".into())
    );
    for s in &nodes {
        let mut c = s.client();
        assert!(wait_until(WAIT, POLL, || c.cmd(&["QLIMIT", "sq"]) == Reply::NilBulk));
    }
}

#[test]
fn dashboard_queue_list_shows_the_limit() {
    let s = crate::observe::http_node(&[]);
    let mut c = s.client();
    addjob(&mut c, "plain", "x", &[]);
    addjob(&mut c, "lim", "x", &[]);
    assert_eq!(
        c.cmd(&["QLIMIT", "lim", "RATE", "10", "500", "INFLIGHT", "3"]),
        Reply::Status("OK".into())
    );
    let (st, body) = crate::observe::get(s.http_port(), "/api/queues");
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let q = |name: &str| {
        v["queues"]
            .as_array()
            .and_then(|a| a.iter().find(|q| q["name"] == name).cloned())
            .expect("queue listed")
    };
    assert!(q("plain")["limit"].is_null());
    let l = &q("lim")["limit"];
    assert_eq!(l["rate"], 10);
    assert_eq!(l["interval_ms"], 500);
    assert_eq!(l["inflight"], 3);
    assert_eq!(l["rate_share"], 10);
}
