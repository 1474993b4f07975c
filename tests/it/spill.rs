//! The spill tier against real processes (docs/PERSISTENCE.md#9-spill-tiers):
//! queue tails move to segment files and every command still sees them
//! (GETJOB, SHOW, QPEEK, JSCAN, ACKJOB), segments are reclaimed, a restart
//! without the AOF starts clean, an AOF rewrite and a kill -9 keep spilled
//! jobs, and a failing or corrupt disk never loses or garbles a job.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::harness::{encode_cmd, wait_until, Client, Reply, ReplyExt, Server, ServerOpts};
use crate::util::{addjob, POLL, WAIT};

/// Jobs at the head of a queue that never spill (engine::spill::HEAD_WINDOW).
const HEAD: usize = 128;

/// Spill every queue tail past the head window, whatever the memory.
const SPILL_ALWAYS: &[&str] = &["--spill", "yes", "--spill-watermark", "0"];

fn body(i: usize) -> String {
    format!("{i:06}-{}", "x".repeat(200))
}

fn info(c: &mut Client, field: &str) -> i64 {
    let text = c.cmd(&["INFO", "spill"]).text();
    crate::harness::info_value(&text, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn spill_dir(s: &Server) -> PathBuf {
    s.dir().join("spill")
}

fn segments(s: &Server) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(spill_dir(s))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "seg"));
    v.sort();
    v
}

/// Add `n` jobs to `q`; wait until all but the head window are on disk.
fn fill(c: &mut Client, q: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| addjob(c, q, &body(i), &[])).collect();
    let want = (n - HEAD) as i64;
    assert!(
        wait_until(WAIT, POLL, || info(c, "spilled_jobs") == want),
        "spilled_jobs {} != {want}",
        info(c, "spilled_jobs")
    );
    ids
}

/// GETJOB until `n` jobs came back: (id, body) in delivery order.
fn drain(c: &mut Client, q: &str, n: usize) -> Vec<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut empty = 0;
    while got.len() < n {
        let r = c.cmd(&["GETJOB", "TIMEOUT", "2000", "COUNT", "50", "FROM", q]);
        if r.is_nil() {
            empty += 1;
            assert!(empty < 3, "GETJOB timed out after {} jobs", got.len());
            continue;
        }
        for j in r.array() {
            let f = j.array();
            let Reply::Bulk(b) = &f[2] else {
                panic!("no body in {j:?}");
            };
            got.push((f[1].text(), b.clone()));
        }
    }
    got
}

/// Drain `ids.len()` jobs: they come in this order, job `i` with
/// `body(i)`.
fn drain_in_order(c: &mut Client, q: &str, ids: &[String]) {
    let got = drain(c, q, ids.len());
    for (i, (id, b)) in got.iter().enumerate() {
        assert_eq!(id, &ids[i], "job {i} out of order");
        assert_eq!(b, body(i).as_bytes());
    }
}

#[test]
fn spilled_jobs_answer_every_command_and_free_their_segments() {
    let s = crate::observe::http_node(SPILL_ALWAYS);
    let mut c = s.client();
    let n = 1000;
    let ids = fill(&mut c, "q", n);
    let m = crate::observe::scrape(s.http_port());
    let metric = |name: &str| crate::observe::value(&m, name, &[]);
    assert_eq!(metric("disque_spill_jobs"), Some((n - HEAD) as f64));
    assert!(metric("disque_spill_disk_bytes").is_some_and(|b| b > 0.0));
    assert!(metric("disque_spill_jobs_written_total").is_some_and(|b| b >= (n - HEAD) as f64));
    assert!(!segments(&s).is_empty(), "no segment file written");
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), n as i64);
    // SHOW reads the body from disk without paging the job in.
    let last = &ids[n - 1];
    let shown = c.cmd(&["SHOW", last]);
    assert_eq!(shown.field("body").text(), body(n - 1));
    assert_eq!(shown.field("state").text(), "queued");
    assert_eq!(info(&mut c, "spilled_jobs"), (n - HEAD) as i64);
    assert!(info(&mut c, "spill_reply_reads") >= 1);
    // QPEEK from both ends.
    let newest = c.cmd(&["QPEEK", "q", "-3"]);
    for (k, j) in newest.array().iter().enumerate() {
        assert_eq!(j.array()[1].text(), ids[n - 1 - k]);
        assert_eq!(j.array()[2].text(), body(n - 1 - k));
    }
    let oldest = c.cmd(&["QPEEK", "q", "2"]);
    assert_eq!(oldest.array()[0].array()[2].text(), body(0));
    // JSCAN REPLY ALL: every job with its own body.
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut cursor = "0".to_string();
    let mut seen = 0;
    loop {
        let r = c.cmd(&["JSCAN", &cursor, "COUNT", "300", "REPLY", "ALL"]);
        for j in r.array()[1].array() {
            let i = index[j.field("id").text().as_str()];
            assert_eq!(j.field("body").text(), body(i));
            seen += 1;
        }
        cursor = r.array()[0].text();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, n);
    // GETJOB delivers everything in order with the right bodies.
    drain_in_order(&mut c, "q", &ids);
    assert!(info(&mut c, "spill_disk_reads") > 0);
    let mut ack = vec!["ACKJOB"];
    ack.extend(ids.iter().map(String::as_str));
    assert_eq!(c.cmd(&ack).int(), n as i64);
    // Nothing live on disk: the sealed segments go, at most the open one stays.
    assert!(
        wait_until(WAIT, POLL, || info(&mut c, "spill_live_bytes") == 0
            && segments(&s).len() <= 1),
        "segments left: {:?}",
        segments(&s)
    );
    assert_eq!(info(&mut c, "spilled_jobs"), 0);
}

#[test]
fn without_the_aof_a_restart_starts_clean() {
    let mut s = Server::start(ServerOpts::with_args(SPILL_ALWAYS));
    let mut c = s.client();
    fill(&mut c, "q", 400);
    assert!(!segments(&s).is_empty());
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
    assert_eq!(info(&mut c, "spilled_jobs"), 0);
    assert!(
        segments(&s).is_empty(),
        "old segments kept: {:?}",
        segments(&s)
    );
}

#[test]
fn aof_rewrite_and_kill9_keep_spilled_jobs() {
    let mut args = SPILL_ALWAYS.to_vec();
    // Jobs loaded from the AOF are queued again at once (not after RETRY).
    args.extend([
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-enqueue-jobs-once",
        "yes",
    ]);
    let mut s = Server::start(ServerOpts::with_args(&args));
    let mut c = s.client();
    let n = 600;
    let ids = fill(&mut c, "q", n);
    // The rewrite reads the spilled bodies from disk.
    let before = info(&mut c, "spilled_jobs");
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]).text(),
        "Background append only file rewriting started"
    );
    assert!(wait_until(WAIT, POLL, || {
        let p = c.cmd(&["INFO", "persistence"]).text();
        crate::harness::info_value(&p, "aof_rewrite_in_progress").as_deref() == Some("0")
            && crate::harness::info_value(&p, "aof_last_bgrewrite_status").as_deref() == Some("ok")
    }));
    assert_eq!(
        info(&mut c, "spilled_jobs"),
        before,
        "the rewrite paged jobs in"
    );
    // Ten more after the rewrite, then a crash.
    let mut ids = ids;
    for i in n..n + 10 {
        ids.push(addjob(&mut c, "q", &body(i), &[]));
    }
    s.kill9();
    s.restart();
    let mut c = s.client();
    let ok = wait_until(WAIT, POLL, || {
        c.cmd(&["QLEN", "q"]).int() == (n + 10) as i64
    });
    assert!(ok, "QLEN {} {}", c.cmd(&["QLEN", "q"]).int(), s.output());
    drain_in_order(&mut c, "q", &ids);
}

