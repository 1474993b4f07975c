//! One client connection: read, parse every complete request in the
//! buffer, hand them to the node's owner as one batch (the owner runs them
//! and encodes the replies), write all replies with one syscall per batch.
//! Blocked commands (GETJOB, replicated ADDJOB) wait on their oneshot
//! while the socket is watched for disconnects; requests pipelined behind
//! them stay buffered and run after they unblock. A woken GETJOB writes
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

use super::Shared;
use crate::aof::writer::NotDurable;
use crate::commands::{self, Outcome};
use crate::errors::WireError;
use crate::node::{ClientInfo, ClientState, ReplyMode};
use crate::resp::encode::encode;
use crate::resp::parse::RequestParser;
use crate::resp::Reply;

/// Most requests run under one lock acquisition, so one pipelining client
/// cannot hold the node for long.
const MAX_BATCH: usize = 256;
/// Stop a batch and write the replies out once this much is buffered.
const FLUSH_AT: usize = 64 * 1024;
/// Reserve at most this much ahead for a large incoming bulk argument.
const MAX_RESERVE: usize = 8 * 1024 * 1024;

enum Step {
    /// Keep going.
    Continue,
    /// Wait for a blocked command's reply.
    Blocked(oneshot::Receiver<Reply>, bool),
    Close,
    Shutdown {
        restart_after_ms: Option<u64>,
    },
    /// CLUSTER MEET <hostname>: resolved by the shell, then answered.
    Meet {
        host: String,
        port: u16,
        suppress: bool,
    },
    Monitor,
    /// CLIENT PAUSE in effect until this unix ms.
    Paused(u64),
}

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

