//! One client connection: read, parse every complete request in the
//! buffer, hand them to the node's owner as one batch (the owner runs them
//! and encodes the replies), write all replies with one syscall per batch.
//! Blocked commands (GETJOB, replicated ADDJOB) wait on their oneshot
//! while the socket is watched for disconnects; requests pipelined behind
//! them stay buffered and run after they unblock. A woken command writes
//! its reply without another trip to the owner (unless the AOF is on: then
//! it waits for the records produced so far).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use super::batch::{misconf_replies, run_on_owner, Batch, Done, Spent, Step, FLUSH_AT, MAX_BATCH};
use super::Shared;
use crate::aof::writer::NotDurable;
use crate::errors::WireError;
use crate::node::{ClientInfo, ClientState, ReplyMode};
use crate::protocol::resp::encode::encode;
use crate::protocol::resp::parse::{Request, RequestParser};
use crate::protocol::resp::Reply;

/// Reserve at most this much ahead for a large incoming bulk argument.
const MAX_RESERVE: usize = 8 * 1024 * 1024;

/// The room of a read, at first and at most (see `ReadRoom`).
const MIN_READ: usize = 1024;
const MAX_READ: usize = 64 * 1024;

/// A large bulk's reservation is renewed only once its spare room falls
/// below this: renewing it after every read reallocates the buffer each
/// time, and mimalloc's realloc copies the whole old capacity (glibc
/// remaps it), touching every reserved page: a client trickling the bytes
/// of a huge announced bulk then cost 8 MB of RSS per read.
const MIN_ROOM: usize = 64 * 1024;

/// A client socket: TCP or Unix domain.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + std::os::fd::AsRawFd + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + std::os::fd::AsRawFd + Send> ClientStream for T {}

/// Serve one client; `addr` is how CLIENT LIST shows it (`ip:port`, or
/// `path:0` for a Unix socket, as Redis does).
pub async fn handle<S: ClientStream>(shared: Arc<Shared>, mut stream: S, addr: String) {
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let (kill_tx, kill_rx) = oneshot::channel();
    let fd = i64::from(stream.as_raw_fd());
    let blocked = Arc::new(AtomicBool::new(false));
    let (sh, info_addr, info_blocked) = (shared.clone(), addr.clone(), blocked.clone());
    shared
        .call(move |node, now| {
            node.stats.total_connections += 1;
            node.clients.insert(
                id,
                ClientInfo {
                    id,
                    addr: info_addr,
                    fd,
                    name: None,
                    created: now,
                    last_active: now,
                    last_cmd: "NULL",
                    blocked: info_blocked,
                    monitor: false,
                    // Shutdown sets the watch, then fires every client's
                    // kill in a later owner task (`Shared::shutdown`); one
                    // registered after that starts with its sender dropped,
                    // which ends it at once.
                    kill: (!*sh.shutdown_tx.borrow()).then_some(kill_tx),
                },
            );
        })
        .await;
    let client = ClientState {
        id,
        addr,
        proto: 2,
        authenticated: false,
        reply_mode: ReplyMode::On,
        last_cmd: "NULL",
        acl: Default::default(),
        paged_in: false,
        oom_wait_since: None,
    };
    // Every log line about this client carries its id and address.
    let span = tracing::info_span!("client", id, peer = %client.addr);
    async {
        let result = serve(&shared, &mut stream, client, &blocked, kill_rx).await;
        if let Err(e) = result {
            tracing::debug!(error = %e, "Client connection closed with error.");
        }
    }
    .instrument(span)
    .await;
    shared
        .call(move |node, now| {
            node.clients.remove(&id);
            node.client_gone(id, now);
        })
        .await;
}

/// The socket side of a client, in the manner of mini-redis's
/// `Connection`: a read buffer parsed into requests, replies written once
/// per batch, and the signals that end the client.
struct Connection<'a, S> {
    stream: &'a mut S,
    shared: &'a Shared,
    rbuf: BytesMut,
    parser: RequestParser,
    /// A malformed request: answered, then the connection closes.
    protocol_error: Option<String>,
    /// Fires (or its sender is dropped) on CLIENT KILL and on shutdown. A
    /// oneshot costs a load per poll; a `watch::changed` future, created
    /// in every read turn or kept and polled, took the watch's waiter-list
    /// mutex, which all connections contend on, once per request.
    stop: oneshot::Receiver<()>,
    /// How much room a read is given.
    room: ReadRoom,
}

