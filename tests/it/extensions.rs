//! Our opt-in extensions (docs/COMPATIBILITY.md) with real processes:
//! BACKOFF and NACK DELAY, dead letters and REDRIVE, DEDUP, WAITJOB and
//! QLEN CLUSTER, on one node and on clusters, across AOF restarts.

use std::time::{Duration, Instant};

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server};
use crate::util::{addjob, wait_qlen, POLL, WAIT};

fn getjob_id(c: &mut Client, queue: &str) -> String {
    let r = c.cmd(&["GETJOB", "TIMEOUT", "10000", "FROM", queue]);
    assert!(!r.is_nil(), "GETJOB {queue} timed out");
    r.array()[0].array()[1].text()
}

fn requeue_within(c: &mut Client, id: &str) -> i64 {
    c.cmd(&["SHOW", id]).field("next-requeue-within").int()
}

#[test]
fn plain_jobs_keep_disque_show_and_nack() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "q", "b", &["RETRY", "30"]);
    assert_eq!(c.cmd(&["SHOW", &id]).array().len(), 30);
    getjob_id(&mut c, "q");
    assert_eq!(c.cmd(&["NACK", &id]).int(), 1);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 1, "plain NACK queues at once");
    assert_eq!(c.cmd(&["SHOW", &id]).field("nacks").int(), 1);
}

#[test]
fn backoff_doubles_the_requeue_period() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "bq", "b", &["RETRY", "1", "BACKOFF", "60"]);
    let show = c.cmd(&["SHOW", &id]);
    assert!(show.array().len() > 30);
    assert_eq!(show.field("backoff").int(), 60);
    getjob_id(&mut c, "bq");
    // First delivery: one RETRY, then re-queued by the timer.
    let t0 = Instant::now();
    assert!(wait_qlen(&mut c, "bq", 1));
    assert!(t0.elapsed() < Duration::from_millis(2500));
    assert_eq!(
        c.cmd(&["SHOW", &id]).field("additional-deliveries").int(),
        1
    );
    getjob_id(&mut c, "bq");
    // Second delivery: 2 x RETRY.
    let w = requeue_within(&mut c, &id);
    assert!((1200..=2300).contains(&w), "second period {w} ms");
    let t1 = Instant::now();
    assert!(wait_qlen(&mut c, "bq", 1));
    assert!(
        t1.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t1.elapsed()
    );
    getjob_id(&mut c, "bq");
    let w = requeue_within(&mut c, &id);
    assert!((3200..=4300).contains(&w), "third period {w} ms");
}

#[test]
fn nack_delay_requeues_later_and_counts_a_nack() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "nq", "b", &["RETRY", "30"]);
    getjob_id(&mut c, "nq");
    let t0 = Instant::now();
    assert_eq!(c.cmd(&["NACK", &id, "DELAY", "2"]).int(), 1);
    assert_eq!(c.cmd(&["QLEN", "nq"]).int(), 0);
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(show.field("state").text(), "active");
    let w = show.field("next-requeue-within").int();
    assert!((1500..=2000).contains(&w), "{w}");
    assert!(wait_qlen(&mut c, "nq", 1));
    assert!(
        t0.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(c.cmd(&["SHOW", &id]).field("nacks").int(), 1);
    // DELAY 0 is a plain NACK.
    getjob_id(&mut c, "nq");
    assert_eq!(c.cmd(&["NACK", &id, "DELAY", "0"]).int(), 1);
    assert_eq!(c.cmd(&["QLEN", "nq"]).int(), 1);
}

#[test]
fn nack_of_a_backoff_job_waits_its_current_backoff() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "nb", "b", &["RETRY", "2", "BACKOFF", "100"]);
    getjob_id(&mut c, "nb");
    assert_eq!(c.cmd(&["NACK", &id]).int(), 1);
    assert_eq!(c.cmd(&["QLEN", "nb"]).int(), 0);
    let w = requeue_within(&mut c, &id);
    assert!((1500..=2000).contains(&w), "{w}");
    assert!(wait_qlen(&mut c, "nb", 1));
    assert_eq!(c.cmd(&["SHOW", &id]).field("nacks").int(), 1);
    getjob_id(&mut c, "nb");
    assert_eq!(c.cmd(&["NACK", &id]).int(), 1);
    let w = requeue_within(&mut c, &id);
    assert!((3500..=4000).contains(&w), "{w}");
}

