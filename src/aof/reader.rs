//! The AOF record reader: a strict, incremental parser for the two record
//! kinds of Disque's AOF (`LOADJOB <blob>`, `DELJOB <id>`; docs/PERSISTENCE.md)
//! and our two (`DEDUP <key record>`, `AOFVERSION <n>`).
//!
//! It is separate from the client request parser on purpose: the client
//! parser accepts inline commands and any command name, while here every
//! byte must belong to one of two record shapes, and the loader and the
//! checker need to know *exactly* where a record starts and whether a
//! failure is "the file simply ends early" (a crash in the middle of a
//! write, tolerated by `aof-load-truncated`) or "these bytes are wrong"
//! (corruption, never tolerated). A prefix that is consistent with a valid
//! record so far but ends early is `Truncated`; the first byte that cannot
//! belong to a valid record makes it `Corrupt`.

use std::io::Read;

use bytes::{Bytes, BytesMut};

use crate::domain::job::JobId;
use crate::protocol::job_codec::{CodecError, JobRecord};

/// One decoded AOF record. `LoadJob` keeps the raw storage blob; it has
/// already been checked to decode as exactly one job record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    LoadJob(Bytes),
    DelJob(JobId),
    /// Our extension: a DEDUP key (`engine::dedup::encode_aof` payload).
    Dedup(Bytes),
    /// Our extension: the file's format version (`AOFVERSION <n>`), at
    /// most [`AOF_FORMAT_VERSION`] (a newer one is [`ReadError::Version`]).
    Version(u32),
    /// Our extension: a schedule definition (`engine::schedule`).
    Schedule(Bytes),
    /// Our extension: a batch state or delta (`engine::batch`).
    Batch(Bytes),
}

/// The AOF format this build writes and the newest it reads. A file
/// without an `AOFVERSION` record (every file written before the record
/// existed, and Disque's own) is version 1. Bump it only when a change
/// means an older build would misread a file; a record kind an older build
/// does not know is already refused by it as corruption.
pub const AOF_FORMAT_VERSION: u32 = 1;

/// Record kinds as parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Load,
    Del,
    Dedup,
    Version(u32),
    Schedule,
    Batch,
}

/// Why reading stopped before the end of the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadError {
    /// The file ends inside the record starting at `offset`.
    #[error("truncated record at offset {offset} (unexpected end of file)")]
    Truncated { offset: u64 },
    /// The record starting at `offset` is malformed.
    #[error("bad record at offset {offset}: {why}")]
    Corrupt { offset: u64, why: String },
    /// The file could not be read at all.
    #[error("read error: {}", crate::errors::strerror(.0))]
    Io(#[source] std::sync::Arc<std::io::Error>),
    /// The record at `offset` declares a format newer than this build
    /// reads: the file is valid, this server is too old for it.
    #[error(
        "AOF format version {found} at offset {offset} is newer than this server reads \
         (up to {AOF_FORMAT_VERSION})"
    )]
    Version { offset: u64, found: u32 },
}

/// By hand, since `io::Error` is not `PartialEq`: read errors compare by kind.
impl PartialEq for ReadError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ReadError::Truncated { offset: a }, ReadError::Truncated { offset: b }) => a == b,
            (
                ReadError::Corrupt { offset: a, why: w },
                ReadError::Corrupt { offset: b, why: v },
            ) => a == b && w == v,
            (ReadError::Io(a), ReadError::Io(b)) => a.kind() == b.kind(),
            (
                ReadError::Version {
                    offset: a,
                    found: f,
                },
                ReadError::Version {
                    offset: b,
                    found: g,
                },
            ) => a == b && f == g,
            _ => false,
        }
    }
}

impl Eq for ReadError {}

/// Outcome of parsing the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
enum Parse {
    /// A complete record: its kind (true = LOADJOB), the argument's byte
    /// range and the bytes it occupies.
    Done(Kind, (usize, usize), usize),
    /// Everything present is consistent, but more bytes are needed.
    Incomplete,
    Corrupt(String),
}

/// Largest bulk argument accepted (same bound as client requests).
const MAX_BULK: usize = crate::protocol::resp::parse::MAX_BULK as usize;