#[test]
fn a_failing_disk_pauses_spilling_and_loses_nothing() {
    let mut args = vec!["--http-port", "auto", "--http-bind", "127.0.0.1"];
    args.extend_from_slice(SPILL_ALWAYS);
    let s = Server::start(ServerOpts {
        file_size_limit: Some(32 * 1024),
        ..ServerOpts::with_args(&args)
    });
    let mut c = s.client();
    let n = 800;
    let ids: Vec<String> = (0..n).map(|i| addjob(&mut c, "q", &body(i), &[])).collect();
    assert!(wait_until(WAIT, POLL, || info(&mut c, "spill_io_errors") > 0));
    let status = c.cmd(&["INFO", "spill"]).text();
    assert!(
        status.contains("spill_status:paused: write-error"),
        "{status}"
    );
    assert!(
        status.contains("spill_last_error:Error writing the spill segment"),
        "{status}"
    );
    drain_in_order(&mut c, "q", &ids);
}

#[test]
fn a_corrupt_record_is_detected_and_never_served() {
    let s = Server::start(ServerOpts::with_args(SPILL_ALWAYS));
    let mut c = s.client();
    let n = 300;
    let ids = fill(&mut c, "q", n);
    // The first spilled job (the one after the head window) is the first
    // record of the first segment: damage its body.
    let seg = segments(&s)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[48 + 3] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let victim = &ids[HEAD];
    let r = c.cmd_raw(&["SHOW", victim]);
    assert!(
        String::from_utf8_lossy(&r)
            .starts_with("-ERR The job body is spilled to disk and could not be read back"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert!(info(&mut c, "spill_corrupt_records") >= 1);
    // Every other job comes back intact; the damaged one is left to
    // replicas (here there are none), never served with another body.
    let got = drain(&mut c, "q", n - 1);
    let mut want: Vec<usize> = (0..n).collect();
    want.remove(HEAD);
    for ((id, b), i) in got.iter().zip(want) {
        assert_eq!(id, &ids[i]);
        assert_eq!(b, body(i).as_bytes());
    }
    assert!(c.cmd(&["GETJOB", "NOHANG", "FROM", "q"]).is_nil());
}

/// GETJOB NOHANG drains a backlog on disk without an empty reply while
/// jobs are queued: a head on its way back from disk is waited for.
#[test]
fn nohang_never_answers_empty_while_jobs_are_queued_on_disk() {
    for args in [SPILL_ALWAYS, WHOLE] {
        let s = Server::start(ServerOpts::with_args(args));
        let mut c = s.client();
        let n = 1000;
        let ids = fill(&mut c, "q", n);
        // The first NOHANG takes the whole resident head and so sends the
        // next jobs' reads out; the second, in the same write, reaches the
        // node before they can land.
        let mut both = encode_cmd(&["GETJOB", "NOHANG", "COUNT", "10000", "FROM", "q"]);
        both.extend(encode_cmd(&[
            "GETJOB", "NOHANG", "COUNT", "64", "FROM", "q",
        ]));
        c.send_raw(&both);
        let mut pending = 2;
        let mut got = Vec::new();
        while got.len() < n {
            let r = if pending > 0 {
                pending -= 1;
                c.read_reply()
            } else {
                c.cmd(&["GETJOB", "NOHANG", "COUNT", "64", "FROM", "q"])
            };
            assert!(
                !r.is_nil(),
                "{args:?}: empty NOHANG with {} jobs queued",
                c.cmd(&["QLEN", "q"]).int()
            );
            for j in r.array() {
                let f = j.array();
                got.push(f[1].text());
                assert_eq!(f[2].text(), body(got.len() - 1));
            }
        }
        assert_eq!(got, ids, "{args:?}");
        assert!(info(&mut c, "spill_disk_reads") > 0);
        assert!(c.cmd(&["GETJOB", "NOHANG", "FROM", "q"]).is_nil());
    }
}

#[test]
fn spill_directives_show_in_config_get() {
    let s = Server::start(ServerOpts::with_args(&[
        "--spill",
        "yes",
        "--spill-max-disk",
        "10%",
        "--spill-dir",
        "cache",
    ]));
    let mut c = s.client();
    let r = c.cmd(&["CONFIG", "GET", "spill*"]);
    let a: Vec<String> = r.array().iter().map(|x| x.text()).collect();
    let get = |k: &str| a.iter().position(|x| x == k).map(|i| a[i + 1].clone());
    assert_eq!(get("spill").as_deref(), Some("yes"));
    assert_eq!(get("spill-max-disk").as_deref(), Some("10%"));
    assert_eq!(get("spill-watermark").as_deref(), Some("60"));
    assert_eq!(
        get("spill-dir").map(PathBuf::from),
        Some(s.dir().join("cache"))
    );
    assert!(s.dir().join("cache").is_dir());
    // Below the watermark nothing spills.
    for i in 0..300 {
        addjob(&mut c, "q", &body(i), &[]);
    }
    assert_eq!(info(&mut c, "spilled_jobs"), 0);
    assert!(info(&mut c, "spill_max_disk") > 0);
    let bad = c.cmd_raw(&["CONFIG", "SET", "spill", "no"]);
    assert!(
        bad.starts_with(b"-ERR"),
        "{}",
        String::from_utf8_lossy(&bad)
    );
}

#[test]
fn dequeue_enqueue_working_deljob_and_expiry_work_on_spilled_jobs() {
    let s = Server::start(ServerOpts::with_args(SPILL_ALWAYS));
    let mut c = s.client();
    let n = 300;
    let ids = fill(&mut c, "q", n);
    let x = &ids[n - 1];
    assert_eq!(c.cmd(&["DEQUEUE", x]).int(), 1);
    let shown = c.cmd(&["SHOW", x]);
    assert_eq!(shown.field("state").text(), "active");
    assert_eq!(shown.field("body").text(), body(n - 1));
    assert_eq!(c.cmd(&["ENQUEUE", x]).int(), 1);
    assert_eq!(c.cmd(&["SHOW", x]).field("state").text(), "queued");
    assert!(c.cmd(&["WORKING", x]).int() > 0);
    assert_eq!(c.cmd(&["ENQUEUE", x]).int(), 1);
    let gone = &ids[n - 2];
    assert_eq!(c.cmd(&["DELJOB", gone]).int(), 1);
    assert!(c.cmd(&["SHOW", gone]).is_nil());
    let got = drain(&mut c, "q", n - 1);
    let want: Vec<usize> = (0..n).filter(|&i| i != n - 2).collect();
    for ((id, b), i) in got.iter().zip(want) {
        assert_eq!(id, &ids[i]);
        assert_eq!(b, body(i).as_bytes());
    }
    // Spilled jobs that expire free their records like any other.
    for i in 0..200 {
        addjob(&mut c, "short", &body(i), &["TTL", "2"]);
    }
    assert!(wait_until(WAIT, POLL, || info(&mut c, "spilled_jobs")
        == (200 - HEAD) as i64));
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "short"]).int()
        == 0
        && info(&mut c, "spilled_jobs") == 0
        && info(&mut c, "spill_live_bytes") == 0));
}

