//! Deployment directives (our extensions, docs/DEPLOY.md): `cluster-join`,
//! `cluster-announce-ip`, `cluster-announce-port`,
//! `cluster-announce-bus-port`, `shutdown-drain-timeout`,
//! `worker-threads` and `owner-thread`. Config file
//! and command line only (not in CONFIG GET/SET); CONFIG REWRITE keeps
//! them.

use super::values::{parse_u64, repr};
use super::Config;
use super::DirectiveError;

const NAMES: &[&str] = &[
    "cluster-join",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-bus-port",
    "shutdown-drain-timeout",
    "worker-threads",
    "owner-thread",
];

/// Runtime worker threads when `worker-threads` is not set. One, like
/// Redis's event loop: the node's state has one owner either way, and a
/// second worker only took turns with the first on its lock. Measured on
/// 2 cores (docs/PERFORMANCE.md, run AP): one worker matches two on every
/// single-node line with 10-25 % less CPU per command, and the job cycle
/// runs 11 % faster (39 % with whole jobs spilled).
pub const DEFAULT_WORKER_THREADS: usize = 1;
/// A bound that catches a typo, far above any useful value.
const MAX_WORKER_THREADS: u64 = 256;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeployConfig {
    /// Seeds to meet at start, (host, client port); names are resolved
    /// through DNS on every attempt.
    pub join: Vec<(String, u16)>,
    /// Address other nodes should use for this one (NAT, port mapping).
    pub announce_ip: Option<std::net::IpAddr>,
    /// Client port to announce (0 = the bound port).
    pub announce_port: u16,
    /// Bus port to announce (0 = client port + 10000).
    pub announce_bus_port: u16,
    /// Seconds a SIGTERM waits for queued jobs to move away (0 = no drain).
    pub shutdown_drain_timeout: u64,
    /// Runtime worker threads (0 = `DEFAULT_WORKER_THREADS`). Read once at
    /// start: the runtime is built before anything else.
    pub worker_threads: usize,
    /// `owner-thread yes`: a dedicated thread owns the node and runs every
    /// task in turns; `no` (default): each runtime thread runs its own
    /// tasks under the node's lock (docs/ARCHITECTURE.md, "The shell").
    pub owner_thread: bool,
}

impl DeployConfig {
    pub fn worker_threads(&self) -> usize {
        if self.worker_threads == 0 {
            DEFAULT_WORKER_THREADS
        } else {
            self.worker_threads
        }
    }
}

/// `host:port` (`[v6]:port` for IPv6 literals).
pub fn parse_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|&p| p > 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b':'));
    ok.then(|| (host.to_string(), port))
}

fn port(v: &str, what: &str) -> Result<u16, DirectiveError> {
    parse_u64(v)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| format!("Invalid {what}").into())
}

/// Config-file directive; None when `name` is not one of ours.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Option<Result<(), DirectiveError>> {
    if !NAMES.contains(&name) {
        return None;
    }
    Some(apply(&mut cfg.deploy, name, args))
}

fn apply(d: &mut DeployConfig, name: &str, args: &[String]) -> Result<(), DirectiveError> {
    if name == "cluster-join" {
        // Several seeds per line; an empty list clears the setting.
        let mut seeds = Vec::new();
        for a in args.iter().flat_map(|a| a.split_whitespace()) {
            seeds.push(
                parse_host_port(a)
                    .ok_or_else(|| format!("Invalid cluster-join seed '{a}': use host:port"))?,
            );
        }
        d.join = seeds;
        return Ok(());
    }
    let [v] = args else {
        return Err("Bad directive or wrong number of arguments".into());
    };
    let v = v.as_str();
    match name {
        "cluster-announce-ip" => {
            d.announce_ip = if v.is_empty() {
                None
            } else {
                Some(
                    v.parse()
                        .map_err(|_| "Invalid cluster-announce-ip address")?,
                )
            }
        }
        "cluster-announce-port" => d.announce_port = port(v, "cluster-announce-port")?,
        "cluster-announce-bus-port" => d.announce_bus_port = port(v, "cluster-announce-bus-port")?,
        "owner-thread" => {
            d.owner_thread = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err("argument must be 'yes' or 'no'".into()),
            }
        }
        "worker-threads" => {
            d.worker_threads = parse_u64(v)
                .filter(|n| (1..=MAX_WORKER_THREADS).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("Invalid worker-threads (1 to {MAX_WORKER_THREADS})"))?
        }
        _ => {
            d.shutdown_drain_timeout =
                parse_u64(v).ok_or("Invalid shutdown-drain-timeout (seconds, 0 = off)")?
        }
    }
    Ok(())
}

