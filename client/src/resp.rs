//! A compact RESP2/RESP3 codec: requests are always RESP2 multibulk arrays
//! of bulk strings (what every Disque node accepts), replies may be any
//! RESP2 or RESP3 type.
//!
//! [`Decoder`] keeps the aggregates it has opened between calls, so a large
//! reply arriving in many reads is scanned once, not once per read.

use bytes::{Buf, Bytes, BytesMut};

/// A reply from the server, RESP2 or RESP3.
///
/// Error replies are values too: [`Client::cmd`](crate::Client::cmd)
/// turns a top-level error into [`Error::Server`](crate::Error::Server),
/// while errors nested in an array stay here as [`Value::Error`].
///
/// ```
/// use disque_client::Value;
///
/// let v = Value::Array(vec![Value::Bulk("q".into()), Value::Int(3)]);
/// assert_eq!(v.as_array().map(|a| a.len()), Some(2));
/// assert_eq!(Value::Bulk("42".into()).as_int(), Some(42));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+text`, a status reply (job IDs from ADDJOB and JSCAN are these).
    Status(String),
    /// `-CODE message`, the whole line without the `-`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bulk string, or RESP3 `=n` verbatim string (format prefix kept).
    Bulk(Bytes),
    /// `$-1`, `*-1` or RESP3 `_`.
    Nil,
    /// `*n`, RESP3 `~n` (set) and `>n` (push).
    Array(Vec<Value>),
    /// RESP3 `%n`.
    Map(Vec<(Value, Value)>),
    /// RESP3 `,x`.
    Double(f64),
    /// RESP3 `#t` / `#f`.
    Bool(bool),
    /// RESP3 `(n`, kept as its decimal text.
    BigNumber(String),
}

impl Value {
    /// Text of a status, bulk or big-number reply (lossy UTF-8).
    ///
    /// ```
    /// use disque_client::Value;
    /// assert_eq!(Value::Status("PONG".into()).as_text().as_deref(), Some("PONG"));
    /// ```
    pub fn as_text(&self) -> Option<String> {
        match self {
            Value::Status(s) | Value::BigNumber(s) => Some(s.clone()),
            Value::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// Bytes of a bulk or status reply.
    ///
    /// ```
    /// use disque_client::Value;
    /// assert_eq!(Value::Bulk("b".into()).as_bytes().as_deref(), Some(&b"b"[..]));
    /// ```
    pub fn as_bytes(&self) -> Option<Bytes> {
        match self {
            Value::Bulk(b) => Some(b.clone()),
            Value::Status(s) => Some(Bytes::copy_from_slice(s.as_bytes())),
            _ => None,
        }
    }

    /// An integer reply, or a bulk/status holding a decimal integer.
    ///
    /// ```
    /// use disque_client::Value;
    /// assert_eq!(Value::Int(7).as_int(), Some(7));
    /// ```
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Bulk(_) | Value::Status(_) | Value::BigNumber(_) => {
                self.as_text().and_then(|t| t.parse().ok())
            }
            _ => None,
        }
    }

    /// Elements of an array, set or push reply.
    ///
    /// ```
    /// use disque_client::Value;
    /// assert_eq!(Value::Nil.as_array(), None);
    /// ```
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Whether this is a null reply.
    ///
    /// ```
    /// assert!(disque_client::Value::Nil.is_nil());
    /// ```
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// Name/value pairs of a RESP3 map or of a RESP2 flat `[k, v, ...]`
    /// array (the two shapes SHOW, QSTAT and HELLO 3 use).
    ///
    /// ```
    /// use disque_client::Value;
    /// let v = Value::Array(vec![Value::Bulk("len".into()), Value::Int(3)]);
    /// let pairs = v.pairs().unwrap_or_default();
    /// assert_eq!(pairs[0].0, "len");
    /// ```
    pub fn pairs(&self) -> Option<Vec<(String, &Value)>> {
        match self {
            Value::Map(m) => m.iter().map(|(k, v)| k.as_text().map(|k| (k, v))).collect(),
            Value::Array(a) if a.len() % 2 == 0 => a
                .chunks_exact(2)
                .map(|kv| kv[0].as_text().map(|k| (k, &kv[1])))
                .collect(),
            _ => None,
        }
    }
}

