//! Our opt-in extensions (docs/COMPATIBILITY.md) with real processes:
//! BACKOFF and NACK DELAY, dead letters and REDRIVE, DEDUP, WAITJOB and
//! QLEN CLUSTER, on one node and on clusters, across AOF restarts.

use std::time::{Duration, Instant};

use crate::cluster::cluster;
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

fn nack_until_dead(c: &mut Client, queue: &str, id: &str, deliveries: usize) {
    for _ in 0..deliveries {
        assert_eq!(getjob_id(c, queue), id);
        assert_eq!(c.cmd(&["NACK", id]).int(), 1);
    }
}

#[test]
fn dead_letters_and_redrive_on_one_node() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(&mut c, "work", "b", &["RETRY", "60", "MAXDELIVERIES", "3"]);
    let other = addjob(&mut c, "elsewhere", "x", &["RETRY", "60"]);
    nack_until_dead(&mut c, "work", &id, 3);
    // Third delivery NACKed: dead, in the default dead-letter queue.
    assert_eq!(c.cmd(&["QLEN", "work"]).int(), 0);
    assert_eq!(c.cmd(&["QLEN", "work:dead"]).int(), 1);
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(show.field("queue").text(), "work:dead");
    assert_eq!(show.field("state").text(), "queued");
    assert_eq!(show.field("origin-queue").text(), "work");
    assert_eq!(show.field("dead").int(), 1);
    assert_eq!(show.field("deliveries").int(), 3);
    assert_eq!(c.cmd(&["WAITJOB", &id]), Reply::Status("dead".into()));
    // An ordinary queue: QPEEK, JSCAN QUEUE.
    assert_eq!(c.cmd(&["QPEEK", "work:dead", "1"]).array().len(), 1);
    let scan = c.cmd(&["JSCAN", "BUSYLOOP", "QUEUE", "work:dead"]);
    assert_eq!(scan.array()[1].array().len(), 1);
    // REDRIVE by ID: back in "work", counters reset.
    assert_eq!(
        c.cmd(&["REDRIVE", &id, &other]).int(),
        1,
        "only dead jobs move"
    );
    assert_eq!(c.cmd(&["QLEN", "work:dead"]).int(), 0);
    assert_eq!(c.cmd(&["QLEN", "work"]).int(), 1);
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(show.field("queue").text(), "work");
    assert_eq!(show.field("nacks").int(), 0);
    assert_eq!(show.field("dead").int(), 0);
    assert!(show.field("origin-queue").is_nil());
    // Dies again after three more deliveries, then REDRIVE FROM.
    nack_until_dead(&mut c, "work", &id, 3);
    assert_eq!(c.cmd(&["QLEN", "work:dead"]).int(), 1);
    assert_eq!(
        c.cmd(&["REDRIVE", "FROM", "work:dead", "COUNT", "10"])
            .int(),
        1
    );
    assert_eq!(c.cmd(&["QLEN", "work"]).int(), 1);
    // A dead job can be consumed and acked from its dead-letter queue.
    nack_until_dead(&mut c, "work", &id, 3);
    assert_eq!(getjob_id(&mut c, "work:dead"), id);
    assert_eq!(c.cmd(&["ACKJOB", &id]).int(), 1);
    assert_eq!(c.cmd(&["REDRIVE", "FROM", "work:dead"]).int(), 0);
    // Errors.
    assert_eq!(
        c.cmd(&["REDRIVE", "FROM", "work:dead", "COUNT", "0"]),
        Reply::Error("ERR COUNT must be a number greater than zero".into())
    );
    assert_eq!(
        c.cmd(&["REDRIVE", "FROM"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["REDRIVE", "nope"]),
        Reply::Error("BADID Invalid Job ID format.".into())
    );
}

#[test]
fn deadletter_option_names_the_queue_and_timer_requeues_count() {
    let s = Server::start_default();
    let mut c = s.client();
    let id = addjob(
        &mut c,
        "tq",
        "b",
        &["RETRY", "1", "MAXDELIVERIES", "2", "DEADLETTER", "graves"],
    );
    // Never acked: the retry timer re-queues once, then dead-letters.
    getjob_id(&mut c, "tq");
    assert!(wait_qlen(&mut c, "tq", 1));
    getjob_id(&mut c, "tq");
    assert!(wait_qlen(&mut c, "graves", 1));
    assert_eq!(c.cmd(&["QLEN", "tq"]).int(), 0);
    assert_eq!(c.cmd(&["SHOW", &id]).field("origin-queue").text(), "tq");
}