/// (option, line, differs from default) for CONFIG REWRITE.
pub(crate) fn rewrite_lines(c: &Config) -> Vec<(&'static str, String, bool)> {
    let d = &c.deploy;
    let seeds: Vec<String> = d
        .join
        .iter()
        .map(|(h, p)| {
            if h.contains(':') {
                format!("[{h}]:{p}")
            } else {
                format!("{h}:{p}")
            }
        })
        .collect();
    vec![
        (
            "cluster-join",
            format!("cluster-join {}", seeds.join(" ")),
            !seeds.is_empty(),
        ),
        (
            "cluster-announce-ip",
            format!(
                "cluster-announce-ip {}",
                repr(&d.announce_ip.map(|i| i.to_string()).unwrap_or_default())
            ),
            d.announce_ip.is_some(),
        ),
        (
            "cluster-announce-port",
            format!("cluster-announce-port {}", d.announce_port),
            d.announce_port != 0,
        ),
        (
            "cluster-announce-bus-port",
            format!("cluster-announce-bus-port {}", d.announce_bus_port),
            d.announce_bus_port != 0,
        ),
        (
            "shutdown-drain-timeout",
            format!("shutdown-drain-timeout {}", d.shutdown_drain_timeout),
            d.shutdown_drain_timeout != 0,
        ),
        (
            "worker-threads",
            format!("worker-threads {}", d.worker_threads()),
            d.worker_threads != 0,
        ),
        (
            "owner-thread",
            format!("owner-thread {}", if d.owner_thread { "yes" } else { "no" }),
            d.owner_thread,
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may panic
mod tests {
    use super::*;

    fn cfg(text: &str) -> Result<Config, super::super::ConfigError> {
        super::super::parse_str(text, Config::default())
    }

    #[test]
    fn seeds() {
        assert_eq!(
            parse_host_port("disque-1:7711"),
            Some(("disque-1".into(), 7711))
        );
        assert_eq!(parse_host_port("[::1]:7711"), Some(("::1".into(), 7711)));
        assert_eq!(
            parse_host_port("10.0.0.1:7711"),
            Some(("10.0.0.1".into(), 7711))
        );
        for bad in [
            "disque-1", ":7711", "h:0", "h:x", "h:70000", "a b:1", "h/x:1",
        ] {
            assert_eq!(parse_host_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn directives() {
        let c = cfg("cluster-join a:7711 b.svc:7712\ncluster-announce-ip 10.1.2.3\ncluster-announce-port 30001\ncluster-announce-bus-port 30002\nshutdown-drain-timeout 20\n").unwrap();
        let d = &c.deploy;
        assert_eq!(d.join, vec![("a".into(), 7711), ("b.svc".into(), 7712)]);
        assert_eq!(d.announce_ip, Some("10.1.2.3".parse().unwrap()));
        assert_eq!((d.announce_port, d.announce_bus_port), (30001, 30002));
        assert_eq!(d.shutdown_drain_timeout, 20);
        assert!(cfg("cluster-join nope")
            .unwrap_err()
            .to_string()
            .contains("Invalid cluster-join seed 'nope'"));
        assert!(cfg("cluster-announce-ip host")
            .unwrap_err()
            .to_string()
            .contains("cluster-announce-ip"));
        assert!(cfg("cluster-announce-port 70000").is_err());
        assert!(cfg("shutdown-drain-timeout -1").is_err());
        assert_eq!(
            cfg("").unwrap().deploy.worker_threads(),
            DEFAULT_WORKER_THREADS
        );
        assert_eq!(cfg("worker-threads 1").unwrap().deploy.worker_threads(), 1);
        for bad in [
            "worker-threads 0",
            "worker-threads 257",
            "worker-threads two",
            "worker-threads",
        ] {
            assert!(cfg(bad).is_err(), "{bad}");
        }
    }
}
