//! One AOF rewrite, as the writer thread runs it: a temp file next to the
//! AOF receives the snapshot chunks; every record produced meanwhile is
//! kept in a diff buffer (the writer also appends it to the live file);
//! `finish` appends the diff, fsyncs, renames over the AOF and fsyncs the
//! directory. The first error sticks and fails the rewrite at `finish`;
//! the old file is never touched until the rename.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::engine::AofRecord;
use std::sync::Arc;

use super::AofError;

/// With `aof-rewrite-incremental-fsync`, fsync the temp file this often
/// so the final fsync is short.
const INCREMENTAL_FSYNC_BYTES: u64 = 32 * 1024 * 1024;

pub struct Rewrite {
    /// None when the temp file could not be created (`error` says why).
    tmp: Option<File>,
    tmp_path: PathBuf,
    /// Records received since the rewrite began, encoded.
    diff: Vec<u8>,
    error: Option<AofError>,
    incremental_fsync: bool,
    since_fsync: u64,
}

/// The temp file a rewrite writes before the rename: next to the AOF, so
/// the rename stays within one filesystem and is atomic.
fn temp_path(aof: &Path) -> PathBuf {
    aof.with_file_name(format!("temp-rewriteaof-bg-{}.aof", std::process::id()))
}

/// The directory holding the AOF, fsynced after a rename.
fn dir_of(aof: &Path) -> PathBuf {
    match aof.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Rewrite {
    /// Start a rewrite of `aof`: create (truncate) its temp file.
    pub fn begin(aof: &Path, incremental_fsync: bool) -> Rewrite {
        let tmp_path = temp_path(aof);
        let (tmp, error) = match OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp_path)
        {
            Ok(f) => (Some(f), None),
            Err(e) => (
                None,
                Some(AofError::RewriteTemp {
                    path: tmp_path.clone(),
                    source: Arc::new(e),
                }),
            ),
        };
        let mut rw = Rewrite {
            tmp,
            tmp_path,
            diff: Vec::new(),
            error,
            incremental_fsync,
            since_fsync: 0,
        };
        // The rewritten file declares its format first.
        let mut header = Vec::new();
        super::reader::encode_version(&mut header);
        rw.chunk(&header);
        rw
    }

    /// A record produced while the rewrite runs.
    pub fn capture(&mut self, rec: &AofRecord) {
        super::reader::encode_record(rec, &mut self.diff);
    }

    /// Encoded LOADJOB records of one snapshot chunk.
    pub fn chunk(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let Some(tmp) = &mut self.tmp else { return };
        if let Err(e) = tmp.write_all(bytes) {
            self.error = Some(AofError::write(&self.tmp_path, e));
            return;
        }
        self.since_fsync += bytes.len() as u64;
        if self.incremental_fsync && self.since_fsync >= INCREMENTAL_FSYNC_BYTES {
            self.since_fsync = 0;
            if let Err(e) = super::faults::sync_data(tmp) {
                self.error = Some(AofError::write(&self.tmp_path, e));
            }
        }
    }

    /// Append the diff, fsync, rename over `aof`, fsync the directory.
    /// Returns the new file (open for appending at its end) and its size;
    /// on error the temp file is removed and `aof` is untouched.
    pub fn finish(mut self, aof: &Path) -> Result<(File, u64), AofError> {
        let r = self.complete(aof);
        if r.is_err() {
            let _ = std::fs::remove_file(&self.tmp_path);
        }
        r
    }

    fn complete(&mut self, aof: &Path) -> Result<(File, u64), AofError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(mut tmp) = self.tmp.take() else {
            return Err(AofError::NoTempFile);
        };
        let tmp_path = &self.tmp_path;
        tmp.write_all(&self.diff)
            .map_err(|e| AofError::write(tmp_path, e))?;
        super::faults::sync_all(&tmp).map_err(|e| AofError::fsync(tmp_path, e))?;
        let size = tmp
            .metadata()
            .map_err(|e| AofError::write(tmp_path, e))?
            .len();
        std::fs::rename(tmp_path, aof).map_err(|e| AofError::Rename {
            from: tmp_path.clone(),
            to: aof.to_path_buf(),
            source: Arc::new(e),
        })?;
        // Make the rename itself durable.
        if let Ok(dir) = File::open(dir_of(aof)) {
            let _ = dir.sync_all();
        }
        Ok((tmp, size))
    }

    /// Drop the rewrite and its temp file.
    pub fn abort(self) {
        let _ = std::fs::remove_file(&self.tmp_path);
    }
}
