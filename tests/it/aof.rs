//! AOF persistence against real processes (docs/PERSISTENCE.md):
//! crash safety with `appendfsync always`, loading rules, truncated and
//! corrupt files, the checker, background rewrites under load, turning the
//! AOF on at runtime and the controlled-restart recipe.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::harness::{
    encode_cmd, wait_until, Client, Reply, ReplyExt, Server, ServerOpts, SERVER_BIN,
};
use crate::util::{addjob, POLL, WAIT};

fn aof_path(s: &Server) -> PathBuf {
    s.dir().join("disque.aof")
}

fn show_state(c: &mut Client, id: &str) -> Option<String> {
    let r = c.cmd(&["SHOW", id]);
    if r.is_nil() {
        None
    } else {
        Some(r.field("state").text())
    }
}

fn show_body(c: &mut Client, id: &str) -> Vec<u8> {
    match c.cmd(&["SHOW", id]).field("body") {
        Reply::Bulk(b) => b.clone(),
        other => panic!("SHOW {id} body: {other:?}"),
    }
}

/// SHUTDOWN (no reply; the connection just closes) and wait for exit 0.
fn shutdown(s: &mut Server, args: &[&str]) {
    let mut c = s.client();
    let mut cmd = vec!["SHUTDOWN"];
    cmd.extend_from_slice(args);
    c.send(&cmd);
    c.expect_closed();
    let st = s.wait_exit(WAIT).expect("server exits after SHUTDOWN");
    assert!(st.success(), "SHUTDOWN exit status {st}");
}

/// One ADDJOB over a raw socket; None when the server is gone.
fn raw_addjob(sock: &mut TcpStream, queue: &str, body: &str, extra: &[&str]) -> Option<String> {
    let mut args = vec!["ADDJOB", queue, body, "0"];
    args.extend_from_slice(extra);
    sock.write_all(&encode_cmd(&args)).ok()?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if sock.read(&mut b).ok()? == 0 {
            return None;
        }
        line.push(b[0]);
    }
    let s = String::from_utf8(line).ok()?;
    s.strip_prefix('+').map(|id| id.trim_end().to_string())
}

/// The record a new AOF starts with (its format version).
const VERSION_RECORD: &[u8] = b"*2\r\n$10\r\nAOFVERSION\r\n$1\r\n1\r\n";

/// Offsets at which job records start (every record begins with
/// `*2\r\n$`; the leading format version record is not one).
fn record_offsets(data: &[u8]) -> Vec<usize> {
    (0..data.len().saturating_sub(5))
        .filter(|&i| &data[i..i + 5] == b"*2\r\n$" && (i == 0 || data[i - 2..i] == *b"\r\n"))
        .filter(|&i| !data[i..].starts_with(VERSION_RECORD))
        .collect()
}