#[test]
fn waitjob_replies_on_ack_delete_expiry_and_timeout() {
    let s = Server::start_default();
    let mut c = s.client();
    let mut w = s.client();
    let id = addjob(&mut c, "wq", "b", &[]);
    w.send(&["WAITJOB", &id]);
    assert!(w.try_read_reply(Duration::from_millis(200)).is_none());
    assert!(c
        .cmd(&["INFO", "clients"])
        .text()
        .contains("blocked_clients:1"));
    assert_eq!(c.cmd(&["ACKJOB", &id]).int(), 1);
    assert_eq!(w.read_reply(), Reply::Status("acked".into()));
    let id = addjob(&mut c, "wq", "b", &[]);
    w.send(&["WAITJOB", &id, "TIMEOUT", "0"]);
    assert!(w.try_read_reply(Duration::from_millis(100)).is_none());
    assert_eq!(c.cmd(&["DELJOB", &id]).int(), 1);
    assert_eq!(w.read_reply(), Reply::Status("deleted".into()));
    let id = addjob(&mut c, "wq", "b", &["TTL", "1"]);
    w.send(&["WAITJOB", &id]);
    assert_eq!(w.read_reply(), Reply::Status("expired".into()));
    let id = addjob(&mut c, "wq", "b", &[]);
    let t0 = Instant::now();
    assert!(w.cmd(&["WAITJOB", &id, "TIMEOUT", "150"]).is_nil());
    assert!(t0.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        w.cmd(&["WAITJOB", "D-00000000-000000000000000000000000-0001"]),
        Reply::Error("NOJOB Job not known in the context of this node.".into())
    );
    assert_eq!(
        w.cmd(&["WAITJOB", "bad"]),
        Reply::Error("BADID Invalid Job ID format.".into())
    );
    assert_eq!(
        w.cmd(&["WAITJOB", &id, "TIMEOUT", "-1"]),
        Reply::Error("ERR timeout is negative".into())
    );
    assert_eq!(
        w.cmd(&["WAITJOB", &id, "LATER", "1"]),
        Reply::Error("ERR syntax error".into())
    );
}

#[test]
fn dedup_returns_the_first_id_also_after_ack_and_restart() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    let id = addjob(&mut c, "dq", "b", &["DEDUP", "order-1"]);
    assert_eq!(
        addjob(&mut c, "dq", "other body", &["DEDUP", "order-1"]),
        id
    );
    assert_eq!(c.cmd(&["QLEN", "dq"]).int(), 1);
    assert_eq!(c.cmd(&["SHOW", &id]).field("dedup-key").text(), "order-1");
    // Same key, other queue: a different job.
    assert_ne!(addjob(&mut c, "dq2", "b", &["DEDUP", "order-1"]), id);
    assert_eq!(getjob_id(&mut c, "dq"), id);
    assert_eq!(c.cmd(&["ACKJOB", &id]).int(), 1);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["SHOW", &id]).is_nil()));
    assert_eq!(addjob(&mut c, "dq", "b", &["DEDUP", "order-1"]), id);
    assert_eq!(c.cmd(&["QLEN", "dq"]).int(), 0);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(addjob(&mut c, "dq", "b", &["DEDUP", "order-1"]), id);
    assert!(c.cmd(&["BGREWRITEAOF"]).text().contains("started"));
    assert!(wait_until(WAIT, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"
        && c.info_field("aof_rewrite_scheduled") == "0"));
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(addjob(&mut c, "dq", "b", &["DEDUP", "order-1"]), id);
    assert_eq!(c.cmd(&["QLEN", "dq"]).int(), 0);
}

#[test]
fn dedup_window_expires_keys() {
    let s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--dedup-window",
        "1",
    ]));
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "dedup-window"]).array()[1].text(),
        "1"
    );
    let id = addjob(&mut c, "xq", "b", &["DEDUP", "k"]);
    assert_eq!(addjob(&mut c, "xq", "b", &["DEDUP", "k"]), id);
    assert!(wait_until(WAIT, POLL, || addjob(
        &mut c,
        "xq",
        "b",
        &["DEDUP", "k"]
    ) != id));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dedup-window", "600"]),
        Reply::Status("OK".into())
    );
    assert!(c.cmd(&["CONFIG", "SET", "dedup-window", "0"]).is_error());
}

