//! One AOF rewrite, as the writer thread runs it: a temp file next to the
//! AOF receives the snapshot chunks and, between them, every record
//! produced meanwhile (the writer also appends it to the live file), all in
//! engine order; `finish` writes the last records, fsyncs, renames over the
//! AOF and fsyncs the directory. The first error sticks and fails the
//! rewrite at `finish`; the old file is never touched until the rename.
//!
//! Why records go between the chunks rather than after the whole snapshot:
//! each chunk is the state of its jobs when the owner encoded it, and each
//! record the change it made when it made it, so the file replays the
//! node's history in the order it happened. Holding them to the end kept a
//! whole rewrite's traffic in RAM (a rewrite of a large spilled backlog
//! takes minutes) and wrote it all at once, stalling every writer
//! (docs/PERFORMANCE.md, run AD).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::engine::AofRecord;
use std::sync::Arc;

use super::AofError;

/// With `aof-rewrite-incremental-fsync`, fsync the temp file this often
/// so the final fsync is short.
const INCREMENTAL_FSYNC_BYTES: u64 = 32 * 1024 * 1024;

/// Captured records are written to the temp file before the next chunk,
/// or once this many bytes are waiting.
const DIFF_FLUSH_BYTES: usize = 1024 * 1024;

pub struct Rewrite {
    /// None when the temp file could not be created (`error` says why).
    tmp: Option<File>,
    tmp_path: PathBuf,
    /// Records received since the last chunk, encoded, not yet written.
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
        if self.diff.len() >= DIFF_FLUSH_BYTES {
            self.write_diff();
        }
    }

    /// Encoded LOADJOB records of one snapshot chunk, after the records
    /// that preceded it.
    pub fn chunk(&mut self, bytes: &[u8]) {
        self.write_diff();
        self.write(bytes);
    }

    fn write_diff(&mut self) {
        if self.diff.is_empty() {
            return;
        }
        let diff = std::mem::take(&mut self.diff);
        self.write(&diff);
        // Keep the allocation unless one burst made it large.
        if diff.capacity() <= 4 * DIFF_FLUSH_BYTES {
            self.diff = diff;
            self.diff.clear();
        }
    }

    fn write(&mut self, bytes: &[u8]) {
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
            if let Err(e) = crate::os::faults::sync_data(tmp) {
                self.error = Some(AofError::write(&self.tmp_path, e));
            }
        }
    }

    /// Write the last records, fsync, rename over `aof`, fsync the directory.
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
        self.write_diff();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(tmp) = self.tmp.take() else {
            return Err(AofError::NoTempFile);
        };
        let tmp_path = &self.tmp_path;
        crate::os::faults::sync_all(&tmp).map_err(|e| AofError::fsync(tmp_path, e))?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::aof::reader::{AofReader, Record};
    use crate::domain::job::JobId;

    fn id(n: u32) -> JobId {
        let mut b = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-0000";
        b[36..40].copy_from_slice(format!("{:04x}", n % 0x10000).as_bytes());
        JobId(b)
    }

    #[test]
    fn records_reach_the_temp_file_as_they_come_and_in_engine_order() {
        let dir = crate::support::temp_dir::TempDir::new("rewrite");
        let aof = dir.join("a.aof");
        let mut rw = Rewrite::begin(&aof, true);
        rw.capture(&AofRecord::DelJob(id(0)));
        let mut chunk = Vec::new();
        crate::aof::reader::encode_record(&AofRecord::DelJob(id(1)), &mut chunk);
        rw.chunk(&chunk);
        // A long rewrite's traffic is not held in RAM until the end.
        let n = 2 + (2 * DIFF_FLUSH_BYTES / 63) as u32;
        for i in 2..n {
            rw.capture(&AofRecord::DelJob(id(i)));
        }
        let on_disk = std::fs::metadata(temp_path(&aof)).unwrap().len();
        assert!(on_disk > DIFF_FLUSH_BYTES as u64, "{on_disk} bytes written");
        assert!(rw.diff.len() < DIFF_FLUSH_BYTES);
        let (_, size) = rw.finish(&aof).unwrap();
        assert_eq!(size, std::fs::metadata(&aof).unwrap().len());
        let mut r = AofReader::new(File::open(&aof).unwrap());
        let mut got = Vec::new();
        while let Some((_, rec)) = r.next_record().unwrap() {
            if let Record::DelJob(j) = rec {
                got.push(j);
            }
        }
        let want: Vec<JobId> = (0..n).map(id).collect();
        assert_eq!(got, want);
    }
}
