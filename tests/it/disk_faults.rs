//! Disk faults (docs/PERSISTENCE.md "Disk faults"): a full disk,
//! failing fsyncs and a slow disk (the `DEBUG DISK-FAULT` hook). Write
//! commands get -MISCONF instead of hanging or an OK for data that is not
//! on disk, the node recovers by itself, the AOF stays loadable, and
//! nodes.conf survives failed saves.
//!
//! The full disk needs no root: the server process runs under a soft
//! `RLIMIT_FSIZE` (`ServerOpts::file_size_limit`). The kernel then treats
//! its files as a full filesystem would: the write that crosses the limit
//! stores what fits and returns a short count, the next one fails (EFBIG,
//! "File too large", where a full filesystem says ENOSPC), and raising the
//! limit is the space coming back. The server's write path does not tell
//! the two errors apart.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::harness::{wait_until, Client, Reply, ReplyExt, Server, ServerOpts, SERVER_BIN};
use crate::util::{addjob, POLL};

const WAIT: Duration = Duration::from_secs(30);
const MISCONF: &str = "MISCONF Errors writing to the AOF file: ";
/// Room for the AOF on the "disk" (the server's file-size limit).
const ROOM: u64 = 768 * 1024;

fn check_aof(file: &Path) -> (bool, String) {
    let out = Command::new(SERVER_BIN)
        .arg("--check-aof")
        .arg(file)
        .output()
        .expect("run --check-aof");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn addjob_reply(c: &mut Client, body: &str) -> Reply {
    c.cmd(&["ADDJOB", "q", body, "0"])
}

fn assert_misconf(r: &Reply, cause: &str) {
    let text = match r {
        Reply::Error(e) => e.clone(),
        other => panic!("expected -MISCONF, got {other:?}"),
    };
    assert!(
        text.starts_with(MISCONF) && text.contains(cause),
        "unexpected error: {text}"
    );
}

#[test]
fn full_disk_refuses_writes_with_misconf_and_recovers_when_space_returns() {
    let mut s = Server::start(ServerOpts {
        file_size_limit: Some(ROOM),
        ..ServerOpts::with_args(&["--appendonly", "yes", "--appendfsync", "everysec"])
    });
    let mut c = s.client();
    let body = "x".repeat(4000);
    let mut acked = Vec::new();
    let refused = loop {
        assert!(acked.len() < 1000, "the disk never filled up");
        match addjob_reply(&mut c, &body) {
            Reply::Status(id) => acked.push(id),
            other => break other,
        }
    };
    // Filled (not refused early): the acknowledged records took the room.
    assert!(
        acked.len() as u64 * 4000 > ROOM / 2,
        "refused after only {} jobs",
        acked.len()
    );
    assert_misconf(&refused, "File too large");
    // Every later write is refused at once; reads still work.
    assert_misconf(&addjob_reply(&mut c, "small"), "File too large");
    assert_misconf(&c.cmd(&["PING"]), "File too large");
    assert_eq!(c.cmd(&["SHOW", &acked[0]]).field("state").text(), "queued");
    assert_eq!(
        c.info_field("aof_last_write_status"),
        "err",
        "INFO reports the failure"
    );
    // The file on the full disk ends on a record boundary: a partial write
    // was cut back, so it loads as is.
    let aof = s.dir().join("disque.aof");
    let size = std::fs::metadata(&aof).expect("stat the AOF").len();
    assert!(size <= ROOM, "AOF of {size} bytes past the limit");
    let copy = std::env::temp_dir().join(format!("disque-full-{}.aof", std::process::id()));
    std::fs::copy(&aof, &copy).expect("copy the AOF");
    let (valid, report) = check_aof(&copy);
    let _ = std::fs::remove_file(&copy);
    assert!(valid, "AOF left unloadable on a full disk: {report}");

    // Space returns: the node writes its backlog and accepts writes again.
    s.set_file_size_limit(None);
    assert!(
        wait_until(WAIT, POLL, || matches!(
            addjob_reply(&mut c, "after"),
            Reply::Status(_)
        )),
        "node did not recover after space returned"
    );
    assert_eq!(c.info_field("aof_last_write_status"), "ok");

    // Every acknowledged job survives a crash, from a strictly loadable file.
    s.kill9();
    s.restart();
    let mut c = s.client();
    for id in &acked {
        assert!(!c.cmd(&["SHOW", id]).is_nil(), "acknowledged job {id} lost");
    }
}

/// A node with the AOF on under `policy`, one job added, then every fsync
/// made to fail. Returns the added job's ID.
fn start_with_failing_fsync(policy: &str) -> (Server, Client, String) {
    let s = Server::start(ServerOpts::with_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        policy,
    ]));
    let mut c = s.client();
    let before = addjob(&mut c, "q", "before", &[]);
    assert_eq!(
        c.cmd(&["DEBUG", "DISK-FAULT", "fsync-error"]),
        Reply::Status("OK".into())
    );
    (s, c, before)
}