#[test]
fn qlen_cluster_on_a_single_node_is_qlen() {
    let s = Server::start_default();
    let mut c = s.client();
    addjob(&mut c, "cq", "b", &[]);
    assert_eq!(c.cmd(&["QLEN", "cq", "CLUSTER"]).int(), 1);
    assert_eq!(
        c.cmd(&["QSTAT", "cq", "CLUSTER"])
            .field("len-cluster")
            .int(),
        1
    );
    assert_eq!(c.cmd(&["QSTAT", "cq"]).array().len(), 20);
    assert_eq!(
        c.cmd(&["QLEN", "cq", "NODES"]),
        Reply::Error("ERR wrong number of arguments for 'qlen' command".into())
    );
    assert_eq!(
        c.cmd(&["QSTAT", "cq", "a", "b"]),
        Reply::Error("ERR wrong number of arguments for 'qstat' command".into())
    );
    let info = c.cmd(&["COMMAND", "INFO", "waitjob", "redrive"]);
    assert_eq!(info.array()[0].array()[0].text(), "waitjob");
    assert_eq!(info.array()[1].array()[0].text(), "redrive");
}

/// Wait until every frame node `from` sent on its current link to `to`
/// has been processed by `to`: links are ordered, so a PAUSE broadcast
/// sent afterwards arriving means everything before it arrived. The PAUSE
/// is re-sent while it does not arrive (a broadcast skips a peer whose
/// link is still down).
fn bus_barrier(from: &mut Client, to: &mut Client, tag: &str) {
    assert!(wait_until(WAIT, POLL, || {
        from.cmd(&["PAUSE", tag, "in", "bcast"]);
        to.cmd(&["PAUSE", tag, "state"]) == Reply::Status("in".into())
    }));
}

#[test]
fn dead_letter_decided_on_a_node_other_than_the_origin() {
    let nodes = cluster(3);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let id = addjob(
        &mut c[0],
        "dlq",
        "b",
        &["REPLICATE", "3", "RETRY", "2", "MAXDELIVERIES", "2"],
    );
    assert_eq!(getjob_id(&mut c[0], "dlq"), id);
    // Nacked on node 1 (a replica): queued there, counted everywhere.
    assert_eq!(c[1].cmd(&["NACK", &id]).int(), 1);
    assert_eq!(getjob_id(&mut c[1], "dlq"), id);
    assert_eq!(c[1].cmd(&["NACK", &id]).int(), 1);
    // Node 1 decided; every holder learns it is dead.
    for (i, cl) in c.iter_mut().enumerate() {
        assert!(
            wait_until(WAIT, POLL, || cl.cmd(&["SHOW", &id]).field("dead").int()
                == 1),
            "node {i} never saw the job dead"
        );
        assert_eq!(cl.cmd(&["SHOW", &id]).field("queue").text(), "dlq:dead");
    }
    // Several retry periods: no holder queues it in "dlq" again, and it
    // stays queued in the dead-letter queue on exactly one node.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let live: i64 = c.iter_mut().map(|cl| cl.cmd(&["QLEN", "dlq"]).int()).sum();
        assert_eq!(live, 0, "dead job queued in its original queue");
        std::thread::sleep(Duration::from_millis(100));
    }
    let dead: i64 = c
        .iter_mut()
        .map(|cl| cl.cmd(&["QLEN", "dlq:dead"]).int())
        .sum();
    assert_eq!(dead, 1);
    // REDRIVE on the node that holds it queued: back in "dlq" everywhere.
    let holder = (0..3)
        .find(|&i| c[i].cmd(&["QLEN", "dlq:dead"]).int() == 1)
        .expect("one holder");
    assert_eq!(c[holder].cmd(&["REDRIVE", "FROM", "dlq:dead"]).int(), 1);
    for cl in c.iter_mut() {
        assert!(wait_until(WAIT, POLL, || {
            let s = cl.cmd(&["SHOW", &id]);
            s.field("dead").int() == 0 && s.field("queue").text() == "dlq"
        }));
    }
    assert_eq!(c[holder].cmd(&["QLEN", "dlq"]).int(), 1);
}

#[test]
fn waitjob_is_woken_by_an_ack_on_another_node() {
    let nodes = cluster(3);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let id = addjob(&mut c[0], "wq", "b", &["REPLICATE", "3"]);
    let mut w = nodes[2].client();
    w.send(&["WAITJOB", &id, "TIMEOUT", "20000"]);
    assert!(w.try_read_reply(Duration::from_millis(200)).is_none());
    assert_eq!(c[1].cmd(&["ACKJOB", &id]).int(), 1);
    let r = w.try_read_reply(WAIT).expect("WAITJOB woken");
    assert_eq!(r, Reply::Status("acked".into()));
}

