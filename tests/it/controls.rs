//! Job controls with real processes: ADDJOB PRIORITY and JOBPRIORITY on
//! one node, across an AOF restart, through replication and federation.

use crate::cluster::cluster;
use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, POLL, WAIT};

fn peek(c: &mut Client, queue: &str) -> Vec<String> {
    c.cmd(&["QPEEK", queue, "100"])
        .array()
        .iter()
        .map(|j| j.array()[1].text())
        .collect()
}

#[test]
fn priority_orders_getjob_qpeek_and_show() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = addjob(&mut c, "pq", "a", &[]);
    let low = addjob(&mut c, "pq", "low", &["PRIORITY", "1"]);
    let high = addjob(&mut c, "pq", "high", &["PRIORITY", "9"]);
    let d = addjob(&mut c, "pq", "d", &[]);
    let mid = addjob(&mut c, "pq", "mid", &["priority", "5"]);
    // Unset is the middle level: FIFO with explicit 5s, above 1, below 9.
    assert_eq!(
        peek(&mut c, "pq"),
        vec![high.clone(), a.clone(), d.clone(), mid.clone(), low.clone()]
    );
    // Newest first is the exact reverse.
    let back: Vec<String> = c
        .cmd(&["QPEEK", "pq", "-100"])
        .array()
        .iter()
        .map(|j| j.array()[1].text())
        .collect();
    assert_eq!(
        back,
        vec![low.clone(), mid.clone(), d.clone(), a.clone(), high.clone()]
    );
    assert_eq!(c.cmd(&["SHOW", &high]).field("priority").int(), 9);
    assert_eq!(c.cmd(&["SHOW", &mid]).field("priority").int(), 5);
    // Plain jobs keep Disque's 30-element SHOW.
    assert_eq!(c.cmd(&["SHOW", &a]).array().len(), 30);
    // JOBPRIORITY moves queued jobs; unknown IDs are not counted.
    let ghost = "D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";
    assert_eq!(c.cmd(&["JOBPRIORITY", "8", &d, &low, ghost]).int(), 2);
    assert_eq!(
        peek(&mut c, "pq"),
        vec![high.clone(), low.clone(), d.clone(), a.clone(), mid.clone()]
    );
    assert_eq!(c.cmd(&["SHOW", &d]).field("priority").int(), 8);
    // GETJOB COUNT serves in the same order.
    let got: Vec<String> = c
        .cmd(&["GETJOB", "COUNT", "10", "FROM", "pq"])
        .array()
        .iter()
        .map(|j| j.array()[1].text())
        .collect();
    assert_eq!(
        got,
        vec![high.clone(), low.clone(), d.clone(), a.clone(), mid.clone()]
    );
    // A blocked consumer gets the highest level of what arrives.
    let mut w = s.client();
    w.send(&["GETJOB", "TIMEOUT", "10000", "FROM", "pq2"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    addjob(&mut c, "pq2", "x", &["PRIORITY", "3"]);
    let r = w.try_read_reply(WAIT).expect("blocked GETJOB served");
    assert_eq!(r.array()[0].array()[2].text(), "x");
}

#[test]
fn priority_arguments_get_precise_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let msg = "ERR PRIORITY must be between 1 (lowest) and 9 (highest)";
    for bad in ["0", "10", "-1", "x", "", "5.0", "256"] {
        assert_eq!(
            c.cmd(&["ADDJOB", "q", "b", "0", "PRIORITY", bad]),
            Reply::Error(msg.into()),
            "{bad:?}"
        );
        assert_eq!(
            c.cmd(&[
                "JOBPRIORITY",
                bad,
                "D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d"
            ]),
            Reply::Error(msg.into()),
            "{bad:?}"
        );
    }
    assert_eq!(
        c.cmd(&["ADDJOB", "q", "b", "0", "PRIORITY"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["JOBPRIORITY", "3", "nope"]),
        Reply::Error("BADID Invalid Job ID format.".into())
    );
    assert_eq!(
        c.cmd(&["JOBPRIORITY", "3"]),
        Reply::Error("ERR wrong number of arguments for 'jobpriority' command".into())
    );
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
}

#[test]
fn priority_survives_aof_restart_and_rewrite() {
    // Queued jobs are queued again at load only on request (Disque).
    let mut s = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--aof-enqueue-jobs-once",
        "yes",
    ]));
    let mut c = s.client();
    let a = addjob(&mut c, "rq", "a", &[]);
    let b = addjob(&mut c, "rq", "b", &["PRIORITY", "7"]);
    let d = addjob(&mut c, "rq", "d", &["PRIORITY", "2"]);
    // A change after the ADDJOB is what the file keeps.
    assert_eq!(c.cmd(&["JOBPRIORITY", "9", &d]).int(), 1);
    let want = vec![d.clone(), b.clone(), a.clone()];
    assert_eq!(peek(&mut c, "rq"), want);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(peek(&mut c, "rq"), want);
    assert_eq!(c.cmd(&["SHOW", &d]).field("priority").int(), 9);
    assert!(c.cmd(&["BGREWRITEAOF"]).text().contains("started"));
    assert!(wait_until(WAIT, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"));
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(peek(&mut c, "rq"), want);
    assert_eq!(c.cmd(&["SHOW", &a]).array().len(), 30);
}

#[test]
fn priority_reaches_replicas_and_changes_follow() {
    let nodes = cluster(2);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let id = addjob(&mut c[0], "cq", "b", &["REPLICATE", "2", "PRIORITY", "8"]);
    assert_eq!(c[1].cmd(&["SHOW", &id]).field("priority").int(), 8);
    assert_eq!(c[0].cmd(&["JOBPRIORITY", "2", &id]).int(), 1);
    assert!(
        wait_until(WAIT, POLL, || c[1]
            .cmd(&["SHOW", &id])
            .field("priority")
            .int()
            == 2),
        "the replica never learned the new level"
    );
}

#[test]
fn federation_moves_the_highest_priority_first() {
    let nodes = cluster(2);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    for i in 0..20 {
        addjob(
            &mut c[0],
            "fq",
            &format!("low{i}"),
            &["REPLICATE", "1", "PRIORITY", "2"],
        );
    }
    addjob(&mut c[0], "fq", "top", &["REPLICATE", "1", "PRIORITY", "9"]);
    // Node 1 has none: its consumer's NEEDJOBS imports from node 0,
    // which sends in serving order.
    let r = c[1].cmd(&["GETJOB", "TIMEOUT", "10000", "FROM", "fq"]);
    assert!(!r.is_nil(), "GETJOB on node 1 timed out");
    assert_eq!(r.array()[0].array()[2].text(), "top");
}

#[test]
fn cancel_by_id_and_by_queue_pattern() {
    let s = Server::start_default();
    let mut c = s.client();
    let a = addjob(&mut c, "cq", "invoice 1", &[]);
    let b = addjob(&mut c, "cq", "invoice 2", &[]);
    let mail = addjob(&mut c, "cq", "mail 1", &[]);
    let later = addjob(&mut c, "cq", "invoice 3", &["DELAY", "2"]);
    let running = addjob(&mut c, "cq", "invoice 4", &[]);
    let mut w = s.client();
    w.send(&["WAITJOB", &a, "TIMEOUT", "20000"]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    // A consumer holds `running` (DEQUEUE: active, as after GETJOB).
    assert_eq!(c.cmd(&["DEQUEUE", &running]).int(), 1);
    // The queue form takes what no consumer has: queued and delayed jobs.
    assert_eq!(
        c.cmd(&["CANCEL", "QUEUE", "cq", "MATCH", "invoice*"]).int(),
        3
    );
    assert_eq!(
        w.try_read_reply(WAIT),
        Some(Reply::Status("cancelled".into()))
    );
    assert_eq!(peek(&mut c, "cq"), vec![mail.clone()]);
    assert_eq!(c.cmd(&["WAITJOB", &b]), Reply::Status("cancelled".into()));
    // The worker holding a job learns it should stop.
    assert_eq!(c.cmd(&["CANCEL", &running]).int(), 1);
    assert_eq!(
        c.cmd(&["WORKING", &running]),
        Reply::Error("CANCELLED The job was cancelled: stop working on it.".into())
    );
    assert_eq!(c.cmd(&["CANCEL", &running]).int(), 0);
    // The delayed job never gets queued.
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_millis(3000) {
        assert_eq!(c.cmd(&["QLEN", "cq"]).int(), 1);
        assert!(c.cmd(&["SHOW", &later]).is_nil());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Errors.
    assert_eq!(
        c.cmd(&["CANCEL", "QUEUE", "cq", "MATCH"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["CANCEL", "QUEUE", "cq", "LIKE", "x"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["CANCEL", "bad-id"]),
        Reply::Error("BADID Invalid Job ID format.".into())
    );
    assert_eq!(c.cmd(&["CANCEL", "QUEUE", "nosuchqueue"]).int(), 0);
    assert_eq!(c.cmd(&["CANCEL"]).int(), 0);
}

#[test]
fn cancel_travels_the_cluster_like_an_ack() {
    let nodes = cluster(3);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let id = addjob(&mut c[0], "xq", "b", &["REPLICATE", "3", "RETRY", "1"]);
    let r = c[0].cmd(&["GETJOB", "TIMEOUT", "10000", "FROM", "xq"]);
    assert_eq!(r.array()[0].array()[1].text(), id);
    let mut w = nodes[2].client();
    w.send(&["WAITJOB", &id, "TIMEOUT", "20000"]);
    assert!(wait_until(WAIT, POLL, || c[2].info_int("blocked_clients") == 1));
    assert_eq!(c[1].cmd(&["CANCEL", &id]).int(), 1);
    assert_eq!(
        w.try_read_reply(WAIT),
        Some(Reply::Status("cancelled".into()))
    );
    // The worker on node 0 is told to stop.
    assert!(wait_until(WAIT, POLL, || c[0].cmd(&["WORKING", &id])
        == Reply::Error(
            "CANCELLED The job was cancelled: stop working on it.".into()
        )));
    // Retry periods pass: nobody queues it again.
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_millis(2500) {
        let queued: i64 = c.iter_mut().map(|cl| cl.cmd(&["QLEN", "xq"]).int()).sum();
        assert_eq!(queued, 0);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn working_reports_progress_shown_by_show_and_replicas() {
    let nodes = cluster(2);
    let mut c: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let id = addjob(&mut c[0], "wq", "b", &["REPLICATE", "2", "RETRY", "30"]);
    let plain = addjob(&mut c[0], "wq", "p", &["REPLICATE", "1"]);
    let r = c[0].cmd(&["GETJOB", "COUNT", "2", "FROM", "wq"]);
    assert_eq!(r.array().len(), 2);
    // Plain WORKING is Disque's, and SHOW of a plain job too.
    let retry = c[0].cmd(&["SHOW", &plain]).field("retry").int();
    assert_eq!(c[0].cmd(&["WORKING", &plain]).int(), retry);
    assert_eq!(c[0].cmd(&["SHOW", &plain]).array().len(), 30);
    assert_eq!(
        c[0].cmd(&["WORKING", &id, "PROGRESS", "40", "DESC", "resizing", "DATA", "\x00\x01"]),
        Reply::Int(30)
    );
    let s = c[0].cmd(&["SHOW", &id]);
    assert_eq!(s.field("progress").int(), 40);
    assert_eq!(s.field("progress-desc").text(), "resizing");
    assert_eq!(s.field("progress-data"), &Reply::Bulk(vec![0, 1]));
    // DESC alone keeps the percentage; the replica gets the newest.
    assert_eq!(c[0].cmd(&["WORKING", &id, "DESC", "uploading"]).int(), 30);
    assert!(
        wait_until(WAIT, POLL, || {
            // Until the first report arrives the replica's copy has no
            // extension fields at all.
            let s = c[1].cmd(&["SHOW", &id]);
            s.get("progress-desc") == Some(&Reply::Bulk(b"uploading".to_vec()))
                && s.get("progress").and_then(|p| p.as_int()) == Some(40)
        }),
        "the replica never saw the newest report"
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["PROGRESS", "101"],
            "ERR PROGRESS must be between 0 and 100",
        ),
        (
            &["PROGRESS", "-1"],
            "ERR PROGRESS must be between 0 and 100",
        ),
        (&["PROGRESS", "x"], "ERR PROGRESS must be between 0 and 100"),
        (&["PROGRESS"], "ERR syntax error"),
        (&["SPEED", "3"], "ERR syntax error"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["WORKING", id.as_str()];
        args.extend_from_slice(extra);
        assert_eq!(c[0].cmd(&args), Reply::Error(want.to_string()), "{extra:?}");
    }
    let long = "d".repeat(257);
    assert_eq!(
        c[0].cmd(&["WORKING", &id, "DESC", &long]),
        Reply::Error("ERR DESC must be at most 256 bytes".into())
    );
    let big = "d".repeat(4097);
    assert_eq!(
        c[0].cmd(&["WORKING", &id, "DATA", &big]),
        Reply::Error("ERR DATA must be at most 4096 bytes".into())
    );
    assert_eq!(
        c[0].cmd(&[
            "WORKING",
            "D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d",
            "PROGRESS",
            "5"
        ]),
        Reply::Error("NOJOB Job not known in the context of this node.".into())
    );
    assert_eq!(c[0].cmd(&["SHOW", &id]).field("progress").int(), 40);
}

#[test]
fn getjob_match_serves_every_matching_queue_in_turn() {
    let s = Server::start_default();
    let mut c = s.client();
    for q in ["mail:a", "mail:b", "mail:c"] {
        for i in 0..3 {
            addjob(&mut c, q, &format!("{q}/{i}"), &[]);
        }
    }
    addjob(&mut c, "sms", "not mine", &[]);
    // COUNT 1 nine times: every queue served in turn, never `sms`.
    let mut served = Vec::new();
    for _ in 0..9 {
        let r = c.cmd(&["GETJOB", "NOHANG", "MATCH", "mail:*"]);
        served.push(r.array()[0].array()[0].text());
    }
    for q in ["mail:a", "mail:b", "mail:c"] {
        assert_eq!(served.iter().filter(|s| *s == q).count(), 3, "{served:?}");
    }
    assert!(served[..3].contains(&"mail:a".to_string()));
    assert!(served[..3].contains(&"mail:b".to_string()));
    assert!(served[..3].contains(&"mail:c".to_string()));
    assert!(c.cmd(&["GETJOB", "NOHANG", "MATCH", "mail:*"]).is_nil());
    assert!(c.cmd(&["GETJOB", "NOHANG", "MATCH", "nothing*"]).is_nil());
    assert_eq!(c.cmd(&["QLEN", "sms"]).int(), 1);
    // A queue created later is seen by the next call; a blocked consumer
    // is woken by a job in a matching queue.
    let mut w = s.client();
    w.send(&[
        "GETJOB", "TIMEOUT", "10000", "COUNT", "2", "MATCH", "mail:*",
    ]);
    assert!(wait_until(WAIT, POLL, || c.info_int("blocked_clients") == 1));
    addjob(&mut c, "mail:b", "late", &[]);
    let r = w
        .try_read_reply(WAIT)
        .expect("blocked MATCH consumer served");
    assert_eq!(r.array()[0].array()[2].text(), "late");
    addjob(&mut c, "mail:new", "fresh", &[]);
    let r = c.cmd(&["GETJOB", "NOHANG", "MATCH", "mail:*"]);
    assert_eq!(r.array()[0].array()[0].text(), "mail:new");
    // FROM and MATCH do not mix; MATCH needs its pattern.
    assert_eq!(
        c.cmd(&["GETJOB", "MATCH", "a*", "FROM", "q"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["GETJOB", "NOHANG", "MATCH"]),
        Reply::Error("ERR syntax error".into())
    );
}
