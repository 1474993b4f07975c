//! Cluster bus sockets. One outbound link per peer (opened when the engine
//! asks, with a bounded send queue: a peer that cannot keep up loses its
//! link and gets a fresh one, as Disque's lossy bus allows), and inbound
//! connections that are only read, except for the PONG answering a PING.
//! A garbage or oversized frame closes that connection and is logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tracing::Instrument;

use super::Shared;
use crate::domain::job::NodeIdx;
use crate::engine::gossip::LinkKind;
use crate::protocol::bus::auth;
use crate::protocol::bus::message::{decode, Body, BusError, Message, MAGIC, PREFIX_LEN};

/// Bytes queued on an outbound link before the link is dropped. A byte
/// budget, not a frame count: one owner turn can queue thousands of small
/// frames for a peer (an ACKJOB of n IDs is n SETACKs to every holder),
/// and a budget in frames that such bursts exceed dropped healthy links
/// under load, losing what was queued with them, YOURJOBS included, whose
/// jobs then wait for their retry timer (docs/RELIABILITY.md, Batches).
/// Bytes also bound what a stuck peer costs when frames carry big bodies.
const LINK_QUEUE_BYTES: usize = 32 * 1024 * 1024;

/// One outbound link's send side: frames are encoded straight into `out`
/// (no allocation or channel hop per frame) and the link task is woken only
/// when `out` goes from empty to non-empty, so frames queued while it is
/// writing or waiting for its turn leave together in one write.
struct Link {
    gen: u64,
    out: BytesMut,
    /// Set when the peer could not keep up: the task ends and reports the
    /// loss; frames sent meanwhile are dropped (the bus is lossy).
    overflowed: bool,
    wake: Arc<Notify>,
}

#[derive(Default)]
pub struct Bus {
    links: Mutex<HashMap<NodeIdx, Link>>,
    gen: AtomicU64,
}

/// A request to open a link, produced by the engine.
pub type ConnectRequest = (NodeIdx, String, u16);

/// What a link task finds when it comes to collect its frames.
#[derive(Debug, PartialEq, Eq)]
enum Take {
    /// Frames (possibly none) moved into the caller's buffer.
    Frames,
    /// The link overflowed: end the task and report the link down.
    Overflowed,
    /// The engine closed the link, or a newer one replaced it: just end.
    Gone,
}

impl Bus {
    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<NodeIdx, Link>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue an encoded frame on the node's outbound link; dropped if there is none.
    pub fn send(&self, to: NodeIdx, frame: &[u8]) {
        Self::queue(&mut self.links(), to, |out| out.extend_from_slice(frame));
    }