fn check_aof(file: &Path, fix: bool) -> (i32, String) {
    let mut cmd = Command::new(SERVER_BIN);
    cmd.arg("--check-aof").arg(file);
    if fix {
        cmd.arg("--fix");
    }
    let out = cmd.output().expect("run --check-aof");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn opts_in(dir: &Path, args: &[&str]) -> ServerOpts {
    ServerOpts {
        dir: Some(dir.to_path_buf()),
        ..ServerOpts::with_args(args)
    }
}

/// A stopped node with an AOF holding `n` jobs (appendonly yes), left in
/// its directory for the caller. Returns the server (not running) and IDs.
/// The server must refuse to start and name the bad AOF offset.
#[track_caller]
fn assert_refuses_at(opts: ServerOpts, offset: impl std::fmt::Display) {
    let out = Server::run_to_exit(opts, WAIT);
    assert!(
        !out.status.success(),
        "must refuse to start:\n{}",
        out.output
    );
    assert!(
        out.output.contains(&format!("offset {offset}")),
        "error should name offset {offset}:\n{}",
        out.output
    );
}

fn node_with_jobs(n: usize) -> (Server, Vec<String>) {
    let mut s = Server::start(ServerOpts::with_args(&["--appendonly", "yes"]));
    let mut c = s.client();
    let ids = (0..n)
        .map(|i| addjob(&mut c, "q", &format!("body-{i}"), &[]))
        .collect();
    shutdown(&mut s, &[]);
    (s, ids)
}

#[test]
fn aof_always_sigkill_keeps_every_acknowledged_addjob() {
    let mut s = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let port = s.port();
    let mut writers = Vec::new();
    for w in 0..2 {
        let acked = acked.clone();
        writers.push(thread::spawn(move || {
            let Ok(mut sock) = TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            for i in 0.. {
                let body = format!("w{w}-job-{i}-{}", "x".repeat(i % 300));
                match raw_addjob(&mut sock, "q", &body, &["RETRY", "3"]) {
                    Some(id) => acked.lock().unwrap().push((id, body)),
                    None => return,
                }
            }
        }));
    }
    assert!(
        wait_until(WAIT, POLL, || acked.lock().unwrap().len() >= 300),
        "ADDJOB load did not get going"
    );
    s.kill9();
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    s.restart();
    let mut c = s.client();
    // Loaded jobs are active, not queued, until their retry fires.
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
    for (id, body) in &acked {
        let state = show_state(&mut c, id);
        assert!(state.is_some(), "acknowledged job {id} lost after SIGKILL");
        assert_eq!(show_body(&mut c, id), body.as_bytes(), "body of {id}");
    }
    let n = acked.len() as i64;
    assert!(c.info_int("registered_jobs") >= n);
    // ...and re-queued about RETRY seconds later by this node.
    assert!(
        wait_until(Duration::from_secs(15), POLL, || c
            .cmd(&["QLEN", "q"])
            .int()
            >= n),
        "jobs were not re-queued after their retry"
    );
    assert_eq!(show_state(&mut c, &acked[0].0).as_deref(), Some("queued"));
}

#[test]
fn aof_loaded_jobs_are_active_until_retry() {
    let (mut s, ids) = node_with_jobs(3);
    s.restart();
    let mut c = s.client();
    for id in &ids {
        assert_eq!(show_state(&mut c, id).as_deref(), Some("active"), "{id}");
    }
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 0);
}

#[test]
fn aof_truncated_tail_is_cut_with_load_truncated_yes() {
    let (mut s, ids) = node_with_jobs(3);
    let path = aof_path(&s);
    let good = std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"*2\r\n$7\r\nLOADJOB\r\n$120\r\n\x70\x00\x00")
        .unwrap();
    drop(f);
    s.restart(); // aof-load-truncated defaults to yes
    let mut c = s.client();
    for id in &ids {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
    assert!(
        s.wait_output(&format!("offset {good}"), Duration::from_secs(10)),
        "warning should name the offset {good}:\n{}",
        s.output()
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        good,
        "tail cut off"
    );
    // And the node keeps appending after the cut.
    // (everysec: the write itself follows the reply shortly, so poll.)
    addjob(&mut c, "q", "after", &[]);
    assert!(wait_until(WAIT, POLL, || std::fs::metadata(&path)
        .unwrap()
        .len()
        > good));
}

#[test]
fn aof_truncated_tail_is_refused_with_load_truncated_no_then_fixed_by_check_aof() {
    let (s, ids) = node_with_jobs(3);
    let path = aof_path(&s);
    let good = std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"*2\r\n$6\r\nDELJ").unwrap();
    drop(f);

    let strict = opts_in(
        s.dir(),
        &["--appendonly", "yes", "--aof-load-truncated", "no"],
    );
    assert_refuses_at(strict.clone(), good);

    let (code, text) = check_aof(&path, false);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("ok_up_to={good}")), "{text}");
    let (code, text) = check_aof(&path, true);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("truncated"), "{text}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    let (code, text) = check_aof(&path, false);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("AOF is valid"), "{text}");

    let s2 = Server::start(strict);
    let mut c = s2.client();
    for id in &ids {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
}

#[test]
fn aof_corruption_in_the_middle_refuses_to_start() {
    let (s, _ids) = node_with_jobs(4);
    let path = aof_path(&s);
    let mut data = std::fs::read(&path).unwrap();
    let offsets = record_offsets(&data);
    assert_eq!(offsets.len(), 4, "one LOADJOB per job");
    let bad = offsets[2];
    // Damage the command name of the third record.
    data[bad + 9] = b'X';
    std::fs::write(&path, &data).unwrap();

    // Tolerating a truncated tail does not extend to corruption.
    assert_refuses_at(opts_in(s.dir(), &["--appendonly", "yes"]), bad);
    let (code, text) = check_aof(&path, false);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("ok_up_to={bad}")), "{text}");
}

#[test]
fn aof_check_reports_missing_file() {
    let (code, text) = check_aof(Path::new("/nonexistent/disque.aof"), false);
    assert_eq!(code, 1, "{text}");
}

