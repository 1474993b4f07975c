//! Producers waiting for room (our extension, docs/COMMANDS.md#addjob):
//! `ADDJOB ... MAXLEN <n> WAIT <ms>` on a queue that holds n jobs or more
//! here blocks instead of failing. The request is kept whole in the
//! waiter entry (queue and body copied out of the read buffer) and run
//! again, unchanged, when its turn comes.
//!
//! Producers of a queue are served in arrival order: a later producer
//! never overtakes an earlier one. Every job that leaves the queue (GETJOB,
//! DEQUEUE, ACKJOB, DELJOB, expiry, FLUSHALL) offers one slot: the first
//! producer gets it if the queue is now below its MAXLEN, so one freed
//! slot wakes at most one producer. Jobs leave through `Engine::pop` and
//! `Engine::dequeue`, which note the slot only while producers wait
//! anywhere (one length test on those paths; ADDJOB itself pays nothing
//! unless it carries WAIT). The slots are served after every command, bus
//! message and tick (`serve_ready`), so the re-run ADDJOB (and its
//! synchronous replication, if any) behaves as if sent at that moment.
//!
//! The wait ends with the job's ID (`Wake::Added`), Disque's MAXLEN error
//! when it expires (`tick`), or nothing if the client left
//! (`client_gone`). WAIT 0 waits forever, like GETJOB TIMEOUT 0.

use std::collections::{BTreeSet, VecDeque};

use bytes::Bytes;

use super::addjob::{AddJobOutcome, AddJobRequest};
use super::{ClientId, Engine, HashState, Map, Wake};
use crate::errors::WireError;

/// A producer blocked until its queue has room.
pub struct ProducerWaiter {
    /// The request as parsed, run again when served.
    req: AddJobRequest,
    maxlen: u64,
    /// u64::MAX = forever.
    deadline: u64,
    /// When the wait started (ms), for the total wait time.
    since: u64,
}

/// Every waiting producer, the FIFO of each queue, their timeouts, and
/// the slots freed since the last `serve_ready`.
pub struct Producers {
    waiting: Map<ClientId, ProducerWaiter>,
    /// Queue name (client-chosen: the engine's keyed hash) -> producers in
    /// arrival order. A queue has an entry only while producers wait on it.
    by_queue: Map<Bytes, VecDeque<ClientId>>,
    timeouts: BTreeSet<(u64, ClientId)>,
    /// One entry per job that left a queue with waiting producers.
    room: Vec<Bytes>,
}

impl Producers {
    pub fn new(keyed: HashState) -> Producers {
        Producers {
            waiting: Map::default(),
            by_queue: Map::with_hasher(keyed),
            timeouts: BTreeSet::new(),
            room: Vec::new(),
        }
    }

    /// Producers waiting on any queue.
    #[inline]
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Producers waiting on this queue.
    pub fn on_queue(&self, queue: &[u8]) -> usize {
        self.by_queue.get(queue).map_or(0, VecDeque::len)
    }

    /// A job left `queue`: a slot for its first producer, if any waits.
    pub fn note_room(&mut self, queue: &[u8]) {
        if let Some((name, _)) = self.by_queue.get_key_value(queue) {
            self.room.push(name.clone());
        }
    }

    pub fn has_room(&self) -> bool {
        !self.room.is_empty()
    }

    pub fn next_deadline(&self) -> Option<u64> {
        self.timeouts
            .first()
            .map(|x| x.0)
            .filter(|&t| t != u64::MAX)
    }
}

impl Engine {
    /// Block `client` until `req.queue` has room (`req.wait` is set).
    pub(crate) fn producer_block<B: AsRef<[u8]>>(
        &mut self,
        client: ClientId,
        req: AddJobRequest<B>,
        maxlen: u64,
        wait: u64,
        now: u64,
    ) -> AddJobOutcome {
        self.producer_gone(client, now);
        let req = req.into_owned();
        let deadline = if wait == 0 {
            u64::MAX
        } else {
            now.saturating_add(wait)
        };
        let p = &mut self.producers;
        p.by_queue
            .entry(req.queue.clone())
            .or_default()
            .push_back(client);
        p.timeouts.insert((deadline, client));
        p.waiting.insert(
            client,
            ProducerWaiter {
                req,
                maxlen,
                deadline,
                since: now,
            },
        );
        self.counters.producer_waits += 1;
        AddJobOutcome::Blocked
    }

