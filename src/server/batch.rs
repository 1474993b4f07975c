//! A client batch on the owner thread: the connection's requests run one
//! after another, their replies encoded into the connection's own write
//! buffer, and the batch goes back with what the connection must do next
//! (`Step`) and the AOF progress its replies wait for. Arguments and
//! replies travel back too, so they are freed (and the argument vectors
//! recycled) on the connection's thread, not the owner's.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use tokio::sync::oneshot;

use super::Shared;
use crate::commands::{self, Outcome};
use crate::errors::WireError;
use crate::node::{ClientState, Node, ReplyMode};
use crate::protocol::resp::encode::encode;
use crate::protocol::resp::parse::{Request, RequestParser};
use crate::protocol::resp::Reply;

/// At most this many requests per batch, so one pipelining client cannot
/// hold the owner for long.
pub const MAX_BATCH: usize = 256;
/// Stop a batch and write the replies out once this much is buffered.
pub const FLUSH_AT: usize = 64 * 1024;

/// What the connection does after a batch.
pub enum Step {
    /// Keep going.
    Continue,
    /// Wait for a blocked command's reply.
    Blocked(oneshot::Receiver<Reply>, bool),
    /// Wait for jobs to come back from disk, then run the batch again
    /// (the command that needed them first).
    PageIn(oneshot::Receiver<()>),
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

/// A connection's state that travels to the owner with each batch: the
/// client's protocol state, the parsed requests, the reply buffer (the
/// owner encodes into it) and what the batch leaves to free.
pub struct Batch {
    pub client: ClientState,
    pub pending: VecDeque<Request>,
    pub wbuf: BytesMut,
    pub spent: Spent,
    pub read_bytes: u64,
}

/// A batch back from the owner, with what the connection must do next and
/// the AOF progress its replies wait for.
pub struct Done {
    pub batch: Batch,
    pub step: Step,
    pub sync: Option<crate::aof::SyncWait>,
}

/// Hand the batch to the owner thread and await it (released at the end
/// of the owner's turn, after the turn's AOF write).
pub async fn run_on_owner(shared: &Shared, mut moved: Batch) -> Done {
    if let Some(inline) = shared.inline_owner() {
        let (step, sync) = inline.run_here(shared, |node, now, turn| {
            let (step, sync) = run_batch(node, now, &mut moved);
            if sync.is_some() {
                turn.answer_writes_aof();
            }
            (step, sync)
        });
        return Done {
            batch: moved,
            step,
            sync,
        };
    }
    let (tx, rx) = oneshot::channel();
    shared.submit(Box::new(move |node, now, turn| {
        let (step, sync) = run_batch(node, now, &mut moved);
        if sync.is_some() {
            turn.answer_writes_aof();
        }
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
        Err(_) => super::owner::owner_gone(),
    }
}

/// Run queued requests on the owner until one needs the connection's
/// attention.
fn run_batch(node: &mut Node, now: u64, b: &mut Batch) -> (Step, Option<crate::aof::SyncWait>) {
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
        let out = commands::dispatch(node, client, &args.args(), now);
        client.paged_in = false;
        if let Outcome::PageIn(rx) = out {
            client.paged_in = true;
            client.reply_mode = before;
            pending.push_front(args);
            step = Step::PageIn(rx);
            break;
        }
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
            Outcome::PageIn(_) => {}
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

/// Requests and replies of a batch, freed by the connection so the owner
/// does not pay for deallocation.
#[derive(Default)]
pub struct Spent {
    args: Vec<Request>,
    replies: Vec<Reply>,
    /// `wbuf` ranges of the replies of commands that produced AOF records.
    pub durable: Vec<(usize, usize)>,
}

impl Spent {
    /// Drop the batch; argument vectors go back to the parser for reuse.
    pub fn clear(&mut self, parser: &mut RequestParser) {
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
pub fn misconf_replies(wbuf: &mut BytesMut, spans: &[(usize, usize)], error: &str, proto: u8) {
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