#[test]
fn bgrewriteaof_under_concurrent_load_loses_nothing() {
    let mut s = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    // Enough jobs for the snapshot to take several chunks.
    let mut c = s.client();
    let preload = 12_000;
    for i in 0..preload {
        c.send(&["ADDJOB", "pre", &format!("p{i}"), "0"]);
    }
    let mut live: BTreeSet<String> = BTreeSet::new();
    for _ in 0..preload {
        match c.read_reply() {
            Reply::Status(id) => live.insert(id),
            other => panic!("ADDJOB: {other:?}"),
        };
    }
    let pre: Vec<String> = live.iter().cloned().collect();

    // Load: each worker adds jobs and acks every other one it added, plus
    // some preloaded ones; it records what the server acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(Mutex::new(0usize));
    let mut workers = Vec::new();
    for w in 0..2 {
        let (stop, ops) = (stop.clone(), ops.clone());
        let mine: Vec<String> = pre.iter().skip(w).step_by(7).cloned().collect();
        let port = s.port();
        workers.push(thread::spawn(move || {
            let mut c = Client::connect(port);
            let mut added = Vec::new();
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = match c.cmd(&["ADDJOB", "live", &format!("w{w}-{i}"), "0"]) {
                    Reply::Status(id) => id,
                    other => panic!("ADDJOB: {other:?}"),
                };
                added.push(id.clone());
                if i % 2 == 0 {
                    assert_eq!(c.cmd(&["ACKJOB", &id]).int(), 1);
                    acked.push(id);
                }
                if let Some(p) = mine.get(i) {
                    assert_eq!(c.cmd(&["ACKJOB", p]).int(), 1);
                    acked.push(p.clone());
                }
                i += 1;
                *ops.lock().unwrap() += 1;
            }
            (added, acked)
        }));
    }
    let ops_now = || *ops.lock().unwrap();
    assert!(wait_until(WAIT, POLL, || ops_now() >= 100));
    for _ in 0..2 {
        assert_eq!(
            c.cmd(&["BGREWRITEAOF"]),
            Reply::Status("Background append only file rewriting started".into())
        );
        let started = ops_now();
        assert!(wait_until(Duration::from_secs(30), POLL, || c
            .info_field("aof_rewrite_in_progress")
            == "0"));
        assert_eq!(c.info_field("aof_last_bgrewrite_status"), "ok");
        // Keep the load going after the rename too.
        assert!(wait_until(WAIT, POLL, || ops_now() >= started + 50));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let (added, acked) = w.join().unwrap();
        live.extend(added);
        for id in acked {
            live.remove(&id);
        }
    }
    let expected = c.info_int("registered_jobs");
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(c.info_int("registered_jobs"), live.len() as i64);
    assert_eq!(
        expected,
        live.len() as i64,
        "sanity: server view before kill"
    );
    for id in &live {
        assert!(show_state(&mut c, id).is_some(), "{id} lost by the rewrite");
    }
}

#[test]
fn bgrewriteaof_twice_reports_in_progress_or_starts() {
    let s = Server::start(ServerOpts::with_args(&["--appendonly", "yes"]));
    let mut c = s.client();
    addjob(&mut c, "q", "x", &[]);
    let r = c.cmd(&["BGREWRITEAOF"]);
    assert_eq!(r.text(), "Background append only file rewriting started");
    let r = c.cmd(&["BGREWRITEAOF"]);
    assert!(
        r == Reply::Status("Background append only file rewriting started".into())
            || r == Reply::Error(
                "ERR Background append only file rewriting already in progress".into()
            ),
        "{r:?}"
    );
}

#[test]
fn config_set_appendonly_yes_reaches_on_and_persists() {
    let mut s = Server::start(ServerOpts::with_args(&["--appendfsync", "always"]));
    let mut c = s.client();
    assert_eq!(c.info_field("aof_state"), "off");
    let before: Vec<String> = (0..50)
        .map(|i| addjob(&mut c, "q", &format!("b{i}"), &[]))
        .collect();
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "yes"]).text(), "OK");
    let st = c.info_field("aof_state");
    assert!(st == "wait-rewrite" || st == "on", "{st}");
    assert!(wait_until(WAIT, POLL, || c.info_field("aof_state") == "on"));
    let after: Vec<String> = (0..50)
        .map(|i| addjob(&mut c, "q", &format!("a{i}"), &[]))
        .collect();
    s.kill9();
    let s2 = Server::start(opts_in(s.dir(), &["--appendonly", "yes"]));
    let mut c = s2.client();
    for id in before.iter().chain(&after) {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
    // `no` stops appending at once.
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "no"]).text(), "OK");
    assert_eq!(c.info_field("aof_state"), "off");
    let size = std::fs::metadata(s2.dir().join("disque.aof"))
        .unwrap()
        .len();
    addjob(&mut c, "q", "not-persisted", &[]);
    assert_eq!(
        std::fs::metadata(s2.dir().join("disque.aof"))
            .unwrap()
            .len(),
        size
    );
}

