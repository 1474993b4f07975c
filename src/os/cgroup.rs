//! The container's memory limit, read from the cgroup filesystem (v2
//! `memory.max`, v1 `memory.limit_in_bytes`), so that a node started
//! without an explicit `maxmemory` sizes itself to its container
//! (docs/DEPLOY.md). Paths are taken relative to a root directory so the
//! parsing is tested on fixture trees.

use std::path::{Path, PathBuf};

/// Share of the cgroup limit used as `maxmemory` when it is not set: the
/// rest is left for allocator overhead, buffers and the AOF rewrite.
pub const LIMIT_PERCENT: u64 = 80;

/// v1 reports "no limit" as a huge page-aligned number (PAGE_COUNTER_MAX
/// pages); anything this large is no limit at all.
const UNLIMITED_FROM: u64 = 1 << 60;

/// A memory limit found in the cgroup tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    /// The file it was read from (for the log line).
    pub file: PathBuf,
}

/// The memory limit of this process's cgroup under `root` ("/" normally).
/// v2 is tried first, then v1; `None` when there is no cgroup or no limit.
pub fn memory_limit(root: &Path) -> Option<Limit> {
    let own = std::fs::read_to_string(root.join("proc/self/cgroup")).unwrap_or_default();
    let (v2_path, v1_path) = own_paths(&own);
    let base = root.join("sys/fs/cgroup");
    // A limit may be set on any ancestor (a Kubernetes pod, a systemd
    // slice): the smallest one on the way up applies. Inside a container
    // with its own cgroup namespace the path is "/" and the limit sits at
    // the top of the mount.
    smallest(&base, v2_path.as_deref(), "memory.max").or_else(|| {
        smallest(
            &base.join("memory"),
            v1_path.as_deref(),
            "memory.limit_in_bytes",
        )
    })
}

fn smallest(base: &Path, own: Option<&str>, file: &str) -> Option<Limit> {
    let mut dir = join_rel(base, own.unwrap_or("/"));
    let mut best: Option<Limit> = None;
    loop {
        let f = dir.join(file);
        if let Some(bytes) = read_limit(&f) {
            if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                best = Some(Limit { bytes, file: f });
            }
        }
        if dir == base || !dir.pop() {
            return best;
        }
    }
}

/// Without an explicit `maxmemory`, take [`LIMIT_PERCENT`] of the cgroup
/// limit (when there is one) and say so in the log. The root is "/" unless
/// the `DISQUE_CGROUP_ROOT` environment variable points at a fixture tree
/// (used by the integration tests; docs/COMPATIBILITY.md).
pub fn size_maxmemory(cfg: &mut crate::config::Config) {
    if cfg.maxmemory_set {
        return;
    }
    let root =
        std::env::var_os("DISQUE_CGROUP_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    match memory_limit(&root) {
        Some(l) => {
            cfg.maxmemory = derived_maxmemory(l.bytes);
            tracing::info!(
                cgroup_limit = l.bytes,
                file = %l.file.display(),
                maxmemory = cfg.maxmemory,
                "maxmemory not set: using {LIMIT_PERCENT}% of the cgroup memory limit."
            );
        }
        None => tracing::info!(
            maxmemory = cfg.maxmemory,
            "maxmemory not set and no cgroup memory limit: using the default."
        ),
    }
}

/// `maxmemory` derived from a cgroup limit.
pub fn derived_maxmemory(limit: u64) -> u64 {
    (limit / 100).saturating_mul(LIMIT_PERCENT).max(1)
}

/// The v2 (`0::<path>`) and v1 memory-controller (`N:...memory...:<path>`)
/// paths of this process in /proc/self/cgroup.
fn own_paths(text: &str) -> (Option<String>, Option<String>) {
    let mut v2 = None;
    let mut v1 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrls.split(',').any(|c| c == "memory") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

fn join_rel(base: &Path, p: &str) -> PathBuf {
    // Never let a ".." from the file walk out of the cgroup mount.
    let clean: PathBuf = Path::new(p)
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    base.join(clean)
}

/// A limit file's value: a byte count, or `max` / a huge v1 value (no limit).
fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let v = text.trim();
    if v == "max" {
        return None;
    }
    v.parse::<u64>()
        .ok()
        .filter(|&b| b > 0 && b < UNLIMITED_FROM)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may panic
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cgroup")
            .join(name)
    }

    #[test]
    fn v2_container_namespace() {
        let l = memory_limit(&fixture("v2-container")).unwrap();
        assert_eq!(l.bytes, 268_435_456);
        assert!(l.file.ends_with("sys/fs/cgroup/memory.max"), "{:?}", l.file);
    }

    #[test]
    fn v2_nested_path_wins_over_the_mount_top() {
        let l = memory_limit(&fixture("v2-host")).unwrap();
        assert_eq!(l.bytes, 536_870_912);
        assert!(l.file.ends_with("system.slice/disque.service/memory.max"));
    }

    #[test]
    fn v2_limit_on_an_ancestor_applies() {
        let l = memory_limit(&fixture("v2-pod")).unwrap();
        assert_eq!(l.bytes, 1_073_741_824);
        assert!(l.file.ends_with("kubepods/pod1/memory.max"), "{:?}", l.file);
    }

    #[test]
    fn v2_max_means_no_limit() {
        assert_eq!(memory_limit(&fixture("v2-unlimited")), None);
    }

    #[test]
    fn v1_limit_and_unlimited() {
        let l = memory_limit(&fixture("v1-docker")).unwrap();
        assert_eq!(l.bytes, 134_217_728);
        assert!(l.file.ends_with("memory.limit_in_bytes"));
        assert_eq!(memory_limit(&fixture("v1-unlimited")), None);
    }

    #[test]
    fn no_cgroup_at_all() {
        assert_eq!(memory_limit(&fixture("none")), None);
    }

    #[test]
    fn eighty_percent() {
        assert_eq!(derived_maxmemory(1000), 800);
        assert_eq!(derived_maxmemory(268_435_456), 214_748_320);
        assert_eq!(derived_maxmemory(0), 1);
    }

    #[test]
    fn own_paths_parse_both_versions() {
        let (v2, v1) = own_paths("12:memory:/docker/abc\n11:cpu,cpuacct:/x\n0::/user.slice\n");
        assert_eq!(v2.as_deref(), Some("/user.slice"));
        assert_eq!(v1.as_deref(), Some("/docker/abc"));
        assert_eq!(
            join_rel(Path::new("/b"), "/../../etc"),
            PathBuf::from("/b/etc")
        );
    }
}