    /// Whether a new WAIT producer on `queue` must queue behind others.
    #[inline]
    pub(crate) fn producers_ahead(&self, queue: &[u8]) -> bool {
        !self.producers.is_empty() && self.producers.by_queue.contains_key(queue)
    }

    /// Forget a waiting producer. Returns its entry. With `gave_up` (it
    /// left, or its wait expired) and the producer first in line, the next
    /// one is offered a slot: it may have a larger MAXLEN.
    fn producer_take(
        &mut self,
        client: ClientId,
        gave_up: bool,
        now: u64,
    ) -> Option<ProducerWaiter> {
        let p = &mut self.producers;
        let w = p.waiting.remove(&client)?;
        p.timeouts.remove(&(w.deadline, client));
        if let Some(fifo) = p.by_queue.get_mut(&w.req.queue[..]) {
            let first = fifo.front() == Some(&client);
            fifo.retain(|&c| c != client);
            if fifo.is_empty() {
                p.by_queue.remove(&w.req.queue[..]);
            } else if first && gave_up {
                p.room.push(w.req.queue.clone());
            }
        }
        self.counters.producer_wait_ms += now.saturating_sub(w.since);
        Some(w)
    }

    /// A client that left: drop its waiting ADDJOB, if any.
    pub(crate) fn producer_gone(&mut self, client: ClientId, now: u64) {
        if !self.producers.is_empty() {
            self.producer_take(client, true, now);
        }
    }

    /// Serve the slots freed since the last call: each wakes at most the
    /// first producer of its queue, if the queue is below its MAXLEN.
    pub(crate) fn serve_producers(&mut self, now: u64) {
        let mut room = std::mem::take(&mut self.producers.room);
        // In the order the slots were freed.
        for name in room.drain(..) {
            let Some(&client) = self
                .producers
                .by_queue
                .get(&name[..])
                .and_then(VecDeque::front)
            else {
                continue;
            };
            let Some(maxlen) = self.producers.waiting.get(&client).map(|w| w.maxlen) else {
                continue;
            };
            if self.queue_len(&name) as u64 >= maxlen {
                continue;
            }
            let Some(w) = self.producer_take(client, false, now) else {
                continue;
            };
            self.counters.producers_served += 1;
            let mut req = w.req;
            // Its turn: no queueing behind the others again.
            req.wait = None;
            match self.addjob(client, req, now) {
                AddJobOutcome::Added(id) => self.wake(client, Wake::Added(id)),
                // Now waiting for replication, as a plain ADDJOB would;
                // that wait ends with its own wake.
                AddJobOutcome::Blocked => {}
                AddJobOutcome::Error(e) => self.wake(client, Wake::Error(e)),
            }
        }
        // Keep the allocation unless slots were freed meanwhile.
        if self.producers.room.is_empty() {
            self.producers.room = room;
        }
    }

    /// Time out waiting producers: Disque's MAXLEN error.
    pub(crate) fn expire_producers(&mut self, now: u64) {
        while let Some(&(t, client)) = self.producers.timeouts.first() {
            // Strictly after the deadline, as GETJOB's timeout.
            if t >= now {
                break;
            }
            if self.producer_take(client, true, now).is_some() {
                self.counters.producer_timeouts += 1;
                self.wake(client, Wake::Error(WireError::MaxlenReached));
            } else {
                self.producers.timeouts.remove(&(t, client));
            }
        }
    }