#[test]
fn sigterm_flushes_the_aof() {
    let mut s = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
    ]));
    let mut c = s.client();
    let ids: Vec<String> = (0..20)
        .map(|i| addjob(&mut c, "q", &format!("t{i}"), &[]))
        .collect();
    s.sigterm();
    let st = s.wait_exit(WAIT).expect("exit after SIGTERM");
    assert!(st.success(), "{st}");
    s.restart();
    let mut c = s.client();
    for id in &ids {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
}

#[test]
fn debug_loadaof_reloads_from_the_file() {
    let s = Server::start(ServerOpts::with_args(&["--appendonly", "yes"]));
    let mut c = s.client();
    let a = addjob(&mut c, "q", "a", &[]);
    let b = addjob(&mut c, "q", "b", &[]);
    assert_eq!(c.cmd(&["ACKJOB", &a]).int(), 1);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]).text(), "OK");
    assert!(show_state(&mut c, &a).is_none());
    assert_eq!(show_state(&mut c, &b).as_deref(), Some("active"));
    assert_eq!(c.info_int("registered_jobs"), 1);
}

#[test]
fn controlled_restart_requeues_queued_jobs_including_retry_0() {
    // A memory-only node (AOF off) dumps itself and comes back queued.
    let mut s = Server::start(ServerOpts::with_config("appendonly no\n"));
    let mut c = s.client();
    let r0 = addjob(&mut c, "q", "retry-zero", &["RETRY", "0"]);
    let r30 = addjob(&mut c, "q", "retry-thirty", &["RETRY", "30"]);
    let taken = addjob(&mut c, "q2", "in-flight", &["RETRY", "300"]);
    let got = c.cmd(&["GETJOB", "FROM", "q2"]);
    assert_eq!(got.array()[0].array()[1].text(), taken);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "aof-enqueue-jobs-once", "yes"])
            .text(),
        "OK"
    );
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]).text(), "OK");
    shutdown(&mut s, &["REWRITE-AOF"]);
    let conf = s.config_path().unwrap().to_path_buf();
    assert!(std::fs::read_to_string(&conf)
        .unwrap()
        .contains("aof-enqueue-jobs-once yes"));

    s.restart();
    let mut c = s.client();
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 2, "both queued jobs re-queued");
    assert_eq!(show_state(&mut c, &r0).as_deref(), Some("queued"));
    assert_eq!(show_state(&mut c, &r30).as_deref(), Some("queued"));
    assert_eq!(show_state(&mut c, &taken).as_deref(), Some("active"));
    let mut bodies: HashMap<String, String> = HashMap::new();
    let got = c.cmd(&["GETJOB", "COUNT", "10", "FROM", "q"]);
    for j in got.array() {
        bodies.insert(j.array()[1].text(), j.array()[2].text());
    }
    assert_eq!(bodies.get(&r0).map(String::as_str), Some("retry-zero"));
    assert_eq!(bodies.get(&r30).map(String::as_str), Some("retry-thirty"));
    // "Once": the config file was switched back.
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("aof-enqueue-jobs-once no"), "{text}");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "aof-enqueue-jobs-once"]).array()[1].text(),
        "no"
    );
}

