//! Request parsing: turns the bytes a client sends into argument vectors.
//!
//! Owns the two request framings Redis (and so Disque) accepts — multibulk
//! (`*N\r\n$len\r\narg\r\n...`) and inline (a quoted, space separated line) —
//! their size limits, the exact `Protocol error: ...` texts, and the
//! `sdssplitargs` quoting rules shared with the config-file parser.
//! The parser is incremental so that huge arguments arriving in many reads
//! cost O(total bytes), and it never allocates from a length it has not
//! validated.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

use crate::support::strings::{split_args, string2ll};

/// Most arguments one multibulk request may declare.
pub const MAX_MULTIBULK: i64 = 1024 * 1024;
/// Largest single bulk argument (effective max job body).
pub const MAX_BULK: i64 = 512 * 1024 * 1024;
/// Longest inline request line, and longest pending multibulk header line.
pub const MAX_INLINE: usize = 64 * 1024;
/// Largest unparsed buffer tolerated while no complete request is available.
pub const MAX_QUERY_BUF: usize = 1024 * 1024 * 1024;

// Every argument stays in the read buffer (no copy, no allocation):
// copying each one would cost an allocation, a copy and a free per
// argument. The read buffer is shared only until the batch's requests are
// dropped, before the next read. Commands see `&[u8]` slices; whatever
// outlives the command copies what it keeps (job bodies, queue names,
// DEDUP and DEADLETTER values, client names), so nothing long-lived pins
// a read buffer.

/// A `*N` header may announce up to a million arguments in a dozen bytes;
/// only this many slots are allocated up front, the rest grow as args arrive.
const ARGS_PREALLOC_MAX: usize = 1024;

/// One request's arguments (the first is the command name; never empty).
///
/// A request that arrived whole is one frame of the read buffer and its
/// arguments' ranges: one reference count taken and dropped per request
/// instead of one per argument (those atomic operations were 5 % of a
/// pipelined ADDJOB's CPU, run BA in docs/PERFORMANCE.md). One assembled
/// over several reads, or sent inline, keeps a buffer per argument, so a
/// large body is never copied to join its request's other arguments.
#[derive(Debug, Default)]
pub struct Request {
    frame: Bytes,
    spans: Vec<(usize, usize)>,
    parts: Vec<Bytes>,
}

/// Arguments passed on the stack up to this many (ADDJOB with a few
/// options); more take one allocation.
type ArgVec<'a> = smallvec::SmallVec<[&'a [u8]; 12]>;

impl Request {
    /// A request made of separate argument buffers (inline requests, the
    /// dashboard's commands, tests).
    pub fn from_parts(parts: Vec<Bytes>) -> Self {
        Request {
            parts,
            ..Request::default()
        }
    }

    /// How many arguments, command name included.
    pub fn len(&self) -> usize {
        if self.parts.is_empty() {
            self.spans.len()
        } else {
            self.parts.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arguments as slices, for the command that runs them.
    pub fn args(&self) -> ArgVec<'_> {
        if self.parts.is_empty() {
            self.spans.iter().map(|&(s, e)| &self.frame[s..e]).collect()
        } else {
            self.parts.iter().map(|p| &p[..]).collect()
        }
    }

    /// The arguments as owned buffers (slices of the frame).
    pub fn to_vec(&self) -> Vec<Bytes> {
        if self.parts.is_empty() {
            self.spans
                .iter()
                .map(|&(s, e)| self.frame.slice(s..e))
                .collect()
        } else {
            self.parts.clone()
        }
    }
}

/// A client protocol violation. The server replies `-ERR <message>` and
/// closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    TooBigMbulkCount,
    TooBigBulkCount,
    /// The byte found where a bulk header's `$` was expected.
    ExpectedDollar(u8),
    TooBigInline,
    UnbalancedQuotes,
    QueryBufferTooBig,
}

