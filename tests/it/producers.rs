//! Producers that wait for room (docs/COMMANDS.md#addjob, `MAXLEN <n> WAIT <ms>`):
//! blocking on a full queue, resuming when a consumer frees a slot, the
//! timeout, disconnects, arrival order, and what QSTAT, INFO and /metrics
//! show.

use std::time::{Duration, Instant};

use crate::harness::{is_job_id, wait_until, Client, Reply, ReplyExt, Server};
use crate::observe::{http_node, scrape, value};
use crate::util::{addjob, assert_bytes, error, POLL, WAIT};

const MAXLEN_ERR: &str = "MAXLEN Queue is already longer than the specified MAXLEN count";

/// Long enough to see that a blocked client got nothing, short enough to
/// keep the tests quick (a read timeout on its socket, not a sleep).
const STILL_BLOCKED: Duration = Duration::from_millis(150);

/// Producers waiting on `queue` as QSTAT shows them (absent = 0).
fn waiting(c: &mut Client, queue: &str) -> i64 {
    let r = c.cmd(&["QSTAT", queue]);
    r.get("producers-waiting").map_or(0, ReplyExt::int)
}

/// Send a waiting ADDJOB from a fresh connection and return once the
/// server counts it among the waiting producers (`n` in all on `queue`).
fn blocked_producer(s: &Server, obs: &mut Client, queue: &str, body: &str, n: i64) -> Client {
    let mut p = s.client();
    p.send(&["ADDJOB", queue, body, "0", "MAXLEN", "1", "WAIT", "0"]);
    assert!(
        wait_until(WAIT, POLL, || waiting(obs, queue) == n),
        "producer {body} never counted as waiting"
    );
    assert_eq!(p.try_read_reply(STILL_BLOCKED), None, "{body} not blocked");
    p
}

fn getjob_body(c: &mut Client, queue: &str) -> String {
    let r = c.cmd(&["GETJOB", "NOHANG", "FROM", queue]);
    let jobs = r.array();
    assert_eq!(jobs.len(), 1, "{r:?}");
    jobs[0].array()[2].text()
}

#[test]
fn a_blocked_producer_resumes_right_after_a_getjob() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "q", "a", &[]);
    addjob(&mut c, "q", "b", &[]);
    let mut p = s.client();
    p.send(&["ADDJOB", "q", "p", "0", "MAXLEN", "2", "WAIT", "0"]);
    assert!(wait_until(WAIT, POLL, || waiting(&mut c, "q") == 1));
    assert_eq!(p.try_read_reply(STILL_BLOCKED), None, "answered while full");
    assert_eq!(c.info_int("blocked_clients"), 1);

    let start = Instant::now();
    assert_eq!(getjob_body(&mut c, "q"), "a");
    let reply = p.try_read_reply(WAIT).expect("producer resumed");
    let took = start.elapsed();
    let Reply::Status(id) = &reply else {
        panic!("{reply:?}")
    };
    assert!(is_job_id(id), "{id}");
    // Woken by the GETJOB's own turn (typically well under 10 ms); the
    // bound leaves room for a loaded machine.
    assert!(took < Duration::from_millis(250), "{took:?}");
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 2);
    assert_eq!(waiting(&mut c, "q"), 0);
    assert_eq!(getjob_body(&mut c, "q"), "b");
    let r = c.cmd(&["GETJOB", "NOHANG", "FROM", "q"]);
    assert_eq!(r.array()[0].array()[1].text(), *id);
    // The connection goes on as usual.
    assert_bytes(&p.cmd_raw(&["PING"]), b"+PONG\r\n");
}

#[test]
fn without_wait_maxlen_fails_at_once_and_wait_times_out_with_the_same_error() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "q", "a", &[]);
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "q", "x", "0", "MAXLEN", "1"]),
        &error(MAXLEN_ERR),
    );
    let start = Instant::now();
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "q", "x", "0", "MAXLEN", "1", "WAIT", "300"]),
        &error(MAXLEN_ERR),
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 1);
    assert_eq!(c.info_int("producers_waiting"), 0);
    assert_eq!(c.info_int("producer_timeouts"), 1);
    // Room at once: WAIT changes nothing.
    addjob(&mut c, "q", "b", &["MAXLEN", "2", "WAIT", "100"]);
}

