//! Reply encoding: renders a [`Reply`] as RESP2 or RESP3 bytes.
//!
//! Owns the wire shape of every reply variant in both protocol versions
//! (the only differences: nulls become `_` and maps become `%n` in RESP3),
//! plus small writers for building pre-encoded `Reply::Raw` hot-path replies.
//! Allocation-free apart from growing the output buffer.

use bytes::{Bytes, BytesMut};

use crate::protocol::resp::Reply;

/// Append `reply` to `out` in protocol `proto` (3 = RESP3, anything else RESP2).
pub fn encode(reply: &Reply, proto: u8, out: &mut BytesMut) {
    let resp3 = proto == 3;
    match reply {
        Reply::Status(s) => write_line(b'+', s.as_bytes(), out),
        Reply::Id(id) if !has_control_byte(id) => {
            // One copy of a stack-built line: ADDJOB's reply on every call.
            let mut line = [0u8; 43];
            line[0] = b'+';
            line[1..41].copy_from_slice(id);
            line[41..].copy_from_slice(b"\r\n");
            out.extend_from_slice(&line);
        }
        Reply::Id(id) => write_line(b'+', id, out),
        Reply::Error(s) => write_line(b'-', s.as_bytes(), out),
        Reply::Integer(n) => write_integer(*n, out),
        Reply::Bulk(b) => write_bulk(b, out),
        Reply::NullBulk => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Reply::NullArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Reply::Array(items) => {
            write_array_header(items.len(), out);
            for item in items {
                encode(item, proto, out);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                write_header(b'%', pairs.len() as u64, out);
            } else {
                write_header(b'*', (pairs.len() as u64).saturating_mul(2), out);
            }
            for (k, v) in pairs {
                encode(k, proto, out);
                encode(v, proto, out);
            }
        }
        Reply::Raw(b) => out.extend_from_slice(b),
    }
}

/// Encode into a fresh buffer, e.g. to build a shared `Reply::Raw`.
pub fn to_bytes(reply: &Reply, proto: u8) -> Bytes {
    let mut out = BytesMut::new();
    encode(reply, proto, &mut out);
    out.freeze()
}

/// `:n\r\n`
pub fn write_integer(n: i64, out: &mut BytesMut) {
    write_number(b':', n < 0, n.unsigned_abs(), out);
}

