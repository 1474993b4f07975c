//! Minimal RESP2 support: a command encoder and an incremental reply parser.
//!
//! The parser works on a byte slice that may hold several pipelined replies,
//! or only part of one.  [`parse`] returns `Ok(None)` when more input is
//! needed, `Ok(Some((reply, consumed)))` when one complete reply was decoded,
//! and `Err` when the input can never become a valid reply.

use std::fmt;

/// Longest bulk string accepted (same limit as Redis' `proto-max-bulk-len`).
const MAX_BULK_LEN: i64 = 512 * 1024 * 1024;
/// Largest multi-bulk length accepted.
const MAX_ARRAY_LEN: i64 = 16 * 1024 * 1024;
/// Deepest nesting of arrays accepted.
const MAX_DEPTH: usize = 32;

/// One decoded RESP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Status(Vec<u8>),
    /// `-ERR ...`
    Error(Vec<u8>),
    /// `:123`
    Int(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// `$-1`
    Nil,
    /// `*2\r\n...`
    Array(Vec<Reply>),
    /// `*-1`
    NilArray,
}

impl Reply {
    /// Short human-readable description, used in error messages.
    pub fn describe(&self) -> String {
        match self {
            Reply::Status(s) => format!("status '{}'", String::from_utf8_lossy(s)),
            Reply::Error(s) => format!("error '{}'", String::from_utf8_lossy(s)),
            Reply::Int(i) => format!("integer {i}"),
            Reply::Bulk(b) => format!("bulk string of {} bytes", b.len()),
            Reply::Nil => "nil".to_string(),
            Reply::Array(a) => format!("array of {} elements", a.len()),
            Reply::NilArray => "nil array".to_string(),
        }
    }
}

/// The input is not valid RESP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

type ParseResult = Result<Option<(Reply, usize)>, ProtocolError>;

/// Parses one reply from the start of `buf`.
pub fn parse(buf: &[u8]) -> ParseResult {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], pos: usize, depth: usize) -> ParseResult {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some((line, after)) = read_line(buf, pos + 1)? else {
        return Ok(None);
    };
    match kind {
        b'+' => Ok(Some((Reply::Status(line.to_vec()), after))),
        b'-' => Ok(Some((Reply::Error(line.to_vec()), after))),
        b':' => Ok(Some((Reply::Int(parse_int(line)?), after))),
        b'$' => {
            let len = parse_int(line)?;
            if len == -1 {
                return Ok(Some((Reply::Nil, after)));
            }
            if !(0..=MAX_BULK_LEN).contains(&len) {
                return Err(ProtocolError(format!("invalid bulk length {len}")));
            }
            let len = len as usize;
            let end = after + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string not terminated by CRLF".into()));
            }
            Ok(Some((Reply::Bulk(buf[after..end].to_vec()), end + 2)))
        }
        b'*' => {
            let len = parse_int(line)?;
            if len == -1 {
                return Ok(Some((Reply::NilArray, after)));
            }
            if !(0..=MAX_ARRAY_LEN).contains(&len) {
                return Err(ProtocolError(format!("invalid array length {len}")));
            }
            if depth >= MAX_DEPTH {
                return Err(ProtocolError("arrays nested too deeply".into()));
            }
            // Do not trust the announced length for the allocation.
            let mut items = Vec::with_capacity((len as usize).min(1024));
            let mut cur = after;
            for _ in 0..len {
                match parse_at(buf, cur, depth + 1)? {
                    Some((item, next)) => {
                        items.push(item);
                        cur = next;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(items), cur)))
        }
        other => Err(ProtocolError(format!(
            "unexpected reply type byte 0x{other:02x}"
        ))),
    }
}

/// Returns the line starting at `start` (without CRLF) and the offset after it.
fn read_line(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = buf.get(start..).unwrap_or(&[]);
    match rest.iter().position(|&b| b == b'\n') {
        None => Ok(None),
        Some(0) => Err(ProtocolError("line not terminated by CRLF".into())),
        Some(nl) => {
            if rest[nl - 1] != b'\r' {
                return Err(ProtocolError("line not terminated by CRLF".into()));
            }
            Ok(Some((&rest[..nl - 1], start + nl + 1)))
        }
    }
}