#[test]
fn kill9_while_spilling_loses_nothing_with_the_aof() {
    let mut args = SPILL_ALWAYS.to_vec();
    args.extend([
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-enqueue-jobs-once",
        "yes",
    ]);
    let mut s = Server::start(ServerOpts::with_args(&args));
    let mut c = s.client();
    let n = 2000;
    let ids: Vec<String> = (0..n).map(|i| addjob(&mut c, "q", &body(i), &[])).collect();
    // No waiting for the spill writes: some are still in flight.
    s.kill9();
    s.restart();
    let mut c = s.client();
    let ok = wait_until(WAIT, POLL, || c.cmd(&["QLEN", "q"]).int() == n as i64);
    assert!(ok, "QLEN {}", c.cmd(&["QLEN", "q"]).int());
    drain_in_order(&mut c, "q", &ids);
}

#[test]
fn after_a_crash_jobs_loaded_active_spill_until_their_retry() {
    let mut args = SPILL_ALWAYS.to_vec();
    args.extend(["--appendonly", "yes", "--appendfsync", "always"]);
    let mut s = Server::start(ServerOpts::with_args(&args));
    let mut c = s.client();
    let n = 600;
    let ids: Vec<String> = (0..n)
        .map(|i| addjob(&mut c, "q", &body(i), &["RETRY", "2"]))
        .collect();
    s.kill9();
    s.restart();
    let mut c = s.client();
    // Back active (not queued) until their retry; their bodies go to
    // disk as they load rather than all stay in RAM.
    let loaded = wait_until(WAIT, POLL, || {
        c.cmd(&["INFO", "jobs"])
            .text()
            .contains(&format!("registered_jobs:{n}"))
    });
    assert!(loaded, "{}", s.output());
    assert!(wait_until(WAIT, POLL, || info(&mut c, "spilled_jobs") > (n / 2) as i64));
    let shown = c.cmd(&["SHOW", &ids[n - 1]]);
    assert_eq!(shown.field("body").text(), body(n - 1));
    // Their retry queues them; GETJOB reads every body back, in order.
    let ok = wait_until(WAIT, POLL, || c.cmd(&["QLEN", "q"]).int() == n as i64);
    assert!(ok, "QLEN {}", c.cmd(&["QLEN", "q"]).int());
    drain_in_order(&mut c, "q", &ids);
}

/// The same restart with whole jobs: the jobs loaded active leave RAM
/// whole as the AOF loads (their bodies alone would keep a record of
/// ~160 bytes each in RAM), those acknowledged before the crash stay
/// gone, and at their retry every other job is queued and delivered in
/// order with its body.
#[test]
fn after_a_crash_jobs_loaded_active_leave_ram_whole_until_their_retry() {
    let mut args = WHOLE.to_vec();
    args.extend(["--appendonly", "yes", "--appendfsync", "always"]);
    let mut s = Server::start(ServerOpts::with_args(&args));
    let mut c = s.client();
    // RETRY 10: the copies must still be on disk, seconds after the load,
    // when the first wait below sees them all there.
    let n = 600;
    let acked = 100;
    let ids: Vec<String> = (0..n)
        .map(|i| addjob(&mut c, "q", &body(i), &["RETRY", "10"]))
        .collect();
    let mut ack = vec!["ACKJOB"];
    ack.extend(ids[..acked].iter().map(String::as_str));
    assert_eq!(c.cmd(&ack).int(), acked as i64);
    s.kill9();
    s.restart();
    let mut c = s.client();
    let back = (n - acked) as i64;
    assert!(
        wait_until(WAIT, POLL, || info(&mut c, "spilled_whole_copies") == back),
        "{} of {back} whole on disk; {}",
        info(&mut c, "spilled_whole_copies"),
        s.output()
    );
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0, "queued before their retry");
    assert_eq!(c.info_int("registered_jobs"), back, "jobs on disk count");
    assert!(
        c.cmd(&["SHOW", &ids[0]]).is_nil(),
        "an acknowledged job came back"
    );
    let shown = c.cmd(&["SHOW", &ids[n - 1]]);
    assert_eq!(shown.field("body").text(), body(n - 1));
    // Queued at their retry, ten seconds after the load: more than WAIT.
    let ok = wait_until(3 * WAIT, POLL, || c.cmd(&["QLEN", "q"]).int() == back);
    assert!(ok, "QLEN {}", c.cmd(&["QLEN", "q"]).int());
    let got = drain(&mut c, "q", n - acked);
    for (k, (id, b)) in got.iter().enumerate() {
        let i = acked + k;
        assert_eq!(id, &ids[i], "job {i} out of order");
        assert_eq!(b, body(i).as_bytes());
    }
}

/// Pipelined ADDJOBs: `n` jobs of about 1 KiB; their replies in order
/// (job IDs, or the text of an error).
fn fill_pipelined(c: &mut Client, q: &str, n: usize) -> Vec<String> {
    let big = |i: usize| format!("{i:06}-{}", "y".repeat(1010));
    let mut ids = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        for &i in chunk {
            c.send(&["ADDJOB", q, &big(i), "0"]);
        }
        for _ in chunk {
            ids.push(c.read_reply().text());
        }
    }
    ids
}

#[test]
fn a_mostly_dead_segment_is_compacted_and_its_stragglers_survive() {
    compaction_keeps_stragglers(SPILL_ALWAYS);
}

#[test]
fn a_mostly_dead_segment_of_whole_jobs_is_compacted_too() {
    compaction_keeps_stragglers(WHOLE);
}

/// With the AOF on, a kill -9 once compaction has started moving records
/// loses no straggler and brings back no acknowledged job: the segments
/// are a cache of what the AOF holds.
#[test]
fn kill9_during_compaction_loses_nothing_with_the_aof() {
    let mut args = SPILL_ALWAYS.to_vec();
    args.extend(["--appendonly", "yes", "--aof-enqueue-jobs-once", "yes"]);
    compaction_keeps_stragglers_ext(&args, true);
}

fn compaction_keeps_stragglers(args: &[&str]) {
    compaction_keeps_stragglers_ext(args, false);
}