/// Make fsyncs work again and check the node recovers by itself: a later
/// fsync succeeding is not enough (the kernel may have dropped what it
/// failed to write), so the node rewrites the AOF from memory and then
/// accepts writes again; both jobs survive a kill -9.
fn fsync_heals_and_nothing_is_lost(mut s: Server, mut c: Client, before: String) {
    assert_eq!(
        c.cmd(&["DEBUG", "DISK-FAULT", "none"]),
        Reply::Status("OK".into())
    );
    let mut after = None;
    assert!(
        wait_until(WAIT, POLL, || match addjob_reply(&mut c, "after") {
            Reply::Status(id) => {
                after = Some(id);
                true
            }
            _ => false,
        }),
        "node did not recover after fsync worked again"
    );
    assert_eq!(c.info_field("aof_last_write_status"), "ok");
    s.kill9();
    s.restart();
    let mut c = s.client();
    for id in [before, after.expect("recovered ADDJOB")] {
        assert!(!c.cmd(&["SHOW", &id]).is_nil(), "job {id} lost");
    }
}

#[test]
fn failing_fsync_refuses_writes_until_a_rewrite_replaces_the_file() {
    let (s, mut c, before) = start_with_failing_fsync("always");
    // The command whose records could not be fsynced is not answered OK.
    assert_misconf(&addjob_reply(&mut c, "during"), "fsync: Input/output error");
    assert_misconf(&addjob_reply(&mut c, "later"), "fsync: Input/output error");
    assert_eq!(c.cmd(&["QLEN", "q"]).int(), 2, "reads keep working");
    fsync_heals_and_nothing_is_lost(s, c, before);
}

#[test]
fn failing_everysec_fsync_refuses_writes_and_recovers() {
    // The once-a-second fsync runs beside the writers, on its own
    // descriptor; its failure must still stop writes like an `always` one.
    let (s, mut c, before) = start_with_failing_fsync("everysec");
    let mut refused = None;
    assert!(
        wait_until(WAIT, POLL, || match addjob_reply(&mut c, "during") {
            r @ Reply::Error(_) => {
                refused = Some(r);
                true
            }
            _ => false,
        }),
        "writes still accepted although every fsync fails"
    );
    assert_misconf(
        &refused.expect("refused ADDJOB"),
        "fsync: Input/output error",
    );
    fsync_heals_and_nothing_is_lost(s, c, before);
}

#[test]
fn slow_disk_delays_write_replies_without_stalling_the_node() {
    let s = Server::start(ServerOpts::with_args(&["--appendonly", "yes"]));
    let mut admin = s.client();
    assert_eq!(
        admin.cmd(&["DEBUG", "DISK-FAULT", "slow-writes", "3000"]),
        Reply::Status("OK".into())
    );
    let mut writer = s.client();
    writer.send(&["ADDJOB", "q", "slow", "0"]);
    // While the write waits for the disk, other clients are served...
    assert!(wait_until(WAIT, POLL, || admin.cmd(&["QLEN", "q"]).int() == 1));
    assert_eq!(admin.cmd(&["PING"]), Reply::Status("PONG".into()));
    // ... and the writer has no reply yet: never an OK before the record
    // reached the file.
    assert!(
        writer.try_read_reply(Duration::from_millis(100)).is_none(),
        "ADDJOB answered before its record was written"
    );
    let r = writer
        .try_read_reply(WAIT)
        .expect("ADDJOB answered once the slow write completed");
    assert!(matches!(r, Reply::Status(_)), "{r:?}");
    assert_eq!(
        admin.cmd(&["DEBUG", "DISK-FAULT", "none"]),
        Reply::Status("OK".into())
    );
}