impl<S: ClientStream> Connection<'_, S> {
    /// Parse the complete requests already buffered into `pending`, up to
    /// a batch. True when the batch is full (more may be buffered).
    fn parse_into(&mut self, pending: &mut VecDeque<Request>) -> bool {
        while self.protocol_error.is_none() {
            if pending.len() >= MAX_BATCH {
                return true;
            }
            match self.parser.parse(&mut self.rbuf) {
                Ok(Some(args)) => pending.push_back(args),
                Ok(None) => break,
                Err(e) => self.protocol_error = Some(e.message()),
            }
        }
        false
    }

    /// Read more bytes. None when the client is gone: EOF, killed, idle
    /// for `idle_secs` (0 = never).
    async fn read_more(&mut self, idle_secs: u64) -> std::io::Result<Option<usize>> {
        // CONFIG SET applies to connections already open, as in Redis.
        self.parser
            .set_max_bulk(self.shared.proto_max_bulk_len.load(Ordering::Relaxed));
        if let Some(extra) = self.parser.pending_bulk_remaining() {
            if self.rbuf.capacity() - self.rbuf.len() < MIN_ROOM.min(extra) {
                self.rbuf.reserve(extra.min(MAX_RESERVE));
            }
        } else if self.rbuf.capacity() - self.rbuf.len() < self.room.size / 2 {
            self.rbuf.reserve(self.room.size);
        }
        let room = self.rbuf.capacity() - self.rbuf.len();
        let n = tokio::select! {
            biased;
            r = self.stream.read_buf(&mut self.rbuf) => r?,
            _ = &mut self.stop => return Ok(None),
            _ = idle_sleep(idle_secs) => return Ok(None),
        };
        self.room.after(room, n);
        Ok((n > 0).then_some(n))
    }

    /// Write the buffered replies with one syscall. With a soft
    /// client-output-buffer-limit, replies above it that the client does
    /// not take within its seconds close the connection (Redis's rule;
    /// our buffer stops growing while a write waits, so the time the
    /// client leaves them there is what counts).
    async fn write_out(&mut self, wbuf: &mut BytesMut) -> std::io::Result<()> {
        let soft = self.shared.obuf_soft.load(Ordering::Relaxed);
        // As for the hard limit, Redis's static 16 KB reply buffer is free.
        if soft == 0 || (wbuf.len() as u64).saturating_sub(16 * 1024) <= soft {
            return flush(self.stream, wbuf).await;
        }
        let secs = self.shared.obuf_soft_secs.load(Ordering::Relaxed);
        let bytes = wbuf.len();
        match tokio::time::timeout(Duration::from_secs(secs), flush(self.stream, wbuf)).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!(
                    bytes,
                    soft,
                    secs,
                    "Client closed for overcoming of output buffer limits."
                );
                Err(std::io::Error::other("client-output-buffer-limit soft"))
            }
        }
    }
}

/// How much room a client's reads get. A read that filled its room means
/// more was waiting: read more at a time from now on, so a pipelining
/// client's batch arrives in one read and is answered with one write
/// (sizing by the buffer's spare capacity instead stayed near 1 KB, which
/// cut a 16-command pipeline of 140-byte ADDJOBs in two and doubled the
/// syscalls per command). Small reads shrink it back, so a connection
/// that goes quiet does not keep a large buffer, but only several in a
/// row: the tail of a batch cut by a full read is one small read, and
/// shrinking on it cut every 2.2 KB pipeline of redis-benchmark in two
/// again (a full 2 KB read doubled the room, the 160-byte rest halved it).
#[derive(Clone, Copy, Debug)]
struct ReadRoom {
    size: usize,
    /// Small reads in a row.
    small: u8,
}

/// Small reads in a row that halve the room.
const SHRINK_AFTER: u8 = 8;

impl ReadRoom {
    const fn new() -> Self {
        ReadRoom {
            size: MIN_READ,
            small: 0,
        }
    }

    /// After a read of `n` bytes into `room`.
    fn after(&mut self, room: usize, n: usize) {
        if n == room {
            self.small = 0;
            if self.size < MAX_READ {
                self.size *= 2;
            }
        } else if n < self.size / 8 && self.size > MIN_READ {
            self.small += 1;
            if self.small >= SHRINK_AFTER {
                self.small = 0;
                self.size /= 2;
            }
        } else {
            self.small = 0;
        }
    }
}

/// What the serve loop does after a batch's step.
enum Flow {
    /// Go on with the requests already parsed.
    Next,
    /// Parse again first: requests may have arrived while the connection
    /// waited (for a blocked command, a pause).
    Again,
    End,
}

