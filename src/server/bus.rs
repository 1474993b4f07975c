//! Cluster bus sockets. One outbound link per peer (opened when the engine
//! asks, with a bounded send queue: a peer that cannot keep up loses its
//! link and gets a fresh one, as Disque's lossy bus allows), and inbound
//! connections that are only read, except for the PONG answering a PING.
//! A garbage or oversized frame closes that connection and is logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::Shared;
use crate::cluster::auth;
use crate::cluster::message::{decode, Body, Message};
use crate::engine::gossip::LinkKind;
use crate::job::NodeIdx;

/// Frames queued per outbound link before the link is dropped.
const LINK_QUEUE: usize = 4096;

struct Link {
    gen: u64,
    tx: mpsc::Sender<Bytes>,
}

#[derive(Default)]
pub struct Bus {
    links: Mutex<HashMap<NodeIdx, Link>>,
    gen: AtomicU64,
}

/// A request to open a link, produced by the engine.
pub type ConnectRequest = (NodeIdx, String, u16);

impl Bus {
    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<NodeIdx, Link>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue a frame on the node's outbound link; dropped if there is none.
    pub fn send(&self, to: NodeIdx, frame: Bytes) {
        let mut links = self.links();
        let full = match links.get(&to) {
            Some(l) => l.tx.try_send(frame).is_err(),
            None => false,
        };
        if full {
            // Closing the channel ends the link task, which reports the loss.
            links.remove(&to);
        }
    }

    pub fn disconnect(&self, idx: NodeIdx) {
        self.links().remove(&idx);
    }

    fn register(&self, idx: NodeIdx) -> (u64, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        let gen = self.gen.fetch_add(1, Ordering::Relaxed);
        self.links().insert(idx, Link { gen, tx });
        (gen, rx)
    }

    /// Remove the link if it is still the given generation.
    fn unregister(&self, idx: NodeIdx, gen: u64) -> bool {
        let mut links = self.links();
        if links.get(&idx).is_some_and(|l| l.gen == gen) {
            links.remove(&idx);
            return true;
        }
        false
    }
}

/// Open links the engine asked for.
pub async fn connector(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<ConnectRequest>) {
    while let Some((idx, ip, port)) = rx.recv().await {
        // Every log line about this link names the peer.
        let span =
            tracing::info_span!("bus", dir = "out", node = idx, peer = %format!("{ip}:{port}"));
        tokio::spawn(outbound(shared.clone(), idx, ip, port).instrument(span));
    }
}

