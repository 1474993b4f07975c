//! Small helpers shared by the test modules.

use std::time::Duration;

use crate::harness::{is_job_id, wait_until, Client, Reply, ReplyExt};

/// Default polling deadline for conditions driven by server timers.
pub const WAIT: Duration = Duration::from_secs(10);
/// Default polling period.
pub const POLL: Duration = Duration::from_millis(20);

/// A numeric knob from the environment (e.g. `DISQUE_MEMORY_RUNS`):
/// `default` when unset or empty; a value that is not an unsigned integer
/// fails the test, naming the variable, rather than being ignored.
pub fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => default,
        Err(e) => panic!("{name}: {e}"),
        Ok(v) if v.is_empty() => default,
        Ok(v) => v
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not an unsigned integer: {e}")),
    }
}

/// `ADDJOB q body 0 <extra...>`, asserting success; returns the job ID.
pub fn addjob(c: &mut Client, queue: &str, body: &str, extra: &[&str]) -> String {
    let mut args = vec!["ADDJOB", queue, body, "0"];
    args.extend_from_slice(extra);
    match c.cmd(&args) {
        Reply::Status(id) => {
            assert!(is_job_id(&id), "bad job id {id}");
            id
        }
        other => panic!("ADDJOB {args:?} failed: {other:?}"),
    }
}

/// Poll QLEN until it equals `n`.
pub fn wait_qlen(c: &mut Client, queue: &str, n: i64) -> bool {
    wait_until(WAIT, POLL, || c.cmd(&["QLEN", queue]).int() == n)
}

/// Build the exact bytes of an error reply.
pub fn error(s: &str) -> Vec<u8> {
    format!("-{s}\r\n").into_bytes()
}

/// Build the exact bytes of a bulk reply.
pub fn bulk(s: &[u8]) -> Vec<u8> {
    let mut v = format!("${}\r\n", s.len()).into_bytes();
    v.extend_from_slice(s);
    v.extend_from_slice(b"\r\n");
    v
}

/// Show bytes readably in assertion messages.
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Assert exact reply bytes with a readable message.
#[track_caller]
pub fn assert_bytes(actual: &[u8], expected: &[u8]) {
    assert_eq!(
        show(actual),
        show(expected),
        "reply bytes differ (left: actual, right: expected)"
    );
}