async fn serve<S: ClientStream>(
    shared: &Shared,
    stream: &mut S,
    client: ClientState,
    blocked: &AtomicBool,
    stop: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    // Buffers start small and grow with the traffic: thousands of idle
    // connections must not cost 32 KB each.
    let mut conn = Connection {
        stream,
        shared,
        rbuf: BytesMut::with_capacity(1024),
        parser: RequestParser::new(),
        protocol_error: None,
        stop,
        room: ReadRoom::new(),
    };
    // What travels to the owner and back with every batch.
    let mut batch = Batch {
        client,
        pending: VecDeque::new(),
        wbuf: BytesMut::new(),
        spent: Spent::default(),
        read_bytes: 0,
    };
    // The replies to write already waited for the thread's turn.
    let mut grouped = false;
    loop {
        let full = conn.parse_into(&mut batch.pending);
        if !batch.pending.is_empty() {
            let step;
            let waited;
            (batch, step, waited) = run(shared, batch, &mut conn.parser).await?;
            grouped |= waited;
            match follow(shared, &mut conn, &mut batch, blocked, step).await? {
                Flow::Next => {}
                // A woken command's reply is written without a yield: the
                // clients a turn wakes run one after another with nothing
                // between their writes (a yield there cost the origin of
                // synchronous REPLICATE 3 jobs 5 % more CPU a job).
                Flow::Again => {
                    grouped = true;
                    continue;
                }
                Flow::End => return Ok(()),
            }
            if !batch.pending.is_empty() || full {
                // Write big reply backlogs out first, so a client that
                // pipelines without reading blocks on TCP, not on our memory.
                if batch.wbuf.len() >= FLUSH_AT {
                    conn.write_out(&mut batch.wbuf).await?;
                }
                // A batch run inline (the default owner) awaits nothing
                // that counts against tokio's cooperative budget: without
                // this a client pipelining a million commands kept the
                // thread for a second, every other client waiting
                // (hostile::a_million_pipelined_commands...). One unit per
                // batch yields every 128 batches, as the owner's channel
                // did.
                tokio::task::consume_budget().await;
                continue;
            }
        }
        if let Some(msg) = conn.protocol_error.take() {
            tracing::warn!(error = %msg, "Closing a client after a protocol error.");
            let reply = WireError::Protocol(msg).reply();
            encode(&reply, batch.client.proto, &mut batch.wbuf);
            return conn.write_out(&mut batch.wbuf).await;
        }
        // A batch whose AOF records waited for the turn (`run`) has
        // already let the others run: a second yield is a second turn.
        if !batch.wbuf.is_empty() && !grouped {
            let _ = super::turn::before_write().await;
        }
        grouped = false;
        conn.write_out(&mut batch.wbuf).await?;
        let idle = shared.idle_timeout.load(Ordering::Relaxed);
        match conn.read_more(idle).await? {
            Some(n) => batch.read_bytes += n as u64,
            None => return Ok(()),
        }
    }
}

/// Run a batch on the owner, then hold its replies until their AOF records
/// are written (fsynced with `always`). The owner wrote them at the end of
/// its turn, so this is normally already over; if the disk fails
/// meanwhile, the commands that produced records are answered -MISCONF
/// instead of hanging. The flag says whether it waited for the thread's
/// other connections (`turn::before_write`) before the records' write.
async fn run(
    shared: &Shared,
    batch: Batch,
    parser: &mut RequestParser,
) -> std::io::Result<(Batch, Step, bool)> {
    let Done {
        mut batch,
        step,
        sync,
    } = run_on_owner(shared, batch).await;
    batch.read_bytes = 0;
    let mut waited = false;
    if let Some(w) = sync {
        if !w.is_done() {
            // Let the other connections ready on this thread queue their
            // records first: one `write()` then carries them all (while
            // the thread's turns are busy: `turn`).
            waited = super::turn::before_write().await;
        }
        match w.wait().await {
            Ok(()) => {}
            Err(NotDurable::Gone) => {
                return Err(std::io::Error::other("the AOF writer is gone"));
            }
            Err(NotDurable::Disk(e)) => {
                let proto = batch.client.proto;
                misconf_replies(&mut batch.wbuf, &batch.spent.durable, &e.to_string(), proto);
            }
        }
    }
    batch.spent.clear(parser);
    Ok((batch, step, waited))
}

