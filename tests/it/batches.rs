//! BATCH (docs/COMMANDS.md#batch) with real processes: the subcommands
//! and their errors on one node, the state surviving a restart with the
//! AOF, and a 3-node cluster where members are added and acknowledged
//! through every node and each callback is delivered once; the batch
//! counters in INFO and /metrics, and the dashboard's batch API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cluster::cluster;
use crate::harness::{wait_until, Client, Reply, ReplyExt, Server};
use crate::util::env_u64;

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

#[test]
fn batch_subcommands_and_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let text = |c: &mut Client, args: &[&str]| c.cmd(args).text();
    assert_eq!(
        text(&mut c, &["BATCH", "FROB"]),
        "ERR Unknown BATCH subcommand, try CREATE, COMMIT, CANCEL, STATUS or LIST"
    );
    assert_eq!(
        text(&mut c, &["BATCH", "COMMIT", "nope"]),
        "NOBATCH No such batch"
    );
    assert!(c.cmd(&["BATCH", "STATUS", "nope"]).is_nil());
    assert_eq!(
        text(&mut c, &["BATCH", "CREATE", "b", "ONSUCCESS", "q"]),
        "ERR syntax error"
    );
    assert_eq!(
        text(&mut c, &["BATCH", "CREATE", "b", "ONSUCCESS", "", "x"]),
        "ERR callback queue must not be empty"
    );
    assert_eq!(
        c.cmd(&["BATCH", "CREATE", "b", "ONSUCCESS", "done", "ok"])
            .text(),
        "b"
    );
    assert_eq!(
        text(&mut c, &["BATCH", "CREATE", "b"]),
        "BATCHEXISTS A batch with this ID already exists"
    );
    // A generated ID is returned and listed.
    let gen = c.cmd(&["BATCH", "CREATE"]).text();
    assert!(!gen.is_empty());
    assert_eq!(c.cmd(&["BATCH", "LIST"]).array().len(), 2);
    assert_eq!(
        text(&mut c, &["ADDJOB", "q", "x", "0", "BATCH", "nope"]),
        "NOBATCH No such batch"
    );
    let id = c.cmd(&["ADDJOB", "q", "x", "0", "BATCH", "b"]).text();
    let st = c.cmd(&["BATCH", "STATUS", "b"]);
    assert_eq!(st.field("state").text(), "open");
    assert_eq!(st.field("total").int(), 1);
    assert_eq!(st.field("pending").int(), 1);
    assert_eq!(c.cmd(&["BATCH", "COMMIT", "b"]), Reply::Status("OK".into()));
    assert_eq!(
        text(&mut c, &["ADDJOB", "q", "y", "0", "BATCH", "b"]),
        "BATCHCLOSED The batch is committed or cancelled"
    );
    c.cmd(&["ACKJOB", &id]);
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "done"]).int() == 1));
    let st = c.cmd(&["BATCH", "STATUS", "b"]);
    assert_eq!(st.field("state").text(), "succeeded");
    assert_eq!(c.info_int("batch_callbacks_added"), 1);
    assert_eq!(st.field("acked").int(), 1);
    // The flag is set once the node sees the callback's key.
    assert!(wait_until(WAIT, POLL, || c
        .cmd(&["BATCH", "STATUS", "b"])
        .field("success-added")
        .int()
        == 1));
    // A cancelled batch adds no callback.
    c.cmd(&["BATCH", "CREATE", "c", "ONCOMPLETE", "done", "x"]);
    let j = c.cmd(&["ADDJOB", "q", "z", "0", "BATCH", "c"]).text();
    assert_eq!(c.cmd(&["BATCH", "CANCEL", "c"]), Reply::Status("OK".into()));
    c.cmd(&["BATCH", "COMMIT", "c"]);
    c.cmd(&["ACKJOB", &j]);
    assert!(!wait_until(Duration::from_secs(1), POLL, || c
        .cmd(&["QLEN", "done"])
        .int()
        != 1));
    assert_eq!(
        c.cmd(&["BATCH", "STATUS", "c"]).field("state").text(),
        "cancelled"
    );
    // b is done (its only callback added), c cancelled, gen open.
    assert_eq!(c.info_int("batches"), 3);
    assert_eq!(c.info_int("batches_open"), 1);
}

#[test]
fn batches_survive_a_restart_with_the_aof() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    c.cmd(&["BATCH", "CREATE", "keep", "ONCOMPLETE", "done", "x"]);
    let a = c.cmd(&["ADDJOB", "q", "a", "0", "BATCH", "keep"]).text();
    c.cmd(&["ADDJOB", "q", "b", "0", "BATCH", "keep"]);
    c.cmd(&["ACKJOB", &a]);
    s.restart();
    let mut c = s.client();
    let st = c.cmd(&["BATCH", "STATUS", "keep"]);
    assert_eq!(st.field("total").int(), 2);
    assert_eq!(st.field("acked").int(), 1);
    assert_eq!(st.field("state").text(), "open");
}

