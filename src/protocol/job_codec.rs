//! Serialized job record, shared by the cluster bus (REPLJOB,
//! YOURJOBS) and the AOF (`LOADJOB` payload).
//!
//! Layout, all integers little-endian (this is the one little-endian
//! structure in the system; it is kept as in C Disque so AOF files keep the
//! documented shape):
//!
//! ```text
//! u32 len                      bytes that follow (whole record = 4 + len)
//! 68-byte fixed part:
//!   id[40]
//!   u8  state (low nibble) | gc_retry (high nibble)
//!   u8  flags
//!   u16 repl
//!   u32 etime
//!   u64 ctime
//!   u32 delay
//!   u32 retry
//!   u16 nacks
//!   u16 deliv
//! u32 queue length, queue bytes
//! u32 body length, body bytes
//! u32 N, then N x 40-byte node IDs
//! [u32 extension length, extension bytes]   only when flags bit 7 is set
//! ```
//!
//! The extension section is our addition: it carries the fields of the
//! opt-in extensions (back-off, dead letters, dedup; `crate::domain::job_ext`).
//! Flag bit 7 is never set by Disque 1.0 or by jobs that use no extension,
//! so records written by earlier versions decode unchanged and plain jobs
//! keep the documented byte layout.
//!
//! The codec is purely structural: it does not interpret `state`, `flags` or
//! the relative/absolute meaning of `etime` (message vs storage flavour) -
//! that is the caller's business. Decoding never allocates based on a length
//! that has not been checked against the bytes actually present, and never
//! panics.

use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;

/// A raw 40-byte node ID as carried on the wire (hex text, not validated
/// here).
pub type RawNodeId = [u8; 40];

/// Size of the fixed part that follows the length prefix.
pub const FIXED_LEN: usize = 68;
/// Smallest possible value of the length prefix: fixed part plus the three
/// u32 length/count fields with empty queue, body and node list.
pub const MIN_RECORD_LEN: usize = FIXED_LEN + 12;
/// Flag bit announcing the trailing extension section (wire only: `decode`
/// strips it from `flags` and fills `ext` instead).
pub const FLAG_EXT_SECTION: u8 = 0x80;

/// One serialized job. Field meanings are SHOW's (docs/COMMANDS.md#show).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub id: [u8; 40],
    /// Only the low nibble is serialized.
    pub state: u8,
    /// Only the low nibble is serialized (stored in the high nibble of the
    /// state byte).
    pub gc_retry: u8,
    pub flags: u8,
    pub repl: u16,
    pub etime: u32,
    pub ctime: u64,
    pub delay: u32,
    pub retry: u32,
    pub nacks: u16,
    pub deliv: u16,
    pub queue: Bytes,
    pub body: Bytes,
    pub nodes: Vec<RawNodeId>,
    /// Opaque extension section (`crate::domain::job_ext`), None for plain jobs.
    pub ext: Option<Bytes>,
}

/// A record's fields borrowed from wherever they live (a `Job` in the
/// engine): encoding it writes the same bytes as the owned `JobRecord`
/// without copying queue, body and node IDs into temporaries first (the
/// AOF encodes one per ADDJOB).
pub struct RecordRef<'a, N> {
    pub id: &'a [u8; 40],
    pub state: u8,
    pub gc_retry: u8,
    pub flags: u8,
    pub repl: u16,
    pub etime: u32,
    pub ctime: u64,
    pub delay: u32,
    pub retry: u32,
    pub nacks: u16,
    pub deliv: u16,
    pub queue: &'a [u8],
    pub body: &'a [u8],
    /// Iterated twice (count, then bytes).
    pub nodes: N,
    pub ext: Option<&'a [u8]>,
}

