//! Answers to blocked clients: the engine's wakes, encoded as the reply
//! the blocked command would have given, and sent on the channel the
//! command registered in the node (`Node::block_client`).
//!
//! Jobs are handed over at once, on the owner thread: if the connection
//! is gone (its receiver dropped before the send, or during it), the jobs
//! go back to the engine, which queues them again or serves them to the
//! next waiter, so a disconnect never loses a job. Every other reply is
//! returned, to be sent at the end of the owner's turn (`Turn::release`)
//! like every other answer of the turn, after the turn's AOF write; only
//! jobs need the send's result, to take them back.

use tokio::sync::oneshot;

use super::{addjob, getjob, queues, waitjob};
use crate::domain::job::JobId;
use crate::engine::Wake;
use crate::node::Node;
use crate::protocol::resp::Reply;

/// Replies to send at the end of the owner's turn.
pub type Later = Vec<(oneshot::Sender<Reply>, Reply)>;

/// Answer every wake the engine produced (call after each engine call,
/// before its effects are drained: jobs handed back may produce more).
#[must_use]
pub fn deliver_wakes(node: &mut Node, now: u64) -> Later {
    let mut later = Later::new();
    if !node.engine.has_wakes() {
        return later;
    }
    node.deliver_totals();
    let mut buf = std::mem::take(&mut node.wake_buf);
    loop {
        node.engine.take_wakes_into(&mut buf);
        if buf.is_empty() {
            break;
        }
        for (client, wake) in buf.drain(..) {
            let tx = node.waiters.remove(&client);
            match wake {
                Wake::Jobs(jobs) => {
                    let Some(tx) = tx.filter(|tx| !tx.is_closed()) else {
                        let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
                        node.engine.hand_back(&ids, now);
                        continue;
                    };
                    if let Err(reply) = tx.send(getjob::encode_jobs(jobs)) {
                        node.engine.hand_back(&getjob::job_ids(&reply), now);
                    }
                }
                other => {
                    if let Some(tx) = tx {
                        later.push((tx, encode(other)));
                    }
                }
            }
        }
    }
    node.wake_buf = buf;
    later
}

/// The reply a wake stands for.
pub fn encode(wake: Wake) -> Reply {
    match wake {
        Wake::Jobs(jobs) => getjob::encode_jobs(jobs),
        Wake::NoJobs => Reply::NullArray,
        Wake::Added(id) => addjob::encode_added(id),
        Wake::Error(e) => e.reply(),
        Wake::JobEnded(end) => waitjob::encode_end(end),
        Wake::Count { total, qstat } => queues::encode_count(total, qstat),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
    use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
    use crate::engine::Engine;

    const NOW: u64 = 1_700_000_000_000;

    fn node() -> Node {
        let e = Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, NOW);
        Node::new(e, crate::config::Config::default(), Vec::new(), 0, NOW)
    }

    /// A GETJOB on `q` that blocks, as the command registers it.
    fn block(node: &mut Node, client: u64) -> oneshot::Receiver<Reply> {
        let req = GetJobRequest {
            nohang: false,
            timeout: 0,
            count: 1,
            withcounters: false,
            queues: vec![Bytes::from_static(b"q")],
        };
        let out = node.engine.getjob(client, req, NOW);
        assert!(matches!(out, GetJobOutcome::Blocked));
        node.block_client(client)
    }

    fn add(node: &mut Node) -> JobId {
        let req = AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from_static(b"b"));
        let AddJobOutcome::Added(id) = node.engine.addjob(99, req, NOW) else {
            panic!("ADDJOB did not add");
        };
        node.engine.serve_ready(NOW);
        id
    }

    #[test]
    fn jobs_are_sent_at_once_and_other_replies_later() {
        let mut node = node();
        let mut rx = block(&mut node, 7);
        let id = add(&mut node);
        assert!(deliver_wakes(&mut node, NOW).is_empty());
        let reply = rx.try_recv().expect("jobs sent under the lock");
        assert_eq!(getjob::job_ids(&reply), vec![id]);
        assert!(node.waiters.is_empty());

        let mut rx = block(&mut node, 8);
        node.engine.flushall(NOW);
        let later = deliver_wakes(&mut node, NOW);
        assert!(rx.try_recv().is_err(), "sent before the lock is released");
        assert_eq!(later.len(), 1);
        for (tx, reply) in later {
            assert_eq!(reply, Reply::NullArray);
            let _ = tx.send(reply);
        }
        assert_eq!(rx.try_recv(), Ok(Reply::NullArray));
    }

    #[test]
    fn jobs_of_a_vanished_client_go_to_the_next_one() {
        let mut node = node();
        let gone = block(&mut node, 7);
        let mut rx = block(&mut node, 8);
        drop(gone);
        let id = add(&mut node);
        assert!(deliver_wakes(&mut node, NOW).is_empty());
        let reply = rx.try_recv().expect("handed to the next waiter");
        assert_eq!(getjob::job_ids(&reply), vec![id]);
        assert_eq!(node.engine.counters().delivered, 1);
    }

    #[test]
    fn jobs_of_a_vanished_client_are_queued_again() {
        let mut node = node();
        drop(block(&mut node, 7));
        add(&mut node);
        assert!(deliver_wakes(&mut node, NOW).is_empty());
        assert_eq!(node.engine.queue_len(b"q"), 1);
        assert_eq!(node.engine.counters().delivered, 0);
    }

    #[test]
    fn a_client_gone_is_forgotten_on_both_sides() {
        let mut node = node();
        let _rx = block(&mut node, 7);
        node.client_gone(7, NOW);
        assert!(node.waiters.is_empty());
        assert_eq!(node.engine.blocked_clients(), 0);
        add(&mut node);
        assert!(deliver_wakes(&mut node, NOW).is_empty());
        assert_eq!(node.engine.queue_len(b"q"), 1);
    }
}