/// `kill9`: kill the node as soon as compaction moved a record, restart
/// it, and check the stragglers there.
fn compaction_keeps_stragglers_ext(args: &[&str], kill9: bool) {
    let mut s = Server::start(ServerOpts::with_args(args));
    let mut c = s.client();
    // A little over two 64 MiB segments of bodies.
    let n = 140_000;
    let ids = fill_pipelined(&mut c, "q", n);
    assert!(wait_until(WAIT * 3, POLL, || info(&mut c, "spilled_jobs")
        == (n - HEAD) as i64));
    assert!(segments(&s).len() >= 3, "{:?}", segments(&s));
    // Acknowledge all but every 50th job: the sealed segments are mostly dead.
    let keep: Vec<usize> = (0..n).filter(|i| i % 50 == 0).collect();
    let gone: Vec<&str> = (0..n)
        .filter(|i| i % 50 != 0)
        .map(|i| ids[i].as_str())
        .collect();
    for chunk in gone.chunks(1000) {
        let mut cmd = vec!["ACKJOB"];
        cmd.extend_from_slice(chunk);
        assert_eq!(c.cmd(&cmd).int(), chunk.len() as i64);
    }
    if kill9 {
        assert!(
            wait_until(WAIT * 3, POLL, || info(&mut c, "spill_records_moved") > 0),
            "{}",
            c.cmd(&["INFO", "spill"]).text()
        );
        s.kill9();
        s.restart();
        c = s.client();
        assert!(
            wait_until(WAIT * 3, POLL, || c.cmd(&["QLEN", "q"]).int()
                == keep.len() as i64),
            "QLEN {} after the restart, {} stragglers",
            c.cmd(&["QLEN", "q"]).int(),
            keep.len()
        );
        for i in [1, 49, 51, n - 1] {
            assert!(c.cmd(&["SHOW", &ids[i]]).is_nil(), "acked job {i} is back");
        }
    } else {
        assert!(
            wait_until(WAIT * 3, POLL, || info(&mut c, "spill_compactions") > 0
                && info(&mut c, "spill_segments_deleted") > 0
                && info(&mut c, "spill_disk_bytes")
                    <= 2 * info(&mut c, "spill_live_bytes") + (64 << 20)),
            "{}",
            c.cmd(&["INFO", "spill"]).text()
        );
        assert!(info(&mut c, "spill_records_moved") > 0);
    }
    // The stragglers come back with their own bodies.
    let got = drain(&mut c, "q", keep.len());
    for ((id, b), i) in got.iter().zip(keep) {
        assert_eq!(id, &ids[i]);
        assert!(b.starts_with(format!("{i:06}-").as_bytes()), "job {i}");
        assert_eq!(b.len(), 1017);
    }
}

/// `spill-whole-jobs yes`: plain jobs past the head window leave RAM whole.
const WHOLE: &[&str] = &[
    "--spill",
    "yes",
    "--spill-watermark",
    "0",
    "--spill-whole-jobs",
    "yes",
];

/// A node spilling whole jobs, with the AOF on and the controlled-restart
/// recipe set (queued jobs come back queued).
fn whole_with_aof() -> Server {
    let mut args = WHOLE.to_vec();
    args.extend(["--appendonly", "yes", "--aof-enqueue-jobs-once", "yes"]);
    Server::start(ServerOpts::with_args(&args))
}

/// Whole jobs on disk with the AOF on: kill -9 brings every job back
/// from the ADDJOBs' records, and an AOF rewrite writes the jobs on disk
/// into the new file from the segments (a rewrite that left them out
/// would lose them at the next restart).
#[test]
fn whole_jobs_on_disk_survive_kill9_and_aof_rewrites() {
    let mut s = whole_with_aof();
    let mut c = s.client();
    let n = 1000;
    let ids = fill(&mut c, "q", n);
    let cold = (n - HEAD) as i64;
    assert_eq!(info(&mut c, "spilled_whole_jobs"), cold);
    s.kill9();
    s.restart();
    c = s.client();
    assert!(
        wait_until(WAIT, POLL, || c.cmd(&["QLEN", "q"]).int() == n as i64
            && info(&mut c, "spilled_whole_jobs") == cold),
        "QLEN {}, {} whole jobs on disk after the restart",
        c.cmd(&["QLEN", "q"]).int(),
        info(&mut c, "spilled_whole_jobs")
    );
    // Acknowledge the first 100 (resident) jobs, then rewrite: the new
    // file holds the other 900, 872 of them read from the segments.
    for id in &ids[..100] {
        assert_eq!(c.cmd(&["FASTACK", id]).int(), 1);
    }
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]).text(),
        "Background append only file rewriting started"
    );
    assert!(wait_until(WAIT, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"));
    assert_eq!(c.info_field("aof_last_bgrewrite_status"), "ok");
    let aof = std::fs::read(s.dir().join("disque.aof")).expect("the AOF");
    let loadjobs = aof.windows(7).filter(|w| w == b"LOADJOB").count();
    assert_eq!(loadjobs, n - 100, "LOADJOB records in the rewritten file");
    s.kill9();
    s.restart();
    c = s.client();
    assert!(wait_until(WAIT, POLL, || c.cmd(&["QLEN", "q"]).int()
        == (n - 100) as i64));
    let got = drain(&mut c, "q", n - 100);
    for (k, (id, b)) in got.iter().enumerate() {
        assert_eq!(id, &ids[100 + k], "job {} out of order", 100 + k);
        assert_eq!(b, body(100 + k).as_bytes());
    }
}

/// The replay of an AOF holding a backlog far larger than maxmemory
/// spills as it goes (whole jobs, or bodies where a job does not fit its
/// queue's runs): RAM never holds the backlog, and every job comes back.
#[test]
fn an_aof_replay_with_whole_jobs_spills_as_it_goes() {
    let mut args = WHOLE.to_vec();
    args.extend([
        "--appendonly",
        "yes",
        "--aof-enqueue-jobs-once",
        "yes",
        "--maxmemory",
        "32mb",
    ]);
    // Not queue tails at once (watermark 0) but at the default level, so
    // the replay starts under the watermark and keeps the first jobs.
    let args: Vec<&str> = args
        .chunks(2)
        .filter(|kv| kv[0] != "--spill-watermark")
        .flatten()
        .copied()
        .collect();
    let mut s = Server::start(ServerOpts::with_args(&args));
    let mut c = s.client();
    let n = 120_000;
    let ids = fill_pipelined(&mut c, "q", n / 2);
    // A rewrite in the middle: the file no longer lists jobs in
    // creation order.
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]).text(),
        "Background append only file rewriting started"
    );
    let more = fill_pipelined(&mut c, "q", n / 2);
    assert!(wait_until(WAIT * 3, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"));
    s.kill9();
    s.restart();
    c = s.client();
    assert!(
        wait_until(WAIT * 3, POLL, || c.cmd(&["QLEN", "q"]).int() == n as i64),
        "QLEN {}",
        c.cmd(&["QLEN", "q"]).int()
    );
    // 120,000 bodies are ~120 MB: a replay into RAM peaks there.
    let peak = c.info_int("used_memory_peak");
    assert!(peak < 80 << 20, "used_memory_peak {peak} during the replay");
    assert!(info(&mut c, "spilled_whole_jobs") > 0);
    for id in [&ids[0], &ids[n / 2 - 1], &more[0], &more[n / 2 - 1]] {
        assert!(!c.cmd(&["SHOW", id]).is_nil(), "{id} missing");
    }
}

/// Jobs acknowledged after their ADDJOB and before the next rewrite have
/// both records in the AOF (LOADJOB, then DELJOB). A replay that sends the
/// jobs to disk whole before it meets their DELJOBs must still delete
/// them: an acknowledged job never comes back.
#[test]
fn acknowledged_jobs_stay_gone_after_a_replay_with_whole_jobs() {
    let mut s = whole_with_aof();
    let mut c = s.client();
    let n = 4000;
    let ids = fill(&mut c, "q", n);
    for id in ids.iter().step_by(2) {
        assert_eq!(c.cmd(&["ACKJOB", id]).int(), 1, "{id}");
    }
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), (n / 2) as i64);
    s.kill9();
    s.restart();
    c = s.client();
    assert!(
        wait_until(WAIT, POLL, || c.cmd(&["PING"]).text() == "PONG"),
        "still loading"
    );
    assert!(info(&mut c, "spilled_whole_jobs") > 0);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), (n / 2) as i64);
    for (i, id) in ids.iter().enumerate().take(20) {
        assert_eq!(c.cmd(&["SHOW", id]).is_nil(), i % 2 == 0, "{id}");
    }
}

