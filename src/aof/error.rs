//! `AofError`: every way the append-only file fails, from opening it at
//! startup to the writer thread's write/fsync errors, a rewrite's temp
//! file and rename, and replaying a truncated or corrupt file.
//!
//! Each variant keeps the path (and the byte offset where a record is at
//! fault) as fields and the OS error as its `source`; the `Display` texts
//! are the ones Disque prints and that `-MISCONF` carries, so the OS part
//! is libc's wording (`errors::strerror`, no " (os error N)" suffix). The
//! type is `Clone` (the writer publishes its current error to every
//! waiting client), so the `io::Error` sits behind an `Arc`.

use std::io;
use std::mem::discriminant;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::errors::{strerror, WireError};
use crate::protocol::job_codec::CodecError;

/// An AOF failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AofError {
    /// The AOF could not be opened for appending (startup).
    #[error("Can't open the append-only file {}: {}", path.display(), strerror(source))]
    Open {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// The AOF exists but could not be opened for loading.
    #[error("Fatal error: can't open the append log file {} for reading: {}", path.display(), strerror(source))]
    OpenRead {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// Reading the AOF failed while loading it.
    #[error("Error reading the append only file {}: {}", path.display(), strerror(source))]
    Read {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// The record at `offset` is cut short and `aof-load-truncated` is no.
    #[error(
        "Unexpected end of file reading the append only file {name}: the record at offset \
         {offset} is truncated and aof-load-truncated is no. Set aof-load-truncated yes to \
         load it anyway, or run disque-server --check-aof --fix {name}",
        name = path.display()
    )]
    Truncated { path: PathBuf, offset: u64 },
    /// The record at `offset` does not parse (`why` is the reader's text).
    #[error(
        "Bad file format reading the append only file {} at offset {offset}: {why}. Make a \
         backup of your AOF file, then use disque-server --check-aof --fix <filename>",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        offset: u64,
        why: String,
    },
    /// The file declares a format newer than this build reads (written by
    /// a newer server): not corruption, so `--check-aof --fix` leaves it.
    #[error(
        "The append only file {} is in AOF format version {found} (offset {offset}), newer \
         than this server reads (up to {supported}): start a newer disque-server on it \
         (docs/upgrades.md)",
        path.display()
    )]
    Version {
        path: PathBuf,
        offset: u64,
        found: u32,
        supported: u32,
    },
    /// The record at `offset` parses but its content cannot be applied.
    #[error(
        "Bad file format reading the append only file {} at offset {offset}: {source}. Make a \
         backup of your AOF file, then use disque-server --check-aof --fix <filename>",
        path.display()
    )]
    BadRecord {
        path: PathBuf,
        offset: u64,
        #[source]
        source: RecordError,
    },
    /// Cutting a truncated tail off (`aof-load-truncated yes`) failed.
    #[error("Error truncating the AOF file {} at offset {offset}: {}", path.display(), strerror(source))]
    Truncate {
        path: PathBuf,
        offset: u64,
        #[source]
        source: Arc<io::Error>,
    },
    /// Writing the AOF (or a rewrite's temp file) failed.
    #[error("{}", strerror(source))]
    Write {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// `write` accepted nothing.
    #[error("write returned 0 bytes (disk full?)")]
    WriteZero { path: PathBuf },
    /// fsync of the AOF (or a rewrite's temp file) failed.
    #[error("fsync: {}", strerror(source))]
    Fsync {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// A rewrite could not create its temp file.
    #[error("Opening the temp file for AOF rewrite failed: {}", strerror(source))]
    RewriteTemp {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// A rewrite's temp file could not replace the AOF.
    #[error("rename: {}", strerror(source))]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    /// A rewrite finished without a temp file.
    #[error("no temp file")]
    NoTempFile,
    /// RewriteFinish without a rewrite (begin failed or it was aborted).
    #[error("no AOF rewrite in progress")]
    NoRewrite,
    /// BGREWRITEAOF while one runs.
    #[error("Background append only file rewriting already in progress")]
    RewriteInProgress,
    /// The writer thread is gone (or was never started).
    #[error("the AOF writer is not running")]
    WriterGone,
    /// A synchronous request to the writer got no answer in time.
    #[error("timed out waiting for the AOF writer")]
    Timeout,
    /// The writer thread could not be spawned.
    #[error("Can't start the AOF writer thread: {source}")]
    Thread {
        #[source]
        source: Arc<io::Error>,
    },
}

/// A record the reader accepted whose content cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Decode(#[from] CodecError),
    #[error("LOADJOB payload has an invalid job ID or state")]
    BadJob,
    #[error("DEDUP record is malformed")]
    BadDedup,
    #[error("SCHEDULE record is malformed")]
    BadSchedule,
    #[error("BATCH record is malformed")]
    BadBatch,
}

impl AofError {
    pub fn open(path: &Path, e: io::Error) -> Self {
        AofError::Open {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }

    pub fn write(path: &Path, e: io::Error) -> Self {
        AofError::Write {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }

    pub fn fsync(path: &Path, e: io::Error) -> Self {
        AofError::Fsync {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }

    /// The file the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        use AofError::*;
        match self {
            Open { path, .. }
            | OpenRead { path, .. }
            | Read { path, .. }
            | Truncated { path, .. }
            | Corrupt { path, .. }
            | Version { path, .. }
            | BadRecord { path, .. }
            | Truncate { path, .. }
            | Write { path, .. }
            | WriteZero { path }
            | Fsync { path, .. }
            | RewriteTemp { path, .. } => Some(path),
            Rename { from, .. } => Some(from),
            NoTempFile | NoRewrite | RewriteInProgress | WriterGone | Timeout | Thread { .. } => {
                None
            }
        }
    }

    /// The byte offset of the record at fault, for load errors.
    pub fn offset(&self) -> Option<u64> {
        match self {
            AofError::Truncated { offset, .. }
            | AofError::Corrupt { offset, .. }
            | AofError::Version { offset, .. }
            | AofError::BadRecord { offset, .. }
            | AofError::Truncate { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// The OS error kind, for I/O failures.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        use AofError::*;
        match self {
            Open { source, .. }
            | OpenRead { source, .. }
            | Read { source, .. }
            | Truncate { source, .. }
            | Write { source, .. }
            | Fsync { source, .. }
            | RewriteTemp { source, .. }
            | Rename { source, .. }
            | Thread { source } => Some(source.kind()),
            _ => None,
        }
    }
}

/// By hand, since `io::Error` is not `PartialEq`: same variant, same file,
/// offset and OS error kind and the same words. The writer relies on it to
/// report (log, publish) an error only when it changed.
impl PartialEq for AofError {
    fn eq(&self, other: &Self) -> bool {
        discriminant(self) == discriminant(other)
            && self.path() == other.path()
            && self.offset() == other.offset()
            && self.io_kind() == other.io_kind()
            && self.to_string() == other.to_string()
    }
}

impl Eq for AofError {}

/// The API and dashboard show an AOF error as its text.
impl serde::Serialize for AofError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl AofError {
    /// `-MISCONF ...` for a write refused while the AOF cannot be written.
    pub fn misconf(&self) -> WireError {
        WireError::Misconf(self.to_string())
    }
}

/// `-ERR <text>` (DEBUG LOADAOF, BGREWRITEAOF).
impl From<AofError> for WireError {
    fn from(e: AofError) -> Self {
        WireError::Other(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_and_fields() {
        let p = Path::new("/d/appendonly.aof");
        let e = AofError::fsync(p, io::Error::from_raw_os_error(28));
        assert_eq!(e.to_string(), "fsync: No space left on device");
        assert_eq!(e.path(), Some(p));
        assert_eq!(e.io_kind(), Some(io::ErrorKind::StorageFull));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e, e.clone());
        assert_ne!(e, AofError::write(p, io::Error::from_raw_os_error(28)));
        let t = AofError::Truncated {
            path: p.into(),
            offset: 12,
        };
        assert_eq!(t.offset(), Some(12));
        assert!(t
            .to_string()
            .contains("the record at offset 12 is truncated"));
    }
}