/// Do what a batch's step asks: wait for a blocked command, a pause, a
/// hostname to meet; close, shut down, or become a monitor.
async fn follow<S: ClientStream>(
    shared: &Shared,
    conn: &mut Connection<'_, S>,
    batch: &mut Batch,
    blocked: &AtomicBool,
    step: Step,
) -> std::io::Result<Flow> {
    let (rx, suppress) = match step {
        Step::Continue => return Ok(Flow::Next),
        Step::Paused(until) => {
            conn.write_out(&mut batch.wbuf).await?;
            let wait = until.saturating_sub(crate::support::clock::unix_ms());
            tokio::time::sleep(Duration::from_millis(wait.min(3_600_000))).await;
            return Ok(Flow::Again);
        }
        Step::Blocked(rx, suppress) => (rx, suppress),
        Step::PageIn(rx) => {
            conn.write_out(&mut batch.wbuf).await?;
            let gone = wait_page_in(conn.stream, rx, &mut conn.rbuf, &mut conn.stop).await?;
            return Ok(if gone { Flow::End } else { Flow::Again });
        }
        Step::Meet {
            host,
            port,
            suppress,
        } => {
            let (tx, rx) = oneshot::channel();
            let _ = shared.meet_tx.send((host, port, tx));
            (rx, suppress)
        }
        Step::Close => {
            conn.write_out(&mut batch.wbuf).await?;
            return Ok(Flow::End);
        }
        Step::Shutdown { restart_after_ms } => {
            conn.write_out(&mut batch.wbuf).await?;
            if let Some(ms) = restart_after_ms {
                shared.request_restart(ms);
            }
            shared.shutdown().await;
            return Ok(Flow::End);
        }
        Step::Monitor => {
            conn.write_out(&mut batch.wbuf).await?;
            monitor(shared, conn.stream, batch.client.id, &mut conn.stop).await?;
            return Ok(Flow::End);
        }
    };
    conn.write_out(&mut batch.wbuf).await?;
    let woken = wait_blocked(
        shared,
        conn.stream,
        blocked,
        rx,
        &mut conn.rbuf,
        &mut conn.stop,
    )
    .await?;
    let Some(reply) = woken else {
        return Ok(Flow::End);
    };
    if !suppress {
        encode(&reply, batch.client.proto, &mut batch.wbuf);
    }
    Ok(Flow::Again)
}

