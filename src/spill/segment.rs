//! The spill segment files: their names, the record format, and reading
//! and checking one record. A record is
//!
//! ```text
//! u32 LE body length | u32 LE CRC32 of (ID, body) | 40-byte job ID | body
//! ```
//!
//! appended at the offset the engine chose (`engine::spill::Loc`). Reading
//! checks the length, the ID and the checksum, so a torn, truncated or
//! overwritten record is reported as corrupt and never returned as a body.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};

use crate::domain::job::JobId;
use crate::engine::spill::{Loc, RECORD_HEADER};

/// Failures reading or writing segment files.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("Can't open the spill segment {}: {}", path.display(), crate::errors::strerror(source))]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Error writing the spill segment {} at offset {off}: {}", path.display(), crate::errors::strerror(source))]
    Write {
        path: PathBuf,
        off: u64,
        source: std::io::Error,
    },
    #[error("Error reading the spill segment {} at offset {off}: {}", path.display(), crate::errors::strerror(source))]
    Read {
        path: PathBuf,
        off: u64,
        source: std::io::Error,
    },
    #[error("Corrupt record in the spill segment {} at offset {off}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        off: u64,
        what: &'static str,
    },
    #[error("Can't prepare the spill directory {}: {}", path.display(), crate::errors::strerror(source))]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl SegmentError {
    /// The disk (or the quota) is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            SegmentError::Write { source, .. } | SegmentError::Open { source, .. } => matches!(
                source.raw_os_error(),
                Some(libc::ENOSPC) | Some(libc::EDQUOT)
            ),
            _ => false,
        }
    }

    /// The bytes read are not the record asked for.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, SegmentError::Corrupt { .. })
    }
}

/// File name of segment `seg` in `dir`.
pub fn path(dir: &Path, seg: u32) -> PathBuf {
    dir.join(format!("spill-{seg:08}.seg"))
}

/// Whether a file name is one of ours (the startup wipe removes only these).
pub fn is_segment_name(name: &str) -> bool {
    name.strip_prefix("spill-")
        .and_then(|r| r.strip_suffix(".seg"))
        .is_some_and(|n| n.len() == 8 && n.bytes().all(|c| c.is_ascii_digit()))
}

fn checksum(id: &JobId, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.0);
    h.update(body);
    h.finalize()
}

/// Append one record to `out`.
pub fn encode(id: &JobId, body: &[u8], out: &mut BytesMut) {
    out.reserve(RECORD_HEADER as usize + body.len());
    out.put_u32_le(u32::try_from(body.len()).unwrap_or(u32::MAX));
    out.put_u32_le(checksum(id, body));
    out.put_slice(&id.0);
    out.put_slice(body);
}

/// Check a whole record (header and body) read from `loc` against the
/// job it should hold; the body on success.
pub fn decode(buf: &[u8], id: &JobId, loc: Loc) -> Result<Bytes, &'static str> {
    check(buf, id, loc).map(Bytes::copy_from_slice)
}

/// `decode` without the copy: the body within `buf`.
fn check<'a>(buf: &'a [u8], id: &JobId, loc: Loc) -> Result<&'a [u8], &'static str> {
    let header = RECORD_HEADER as usize;
    if buf.len() < header {
        return Err("truncated record");
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len != loc.len || buf.len() != header + len as usize {
        return Err("length mismatch");
    }
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if buf[8..header] != id.0 {
        return Err("job ID mismatch");
    }
    let body = &buf[header..];
    if checksum(id, body) != crc {
        return Err("checksum mismatch");
    }
    Ok(body)
}

/// Read and check the record at `loc` of an open segment.
pub fn read(file: &File, file_path: &Path, id: &JobId, loc: Loc) -> Result<Bytes, SegmentError> {
    let buf = read_raw(file, file_path, loc)?;
    decode(&buf, id, loc).map_err(|what| SegmentError::Corrupt {
        path: file_path.to_path_buf(),
        off: u64::from(loc.off),
        what,
    })
}

/// Read and check the record at `loc` whatever job it holds (a whole job
/// spilled, `engine::cold`: the ID is only on disk); its ID and payload.
pub fn read_any(file: &File, file_path: &Path, loc: Loc) -> Result<(JobId, Bytes), SegmentError> {
    let buf = read_raw(file, file_path, loc)?;
    decode_any(&buf, loc).map_err(|what| SegmentError::Corrupt {
        path: file_path.to_path_buf(),
        off: u64::from(loc.off),
        what,
    })
}

/// Check a whole record whatever job it holds; its ID and payload.
pub fn decode_any(buf: &[u8], loc: Loc) -> Result<(JobId, Bytes), &'static str> {
    check_any(buf, loc).map(|(id, payload)| (id, Bytes::copy_from_slice(payload)))
}

