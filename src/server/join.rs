//! Meeting nodes by name: `cluster-join host:port ...` keeps meeting its
//! seeds until the node has a live peer, resolving the names again on every
//! attempt (a restarted seed may have a new address), and `CLUSTER MEET`
//! with a host name resolves it before meeting. The engine only ever sees
//! numeric addresses; resolution is shell I/O.
//!
//! Names go through hickory's resolver (/etc/hosts, then the servers in
//! /etc/resolv.conf), which works in a static binary in a `FROM scratch`
//! image, where glibc's getaddrinfo cannot load its NSS modules. The
//! system resolver is the fallback for names only it knows.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::Shared;
use crate::engine::cluster::{FLAG_FAIL, FLAG_HANDSHAKE, FLAG_PFAIL};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// `CLUSTER MEET <host> <port>` waiting for its name to resolve.
pub type MeetRequest = (String, u16, oneshot::Sender<Reply>);

/// How long one name resolution may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Retry back-off of `cluster-join`: first and largest pause.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Why a name did not resolve: the in-process resolver's answer (the
/// system's lookup is only the fallback, and its error adds nothing).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{0}")]
    Dns(#[from] hickory_resolver::net::NetError),
    #[error("no address")]
    NoAddress,
    #[error("timed out")]
    Timeout,
}

/// The addresses of `host` (a literal IP is returned as is).
pub async fn resolve(host: &str) -> Result<Vec<IpAddr>, ResolveError> {
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
        return Ok(vec![ip]);
    }
    let dns = async {
        let resolver = hickory_resolver::TokioResolver::builder_tokio()?.build()?;
        let found = resolver.lookup_ip(host).await?;
        Ok::<Vec<IpAddr>, ResolveError>(found.iter().collect())
    };
    let first = match tokio::time::timeout(RESOLVE_TIMEOUT, dns).await {
        Ok(Ok(ips)) if !ips.is_empty() => return Ok(ips),
        Ok(Ok(_)) => ResolveError::NoAddress,
        Ok(Err(e)) => e,
        Err(_) => ResolveError::Timeout,
    };
    let system = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, 0))).await;
    match system {
        Ok(Ok(addrs)) => {
            let ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            if ips.is_empty() {
                Err(first)
            } else {
                Ok(ips)
            }
        }
        _ => Err(first),
    }
}

/// Serve `CLUSTER MEET <host> <port>` requests: resolve, meet the first
/// address, answer `+OK` (or the invalid-address error if it does not
/// resolve).
pub async fn meet_resolver(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<MeetRequest>) {
    while let Some((host, port, reply)) = rx.recv().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let r = match resolve(&host).await {
                Ok(ips) => {
                    let ip = prefer_v4(&ips);
                    tracing::info!(host = %host, ip = %ip, port, "CLUSTER MEET resolved.");
                    shared
                        .call(move |node, now| node.engine.cluster_meet(ip.to_string(), port, now))
                        .await;
                    Reply::ok()
                }
                Err(e) => {
                    tracing::info!(host = %host, error = %e, "CLUSTER MEET: cannot resolve.");
                    WireError::InvalidAddress(format!("{host}:{port}")).reply()
                }
            };
            let _ = reply.send(r);
        });
    }
}

fn prefer_v4(ips: &[IpAddr]) -> IpAddr {
    ips.iter().copied().find(IpAddr::is_ipv4).unwrap_or(ips[0])
}

/// True when some other node is a full member we can currently reach.
async fn joined(shared: &Shared) -> bool {
    shared
        .call(|node, _| {
            node.engine.cluster().nodes.iter().skip(1).any(|n| {
                n.link && n.pong_received > 0 && !n.has(FLAG_HANDSHAKE | FLAG_PFAIL | FLAG_FAIL)
            })
        })
        .await
}

/// `cluster-join`: meet every seed (the first IPv4 address of each name)
/// until the node has a live peer, backing off between attempts. Meeting
/// a seed that is already known refreshes its address, and meeting
/// oneself is dropped by the handshake, so listing every node, this one
/// included, on every node is fine.
pub async fn join(shared: Arc<Shared>, seeds: Vec<(String, u16)>) {
    let mut shutdown = shared.shutdown_rx();
    let mut pause = FIRST_RETRY;
    let started = std::time::Instant::now();
    let mut attempts = 0u32;
    loop {
        if joined(&shared).await {
            tracing::info!(
                attempts,
                secs = format!("{:.3}", started.elapsed().as_secs_f64()),
                "cluster-join: joined the cluster."
            );
            return;
        }
        attempts += 1;
        for (host, port) in &seeds {
            match resolve(host).await {
                // One address per seed: meeting a node under two addresses
                // would make its entry flip between them.
                Ok(ips) => {
                    let ip = prefer_v4(&ips);
                    let port = *port;
                    shared
                        .call(move |node, now| node.engine.cluster_meet(ip.to_string(), port, now))
                        .await;
                }
                Err(e) => {
                    tracing::debug!(host = %host, error = %e, "cluster-join: cannot resolve the seed yet.");
                }
            }
        }
        // Poll for success during the pause rather than sleeping through it.
        let until = tokio::time::Instant::now() + pause;
        while tokio::time::Instant::now() < until {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = shutdown.changed() => return,
            }
            if joined(&shared).await {
                break;
            }
        }
        pause = (pause * 2).min(MAX_RETRY);
    }
}