#[test]
fn whole_jobs_on_disk_answer_every_command() {
    let s = Server::start(ServerOpts::with_args(WHOLE));
    let mut c = s.client();
    let n = 1000;
    let ids = fill(&mut c, "q", n);
    assert_eq!(info(&mut c, "spilled_whole_jobs"), (n - HEAD) as i64);
    assert!(info(&mut c, "spill_whole_table_bytes") > 0);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), n as i64);
    // QPEEK from both ends reads the jobs it shows back, and only those.
    let reads = info(&mut c, "spill_disk_reads");
    let newest = c.cmd(&["QPEEK", "q", "-3"]);
    assert_eq!(newest.array().len(), 3);
    assert!(info(&mut c, "spill_disk_reads") - reads <= 3);
    for (k, j) in newest.array().iter().enumerate() {
        assert_eq!(j.array()[1].text(), ids[n - 1 - k]);
        assert_eq!(j.array()[2].text(), body(n - 1 - k));
    }
    let oldest = c.cmd(&["QPEEK", "q", "200"]);
    assert_eq!(oldest.array().len(), 200);
    for (k, j) in oldest.array().iter().enumerate() {
        assert_eq!(j.array()[1].text(), ids[k]);
    }
    // JSCAN walks the job table, then the jobs on disk: every job once
    // at least, each with its own body.
    let index: HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut seen = vec![false; n];
    let mut cursor = "0".to_string();
    loop {
        let r = c.cmd(&[
            "JSCAN", &cursor, "COUNT", "300", "QUEUE", "q", "REPLY", "ALL",
        ]);
        for j in r.array()[1].array() {
            let i = index[j.field("id").text().as_str()];
            assert_eq!(j.field("body").text(), body(i));
            assert_eq!(j.field("state").text(), "queued");
            seen[i] = true;
        }
        cursor = r.array()[0].text();
        if cursor == "0" {
            break;
        }
    }
    assert!(seen.iter().all(|&s| s), "JSCAN missed jobs");
    let other = c.cmd(&["JSCAN", "0", "COUNT", "2000", "BUSYLOOP", "QUEUE", "nope"]);
    assert!(other.array()[1].array().is_empty());
    // Commands naming a job on disk read it back first.
    let shown = c.cmd(&["SHOW", &ids[n - 10]]);
    assert_eq!(shown.field("body").text(), body(n - 10));
    assert_eq!(shown.field("state").text(), "queued");
    assert_eq!(c.cmd(&["ACKJOB", &ids[n - 20]]).int(), 1);
    assert_eq!(c.cmd(&["DEQUEUE", &ids[n - 30]]).int(), 1);
    assert_eq!(
        c.cmd(&["SHOW", &ids[n - 30]]).field("state").text(),
        "active"
    );
    assert_eq!(c.cmd(&["ENQUEUE", &ids[n - 30]]).int(), 1);
    assert_eq!(c.cmd(&["DELJOB", &ids[n - 40]]).int(), 1);
    assert!(c.cmd(&["SHOW", &ids[n - 40]]).is_nil());
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), (n - 2) as i64);
    // GETJOB brings the rest back in order.
    let got = drain(&mut c, "q", n - 2);
    let want: Vec<usize> = (0..n).filter(|&i| i != n - 20 && i != n - 40).collect();
    for (k, ((id, b), i)) in got.iter().zip(want).enumerate() {
        let at = ids.iter().position(|x| x == id);
        assert_eq!(id, &ids[i], "job {k} (#{i}): got #{at:?}");
        assert_eq!(b, body(i).as_bytes());
    }
    assert_eq!(info(&mut c, "spilled_whole_jobs"), 0);
    assert!(wait_until(WAIT, POLL, || info(&mut c, "spill_live_bytes") == 0));
}

/// Two nodes started with `args`, met and fully meshed, and a client of
/// each.
/// `n` nodes started with `args`, joined into one cluster.
fn joined(n: usize, args: &[&str]) -> Vec<Server> {
    let nodes: Vec<Server> = (0..n)
        .map(|_| Server::start(ServerOpts::with_args(args)))
        .collect();
    let mut c = nodes[0].client();
    for s in &nodes[1..] {
        let r = c.cmd(&["CLUSTER", "MEET", "127.0.0.1", &s.port().to_string()]);
        assert_eq!(r, Reply::Status("OK".into()));
    }
    crate::cluster::wait_full_mesh(&nodes);
    nodes
}

fn pair(args: &[&str]) -> (Vec<Server>, Client, Client) {
    let nodes = joined(2, args);
    let ca = nodes[0].client();
    let cb = nodes[1].client();
    (nodes, ca, cb)
}

/// Federation moves a backlog on disk like one in RAM: a node that is
/// leaving hands every job to the consumers of another node, with its
/// body, the ones on disk included (read back as they are asked for).
#[test]
fn a_leaving_node_hands_over_its_jobs_on_disk() {
    for args in [SPILL_ALWAYS, WHOLE] {
        let (_nodes, mut ca, mut cb) = pair(args);
        let n = 1000;
        let ids = fill(&mut ca, "q", n);
        assert_eq!(ca.cmd(&["CLUSTER", "LEAVING", "yes"]).text(), "OK");
        let mut got: HashMap<String, String> = HashMap::new();
        let mut empty = 0;
        while got.len() < n {
            let r = cb.cmd(&["GETJOB", "TIMEOUT", "3000", "COUNT", "100", "FROM", "q"]);
            if r.is_nil() {
                empty += 1;
                assert!(
                    empty < 3,
                    "{args:?}: {} of {n} jobs moved, {} left on the leaving node",
                    got.len(),
                    ca.cmd(&["QLEN", "q"]).int()
                );
                continue;
            }
            for j in r.array() {
                let f = j.array();
                got.insert(f[1].text(), f[2].text());
            }
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                got.get(id).map(String::as_str),
                Some(body(i).as_str()),
                "{args:?}"
            );
        }
        assert_eq!(ca.cmd(&["QLEN", "q"]).int(), 0, "{args:?}");
    }
}