    /// Producers waiting for room, all queues.
    pub fn producers_waiting(&self) -> usize {
        self.producers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::JobId;
    use crate::engine::getjob::{GetJobOutcome, GetJobRequest};

    fn engine() -> Engine {
        Engine::new(*b"ad249f8c9b2240cd45f72fd233bd3d5a42a6709d", 7711, 1, 1000)
    }

    fn req(body: &'static [u8], maxlen: u64, wait: Option<u64>) -> AddJobRequest {
        AddJobRequest {
            maxlen: Some(maxlen),
            wait,
            ..AddJobRequest::new(Bytes::from_static(b"q"), Bytes::from_static(body))
        }
    }

    fn add(e: &mut Engine, client: ClientId, r: AddJobRequest, now: u64) -> AddJobOutcome {
        let out = e.addjob(client, r, now);
        e.serve_ready(now);
        out
    }

    fn added(out: AddJobOutcome) -> JobId {
        match out {
            AddJobOutcome::Added(id) => id,
            _ => panic!("not added"),
        }
    }

    /// GETJOB NOHANG on q: the bodies popped.
    fn take(e: &mut Engine, count: u64, now: u64) -> Vec<Bytes> {
        let r = GetJobRequest {
            nohang: true,
            timeout: 0,
            count,
            withcounters: false,
            queues: vec![Bytes::from_static(b"q")],
        };
        let out = e.getjob(1, r, now);
        e.serve_ready(now);
        match out {
            GetJobOutcome::Jobs(jobs) => jobs.into_iter().filter_map(|j| j.body).collect(),
            _ => Vec::new(),
        }
    }

    fn woken_ids(e: &mut Engine) -> Vec<ClientId> {
        e.take_wakes()
            .into_iter()
            .map(|(c, w)| {
                assert!(matches!(w, Wake::Added(_)), "client {c}: {w:?}");
                c
            })
            .collect()
    }

    #[test]
    fn without_wait_maxlen_fails_at_once() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 1, None), 1000));
        assert!(matches!(
            add(&mut e, 10, req(b"b", 1, None), 1000),
            AddJobOutcome::Error(WireError::MaxlenReached)
        ));
        assert_eq!(e.producers_waiting(), 0);
    }

    #[test]
    fn producers_are_woken_in_order_one_per_freed_slot() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 2, None), 1000));
        added(add(&mut e, 9, req(b"b", 2, None), 1000));
        for (c, body) in [(11, b"p1"), (12, b"p2"), (13, b"p3")] {
            let out = add(&mut e, c, req(body, 2, Some(0)), 1001);
            assert!(matches!(out, AddJobOutcome::Blocked));
        }
        assert_eq!(e.producers_waiting(), 3);
        assert_eq!(e.qstat(b"q", 1002).map(|s| s.producers), Some(3));
        assert!(e.take_wakes().is_empty());

        // One slot: only the first producer, whose job fills it again.
        assert_eq!(take(&mut e, 1, 1002), vec![Bytes::from_static(b"a")]);
        assert_eq!(woken_ids(&mut e), vec![11]);
        assert_eq!(e.queue_len(b"q"), 2);
        assert_eq!(e.producers_waiting(), 2);

        // Two slots at once: the next two, in arrival order.
        assert_eq!(take(&mut e, 2, 1003).len(), 2);
        assert_eq!(woken_ids(&mut e), vec![12, 13]);
        assert_eq!(e.producers_waiting(), 0);
        assert_eq!(
            take(&mut e, 10, 1004),
            vec![Bytes::from_static(b"p2"), Bytes::from_static(b"p3")]
        );
        let c = e.counters();
        assert_eq!((c.producer_waits, c.producers_served), (3, 3));
        assert_eq!(c.producer_wait_ms, 1 + 2 + 2);
    }

    #[test]
    fn a_new_producer_does_not_overtake_a_waiting_one() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 1, None), 1000));
        assert!(matches!(
            add(&mut e, 11, req(b"p1", 1, Some(0)), 1000),
            AddJobOutcome::Blocked
        ));
        // Room for 5, but producer 11 came first: 12 waits behind it.
        assert!(matches!(
            add(&mut e, 12, req(b"p2", 5, Some(0)), 1000),
            AddJobOutcome::Blocked
        ));
        take(&mut e, 1, 1001);
        // 11 fills the slot; 12's MAXLEN 5 still has room, but only one
        // slot was freed.
        assert_eq!(woken_ids(&mut e), vec![11]);
        take(&mut e, 1, 1002);
        assert_eq!(woken_ids(&mut e), vec![12]);
    }

    #[test]
    fn the_wait_times_out_with_disques_maxlen_error() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 1, None), 1000));
        assert!(matches!(
            add(&mut e, 11, req(b"p", 1, Some(300)), 1000),
            AddJobOutcome::Blocked
        ));
        assert_eq!(e.next_deadline().map(|t| t <= 1300), Some(true));
        e.tick(1300);
        assert!(e.take_wakes().is_empty(), "never early");
        e.tick(1301);
        assert_eq!(
            e.take_wakes(),
            vec![(11, Wake::Error(WireError::MaxlenReached))]
        );
        assert_eq!(e.producers_waiting(), 0);
        assert_eq!(e.counters().producer_timeouts, 1);
        assert_eq!(e.counters().producer_wait_ms, 301);
        // Nothing left: a freed slot wakes nobody.
        take(&mut e, 1, 1302);
        assert!(e.take_wakes().is_empty());
    }

    #[test]
    fn a_producer_that_left_leaves_nothing() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 1, None), 1000));
        assert!(matches!(
            add(&mut e, 11, req(b"gone", 1, Some(0)), 1000),
            AddJobOutcome::Blocked
        ));
        assert!(matches!(
            add(&mut e, 12, req(b"next", 1, Some(0)), 1000),
            AddJobOutcome::Blocked
        ));
        e.client_gone(11, 1001);
        assert_eq!(e.producers_waiting(), 1);
        assert_eq!(e.blocked_clients(), 1);
        take(&mut e, 1, 1002);
        assert_eq!(woken_ids(&mut e), vec![12]);
        assert_eq!(take(&mut e, 10, 1003), vec![Bytes::from_static(b"next")]);
        assert_eq!(e.producers.next_deadline(), None);
    }

    #[test]
    fn deletions_acks_and_flushall_free_slots_too() {
        let mut e = engine();
        let a = added(add(&mut e, 9, req(b"a", 2, None), 1000));
        let b = added(add(&mut e, 9, req(b"b", 2, None), 1000));
        for c in [11, 12, 13] {
            assert!(matches!(
                add(&mut e, c, req(b"p", 2, Some(0)), 1000),
                AddJobOutcome::Blocked
            ));
        }
        let h = e.lookup(&a).expect("job a");
        e.delete_job(h, 1001);
        e.serve_ready(1001);
        assert_eq!(woken_ids(&mut e), vec![11]);
        let h = e.lookup(&b).expect("job b");
        e.acknowledge(h, 1002);
        e.serve_ready(1002);
        assert_eq!(woken_ids(&mut e), vec![12]);
        e.flushall(1003);
        e.serve_ready(1003);
        assert_eq!(woken_ids(&mut e), vec![13]);
        assert_eq!(e.queue_len(b"q"), 1);
    }

    #[test]
    fn when_the_first_producer_gives_up_the_next_may_fit() {
        let mut e = engine();
        added(add(&mut e, 9, req(b"a", 1, None), 1000));
        assert!(matches!(
            add(&mut e, 11, req(b"p1", 1, Some(100)), 1000),
            AddJobOutcome::Blocked
        ));
        // Fits under its own MAXLEN, but waits behind 11.
        assert!(matches!(
            add(&mut e, 12, req(b"p2", 5, Some(0)), 1000),
            AddJobOutcome::Blocked
        ));
        e.tick(1101);
        let wakes = e.take_wakes();
        assert_eq!(wakes.len(), 2, "{wakes:?}");
        assert_eq!(wakes[0], (11, Wake::Error(WireError::MaxlenReached)));
        assert!(matches!(wakes[1], (12, Wake::Added(_))));
        assert_eq!(e.queue_len(b"q"), 2);
    }
}
