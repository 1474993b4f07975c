//! SCHEDULE (docs/COMMANDS.md#schedule) with real processes: the
//! subcommands and their errors on one node, and a 3-node cluster with a
//! 1-second schedule where one node is SIGKILLed and restarted (without
//! an AOF, so it must learn the schedule from its peers): every tick of
//! the run is delivered, duplicates are counted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cluster::cluster;
use crate::harness::{wait_until, Client, Reply, ReplyExt, Server};

const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[test]
fn schedule_subcommands_and_errors() {
    let s = Server::start_default();
    let mut c = s.client();
    let err = |c: &mut Client, args: &[&str]| c.cmd(args).text();
    for (args, want) in [
        (
            &["SCHEDULE", "ADD", "s", "q", "b"][..],
            "ERR exactly one of EVERY or CRON is required",
        ),
        (
            &[
                "SCHEDULE",
                "ADD",
                "s",
                "q",
                "b",
                "EVERY",
                "1",
                "CRON",
                "* * * * *",
            ],
            "ERR exactly one of EVERY or CRON is required",
        ),
        (
            &["SCHEDULE", "ADD", "s", "q", "b", "EVERY", "0"],
            "ERR EVERY must be a positive number of seconds",
        ),
        (
            &["SCHEDULE", "ADD", "s", "q", "b", "EVERY", "5", "TZ", "UTC"],
            "ERR TZ requires CRON",
        ),
        (
            &["SCHEDULE", "ADD", "s", "q", "b", "CRON", "* * *"],
            "ERR invalid CRON expression: expected 5 or 6 fields, got 3",
        ),
        (
            &[
                "SCHEDULE",
                "ADD",
                "s",
                "q",
                "b",
                "CRON",
                "* * * * *",
                "TZ",
                "Mars/Base",
            ],
            "ERR unknown time zone 'Mars/Base'",
        ),
        (
            &["SCHEDULE", "ADD", "", "q", "b", "EVERY", "1"],
            "ERR schedule name must not be empty",
        ),
        (
            &[
                "SCHEDULE", "ADD", "s", "q", "b", "EVERY", "1", "OVERLAP", "maybe",
            ],
            "ERR syntax error",
        ),
        (
            &["SCHEDULE", "ADD", "s", "q", "b", "EVERY", "1", "GRACE"],
            "ERR syntax error",
        ),
        (
            &["SCHEDULE", "ADD", "s", "q", "b", "EVERY", "1", "RETRY", "0"],
            "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)",
        ),
        (
            &["SCHEDULE", "PAUSE", "nope"],
            "NOSCHEDULE No such schedule",
        ),
        (
            &["SCHEDULE", "FROB", "x"],
            "ERR Unknown SCHEDULE subcommand, try ADD, DEL, PAUSE, RESUME, SHOW or LIST",
        ),
    ] {
        assert_eq!(err(&mut c, args), want, "{args:?}");
    }
    assert!(c.cmd(&["SCHEDULE", "LIST"]).array().is_empty());

    let ok = Reply::Status("OK".into());
    assert_eq!(
        c.cmd(&[
            "SCHEDULE",
            "ADD",
            "nightly",
            "reports",
            "run",
            "CRON",
            "0 3 * * *",
            "TZ",
            "Europe/Paris",
            "CATCHUP",
            "600",
            "OVERLAP",
            "skip",
            "PAUSED"
        ]),
        ok
    );
    assert_eq!(
        c.cmd(&["SCHEDULE", "ADD", "beat", "q", "b", "EVERY", "3600"]),
        ok
    );
    let names: Vec<String> = c
        .cmd(&["SCHEDULE", "LIST"])
        .array()
        .iter()
        .map(ReplyExt::text)
        .collect();
    assert_eq!(names, ["beat", "nightly"]);
    let show = c.cmd(&["SCHEDULE", "SHOW", "nightly"]);
    assert_eq!(show.field("cron").text(), "0 3 * * *");
    assert_eq!(show.field("tz").text(), "Europe/Paris");
    assert_eq!(show.field("overlap").text(), "skip");
    assert_eq!(show.field("catchup").int(), 600);
    assert_eq!(show.field("paused").int(), 1);
    assert!(show.field("next-tick").is_nil(), "paused: no next tick");
    assert_eq!(c.cmd(&["SCHEDULE", "RESUME", "nightly"]), ok);
    let show = c.cmd(&["SCHEDULE", "SHOW", "nightly"]);
    assert_eq!(show.field("paused").int(), 0);
    let next = show.field("next-tick").int() as u64;
    let now = unix_ms();
    assert!(next > now && next <= now + 25 * 3_600_000, "next {next}");
    let beat = c.cmd(&["SCHEDULE", "SHOW", "beat"]);
    assert_eq!(beat.field("every").int(), 3600);
    assert_eq!(beat.field("next-tick").int() % 3_600_000, 0);
    assert_eq!(beat.field("replicate").text(), "majority");
    assert_eq!(c.cmd(&["SCHEDULE", "DEL", "beat"]).int(), 1);
    assert_eq!(c.cmd(&["SCHEDULE", "DEL", "beat"]).int(), 0);
    assert!(c.cmd(&["SCHEDULE", "SHOW", "beat"]).is_nil());
}