/// A malformed reply. The connection cannot be used after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub String);

/// Nesting deeper than any Disque reply (JSCAN REPLY ALL is 4 levels)
/// means the stream is garbage.
const MAX_DEPTH: usize = 64;
/// One bulk may hold a 512 MB job body plus framing.
const MAX_BULK: usize = 1 << 30;
/// Aggregates claim their length up front; do not trust it for allocation.
const MAX_PREALLOC: usize = 4096;

#[derive(Debug)]
enum Kind {
    Array,
    Map,
    Attribute,
}

#[derive(Debug)]
struct Frame {
    kind: Kind,
    remaining: usize,
    items: Vec<Value>,
}

impl Frame {
    /// The finished value, or `None` for an attribute (RESP3 metadata
    /// about the next value, which no Disque reply needs).
    fn finish(self) -> Option<Value> {
        match self.kind {
            Kind::Array => Some(Value::Array(self.items)),
            Kind::Map => {
                let mut pairs = Vec::with_capacity(self.items.len() / 2);
                let mut it = self.items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Some(Value::Map(pairs))
            }
            Kind::Attribute => None,
        }
    }
}

/// Incremental reply decoder.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    stack: Vec<Frame>,
}

/// Outcome of reading one element header.
enum Step {
    Value(Value),
    Open(Kind, usize),
    Incomplete,
}

impl Decoder {
    /// Take one complete reply off the front of `buf`, or `Ok(None)` when
    /// more bytes are needed (what was consumed so far is remembered).
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Value>, ProtocolError> {
        loop {
            let value = match step(buf)? {
                Step::Incomplete => return Ok(None),
                Step::Value(v) => v,
                Step::Open(kind, n) => {
                    let remaining = match kind {
                        Kind::Array => n,
                        Kind::Map | Kind::Attribute => n.checked_mul(2).ok_or_else(|| {
                            ProtocolError(format!("aggregate length {n} too large"))
                        })?,
                    };
                    if remaining > 0 {
                        if self.stack.len() >= MAX_DEPTH {
                            return Err(ProtocolError("reply nested too deeply".into()));
                        }
                        self.stack.push(Frame {
                            kind,
                            remaining,
                            items: Vec::with_capacity(remaining.min(MAX_PREALLOC)),
                        });
                        continue;
                    }
                    match (Frame {
                        kind,
                        remaining,
                        items: Vec::new(),
                    })
                    .finish()
                    {
                        Some(v) => v,
                        None => continue,
                    }
                }
            };
            if let Some(v) = self.fold(value) {
                return Ok(Some(v));
            }
        }
    }

    /// Put a finished value into the innermost open aggregate, closing
    /// every aggregate it completes; returns the top-level value when done.
    fn fold(&mut self, mut value: Value) -> Option<Value> {
        loop {
            let Some(top) = self.stack.last_mut() else {
                return Some(value);
            };
            top.items.push(value);
            top.remaining -= 1;
            if top.remaining > 0 {
                return None;
            }
            let frame = self.stack.pop()?;
            value = frame.finish()?;
        }
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

fn parse_int(line: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ProtocolError(format!(
                "bad integer {:?}",
                String::from_utf8_lossy(line).as_ref()
            ))
        })
}

fn text(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}