#[test]
fn extension_arguments_get_precise_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let cases: &[(&[&str], &str)] = &[
        (
            &["BACKOFF", "0"],
            "ERR BACKOFF must be a positive number of seconds",
        ),
        (
            &["BACKOFF", "x"],
            "ERR BACKOFF must be a positive number of seconds",
        ),
        (
            &["MAXDELIVERIES", "0"],
            "ERR MAXDELIVERIES must be between 1 and 65535",
        ),
        (
            &["MAXDELIVERIES", "65536"],
            "ERR MAXDELIVERIES must be between 1 and 65535",
        ),
        (
            &["DEADLETTER", "d"],
            "ERR DEADLETTER requires MAXDELIVERIES",
        ),
        (
            &["MAXDELIVERIES", "2", "DEADLETTER", "q"],
            "ERR DEADLETTER queue must differ from the job's queue",
        ),
        (
            &["MAXDELIVERIES", "2", "DEADLETTER", ""],
            "ERR DEADLETTER queue name must not be empty",
        ),
        (&["DEDUP", ""], "ERR DEDUP key must not be empty"),
        (
            &["RETRY", "0", "REPLICATE", "1", "BACKOFF", "5"],
            "ERR BACKOFF and MAXDELIVERIES need RETRY > 0 (at-least-once delivery)",
        ),
        (&["BACKOFF"], "ERR syntax error"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["ADDJOB", "q", "b", "0"];
        args.extend_from_slice(extra);
        assert_eq!(c.cmd(&args), Reply::Error((*want).into()), "{extra:?}");
    }
    let id = addjob(&mut c, "q", "b", &[]);
    assert_eq!(
        c.cmd(&["NACK", &id, "DELAY", "-1"]),
        Reply::Error("ERR NACK DELAY must be a non negative number of seconds".into())
    );
    assert_eq!(
        c.cmd(&["NACK", &id, "DELAY", "soon"]),
        Reply::Error("ERR NACK DELAY must be a non negative number of seconds".into())
    );
    assert!(
        c.cmd(&["NACK", &id, "DELAY"]).is_error(),
        "DELAY is not an ID"
    );
}

fn ext_fields(c: &mut Client, id: &str) -> (i64, i64, String) {
    let s = c.cmd(&["SHOW", id]);
    (
        s.field("backoff").int(),
        s.field("max-deliveries").int(),
        s.field("dead-letter-queue").text(),
    )
}

#[test]
fn extension_fields_survive_aof_reload_rewrite_and_restart() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    let id = addjob(
        &mut c,
        "aq",
        "b",
        &[
            "RETRY",
            "5",
            "BACKOFF",
            "40",
            "MAXDELIVERIES",
            "3",
            "DEADLETTER",
            "graveyard",
        ],
    );
    let plain = addjob(&mut c, "aq", "p", &[]);
    let want = (40, 3, "graveyard".to_string());
    assert_eq!(ext_fields(&mut c, &id), want);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), Reply::Status("OK".into()));
    assert_eq!(ext_fields(&mut c, &id), want);
    assert_eq!(c.cmd(&["SHOW", &plain]).array().len(), 30);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(ext_fields(&mut c, &id), want);
    assert!(c.cmd(&["BGREWRITEAOF"]).text().contains("started"));
    assert!(wait_until(WAIT, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"));
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(ext_fields(&mut c, &id), want);
    assert_eq!(c.cmd(&["SHOW", &plain]).array().len(), 30);
    // JSCAN REPLY ALL shows the same fields.
    let scan = c.cmd(&["JSCAN", "BUSYLOOP", "REPLY", "ALL"]);
    let jobs = scan.array()[1].array();
    let ours = jobs
        .iter()
        .find(|j| j.field("id").text() == id)
        .expect("job in JSCAN");
    assert_eq!(ours.field("max-deliveries").int(), 3);
}