async fn outbound(shared: Arc<Shared>, idx: NodeIdx, ip: String, port: u16) {
    let timeout = Duration::from_millis(shared.node_timeout().clamp(100, 5000));
    let host = if ip.is_empty() {
        "127.0.0.1".to_string()
    } else {
        ip
    };
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
        Ok(Ok(s)) => s,
        _ => {
            shared.with(|node, now| node.engine.on_link_down(idx, now));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let ends = Ends::of(&stream);
    let Some(bus_tls) = shared.tls.bus() else {
        return outbound_link(shared, idx, stream, addr, timeout, ends).await;
    };
    // tls-cluster: the name is not checked (see crate::tls), the IP is
    // only what rustls needs to start a session.
    let ip = host
        .parse::<std::net::IpAddr>()
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    let name = rustls::pki_types::ServerName::IpAddress(ip.into());
    match tokio::time::timeout(timeout, bus_tls.connector.connect(name, stream)).await {
        Ok(Ok(tls)) => outbound_link(shared, idx, tls, addr, timeout, ends).await,
        Ok(Err(e)) => {
            tracing::warn!(peer = %addr, error = %e, "Bus TLS handshake with the peer failed.");
            shared.with(|node, now| node.engine.on_link_down(idx, now));
        }
        Err(_) => {
            tracing::warn!(peer = %addr, "Bus TLS handshake with the peer timed out.");
            shared.with(|node, now| node.engine.on_link_down(idx, now));
        }
    }
}

/// Addresses of a bus connection, taken before TLS wraps the socket.
#[derive(Clone)]
struct Ends {
    local_ip: String,
    peer_ip: String,
}

impl Ends {
    fn of(stream: &TcpStream) -> Ends {
        let ip = |a: std::io::Result<std::net::SocketAddr>| {
            a.map(|a| a.ip().to_canonical().to_string())
                .unwrap_or_default()
        };
        Ends {
            local_ip: ip(stream.local_addr()),
            peer_ip: ip(stream.peer_addr()),
        }
    }
}

/// An established outbound connection (plain or TLS): authenticate, then
/// serve the link until it drops.
async fn outbound_link<S: BusStream>(
    shared: Arc<Shared>,
    idx: NodeIdx,
    mut stream: S,
    addr: String,
    timeout: Duration,
    ends: Ends,
) {
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    if !authenticate(&shared, &mut stream, &mut rbuf, Role::Connector, timeout).await {
        tracing::warn!(peer = %addr, "Bus authentication with the peer failed (different cluster-secret?).");
        shared.with(|node, now| node.engine.on_link_down(idx, now));
        return;
    }
    let (gen, frames) = shared.bus.register(idx);
    crate::metrics::shell().link_connected(idx);
    shared.with(|node, now| node.engine.on_link_up(idx, now));
    let r = run_link(
        &shared,
        stream,
        rbuf,
        Some(frames),
        LinkKind::Outbound(idx),
        ends,
    )
    .await;
    if let Err(e) = r {
        tracing::debug!(node = idx, error = %e, "Bus link closed.");
    }
    if shared.bus.unregister(idx, gen) {
        shared.with(|node, now| node.engine.on_link_down(idx, now));
    }
}

/// Accept inbound bus connections.
pub async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut shutdown = shared.shutdown_rx();
    loop {
        let r = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match r {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let span = tracing::info_span!("bus", dir = "in", peer = %addr);
                tokio::spawn(inbound(shared.clone(), stream, addr).instrument(span));
            }
            Err(e) => {
                tracing::warn!(error = %e, "Bus accept failed.");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One accepted bus connection: TLS first with `tls-cluster` (a peer
/// without a certificate from the cluster CA is refused here and logged),
/// then the `cluster-secret` handshake, then frames.
async fn inbound(shared: Arc<Shared>, stream: TcpStream, addr: std::net::SocketAddr) {
    let ends = Ends::of(&stream);
    let Some(bus_tls) = shared.tls.bus() else {
        return inbound_link(shared, stream, addr, ends).await;
    };
    match tokio::time::timeout(AUTH_TIMEOUT, bus_tls.acceptor.accept(stream)).await {
        Ok(Ok(tls)) => inbound_link(shared, tls, addr, ends).await,
        Ok(Err(e)) => {
            tracing::warn!(peer = %addr, error = %e, "Refused a bus connection: TLS handshake failed.");
        }
        Err(_) => {
            tracing::warn!(peer = %addr, "Refused a bus connection: TLS handshake timed out.");
        }
    }
}

async fn inbound_link<S: BusStream>(
    shared: Arc<Shared>,
    mut stream: S,
    addr: std::net::SocketAddr,
    ends: Ends,
) {
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    if !authenticate(
        &shared,
        &mut stream,
        &mut rbuf,
        Role::Acceptor,
        AUTH_TIMEOUT,
    )
    .await
    {
        tracing::warn!(peer = %addr, "Rejected a bus connection that failed authentication.");
        return;
    }
    if let Err(e) = run_link(&shared, stream, rbuf, None, LinkKind::Inbound, ends).await {
        tracing::debug!(peer = %addr, error = %e, "Inbound bus connection closed.");
    }
}

/// A bus socket: TCP, or TLS over TCP with `tls-cluster`.
trait BusStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> BusStream for T {}

/// How long an unauthenticated inbound connection may take to prove itself.
const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, what.to_string())
}

/// Read exactly one frame (bytes after it stay in `rbuf`).
async fn read_frame<S: BusStream>(stream: &mut S, rbuf: &mut BytesMut) -> std::io::Result<Message> {
    loop {
        match decode(rbuf) {
            Ok(Some(m)) => return Ok(m),
            Ok(None) => {}
            Err(e) => return Err(bad(&e.to_string())),
        }
        if stream.read_buf(rbuf).await? == 0 {
            return Err(bad("closed during authentication"));
        }
    }
}

#[derive(Clone, Copy)]
enum Role {
    Connector,
    Acceptor,
}

/// Run the `cluster-secret` handshake for our side of the connection;
/// true when there is no secret or the peer proved it knows it in time.
async fn authenticate<S: BusStream>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    role: Role,
    limit: Duration,
) -> bool {
    let Some(secret) = shared.bus_secret.clone() else {
        return true;
    };
    let handshake = async {
        match role {
            Role::Connector => auth_connector(shared, stream, rbuf, &secret).await,
            Role::Acceptor => auth_acceptor(shared, stream, rbuf, &secret).await,
        }
    };
    matches!(tokio::time::timeout(limit, handshake).await, Ok(Ok(())))
}

fn nonce() -> [u8; 16] {
    rand::random()
}

/// Our side of the handshake on an outbound link (see `cluster::auth`).
async fn auth_connector<S: BusStream>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    secret: &[u8],
) -> std::io::Result<()> {
    let Body::AuthChallenge { nonce: n_a } = read_frame(stream, rbuf).await?.body else {
        return Err(bad("expected an auth challenge"));
    };
    let n_c = nonce();
    let header = shared.with(|node, _| node.engine.header(0));
    let mac = auth::connector_mac(secret, &n_a, &n_c);
    stream
        .write_all(&Message::new(header, Body::Auth { nonce: n_c, mac }).to_bytes())
        .await?;
    stream.flush().await?;
    let Body::Auth { nonce: echoed, mac } = read_frame(stream, rbuf).await?.body else {
        return Err(bad("expected the acceptor's proof"));
    };
    if echoed != n_a || !auth::verify_acceptor(secret, &n_c, &n_a, &mac) {
        return Err(bad("the acceptor does not know the cluster secret"));
    }
    Ok(())
}

