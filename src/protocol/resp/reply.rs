//! The client side of RESP: encode a request, decode the server's replies.
//!
//! Used by the tools that talk to a server as a client (`disque-benchmark`)
//! and by the integration tests, so both read replies the same way. The
//! server itself never decodes replies: its side of the protocol is
//! [`super::parse`] (requests in) and [`super::encode`] (replies out).
//!
//! The decoder is incremental and bounded: [`decode`] works on a buffer
//! that may hold several pipelined replies or only part of one, returns
//! `Ok(None)` when more bytes are needed, and rejects anything that can never
//! become a valid reply (bad type byte, non-CRLF line ends, non-canonical
//! lengths, oversized or too deeply nested aggregates) instead of waiting
//! for it. Every RESP2 and RESP3 reply type is understood.

use std::fmt;

use crate::support::strings::string2ll;

/// Longest blob accepted (Redis' default `proto-max-bulk-len`).
const MAX_BLOB_LEN: i64 = 512 * 1024 * 1024;
/// Largest aggregate (array, set, push, map) length accepted.
const MAX_AGGREGATE_LEN: i64 = 16 * 1024 * 1024;
/// Deepest nesting of aggregates accepted.
const MAX_DEPTH: usize = 32;
/// Every RESP2 and RESP3 reply type byte.
const REPLY_TYPES: &[u8] = b"+-:$*_#,(!=~>%";
/// Elements reserved up front, whatever the announced length says.
const MAX_PREALLOC: usize = 1024;

/// One decoded reply.
///
/// RESP3 sets (`~`) and pushes (`>`) decode as [`Reply::Array`]; blob
/// errors (`!`) decode as [`Reply::Error`]. Doubles and big numbers keep
/// their text so nothing is lost to rounding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+text`
    Status(String),
    /// `-text` (RESP3 `!` blob errors too), without the leading `-`.
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` payload, binary safe.
    Bulk(Vec<u8>),
    /// `$-1`
    NilBulk,
    /// `*-1`
    NilArray,
    /// `*n` (and RESP3 `~n` sets, `>n` pushes).
    Array(Vec<Reply>),
    /// RESP3 `_`
    Null,
    /// RESP3 `%n`: key/value pairs in wire order.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `#t` / `#f`
    Bool(bool),
    /// RESP3 `,` (as sent, e.g. `1.5`, `inf`).
    Double(String),
    /// RESP3 `(` (as sent).
    BigNum(String),
    /// RESP3 `=` verbatim string: three-letter format and payload.
    Verbatim(String, Vec<u8>),
}