/// Take every job queued on `c` from `queue`, record its tick key (SHOW's
/// `dedup-key`) and acknowledge it.
fn drain(c: &mut Client, queue: &str, seen: &mut BTreeMap<String, BTreeSet<String>>) {
    loop {
        let r = c.cmd(&["GETJOB", "NOHANG", "COUNT", "100", "FROM", queue]);
        if r.is_nil() {
            return;
        }
        for job in r.array() {
            let id = job.array()[1].text();
            let show = c.cmd(&["SHOW", &id]);
            if let Some(key) = show.get("dedup-key").and_then(|k| k.as_text()) {
                seen.entry(key).or_default().insert(id.clone());
            }
            c.cmd(&["ACKJOB", &id]);
        }
    }
}

#[test]
fn schedule_every_second_delivers_every_tick_across_kill_and_restart() {
    let mut nodes = cluster(3);
    let mut c0 = nodes[0].client();
    assert_eq!(
        c0.cmd(&["SCHEDULE", "ADD", "beat", "ticks", "tick", "EVERY", "1", "RETRY", "5"]),
        Reply::Status("OK".into())
    );
    let created = unix_ms();
    for s in &nodes {
        let mut c = s.client();
        assert!(
            wait_until(WAIT, POLL, || !c
                .cmd(&["SCHEDULE", "SHOW", "beat"])
                .is_nil()),
            "node {} never learned the schedule",
            s.port()
        );
    }
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let consume_for = |nodes: &[Server], up: &[bool], d: Duration, seen: &mut _| {
        let end = Instant::now() + d;
        while Instant::now() < end {
            for (s, &on) in nodes.iter().zip(up) {
                if on {
                    drain(&mut s.client(), "ticks", seen);
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    consume_for(&nodes, &[true; 3], Duration::from_secs(5), &mut seen);
    nodes[1].kill9();
    consume_for(
        &nodes,
        &[true, false, true],
        Duration::from_secs(6),
        &mut seen,
    );
    nodes[1].restart();
    let mut c1 = nodes[1].client();
    assert!(
        wait_until(WAIT, POLL, || !c1
            .cmd(&["SCHEDULE", "SHOW", "beat"])
            .is_nil()),
        "the restarted node never learned the schedule from its peers"
    );
    consume_for(&nodes, &[true; 3], Duration::from_secs(6), &mut seen);
    let last = unix_ms().saturating_sub(4000);
    // Ticks still on their way (a late tick waits for its rank's turn).
    consume_for(&nodes, &[true; 3], Duration::from_secs(8), &mut seen);

    let first = (created / 1000 + 1) * 1000;
    let mut lost = Vec::new();
    let mut dups = 0;
    let mut tick = first;
    while tick <= last {
        match seen.get(&format!("sched:beat:{tick}")).map(BTreeSet::len) {
            None => lost.push(tick),
            Some(1) => {}
            Some(_) => dups += 1,
        }
        tick += 1000;
    }
    let total = (last - first) / 1000 + 1;
    eprintln!(
        "schedule run: {total} ticks, {} lost, {dups} duplicated",
        lost.len()
    );
    assert!(total >= 12, "run too short: {total} ticks");
    assert!(
        lost.is_empty(),
        "ticks never delivered: {lost:?} (seen {seen:?})"
    );
    let show = c0.cmd(&["SCHEDULE", "SHOW", "beat"]);
    assert!(show.field("last-tick").int() as u64 >= last);
}

#[test]
fn schedules_survive_a_restart_with_the_aof() {
    let mut s = Server::start(crate::harness::ServerOpts::with_args(&[
        "--appendonly",
        "yes",
    ]));
    let mut c = s.client();
    let ok = Reply::Status("OK".into());
    assert_eq!(
        c.cmd(&["SCHEDULE", "ADD", "keep", "q", "b", "EVERY", "3600", "PAUSED"]),
        ok
    );
    assert_eq!(
        c.cmd(&["SCHEDULE", "ADD", "gone", "q", "b", "EVERY", "3600"]),
        ok
    );
    assert_eq!(c.cmd(&["SCHEDULE", "DEL", "gone"]).int(), 1);
    s.restart();
    let mut c = s.client();
    let names: Vec<String> = c
        .cmd(&["SCHEDULE", "LIST"])
        .array()
        .iter()
        .map(ReplyExt::text)
        .collect();
    assert_eq!(names, ["keep"], "the deletion is kept too");
    assert_eq!(
        c.cmd(&["SCHEDULE", "SHOW", "keep"]).field("paused").int(),
        1
    );
    // A rewrite writes them again.
    assert!(!c.cmd(&["BGREWRITEAOF"]).text().is_empty());
    assert!(wait_until(WAIT, POLL, || {
        c.info_field("aof_rewrite_in_progress") == "0"
    }));
    s.restart();
    let mut c = s.client();
    assert!(!c.cmd(&["SCHEDULE", "SHOW", "keep"]).is_nil());
}

#[test]
fn tick_counters_in_info_and_metrics() {
    let s = crate::observe::http_node(&[]);
    let mut c = s.client();
    assert_eq!(
        c.cmd(&[
            "SCHEDULE",
            "ADD",
            "beat",
            "ticks",
            "tick",
            "EVERY",
            "1",
            "REPLICATE",
            "1"
        ]),
        Reply::Status("OK".into())
    );
    // A single node ranks first for every tick: it adds them all.
    assert!(
        wait_until(WAIT, POLL, || c.info_int("schedule_ticks_fired") >= 2),
        "{}",
        c.cmd(&["INFO", "jobstats"]).text()
    );
    assert_eq!(c.info_int("schedules"), 1);
    assert_eq!(c.info_int("schedule_ticks_deduplicated"), 0);
    let m = crate::observe::scrape(s.http_port());
    assert_eq!(
        crate::observe::value(&m, "disque_schedules", &[]),
        Some(1.0)
    );
    assert!(
        crate::observe::value(&m, "disque_schedule_ticks_fired_total", &[])
            .is_some_and(|v| v >= 2.0)
    );
    let queued = c.cmd(&["QLEN", "ticks"]).int();
    assert!(queued >= 2, "{queued} tick jobs queued");
}

#[test]
fn dashboard_api_lists_pauses_resumes_and_deletes_schedules() {
    use crate::observe::{http, http_node};
    let s = http_node(&[]);
    let p = s.http_port();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["SCHEDULE", "ADD", "beat", "q", "b", "EVERY", "3600"]),
        Reply::Status("OK".into())
    );
    let (st, body) = http(p, "GET", "/api/schedules", &[], "");
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["schedules"][0]["name"], "beat");
    assert_eq!(v["schedules"][0]["every"], 3600);
    assert!(v["schedules"][0]["next-tick"].as_u64() > v["now"].as_u64());
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Disque-Action", "1"),
    ];
    // Actions are POSTs guarded like the others.
    let (st, _) = http(p, "POST", "/api/schedules/beat/pause", &[], "{}");
    assert_ne!(st, 200, "an action without X-Disque-Action must be refused");
    let (st, body) = http(p, "POST", "/api/schedules/beat/pause", &headers, "{}");
    assert_eq!(st, 200, "{body}");
    let show = c.cmd(&["SCHEDULE", "SHOW", "beat"]);
    assert_eq!(show.field("paused").int(), 1);
    let (st, _) = http(p, "POST", "/api/schedules/beat/resume", &headers, "{}");
    assert_eq!(st, 200);
    assert_eq!(
        c.cmd(&["SCHEDULE", "SHOW", "beat"]).field("paused").int(),
        0
    );
    let (st, _) = http(p, "POST", "/api/schedules/beat/frob", &headers, "{}");
    assert_eq!(st, 404);
    let (st, body) = http(p, "POST", "/api/schedules/nope/pause", &headers, "{}");
    assert_eq!(st, 400);
    assert!(body.contains("NOSCHEDULE"), "{body}");
    let (st, _) = http(p, "POST", "/api/schedules/beat/delete", &headers, "{}");
    assert_eq!(st, 200);
    let (_, body) = http(p, "GET", "/api/schedules", &[], "");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["schedules"].as_array().map(Vec::len), Some(0));
}