/// Format versions (docs/upgrades.md): a new AOF starts with its version
/// record; a file without one (an older build's) loads and gets the record
/// at its next rewrite; a newer version is refused with a message naming
/// it, and `--check-aof --fix` leaves such a file alone.
#[test]
fn aof_format_version_old_files_load_newer_ones_are_refused() {
    let (mut s, ids) = node_with_jobs(3);
    let path = aof_path(&s);
    let data = std::fs::read(&path).unwrap();
    assert!(data.starts_with(VERSION_RECORD), "{data:?}");
    let records = &data[VERSION_RECORD.len()..];

    // An older build's file: the same records, no version.
    std::fs::write(&path, records).unwrap();
    s.restart();
    let mut c = s.client();
    for id in &ids {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
    assert!(!std::fs::read(&path).unwrap().starts_with(VERSION_RECORD));
    c.cmd(&["BGREWRITEAOF"]);
    assert!(wait_until(WAIT, POLL, || c
        .info_field("aof_rewrite_in_progress")
        == "0"
        && std::fs::read(&path).unwrap().starts_with(VERSION_RECORD)));
    drop(c);
    shutdown(&mut s, &[]);

    // A newer build's file.
    let mut newer = b"*2\r\n$10\r\nAOFVERSION\r\n$1\r\n9\r\n".to_vec();
    newer.extend_from_slice(records);
    std::fs::write(&path, &newer).unwrap();
    let out = Server::run_to_exit(opts_in(s.dir(), &["--appendonly", "yes"]), WAIT);
    assert!(!out.status.success(), "must refuse:\n{}", out.output);
    assert!(
        out.output.contains("AOF format version 9"),
        "{}",
        out.output
    );
    let (code, text) = check_aof(&path, true);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("AOF format version 9"), "{text}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        newer,
        "--fix must not cut it"
    );
}

/// Pipelined ADDJOBs of `n` jobs with `body_len`-byte bodies; their IDs.
fn add_many(c: &mut Client, queue: &str, n: usize, body_len: usize) -> Vec<String> {
    let body = "x".repeat(body_len);
    for _ in 0..n {
        c.send(&["ADDJOB", queue, &body, "0"]);
    }
    (0..n)
        .map(|_| match c.read_reply() {
            Reply::Status(id) => id,
            other => panic!("ADDJOB: {other:?}"),
        })
        .collect()
}

/// `auto-aof-rewrite-min-reclaim`: a backlog that only grows is not
/// rewritten (every record is live), one whose jobs were acknowledged is,
/// and the rewritten file keeps exactly the jobs left; with 0, Disque's
/// growth rule alone rewrites the growing file.
#[test]
fn auto_rewrite_waits_until_it_would_reclaim_the_share_asked() {
    let node = |reclaim: &str| {
        Server::start(ServerOpts::with_args(&[
            "--appendonly",
            "yes",
            "--auto-aof-rewrite-min-size",
            "1mb",
            "--auto-aof-rewrite-min-reclaim",
            reclaim,
        ]))
    };
    let mut a = node("50");
    let b = node("0");
    let (mut ca, mut cb) = (a.client(), b.client());
    let ids = add_many(&mut ca, "q", 6000, 400);
    add_many(&mut cb, "q", 6000, 400);
    let before = ca.info_int("aof_current_size");
    assert!(before > 2_000_000);
    // Disque's rule: the growth past 1 MB starts a rewrite.
    assert!(wait_until(WAIT, POLL, || cb.info_int("aof_base_size") > 0));
    // That took both crons several runs: the growing file was left alone.
    assert_eq!(ca.info_int("aof_base_size"), 0);
    assert_eq!(ca.info_int("aof_last_rewrite_time_sec"), -1);
    // Acknowledge three jobs in four: most of the file is now dead.
    let (acked, kept): (Vec<_>, Vec<_>) = ids.iter().enumerate().partition(|(i, _)| i % 4 != 0);
    for chunk in acked.chunks(500) {
        let mut cmd = vec!["ACKJOB"];
        cmd.extend(chunk.iter().map(|(_, id)| id.as_str()));
        assert_eq!(ca.cmd(&cmd).int(), chunk.len() as i64);
    }
    // The cron may look while the acknowledgements are still arriving: the
    // rewrite starts once half the file is dead, so the new file holds at
    // most about half of it (a quarter once every ACKJOB is in).
    assert!(wait_until(WAIT, POLL, || ca.info_int("aof_base_size") > 0));
    let base = ca.info_int("aof_base_size");
    assert!(base < before * 6 / 10, "rewrote {base} of {before} bytes");
    a.kill9();
    let a2 = Server::start(opts_in(a.dir(), &["--appendonly", "yes"]));
    let mut c = a2.client();
    for (_, id) in &kept {
        assert!(show_state(&mut c, id).is_some(), "{id} lost");
    }
    for (_, id) in acked.iter().step_by(97) {
        assert!(show_state(&mut c, id).is_none(), "{id} came back");
    }
}