async fn serve<S: ClientStream>(
    shared: &Shared,
    stream: &mut S,
    client: ClientState,
    blocked: &AtomicBool,
    // Fires (or its sender is dropped) on CLIENT KILL and on shutdown. A
    // oneshot costs a load per poll; a `watch::changed` future, created in
    // every read turn or kept and polled, took the watch's waiter-list
    // mutex, which all connections contend on, once per request.
    mut stop: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let stop = &mut stop;
    // Buffers start small and grow with the traffic: thousands of idle
    // connections must not cost 32 KB each.
    let mut rbuf = BytesMut::with_capacity(1024);
    let rbuf = &mut rbuf;
    let mut parser = RequestParser::new();
    let parser = &mut parser;
    let mut protocol_error: Option<String> = None;
    let protocol_error = &mut protocol_error;
    // What travels to the owner and back with every batch.
    let mut batch = Batch {
        client,
        pending: VecDeque::new(),
        wbuf: BytesMut::new(),
        spent: Spent::default(),
        read_bytes: 0,
    };
    loop {
        // Parse the complete requests already buffered, up to a batch.
        let mut batch_full = false;
        while protocol_error.is_none() {
            if batch.pending.len() >= MAX_BATCH {
                // More requests may be buffered: parse them before reading.
                batch_full = true;
                break;
            }
            match parser.parse(rbuf) {
                Ok(Some(args)) => batch.pending.push_back(args),
                Ok(None) => break,
                Err(e) => *protocol_error = Some(e.message()),
            }
        }
        if !batch.pending.is_empty() {
            let done = run_on_owner(shared, batch).await;
            let step = done.step;
            let sync = done.sync;
            batch = done.batch;
            batch.read_bytes = 0;
            // No reply of this batch leaves before its AOF records are
            // written (fsynced with `always`); the owner wrote them at the
            // end of its turn, so this is normally already over. If the
            // disk fails meanwhile, the commands that produced records are
            // answered -MISCONF instead of hanging.
            if let Some(w) = sync {
                match w.wait().await {
                    Ok(()) => {}
                    Err(NotDurable::Gone) => return Ok(()),
                    Err(NotDurable::Disk(e)) => misconf_replies(
                        &mut batch.wbuf,
                        &batch.spent.durable,
                        &e.to_string(),
                        batch.client.proto,
                    ),
                }
            }
            batch.spent.clear(parser);
            let wbuf = &mut batch.wbuf;
            match step {
                Step::Continue => {}
                Step::Paused(until) => {
                    flush(stream, wbuf).await?;
                    let wait = until.saturating_sub(crate::clock::unix_ms());
                    tokio::time::sleep(Duration::from_millis(wait.min(3_600_000))).await;
                    continue;
                }
                Step::Blocked(rx, suppress) => {
                    flush(stream, wbuf).await?;
                    let Some(reply) = wait_blocked(shared, stream, blocked, rx, rbuf, stop).await?
                    else {
                        return Ok(());
                    };
                    if !suppress {
                        encode(&reply, batch.client.proto, wbuf);
                    }
                    continue;
                }
                Step::Meet {
                    host,
                    port,
                    suppress,
                } => {
                    flush(stream, wbuf).await?;
                    let (tx, rx) = oneshot::channel();
                    let _ = shared.meet_tx.send((host, port, tx));
                    let Some(reply) = wait_blocked(shared, stream, blocked, rx, rbuf, stop).await?
                    else {
                        return Ok(());
                    };
                    if !suppress {
                        encode(&reply, batch.client.proto, wbuf);
                    }
                    continue;
                }
                Step::Close => {
                    flush(stream, wbuf).await?;
                    return Ok(());
                }
                Step::Shutdown { restart_after_ms } => {
                    flush(stream, wbuf).await?;
                    if let Some(ms) = restart_after_ms {
                        shared.request_restart(ms);
                    }
                    shared.shutdown().await;
                    return Ok(());
                }
                Step::Monitor => {
                    flush(stream, wbuf).await?;
                    return monitor(shared, stream, batch.client.id, stop).await;
                }
            }
            if !batch.pending.is_empty() || batch_full {
                // Write big reply backlogs out first, so a client that
                // pipelines without reading blocks on TCP, not on our memory.
                if batch.wbuf.len() >= FLUSH_AT {
                    flush(stream, &mut batch.wbuf).await?;
                }
                continue;
            }
        }
        if let Some(msg) = protocol_error.take() {
            encode(
                &WireError::Protocol(msg).reply(),
                batch.client.proto,
                &mut batch.wbuf,
            );
            flush(stream, &mut batch.wbuf).await?;
            return Ok(());
        }
        flush(stream, &mut batch.wbuf).await?;
        if let Some(extra) = parser.pending_bulk_remaining() {
            rbuf.reserve(extra.min(MAX_RESERVE));
        } else if rbuf.capacity() - rbuf.len() < 512 {
            // Double with use (up to 64 KB per step) so busy pipelining
            // clients read in large chunks.
            rbuf.reserve(rbuf.capacity().clamp(1024, 64 * 1024));
        }
        let idle = shared.idle_timeout.load(Ordering::Relaxed);
        let n = tokio::select! {
            biased;
            r = stream.read_buf(rbuf) => r?,
            _ = &mut *stop => return Ok(()),
            _ = idle_sleep(idle) => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        batch.read_bytes += n as u64;
    }
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

/// A connection's state that travels to the owner with each batch: the
/// client's protocol state, the parsed requests, the reply buffer (the
/// owner encodes into it) and what the batch leaves to free.
struct Batch {
    client: ClientState,
    pending: VecDeque<Vec<Bytes>>,
    wbuf: BytesMut,
    spent: Spent,
    read_bytes: u64,
}

/// A batch back from the owner, with what the connection must do next and
/// the AOF progress its replies wait for.
struct Done {
    batch: Batch,
    step: Step,
    sync: Option<crate::aof::SyncWait>,
}

/// Hand the batch to the owner thread and await it (released at the end
/// of the owner's turn, after the turn's AOF write).
async fn run_on_owner(shared: &Shared, mut moved: Batch) -> Done {
    let (tx, rx) = oneshot::channel();
    shared.submit(Box::new(move |node, now, turn| {
        let (step, sync) = run_batch(node, now, &mut moved);
        turn.release(move || {
            let _ = tx.send(Done {
                batch: moved,
                step,
                sync,
            });
        });
    }));
    match rx.await {
        Ok(done) => done,
        // The owner runs every task it is given while the process lives.
        Err(_) => std::process::abort(),
    }
}

/// Run queued requests on the owner until one needs the connection's
/// attention.
fn run_batch(
    node: &mut crate::node::Node,
    now: u64,
    b: &mut Batch,
) -> (Step, Option<crate::aof::SyncWait>) {
    let Batch {
        client,
        pending,
        wbuf,
        spent,
        read_bytes,
    } = b;
    node.stats.net_input += *read_bytes;
    if node.clients_paused_until > now {
        return (Step::Paused(node.clients_paused_until), None);
    }
    let start_len = wbuf.len();
    let mut step = Step::Continue;
    while let Some(args) = pending.pop_front() {
        let before = client.reply_mode;
        if before == ReplyMode::Skip {
            client.reply_mode = ReplyMode::On;
        }
        let records_before = node.engine.pending_aof_records();
        let out = commands::dispatch(node, client, &args, now);
        let durable = node.engine.pending_aof_records() > records_before;
        let after = client.reply_mode;
        let suppress = matches!(after, ReplyMode::Off | ReplyMode::Skip)
            || (before == ReplyMode::Skip && after == ReplyMode::On);
        spent.args.push(args);
        match out {
            Outcome::Reply(r) => {
                if !suppress {
                    let at = wbuf.len();
                    encode(&r, client.proto, wbuf);
                    if durable {
                        spent.durable.push((at, wbuf.len()));
                    }
                }
                spent.replies.push(r);
                // As in Redis, the first 16 KB (its static reply
                // buffer) do not count against the limit.
                let hard = node.config.client_output_buffer_limit.hard;
                if hard != 0 && (wbuf.len() as u64).saturating_sub(16 * 1024) > hard {
                    // client-output-buffer-limit hard: drop the client
                    // rather than buffer without bound (as Redis does).
                    tracing::warn!(
                        client = client.id,
                        bytes = wbuf.len(),
                        "Client closed for overcoming of output buffer limits."
                    );
                    wbuf.clear();
                    step = Step::Close;
                    break;
                }
                if wbuf.len() >= FLUSH_AT {
                    break;
                }
            }
            Outcome::Blocked(rx) => {
                if let Some(info) = node.clients.get(&client.id) {
                    info.blocked.store(true, Ordering::Relaxed);
                }
                step = Step::Blocked(rx, suppress);
                break;
            }
            Outcome::Close(r) => {
                if let Some(r) = r {
                    encode(&r, client.proto, wbuf);
                }
                step = Step::Close;
                break;
            }
            Outcome::Shutdown { restart_after_ms } => {
                step = Step::Shutdown { restart_after_ms };
                break;
            }
            Outcome::MeetHost { host, port } => {
                step = Step::Meet {
                    host,
                    port,
                    suppress,
                };
                break;
            }
            Outcome::Monitor => {
                encode(&Reply::ok(), client.proto, wbuf);
                step = Step::Monitor;
                break;
            }
        }
    }
    node.stats.net_output += (wbuf.len() - start_len) as u64;
    if let Some(info) = node.clients.get_mut(&client.id) {
        info.last_active = now;
        info.last_cmd = client.last_cmd;
    }
    (step, crate::node::persistence::pending_sync(node))
}

/// Requests and replies of a batch, freed after the lock is released so
/// the critical section does not pay for deallocation.
#[derive(Default)]
struct Spent {
    args: Vec<Vec<Bytes>>,
    replies: Vec<Reply>,
    /// `wbuf` ranges of the replies of commands that produced AOF records.
    durable: Vec<(usize, usize)>,
}

impl Spent {
    /// Drop the batch; argument vectors go back to the parser for reuse.
    fn clear(&mut self, parser: &mut RequestParser) {
        for args in self.args.drain(..) {
            parser.recycle(args);
        }
        self.replies.clear();
        self.durable.clear();
    }
}

/// The AOF could not be written: replace the replies of the commands whose
/// records it holds (`spans`, ascending) by -MISCONF. Their effects stay in
/// memory and reach the file once the disk recovers; the client is told
/// that they are not on disk.
fn misconf_replies(wbuf: &mut BytesMut, spans: &[(usize, usize)], error: &str, proto: u8) {
    let Some(&(first, _)) = spans.first() else {
        return;
    };
    let old = wbuf.split_off(first);
    let mut at = first;
    for &(start, end) in spans {
        wbuf.extend_from_slice(&old[at - first..start - first]);
        encode(
            &Reply::from(WireError::Misconf(error.to_string())),
            proto,
            wbuf,
        );
        at = end;
    }
    wbuf.extend_from_slice(&old[at - first..]);
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
                // Requests sent while blocked are kept for later; EOF ends the client.
                if r? == 0 {
                    return Ok(None);
                }
                if rbuf.len() > crate::resp::parse::MAX_QUERY_BUF {
                    return Ok(None);
                }
            }
            _ = &mut *stop => return Ok(None),
        }
    };
    // CLIENT LIST reads the flag; no lock needed to clear it.
    blocked.store(false, Ordering::Relaxed);
    // The record that completed this command (a replicated ADDJOB's
    // LOADJOB, the ADDJOB that queued the job a GETJOB got) came from
    // another call: wait for everything produced. Without an AOF there is
    // nothing to wait for, and the lock is not taken a second time.
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