#[test]
fn whole_jobs_on_disk_expire_and_replicas_ack_them() {
    // Two nodes: the origin queues each job (its tail spills whole), the
    // replica holds an active copy. An ACKJOB on the replica reaches the
    // copy on the origin's disk (the bus message waits for it to be read
    // back); expiry frees the rest.
    let (_nodes, mut ca, mut cb) = pair(WHOLE);
    let n = 400;
    let ids: Vec<String> = (0..n)
        .map(|i| addjob(&mut ca, "r", &body(i), &["REPLICATE", "2", "RETRY", "60"]))
        .collect();
    let want = (n - HEAD) as i64;
    assert!(wait_until(WAIT, POLL, || info(
        &mut ca,
        "spilled_whole_jobs"
    ) == want));
    let mut ack = vec!["ACKJOB"];
    ack.extend(ids.iter().map(String::as_str));
    assert_eq!(cb.cmd(&ack).int(), n as i64);
    assert!(
        wait_until(WAIT, POLL, || ca.cmd(&["QLEN", "r"]).int() == 0
            && info(&mut ca, "spilled_whole_jobs") == 0),
        "the origin still queues {} jobs",
        ca.cmd(&["QLEN", "r"]).int()
    );
    assert!(ca.cmd(&["GETJOB", "NOHANG", "FROM", "r"]).is_nil());
    // Whole jobs on disk expire (replicated here: the other node's
    // messages about them read them back meanwhile).
    let written = info(&mut cb, "spill_jobs_written");
    for i in 0..300 {
        addjob(&mut cb, "short", &body(i), &["TTL", "4"]);
    }
    assert!(wait_until(WAIT, POLL, || info(
        &mut cb,
        "spill_jobs_written"
    ) >= written
        + (300 - HEAD) as i64));
    assert!(wait_until(WAIT, POLL, || cb.cmd(&["QLEN", "short"]).int()
        == 0
        && info(&mut cb, "spilled_whole_jobs") == 0
        && info(&mut cb, "spill_live_bytes") == 0));
}

/// A replica asks the origin about each job once per RETRY (WILLQUEUE);
/// the origin answers from what it keeps in RAM of a job on disk, so its
/// cold backlog stays on disk, and the replica does not queue its copy.
#[test]
fn replicas_asking_about_whole_jobs_on_disk_leave_them_there() {
    let (_nodes, mut ca, mut cb) = pair(WHOLE);
    let n = 300;
    let ids: Vec<String> = (0..n)
        .map(|i| addjob(&mut ca, "w", &body(i), &["REPLICATE", "2", "RETRY", "1"]))
        .collect();
    let cold = (n - HEAD) as i64;
    assert!(wait_until(WAIT, POLL, || info(
        &mut ca,
        "spilled_whole_jobs"
    ) == cold));
    let reads = info(&mut ca, "spill_disk_reads");
    let received = |c: &mut Client| {
        let r = c.cmd(&["CLUSTER", "INFO"]).text();
        r.lines()
            .find_map(|l| l.strip_prefix("cluster_stats_messages_received:"))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0)
    };
    // Two RETRY periods' WILLQUEUEs have reached the origin.
    let base = received(&mut ca);
    assert!(wait_until(WAIT, POLL, || received(&mut ca) >= base + 2 * cold));
    assert_eq!(info(&mut ca, "spill_disk_reads"), reads, "jobs read back");
    assert_eq!(info(&mut ca, "spilled_whole_jobs"), cold);
    assert_eq!(cb.cmd(&["QLEN", "w"]).int(), 0, "the replica queued copies");
    // Acknowledged as they come: with RETRY 1 a job left active would be
    // queued again by its replica.
    let mut got = Vec::new();
    while got.len() < n {
        let r = ca.cmd(&["GETJOB", "TIMEOUT", "2000", "COUNT", "50", "FROM", "w"]);
        assert!(!r.is_nil(), "GETJOB timed out after {} jobs", got.len());
        let mut ack = vec!["ACKJOB".to_string()];
        for j in r.array() {
            let f = j.array();
            ack.push(f[1].text());
            got.push((f[1].text(), f[2].text()));
        }
        let ack: Vec<&str> = ack.iter().map(String::as_str).collect();
        ca.cmd(&ack);
    }
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(got[i], (id.clone(), body(i)), "job {i}");
    }
}