/// `$len\r\n<data>\r\n`
pub fn write_bulk(data: &[u8], out: &mut BytesMut) {
    // One reservation for header + payload + CRLF; 24 covers the longest header.
    out.reserve(data.len() + 24 + 2);
    write_header(b'$', data.len() as u64, out);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `*n\r\n`; the caller then writes the n elements.
pub fn write_array_header(n: usize, out: &mut BytesMut) {
    write_header(b'*', n as u64, out);
}

fn write_header(prefix: u8, n: u64, out: &mut BytesMut) {
    write_number(prefix, false, n, out);
}

/// `<prefix>[-]<digits>\r\n`, formatted on the stack: this runs for every
/// array, bulk and integer, so it must not go through `fmt`.
fn write_number(prefix: u8, negative: bool, mut magnitude: u64, out: &mut BytesMut) {
    // prefix + sign + 20 digits (u64::MAX) + CRLF
    let mut tmp = [0u8; 24];
    let mut i = tmp.len() - 2;
    tmp[i] = b'\r';
    tmp[i + 1] = b'\n';
    loop {
        i -= 1;
        tmp[i] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        i -= 1;
        tmp[i] = b'-';
    }
    i -= 1;
    tmp[i] = prefix;
    out.extend_from_slice(&tmp[i..]);
}

/// `+text\r\n` / `-text\r\n`. A CR or LF inside the text would end the line
/// early and desynchronise the client, so they become spaces (as Redis does
/// for error replies).
fn write_line(prefix: u8, text: &[u8], out: &mut BytesMut) {
    out.reserve(text.len() + 3);
    out.extend_from_slice(&[prefix]);
    if has_control_byte(text) && text.iter().any(|&c| c == b'\r' || c == b'\n') {
        out.extend(
            text.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
    } else {
        out.extend_from_slice(text);
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether any byte is below 0x20, eight bytes per step: every status
/// line (ADDJOB's job ID above all) is checked for CR/LF, and a byte loop
/// would spend a compare and a branch per byte. A hit is then checked
/// exactly.
fn has_control_byte(text: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = text.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let x = u64::from_ne_bytes(b);
        // Some byte < 0x20 iff this is non-zero (exact for thresholds <= 0x80).
        if x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&c| c < 0x20)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(r, proto, &mut out);
        out.to_vec()
    }

    /// Expect the same bytes in RESP2 and RESP3.
    fn both(r: &Reply, expected: &[u8]) {
        assert_eq!(enc(r, 2), expected, "RESP2 {r:?}");
        assert_eq!(enc(r, 3), expected, "RESP3 {r:?}");
    }

    #[test]
    fn status_and_error() {
        both(&Reply::ok(), b"+OK\r\n");
        both(&Reply::Status("QUEUED".into()), b"+QUEUED\r\n");
        both(&Reply::err("ERR syntax error"), b"-ERR syntax error\r\n");
        both(&Reply::err("ERR a\r\nb\nc\r"), b"-ERR a  b c \r\n");
        both(&Reply::Status("x\ny".into()), b"+x y\r\n");
        both(&Reply::Status(String::new()), b"+\r\n");
        let id = *b"D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1";
        let mut expected = b"+".to_vec();
        expected.extend_from_slice(&id);
        expected.extend_from_slice(b"\r\n");
        both(&Reply::Id(id), &expected);
        // An ID given by a client (ACKJOB of an unknown job, then JSCAN)
        // may hold anything: CR and LF still become spaces.
        let mut odd = id;
        odd[12] = b'\r';
        odd[13] = b'\n';
        let mut expected = b"+".to_vec();
        expected.extend_from_slice(&id);
        expected[13] = b' ';
        expected[14] = b' ';
        expected.extend_from_slice(b"\r\n");
        both(&Reply::Id(odd), &expected);
    }

    #[test]
    fn control_bytes_found_at_every_position() {
        for len in 0..40 {
            let clean = vec![b'a'; len];
            assert!(!has_control_byte(&clean));
            for at in 0..len {
                for c in [b'\r', b'\n', 0, 0x1f] {
                    let mut t = clean.clone();
                    t[at] = c;
                    assert!(has_control_byte(&t), "{len} {at} {c}");
                }
                let mut t = clean.clone();
                t[at] = 0x20;
                t[len - 1] = 0xff;
                assert!(!has_control_byte(&t));
            }
        }
        both(&Reply::Status("a\tb".into()), b"+a\tb\r\n");
    }

    #[test]
    fn integers() {
        both(&Reply::Integer(0), b":0\r\n");
        both(&Reply::Integer(7), b":7\r\n");
        both(&Reply::Integer(-1), b":-1\r\n");
        both(&Reply::Integer(1234567890), b":1234567890\r\n");
        both(&Reply::Integer(i64::MAX), b":9223372036854775807\r\n");
        both(&Reply::Integer(i64::MIN), b":-9223372036854775808\r\n");
        for n in [-100i64, -10, -9, 9, 10, 99, 100, 101, 1 << 40] {
            both(&Reply::Integer(n), format!(":{n}\r\n").as_bytes());
        }
    }

    #[test]
    fn bulks() {
        both(&Reply::bulk_str("hello"), b"$5\r\nhello\r\n");
        both(&Reply::bulk(b""), b"$0\r\n\r\n");
        both(&Reply::bulk(b"a\r\n\0b"), b"$5\r\na\r\n\0b\r\n");
        let big = vec![b'z'; 100_000];
        let mut expected = b"$100000\r\n".to_vec();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"\r\n");
        both(&Reply::bulk(&big), &expected);
    }

    #[test]
    fn nulls() {
        assert_eq!(enc(&Reply::NullBulk, 2), b"$-1\r\n");
        assert_eq!(enc(&Reply::NullArray, 2), b"*-1\r\n");
        assert_eq!(enc(&Reply::NullBulk, 3), b"_\r\n");
        assert_eq!(enc(&Reply::NullArray, 3), b"_\r\n");
        // Unknown protocol versions fall back to RESP2.
        for proto in [0, 1, 4, 255] {
            assert_eq!(enc(&Reply::NullBulk, proto), b"$-1\r\n");
            assert_eq!(enc(&Reply::NullArray, proto), b"*-1\r\n");
        }
    }

    #[test]
    fn arrays() {
        both(&Reply::Array(vec![]), b"*0\r\n");
        let nested = Reply::Array(vec![
            Reply::Array(vec![
                Reply::bulk_str("q"),
                Reply::bulk_str("D-1"),
                Reply::bulk_str("body"),
            ]),
            Reply::Integer(3),
            Reply::NullBulk,
        ]);
        assert_eq!(
            enc(&nested, 2),
            b"*3\r\n*3\r\n$1\r\nq\r\n$3\r\nD-1\r\n$4\r\nbody\r\n:3\r\n$-1\r\n"
        );
        assert_eq!(
            enc(&nested, 3),
            b"*3\r\n*3\r\n$1\r\nq\r\n$3\r\nD-1\r\n$4\r\nbody\r\n:3\r\n_\r\n"
        );
    }

    #[test]
    fn maps() {
        let m = Reply::Map(vec![
            (Reply::bulk_str("id"), Reply::bulk_str("D-1")),
            (Reply::bulk_str("ttl"), Reply::Integer(-5)),
            (Reply::bulk_str("x"), Reply::NullArray),
        ]);
        assert_eq!(
            enc(&m, 2),
            b"*6\r\n$2\r\nid\r\n$3\r\nD-1\r\n$3\r\nttl\r\n:-5\r\n$1\r\nx\r\n*-1\r\n"
        );
        assert_eq!(
            enc(&m, 3),
            b"%3\r\n$2\r\nid\r\n$3\r\nD-1\r\n$3\r\nttl\r\n:-5\r\n$1\r\nx\r\n_\r\n"
        );
        assert_eq!(enc(&Reply::Map(vec![]), 2), b"*0\r\n");
        assert_eq!(enc(&Reply::Map(vec![]), 3), b"%0\r\n");
        // Maps nested in arrays keep their protocol-specific form.
        let a = Reply::Array(vec![Reply::Map(vec![(
            Reply::Integer(1),
            Reply::Integer(2),
        )])]);
        assert_eq!(enc(&a, 2), b"*1\r\n*2\r\n:1\r\n:2\r\n");
        assert_eq!(enc(&a, 3), b"*1\r\n%1\r\n:1\r\n:2\r\n");
    }

    #[test]
    fn raw_is_verbatim() {
        both(&Reply::Raw(Bytes::from_static(b"+PONG\r\n")), b"+PONG\r\n");
        both(&Reply::Raw(Bytes::new()), b"");
    }

    #[test]
    fn appends_to_existing_output() {
        let mut out = BytesMut::from(&b"+A\r\n"[..]);
        encode(&Reply::Integer(1), 2, &mut out);
        assert_eq!(&out[..], b"+A\r\n:1\r\n");
    }

    #[test]
    fn helpers() {
        assert_eq!(&to_bytes(&Reply::NullBulk, 3)[..], b"_\r\n");
        let mut out = BytesMut::new();
        write_array_header(2, &mut out);
        write_bulk(b"ab", &mut out);
        write_integer(-42, &mut out);
        assert_eq!(&out[..], b"*2\r\n$2\r\nab\r\n:-42\r\n");
    }
}
