//! The nodes.conf file: the node table persisted so a restarted node keeps
//! its ID and finds its peers again (the text format is parsed and
//! formatted next to the table, in `engine::cluster`). Saves are atomic (temp file,
//! fsync, rename, fsync of the directory), so a crash mid-save leaves the
//! old or the new table, never a torn one. A second server on the same
//! file is refused through an exclusive lock on `<file>.lock`, held for the
//! life of the process (a lock on nodes.conf itself would not survive the
//! rename). Saves block (two fsyncs), so callers run them on a blocking
//! thread, never on a runtime worker.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};

use crate::engine::cluster::{parse_nodes_conf, Loaded};

/// A locked nodes.conf.
pub struct NodesConf {
    /// Holds the flock.
    _lock: File,
    pub path: String,
}

impl NodesConf {
    /// Lock the file (creating it when missing) and return its parsed content.
    pub fn open(path: &str, now: u64) -> Result<(NodesConf, Option<Loaded>), String> {
        let lock_path = format!("{path}.lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| format!("Can't open the cluster config lock file {lock_path}: {e}"))?;
        if lock.try_lock().is_err() {
            return Err(format!(
                "Sorry, the cluster configuration file {path} is already used by a different Disque node. Please make sure that different nodes use different cluster configuration files."
            ));
        }
        let mut text = String::new();
        match File::open(path) {
            Ok(mut f) => {
                f.read_to_string(&mut text)
                    .map_err(|e| format!("Can't read the cluster config file {path}: {e}"))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("Can't open the cluster config file {path}: {e}")),
        }
        let loaded = parse_nodes_conf(&text, now).map_err(|e| e.to_string())?;
        Ok((
            NodesConf {
                _lock: lock,
                path: path.to_string(),
            },
            loaded,
        ))
    }

    /// Replace the file atomically and durably. On failure the old file
    /// is untouched and the temp file removed (a full disk must not keep a
    /// half-written copy).
    pub fn save(&mut self, text: &str) -> std::io::Result<()> {
        let tmp = format!("{}.tmp-{}", self.path, std::process::id());
        let written = File::create(&tmp).and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let dir = std::path::Path::new(&self.path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        File::open(dir)?.sync_all()
    }
}
