//! Binding the client port (and reserving the bus port beside it) and the
//! accept loop with its maxclients check and accept-error backoff.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::Shared;
use crate::errors::WireError;

/// Highest client port whose bus port (port + 10000) still fits.
pub const MAX_CLIENT_PORT: u16 = 55535;
pub const BUS_PORT_OFFSET: u16 = 10000;

pub struct Bound {
    pub clients: Vec<TcpListener>,
    pub bus: Vec<TcpListener>,
    pub port: u16,
}

fn bind_addrs(bind: &[String], port: u16) -> Vec<SocketAddr> {
    if bind.is_empty() {
        return vec![
            SocketAddr::from(([0, 0, 0, 0], port)),
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)),
        ];
    }
    bind.iter()
        .filter_map(|b| b.parse::<std::net::IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, port))
        .collect()
}

fn std_bind(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    if addr.is_ipv6() {
        // Let the IPv4 wildcard own IPv4 traffic.
        let _ = socket2::SockRef::from(&sock).set_only_v6(true);
    }
    sock.bind(addr)?;
    let l = sock.listen(backlog)?;
    l.into_std()
}

/// `tcp-keepalive <secs>` on an accepted client socket, as Redis sets it:
/// first probe after `secs` idle, then every `secs / 3`, 3 probes. 0 = off.
fn set_keepalive(stream: &tokio::net::TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let idle = Duration::from_secs(secs);
    let ka = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&ka) {
        tracing::debug!(error = %e, "Could not set TCP keepalive on a client socket.");
    }
}

