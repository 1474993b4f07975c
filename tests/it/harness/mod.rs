//! Harness shared by every integration test: [`process`] starts and stops
//! real `disque-server` processes, [`client`] talks RESP to them, and the
//! replies are decoded by the library's client-side decoder
//! (`disque::protocol::resp::reply`, the one the benchmark uses too). [`ReplyExt`]
//! adds the panicking accessors tests want; [`wait_until`] polls a
//! condition with a deadline instead of sleeping.

#![allow(dead_code)] // each test module uses a different part of it

mod client;
mod process;

use std::thread;
use std::time::{Duration, Instant};

pub use client::{encode_cmd, info_value, Client};
pub use disque::protocol::resp::reply::{decode, Reply};
pub use process::{Server, ServerOpts, SERVER_BIN};

/// Poll `f` every `poll` until it returns true or `timeout` elapses.
/// Returns whether the condition became true.
pub fn wait_until(timeout: Duration, poll: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(poll);
    }
}

/// Accessors that fail the test, showing the reply, when the shape is not
/// the expected one.
pub trait ReplyExt {
    /// Text of a status, error, bulk or verbatim reply.
    fn text(&self) -> String;
    /// Value of an integer reply.
    fn int(&self) -> i64;
    /// Elements of an array reply.
    fn array(&self) -> &[Reply];
    /// Value of `key` in a flat `[k1, v1, ...]` array or a RESP3 map.
    fn field(&self, key: &str) -> &Reply;
}

impl ReplyExt for Reply {
    #[track_caller]
    fn text(&self) -> String {
        self.as_text()
            .unwrap_or_else(|| panic!("not a string reply: {self:?}"))
    }

    #[track_caller]
    fn int(&self) -> i64 {
        self.as_int()
            .unwrap_or_else(|| panic!("not an integer reply: {self:?}"))
    }

    #[track_caller]
    fn array(&self) -> &[Reply] {
        self.as_array()
            .unwrap_or_else(|| panic!("not an array reply: {self:?}"))
    }

    #[track_caller]
    fn field(&self, key: &str) -> &Reply {
        self.get(key)
            .unwrap_or_else(|| panic!("no field {key} in {self:?}"))
    }
}

/// Whether `s` looks like a Disque job ID: `D-` + 8 hex node prefix + `-`
/// + 24 base64 random chars + `-` + 4 hex TTL digits (40 bytes).
pub fn is_job_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 40 && b[0] == b'D' && b[1] == b'-' && b[10] == b'-' && b[35] == b'-'
}