/// A malformed bulk string in a record (the texts are the loader's
/// corruption messages, naming the part of the record).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum BulkError {
    #[error("expected '$' before the {0}")]
    NoDollar(&'static str),
    #[error("invalid bulk length for the {0}")]
    BadLength(&'static str),
    #[error("bulk length {0} of the {1} is too large")]
    TooLarge(usize, &'static str),
    #[error("missing LF after the {0} length")]
    NoLf(&'static str),
    #[error("{0} is not followed by CRLF")]
    NoCrlf(&'static str),
}

/// Parse one `$<len>\r\n<data>\r\n` at `buf[pos..]`; returns the data range
/// and the position after it.
fn bulk(
    buf: &[u8],
    pos: usize,
    what: &'static str,
) -> Result<Option<(usize, usize, usize)>, BulkError> {
    let rest = &buf[pos.min(buf.len())..];
    let Some(&first) = rest.first() else {
        return Ok(None);
    };
    if first != b'$' {
        return Err(BulkError::NoDollar(what));
    }
    let mut len: usize = 0;
    let mut i = 1;
    loop {
        let Some(&c) = rest.get(i) else {
            return Ok(None);
        };
        match c {
            // No leading zeros ("$07"): the writer never produces them,
            // and the partial-name check (`partial_name_check`) rejects
            // them, so accepting them here made a file's verdict depend
            // on where reads split it (found by fuzzing).
            b'0'..=b'9' if i == 2 && rest[1] == b'0' => {
                return Err(BulkError::BadLength(what));
            }
            b'0'..=b'9' if i <= 10 => {
                len = len * 10 + usize::from(c - b'0');
                i += 1;
            }
            b'\r' if i > 1 => break,
            _ => return Err(BulkError::BadLength(what)),
        }
    }
    if len > MAX_BULK {
        return Err(BulkError::TooLarge(len, what));
    }
    match rest.get(i + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err(BulkError::NoLf(what)),
    }
    let start = pos + i + 2;
    let end = start + len;
    // The terminating CRLF, checked byte by byte so a short tail is
    // "incomplete" and a wrong byte is "corrupt".
    for (k, want) in [b'\r', b'\n'].into_iter().enumerate() {
        match buf.get(end + k) {
            None => return Ok(None),
            Some(&c) if c == want => {}
            Some(_) => return Err(BulkError::NoCrlf(what)),
        }
    }
    Ok(Some((start, end, end + 2)))
}

/// Parse the record at the front of `buf`.
fn parse(buf: &[u8]) -> Parse {
    const HEADER: &[u8] = b"*2\r\n";
    let n = buf.len().min(HEADER.len());
    if buf[..n] != HEADER[..n] {
        return Parse::Corrupt("expected a '*2' multibulk header".into());
    }
    if n < HEADER.len() {
        return Parse::Incomplete;
    }
    let (cs, ce, after_cmd) = match bulk(buf, HEADER.len(), "command name") {
        Ok(Some(r)) => r,
        Ok(None) => {
            // Check the partial name against the two known commands so that
            // garbage is reported as soon as it is visible.
            return partial_name_check(buf);
        }
        Err(e) => return Parse::Corrupt(e.to_string()),
    };
    let name = &buf[cs..ce];
    let is_load = name.eq_ignore_ascii_case(b"LOADJOB");
    let is_del = name.eq_ignore_ascii_case(b"DELJOB");
    let is_dedup = name.eq_ignore_ascii_case(b"DEDUP");
    let is_version = name.eq_ignore_ascii_case(b"AOFVERSION");
    let is_schedule = name.eq_ignore_ascii_case(b"SCHEDULE");
    let is_batch = name.eq_ignore_ascii_case(b"BATCH");
    if !is_load && !is_del && !is_dedup && !is_version && !is_schedule && !is_batch {
        return Parse::Corrupt(format!(
            "unknown command '{}'",
            String::from_utf8_lossy(&name[..name.len().min(32)])
        ));
    }
    let (as_, ae, end) = match bulk(buf, after_cmd, "argument") {
        Ok(Some(r)) => r,
        Ok(None) => return Parse::Incomplete,
        Err(e) => return Parse::Corrupt(e.to_string()),
    };
    let arg = &buf[as_..ae];
    if is_version {
        return match parse_version(arg) {
            Some(v) => Parse::Done(Kind::Version(v), (as_, ae), end),
            None => Parse::Corrupt("AOFVERSION argument is not a version number".into()),
        };
    }
    if is_batch {
        let st = crate::engine::batch::BatchState::decode(&Bytes::copy_from_slice(arg));
        return if st.is_some() {
            Parse::Done(Kind::Batch, (as_, ae), end)
        } else {
            Parse::Corrupt("BATCH argument is not a batch state".into())
        };
    }
    if is_schedule {
        let def = crate::engine::schedule::ScheduleDef::decode(&Bytes::copy_from_slice(arg));
        return if def.is_some() {
            Parse::Done(Kind::Schedule, (as_, ae), end)
        } else {
            Parse::Corrupt("SCHEDULE argument is not a schedule definition".into())
        };
    }
    if is_dedup {
        return if crate::engine::dedup::valid_aof(arg) {
            Parse::Done(Kind::Dedup, (as_, ae), end)
        } else {
            Parse::Corrupt("DEDUP argument is not a dedup key record".into())
        };
    }
    if is_del {
        return match JobId::parse(arg) {
            Some(_) => Parse::Done(Kind::Del, (as_, ae), end),
            None => Parse::Corrupt("DELJOB argument is not a job ID".into()),
        };
    }
    // The blob is complete (its bulk is), so any decoding problem,
    // including the codec's "truncated", means the content is wrong.
    match JobRecord::validate(arg) {
        Ok(used) if used == arg.len() => {
            // The fields the loader cannot do without: a valid ID and state.
            if JobId::parse(&arg[4..44]).is_none() {
                return Parse::Corrupt("LOADJOB payload has an invalid job ID".into());
            }
            if crate::domain::job::JobState::from_u8(arg[44] & 0x0f).is_none() {
                return Parse::Corrupt("LOADJOB payload has an invalid job state".into());
            }
            Parse::Done(Kind::Load, (as_, ae), end)
        }
        Ok(_) => Parse::Corrupt("LOADJOB payload has trailing bytes".into()),
        Err(CodecError::Truncated) => {
            Parse::Corrupt("LOADJOB payload is shorter than its length prefix".into())
        }
        Err(e) => Parse::Corrupt(format!("LOADJOB payload: {e}")),
    }
}

/// An `AOFVERSION` argument: a positive decimal without leading zeros.
fn parse_version(arg: &[u8]) -> Option<u32> {
    if arg.is_empty() || arg.len() > 9 || arg[0] == b'0' || !arg.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// The record that starts every AOF this build creates (a new file, a
/// rewrite): `AOFVERSION <AOF_FORMAT_VERSION>`.
pub fn encode_version(out: &mut Vec<u8>) {
    let v = AOF_FORMAT_VERSION.to_string();
    out.extend_from_slice(b"*2\r\n$10\r\nAOFVERSION\r\n$");
    push_decimal(v.len(), out);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(v.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The command-name bulk is incomplete: is what we have a prefix of
/// `$7\r\nLOADJOB` or `$6\r\nDELJOB`?
fn partial_name_check(buf: &[u8]) -> Parse {
    let rest = &buf[4..];
    let prefix_of = |full: &[u8]| {
        let n = rest.len().min(full.len());
        rest[..n].eq_ignore_ascii_case(&full[..n])
    };
    if prefix_of(b"$7\r\nLOADJOB")
        || prefix_of(b"$6\r\nDELJOB")
        || prefix_of(b"$5\r\nDEDUP")
        || prefix_of(b"$10\r\nAOFVERSION")
        || prefix_of(b"$8\r\nSCHEDULE")
    {
        Parse::Incomplete
    } else {
        Parse::Corrupt("unknown command".into())
    }
}

/// Reads records one by one from any byte source, tracking file offsets.
pub struct AofReader<R: Read> {
    src: R,
    buf: BytesMut,
    scratch: Vec<u8>,
    /// File offset of `buf[0]`.
    offset: u64,
    eof: bool,
}

/// Read granularity; a record larger than this is assembled over several
/// reads.
const READ_CHUNK: usize = 1 << 20;

impl<R: Read> AofReader<R> {
    pub fn new(src: R) -> AofReader<R> {
        AofReader {
            src,
            buf: BytesMut::new(),
            scratch: vec![0; READ_CHUNK],
            offset: 0,
            eof: false,
        }
    }

    /// Offset of the next unread record (= bytes accepted so far).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Every record up to a clean end of file or the first error, and
    /// that error (tests and the fuzzer compare whole files this way).
    pub fn read_all(mut self) -> (Vec<(u64, Record)>, Option<ReadError>) {
        let mut out = Vec::new();
        loop {
            match self.next_record() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// The next record and the offset it starts at; `Ok(None)` at a clean
    /// end of file.
    pub fn next_record(&mut self) -> Result<Option<(u64, Record)>, ReadError> {
        loop {
            if !self.buf.is_empty() {
                match parse(&self.buf) {
                    Parse::Done(kind, (a, b), used) => {
                        let at = self.offset;
                        self.offset += used as u64;
                        // Zero-copy: a LOADJOB blob is a slice of this record.
                        let raw = self.buf.split_to(used).freeze();
                        let rec = match kind {
                            Kind::Version(found) if found > AOF_FORMAT_VERSION => {
                                return Err(ReadError::Version { offset: at, found });
                            }
                            Kind::Version(v) => Record::Version(v),
                            Kind::Load => Record::LoadJob(raw.slice(a..b)),
                            Kind::Dedup => Record::Dedup(raw.slice(a..b)),
                            Kind::Schedule => Record::Schedule(raw.slice(a..b)),
                            Kind::Batch => Record::Batch(raw.slice(a..b)),
                            Kind::Del => {
                                let mut id = [0u8; 40];
                                id.copy_from_slice(&raw[a..b]);
                                Record::DelJob(JobId(id))
                            }
                        };
                        return Ok(Some((at, rec)));
                    }
                    Parse::Corrupt(why) => {
                        return Err(ReadError::Corrupt {
                            offset: self.offset,
                            why,
                        })
                    }
                    Parse::Incomplete => {}
                }
            }
            if self.eof {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Truncated {
                        offset: self.offset,
                    })
                };
            }
            self.fill()?;
        }
    }

    /// Append up to READ_CHUNK more bytes to the buffer.
    fn fill(&mut self) -> Result<(), ReadError> {
        let n = loop {
            match self.src.read(&mut self.scratch) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(std::sync::Arc::new(e))),
            }
        };
        if n == 0 {
            self.eof = true;
        }
        self.buf.extend_from_slice(&self.scratch[..n]);
        Ok(())
    }
}

/// Encode one record exactly as Disque writes it (docs/PERSISTENCE.md).
pub fn encode_record(rec: &crate::engine::AofRecord, out: &mut Vec<u8>) {
    match rec {
        crate::engine::AofRecord::LoadJob(blob) => encode_loadjob(blob, out),
        crate::engine::AofRecord::DelJob(id) => {
            out.extend_from_slice(b"*2\r\n$6\r\nDELJOB\r\n$40\r\n");
            out.extend_from_slice(&id.0);
            out.extend_from_slice(b"\r\n");
        }
        crate::engine::AofRecord::Batch(payload) => {
            out.extend_from_slice(b"*2\r\n$5\r\nBATCH\r\n$");
            push_decimal(payload.len(), out);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(payload);
            out.extend_from_slice(b"\r\n");
        }
        crate::engine::AofRecord::Schedule(payload) => {
            out.extend_from_slice(b"*2\r\n$8\r\nSCHEDULE\r\n$");
            push_decimal(payload.len(), out);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(payload);
            out.extend_from_slice(b"\r\n");
        }
        crate::engine::AofRecord::Dedup(payload) => {
            out.extend_from_slice(b"*2\r\n$5\r\nDEDUP\r\n$");
            push_decimal(payload.len(), out);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(payload);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// `n` in decimal, without a temporary `String` (one per record).
fn push_decimal(n: usize, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

pub fn encode_loadjob(blob: &[u8], out: &mut Vec<u8>) {
    encode_loadjob_with(blob.len(), out, |out| out.extend_from_slice(blob));
}

/// `encode_loadjob` of a blob of `len` bytes that `put` appends in place.
pub fn encode_loadjob_with(len: usize, out: &mut Vec<u8>, put: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"*2\r\n$7\r\nLOADJOB\r\n$");
    push_decimal(len, out);
    out.extend_from_slice(b"\r\n");
    let start = out.len();
    put(out);
    debug_assert_eq!(out.len() - start, len, "LOADJOB blob length");
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::engine::AofRecord;

    const ID: &[u8; 40] = b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";

    fn blob() -> Bytes {
        JobRecord {
            id: *ID,
            state: 2,
            gc_retry: 0,
            flags: 0,
            repl: 1,
            etime: 2_000_000_000,
            ctime: 1,
            delay: 0,
            retry: 30,
            nacks: 0,
            deliv: 0,
            queue: Bytes::from_static(b"q1"),
            body: Bytes::from_static(b"body\r\n1"),
            nodes: vec![],
            ext: None,
        }
        .to_bytes()
    }

    fn file() -> Vec<u8> {
        let mut v = Vec::new();
        encode_record(&AofRecord::LoadJob(blob()), &mut v);
        encode_record(&AofRecord::DelJob(JobId(*ID)), &mut v);
        v
    }

    fn read_all(data: &[u8]) -> (Vec<(u64, Record)>, Option<ReadError>) {
        // A tiny reader that hands out 3 bytes at a time exercises resumption.
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(3).min(out.len());
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        AofReader::new(Slow(data)).read_all()
    }

    #[test]
    fn format_matches_wire() {
        let mut v = Vec::new();
        encode_record(&AofRecord::DelJob(JobId(*ID)), &mut v);
        assert_eq!(
            v,
            b"*2\r\n$6\r\nDELJOB\r\n$40\r\nD-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d\r\n"
        );
        let mut v = Vec::new();
        encode_loadjob(b"xyz", &mut v);
        assert_eq!(v, b"*2\r\n$7\r\nLOADJOB\r\n$3\r\nxyz\r\n");
    }

    #[test]
    fn reads_records_with_offsets() {
        let data = file();
        let (recs, err) = read_all(&data);
        assert_eq!(err, None);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].0, 0);
        assert_eq!(recs[0].1, Record::LoadJob(blob()));
        let second = data.len() - 63;
        assert_eq!(recs[1], (second as u64, Record::DelJob(JobId(*ID))));
    }

    /// Regression (fuzz target `aof`): "$07" was a valid length when the
    /// record arrived in one read but "unknown command" when the name came
    /// a byte at a time, so the same file ending inside the record was
    /// "truncated" (cut off under aof-load-truncated) or "corrupt"
    /// (refused) depending on read boundaries. Both now say corrupt.
    #[test]
    fn leading_zero_length_is_corrupt_however_it_is_read() {
        let data = b"*2\r\n$07\r\nLOADJOB\r\n$151\r\n\x93\0\0\0D-8ce34422-b9Qu";
        let mut whole = AofReader::new(&data[..]);
        let e = whole.next_record().unwrap_err();
        assert!(matches!(e, ReadError::Corrupt { offset: 0, .. }), "{e:?}");
        let (recs, e) = read_all(data);
        assert!(recs.is_empty());
        assert!(
            matches!(e, Some(ReadError::Corrupt { offset: 0, .. })),
            "{e:?}"
        );
        // The fuzzer's input itself (its first byte picks the read size).
        let found = include_bytes!("../../fuzz/seeds/aof/regress-leading-zero-length");
        let mut whole = AofReader::new(&found[1..]);
        let e = whole.next_record().unwrap_err();
        assert!(matches!(e, ReadError::Corrupt { offset: 0, .. }), "{e:?}");
        assert!(matches!(
            read_all(&found[1..]).1,
            Some(ReadError::Corrupt { offset: 0, .. })
        ));
        // A lone zero is still a length (an empty argument).
        let mut empty = AofReader::new(&b"*2\r\n$6\r\nDELJOB\r\n$0\r\n\r\n"[..]);
        let e = empty.next_record().unwrap_err();
        assert!(
            matches!(&e, ReadError::Corrupt { why, .. } if why.contains("not a job ID")),
            "{e:?}"
        );
    }

    #[test]
    fn format_version_record() {
        let mut v = Vec::new();
        encode_version(&mut v);
        assert_eq!(v, b"*2\r\n$10\r\nAOFVERSION\r\n$1\r\n1\r\n");
        // A versioned file reads, however its bytes arrive; every cut of
        // the version record is a truncation, not corruption.
        let header = v.len();
        v.extend_from_slice(&file());
        let (recs, err) = read_all(&v);
        assert_eq!(err, None);
        assert_eq!(recs[0], (0, Record::Version(AOF_FORMAT_VERSION)));
        assert_eq!(recs[1], (header as u64, Record::LoadJob(blob())));
        assert_eq!(AofReader::new(&v[..]).read_all(), (recs, None));
        for cut in 1..header {
            assert_eq!(
                read_all(&v[..cut]).1,
                Some(ReadError::Truncated { offset: 0 }),
                "cut {cut}"
            );
        }
        // A newer version is its own error (not corruption), at its offset.
        let mut newer = file();
        let at = newer.len() as u64;
        newer.extend_from_slice(b"*2\r\n$10\r\nAOFVERSION\r\n$1\r\n2\r\n");
        let (recs, err) = read_all(&newer);
        assert_eq!(recs.len(), 2);
        assert_eq!(
            err,
            Some(ReadError::Version {
                offset: at,
                found: 2
            })
        );
        assert_eq!(AofReader::new(&newer[..]).read_all().1, err);
        // Malformed numbers are corrupt.
        for bad in [&b"0"[..], b"01", b"x", b"1234567890", b"-1"] {
            let mut f = b"*2\r\n$10\r\nAOFVERSION\r\n$".to_vec();
            f.extend_from_slice(bad.len().to_string().as_bytes());
            f.extend_from_slice(b"\r\n");
            f.extend_from_slice(bad);
            f.extend_from_slice(b"\r\n");
            assert!(
                matches!(read_all(&f).1, Some(ReadError::Corrupt { offset: 0, .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn empty_file_is_fine() {
        assert_eq!(read_all(b""), (vec![], None));
    }

    #[test]
    fn every_cut_of_the_last_record_is_truncated() {
        let data = file();
        let second = data.len() - 63;
        for cut in second + 1..data.len() {
            let (recs, err) = read_all(&data[..cut]);
            assert_eq!(recs.len(), 1, "cut {cut}");
            assert_eq!(
                err,
                Some(ReadError::Truncated {
                    offset: second as u64
                }),
                "cut {cut}"
            );
        }
        for cut in 1..second {
            let (recs, err) = read_all(&data[..cut]);
            assert!(recs.is_empty());
            assert_eq!(err, Some(ReadError::Truncated { offset: 0 }), "cut {cut}");
        }
    }

    #[test]
    fn corruption_is_reported_at_the_record_start() {
        let data = file();
        let second = data.len() - 63;
        // Flip a byte in every position of the second record header/name.
        for pos in second..second + 16 {
            let mut bad = data.clone();
            bad[pos] = b'#';
            let (recs, err) = read_all(&bad);
            assert_eq!(recs.len(), 1);
            match err {
                Some(ReadError::Corrupt { offset, .. }) => assert_eq!(offset, second as u64),
                other => panic!("pos {pos}: {other:?}"),
            }
        }
        // Garbage in the middle, followed by valid records.
        let mut bad = data.clone();
        bad.splice(second..second, b"hello\r\n".iter().copied());
        let (_, err) = read_all(&bad);
        assert!(matches!(err, Some(ReadError::Corrupt { offset, .. }) if offset == second as u64));
    }

    #[test]
    fn bad_payloads_are_corrupt_not_truncated() {
        // A complete bulk whose job record lies about its length.
        let mut b = blob().to_vec();
        b[0] = b[0].wrapping_add(5);
        let mut v = Vec::new();
        encode_loadjob(&b, &mut v);
        assert!(matches!(
            read_all(&v).1,
            Some(ReadError::Corrupt { offset: 0, .. })
        ));
        let mut v = Vec::new();
        encode_loadjob(b"short", &mut v);
        assert!(matches!(
            read_all(&v).1,
            Some(ReadError::Corrupt { offset: 0, .. })
        ));
        // Wrong terminator after a complete bulk.
        let mut v = file();
        let end = v.len() - 1;
        v[end] = b'x';
        assert!(matches!(read_all(&v).1, Some(ReadError::Corrupt { .. })));
        // Unknown command.
        let v = b"*2\r\n$4\r\nPING\r\n$1\r\nx\r\n";
        assert!(matches!(
            read_all(v).1,
            Some(ReadError::Corrupt { offset: 0, .. })
        ));
        let v = b"*2\r\n$7\r\nLOADXXX";
        assert!(matches!(
            read_all(v).1,
            Some(ReadError::Corrupt { offset: 0, .. })
        ));
    }
}