#[test]
fn wait_syntax_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "q", "x", "0", "WAIT", "100"]),
        &error("ERR WAIT requires MAXLEN (the queue length to wait below)"),
    );
    for bad in ["-1", "abc", ""] {
        assert_bytes(
            &c.cmd_raw(&["ADDJOB", "q", "x", "0", "MAXLEN", "1", "WAIT", bad]),
            &error("ERR WAIT must be 0 (wait forever) or a positive number of milliseconds"),
        );
    }
    assert_bytes(
        &c.cmd_raw(&["ADDJOB", "q", "x", "0", "MAXLEN", "1", "WAIT"]),
        &error("ERR syntax error"),
    );
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
}

#[test]
fn a_producer_that_disconnects_while_waiting_leaves_nothing() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "q", "a", &[]);
    let gone = blocked_producer(&s, &mut c, "q", "gone", 1);
    drop(gone);
    assert!(wait_until(WAIT, POLL, || c.info_int("producers_waiting") == 0));
    assert_eq!(waiting(&mut c, "q"), 0);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 1);
    assert_eq!(c.info_int("blocked_clients"), 0);

    let mut next = blocked_producer(&s, &mut c, "q", "next", 1);
    assert_eq!(getjob_body(&mut c, "q"), "a");
    let r = next.try_read_reply(WAIT).expect("next producer served");
    assert!(is_job_id(&r.text()), "{r:?}");
    assert_eq!(getjob_body(&mut c, "q"), "next");
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
}

#[test]
fn many_producers_are_served_in_arrival_order() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "q", "first", &[]);
    let mut producers: Vec<Client> = (0..5)
        .map(|i| blocked_producer(&s, &mut c, "q", &format!("p{i}"), i + 1))
        .collect();
    let mut expect = "first".to_string();
    for i in 0..5 {
        assert_eq!(getjob_body(&mut c, "q"), expect);
        // Exactly one producer per freed slot: the next in line.
        let r = producers[i].try_read_reply(WAIT).expect("served");
        assert!(is_job_id(&r.text()), "{r:?}");
        if let Some(later) = producers.get_mut(i + 1) {
            assert_eq!(
                later.try_read_reply(STILL_BLOCKED),
                None,
                "p{} early",
                i + 1
            );
        }
        assert_eq!(waiting(&mut c, "q"), 4 - i as i64);
        expect = format!("p{i}");
    }
    assert_eq!(getjob_body(&mut c, "q"), "p4");
}

#[test]
fn qstat_info_and_metrics_count_waiting_producers() {
    let s = http_node(&[]);
    let mut c = s.client();
    // Disque's QSTAT layout while nobody waits.
    addjob(&mut c, "q", "a", &[]);
    assert_eq!(c.cmd(&["QSTAT", "q"]).array().len(), 20);
    let mut p = blocked_producer(&s, &mut c, "q", "p", 1);
    let r = c.cmd(&["QSTAT", "q"]);
    let a = r.array();
    assert_eq!(a.len(), 22);
    assert_eq!(a[20].text(), "producers-waiting");
    assert_eq!(a[21], Reply::Int(1));
    assert_eq!(c.info_int("producers_waiting"), 1);
    let m = scrape(s.http_port());
    assert_eq!(value(&m, "disque_producers_waiting", &[]), Some(1.0));
    assert_eq!(value(&m, "disque_producer_waits_total", &[]), Some(1.0));

    assert_eq!(getjob_body(&mut c, "q"), "a");
    assert!(p.try_read_reply(WAIT).is_some());
    let m = scrape(s.http_port());
    assert_eq!(value(&m, "disque_producers_waiting", &[]), Some(0.0));
    let secs = value(&m, "disque_producer_wait_seconds_total", &[]).expect("wait time");
    // It waited at least STILL_BLOCKED (its socket was polled that long).
    assert!(secs >= 0.1, "{secs}");
    assert_eq!(c.info_int("producer_waits"), 1);
}
