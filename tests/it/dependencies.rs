//! ADDJOB AFTER / ONFAIL (docs/COMMANDS.md#addjob) with real processes:
//! a job held, not queued, until its dependency is acknowledged (SHOW,
//! QLEN, QSTAT and INFO while it waits), the failure policies when the
//! dependency is cancelled, a batch dependency, a waiting job surviving a
//! restart with the AOF, and a 3-node cluster where the dependency is
//! acknowledged on another node than the one holding the dependent.

use std::time::Duration;

use crate::cluster::cluster;
use crate::harness::{wait_until, Client, ReplyExt, Server};

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

fn state(c: &mut Client, id: &str) -> String {
    let r = c.cmd(&["SHOW", id]);
    if r.is_nil() {
        return "gone".into();
    }
    r.field("state").text()
}

/// GETJOB NOHANG from `queue`: the IDs delivered.
fn take(c: &mut Client, queue: &str) -> Vec<String> {
    let r = c.cmd(&["GETJOB", "NOHANG", "COUNT", "100", "FROM", queue]);
    if r.is_nil() {
        return Vec::new();
    }
    r.array().iter().map(|j| j.array()[1].text()).collect()
}

#[test]
fn a_job_waits_until_its_dependency_is_acked() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = c.cmd(&["ADDJOB", "q", "first", "0"]).text();
    let b = c.cmd(&["ADDJOB", "q", "second", "0", "AFTER", &a]).text();
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 1);
    let show = c.cmd(&["SHOW", &b]);
    assert_eq!(show.field("state").text(), "waiting");
    assert_eq!(show.field("after").array()[0].text(), a);
    assert_eq!(show.field("on-fail").text(), "cancel");
    assert_eq!(c.info_int("jobs_waiting"), 1);
    assert_eq!(c.cmd(&["QSTAT", "q"]).field("jobs-waiting").int(), 1);
    // Only the dependency is delivered.
    assert_eq!(take(&mut c, "q"), vec![a.clone()]);
    assert!(take(&mut c, "q").is_empty());
    c.cmd(&["ACKJOB", &a]);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "q"]).int() == 1));
    assert_eq!(state(&mut c, &b), "queued");
    assert_eq!(take(&mut c, "q"), vec![b]);
    assert_eq!(c.info_int("jobs_waiting"), 0);
    assert_eq!(c.info_int("jobs_released"), 1);
    // A plain QSTAT is Disque's reply again.
    assert!(c.cmd(&["QSTAT", "q"]).get("jobs-waiting").is_none());
}

#[test]
fn a_cancelled_dependency_applies_onfail() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = c.cmd(&["ADDJOB", "dep", "a", "0"]).text();
    let cancel = c.cmd(&["ADDJOB", "w", "b", "0", "AFTER", &a]).text();
    let run = c
        .cmd(&["ADDJOB", "w", "c", "0", "AFTER", &a, "ONFAIL", "RUN"])
        .text();
    let dead = c
        .cmd(&["ADDJOB", "w", "d", "0", "AFTER", &a, "ONFAIL", "DEADLETTER"])
        .text();
    assert_eq!(c.cmd(&["CANCEL", &a]).int(), 1);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "w"]).int() == 1));
    assert_eq!(take(&mut c, "w"), vec![run]);
    assert_eq!(c.cmd(&["QLEN", "w:dead"]).int(), 1);
    assert_eq!(take(&mut c, "w:dead"), vec![dead]);
    // The default: cancelled, and WAITJOB says so.
    assert_eq!(state(&mut c, &cancel), "gone");
    assert_eq!(c.info_int("jobs_dependency_failed"), 2);
    // An ID no node knows fails at once on a single node.
    let ghost = "D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1";
    let g = c
        .cmd(&["ADDJOB", "w", "e", "0", "AFTER", ghost, "ONFAIL", "RUN"])
        .text();
    assert!(wait_until(WAIT, POLL, || state(&mut c, &g) == "queued"));
}