/// Take every job queued on `c` from `queue`, record its DEDUP key (or
/// "" without one) and acknowledge it.
fn drain(c: &mut Client, queue: &str, seen: &mut BTreeMap<String, BTreeSet<String>>) {
    loop {
        let r = c.cmd(&["GETJOB", "NOHANG", "COUNT", "100", "FROM", queue]);
        if r.is_nil() {
            return;
        }
        for job in r.array() {
            let id = job.array()[1].text();
            let show = c.cmd(&["SHOW", &id]);
            let key = show
                .get("dedup-key")
                .and_then(|k| k.as_text())
                .unwrap_or_default();
            seen.entry(key).or_default().insert(id.clone());
            c.cmd(&["ACKJOB", &id]);
        }
    }
}

/// Take and acknowledge every job queued on `c` from `queue`.
fn ack_all(c: &mut Client, queue: &str, acked: &mut BTreeSet<String>) {
    loop {
        let r = c.cmd(&["GETJOB", "NOHANG", "COUNT", "1000", "FROM", queue]);
        if r.is_nil() {
            return;
        }
        let mut cmd = vec!["ACKJOB".to_string()];
        for job in r.array() {
            let id = job.array()[1].text();
            acked.insert(id.clone());
            cmd.push(id);
        }
        c.cmd(&cmd);
    }
}

#[test]
fn batch_on_three_nodes_calls_back_once() {
    let nodes = cluster(3);
    let mut c0 = nodes[0].client();
    assert_eq!(
        c0.cmd(&[
            "BATCH",
            "CREATE",
            "b3",
            "ONSUCCESS",
            "cb",
            "ok",
            "ONCOMPLETE",
            "cb",
            "done"
        ])
        .text(),
        "b3"
    );
    for s in &nodes {
        let mut c = s.client();
        assert!(
            wait_until(WAIT, POLL, || !c.cmd(&["BATCH", "STATUS", "b3"]).is_nil()),
            "node {} never learned the batch",
            s.port()
        );
    }
    // DISQUE_IT_BATCH_MEMBERS makes it a load run (docs/RELIABILITY.md).
    let members = env_u64("DISQUE_IT_BATCH_MEMBERS", 300) as usize;
    let mut clients: Vec<Client> = nodes.iter().map(Server::client).collect();
    // Pipelined in chunks, spread over the nodes.
    let chunk = 200;
    for start in (0..members).step_by(chunk) {
        let c = &mut clients[(start / chunk) % 3];
        let end = (start + chunk).min(members);
        for i in start..end {
            c.send(&["ADDJOB", "work", &format!("m{i}"), "10000", "BATCH", "b3"]);
        }
        for _ in start..end {
            let r = c.read_reply();
            assert!(crate::harness::is_job_id(&r.text()), "{r:?}");
        }
    }
    assert_eq!(
        c0.cmd(&["BATCH", "COMMIT", "b3"]),
        Reply::Status("OK".into())
    );
    let started = std::time::Instant::now();
    let mut acked = BTreeSet::new();
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let done = wait_until(Duration::from_secs(600), Duration::from_millis(100), || {
        for c in clients.iter_mut() {
            ack_all(c, "work", &mut acked);
            drain(c, "cb", &mut seen);
        }
        seen.contains_key("batch:b3:success") && seen.contains_key("batch:b3:complete")
    });
    assert!(done, "callbacks never delivered: {seen:?}");
    eprintln!(
        "batch of {members}: callbacks delivered {:?} after COMMIT",
        started.elapsed()
    );
    // Later deliveries would be duplicates: give them time to show up.
    let mut quiet = 0;
    wait_until(Duration::from_secs(6), Duration::from_millis(200), || {
        for s in &nodes {
            drain(&mut s.client(), "cb", &mut seen);
        }
        quiet += 1;
        quiet >= 25
    });
    assert_eq!(seen["batch:b3:success"].len(), 1, "{seen:?}");
    assert_eq!(seen["batch:b3:complete"].len(), 1, "{seen:?}");
    assert_eq!(acked.len(), members);
    // Every member was acknowledged at its first delivery: none waited
    // for its retry timer (a lost acknowledgement or YOURJOBS would).
    for s in &nodes {
        assert_eq!(s.client().info_int("jobs_requeued"), 0, "node {}", s.port());
    }
    for s in &nodes {
        let st = s.client().cmd(&["BATCH", "STATUS", "b3"]);
        assert!(
            wait_until(WAIT, POLL, || s
                .client()
                .cmd(&["BATCH", "STATUS", "b3"])
                .field("success-added")
                .int()
                == 1),
            "{st:?}"
        );
    }
}