impl ProtocolError {
    /// The error text exactly as Redis words it (without the `ERR ` prefix).
    pub fn message(&self) -> String {
        match self {
            ProtocolError::InvalidMultibulkLength => {
                "Protocol error: invalid multibulk length".to_string()
            }
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length".to_string(),
            ProtocolError::TooBigMbulkCount => {
                "Protocol error: too big mbulk count string".to_string()
            }
            ProtocolError::TooBigBulkCount => {
                "Protocol error: too big bulk count string".to_string()
            }
            ProtocolError::ExpectedDollar(b) => {
                format!("Protocol error: expected '$', got '{}'", *b as char)
            }
            ProtocolError::TooBigInline => "Protocol error: too big inline request".to_string(),
            ProtocolError::UnbalancedQuotes => {
                "Protocol error: unbalanced quotes in request".to_string()
            }
            ProtocolError::QueryBufferTooBig => "Protocol error: query buffer too big".to_string(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ProtocolError {}

/// Incremental request parser; one per connection.
///
/// Contract: between calls the caller only appends to `buf` (it never drops
/// or rewrites unconsumed bytes). After an `Err` the parser state is
/// meaningless; the connection is expected to be closed.
#[derive(Debug)]
pub struct RequestParser {
    /// Arguments still expected by the multibulk request in progress
    /// (0 = between requests).
    mb_remaining: usize,
    /// Arguments of the multibulk request in progress already received.
    args: Vec<Bytes>,
    /// Length of the bulk argument whose header was consumed but whose
    /// payload is not complete yet.
    bulk_len: Option<usize>,
    /// Leading bytes of `buf` already searched for a line terminator, so a
    /// header or inline line trickling in is not rescanned from the start.
    scanned: usize,
    /// Bytes still missing for the pending bulk payload (plus its CRLF), as
    /// of the last `parse` call.
    pending: Option<usize>,
    /// MAX_QUERY_BUF, lowered in tests (the real limit cannot be reached
    /// through the other limits, it is a backstop).
    query_buf_limit: usize,
    /// Largest bulk argument accepted (Redis's `proto-max-bulk-len`), at
    /// most MAX_BULK.
    max_bulk: i64,
    /// Emptied requests handed back by the caller (`recycle`), whose
    /// vectors the fast path reuses: no allocation and free per request.
    spare: Vec<Request>,
}

/// Vectors kept for reuse, and the largest kept: enough for a pipelined
/// batch of ordinary commands, a few KB per busy connection at most.
const SPARE_MAX: usize = 16;
const SPARE_CAPACITY_MAX: usize = 8;

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    pub fn new() -> Self {
        RequestParser {
            mb_remaining: 0,
            args: Vec::new(),
            bulk_len: None,
            scanned: 0,
            pending: None,
            query_buf_limit: MAX_QUERY_BUF,
            max_bulk: MAX_BULK,
            spare: Vec::new(),
        }
    }

    /// Redis's `proto-max-bulk-len`: a longer bulk argument is a protocol
    /// error (`invalid bulk length`) as soon as its header is read, before
    /// any of it is buffered. Clamped to 1..=MAX_BULK.
    pub fn set_max_bulk(&mut self, bytes: u64) {
        self.max_bulk = bytes.clamp(1, MAX_BULK as u64) as i64;
    }

    /// Give back a request once the command is done with it; its buffers
    /// are dropped now, its vectors may be reused.
    pub fn recycle(&mut self, mut req: Request) {
        req.frame = Bytes::new();
        req.spans.clear();
        req.parts.clear();
        if self.spare.len() < SPARE_MAX
            && req.spans.capacity() <= SPARE_CAPACITY_MAX
            && req.parts.capacity() <= SPARE_CAPACITY_MAX
        {
            self.spare.push(req);
        }
    }

    /// Parse at most one request from the front of `buf`, consuming its bytes.
    ///
    /// `Ok(Some(request))` is a complete command (its first argument is the
    /// command name; it is never empty). `Ok(None)` means more bytes are needed;
    /// bytes of a partial request may already have moved into the parser.
    /// Empty inline lines and multibulk counts <= 0 are consumed and skipped.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        self.pending = None;
        loop {
            if self.mb_remaining == 0 {
                if let Some(req) = self.whole_request(buf) {
                    return Ok(Some(req));
                }
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first == b'*' {
                    match self.multibulk_header(buf)? {
                        None => return self.need_more(buf),
                        Some(n) if n <= 0 => continue,
                        Some(n) => {
                            // n is validated 1..=MAX_MULTIBULK, fits usize.
                            let n = n as usize;
                            self.mb_remaining = n;
                            self.args = Vec::with_capacity(n.min(ARGS_PREALLOC_MAX));
                        }
                    }
                } else {
                    match self.inline(buf)? {
                        None => return self.need_more(buf),
                        Some(args) if args.is_empty() => continue,
                        Some(args) => return Ok(Some(Request::from_parts(args))),
                    }
                }
            }

            while self.mb_remaining > 0 {
                let len = match self.bulk_len {
                    Some(len) => len,
                    None => match self.bulk_header(buf)? {
                        Some(len) => {
                            self.bulk_len = Some(len);
                            len
                        }
                        None => return self.need_more(buf),
                    },
                };
                // len <= MAX_BULK, so no overflow.
                let needed = len + 2;
                if buf.len() < needed {
                    self.pending = Some(needed - buf.len());
                    return self.need_more(buf);
                }
                // Redis blindly skips the two bytes after the payload. We
                // reject anything but CRLF: a wrong length would otherwise
                // silently desynchronise the stream and run payload bytes as
                // commands.
                if &buf[len..needed] != b"\r\n" {
                    return Err(ProtocolError::InvalidBulkLength);
                }
                let arg = buf.split_to(len).freeze();
                buf.advance(2);
                self.args.push(arg);
                self.bulk_len = None;
                self.mb_remaining -= 1;
            }
            return Ok(Some(Request::from_parts(std::mem::take(&mut self.args))));
        }
    }

    /// The fast path: a complete, canonically framed multibulk request of
    /// at most `FAST_ARGS` arguments at the front of `buf`, located by
    /// offsets and taken with one `split_to`, its arguments slices of that
    /// one frame. Anything else (partial, malformed, many arguments, inline)
    /// returns None without consuming and the general parser below decides,
    /// so the result never differs from it. Pipelined requests almost
    /// always arrive whole, and this skips the general path's per-argument
    /// header bookkeeping.
    fn whole_request(&mut self, buf: &mut BytesMut) -> Option<Request> {
        let b = &buf[..];
        if b.first() != Some(&b'*') {
            return None;
        }
        let (n, mut at) = header_number(b, 1)?;
        if n == 0 || n > FAST_ARGS as u64 {
            return None;
        }
        let mut req = self.spare.pop().unwrap_or_default();
        for _ in 0..n {
            let span = (|| {
                if b.get(at) != Some(&b'$') {
                    return None;
                }
                let (len, start) = header_number(b, at + 1)?;
                if len > self.max_bulk as u64 {
                    return None;
                }
                // len <= MAX_BULK: fits usize, no overflow.
                let end = start + len as usize;
                if b.get(end..end + 2)? != b"\r\n" {
                    return None;
                }
                Some((start, end))
            })();
            let Some((start, end)) = span else {
                req.spans.clear();
                self.spare.push(req);
                return None;
            };
            req.spans.push((start, end));
            at = end + 2;
        }
        req.frame = buf.split_to(at).freeze();
        self.scanned = 0;
        Some(req)
    }

    /// While a bulk argument is partially received: how many more bytes the
    /// caller should reserve in its read buffer to hold the rest of it (and
    /// its CRLF) without repeated reallocation. `None` otherwise. The value
    /// is bounded by MAX_BULK + 2 but comes from the client: a caller serving
    /// many untrusted connections may want to cap what it reserves at once.
    pub fn pending_bulk_remaining(&self) -> Option<usize> {
        self.pending
    }

    fn need_more<T>(&self, buf: &BytesMut) -> Result<Option<T>, ProtocolError> {
        if buf.len() > self.query_buf_limit {
            Err(ProtocolError::QueryBufferTooBig)
        } else {
            Ok(None)
        }
    }

    /// Position of the first `needle` in `buf`, remembering how far the
    /// search got so the next call resumes there.
    fn find(&mut self, buf: &BytesMut, needle: u8) -> Option<usize> {
        let start = self.scanned.min(buf.len());
        match buf[start..].iter().position(|&b| b == needle) {
            Some(i) => {
                self.scanned = start + i;
                Some(start + i)
            }
            None => {
                self.scanned = buf.len();
                None
            }
        }
    }

    fn consume(&mut self, buf: &mut BytesMut, n: usize) {
        buf.advance(n);
        self.scanned = 0;
    }

    /// Locate a complete `\r`-terminated header line the way Redis does:
    /// the line ends at the first `\r` and needs one more byte after it
    /// (assumed, not checked, to be `\n`). Returns the `\r` position.
    fn header_line(
        &mut self,
        buf: &BytesMut,
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        match self.find(buf, b'\r') {
            None if buf.len() > MAX_INLINE => Err(too_big),
            None => Ok(None),
            Some(cr) if cr + 1 >= buf.len() => Ok(None),
            Some(cr) => Ok(Some(cr)),
        }
    }

    fn multibulk_header(&mut self, buf: &mut BytesMut) -> Result<Option<i64>, ProtocolError> {
        let Some(cr) = self.header_line(buf, ProtocolError::TooBigMbulkCount)? else {
            return Ok(None);
        };
        let n = match string2ll(&buf[1..cr]) {
            Some(n) if n <= MAX_MULTIBULK => n,
            _ => return Err(ProtocolError::InvalidMultibulkLength),
        };
        self.consume(buf, cr + 2);
        Ok(Some(n))
    }

    fn bulk_header(&mut self, buf: &mut BytesMut) -> Result<Option<usize>, ProtocolError> {
        let Some(cr) = self.header_line(buf, ProtocolError::TooBigBulkCount)? else {
            return Ok(None);
        };
        // Like Redis, the `$` is only checked once the whole line is in, so
        // the error reported does not depend on how the bytes were split.
        if buf[0] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[0]));
        }
        let len = match string2ll(&buf[1..cr]) {
            Some(n) if (0..=self.max_bulk).contains(&n) => n as usize,
            _ => return Err(ProtocolError::InvalidBulkLength),
        };
        self.consume(buf, cr + 2);
        Ok(Some(len))
    }

    fn inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let Some(nl) = self.find(buf, b'\n') else {
            if buf.len() > MAX_INLINE {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        let end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        let args = split_args(&buf[..end]).ok_or(ProtocolError::UnbalancedQuotes)?;
        self.consume(buf, nl + 1);
        Ok(Some(args.into_iter().map(Bytes::from).collect()))
    }
}