/// Read one element header (and, for strings, the payload) off `buf`.
fn step(buf: &mut BytesMut) -> Result<Step, ProtocolError> {
    let Some(end) = find_crlf(buf) else {
        return Ok(Step::Incomplete);
    };
    let Some(&tag) = buf.first() else {
        return Ok(Step::Incomplete);
    };
    let line = &buf[1..end];
    let step = match tag {
        b'+' => Step::Value(Value::Status(text(line))),
        b'-' => Step::Value(Value::Error(text(line))),
        b':' => Step::Value(Value::Int(parse_int(line)?)),
        b'_' => Step::Value(Value::Nil),
        b'#' => match line {
            b"t" => Step::Value(Value::Bool(true)),
            b"f" => Step::Value(Value::Bool(false)),
            _ => return Err(ProtocolError(format!("bad boolean {:?}", text(line)))),
        },
        b',' => {
            let t = text(line);
            let d = match t.as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => t
                    .parse()
                    .map_err(|_| ProtocolError(format!("bad double {t:?}")))?,
            };
            Step::Value(Value::Double(d))
        }
        b'(' => Step::Value(Value::BigNumber(text(line))),
        b'$' | b'=' | b'!' => {
            let n = parse_int(line)?;
            if n < 0 {
                if tag == b'$' && n == -1 {
                    buf.advance(end + 2);
                    return Ok(Step::Value(Value::Nil));
                }
                return Err(ProtocolError(format!("bad bulk length {n}")));
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_BULK)
                .ok_or_else(|| ProtocolError(format!("bulk length {n} too large")))?;
            let total = end + 2 + n + 2;
            if buf.len() < total {
                // Nothing consumed: the header is re-read (a few bytes) when
                // more data arrives.
                return Ok(Step::Incomplete);
            }
            if &buf[total - 2..total] != b"\r\n" {
                return Err(ProtocolError("bulk payload not followed by CRLF".into()));
            }
            buf.advance(end + 2);
            let payload = buf.split_to(n).freeze();
            buf.advance(2);
            return Ok(match tag {
                b'!' => Step::Value(Value::Error(text(&payload))),
                _ => Step::Value(Value::Bulk(payload)),
            });
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = parse_int(line)?;
            if n < 0 {
                if n == -1 && tag == b'*' {
                    buf.advance(end + 2);
                    return Ok(Step::Value(Value::Nil));
                }
                return Err(ProtocolError(format!("bad aggregate length {n}")));
            }
            let n = usize::try_from(n)
                .map_err(|_| ProtocolError(format!("aggregate length {n} too large")))?;
            let kind = match tag {
                b'%' => Kind::Map,
                b'|' => Kind::Attribute,
                _ => Kind::Array,
            };
            Step::Open(kind, n)
        }
        other => {
            return Err(ProtocolError(format!(
                "unexpected reply type byte {:?}",
                char::from(other)
            )));
        }
    };
    buf.advance(end + 2);
    Ok(step)
}

/// A command being built: RESP2 multibulk of bulk strings.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cmd {
    argc: usize,
    args: Vec<u8>,
    /// Uppercase name, for error messages.
    name: String,
}

impl Cmd {
    pub(crate) fn new(name: &str) -> Cmd {
        let mut c = Cmd {
            name: name.to_ascii_uppercase(),
            ..Cmd::default()
        };
        c.arg(name);
        c
    }

    pub(crate) fn arg(&mut self, a: impl AsRef<[u8]>) -> &mut Cmd {
        let a = a.as_ref();
        self.argc += 1;
        self.args.push(b'$');
        self.args.extend_from_slice(a.len().to_string().as_bytes());
        self.args.extend_from_slice(b"\r\n");
        self.args.extend_from_slice(a);
        self.args.extend_from_slice(b"\r\n");
        self
    }