async fn idle_sleep(secs: u64) {
    if secs == 0 {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

async fn flush<S: ClientStream>(stream: &mut S, wbuf: &mut BytesMut) -> std::io::Result<()> {
    if !wbuf.is_empty() {
        stream.write_all(wbuf).await?;
        // TLS streams buffer records until flushed (a no-op for TCP).
        stream.flush().await?;
        wbuf.clear();
        if wbuf.capacity() > 1024 * 1024 {
            // Do not keep a huge buffer around after one big reply.
            *wbuf = BytesMut::new();
        }
    }
    Ok(())
}

/// Await the disk (or the memory) a command waits for before it runs
/// again; true when the client went away meanwhile. The command has not
/// run: like the rest of a closed client's requests, it never does (a
/// producer that left cannot learn the ID of a job added for it, and would
/// add it again).
async fn wait_page_in<S: ClientStream>(
    stream: &mut S,
    rx: oneshot::Receiver<()>,
    rbuf: &mut BytesMut,
    stop: &mut oneshot::Receiver<()>,
) -> std::io::Result<bool> {
    // The spill thread answers every read; a gone thread (exit) drops the
    // sender and the command runs again anyway.
    let ready = tokio::time::timeout(Duration::from_secs(30), rx);
    tokio::pin!(ready);
    loop {
        tokio::select! {
            biased;
            _ = &mut ready => {
                // A close that arrived with the wake-up is seen first: one
                // read that does not wait.
                return match tokio::time::timeout(Duration::ZERO, stream.read_buf(rbuf)).await {
                    Ok(r) => Ok(!still_there(r?, rbuf)),
                    Err(_) => Ok(false),
                };
            }
            r = stream.read_buf(rbuf) => {
                if !still_there(r?, rbuf) {
                    return Ok(true);
                }
            }
            _ = &mut *stop => return Ok(true),
        }
    }
}

/// After a read of `n` bytes while a command waits: requests sent
/// meanwhile are kept for later; false when the client is gone (EOF) or
/// its query buffer passed the limit.
fn still_there(n: usize, rbuf: &BytesMut) -> bool {
    if n == 0 {
        return false;
    }
    if rbuf.len() > crate::protocol::resp::parse::MAX_QUERY_BUF {
        tracing::warn!(
            bytes = rbuf.len(),
            "Closing client that reached max query buffer length."
        );
        return false;
    }
    true
}

/// Await a blocked command's reply; Ok(None) when the client went away.
async fn wait_blocked<S: ClientStream>(
    shared: &Shared,
    stream: &mut S,
    blocked: &AtomicBool,
    mut rx: oneshot::Receiver<Reply>,
    rbuf: &mut BytesMut,
    stop: &mut oneshot::Receiver<()>,
) -> std::io::Result<Option<Reply>> {
    let reply = loop {
        tokio::select! {
            biased;
            r = &mut rx => break r.ok(),
            r = stream.read_buf(rbuf) => {
                if !still_there(r?, rbuf) {
                    return Ok(None);
                }
            }
            _ = &mut *stop => return Ok(None),
        }
    };
    // CLIENT LIST reads the flag; clearing it needs no owner task.
    blocked.store(false, Ordering::Relaxed);
    // The record that completed this command (a replicated ADDJOB's
    // LOADJOB, the ADDJOB that queued the job a GETJOB got) came from
    // another call: wait for everything produced. Without an AOF there is
    // nothing to wait for, and no second trip to the owner is made.
    let aof_sync = if shared.aof_records.load(Ordering::Acquire) {
        shared
            .call(|node, _| crate::node::persistence::produced_sync(node))
            .await
    } else {
        None
    };
    if let Some(w) = aof_sync {
        match w.wait().await {
            Ok(()) => {}
            Err(NotDurable::Gone) => return Ok(None),
            Err(NotDurable::Disk(e)) => return Ok(Some(e.misconf().into())),
        }
    }
    // The engine always answers before dropping a waiter; a dropped sender
    // means the node is shutting down.
    Ok(Some(reply.unwrap_or(Reply::NullArray)))
}

async fn monitor<S: ClientStream>(
    shared: &Shared,
    stream: &mut S,
    id: u64,
    stop: &mut oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let (tx, mut rx) = mpsc::channel::<Bytes>(10_000);
    shared
        .call(move |node, _| {
            node.monitors.push(tx);
            if let Some(info) = node.clients.get_mut(&id) {
                info.monitor = true;
            }
        })
        .await;
    let mut sink = [0u8; 1024];
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(line) => {
                    stream.write_all(&line).await?;
                    stream.flush().await?;
                }
                None => return Ok(()),
            },
            r = stream.read(&mut sink) => if r? == 0 { return Ok(()) },
            _ = &mut *stop => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ReadRoom, MAX_READ, MIN_READ, SHRINK_AFTER};

    fn sized(size: usize) -> ReadRoom {
        ReadRoom { size, small: 0 }
    }

    #[test]
    fn a_full_read_doubles_the_room_up_to_the_cap() {
        let mut r = ReadRoom::new();
        // A client that always has more waiting than the room.
        for _ in 0..20 {
            r.after(r.size, r.size);
        }
        assert_eq!(r.size, MAX_READ);
        // A 16-command pipeline of 140-byte requests fits in one read
        // after two full ones.
        let mut r = ReadRoom::new();
        r.after(MIN_READ, MIN_READ);
        assert_eq!(r.size, 2 * MIN_READ);
        r.after(r.size, r.size);
        assert!(r.size >= 16 * 140);
    }

    #[test]
    fn small_reads_shrink_the_room_back_and_partial_ones_keep_it() {
        let mut r = sized(MAX_READ);
        for _ in 0..20 * usize::from(SHRINK_AFTER) {
            r.after(r.size, 40);
        }
        assert_eq!(r.size, MIN_READ);
        // A read that leaves room but is not tiny keeps the size.
        let mut r = sized(8192);
        r.after(8192, 3000);
        assert_eq!(r.size, 8192);
        // A read that filled a room smaller than the size (the buffer
        // still had some) also grows it.
        let mut r = sized(4096);
        r.after(2500, 2500);
        assert_eq!(r.size, 8192);
    }

    /// redis-benchmark's 16 pipelined 138-byte ADDJOBs (2,208 bytes) came
    /// as a full 2,048-byte read and a 160-byte one: the first doubled
    /// the room, the second halved it, and every batch took two reads and
    /// two writes. The room the serve loop gives is at least half the
    /// size (it reserves the size below that).
    #[test]
    fn the_tail_of_a_cut_batch_does_not_shrink_the_room_again() {
        let batch = 2208;
        let mut r = ReadRoom::new();
        let mut reads = 0;
        for _ in 0..100 {
            let room = r.size / 2;
            reads = 0;
            let mut left = batch;
            while left > 0 {
                let n = left.min(room.max(1));
                r.after(room, n);
                left -= n;
                reads += 1;
            }
        }
        assert_eq!(reads, 1, "room {}", r.size);
        assert!(r.size / 2 >= batch);
    }
}
