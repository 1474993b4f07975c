//! RESP request parser (`resp::parse::RequestParser`), as a client
//! connection drives it: the bytes arrive in chunks and the parser is
//! called after each read until it needs more.
//!
//! Property checked beside "no panic, no hang": chunking does not change
//! the result. The commands parsed from the whole input at once and from
//! the same input split at fuzzer-chosen points are identical, and both
//! runs fail or neither does.
#![no_main]

use bytes::{Bytes, BytesMut};
use disque::protocol::resp::parse::RequestParser;
use libfuzzer_sys::fuzz_target;

/// Commands parsed, and whether the stream ended in a protocol error.
fn run(chunks: &[&[u8]]) -> (Vec<Vec<Bytes>>, bool) {
    let mut p = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match p.parse(&mut buf) {
                Ok(Some(cmd)) => {
                    assert!(!cmd.is_empty(), "a command always has a name");
                    out.push(cmd.to_vec());
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
        // The hint is bounded (callers reserve it).
        if let Some(n) = p.pending_bulk_remaining() {
            assert!(n <= disque::protocol::resp::parse::MAX_BULK as usize + 2);
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    // First byte: chunk size for the split run (1..=256 bytes).
    let Some((&step, input)) = data.split_first() else {
        return;
    };
    let whole = run(&[input]);
    let step = usize::from(step) + 1;
    let chunks: Vec<&[u8]> = input.chunks(step).collect();
    let split = run(&chunks);
    assert_eq!(whole, split, "chunking changed the parse");
});
