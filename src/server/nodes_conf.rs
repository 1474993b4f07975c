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

use crate::engine::cluster::{parse_nodes_conf, Loaded, NodesConfError};

/// Why nodes.conf cannot be used at startup.
#[derive(Debug, thiserror::Error)]
pub enum NodesConfFileError {
    #[error("Can't open the cluster config lock file {path}: {source}")]
    Lock {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Another live process holds the lock.
    #[error(
        "Sorry, the cluster configuration file {path} is already used by a different Disque \
         node. Please make sure that different nodes use different cluster configuration files."
    )]
    InUse { path: String },
    #[error("Can't open the cluster config file {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Can't read the cluster config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The text does not parse (the message names the line).
    #[error("{source}")]
    Parse {
        path: String,
        #[source]
        source: NodesConfError,
    },
}

/// A locked nodes.conf.
pub struct NodesConf {
    /// Holds the flock.
    _lock: File,
    pub path: String,
    /// The generation of the newest table written (`save`).
    written: u64,
}

impl NodesConf {
    /// Lock the file (creating it when missing) and return its parsed content.
    pub fn open(path: &str, now: u64) -> Result<(NodesConf, Option<Loaded>), NodesConfFileError> {
        let lock_path = format!("{path}.lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|source| NodesConfFileError::Lock {
                path: lock_path.clone(),
                source,
            })?;
        if lock.try_lock().is_err() {
            return Err(NodesConfFileError::InUse {
                path: path.to_string(),
            });
        }
        let mut text = String::new();
        match File::open(path) {
            Ok(mut f) => {
                f.read_to_string(&mut text)
                    .map_err(|source| NodesConfFileError::Read {
                        path: path.to_string(),
                        source,
                    })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(NodesConfFileError::Open {
                    path: path.to_string(),
                    source,
                })
            }
        }
        let loaded = parse_nodes_conf(&text, now).map_err(|source| NodesConfFileError::Parse {
            path: path.to_string(),
            source,
        })?;
        Ok((
            NodesConf {
                _lock: lock,
                path: path.to_string(),
                written: 0,
            },
            loaded,
        ))
    }

    /// Replace the file atomically and durably with the table of
    /// `generation` (the order the owner produced the tables in), unless a
    /// newer one is already written: saves run on blocking threads, and a
    /// shutdown's final save can overtake the saver's (a drain that sets
    /// and clears `leaving` within a millisecond then restarted the node
    /// still leaving). On failure the old file is untouched and the temp
    /// file removed (a full disk must not keep a half-written copy).
    pub fn save(&mut self, generation: u64, text: &str) -> std::io::Result<()> {
        if generation <= self.written {
            return Ok(());
        }
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
        File::open(dir)?.sync_all()?;
        self.written = generation;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::NodesConf;

    #[test]
    fn an_older_table_never_replaces_a_newer_one() {
        let dir = crate::support::temp_dir::TempDir::new("nodes-conf");
        let path = dir.join("nodes.conf");
        let path = path.to_str().unwrap();
        let (mut nc, loaded) = NodesConf::open(path, 0).unwrap();
        assert!(loaded.is_none());
        nc.save(2, "newer").unwrap();
        // The save of an earlier table that lost the race to the disk.
        nc.save(1, "older").unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "newer");
        nc.save(3, "newest").unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "newest");
        drop(nc);
    }
}