#[test]
fn dedup_retry_on_another_node_returns_the_first_id() {
    let nodes = cluster(3);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    // REPLICATE 1: node 2 holds no copy and learns the key from the
    // DEDUP broadcast alone.
    let id = addjob(&mut c[0], "dd", "b", &["REPLICATE", "1", "DEDUP", "k1"]);
    let (a, b) = c.split_at_mut(2);
    bus_barrier(&mut a[0], &mut b[0], "barrier-1");
    assert_eq!(
        addjob(&mut c[2], "dd", "b", &["REPLICATE", "1", "DEDUP", "k1"]),
        id
    );
    assert_eq!(c[2].cmd(&["QLEN", "dd"]).int(), 0);
    assert!(c[2].cmd(&["SHOW", &id]).is_nil(), "nothing added on node 2");
    // Consumed and acknowledged: still deduplicated everywhere.
    assert_eq!(getjob_id(&mut c[0], "dd"), id);
    assert_eq!(c[0].cmd(&["ACKJOB", &id]).int(), 1);
    assert!(wait_until(WAIT, POLL, || c[0].cmd(&["SHOW", &id]).is_nil()));
    for cl in c.iter_mut() {
        assert_eq!(addjob(cl, "dd", "b", &["DEDUP", "k1"]), id);
    }
    // A replica knows the key from the job record itself.
    let id2 = addjob(&mut c[1], "dd", "b", &["REPLICATE", "3", "DEDUP", "k2"]);
    assert_eq!(addjob(&mut c[2], "dd", "b", &["DEDUP", "k2"]), id2);
}

#[test]
fn qlen_cluster_counts_reachable_nodes_and_is_bounded_with_one_down() {
    let mut nodes = cluster(3);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    for (i, cl) in c.iter_mut().enumerate() {
        for _ in 0..=i {
            addjob(cl, "cq", "b", &["REPLICATE", "1"]);
        }
    }
    assert_eq!(c[0].cmd(&["QLEN", "cq"]).int(), 1);
    assert_eq!(c[0].cmd(&["QLEN", "cq", "CLUSTER"]).int(), 6);
    assert_eq!(
        c[1].cmd(&["QSTAT", "cq", "CLUSTER"])
            .field("len-cluster")
            .int(),
        6
    );
    nodes[2].kill9();
    let t0 = Instant::now();
    assert_eq!(c[0].cmd(&["QLEN", "cq", "CLUSTER"]).int(), 3);
    assert!(
        t0.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t0.elapsed()
    );
    // Once the dead node is out of the reachable set the answer is immediate.
    let t1 = Instant::now();
    assert!(wait_until(WAIT, POLL, || c[0]
        .cmd(&["QLEN", "cq", "CLUSTER"])
        .int()
        == 3
        && t1.elapsed() > Duration::from_secs(3)));
}

#[test]
fn dead_job_state_survives_an_aof_restart() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    let id = addjob(&mut c, "rq", "b", &["RETRY", "60", "MAXDELIVERIES", "1"]);
    nack_until_dead(&mut c, "rq", &id, 1);
    assert_eq!(c.cmd(&["SHOW", &id]).field("queue").text(), "rq:dead");
    s.kill9();
    s.restart();
    let mut c = s.client();
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(show.field("queue").text(), "rq:dead");
    assert_eq!(show.field("origin-queue").text(), "rq");
    assert_eq!(show.field("dead").int(), 1);
    assert_eq!(c.cmd(&["REDRIVE", &id]).int(), 1);
    s.kill9();
    s.restart();
    let mut c = s.client();
    let show = c.cmd(&["SHOW", &id]);
    assert_eq!(show.field("queue").text(), "rq");
    assert_eq!(show.field("dead").int(), 0);
}

#[test]
fn dedup_keys_reach_a_node_restarted_without_aof() {
    let mut nodes = cluster(3);
    let id = addjob(
        &mut nodes[0].client(),
        "rk",
        "b",
        &["REPLICATE", "1", "DEDUP", "again"],
    );
    nodes[2].kill9();
    nodes[2].restart();
    crate::cluster::wait_full_mesh(&nodes);
    let mut c0 = nodes[0].client();
    let mut c2 = nodes[2].client();
    bus_barrier(&mut c0, &mut c2, "barrier-restart");
    assert_eq!(addjob(&mut c2, "rk", "b", &["DEDUP", "again"]), id);
    assert_eq!(c2.cmd(&["QLEN", "rk"]).int(), 0);
}