/// `decode_any` without the copy: the payload within `buf`.
pub fn check_any(buf: &[u8], loc: Loc) -> Result<(JobId, &[u8]), &'static str> {
    let id = buf
        .get(8..RECORD_HEADER as usize)
        .and_then(|b| <[u8; 40]>::try_from(b).ok())
        .map(JobId)
        .ok_or("truncated record")?;
    let payload = check(buf, &id, loc)?;
    Ok((id, payload))
}

/// `len` bytes of a segment from `off` (fewer at the end of a short
/// file): consecutive records read with one call.
pub fn read_span(
    file: &File,
    file_path: &Path,
    off: u32,
    len: usize,
) -> Result<Vec<u8>, SegmentError> {
    let mut buf = Vec::new();
    let got = read_span_into(file, file_path, off, len, &mut buf)?;
    buf.truncate(got);
    Ok(buf)
}

/// `read_span` into `buf`, which is kept for the next read (a prefetch
/// reads up to 1 MB at a time: a fresh zeroed buffer each time costs the
/// allocation, its page faults and the zeroing). Returns the bytes read,
/// at the start of `buf`.
pub fn read_span_into(
    file: &File,
    file_path: &Path,
    off: u32,
    len: usize,
    buf: &mut Vec<u8>,
) -> Result<usize, SegmentError> {
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let off = u64::from(off);
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..len], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SegmentError::Read {
                    path: file_path.to_path_buf(),
                    off,
                    source,
                })
            }
        }
    }
    Ok(got)
}

/// The record's bytes at `loc` (fewer at the end of a short file).
fn read_raw(file: &File, file_path: &Path, loc: Loc) -> Result<Vec<u8>, SegmentError> {
    read_span(file, file_path, loc.off, loc.record_len() as usize)
}

/// Create `dir` if needed and delete every segment file in it: without a
/// record of what they held (the AOF is the truth), old segments are a
/// cache that no longer matches anything.
pub fn wipe(dir: &Path) -> Result<usize, SegmentError> {
    let err = |source| SegmentError::Dir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        if name.to_str().is_some_and(is_segment_name) {
            std::fs::remove_file(entry.path()).map_err(err)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Bytes of the file system holding `dir` (for `spill-max-disk N%`).
pub fn filesystem_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid out pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    Some(st.f_blocks.saturating_mul(st.f_frsize))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn id(n: u8) -> JobId {
        let mut s = *b"D-00000000-000000000000000000000000-0001";
        s[20] = b'a' + n;
        JobId(s)
    }

    #[test]
    fn records_round_trip_and_every_damage_is_caught() {
        let mut out = BytesMut::new();
        encode(&id(1), b"hello", &mut out);
        let loc = Loc {
            seg: 1,
            off: 0,
            len: 5,
        };
        assert_eq!(out.len() as u64, loc.record_len());
        assert_eq!(&decode(&out, &id(1), loc).unwrap()[..], b"hello");
        // Another job's ID.
        assert_eq!(decode(&out, &id(2), loc), Err("job ID mismatch"));
        // Every single flipped bit is detected.
        for i in 0..out.len() * 8 {
            let mut bad = out.to_vec();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad, &id(1), loc).is_err(), "bit {i}");
        }
        // Truncated anywhere.
        for n in 0..out.len() {
            assert!(decode(&out[..n], &id(1), loc).is_err(), "len {n}");
        }
    }

    /// A unique directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::SeqCst);
            let p = std::env::temp_dir().join(format!(
                "disque-spill-test-{}-{tag}-{n}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn reads_from_a_file_and_wipes_only_segments() {
        let dir = TempDir::new("seg");
        let p = path(dir.path(), 3);
        let mut out = BytesMut::new();
        encode(&id(1), b"first", &mut out);
        let second = out.len() as u32;
        encode(&id(2), b"second body", &mut out);
        std::fs::write(&p, &out[..out.len() - 2]).unwrap();
        let f = File::open(&p).unwrap();
        let a = Loc {
            seg: 3,
            off: 0,
            len: 5,
        };
        assert_eq!(&read(&f, &p, &id(1), a).unwrap()[..], b"first");
        let b = Loc {
            seg: 3,
            off: second,
            len: 11,
        };
        // The file ends two bytes short of the second record.
        assert!(read(&f, &p, &id(2), b).unwrap_err().is_corrupt());
        std::fs::write(dir.path().join("keep.txt"), b"x").unwrap();
        assert_eq!(wipe(dir.path()).unwrap(), 1);
        assert!(!p.exists());
        assert!(dir.path().join("keep.txt").exists());
        assert!(is_segment_name("spill-00000001.seg"));
        assert!(!is_segment_name("spill-1.seg"));
        assert!(filesystem_bytes(dir.path()).is_some_and(|b| b > 0));
    }
}
