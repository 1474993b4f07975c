//! nodes.conf (WIRE 8.7): the node table persisted so a restarted node
//! keeps its ID and finds its peers again. Saves are atomic (temp file,
//! fsync, rename, fsync of the directory), so a crash mid-save leaves the
//! old or the new table, never a torn one. A second server on the same
//! file is refused through an flock on `<file>.lock`, held for the life of
//! the process (a lock on nodes.conf itself would not survive the rename).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use crate::engine::cluster::{
    NodeInfo, FLAG_FAIL, FLAG_HANDSHAKE, FLAG_LEAVING, FLAG_MYSELF, FLAG_NOADDR, FLAG_PFAIL,
};

/// A locked nodes.conf.
pub struct NodesConf {
    /// Holds the flock.
    _lock: File,
    pub path: String,
}

#[derive(Debug)]
pub struct Loaded {
    /// Index 0 is this node.
    pub nodes: Vec<NodeInfo>,
}

fn parse_flags(s: &str) -> Result<u16, String> {
    let mut f = 0;
    for w in s.split(',') {
        f |= match w {
            "noflags" => 0,
            "myself" => FLAG_MYSELF,
            "fail?" => FLAG_PFAIL,
            "fail" => FLAG_FAIL,
            "handshake" => FLAG_HANDSHAKE,
            "noaddr" => FLAG_NOADDR,
            "leaving" => FLAG_LEAVING,
            other => return Err(format!("unknown node flag '{other}'")),
        };
    }
    Ok(f)
}

/// Parse nodes.conf text. Ok(None) when there is no node in it.
pub fn parse(text: &str, now: u64) -> Result<Option<Loaded>, String> {
    let mut myself: Option<NodeInfo> = None;
    let mut others = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("vars") {
            continue;
        }
        let f: Vec<&str> = line.split(' ').collect();
        let bad = |m: &str| format!("nodes.conf line {}: {m}: '{line}'", i + 1);
        if f.len() != 6 {
            return Err(bad("expected 6 fields"));
        }
        let idb = f[0].as_bytes();
        if idb.len() != 40 {
            return Err(bad("node ID must be 40 characters"));
        }
        let mut id = [0u8; 40];
        id.copy_from_slice(idb);
        let (ip, port) = match f[1].rsplit_once(':') {
            Some((ip, p)) => (
                ip.to_string(),
                p.parse::<u16>().map_err(|_| bad("bad port"))?,
            ),
            None => return Err(bad("bad address")),
        };
        let flags = parse_flags(f[2]).map_err(|e| bad(&e))?;
        let mut n = NodeInfo::new(id, ip, port, flags & !FLAG_HANDSHAKE, now);
        n.ping_sent = if f[3] != "0" { now } else { 0 };
        n.pong_received = if f[4] != "0" { now } else { 0 };
        if flags & FLAG_MYSELF != 0 {
            if myself.is_some() {
                return Err(bad("more than one 'myself' line"));
            }
            n.ping_sent = 0;
            n.pong_received = 0;
            myself = Some(n);
        } else {
            others.push(n);
        }
    }
    match myself {
        None if others.is_empty() => Ok(None),
        None => Err("nodes.conf has no 'myself' line".to_string()),
        Some(me) => {
            let mut nodes = vec![me];
            nodes.extend(others);
            Ok(Some(Loaded { nodes }))
        }
    }
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
        // SAFETY: flock on a valid, owned descriptor.
        let r = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
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
        let loaded = parse(&text, now)?;
        Ok((
            NodesConf {
                _lock: lock,
                path: path.to_string(),
            },
            loaded,
        ))
    }

    /// Replace the file atomically and durably.
    pub fn save(&mut self, text: &str) -> std::io::Result<()> {
        let tmp = format!("{}.tmp-{}", self.path, std::process::id());
        {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        let dir = std::path::Path::new(&self.path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        File::open(dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_wire_example() {
        let text = "8bcfb920b68a04e6d1c7e6aab5ee4878e4d743f4 127.0.0.1:7791 noflags 0 1795953481022 connected\n\
67d78e936368c0fc75d22f83d328e5c163e896b1 127.0.0.1:7792 myself 0 0 connected\n\
ad249f8c9b2240cd45f72fd233bd3d5a42a6709d 127.0.0.1:7790 leaving,fail? 0 1795953480721 connected\n";
        let l = parse(text, 5).unwrap().unwrap();
        assert_eq!(&l.nodes[0].id[..8], b"67d78e93");
        assert_eq!(l.nodes.len(), 3);
        assert_eq!(l.nodes[2].flags, FLAG_LEAVING | FLAG_PFAIL);
        assert_eq!(l.nodes[1].pong_received, 5);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(parse("abc 1:2 myself 0 0 connected\n", 0).is_err());
        assert!(parse(
            "67d78e936368c0fc75d22f83d328e5c163e896b1 1:2 bogus 0 0 connected\n",
            0
        )
        .is_err());
        assert!(parse(
            "67d78e936368c0fc75d22f83d328e5c163e896b1 1:2 noflags 0 0 connected\n",
            0
        )
        .is_err());
        assert!(parse("\n\nvars x\n", 0).unwrap().is_none());
    }
}