impl<'a, N: Iterator<Item = &'a RawNodeId> + Clone> RecordRef<'a, N> {
    /// Append the record (length prefix included) to `out`.
    ///
    /// `state` and `gc_retry` are masked to 4 bits each because they share
    /// one byte on the wire.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(self.encoded_len());
        self.put(out);
    }

    /// Bytes `encode` appends (length prefix included).
    pub fn encoded_len(&self) -> usize {
        4 + MIN_RECORD_LEN
            + self.queue.len()
            + self.body.len()
            + 40 * self.nodes.clone().count()
            + self.ext.map_or(0, |e| 4 + e.len())
    }

    /// `encode` into any buffer (an AOF rewrite's chunk writes the
    /// record straight in, with no buffer of its own).
    pub fn put<B: BufMut>(&self, out: &mut B) {
        let n_nodes = self.nodes.clone().count();
        let total = self.encoded_len();
        out.put_u32_le(wire_len(total - 4));
        out.put_slice(self.id);
        out.put_u8((self.state & 0x0f) | ((self.gc_retry & 0x0f) << 4));
        let ext_bit = if self.ext.is_some() {
            FLAG_EXT_SECTION
        } else {
            0
        };
        out.put_u8((self.flags & !FLAG_EXT_SECTION) | ext_bit);
        out.put_u16_le(self.repl);
        out.put_u32_le(self.etime);
        out.put_u64_le(self.ctime);
        out.put_u32_le(self.delay);
        out.put_u32_le(self.retry);
        out.put_u16_le(self.nacks);
        out.put_u16_le(self.deliv);
        out.put_u32_le(wire_len(self.queue.len()));
        out.put_slice(self.queue);
        out.put_u32_le(wire_len(self.body.len()));
        out.put_slice(self.body);
        out.put_u32_le(wire_len(n_nodes));
        for n in self.nodes.clone() {
            out.put_slice(n);
        }
        if let Some(e) = self.ext {
            out.put_u32_le(wire_len(e.len()));
            out.put_slice(e);
        }
    }
}

/// The node IDs of a borrowed record.
pub type RawNodes<'a> = std::slice::Iter<'a, RawNodeId>;

impl<'a> RecordRef<'a, RawNodes<'a>> {
    /// Decode one record from the front of `src` without copying anything:
    /// every field borrows `src` (a replica decodes one REPLJOB per job, and
    /// the owned `JobRecord`'s copies of queue, body and node IDs were thrown
    /// away again right after building the job). Same checks as
    /// [`JobRecord::decode`]; returns the record and the bytes consumed.
    pub fn decode(src: &'a [u8]) -> Result<(Self, usize), CodecError> {
        let p = parse(src)?;
        let f = &p.fixed;
        let id = peek_id(src).ok_or(CodecError::Truncated)?;
        // `parse` checked every range against `src`; `get` keeps that
        // knowledge local instead of trusting it with an index.
        let range = |(a, b): (usize, usize)| src.get(a..b).ok_or(CodecError::Truncated);
        let (nodes, _) = range(p.nodes)?.as_chunks::<40>();
        let rec = RecordRef {
            id,
            state: f[40] & 0x0f,
            gc_retry: f[40] >> 4,
            flags: f[41] & !FLAG_EXT_SECTION,
            repl: le_u16(f, 42),
            etime: le_u32(f, 44),
            ctime: le_u64(f, 48),
            delay: le_u32(f, 56),
            retry: le_u32(f, 60),
            nacks: le_u16(f, 64),
            deliv: le_u16(f, 66),
            queue: range(p.queue)?,
            body: range(p.body)?,
            nodes: nodes.iter(),
            ext: p.ext.map(range).transpose()?,
        };
        Ok((rec, p.consumed))
    }
}

/// The job ID of the record at the front of `src`, without decoding the
/// rest (unchecked: `decode` checks the record; alone it is a hint for
/// prefetching).
pub fn peek_id(src: &[u8]) -> Option<&[u8; 40]> {
    src.get(4..44).and_then(|s| s.try_into().ok())
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecError {
    /// The input ends before the record does. For the AOF this is the
    /// "truncated tail" case that may be tolerated; on the bus it means the
    /// enclosing frame lied about its contents.
    Truncated,
    /// The bytes are present but inconsistent (lengths overflowing the
    /// record, length prefix disagreeing with the parsed content, ...).
    Invalid(&'static str),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Truncated => f.write_str("truncated job record"),
            CodecError::Invalid(why) => write!(f, "invalid job record: {why}"),
        }
    }
}

impl std::error::Error for CodecError {}

/// Result of a structural parse: fixed fields plus byte ranges into the
/// source, so callers can either copy (`decode`) or slice (`decode_bytes`)
/// without parsing twice.
struct Parsed {
    fixed: [u8; FIXED_LEN],
    queue: (usize, usize),
    body: (usize, usize),
    nodes: (usize, usize),
    ext: Option<(usize, usize)>,
    consumed: usize,
}