/// A replica's copies (active, waiting for their RETRY) leave RAM whole,
/// come back for each retry and go back to disk once the origin answers
/// QUEUED; an acknowledgement drops them; when the origin dies the rest
/// are queued from there, every job with its body and none acknowledged.
#[test]
fn replicas_copies_leave_ram_whole_and_are_requeued_when_the_origin_dies() {
    let mut args = WHOLE.to_vec();
    args.extend(["--cluster-node-timeout", "2000"]);
    let mut nodes = joined(3, &args);
    let mut ca = nodes[0].client();
    let mut cb = nodes[1].client();
    let n = 200;
    let ids: Vec<String> = (0..n)
        .map(|i| addjob(&mut ca, "c", &body(i), &["REPLICATE", "3", "RETRY", "6"]))
        .collect();
    let all = n as i64;
    assert!(wait_until(WAIT, POLL, || info(
        &mut cb,
        "spilled_whole_copies"
    ) == all));
    assert_eq!(info(&mut cb, "spill_disk_reads"), 0);
    // One RETRY later the copies came back for their retry (each read
    // once), the origin said QUEUED, and they went back to disk.
    assert!(wait_until(WAIT, POLL, || info(&mut cb, "spill_disk_reads")
        >= all
        && info(&mut cb, "spilled_whole_copies") == all));
    assert_eq!(cb.cmd(&["QLEN", "c"]).int(), 0, "the replica queued copies");
    // The first 50 are acknowledged at the origin: the replicas drop their
    // copies and never queue them. They went back to disk just now, so a
    // copy still there is dropped from its slot, without a read; one the
    // other replica's WILLQUEUE brought back meanwhile (their timers drift
    // apart on a loaded machine) is dropped from RAM.
    let reads = info(&mut cb, "spill_disk_reads");
    let acked = 50;
    let mut ack = vec!["ACKJOB"];
    ack.extend(ids[..acked].iter().map(String::as_str));
    assert_eq!(ca.cmd(&ack).int(), acked as i64);
    assert!(wait_until(WAIT, POLL, || info(
        &mut cb,
        "spilled_whole_copies"
    ) <= all - acked as i64));
    let on_disk = info(&mut cb, "spill_copies_acked_on_disk");
    let read = info(&mut cb, "spill_disk_reads") - reads;
    assert!(
        on_disk > 0 && on_disk + read >= acked as i64,
        "{on_disk} acknowledged on disk, {read} copies read back meanwhile"
    );
    // The origin dies: once the other two agree it failed, a replica
    // queues each copy at its next retry (GETJOB here pulls those queued
    // on the third node).
    nodes[0].kill9();
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while got.len() < n - acked {
        assert!(
            std::time::Instant::now() < deadline,
            "{} jobs delivered after the origin died",
            got.len()
        );
        let r = cb.cmd(&["GETJOB", "TIMEOUT", "2000", "COUNT", "50", "FROM", "c"]);
        if r.is_nil() {
            continue;
        }
        let mut ack = vec!["FASTACK".to_string()];
        for j in r.array() {
            let f = j.array();
            ack.push(f[1].text());
            got.push((f[1].text(), f[2].text()));
        }
        let ack: Vec<&str> = ack.iter().map(String::as_str).collect();
        cb.cmd(&ack);
    }
    got.sort();
    let mut want: Vec<(String, String)> = ids
        .iter()
        .enumerate()
        .skip(acked)
        .map(|(i, id)| (id.clone(), body(i)))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn the_dashboard_shows_and_deletes_whole_jobs_on_disk() {
    let mut args = WHOLE.to_vec();
    args.extend_from_slice(&["--http-port", "auto", "--http-bind", "127.0.0.1"]);
    let s = Server::start(ServerOpts::with_args(&args));
    let p = s.http_port();
    let mut c = s.client();
    let n = 400;
    let ids = fill(&mut c, "q", n);
    assert_eq!(info(&mut c, "spilled_whole_jobs"), (n - HEAD) as i64);
    let path = |id: &str| id.replace('+', "%2B").replace('/', "%2F");
    // The job page reads the job back, the way SHOW over RESP does.
    let (st, shown) = crate::observe::get(p, &format!("/api/jobs/{}", path(&ids[n - 5])));
    assert_eq!(st, 200, "{shown}");
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(shown["result"]["body"], body(n - 5));
    assert_eq!(shown["result"]["state"], "queued");
    let (st, _) = crate::observe::http(
        p,
        "POST",
        &format!("/api/jobs/{}/delete", path(&ids[n - 6])),
        &[("X-Disque-Action", "1")],
        "",
    );
    assert_eq!(st, 200);
    assert!(c.cmd(&["SHOW", &ids[n - 6]]).is_nil());
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), (n - 1) as i64);
}

/// Jobs of 60 KB on a 64 MB node: none refused while the disk has room,
/// whole or bodies only, and draining three queues keeps memory near
/// maxmemory (a read-ahead of 512 such jobs a queue took it to 100 MB).
#[test]
fn large_bodies_are_neither_refused_nor_read_back_past_maxmemory() {
    for whole in ["yes", "no"] {
        fill_and_drain_under_64mb(whole, 3, 60 << 10, 500);
    }
}

/// 40 queues of 16 KB jobs on a 64 MB node: their head windows of 128
/// jobs alone would be 80 MB, so the windows shrink instead of the node
/// refusing jobs.
#[test]
fn many_queues_of_large_bodies_shrink_their_head_windows() {
    fill_and_drain_under_64mb("yes", 40, 16 << 10, 160);
}

/// `queues` queues filled round-robin with `per` jobs of `size`-byte
/// bodies each, at the disk's pace, then drained over all of them in
/// order: no -OOM, every body back, used_memory_peak under maxmemory.
fn fill_and_drain_under_64mb(whole: &str, queues: usize, size: usize, per: usize) {
    let s = Server::start(ServerOpts::with_args(&[
        "--spill",
        "yes",
        "--spill-whole-jobs",
        whole,
        "--maxmemory",
        "64mb",
    ]));
    let mut c = s.client();
    let names: Vec<String> = (0..queues).map(|q| format!("big{q}")).collect();
    let body = |q: usize, i: usize| format!("{q}-{i:05}-{}", "z".repeat(size));
    for i in 0..per {
        for (q, name) in names.iter().enumerate() {
            c.send(&["ADDJOB", name, &body(q, i), "0"]);
        }
        for _ in &names {
            let r = c.read_reply();
            assert!(
                r.as_text().is_some_and(|t| t.starts_with("D-")),
                "whole {whole}: job {i}: {r:?}"
            );
        }
        // As fast as the disk goes, not faster: memory passes the
        // watermark while the disk has nothing to do.
        if i % (30 / queues).max(1) == 0 {
            assert!(wait_until(WAIT, POLL, || info(
                &mut c,
                "spill_pending_writes"
            ) == 0));
        }
    }
    assert!(info(&mut c, "spilled_jobs") > 0);
    let mut next = vec![0usize; queues];
    let mut getjob = vec!["GETJOB", "NOHANG", "COUNT", "20", "FROM"];
    getjob.extend(names.iter().map(String::as_str));
    let deadline = std::time::Instant::now() + WAIT * 3;
    while next.iter().sum::<usize>() < per * queues {
        assert!(
            std::time::Instant::now() < deadline,
            "whole {whole}: {next:?} delivered of {per} a queue"
        );
        let r = c.cmd(&getjob);
        if r.is_nil() {
            continue;
        }
        let mut ack = vec!["ACKJOB".to_string()];
        for j in r.array() {
            let f = j.array();
            let q = names.iter().position(|n| *n == f[0].text()).unwrap_or(0);
            assert_eq!(f[2].text(), body(q, next[q]), "whole {whole}: out of order");
            next[q] += 1;
            ack.push(f[1].text());
        }
        c.cmd(&ack);
    }
    let peak = c.info_int("used_memory_peak");
    assert!(peak < 64 << 20, "whole {whole}: used_memory_peak {peak}");
}

/// A producer faster than a slow disk (each spill write delayed 200 ms)
/// waits for the writes to land instead of failing with -OOM at 95 % of
/// maxmemory; a disk slower than the wait's bound (3 s a write) still
/// gets the producer its -OOM after about a second, never a hang, and
/// nothing accepted is lost.
#[test]
fn producers_wait_for_a_slow_disk_instead_of_failing() {
    let s = small_spilling_node();
    let mut c = s.client();
    disk_fault(&mut c, &["slow-writes", "200"]);
    let replies = fill_until_memory_waits(&mut c, "q");
    let n = replies.len();
    let refused: Vec<(usize, &String)> = replies
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.starts_with("D-"))
        .take(3)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    assert_eq!(c.info_int("refused_oom"), 0);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), n as i64);

    // Writes of 3 s: a wait of 1 s ends first, with -OOM.
    disk_fault(&mut c, &["slow-writes", "3000"]);
    let mut accepted = n;
    let started = std::time::Instant::now();
    let mut waited = None;
    while waited.is_none() {
        assert!(
            started.elapsed() < WAIT * 3,
            "no -OOM with a disk this slow"
        );
        let sent = std::time::Instant::now();
        let r = c.cmd(&["ADDJOB", "q", &"v".repeat(1024), "0"]);
        if r.is_error() {
            assert!(format!("{r:?}").contains("OOM"), "{r:?}");
            waited = Some(sent.elapsed());
        } else {
            accepted += 1;
        }
    }
    let waited = waited.unwrap_or_default();
    assert!(
        waited >= std::time::Duration::from_millis(900) && waited < WAIT,
        "-OOM after {waited:?}"
    );
    assert!(c.info_int("refused_oom") >= 1);
    disk_fault(&mut c, &["none"]);
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), accepted as i64);
    // Once the disk catches up, producers are served again.
    assert!(wait_until(WAIT, POLL, || !c
        .cmd(&["ADDJOB", "q", "after", "0"])
        .is_error()));
}