/// The acceptor's side: challenge, check the proof, prove ourselves.
async fn auth_acceptor<S: BusStream>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    secret: &[u8],
) -> std::io::Result<()> {
    let n_a = nonce();
    let header = shared.with(|node, _| node.engine.header(0));
    stream
        .write_all(&Message::new(header, Body::AuthChallenge { nonce: n_a }).to_bytes())
        .await?;
    stream.flush().await?;
    let Body::Auth { nonce: n_c, mac } = read_frame(stream, rbuf).await?.body else {
        return Err(bad("expected an auth answer"));
    };
    if !auth::verify_connector(secret, &n_a, &n_c, &mac) {
        return Err(bad("wrong cluster secret"));
    }
    let mac = auth::acceptor_mac(secret, &n_c, &n_a);
    stream
        .write_all(&Message::new(header, Body::Auth { nonce: n_a, mac }).to_bytes())
        .await?;
    stream.flush().await?;
    Ok(())
}

/// Bytes gathered into one write when frames queue up on a link.
const WRITE_BATCH: usize = 256 * 1024;

/// Read frames (and, for outbound links, write queued ones) until either side ends.
/// Everything decoded from one read is handled under one lock, and queued
/// frames go out in one write: the per-frame lock and syscall dominated
/// replication cost before.
async fn run_link<S: BusStream>(
    shared: &Shared,
    mut stream: S,
    mut rbuf: BytesMut,
    mut frames: Option<mpsc::Receiver<Bytes>>,
    kind: LinkKind,
    ends: Ends,
) -> std::io::Result<()> {
    let Ends { local_ip, peer_ip } = ends;
    let mut wbuf = BytesMut::new();
    let mut shutdown = shared.shutdown_rx();
    let mut batch: Vec<Message> = Vec::new();
    loop {
        let mut bad = None;
        loop {
            match decode(&mut rbuf) {
                Ok(Some(msg)) => {
                    crate::metrics::shell().bus_received(msg.body.msg_type());
                    batch.push(msg);
                }
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        if !batch.is_empty() {
            let msgs = std::mem::take(&mut batch);
            shared.with(|node, now| {
                for msg in msgs {
                    if let Some(r) = node
                        .engine
                        .on_bus_message(kind, &local_ip, &peer_ip, msg, now)
                    {
                        crate::metrics::shell().bus_sent(r.body.msg_type());
                        r.encode(&mut wbuf);
                    }
                }
            });
            if !wbuf.is_empty() {
                stream.write_all(&wbuf).await?;
                stream.flush().await?;
                wbuf.clear();
            }
        }
        if let Some(e) = bad {
            tracing::warn!(peer = %peer_ip, error = %e, "Dropping bus connection after a bad frame.");
            return Ok(());
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        let next_frame = async {
            match frames.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stream.read_buf(&mut rbuf) => {
                if r? == 0 {
                    return Ok(());
                }
            }
            f = next_frame => match f {
                Some(frame) => {
                    wbuf.extend_from_slice(&frame);
                    if let Some(rx) = frames.as_mut() {
                        while wbuf.len() < WRITE_BATCH {
                            match rx.try_recv() {
                                Ok(f) => wbuf.extend_from_slice(&f),
                                Err(_) => break,
                            }
                        }
                    }
                    stream.write_all(&wbuf).await?;
                    stream.flush().await?;
                    wbuf.clear();
                    if wbuf.capacity() > 4 * WRITE_BATCH {
                        wbuf = BytesMut::new();
                    }
                }
                None => return Ok(()),
            },
            _ = shutdown.changed() => return Ok(()),
        }
    }
}