    /// Encode messages into their links' queues, taking the link table once.
    pub fn send_all<'a>(&self, msgs: impl IntoIterator<Item = (NodeIdx, &'a Message)>) {
        let mut links = self.links();
        for (to, msg) in msgs {
            Self::queue(&mut links, to, |out| msg.encode(out));
        }
    }

    fn queue(links: &mut HashMap<NodeIdx, Link>, to: NodeIdx, encode: impl FnOnce(&mut BytesMut)) {
        let Some(l) = links.get_mut(&to) else { return };
        if l.overflowed {
            return;
        }
        if l.out.len() >= LINK_QUEUE_BYTES {
            l.overflowed = true;
            l.out = BytesMut::new();
            l.wake.notify_one();
            return;
        }
        let was_empty = l.out.is_empty();
        encode(&mut l.out);
        if was_empty {
            l.wake.notify_one();
        }
    }

    pub fn disconnect(&self, idx: NodeIdx) {
        if let Some(l) = self.links().remove(&idx) {
            l.wake.notify_one();
        }
    }

    fn register(&self, idx: NodeIdx) -> (u64, Arc<Notify>) {
        let wake = Arc::new(Notify::new());
        let gen = self.gen.fetch_add(1, Ordering::Relaxed);
        let link = Link {
            gen,
            out: BytesMut::new(),
            overflowed: false,
            wake: wake.clone(),
        };
        if let Some(old) = self.links().insert(idx, link) {
            old.wake.notify_one();
        }
        (gen, wake)
    }

    /// Move the link's queued frames into `buf` (empty on entry), handing
    /// the link `buf`'s allocation in exchange so neither side reallocates.
    fn take(&self, idx: NodeIdx, gen: u64, buf: &mut BytesMut) -> Take {
        let mut links = self.links();
        match links.get_mut(&idx) {
            Some(l) if l.gen == gen => {
                if l.overflowed {
                    return Take::Overflowed;
                }
                std::mem::swap(&mut l.out, buf);
                Take::Frames
            }
            _ => Take::Gone,
        }
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
            shared
                .call(move |node, now| node.engine.on_link_down(idx, now))
                .await;
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
            shared
                .call(move |node, now| node.engine.on_link_down(idx, now))
                .await;
        }
        Err(_) => {
            tracing::warn!(peer = %addr, "Bus TLS handshake with the peer timed out.");
            shared
                .call(move |node, now| node.engine.on_link_down(idx, now))
                .await;
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
        shared
            .call(move |node, now| node.engine.on_link_down(idx, now))
            .await;
        return;
    }
    let (gen, wake) = shared.bus.register(idx);
    crate::observe::metrics::shell().link_connected(idx);
    shared
        .call(move |node, now| node.engine.on_link_up(idx, now))
        .await;
    let r = run_link(
        &shared,
        stream,
        rbuf,
        Some(Outbox { idx, gen, wake }),
        LinkKind::Outbound(idx),
        ends,
    )
    .await;
    if let Err(e) = r {
        tracing::debug!(node = idx, error = %e, "Bus link closed.");
    }
    if shared.bus.unregister(idx, gen) {
        shared
            .call(move |node, now| node.engine.on_link_down(idx, now))
            .await;
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
    let header = shared.call(move |node, _| node.engine.header(0)).await;
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
    let header = shared.call(move |node, _| node.engine.header(0)).await;
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

/// The send side of an outbound link, as its task sees it.
struct Outbox {
    idx: NodeIdx,
    gen: u64,
    wake: Arc<Notify>,
}

/// Read buffer headroom below which the next read first grows the buffer.
const READ_HEADROOM: usize = 4096;
/// A write buffer larger than this is not kept between writes.
const KEEP_WBUF: usize = 1024 * 1024;
/// Most frames one owner task handles: a read that brought a peer's whole
/// backlog is handled in several tasks, so client commands get their
/// turns in between instead of waiting behind all of it.
const MAX_FRAMES_PER_TASK: usize = 4096;

/// Frames of a batch whose jobs' ID-index places are loaded before the
/// batch runs (`Engine::prefetch_message`): more would leave the first
/// ones' lines evicted by the time they run.
const PREFETCH_FRAMES: usize = 32;

/// Read frames (and, for outbound links, write queued ones) until either side ends.
/// Every frame decoded from one read is handled in one owner task, and the
/// frames queued on a link go out in one write, after the task has let the
/// other ready tasks run (`yield_now`) so everything they queue in the same
/// scheduler turn joins that write: one hand-off, one wake-up and one
/// syscall per batch of frames instead of per frame.
async fn run_link<S: BusStream>(
    shared: &Shared,
    mut stream: S,
    mut rbuf: BytesMut,
    outbox: Option<Outbox>,
    kind: LinkKind,
    ends: Ends,
) -> std::io::Result<()> {
    let Ends { local_ip, peer_ip } = ends;
    // Shared with every batch sent to the owner.
    let ips: Arc<(String, String)> = Arc::new((local_ip, peer_ip));
    let peer_ip = ips.1.clone();
    let mut wbuf = BytesMut::new();
    let mut shutdown = shared.shutdown_rx();
    let mut batch: Vec<Message> = Vec::new();
    loop {
        let bad = decode_some(&mut rbuf, &mut batch, MAX_FRAMES_PER_TASK);
        // Frames left in `rbuf` go in the next owner task, before reading.
        let more = batch.len() >= MAX_FRAMES_PER_TASK;
        if !batch.is_empty() {
            // The batch and the write buffer travel to the owner and back,
            // keeping their allocations.
            let ips = ips.clone();
            let (mut b, mut w) = (std::mem::take(&mut batch), std::mem::take(&mut wbuf));
            (batch, wbuf) = shared
                .call(move |node, now| {
                    let (local_ip, peer_ip) = &*ips;
                    for msg in b.iter().take(PREFETCH_FRAMES) {
                        node.engine.prefetch_message(msg);
                    }
                    for msg in b.drain(..) {
                        // ACL frames are the node's, not the engine's.
                        if crate::acl::sync::on_bus_message(
                            &mut node.acl,
                            &mut node.engine,
                            &msg,
                            now,
                        ) {
                            continue;
                        }
                        if let Some(r) = node
                            .engine
                            .on_bus_message(kind, local_ip, peer_ip, msg, now)
                        {
                            crate::observe::metrics::shell().bus_sent(r.body.msg_type());
                            r.encode(&mut w);
                        }
                    }
                    (b, w)
                })
                .await;
            // Frames the batch queued on this link leave with its replies.
            if let Some(o) = &outbox {
                if !collect(shared, o, &mut wbuf) {
                    return Ok(());
                }
            }
            flush(&mut stream, &mut wbuf).await?;
        }
        if let Some(e) = bad {
            tracing::warn!(peer = %peer_ip, error = %e, "Dropping bus connection after a bad frame.");
            return Ok(());
        }
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        if rbuf.capacity() - rbuf.len() < READ_HEADROOM {
            rbuf.reserve(16 * 1024);
        }
        let queued = async {
            match &outbox {
                Some(o) => o.wake.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stream.read_buf(&mut rbuf) => {
                if r? == 0 {
                    return Ok(());
                }
            }
            () = queued => {
                if let Some(o) = &outbox {
                    // One write per scheduler turn, not one per frame.
                    tokio::task::yield_now().await;
                    if !collect(shared, o, &mut wbuf) {
                        return Ok(());
                    }
                    flush(&mut stream, &mut wbuf).await?;
                }
            }
            _ = shutdown.changed() => return Ok(()),
        }
    }
}

/// Decode every complete frame in `rbuf` into `batch`; the error of a bad
/// frame (after the good ones before it), which ends the connection.
#[cfg(test)]
fn decode_all(
    rbuf: &mut BytesMut,
    batch: &mut Vec<Message>,
) -> Option<crate::protocol::bus::message::BusError> {
    decode_some(rbuf, batch, usize::MAX)
}

/// Decode complete frames from `rbuf` into `batch` until it holds `max`
/// frames (the rest stay in `rbuf`); the error of a bad frame (after the
/// good ones before it), which ends the connection.
fn decode_some(
    rbuf: &mut BytesMut,
    batch: &mut Vec<Message>,
    max: usize,
) -> Option<crate::protocol::bus::message::BusError> {
    loop {
        if batch.len() >= max {
            return None;
        }
        match decode(rbuf) {
            Ok(Some(msg)) => {
                crate::observe::metrics::shell().bus_received(msg.body.msg_type());
                batch.push(msg);
            }
            Ok(None) => return None,
            Err(BusError::UnknownType(ty)) => match unknown_frame_len(rbuf, ty) {
                // A newer peer's message type (a mixed-version cluster
                // during a rolling upgrade): skip the frame, keep the link.
                // The sender sees no answer, as from a peer that is down.
                Some(len) => {
                    tracing::debug!(msg_type = ty, "Skipped a bus message of an unknown type");
                    rbuf.advance(len);
                }
                None => return Some(BusError::UnknownType(ty)),
            },
            Err(e) => return Some(e),
        }
    }
}

/// The length of the frame at the front of `rbuf` when it is whole and of
/// type `ty` (`decode` checked its checksum before refusing the type).
fn unknown_frame_len(rbuf: &BytesMut, ty: u16) -> Option<usize> {
    let prefix = rbuf.get(..PREFIX_LEN)?;
    if prefix[..4] != MAGIC || u16::from_be_bytes([prefix[6], prefix[7]]) != ty {
        return None;
    }
    let len = u32::from_be_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]) as usize;
    (len >= PREFIX_LEN && len <= rbuf.len()).then_some(len)
}