    pub(crate) fn arg_int(&mut self, n: impl std::fmt::Display) -> &mut Cmd {
        self.arg(n.to_string())
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The `*<argc>` line; the arguments follow as [`Cmd::args`].
    pub(crate) fn encode_header(&self, out: &mut BytesMut) {
        out.extend_from_slice(b"*");
        out.extend_from_slice(self.argc.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// The encoded arguments.
    pub(crate) fn args(&self) -> &[u8] {
        &self.args
    }

    /// The full request bytes.
    #[cfg(test)]
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        self.encode_header(out);
        out.extend_from_slice(&self.args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Vec<Value> {
        let mut d = Decoder::default();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(v) = d.decode(&mut buf).unwrap() {
            out.push(v);
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        out
    }

    #[test]
    fn resp2_types() {
        let v = decode_all(b"+OK\r\n-ERR bad\r\n:-3\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n*0\r\n");
        assert_eq!(
            v,
            vec![
                Value::Status("OK".into()),
                Value::Error("ERR bad".into()),
                Value::Int(-3),
                Value::Bulk(Bytes::from_static(b"a\r\n")),
                Value::Nil,
                Value::Nil,
                Value::Array(vec![]),
            ]
        );
    }

    #[test]
    fn resp3_types() {
        let v = decode_all(
            b"_\r\n#t\r\n,1.5\r\n(12345678901234567890\r\n=8\r\ntxt:abcd\r\n!3\r\nERR\r\n\
              %1\r\n+k\r\n:1\r\n~2\r\n:1\r\n:2\r\n>1\r\n+p\r\n|1\r\n+a\r\n+b\r\n:7\r\n",
        );
        assert_eq!(v[0], Value::Nil);
        assert_eq!(v[1], Value::Bool(true));
        assert_eq!(v[2], Value::Double(1.5));
        assert_eq!(v[3], Value::BigNumber("12345678901234567890".into()));
        assert_eq!(v[4], Value::Bulk(Bytes::from_static(b"txt:abcd")));
        assert_eq!(v[5], Value::Error("ERR".into()));
        assert_eq!(
            v[6],
            Value::Map(vec![(Value::Status("k".into()), Value::Int(1))])
        );
        assert_eq!(v[7], Value::Array(vec![Value::Int(1), Value::Int(2)]));
        assert_eq!(v[8], Value::Array(vec![Value::Status("p".into())]));
        // The attribute is dropped; the value it annotates remains.
        assert_eq!(v[9], Value::Int(7));
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn nested_reply_split_at_every_byte() {
        let input: &[u8] = b"*2\r\n*3\r\n$1\r\nq\r\n$40\r\nD-ad249f8c-HFp3t4QYGJyICPooqPBy8pTY-05a1\r\n$0\r\n\r\n*0\r\n";
        for cut in 0..input.len() {
            let mut d = Decoder::default();
            let mut buf = BytesMut::from(&input[..cut]);
            assert_eq!(d.decode(&mut buf).unwrap(), None, "cut {cut}");
            buf.extend_from_slice(&input[cut..]);
            let v = d.decode(&mut buf).unwrap().unwrap();
            assert_eq!(v.as_array().unwrap().len(), 2);
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn malformed_replies_are_errors() {
        for bad in [
            &b"?x\r\n"[..],
            b":abc\r\n",
            b"$2\r\nabcd\r\n",
            b"$-2\r\n",
            b"*-2\r\n",
            b"#x\r\n",
        ] {
            let mut buf = BytesMut::from(bad);
            assert!(Decoder::default().decode(&mut buf).is_err(), "{bad:?}");
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        let mut buf = BytesMut::from(deep.as_bytes());
        assert!(Decoder::default().decode(&mut buf).is_err());
    }

    #[test]
    fn encodes_multibulk() {
        let mut c = Cmd::new("addjob");
        c.arg("q").arg(b"a b").arg_int(0);
        let mut out = BytesMut::new();
        c.encode(&mut out);
        assert_eq!(
            &out[..],
            b"*4\r\n$6\r\naddjob\r\n$1\r\nq\r\n$3\r\na b\r\n$1\r\n0\r\n"
        );
        assert_eq!(c.name(), "ADDJOB");
    }

    #[test]
    fn pairs_from_map_and_flat_array() {
        let flat = Value::Array(vec![Value::Bulk("a".into()), Value::Int(1)]);
        let map = Value::Map(vec![(Value::Bulk("a".into()), Value::Int(1))]);
        for v in [flat, map] {
            let p = v.pairs().unwrap();
            assert_eq!(p[0].0, "a");
            assert_eq!(p[0].1, &Value::Int(1));
        }
    }
}