#[test]
fn a_batch_dependency_waits_for_the_whole_batch() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["ADDJOB", "next", "x", "0", "AFTER", "nope"]).text(),
        "NOBATCH No such batch"
    );
    c.cmd(&["BATCH", "CREATE", "b"]);
    let m1 = c.cmd(&["ADDJOB", "work", "1", "0", "BATCH", "b"]).text();
    let m2 = c.cmd(&["ADDJOB", "work", "2", "0", "BATCH", "b"]).text();
    c.cmd(&["BATCH", "COMMIT", "b"]);
    let n = c.cmd(&["ADDJOB", "next", "x", "0", "AFTER", "b"]).text();
    assert_eq!(state(&mut c, &n), "waiting");
    c.cmd(&["ACKJOB", &m1]);
    assert!(!wait_until(Duration::from_millis(500), POLL, || c
        .cmd(&["QLEN", "next"])
        .int()
        > 0));
    c.cmd(&["ACKJOB", &m2]);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "next"]).int() == 1));
    assert_eq!(take(&mut c, "next"), vec![n]);
}

#[test]
fn a_waiting_job_survives_a_restart_with_the_aof() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    let a = c.cmd(&["ADDJOB", "q", "a", "0"]).text();
    let b = c.cmd(&["ADDJOB", "w", "b", "0", "AFTER", &a]).text();
    s.restart();
    let mut c = s.client();
    assert_eq!(state(&mut c, &b), "waiting");
    assert_eq!(c.cmd(&["QLEN", "w"]).int(), 0);
    c.cmd(&["ACKJOB", &a]);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "w"]).int() == 1));
    // Released is kept too: it does not wait again after a restart (it
    // comes back active, queued again by its retry timer as any job).
    s.restart();
    let mut c = s.client();
    assert_eq!(state(&mut c, &b), "active");
    assert_eq!(c.info_int("jobs_waiting"), 0);
}

#[test]
fn a_dependency_acked_on_another_node_releases_the_job() {
    let nodes = cluster(3);
    let mut clients: Vec<Client> = nodes.iter().map(Server::client).collect();
    // The dependency lives on node 0 only.
    let a = clients[0]
        .cmd(&["ADDJOB", "q", "a", "0", "REPLICATE", "1"])
        .text();
    // The dependent is added through node 1 and copied to one more node.
    let b = clients[1]
        .cmd(&["ADDJOB", "w", "b", "5000", "REPLICATE", "2", "AFTER", &a])
        .text();
    assert!(crate::harness::is_job_id(&b), "{b}");
    assert_eq!(state(&mut clients[1], &b), "waiting");
    // Not delivered anywhere while the dependency is pending.
    assert!(!wait_until(Duration::from_secs(2), POLL, || clients
        .iter_mut()
        .any(|c| c.cmd(&["QLEN", "w"]).int() > 0)));
    assert_eq!(take(&mut clients[0], "q"), vec![a.clone()]);
    // Acknowledged through node 2, which never held it.
    clients[2].cmd(&["ACKJOB", &a]);
    let mut got = Vec::new();
    let ok = wait_until(WAIT, POLL, || {
        for c in clients.iter_mut() {
            got.extend(take(c, "w"));
        }
        !got.is_empty()
    });
    assert!(ok, "the dependent was never released");
    assert_eq!(got, vec![b]);
}

#[test]
fn the_dashboard_shows_waiting_jobs_per_queue() {
    use crate::observe::{http, http_node};
    let s = http_node(&[]);
    let mut c = s.client();
    let a = c.cmd(&["ADDJOB", "q", "first", "0"]).text();
    c.cmd(&["ADDJOB", "q", "second", "0", "AFTER", &a]).text();
    let queue = |s: &Server| {
        let (st, body) = http(s.http_port(), "GET", "/api/queues", &[], "");
        assert_eq!(st, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        v["queues"][0].clone()
    };
    let q = queue(&s);
    assert_eq!(q["name"], "q");
    assert_eq!(q["len"], 1);
    assert_eq!(q["waiting"], 1);
    c.cmd(&["ACKJOB", &a]);
    assert!(wait_until(WAIT, POLL, || queue(&s)["waiting"] == 0));
    assert_eq!(queue(&s)["len"], 1);
}