/// Minimal bounds-checked cursor; every read returns `Invalid` when it would
/// run past the record (the record itself has already been checked to be
/// fully present, so running past it is an inconsistency, not truncation).
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, why: &'static str) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).ok_or(CodecError::Invalid(why))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(CodecError::Invalid(why))?;
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, why: &'static str) -> Result<u32, CodecError> {
        let s = self.take(4, why)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
}

fn le_u16(b: &[u8; FIXED_LEN], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le_u32(b: &[u8; FIXED_LEN], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le_u64(b: &[u8; FIXED_LEN], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Length as u32 for the wire. Anything that does not fit is written as
/// `u32::MAX`, which guarantees the decoder rejects the record instead of
/// silently mis-framing it (such sizes are far beyond MAX_FRAME anyway).
fn wire_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn parse(src: &[u8]) -> Result<Parsed, CodecError> {
    let prefix = src.get(..4).ok_or(CodecError::Truncated)?;
    let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len < MIN_RECORD_LEN {
        return Err(CodecError::Invalid(
            "length prefix smaller than minimal record",
        ));
    }
    let total = len
        .checked_add(4)
        .ok_or(CodecError::Invalid("length overflow"))?;
    // Check presence before touching anything else so a short read is always
    // reported as Truncated, never as Invalid.
    let rec = src.get(..total).ok_or(CodecError::Truncated)?;

    let mut c = Cursor { buf: rec, pos: 4 };
    let mut fixed = [0u8; FIXED_LEN];
    fixed.copy_from_slice(c.take(FIXED_LEN, "fixed part")?);

    let qlen = c.u32("queue length field")? as usize;
    let qstart = c.pos;
    c.take(qlen, "queue length exceeds record")?;
    let blen = c.u32("body length field")? as usize;
    let bstart = c.pos;
    c.take(blen, "body length exceeds record")?;
    let n = c.u32("node count field")? as usize;
    let nbytes = n
        .checked_mul(40)
        .ok_or(CodecError::Invalid("node count overflow"))?;
    let nstart = c.pos;
    let ext = if fixed[41] & FLAG_EXT_SECTION != 0 {
        c.take(nbytes, "node list exceeds record")?;
        let elen = c.u32("extension length field")? as usize;
        let estart = c.pos;
        c.take(elen, "extension exceeds record")?;
        Some((estart, estart + elen))
    } else {
        if nbytes != c.remaining() {
            return Err(CodecError::Invalid("length prefix disagrees with content"));
        }
        c.pos += nbytes;
        None
    };
    if c.remaining() != 0 {
        // Either the node list runs past the record or bytes are left over:
        // in both cases the prefix disagrees with the parsed content.
        return Err(CodecError::Invalid("length prefix disagrees with content"));
    }
    Ok(Parsed {
        fixed,
        queue: (qstart, qstart + qlen),
        body: (bstart, bstart + blen),
        nodes: (nstart, nstart + nbytes),
        ext,
        consumed: total,
    })
}

impl JobRecord {
    /// Number of bytes `encode` appends (length prefix included).
    pub fn encoded_len(&self) -> usize {
        4 + MIN_RECORD_LEN
            + self.queue.len()
            + self.body.len()
            + 40 * self.nodes.len()
            + self.ext.as_ref().map_or(0, |e| 4 + e.len())
    }

    /// Append the record (length prefix included) to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        self.as_ref().encode(out);
    }

    /// The record's fields, borrowed.
    pub fn as_ref(&self) -> RecordRef<'_, std::slice::Iter<'_, RawNodeId>> {
        RecordRef {
            id: &self.id,
            state: self.state,
            gc_retry: self.gc_retry,
            flags: self.flags,
            repl: self.repl,
            etime: self.etime,
            ctime: self.ctime,
            delay: self.delay,
            retry: self.retry,
            nacks: self.nacks,
            deliv: self.deliv,
            queue: &self.queue,
            body: &self.body,
            nodes: self.nodes.iter(),
            ext: self.ext.as_deref(),
        }
    }

    /// Convenience: encode into a fresh buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut b);
        b.freeze()
    }

    /// Decode one record from the front of `src`; returns the record and
    /// bytes consumed. Trailing bytes after the record are left alone (the
    /// caller decides whether they are allowed).
    pub fn decode(src: &[u8]) -> Result<(JobRecord, usize), CodecError> {
        let (r, used) = RecordRef::decode(src)?;
        Ok((Self::owned(&r, Bytes::copy_from_slice), used))
    }

    /// Like [`decode`](Self::decode) but queue and body share `src`'s
    /// allocation instead of being copied (bodies can be large).
    pub fn decode_bytes(src: &Bytes) -> Result<(JobRecord, usize), CodecError> {
        let (r, used) = RecordRef::decode(src)?;
        Ok((Self::owned(&r, |field| src.slice_ref(field)), used))
    }

    /// Structural check only, no allocation: returns the bytes the record at
    /// the front of `src` occupies. Used by the bus decoder to validate job
    /// payloads without materializing them.
    pub fn validate(src: &[u8]) -> Result<usize, CodecError> {
        parse(src).map(|p| p.consumed)
    }

    /// The owned form of a borrowed record; `mk` turns each of its byte
    /// fields into `Bytes` (a copy, or a slice of a shared buffer).
    pub fn owned(r: &RecordRef<'_, RawNodes<'_>>, mk: impl Fn(&[u8]) -> Bytes) -> JobRecord {
        JobRecord {
            id: *r.id,
            state: r.state,
            gc_retry: r.gc_retry,
            flags: r.flags,
            repl: r.repl,
            etime: r.etime,
            ctime: r.ctime,
            delay: r.delay,
            retry: r.retry,
            nacks: r.nacks,
            deliv: r.deliv,
            queue: mk(r.queue),
            body: mk(r.body),
            // Allocation is bounded: the node IDs lie inside the record,
            // which the caller already holds in memory.
            nodes: r.nodes.clone().copied().collect(),
            ext: r.ext.map(&mk),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;

    fn sample() -> JobRecord {
        JobRecord {
            id: *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d",
            state: 2,
            gc_retry: 0,
            flags: 7,
            repl: 2,
            etime: 0x6b0c2122,
            ctime: 0x0018_ec82_5e8f_4fc0,
            delay: 0,
            retry: 30,
            nacks: 1,
            deliv: 2,
            queue: Bytes::from_static(b"q1"),
            body: Bytes::from_static(b"body1"),
            nodes: vec![[b'a'; 40], [b'b'; 40]],
            ext: None,
        }
    }

    /// An annotated LOADJOB payload in Disque's layout, assembled byte by byte
    /// from the annotation (not from our encoder).
    fn wire_10_1() -> Vec<u8> {
        let mut v = vec![0xa7, 0x00, 0x00, 0x00];
        v.extend_from_slice(b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d");
        v.push(0x02);
        v.push(0x07);
        v.extend_from_slice(&[0x02, 0x00]);
        v.extend_from_slice(&[0x22, 0x21, 0x0c, 0x6b]);
        v.extend_from_slice(&[0xc0, 0x4f, 0x8f, 0x5e, 0x82, 0xec, 0x18, 0x00]);
        v.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]);
        v.extend_from_slice(&[0x1e, 0x00, 0x00, 0x00]);
        v.extend_from_slice(&[0x01, 0x00, 0x02, 0x00]);
        v.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
        v.extend_from_slice(b"q1");
        v.extend_from_slice(&[0x05, 0x00, 0x00, 0x00]);
        v.extend_from_slice(b"body1");
        v.extend_from_slice(&[0x02, 0x00, 0x00, 0x00]);
        v.extend_from_slice(&[b'a'; 40]);
        v.extend_from_slice(&[b'b'; 40]);
        v
    }

    #[test]
    fn wire_10_1_example_decodes() {
        let raw = wire_10_1();
        assert_eq!(raw.len(), 4 + 167);
        let (rec, used) = JobRecord::decode(&raw).unwrap();
        assert_eq!(used, raw.len());
        assert_eq!(rec, sample());
        assert_eq!(rec.etime, 1_795_957_026);
        // And our encoder produces exactly those bytes.
        assert_eq!(&sample().to_bytes()[..], &raw[..]);
        assert_eq!(sample().encoded_len(), raw.len());
    }

    #[test]
    fn round_trip_and_zero_copy() {
        let mut r = sample();
        r.gc_retry = 9;
        r.state = 3;
        r.nodes.clear();
        r.body = Bytes::from(vec![0xffu8; 100_000]);
        let enc = r.to_bytes();
        let (d, used) = JobRecord::decode_bytes(&enc).unwrap();
        assert_eq!(used, enc.len());
        assert_eq!(d, r);
        assert_eq!(JobRecord::validate(&enc), Ok(enc.len()));
    }

    #[test]
    fn extension_section_round_trips_and_old_records_still_decode() {
        let mut r = sample();
        r.ext = Some(Bytes::from_static(b"\x01\x02xyz"));
        let enc = r.to_bytes();
        assert_eq!(enc.len(), r.encoded_len());
        assert_eq!(enc[4 + 41] & FLAG_EXT_SECTION, FLAG_EXT_SECTION);
        let (d, used) = JobRecord::decode_bytes(&enc).unwrap();
        assert_eq!(used, enc.len());
        assert_eq!(d, r);
        // Empty extension is still an extension.
        r.ext = Some(Bytes::new());
        assert_eq!(JobRecord::decode(&r.to_bytes()).unwrap().0, r);
        // A plain record never sets the bit.
        assert_eq!(sample().to_bytes()[4 + 41] & FLAG_EXT_SECTION, 0);
        // Bit set without a section: invalid, never a panic.
        let mut raw = wire_10_1();
        raw[4 + 41] |= FLAG_EXT_SECTION;
        assert!(matches!(
            JobRecord::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
        // Truncated anywhere: Truncated.
        r.ext = Some(Bytes::from_static(b"abc"));
        let enc = r.to_bytes();
        for cut in 0..enc.len() {
            assert_eq!(JobRecord::decode(&enc[..cut]), Err(CodecError::Truncated));
        }
    }

    /// The borrowed decode sees exactly the owned decode's fields, and
    /// fails exactly where it fails.
    #[test]
    fn borrowed_decode_matches_the_owned_one() {
        let mut with_ext = sample();
        with_ext.ext = Some(Bytes::from_static(b"\x01\x02xyz"));
        for r in [sample(), with_ext] {
            let enc = r.to_bytes();
            let (d, used) = RecordRef::decode(&enc).unwrap();
            assert_eq!(used, enc.len());
            let mut again = BytesMut::new();
            d.encode(&mut again);
            assert_eq!(&again[..], &enc[..]);
            assert_eq!(d.nodes.clone().count(), r.nodes.len());
            assert_eq!(d.ext, r.ext.as_deref());
            for cut in 0..enc.len() {
                assert_eq!(
                    RecordRef::decode(&enc[..cut]).err(),
                    JobRecord::decode(&enc[..cut]).err(),
                    "cut {cut}"
                );
            }
        }
        let mut raw = wire_10_1();
        raw[4 + 41] |= FLAG_EXT_SECTION;
        assert!(matches!(
            RecordRef::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
    }

    #[test]
    fn trailing_bytes_left_alone() {
        let mut b = BytesMut::new();
        sample().encode(&mut b);
        sample().encode(&mut b);
        let (_, used) = JobRecord::decode(&b).unwrap();
        assert_eq!(used * 2, b.len());
    }

    #[test]
    fn truncation_is_truncated() {
        let raw = wire_10_1();
        for cut in 0..raw.len() {
            assert_eq!(
                JobRecord::decode(&raw[..cut]),
                Err(CodecError::Truncated),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn inconsistent_lengths_are_invalid() {
        // Prefix one too large, extra byte present: content ends early.
        let mut raw = wire_10_1();
        raw[0] += 1;
        raw.push(0);
        assert!(matches!(
            JobRecord::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
        // Prefix one too small: node list runs past the record.
        let mut raw = wire_10_1();
        raw[0] -= 1;
        assert!(matches!(
            JobRecord::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
        // Huge queue length.
        let mut raw = wire_10_1();
        let q = 4 + FIXED_LEN;
        raw[q..q + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            JobRecord::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
        // Huge node count (must not allocate or overflow).
        let mut raw = wire_10_1();
        let n = raw.len() - 80 - 4;
        raw[n..n + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            JobRecord::decode(&raw),
            Err(CodecError::Invalid(_))
        ));
        // Tiny prefix.
        assert!(matches!(
            JobRecord::decode(&[1, 0, 0, 0, 0]),
            Err(CodecError::Invalid(_))
        ));
        // Huge prefix with little data: truncated, not an allocation.
        assert_eq!(
            JobRecord::decode(&[0xff, 0xff, 0xff, 0xff, 0]),
            Err(CodecError::Truncated)
        );
    }
}