/// Most arguments a request may have to take the fast path (ADDJOB with
/// all its options has 20).
const FAST_ARGS: usize = 24;

/// A header number at `b[at..]` in canonical form (`0`, or no leading
/// zero, at most 10 digits) followed by CRLF: (value, offset after the LF).
/// None for anything else, including an incomplete line.
fn header_number(b: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let first = b.get(at)?.wrapping_sub(b'0');
    if first > 9 {
        return None;
    }
    let start = at;
    let mut v = u64::from(first);
    at += 1;
    if first != 0 {
        while let Some(d) = b.get(at).map(|d| d.wrapping_sub(b'0')).filter(|&d| d <= 9) {
            v = v * 10 + u64::from(d);
            at += 1;
            if at - start > 10 {
                return None;
            }
        }
    }
    if b.get(at..at + 2)? != b"\r\n" {
        return None;
    }
    Some((v, at + 2))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }

    fn args(list: &[&[u8]]) -> Vec<Bytes> {
        list.iter().map(|a| b(a)).collect()
    }

    /// One `parse` call, the request as owned arguments.
    fn parse_one(
        p: &mut RequestParser,
        buf: &mut BytesMut,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        p.parse(buf).map(|o| o.map(|r| r.to_vec()))
    }

    fn mb(list: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", list.len()).into_bytes();
        for a in list {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    /// Parse everything in `input` at once: all commands, then the first
    /// error if any.
    fn parse_all(input: &[u8]) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match parse_one(&mut p, &mut buf) {
                Ok(Some(a)) => out.push(a),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// Feed `input` in the given chunk sizes, draining after each chunk.
    fn parse_chunked(
        input: &[u8],
        chunks: impl Iterator<Item = usize>,
    ) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut pos = 0;
        for n in chunks {
            let end = (pos + n).min(input.len());
            buf.extend_from_slice(&input[pos..end]);
            pos = end;
            loop {
                match parse_one(&mut p, &mut buf) {
                    Ok(Some(a)) => out.push(a),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
            if pos == input.len() {
                break;
            }
        }
        (out, None)
    }

    fn err_of(input: &[u8]) -> ProtocolError {
        parse_all(input).1.expect("expected a protocol error")
    }

    /// Same outcome when fed all at once, a byte at a time, and split in
    /// two at every boundary.
    fn check_split_invariance(input: &[u8]) {
        let whole = parse_all(input);
        let bytewise = parse_chunked(input, std::iter::repeat(1));
        assert_eq!(whole, bytewise, "byte-at-a-time differs for {input:?}");
        for k in 0..=input.len() {
            let two = parse_chunked(input, [k, input.len()].into_iter());
            assert_eq!(whole, two, "split at {k} differs for {input:?}");
        }
    }

    #[test]
    fn error_messages_are_exact() {
        use ProtocolError::*;
        let cases = [
            (
                InvalidMultibulkLength,
                "Protocol error: invalid multibulk length",
            ),
            (InvalidBulkLength, "Protocol error: invalid bulk length"),
            (
                TooBigMbulkCount,
                "Protocol error: too big mbulk count string",
            ),
            (TooBigBulkCount, "Protocol error: too big bulk count string"),
            (
                ExpectedDollar(b'x'),
                "Protocol error: expected '$', got 'x'",
            ),
            (TooBigInline, "Protocol error: too big inline request"),
            (
                UnbalancedQuotes,
                "Protocol error: unbalanced quotes in request",
            ),
            (QueryBufferTooBig, "Protocol error: query buffer too big"),
        ];
        for (e, msg) in cases {
            assert_eq!(e.message(), msg);
            assert_eq!(e.to_string(), msg);
        }
    }

    #[test]
    fn simple_multibulk() {
        let (cmds, err) = parse_all(b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n");
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"ECHO", b"hello"])]);
    }

    #[test]
    fn pipelined_requests_returned_one_by_one() {
        let mut input = mb(&[b"PING"]);
        input.extend_from_slice(b"INFO server\r\n");
        input.extend_from_slice(&mb(&[b"ADDJOB", b"q", b"body", b"0"]));
        input.extend_from_slice(b"PING\n");
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&input[..]);
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), Some(args(&[b"PING"])));
        assert_eq!(
            parse_one(&mut p, &mut buf).unwrap(),
            Some(args(&[b"INFO", b"server"]))
        );
        assert_eq!(
            parse_one(&mut p, &mut buf).unwrap(),
            Some(args(&[b"ADDJOB", b"q", b"body", b"0"]))
        );
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), Some(args(&[b"PING"])));
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert!(buf.is_empty());
        check_split_invariance(&input);
    }

    #[test]
    fn ping_then_empty_line() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"PING\r\n\n"[..]);
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), Some(args(&[b"PING"])));
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert!(buf.is_empty(), "empty line must be consumed");
        check_split_invariance(b"PING\r\n\n");
    }

    #[test]
    fn empty_and_blank_inline_lines_skipped() {
        let (cmds, err) = parse_all(b"\r\n\n   \t \r\nPING\r\n");
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"PING"])]);
    }

    #[test]
    fn zero_and_negative_multibulk_skipped() {
        for input in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n"] {
            let mut p = RequestParser::new();
            let mut buf = BytesMut::from(input);
            assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
            assert!(buf.is_empty());
        }
        let mut input = b"*0\r\n*-1\r\n".to_vec();
        input.extend_from_slice(&mb(&[b"PING"]));
        let (cmds, err) = parse_all(&input);
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"PING"])]);
        check_split_invariance(&input);
    }

    #[test]
    fn binary_args() {
        let body: &[u8] = b"a\0b\r\nc\r\n\n*3\r\n$\0";
        let input = mb(&[b"ADDJOB", b"q\0ueue", body, b"", b"0"]);
        let (cmds, err) = parse_all(&input);
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"ADDJOB", b"q\0ueue", body, b"", b"0"])]);
        check_split_invariance(&input);
    }

    #[test]
    fn args_are_zero_copy_slices_of_the_read_buffer() {
        let big = vec![b'x'; 64 * 1024];
        let input = mb(&[b"SET", &big]);
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&input[..]);
        let range = buf.as_ptr_range();
        let cmd = p
            .parse(&mut buf)
            .map(|o| o.map(|r| r.to_vec()))
            .unwrap()
            .unwrap();
        assert_eq!(&cmd[1][..], &big[..]);
        assert!(
            range.contains(&cmd[1].as_ptr()),
            "big arg must share the buffer"
        );
        assert!(
            range.contains(&cmd[0].as_ptr()),
            "small arg must share the buffer too"
        );
    }

    #[test]
    fn big_body_in_64k_reads() {
        let body: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let input = mb(&[b"ADDJOB", b"q", &body, b"0"]);
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        let mut reserved_hint = false;
        for chunk in input.chunks(64 * 1024) {
            if let Some(n) = p.pending_bulk_remaining() {
                reserved_hint = true;
                assert!(n <= body.len() + 2);
                buf.reserve(n);
            }
            buf.extend_from_slice(chunk);
            if let Some(cmd) = parse_one(&mut p, &mut buf).unwrap() {
                assert!(got.is_none());
                got = Some(cmd);
            }
        }
        assert!(reserved_hint);
        let cmd = got.unwrap();
        assert_eq!(cmd.len(), 4);
        assert_eq!(&cmd[2][..], &body[..]);
        assert_eq!(p.pending_bulk_remaining(), None);
        assert!(buf.is_empty());
    }

    #[test]
    fn pending_bulk_remaining_counts_missing_bytes() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$10\r\nabc"[..]);
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert_eq!(p.pending_bulk_remaining(), Some(10 + 2 - 3));
        buf.extend_from_slice(b"defghij\r");
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert_eq!(p.pending_bulk_remaining(), Some(1));
        buf.extend_from_slice(b"\n");
        assert_eq!(
            parse_one(&mut p, &mut buf).unwrap(),
            Some(args(&[b"SET", b"abcdefghij"]))
        );
        assert_eq!(p.pending_bulk_remaining(), None);
        // Waiting for a header is not a pending bulk.
        let mut buf = BytesMut::from(&b"*2\r\n$3"[..]);
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert_eq!(p.pending_bulk_remaining(), None);
    }

    #[test]
    fn huge_declared_lengths_do_not_allocate() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1048576\r\n$536870912\r\n"[..]);
        let cap_before = buf.capacity();
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), None);
        assert!(p.args.capacity() <= ARGS_PREALLOC_MAX);
        assert!(buf.capacity() <= cap_before);
        assert_eq!(p.pending_bulk_remaining(), Some(512 * 1024 * 1024 + 2));
        // Limits themselves are accepted.
        let (_, err) = parse_all(b"*1048576\r\n$536870912\r\n");
        assert_eq!(err, None);
    }

    #[test]
    fn invalid_multibulk_length() {
        use ProtocolError::InvalidMultibulkLength as E;
        for input in [
            &b"*1048577\r\n"[..],
            b"*abc\r\n",
            b"*\r\n",
            b"*+1\r\n",
            b"* 1\r\n",
            b"*01\r\n",
            b"*-0\r\n",
            b"*1 \r\n",
            b"*99999999999999999999\r\n",
            b"*-\r\n",
            b"*1\n$4\r\nPING\r\n", // the line runs to the first CR, like Redis
        ] {
            assert_eq!(err_of(input), E, "{input:?}");
            check_split_invariance(input);
        }
    }

    #[test]
    fn invalid_bulk_length() {
        use ProtocolError::InvalidBulkLength as E;
        for input in [
            &b"*1\r\n$536870913\r\n"[..],
            b"*1\r\n$-1\r\n",
            b"*1\r\n$\r\n",
            b"*1\r\n$x\r\n",
            b"*1\r\n$04\r\nPING\r\n",
            b"*1\r\n$9223372036854775808\r\n",
            b"*1\r\n$4\r\nPINGxx",   // payload not followed by CRLF
            b"*1\r\n$3\r\nPING\r\n", // length too short
            b"*1\r\n$4\r\nPING\rX",  // half a CRLF
        ] {
            assert_eq!(err_of(input), E, "{input:?}");
            check_split_invariance(input);
        }
    }

    #[test]
    fn expected_dollar() {
        assert_eq!(
            err_of(b"*1\r\n:4\r\nPING\r\n"),
            ProtocolError::ExpectedDollar(b':')
        );
        assert_eq!(
            err_of(b"*1\r\n:4\r\nPING\r\n").message(),
            "Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            err_of(b"*2\r\n$4\r\nECHO\r\nhello\r\n"),
            ProtocolError::ExpectedDollar(b'h')
        );
        // Only reported once the header line is complete.
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1\r\nX"[..]);
        assert_eq!(parse_one(&mut p, &mut buf), Ok(None));
        check_split_invariance(b"*1\r\n:4\r\nPING\r\n");
    }

    #[test]
    fn too_big_mbulk_count_string() {
        let mut input = b"*".to_vec();
        input.extend(std::iter::repeat_n(b'1', MAX_INLINE - 1));
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&input[..]);
        assert_eq!(parse_one(&mut p, &mut buf), Ok(None)); // exactly MAX_INLINE: still waiting
        buf.extend_from_slice(b"1");
        assert_eq!(
            parse_one(&mut p, &mut buf),
            Err(ProtocolError::TooBigMbulkCount)
        );
        // A long header that does get its CR in the same read is just invalid.
        input.extend_from_slice(b"1\r\n");
        assert_eq!(err_of(&input), ProtocolError::InvalidMultibulkLength);
    }

    #[test]
    fn too_big_bulk_count_string() {
        let mut input = b"*1\r\n$".to_vec();
        input.extend(std::iter::repeat_n(b'1', MAX_INLINE));
        assert_eq!(err_of(&input), ProtocolError::TooBigBulkCount);
        // Also when the oversized line is not even a `$` line.
        let mut input = b"*1\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_INLINE + 1));
        assert_eq!(err_of(&input), ProtocolError::TooBigBulkCount);
    }

    #[test]
    fn too_big_inline() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&vec![b'a'; MAX_INLINE][..]);
        assert_eq!(parse_one(&mut p, &mut buf), Ok(None));
        buf.extend_from_slice(b"a");
        assert_eq!(
            parse_one(&mut p, &mut buf),
            Err(ProtocolError::TooBigInline)
        );
        // A long line whose newline arrived in the same read is accepted.
        let mut input = vec![b'a'; MAX_INLINE * 2];
        input.extend_from_slice(b"\r\n");
        let (cmds, err) = parse_all(&input);
        assert_eq!(err, None);
        assert_eq!(cmds[0][0].len(), MAX_INLINE * 2);
    }

    #[test]
    fn unbalanced_quotes() {
        for input in [
            &b"SET \"abc\r\n"[..],
            b"SET 'abc\r\n",
            b"SET \"abc\"def\r\n",
            b"SET 'abc'def\r\n",
            b"SET \"abc\\\"\r\n",
        ] {
            assert_eq!(err_of(input), ProtocolError::UnbalancedQuotes, "{input:?}");
            check_split_invariance(input);
        }
    }

    #[test]
    fn query_buffer_limit() {
        let mut p = RequestParser::new();
        p.query_buf_limit = 16;
        let mut buf = BytesMut::from(&b"*1\r\n$100\r\n0123456789abcdefg"[..]);
        assert_eq!(
            parse_one(&mut p, &mut buf),
            Err(ProtocolError::QueryBufferTooBig)
        );
        // Complete requests are still served from a big buffer.
        let mut p = RequestParser::new();
        p.query_buf_limit = 16;
        let mut buf = BytesMut::from(&b"PING\r\nPING\r\nPING\r\nPING\r\n"[..]);
        assert_eq!(parse_one(&mut p, &mut buf).unwrap(), Some(args(&[b"PING"])));
    }

    #[test]
    fn inline_quotes_and_escapes() {
        let input = b"SET \"a b\\n\\r\\t\\b\\a\\\\\\\"\\x41\\x4a\\xzz\\q\" 'it\\'s \"x\" \\n'\r\n";
        let (cmds, err) = parse_all(input);
        assert_eq!(err, None);
        assert_eq!(
            cmds,
            vec![args(&[
                b"SET",
                b"a b\n\r\t\x08\x07\\\"AJxzzq",
                b"it's \"x\" \\n"
            ])]
        );
        check_split_invariance(input);
    }

    #[test]
    fn inline_without_cr_and_tabs() {
        let (cmds, err) = parse_all(b"GETJOB\tFROM  q1 q2\n");
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"GETJOB", b"FROM", b"q1", b"q2"])]);
    }

    #[test]
    fn header_cr_followed_by_other_byte_is_tolerated_like_redis() {
        let (cmds, err) = parse_all(b"*1\rX$4\rYPING\r\n");
        assert_eq!(err, None);
        assert_eq!(cmds, vec![args(&[b"PING"])]);
    }

    #[test]
    fn mixed_stream_split_invariance() {
        let mut input = Vec::new();
        input.extend_from_slice(b"PING\r\n\n\r\n");
        input.extend_from_slice(&mb(&[b"ADDJOB", b"queue", &[7u8; 100], b"0"]));
        input.extend_from_slice(b"*0\r\n*-1\r\n");
        input.extend_from_slice(b"ECHO \"hi there\" 'x'\n");
        input.extend_from_slice(&mb(&[b"GETJOB", b"FROM", b"q"]));
        input.extend_from_slice(b"*1\r\n$4\r\nPI");
        let (cmds, err) = parse_all(&input);
        assert_eq!(err, None);
        assert_eq!(cmds.len(), 4);
        check_split_invariance(&input);
    }

    #[test]
    fn fast_path_agrees_with_the_general_parser() {
        // Whole requests take the fast path, byte-at-a-time ones the
        // general parser: both must see the same commands and errors.
        let many: Vec<&[u8]> = vec![b"x"; FAST_ARGS + 1];
        let cases: Vec<Vec<u8>> = vec![
            mb(&[b"ADDJOB", b"q", b"", b"0"]),
            mb(&many[..FAST_ARGS]),
            mb(&many),
            b"*01\r\n$4\r\nPING\r\n".to_vec(),
            b"*1\r\n$04\r\nPING\r\n".to_vec(),
            b"*1\r\n$+4\r\nPING\r\n".to_vec(),
            b"*1\r\n$-0\r\n".to_vec(),
            b"*1\r\n$4\r\nPINGXY*1\r\n$4\r\nPING\r\n".to_vec(),
            b"*1\r\n$4\rXPING\r\n".to_vec(),
            b"*1\r\n$99999999999\r\nx\r\n".to_vec(),
            b"*1\r\n$536870913\r\nx\r\n".to_vec(),
            b"*2\r\n$1\r\na\r\n:1\r\n".to_vec(),
            b"*1\r\n$0\r\n\r\n*1\r\n$1\r\nz\r\n".to_vec(),
        ];
        for input in &cases {
            check_split_invariance(input);
        }
        let (cmds, err) = parse_all(&cases[1]);
        assert_eq!((cmds.len(), err), (1, None));
        assert_eq!(cmds[0].len(), FAST_ARGS);
    }

    #[test]
    fn recycled_vectors_are_reused_empty() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&mb(&[b"A", b"B"])[..]);
        let first = p.parse(&mut buf).unwrap().unwrap();
        let ptr = first.spans.as_ptr();
        p.recycle(first);
        buf.extend_from_slice(&mb(&[b"C"]));
        let second = p.parse(&mut buf).unwrap().unwrap();
        assert_eq!(second.to_vec(), args(&[b"C"]));
        assert_eq!(second.spans.as_ptr(), ptr);
        // Big vectors are not kept.
        let mut big = Request::from_parts(Vec::with_capacity(SPARE_CAPACITY_MAX + 1));
        big.spans.reserve(1);
        p.recycle(big);
        assert!(p.spare.is_empty());
    }

    #[test]
    fn never_panics_on_garbage() {
        // Deterministic pseudo-random inputs biased towards protocol bytes.
        let alphabet = b"*$\r\n0123-'\" \\xaZ\0";
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..3000 {
            let mut input = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                input.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let whole = parse_all(&input);
            let bytewise = parse_chunked(&input, std::iter::repeat(1));
            assert_eq!(whole, bytewise, "{input:?}");
            for cmd in &whole.0 {
                assert!(!cmd.is_empty());
            }
        }
    }

    #[test]
    fn caller_clearing_buffer_does_not_panic() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"PING PING PING"[..]);
        assert_eq!(parse_one(&mut p, &mut buf), Ok(None));
        // Outside the contract (only appending is allowed), but must not panic.
        buf.clear();
        buf.extend_from_slice(b"P\n");
        let _ = parse_one(&mut p, &mut buf);
    }
}

#[cfg(test)]
mod max_bulk_tests {
    use super::*;

    #[test]
    fn a_bulk_over_the_configured_limit_is_refused_at_its_header() {
        let mut p = RequestParser::new();
        p.set_max_bulk(1 << 20);
        let mut buf = BytesMut::from(&b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$400000000\r\n"[..]);
        assert!(matches!(
            p.parse(&mut buf),
            Err(ProtocolError::InvalidBulkLength)
        ));
        let mut p = RequestParser::new();
        p.set_max_bulk(4);
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nPING\r\n$4\r\nabcd\r\n"[..]);
        assert!(matches!(p.parse(&mut buf), Ok(Some(_))));
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nPING\r\n$5\r\nabcde\r\n"[..]);
        assert!(p.parse(&mut buf).is_err());
    }
}