#[test]
fn batch_counts_in_info_and_metrics() {
    let s = crate::observe::http_node(&[]);
    let mut c = s.client();
    // One batch in each state: open, committed (a member pending),
    // succeeded, failed (a member dead-lettered), cancelled.
    c.cmd(&["BATCH", "CREATE", "open"]);
    c.cmd(&["BATCH", "CREATE", "pending"]);
    c.cmd(&["ADDJOB", "q", "p", "0", "BATCH", "pending"]);
    c.cmd(&["BATCH", "COMMIT", "pending"]);
    c.cmd(&["BATCH", "CREATE", "ok", "ONSUCCESS", "done", "ok"]);
    let a = c.cmd(&["ADDJOB", "q", "a", "0", "BATCH", "ok"]).text();
    c.cmd(&["BATCH", "COMMIT", "ok"]);
    c.cmd(&["ACKJOB", &a]);
    c.cmd(&["BATCH", "CREATE", "bad", "ONCOMPLETE", "done", "bad"]);
    let d = c
        .cmd(&[
            "ADDJOB",
            "dq",
            "d",
            "0",
            "BATCH",
            "bad",
            "MAXDELIVERIES",
            "1",
            "RETRY",
            "1",
        ])
        .text();
    c.cmd(&["BATCH", "COMMIT", "bad"]);
    c.cmd(&["BATCH", "CREATE", "gone"]);
    c.cmd(&["BATCH", "CANCEL", "gone"]);
    // The dead-letter member: delivered once, then NACKed past its
    // MAXDELIVERIES.
    let got = c.cmd(&["GETJOB", "NOHANG", "FROM", "dq"]);
    assert_eq!(got.array()[0].array()[1].text(), d);
    c.cmd(&["NACK", &d]);
    assert!(
        wait_until(WAIT, POLL, || c.info_int("batches_failed") == 1
            && c.info_int("batches_succeeded") == 1),
        "{}",
        c.cmd(&["INFO", "jobstats"]).text()
    );
    assert_eq!(c.info_int("batches"), 5);
    assert_eq!(c.info_int("batches_committed"), 1);
    assert_eq!(c.info_int("batches_cancelled"), 1);
    // Every callback added: "ok" and "bad" are done, "gone" cancelled.
    assert!(wait_until(WAIT, POLL, || c.info_int("batches_open") == 2));
    assert_eq!(c.info_int("batch_callbacks_added"), 2);
    let m = crate::observe::scrape(s.http_port());
    for (state, n) in [
        ("open", 1.0),
        ("committed", 1.0),
        ("succeeded", 1.0),
        ("failed", 1.0),
        ("cancelled", 1.0),
    ] {
        assert_eq!(
            crate::observe::value(&m, "disque_batches", &[("state", state)]),
            Some(n),
            "{state}"
        );
    }
    assert_eq!(
        crate::observe::value(&m, "disque_batches_active", &[]),
        Some(2.0)
    );
    assert_eq!(
        crate::observe::value(&m, "disque_batch_callbacks_added_total", &[]),
        Some(2.0)
    );
}

#[test]
fn dashboard_api_lists_and_cancels_batches() {
    use crate::observe::{http, http_node};
    let s = http_node(&[]);
    let p = s.http_port();
    let mut c = s.client();
    c.cmd(&["BATCH", "CREATE", "web", "ONCOMPLETE", "done", "x"]);
    let a = c.cmd(&["ADDJOB", "q", "a", "0", "BATCH", "web"]).text();
    c.cmd(&["ADDJOB", "q", "b", "0", "BATCH", "web"]);
    c.cmd(&["BATCH", "COMMIT", "web"]);
    c.cmd(&["ACKJOB", &a]);
    let (st, body) = http(p, "GET", "/api/batches", &[], "");
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let b = &v["batches"][0];
    assert_eq!(b["id"], "web", "{body}");
    assert_eq!(b["state"], "committed");
    assert_eq!(b["total"], 2);
    assert_eq!(b["pending"], 1);
    assert_eq!(b["acked"], 1);
    assert_eq!(b["dead"], 0);
    assert_eq!(b["on-complete"], "done");
    assert!(b["on-success"].is_null(), "{body}");
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Disque-Action", "1"),
    ];
    // Actions are POSTs guarded like the others.
    let (st, _) = http(p, "POST", "/api/batches/web/cancel", &[], "{}");
    assert_ne!(st, 200, "an action without X-Disque-Action must be refused");
    assert_eq!(
        c.cmd(&["BATCH", "STATUS", "web"]).field("state").text(),
        "committed"
    );
    let (st, _) = http(p, "POST", "/api/batches/web/frob", &headers, "{}");
    assert_eq!(st, 404);
    let (st, body) = http(p, "POST", "/api/batches/nope/cancel", &headers, "{}");
    assert_eq!(st, 400);
    assert!(body.contains("NOBATCH"), "{body}");
    let (st, body) = http(p, "POST", "/api/batches/web/cancel", &headers, "{}");
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        c.cmd(&["BATCH", "STATUS", "web"]).field("state").text(),
        "cancelled"
    );
    let (_, body) = http(p, "GET", "/api/batches", &[], "");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["batches"][0]["state"], "cancelled", "{body}");
}