pub(super) fn bind_all(
    bind: &[String],
    port: u16,
    backlog: u32,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let addrs = bind_addrs(bind, port);
    let mut out = Vec::new();
    let mut last_err = None;
    for a in addrs {
        match std_bind(a, backlog) {
            Ok(l) => out.push(l),
            // A host without IPv6 still serves IPv4 on the wildcard.
            Err(e) if bind.is_empty() && a.is_ipv6() => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(last_err.unwrap_or_else(|| std::io::Error::other("no bind address")));
    }
    Ok(out)
}

/// Bind the client and bus ports. Port 0 picks a free pair.
pub fn bind(bind: &[String], port: u16, backlog: u32) -> std::io::Result<Bound> {
    if port > MAX_CLIENT_PORT {
        return Err(std::io::Error::other(format!(
            "port {port} too high: the cluster bus port (port + {BUS_PORT_OFFSET}) must fit"
        )));
    }
    let attempts = if port == 0 { 200 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        let clients = match bind_all(bind, port, backlog) {
            Ok(c) => c,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        let actual = clients[0].local_addr()?.port();
        if actual > MAX_CLIENT_PORT {
            continue;
        }
        let clients = if port == 0 && clients.len() > 1 {
            // Other addresses must use the same port as the first.
            drop(clients);
            match bind_all(bind, actual, backlog) {
                Ok(c) => c,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            }
        } else {
            clients
        };
        match bind_all(bind, actual + BUS_PORT_OFFSET, backlog) {
            Ok(bus) => {
                let to_tokio =
                    |v: Vec<std::net::TcpListener>| -> std::io::Result<Vec<TcpListener>> {
                        v.into_iter()
                            .map(|l| {
                                l.set_nonblocking(true)?;
                                TcpListener::from_std(l)
                            })
                            .collect()
                    };
                return Ok(Bound {
                    clients: to_tokio(clients)?,
                    bus: to_tokio(bus)?,
                    port: actual,
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free port pair found")))
}

/// Why a new client is turned away, if it is.
#[derive(Clone, Copy)]
pub(crate) enum Refusal {
    /// maxclients reached.
    Full,
    /// Protected mode and a non-loopback peer.
    Protected,
}

/// Every client listener of the node.
pub struct ClientListeners {
    /// The port that owns the bus port (port + 10000): the plain port, or
    /// the TLS port when plain text is disabled.
    pub pair: Bound,
    /// Whether `pair` serves plain text.
    pub plain: bool,
    /// A TLS port beside the plain one.
    pub tls: Vec<TcpListener>,
    /// The TLS port bound, if any.
    pub tls_port: Option<u16>,
}

/// A listening socket the configuration asks for cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("tls-only yes needs a tls-port")]
    TlsOnlyNoPort,
    #[error("Could not bind port {port}: {source}")]
    Plain {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("Could not bind TLS port {port}: {source}")]
    Tls {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("Opening Unix socket {path}: {source}")]
    Unix {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A bound socket the runtime would not take (its text is the OS error's).
    #[error("{source}")]
    Register {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP endpoint (`http-port`).
    #[error("Could not bind the HTTP port {port}: {source}")]
    Http {
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

/// Bind what the configuration asks for: `port` (plain), `tls-port`, and
/// the bus beside the first. TLS only (`tls-only yes`, or Redis's `port 0`
/// with a fixed `tls-port`) puts the bus beside the TLS port, as Redis does.
pub fn bind_clients(c: &crate::config::Config) -> Result<ClientListeners, BindError> {
    let t = &c.tls;
    if t.plain_disabled(c.port) {
        let Some(tls_port) = t.port else {
            return Err(BindError::TlsOnlyNoPort);
        };
        let pair = bind(&c.bind, tls_port, c.tcp_backlog).map_err(|source| BindError::Tls {
            port: tls_port,
            source,
        })?;
        let tls_port = Some(pair.port);
        return Ok(ClientListeners {
            pair,
            plain: false,
            tls: Vec::new(),
            tls_port,
        });
    }
    let pair = bind(&c.bind, c.port, c.tcp_backlog).map_err(|source| BindError::Plain {
        port: c.port,
        source,
    })?;
    let (tls, tls_port) = match t.port {
        Some(p) => {
            let (l, actual) = bind_single(&c.bind, p, c.tcp_backlog)
                .map_err(|source| BindError::Tls { port: p, source })?;
            (l, Some(actual))
        }
        None => (Vec::new(), None),
    };
    Ok(ClientListeners {
        pair,
        plain: true,
        tls,
        tls_port,
    })
}

/// Bind one port on every bind address (0 = a free port, the same on all).
fn bind_single(
    bind: &[String],
    port: u16,
    backlog: u32,
) -> std::io::Result<(Vec<TcpListener>, u16)> {
    let mut ls = bind_all(bind, port, backlog)?;
    let actual = ls[0].local_addr()?.port();
    if port == 0 && ls.len() > 1 {
        drop(ls);
        ls = bind_all(bind, actual, backlog)?;
    }
    let ls = ls
        .into_iter()
        .map(|l| {
            l.set_nonblocking(true)?;
            TcpListener::from_std(l)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok((ls, actual))
}

/// maxclients and protected mode (`peer` is None for the Unix socket).
pub(crate) async fn admit(shared: &Shared, peer: Option<&SocketAddr>) -> Result<(), Refusal> {
    let peer = peer.copied();
    shared
        .call(move |node, _| {
            let refusal = if node.clients.len() as u64 >= node.config.maxclients {
                Some(Refusal::Full)
            } else if peer.is_some_and(|p| super::access::protected_mode_denies(&node.config, &p)) {
                Some(Refusal::Protected)
            } else {
                None
            };
            match refusal {
                Some(r) => {
                    node.stats.rejected_connections += 1;
                    Err(r)
                }
                None => Ok(()),
            }
        })
        .await
}

/// Log a maxclients refusal, one line a second at most: a connection
/// storm must not flood the log.
fn log_maxclients(peer: &str) {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = crate::support::clock::unix_ms();
    let last = LAST.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 1000
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(peer = %peer, "Refused a client: max number of clients reached (maxclients).");
    }
}

/// Tell a refused client why, then close.
pub(crate) async fn reject<S: AsyncWrite + Unpin>(mut stream: S, why: Refusal, peer: String) {
    let text: Vec<u8> = match why {
        Refusal::Full => {
            log_maxclients(&peer);
            WireError::MaxClients.line()
        }
        Refusal::Protected => {
            tracing::warn!(peer = %peer, "Refused a non-loopback client: protected mode.");
            WireError::ProtectedMode.line()
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        stream.write_all(&text).await?;
        stream.flush().await
    })
    .await;
}

/// Accept clients; with `tls` every connection starts with a TLS handshake.
pub async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, tls: bool) {
    let mut backoff = 1;
    let mut shutdown = shared.shutdown_rx();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        let (stream, addr) = match accepted {
            Ok(x) => {
                backoff = 1;
                x
            }
            Err(e) => {
                tracing::warn!(error = %e, "Accept failed.");
                tokio::time::sleep(Duration::from_millis(backoff)).await;
                backoff = (backoff * 2).min(1000);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        set_keepalive(&stream, shared.tcp_keepalive.load(Ordering::Relaxed));
        if tls {
            tokio::spawn(tls_client(shared.clone(), stream, addr));
            continue;
        }
        if let Err(why) = admit(&shared, Some(&addr)).await {
            tokio::spawn(reject(stream, why, addr.to_string()));
            continue;
        }
        tokio::spawn(super::connection::handle(
            shared.clone(),
            stream,
            addr.to_string(),
        ));
    }
}

/// Listen on `unixsocket` with `unixsocketperm` (octal, 0 = umask default).
pub fn bind_unix(path: &str, perm: u32) -> std::io::Result<tokio::net::UnixListener> {
    // A stale socket file from a previous run would make bind fail.
    let _ = std::fs::remove_file(path);
    let l = tokio::net::UnixListener::bind(path)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(l)
}

pub async fn accept_unix_loop(
    shared: Arc<Shared>,
    listener: tokio::net::UnixListener,
    path: String,
) {
    let mut shutdown = shared.shutdown_rx();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "Unix socket accept failed.");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(why) = admit(&shared, None).await {
            tokio::spawn(reject(stream, why, path.clone()));
            continue;
        }
        tokio::spawn(super::connection::handle(
            shared.clone(),
            stream,
            format!("{path}:0"),
        ));
    }
}

/// How long a TLS client may take to complete its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshake, then the same admission checks and connection code as plain
/// text (a refusal is sent over TLS, so the client can read it). A failed
/// handshake (plain text on the TLS port, a missing or untrusted client
/// certificate) only closes this connection.
async fn tls_client(shared: Arc<Shared>, stream: tokio::net::TcpStream, addr: SocketAddr) {
    let Some(acceptor) = shared.tls.client_acceptor() else {
        return;
    };
    let mut stream =
        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(peer = %addr, error = %e, "TLS handshake with a client failed.");
                return;
            }
            Err(_) => {
                tracing::warn!(peer = %addr, "TLS handshake with a client timed out.");
                return;
            }
        };
    if let Err(why) = admit(&shared, Some(&addr)).await {
        reject(&mut stream, why, addr.to_string()).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
        return;
    }
    super::connection::handle(shared, stream, addr.to_string()).await;
}