fn parse_int(line: &[u8]) -> Result<i64, ProtocolError> {
    let bad = || {
        ProtocolError(format!(
            "invalid integer '{}'",
            String::from_utf8_lossy(line)
        ))
    };
    let (neg, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(if neg { -v } else { v })
}

/// Appends `args` to `out` as one RESP multi-bulk command.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        push_decimal(out, arg.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the decimal text of `v` without going through `fmt`.
pub fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(input: &[u8]) -> (Reply, usize) {
        parse(input).expect("valid").expect("complete")
    }

    #[test]
    fn simple_types() {
        assert_eq!(full(b"+OK\r\n"), (Reply::Status(b"OK".to_vec()), 5));
        assert_eq!(
            full(b"-ERR bad\r\n"),
            (Reply::Error(b"ERR bad".to_vec()), 10)
        );
        assert_eq!(full(b":-42\r\n"), (Reply::Int(-42), 6));
        assert_eq!(full(b"$3\r\nfoo\r\n"), (Reply::Bulk(b"foo".to_vec()), 9));
        assert_eq!(full(b"$0\r\n\r\n"), (Reply::Bulk(Vec::new()), 6));
        assert_eq!(full(b"$-1\r\n"), (Reply::Nil, 5));
        assert_eq!(full(b"*-1\r\n"), (Reply::NilArray, 5));
        assert_eq!(full(b"*0\r\n"), (Reply::Array(vec![]), 4));
    }

    #[test]
    fn binary_bulk_with_crlf_inside() {
        let (r, n) = full(b"$4\r\n\r\n\r\n\r\n");
        assert_eq!(r, Reply::Bulk(b"\r\n\r\n".to_vec()));
        assert_eq!(n, 10);
    }

    #[test]
    fn nested_arrays_and_nulls() {
        // GETJOB-like reply: two jobs, then a nil array element.
        let input = b"*3\r\n*3\r\n$1\r\nq\r\n$2\r\nD1\r\n$4\r\nbody\r\n*2\r\n$-1\r\n:7\r\n*-1\r\n";
        let (r, n) = full(input);
        assert_eq!(n, input.len());
        assert_eq!(
            r,
            Reply::Array(vec![
                Reply::Array(vec![
                    Reply::Bulk(b"q".to_vec()),
                    Reply::Bulk(b"D1".to_vec()),
                    Reply::Bulk(b"body".to_vec()),
                ]),
                Reply::Array(vec![Reply::Nil, Reply::Int(7)]),
                Reply::NilArray,
            ])
        );
    }

    #[test]
    fn pipelined_replies_are_consumed_one_by_one() {
        let input = b"+OK\r\n:1\r\n$2\r\nhi\r\n*1\r\n:2\r\n-ERR x\r\n";
        let mut pos = 0;
        let mut got = Vec::new();
        while let Some((r, n)) = parse(&input[pos..]).expect("valid") {
            got.push(r);
            pos += n;
        }
        assert_eq!(pos, input.len());
        assert_eq!(
            got,
            vec![
                Reply::Status(b"OK".to_vec()),
                Reply::Int(1),
                Reply::Bulk(b"hi".to_vec()),
                Reply::Array(vec![Reply::Int(2)]),
                Reply::Error(b"ERR x".to_vec()),
            ]
        );
    }

    #[test]
    fn every_strict_prefix_is_incomplete() {
        let input: &[u8] = b"*2\r\n*3\r\n$1\r\nq\r\n$2\r\nD1\r\n$5\r\nhello\r\n$-1\r\n";
        for cut in 0..input.len() {
            assert_eq!(parse(&input[..cut]), Ok(None), "prefix of {cut} bytes");
        }
        assert_eq!(full(input).1, input.len());
    }

    #[test]
    fn partial_then_complete_stream() {
        // Feed a pipelined stream in 3-byte chunks, as a socket might.
        let stream: &[u8] = b"$5\r\nhello\r\n:10\r\n*2\r\n+a\r\n$-1\r\n";
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(3) {
            buf.extend_from_slice(chunk);
            while let Some((r, n)) = parse(&buf).expect("valid") {
                got.push(r);
                buf.drain(..n);
            }
        }
        assert!(buf.is_empty());
        assert_eq!(
            got,
            vec![
                Reply::Bulk(b"hello".to_vec()),
                Reply::Int(10),
                Reply::Array(vec![Reply::Status(b"a".to_vec()), Reply::Nil]),
            ]
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b":12a\r\n").is_err());
        assert!(parse(b":\r\n").is_err());
        assert!(parse(b"$-2\r\n").is_err());
        assert!(parse(b"$3\r\nfooXY").is_err());
        assert!(parse(b"+OK\n").is_err());
        assert!(parse(b":99999999999999999999\r\n").is_err());
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn encoder_round_trip() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"ADDJOB", b"q", b"", b"0"]);
        assert_eq!(
            out,
            b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$0\r\n\r\n$1\r\n0\r\n".to_vec()
        );
        let mut d = Vec::new();
        push_decimal(&mut d, 0);
        push_decimal(&mut d, u64::MAX);
        assert_eq!(d, b"018446744073709551615".to_vec());
    }
}