/// A producer that disconnects while its pipeline waits for the disk: the
/// waiting command and those behind it never run, even if the disk frees
/// memory right after (the job of a producer that left would be added
/// without anyone knowing its ID, and the producer would add it again).
#[test]
fn a_producer_that_leaves_while_waiting_for_the_disk_adds_nothing() {
    use std::io::Write;
    let s = small_spilling_node();
    let mut c = s.client();
    disk_fault(&mut c, &["slow-writes", "200"]);
    fill_until_memory_waits(&mut c, "q");
    // The disk stalls: once one ADDJOB has waited and been refused,
    // memory is at the limit and stays there.
    disk_fault(&mut c, &["slow-writes", "60000"]);
    assert!(
        wait_until(WAIT * 2, POLL, || c
            .cmd(&["ADDJOB", "q", &"z".repeat(1024), "0"])
            .is_error()),
        "memory never reached the limit"
    );
    let waits = info(&mut c, "spill_memory_waits");
    let mut wire = Vec::new();
    for i in 0..40 {
        let b = format!("{i:06}-{}", "y".repeat(1010));
        wire.extend_from_slice(&encode_cmd(&["ADDJOB", "gone", &b, "0"]));
    }
    let mut ghost = std::net::TcpStream::connect(s.addr()).expect("connect");
    ghost.set_write_timeout(Some(WAIT)).expect("write timeout");
    ghost.write_all(&wire).expect("send the pipeline");
    assert!(
        wait_until(WAIT, POLL, || info(&mut c, "spill_memory_waits") > waits),
        "the producer never waited"
    );
    assert_eq!(c.cmd(&["QLEN", "gone"]).int(), 0);
    drop(ghost);
    // The disk recovers at once: the waiting command is woken while its
    // client is gone.
    disk_fault(&mut c, &["none"]);
    assert!(
        wait_until(WAIT, POLL, || c.info_int("connected_clients") == 1),
        "the producer's connection outlived it"
    );
    assert!(wait_until(WAIT, POLL, || !c
        .cmd(&["ADDJOB", "other", "after", "0"])
        .is_error()));
    assert_eq!(c.cmd(&["QLEN", "gone"]).int(), 0);
}

/// Pipeline 1 KiB jobs into `q`, 5,000 at a time, until the producer has
/// had to wait for the disk at least once (memory at 95 % of maxmemory
/// with writes in flight); every reply. How many jobs that takes depends
/// on how fast this machine runs the client against the delayed writes
/// (a fixed 40,000 against 50 ms writes once never waited on a loaded
/// machine).
fn fill_until_memory_waits(c: &mut Client, q: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + WAIT * 3;
    let mut replies = Vec::new();
    while info(c, "spill_memory_waits") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the producer never had to wait ({} jobs sent)",
            replies.len()
        );
        replies.extend(fill_pipelined(c, q, 5_000));
    }
    replies
}

/// A node with the spill tier on (default watermark) under maxmemory 32 MB.
fn small_spilling_node() -> Server {
    Server::start(ServerOpts::with_args(&[
        "--spill",
        "yes",
        "--maxmemory",
        "32mb",
    ]))
}

fn disk_fault(c: &mut Client, args: &[&str]) {
    let mut cmd = vec!["DEBUG", "DISK-FAULT"];
    cmd.extend_from_slice(args);
    assert_eq!(c.cmd(&cmd), Reply::Status("OK".into()));
}

/// kill -9 of a node (no AOF) whose queue tail is on its disk: the other
/// two nodes hold copies (REPLICATE 3), spilled while they wait for their
/// retry, queue them once it is marked failing, and deliver every job
/// with its body.
#[test]
fn jobs_on_the_disk_of_a_killed_node_come_back_from_their_replicas() {
    for spill in [SPILL_ALWAYS, WHOLE] {
        // The copies are queued once the killed node is marked failing.
        let args = [spill, &["--cluster-node-timeout", "1000"]].concat();
        let mut nodes = joined(3, &args);
        let mut a = nodes[0].client();
        let n = 600;
        let ids: Vec<String> = (0..n)
            .map(|i| addjob(&mut a, "q", &body(i), &["REPLICATE", "3", "RETRY", "1"]))
            .collect();
        let want = (n - HEAD) as i64;
        assert!(
            wait_until(WAIT, POLL, || info(&mut a, "spilled_jobs") == want),
            "{args:?}: spilled_jobs {} != {want}",
            info(&mut a, "spilled_jobs")
        );
        drop(a);
        let mut consumers: Vec<Client> = nodes[1..].iter().map(Server::client).collect();
        // The replicas' copies wait for their retry: parked, they spill
        // too (they would otherwise hold every body in RAM).
        for c in &mut consumers {
            assert!(
                wait_until(WAIT, POLL, || info(c, "spilled_jobs") == n as i64),
                "{args:?}: a replica spilled {} of its {n} copies",
                info(c, "spilled_jobs")
            );
        }
        nodes[0].kill9();
        // The copies are queued again after their retry, and spill there.
        let queued = |cs: &mut Vec<Client>| -> i64 {
            cs.iter_mut().map(|c| c.cmd(&["QLEN", "q"]).int()).sum()
        };
        assert!(
            wait_until(WAIT, POLL, || queued(&mut consumers) >= n as i64),
            "{args:?}: {} of {n} jobs queued again",
            queued(&mut consumers)
        );
        let mut got: HashMap<String, String> = HashMap::new();
        let deadline = std::time::Instant::now() + WAIT * 3;
        while got.len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{args:?}: {} of {n} jobs back",
                got.len()
            );
            for c in &mut consumers {
                let r = c.cmd(&["GETJOB", "TIMEOUT", "500", "COUNT", "100", "FROM", "q"]);
                if r.is_nil() {
                    continue;
                }
                let mut ack = vec!["ACKJOB".to_string()];
                for j in r.array() {
                    let f = j.array();
                    got.insert(f[1].text(), f[2].text());
                    ack.push(f[1].text());
                }
                c.cmd(&ack);
            }
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                got.get(id).map(String::as_str),
                Some(body(i).as_str()),
                "{args:?}: job {i}"
            );
        }
    }
}