impl Reply {
    /// Text of a status, error, bulk or verbatim reply (lossy UTF-8).
    pub fn as_text(&self) -> Option<String> {
        match self {
            Reply::Status(s) | Reply::Error(s) => Some(s.clone()),
            Reply::Bulk(b) | Reply::Verbatim(_, b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// Value of an integer reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// Elements of an array reply.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Value of `key` in a flat `[k1, v1, k2, v2, ...]` array of bulk keys
    /// (a map as RESP2 sends it) or in a RESP3 map.
    pub fn get(&self, key: &str) -> Option<&Reply> {
        let is_key = |k: &Reply| matches!(k, Reply::Bulk(b) if b == key.as_bytes());
        match self {
            Reply::Array(a) => a.chunks_exact(2).find(|kv| is_key(&kv[0])).map(|kv| &kv[1]),
            Reply::Map(m) => m.iter().find(|(k, _)| is_key(k)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Whether this is any kind of null (`$-1`, `*-1`, RESP3 `_`).
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::NilBulk | Reply::NilArray | Reply::Null)
    }

    /// Short description for error messages (never the whole payload).
    pub fn describe(&self) -> String {
        match self {
            Reply::Status(s) => format!("status '{s}'"),
            Reply::Error(s) => format!("error '{s}'"),
            Reply::Int(i) => format!("integer {i}"),
            Reply::Bulk(b) => format!("bulk string of {} bytes", b.len()),
            Reply::NilBulk => "nil".to_string(),
            Reply::NilArray => "nil array".to_string(),
            Reply::Array(a) => format!("array of {} elements", a.len()),
            Reply::Null => "null".to_string(),
            Reply::Map(m) => format!("map of {} entries", m.len()),
            Reply::Bool(b) => format!("boolean {b}"),
            Reply::Double(d) => format!("double {d}"),
            Reply::BigNum(n) => format!("big number {n}"),
            Reply::Verbatim(f, b) => format!("verbatim {f} string of {} bytes", b.len()),
        }
    }
}

/// The input can never become a valid reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol error: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// `Ok(Some((reply, bytes consumed)))`, or `Ok(None)` for "need more bytes".
pub type DecodeResult = Result<Option<(Reply, usize)>, DecodeError>;

/// Decodes one reply from the start of `buf`.
pub fn decode(buf: &[u8]) -> DecodeResult {
    decode_at(buf, 0, 0)
}

fn decode_at(buf: &[u8], pos: usize, depth: usize) -> DecodeResult {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    // Reject a bad type byte now rather than after waiting for its line.
    if !REPLY_TYPES.contains(&kind) {
        return Err(bad_type(kind));
    }
    let Some((line, after)) = read_line(buf, pos + 1)? else {
        return Ok(None);
    };
    let text = || String::from_utf8_lossy(line).into_owned();
    let done = |r: Reply| Ok(Some((r, after)));
    match kind {
        b'+' => done(Reply::Status(text())),
        b'-' => done(Reply::Error(text())),
        b':' => done(Reply::Int(parse_int(line)?)),
        b'_' if line.is_empty() => done(Reply::Null),
        b'_' => Err(DecodeError("null with a payload".into())),
        b'#' => match line {
            b"t" => done(Reply::Bool(true)),
            b"f" => done(Reply::Bool(false)),
            _ => Err(DecodeError(format!("invalid boolean '{}'", text()))),
        },
        b',' => done(Reply::Double(text())),
        b'(' => done(Reply::BigNum(text())),
        b'$' | b'!' | b'=' => {
            let len = parse_int(line)?;
            if kind == b'$' && len == -1 {
                return done(Reply::NilBulk);
            }
            let Some((blob, next)) = read_blob(buf, after, len)? else {
                return Ok(None);
            };
            let reply = match kind {
                b'$' => Reply::Bulk(blob.to_vec()),
                b'!' => Reply::Error(String::from_utf8_lossy(blob).into_owned()),
                _ => match blob.get(3) {
                    Some(b':') => Reply::Verbatim(
                        String::from_utf8_lossy(&blob[..3]).into_owned(),
                        blob[4..].to_vec(),
                    ),
                    _ => return Err(DecodeError("verbatim string without a format".into())),
                },
            };
            Ok(Some((reply, next)))
        }
        b'*' | b'~' | b'>' | b'%' => {
            let len = parse_int(line)?;
            if kind == b'*' && len == -1 {
                return done(Reply::NilArray);
            }
            if !(0..=MAX_AGGREGATE_LEN).contains(&len) {
                return Err(DecodeError(format!("invalid aggregate length {len}")));
            }
            if depth >= MAX_DEPTH {
                return Err(DecodeError("aggregates nested too deeply".into()));
            }
            let per = if kind == b'%' { 2 } else { 1 };
            // In range 0..=MAX_AGGREGATE_LEN, so the cast is lossless.
            let count = len as usize * per;
            let mut items = Vec::with_capacity(count.min(MAX_PREALLOC));
            let mut cur = after;
            for _ in 0..count {
                match decode_at(buf, cur, depth + 1)? {
                    Some((item, next)) => {
                        items.push(item);
                        cur = next;
                    }
                    None => return Ok(None),
                }
            }
            let reply = if kind == b'%' {
                let mut it = items.into_iter();
                let mut pairs = Vec::with_capacity(count / 2);
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Reply::Map(pairs)
            } else {
                Reply::Array(items)
            };
            Ok(Some((reply, cur)))
        }
        other => Err(bad_type(other)),
    }
}

fn bad_type(kind: u8) -> DecodeError {
    DecodeError(format!("unexpected reply type byte 0x{kind:02x}"))
}

/// The line starting at `start` (without its CRLF) and the offset after it.
fn read_line(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let rest = buf.get(start..).unwrap_or_default();
    match rest.iter().position(|&b| b == b'\n') {
        None => Ok(None),
        Some(nl) if nl == 0 || rest[nl - 1] != b'\r' => {
            Err(DecodeError("line not terminated by CRLF".into()))
        }
        Some(nl) => Ok(Some((&rest[..nl - 1], start + nl + 1))),
    }
}

/// The `len` payload bytes at `start` and the offset after their CRLF.
fn read_blob(buf: &[u8], start: usize, len: i64) -> Result<Option<(&[u8], usize)>, DecodeError> {
    if !(0..=MAX_BLOB_LEN).contains(&len) {
        return Err(DecodeError(format!("invalid blob length {len}")));
    }
    // In range 0..=MAX_BLOB_LEN, so the cast is lossless.
    let end = start + len as usize;
    match buf.get(end..end + 2) {
        None => Ok(None),
        Some(b"\r\n") => Ok(Some((&buf[start..end], end + 2))),
        Some(_) => Err(DecodeError("blob not terminated by CRLF".into())),
    }
}

/// A canonical decimal `i64` as servers send them (Redis `string2ll`:
/// optional `-`, no `+`, no leading zeros, no overflow).
fn parse_int(line: &[u8]) -> Result<i64, DecodeError> {
    string2ll(line).ok_or_else(|| {
        DecodeError(format!(
            "invalid integer '{}'",
            String::from_utf8_lossy(line)
        ))
    })
}

/// Appends `args` to `out` as one RESP multibulk request.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    push_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.push(b'$');
        push_decimal(out, arg.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the decimal text of `v` (no `fmt` machinery on the hot path).
fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
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
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;

    fn full(input: &[u8]) -> (Reply, usize) {
        decode(input).expect("valid").expect("complete")
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn resp2_types() {
        assert_eq!(full(b"+OK\r\n"), (Reply::Status("OK".into()), 5));
        assert_eq!(full(b"-ERR bad\r\n"), (Reply::Error("ERR bad".into()), 10));
        assert_eq!(full(b":-42\r\n"), (Reply::Int(-42), 6));
        assert_eq!(full(b":-9223372036854775808\r\n").0, Reply::Int(i64::MIN));
        assert_eq!(full(b":9223372036854775807\r\n").0, Reply::Int(i64::MAX));
        assert_eq!(full(b"$3\r\nfoo\r\n"), (bulk("foo"), 9));
        assert_eq!(full(b"$0\r\n\r\n"), (bulk(""), 6));
        assert_eq!(full(b"$-1\r\n"), (Reply::NilBulk, 5));
        assert_eq!(full(b"*-1\r\n"), (Reply::NilArray, 5));
        assert_eq!(full(b"*0\r\n"), (Reply::Array(vec![]), 4));
    }

    #[test]
    fn resp3_types() {
        assert_eq!(full(b"_\r\n"), (Reply::Null, 3));
        assert_eq!(full(b"#t\r\n").0, Reply::Bool(true));
        assert_eq!(full(b"#f\r\n").0, Reply::Bool(false));
        assert_eq!(full(b",1.5\r\n").0, Reply::Double("1.5".into()));
        assert_eq!(full(b"(123\r\n").0, Reply::BigNum("123".into()));
        assert_eq!(full(b"!5\r\nERR x\r\n").0, Reply::Error("ERR x".into()));
        assert_eq!(
            full(b"=9\r\ntxt:hello\r\n").0,
            Reply::Verbatim("txt".into(), b"hello".to_vec())
        );
        assert_eq!(
            full(b"~2\r\n:1\r\n:2\r\n").0,
            Reply::Array(vec![Reply::Int(1), Reply::Int(2)])
        );
        assert_eq!(
            full(b">2\r\n+a\r\n:2\r\n").0,
            Reply::Array(vec![Reply::Status("a".into()), Reply::Int(2)])
        );
        let (m, n) = full(b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n_\r\n");
        assert_eq!(n, 25);
        assert_eq!(
            m,
            Reply::Map(vec![(bulk("a"), Reply::Int(1)), (bulk("b"), Reply::Null)])
        );
        assert_eq!(m.get("a"), Some(&Reply::Int(1)));
        assert_eq!(m.get("c"), None);
    }

    #[test]
    fn accessors() {
        let flat = Reply::Array(vec![bulk("k"), Reply::Int(7), bulk("s"), bulk("v")]);
        assert_eq!(flat.get("k").and_then(Reply::as_int), Some(7));
        assert_eq!(flat.get("s").and_then(Reply::as_text), Some("v".into()));
        assert_eq!(flat.get("7"), None);
        assert_eq!(flat.as_array().map(<[Reply]>::len), Some(4));
        assert_eq!(Reply::Int(1).as_text(), None);
        assert!(Reply::Null.is_nil() && Reply::NilBulk.is_nil() && Reply::NilArray.is_nil());
        assert!(Reply::Error("E".into()).is_error());
        assert_eq!(bulk("abc").describe(), "bulk string of 3 bytes");
    }

    #[test]
    fn binary_bulk_with_crlf_inside() {
        let (r, n) = full(b"$4\r\n\r\n\r\n\r\n");
        assert_eq!(r, Reply::Bulk(b"\r\n\r\n".to_vec()));
        assert_eq!(n, 10);
    }

    #[test]
    fn nested_arrays_and_nulls() {
        // A GETJOB-like reply: two jobs, then a nil array element.
        let input = b"*3\r\n*3\r\n$1\r\nq\r\n$2\r\nD1\r\n$4\r\nbody\r\n*2\r\n$-1\r\n:7\r\n*-1\r\n";
        let (r, n) = full(input);
        assert_eq!(n, input.len());
        assert_eq!(
            r,
            Reply::Array(vec![
                Reply::Array(vec![bulk("q"), bulk("D1"), bulk("body")]),
                Reply::Array(vec![Reply::NilBulk, Reply::Int(7)]),
                Reply::NilArray,
            ])
        );
    }

    #[test]
    fn every_strict_prefix_is_incomplete() {
        let input: &[u8] =
            b"*3\r\n*3\r\n$1\r\nq\r\n$2\r\nD1\r\n$5\r\nhello\r\n$-1\r\n%1\r\n=5\r\ntxt:a\r\n#t\r\n";
        for cut in 0..input.len() {
            assert_eq!(decode(&input[..cut]), Ok(None), "prefix of {cut} bytes");
        }
        assert_eq!(full(input).1, input.len());
    }

    #[test]
    fn pipelined_stream_in_small_chunks() {
        let stream: &[u8] = b"$5\r\nhello\r\n:10\r\n*2\r\n+a\r\n$-1\r\n-ERR x\r\n";
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(3) {
            buf.extend_from_slice(chunk);
            while let Some((r, n)) = decode(&buf).expect("valid") {
                got.push(r);
                buf.drain(..n);
            }
        }
        assert!(buf.is_empty());
        assert_eq!(
            got,
            vec![
                bulk("hello"),
                Reply::Int(10),
                Reply::Array(vec![Reply::Status("a".into()), Reply::NilBulk]),
                Reply::Error("ERR x".into()),
            ]
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            &b"?x\r\n"[..],
            b"\r\n",
            b":12a\r\n",
            b":\r\n",
            b":-\r\n",
            b":+1\r\n",
            b":007\r\n",
            b"$03\r\nfoo\r\n",
            b":9223372036854775808\r\n",
            b":99999999999999999999\r\n",
            b"$-2\r\n",
            b"*-2\r\n",
            b"%-1\r\n",
            b"!-1\r\n",
            b"$3\r\nfooXY",
            b"+OK\n",
            b"\n",
            b"#x\r\n",
            b"_x\r\n",
            b"=3\r\ntxt\r\n",
            b"$536870913\r\n",
            b"*16777217\r\n",
        ] {
            assert!(decode(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(decode(deep.as_bytes()).is_err());
        let ok = "*1\r\n".repeat(MAX_DEPTH) + ":1\r\n";
        assert!(decode(ok.as_bytes()).is_ok());
    }

    #[test]
    fn encoder_round_trip() {
        let mut out = Vec::new();
        encode_command(&mut out, &["ADDJOB", "q", "", "0"]);
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