/// Append the link's queued frames to `wbuf`; false when the link task
/// must end (overflow, or the engine closed the link).
fn collect(shared: &Shared, o: &Outbox, wbuf: &mut BytesMut) -> bool {
    if wbuf.is_empty() {
        return shared.bus.take(o.idx, o.gen, wbuf) == Take::Frames;
    }
    let mut more = BytesMut::new();
    let ok = shared.bus.take(o.idx, o.gen, &mut more) == Take::Frames;
    wbuf.extend_from_slice(&more);
    ok
}

async fn flush<S: BusStream>(stream: &mut S, wbuf: &mut BytesMut) -> std::io::Result<()> {
    if wbuf.is_empty() {
        return Ok(());
    }
    stream.write_all(wbuf).await?;
    stream.flush().await?;
    wbuf.clear();
    if wbuf.capacity() > KEEP_WBUF {
        *wbuf = BytesMut::new();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::bus::message::{Header, JobMsg};

    fn header() -> Header {
        Header {
            sender: [b'a'; 40],
            port: 7711,
            flags: 0,
            mflags: 0,
            announce: None,
        }
    }

    fn frame(n: u32) -> Message {
        Message::new(
            header(),
            Body::Job {
                kind: JobMsg::GotJob,
                job_id: [b'j'; 40],
                aux: n,
            },
        )
    }

    fn aux(m: &Message) -> u32 {
        match m.body {
            Body::Job { aux, .. } => aux,
            _ => u32::MAX,
        }
    }

    #[test]
    fn many_frames_in_one_read_decode_in_order() {
        let mut rbuf = BytesMut::new();
        for n in 0..100 {
            frame(n).encode(&mut rbuf);
        }
        let mut batch = Vec::new();
        assert!(decode_all(&mut rbuf, &mut batch).is_none());
        assert_eq!(
            batch.iter().map(aux).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        assert!(rbuf.is_empty());
    }

    #[test]
    fn frames_split_across_reads_decode_once_complete() {
        let mut wire = BytesMut::new();
        for n in 0..5 {
            frame(n).encode(&mut wire);
        }
        // Feed the stream in chunks that cut headers and payloads anywhere.
        for chunk in [1usize, 3, 7, 13, 61, 64] {
            let mut rbuf = BytesMut::new();
            let mut batch = Vec::new();
            for piece in wire.chunks(chunk) {
                rbuf.extend_from_slice(piece);
                assert!(decode_all(&mut rbuf, &mut batch).is_none());
            }
            assert_eq!(
                batch.iter().map(aux).collect::<Vec<_>>(),
                vec![0, 1, 2, 3, 4]
            );
            assert!(rbuf.is_empty(), "chunk {chunk}");
        }
    }

    #[test]
    fn a_bad_frame_after_good_ones_keeps_the_good_ones() {
        let mut rbuf = BytesMut::new();
        frame(1).encode(&mut rbuf);
        frame(2).encode(&mut rbuf);
        rbuf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let mut batch = Vec::new();
        assert!(decode_all(&mut rbuf, &mut batch).is_some());
        assert_eq!(batch.iter().map(aux).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn a_frame_of_an_unknown_type_is_skipped_and_the_link_kept() {
        let mut unknown = frame(7).to_bytes().to_vec();
        unknown[6..8].copy_from_slice(&99u16.to_be_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&unknown[..12]);
        h.update(&unknown[16..]);
        let crc = h.finalize();
        unknown[12..16].copy_from_slice(&crc.to_be_bytes());
        let mut wire = BytesMut::new();
        frame(1).encode(&mut wire);
        wire.extend_from_slice(&unknown);
        frame(2).encode(&mut wire);
        // Whole, and split anywhere across reads.
        for chunk in [wire.len(), 1, 5, 13, 64] {
            let mut rbuf = BytesMut::new();
            let mut batch = Vec::new();
            for piece in wire.chunks(chunk) {
                rbuf.extend_from_slice(piece);
                assert!(decode_all(&mut rbuf, &mut batch).is_none(), "chunk {chunk}");
            }
            assert_eq!(batch.iter().map(aux).collect::<Vec<_>>(), vec![1, 2]);
            assert!(rbuf.is_empty());
        }
        // A damaged frame of an unknown type still ends the link.
        let mut rbuf = BytesMut::from(&unknown[..]);
        rbuf[70] ^= 1;
        assert!(decode_all(&mut rbuf, &mut Vec::new()).is_some());
    }

    #[tokio::test]
    async fn queued_frames_leave_together_and_wake_the_link_once() {
        let bus = Bus::default();
        let (gen, wake) = bus.register(3);
        let msgs: Vec<Message> = (0..10).map(frame).collect();
        bus.send_all(msgs.iter().map(|m| (3, m)));
        bus.send(3, &frame(10).to_bytes());
        // Frames for a node without a link are dropped.
        bus.send_all(msgs.iter().map(|m| (4, m)));
        // Woken once (a stored permit), not once per frame.
        tokio::time::timeout(Duration::from_secs(5), wake.notified())
            .await
            .expect("link woken");
        let mut buf = BytesMut::new();
        assert_eq!(bus.take(3, gen, &mut buf), Take::Frames);
        let mut batch = Vec::new();
        assert!(decode_all(&mut buf, &mut batch).is_none());
        assert_eq!(
            batch.iter().map(aux).collect::<Vec<_>>(),
            (0..=10).collect::<Vec<_>>()
        );
        let second = tokio::time::timeout(Duration::from_millis(50), wake.notified()).await;
        assert!(second.is_err(), "one wake-up per batch");
        // The next frame after a take wakes the link again.
        bus.send(3, &frame(11).to_bytes());
        tokio::time::timeout(Duration::from_secs(5), wake.notified())
            .await
            .expect("woken again");
    }

    #[test]
    fn decoding_stops_at_the_task_limit_and_keeps_the_rest() {
        let mut rbuf = BytesMut::new();
        for n in 0..10 {
            rbuf.extend_from_slice(&frame(n).to_bytes());
        }
        let mut batch = Vec::new();
        assert!(decode_some(&mut rbuf, &mut batch, 4).is_none());
        assert_eq!(batch.len(), 4);
        batch.clear();
        assert!(decode_all(&mut rbuf, &mut batch).is_none());
        assert_eq!(batch.len(), 6);
        assert!(rbuf.is_empty());
    }

    /// A burst of small frames, as several big ACKJOBs queue before the
    /// link task gets to run, stays queued, in order.
    #[test]
    fn a_burst_of_small_frames_does_not_drop_the_link() {
        let bus = Bus::default();
        let (gen, _wake) = bus.register(1);
        let msgs: Vec<Message> = (0..50_000).map(frame).collect();
        bus.send_all(msgs.iter().map(|m| (1, m)));
        let mut buf = BytesMut::new();
        assert_eq!(bus.take(1, gen, &mut buf), Take::Frames);
        let mut batch = Vec::new();
        assert!(decode_all(&mut buf, &mut batch).is_none());
        assert_eq!(batch.len(), 50_000);
        assert!(batch.iter().zip(&msgs).all(|(a, b)| a.body == b.body));
    }

    #[test]
    fn an_overflowing_link_is_reported_and_a_closed_one_is_gone() {
        let bus = Bus::default();
        let (gen, _wake) = bus.register(1);
        let m = frame(0);
        let len = m.to_bytes().len();
        for _ in 0..LINK_QUEUE_BYTES / len {
            bus.send_all([(1, &m)]);
        }
        let mut buf = BytesMut::new();
        assert_eq!(bus.take(1, gen, &mut buf), Take::Frames);
        buf.clear();
        // Over the budget: the next frame drops the link.
        let big = vec![0u8; LINK_QUEUE_BYTES];
        bus.send(1, &big);
        bus.send(1, &m.to_bytes());
        assert_eq!(bus.take(1, gen, &mut buf), Take::Overflowed);
        assert!(buf.is_empty());
        // The task then unregisters, which reports the link down.
        assert!(bus.unregister(1, gen));

        let (gen, _wake) = bus.register(2);
        bus.disconnect(2);
        assert_eq!(bus.take(2, gen, &mut buf), Take::Gone);
        assert!(!bus.unregister(2, gen), "the engine already knows");

        // A newer link for the same node ends the older task quietly.
        let (old, _w1) = bus.register(5);
        let (new, _w2) = bus.register(5);
        assert_eq!(bus.take(5, old, &mut buf), Take::Gone);
        assert_eq!(bus.take(5, new, &mut buf), Take::Frames);
    }
}
