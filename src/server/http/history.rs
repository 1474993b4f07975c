//! The dashboard's history: the last hour of the node's job flow and
//! memory, and of a few queues', sampled by the binary itself.
//!
//! A sampler task (started with the HTTP endpoint) wakes every
//! [`INTERVAL`] and copies the counters in one `Shared::call`: the job
//! counters, the queued total and the per-queue stats (`queue_stats`, as
//! one `/metrics` scrape does). RSS is read from `/proc` after the call,
//! off the owner thread. Rates (jobs per second) are computed at sampling
//! time from the change since the previous sample, so a point is a few
//! numbers and the JSON is ready to draw.
//!
//! Memory is bounded: one ring of [`POINTS`] node points (one hour at
//! 5 s), and at most [`MAX_QUEUES`] per-queue rings of as many points.
//! Tracked queues are the [`BUSY_PER_SAMPLE`] busiest of each sample
//! (most jobs in + out since the queue was created) and the queues whose
//! history a dashboard asked for; a tracked queue that is neither for
//! [`FORGET_MS`] is forgotten, and when all slots are taken the one
//! least recently busy or viewed makes room. Worst case, 64 B × 720 for
//! the node plus 24 B × 720 × 16 for the queues (rings grow to exactly
//! 720 points): about 320 KiB, plus the queue names.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};

use crate::node::Node;
use crate::server::Shared;

/// Time between two samples.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// Points kept per series: one hour at `INTERVAL`.
pub const POINTS: usize = 720;
/// Most queues with a history at once.
pub const MAX_QUEUES: usize = 16;
/// The busiest queues of each sample are tracked (or kept).
pub const BUSY_PER_SAMPLE: usize = 8;
/// A tracked queue neither busy nor viewed for this long is forgotten.
pub const FORGET_MS: u64 = 3_600_000;
/// Longest accepted queue name for a history request (longer names are
/// answered, never tracked).
const MAX_NAME: usize = 1024;

/// A bounded FIFO: pushing onto a full ring drops the oldest point.
#[derive(Debug)]
pub struct Ring<T> {
    buf: VecDeque<T>,
    cap: usize,
}

impl<T> Ring<T> {
    pub fn new(cap: usize) -> Self {
        // Grows to exactly `cap` (a doubling VecDeque would overshoot).
        Ring {
            buf: VecDeque::with_capacity(cap.clamp(1, 64)),
            cap: cap.max(1),
        }
    }

    pub fn push(&mut self, v: T) {
        if self.buf.len() == self.cap {
            self.buf.pop_front();
        } else if self.buf.len() == self.buf.capacity() {
            let more = self.buf.len().min(self.cap - self.buf.len());
            self.buf.reserve_exact(more);
        }
        self.buf.push_back(v);
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.buf.iter()
    }
}

/// One node sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodePoint {
    /// Unix time (ms).
    pub t: u64,
    pub added: f32,
    pub delivered: f32,
    pub acked: f32,
    pub queued: u64,
    pub used_memory: u64,
    pub rss: u64,
    /// Bytes spilled to disk; None while the node has no spill feature.
    pub spilled: Option<u64>,
}

/// One queue sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueuePoint {
    pub t: u64,
    pub jobs_in: f32,
    pub jobs_out: f32,
    pub len: u64,
}

/// One queue's counters as copied from the node.
#[derive(Clone, Debug, PartialEq)]
pub struct RawQueue {
    pub name: Vec<u8>,
    pub jobs_in: u64,
    pub jobs_out: u64,
    pub len: u64,
}

/// What one sample copies from the node (owned, to leave the owner).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Raw {
    pub t: u64,
    pub added: u64,
    pub delivered: u64,
    pub acked: u64,
    pub queued: u64,
    pub used_memory: u64,
    pub spilled: Option<u64>,
    /// The tracked queues that exist and the busiest ones.
    pub queues: Vec<RawQueue>,
}

impl Raw {
    /// Copy the counters (runs on the owner thread): `tracked` are the
    /// queues with a history, always included when they exist.
    pub fn take(node: &Node, now: u64, tracked: &[Vec<u8>]) -> Raw {
        let c = node.engine.counters();
        let mut stats = node.engine.queue_stats(now);
        let queued = stats.iter().map(|q| q.len).sum();
        let activity = |q: &crate::engine::counters::QueueStat| q.jobs_in + q.jobs_out;
        let mut queues: Vec<RawQueue> = Vec::new();
        // Tracked ones first (a linear scan of a handful of names).
        stats.retain(|q| {
            if tracked.contains(&q.name) {
                queues.push(RawQueue {
                    name: q.name.clone(),
                    jobs_in: q.jobs_in,
                    jobs_out: q.jobs_out,
                    len: q.len,
                });
                false
            } else {
                true
            }
        });
        if stats.len() > BUSY_PER_SAMPLE {
            stats.select_nth_unstable_by(BUSY_PER_SAMPLE - 1, |a, b| {
                activity(b)
                    .cmp(&activity(a))
                    .then_with(|| a.name.cmp(&b.name))
            });
            stats.truncate(BUSY_PER_SAMPLE);
        }
        queues.extend(
            stats
                .into_iter()
                .filter(|q| activity(q) > 0 || q.len > 0)
                .map(|q| RawQueue {
                    name: q.name,
                    jobs_in: q.jobs_in,
                    jobs_out: q.jobs_out,
                    len: q.len,
                }),
        );
        Raw {
            t: now,
            added: c.added,
            delivered: c.delivered,
            acked: c.acked,
            queued,
            used_memory: crate::os::allocator::allocated() as u64,
            spilled: spilled_bytes(node),
            queues,
        }
    }
}

/// Hook for a future spill-to-disk feature: the bytes of job data it
/// holds on disk. The node has no such feature, so there is nothing to
/// chart (the API says `null` and the dashboard hides the chart).
fn spilled_bytes(_node: &Node) -> Option<u64> {
    None
}

#[derive(Debug)]
struct QueueHistory {
    ring: Ring<QueuePoint>,
    /// (t, jobs_in, jobs_out) of the previous sample.
    prev: Option<(u64, u64, u64)>,
    /// Last time (ms) this queue was among the busiest or viewed.
    interest: u64,
}

/// The node's and the tracked queues' rings.
#[derive(Debug)]
pub struct History {
    node: Ring<NodePoint>,
    /// (t, added, delivered, acked) of the previous sample.
    prev: Option<(u64, u64, u64, u64)>,
    queues: HashMap<Vec<u8>, QueueHistory>,
    taken: u64,
    points: usize,
    max_queues: usize,
}

impl Default for History {
    fn default() -> Self {
        History::new(POINTS, MAX_QUEUES)
    }
}

fn rate(now: u64, prev_t: u64, cur: u64, prev: u64) -> f32 {
    let dt = now.saturating_sub(prev_t);
    if dt == 0 {
        return 0.0;
    }
    (cur.saturating_sub(prev) as f64 * 1000.0 / dt as f64) as f32
}

/// A rate as JSON, rounded to 0.001/s (f32 noise kept out of the API).
fn rate_json(r: f32) -> Value {
    json!((f64::from(r) * 1000.0).round() / 1000.0)
}

impl History {
    pub fn new(points: usize, max_queues: usize) -> Self {
        History {
            node: Ring::new(points),
            prev: None,
            queues: HashMap::new(),
            taken: 0,
            points,
            max_queues: max_queues.max(1),
        }
    }

    /// Names of the queues with a history (for the next `Raw::take`).
    pub fn tracked(&self) -> Vec<Vec<u8>> {
        self.queues.keys().cloned().collect()
    }

    /// A dashboard asked for this queue's history: track it from the next
    /// sample on (if there is room, making room if needed).
    pub fn viewed(&mut self, name: &[u8], now: u64) {
        if name.len() > MAX_NAME {
            return;
        }
        if let Some(q) = self.queues.get_mut(name) {
            q.interest = now;
            return;
        }
        self.admit(name.to_vec(), now);
    }

    fn admit(&mut self, name: Vec<u8>, now: u64) -> bool {
        if self.queues.len() >= self.max_queues {
            // Make room by dropping the least recently interesting queue,
            // unless every one was busy or viewed just now.
            let Some(victim) = self
                .queues
                .iter()
                .filter(|(_, q)| q.interest < now)
                .min_by(|a, b| a.1.interest.cmp(&b.1.interest).then_with(|| a.0.cmp(b.0)))
                .map(|(n, _)| n.clone())
            else {
                return false;
            };
            self.queues.remove(&victim);
        }
        self.queues.insert(
            name,
            QueueHistory {
                ring: Ring::new(self.points),
                prev: None,
                interest: now,
            },
        );
        true
    }

    /// Store one sample.
    pub fn record(&mut self, raw: Raw, rss: u64) {
        let t = raw.t;
        let (added, delivered, acked) = match self.prev {
            Some((pt, a, d, k)) => (
                rate(t, pt, raw.added, a),
                rate(t, pt, raw.delivered, d),
                rate(t, pt, raw.acked, k),
            ),
            None => (0.0, 0.0, 0.0),
        };
        self.prev = Some((t, raw.added, raw.delivered, raw.acked));
        self.node.push(NodePoint {
            t,
            added,
            delivered,
            acked,
            queued: raw.queued,
            used_memory: raw.used_memory,
            rss,
            spilled: raw.spilled,
        });
        self.taken += 1;

        // The busiest of this sample (Raw lists tracked queues first, then
        // the busiest untracked ones).
        let mut seen: HashMap<&[u8], &RawQueue> = HashMap::new();
        for q in &raw.queues {
            seen.insert(&q.name, q);
        }
        let mut busy: Vec<&RawQueue> = raw.queues.iter().collect();
        busy.sort_by(|a, b| {
            (b.jobs_in + b.jobs_out)
                .cmp(&(a.jobs_in + a.jobs_out))
                .then_with(|| a.name.cmp(&b.name))
        });
        busy.retain(|q| q.jobs_in + q.jobs_out > 0 || q.len > 0);
        busy.truncate(BUSY_PER_SAMPLE);
        // Refresh the tracked ones first, so a newcomer cannot evict a
        // queue that is busy right now.
        busy.retain(|q| match self.queues.get_mut(&q.name) {
            Some(h) => {
                h.interest = t;
                false
            }
            None => true,
        });
        for q in busy {
            self.admit(q.name.clone(), t);
        }
        self.queues
            .retain(|_, h| t.saturating_sub(h.interest) < FORGET_MS);
        for (name, h) in self.queues.iter_mut() {
            // A queue that is gone (empty queues are dropped) reads as
            // empty and idle; its totals restart from 0 if it comes back.
            let (cin, cout, len) = seen
                .get(name.as_slice())
                .map_or((0, 0, 0), |q| (q.jobs_in, q.jobs_out, q.len));
            let (rin, rout) = match h.prev {
                Some((pt, pin, pout)) => (rate(t, pt, cin, pin), rate(t, pt, cout, pout)),
                None => (0.0, 0.0),
            };
            h.prev = Some((t, cin, cout));
            h.ring.push(QueuePoint {
                t,
                jobs_in: rin,
                jobs_out: rout,
                len,
            });
        }
    }

    /// `/api/history`.
    pub fn node_json(&self) -> Value {
        let pts: Vec<&NodePoint> = self.node.iter().collect();
        let spilled = if pts.iter().any(|p| p.spilled.is_some()) {
            json!(pts.iter().map(|p| p.spilled).collect::<Vec<_>>())
        } else {
            Value::Null
        };
        json!({
            "interval_ms": INTERVAL.as_millis() as u64,
            "capacity": self.points,
            "samples": pts.len(),
            "taken": self.taken,
            "t": pts.iter().map(|p| p.t).collect::<Vec<_>>(),
            "added_per_s": pts.iter().map(|p| rate_json(p.added)).collect::<Vec<_>>(),
            "delivered_per_s": pts.iter().map(|p| rate_json(p.delivered)).collect::<Vec<_>>(),
            "acked_per_s": pts.iter().map(|p| rate_json(p.acked)).collect::<Vec<_>>(),
            "queued": pts.iter().map(|p| p.queued).collect::<Vec<_>>(),
            "used_memory": pts.iter().map(|p| p.used_memory).collect::<Vec<_>>(),
            "rss": pts.iter().map(|p| p.rss).collect::<Vec<_>>(),
            "spilled": spilled,
            "tracked_queues": self.queues.len(),
            "max_queues": self.max_queues,
        })
    }

    /// `/api/queues/<name>/history` (empty until the next samples when
    /// the queue was not tracked yet).
    pub fn queue_json(&self, name: &[u8]) -> Value {
        let q = self.queues.get(name);
        let pts: Vec<&QueuePoint> = q.map(|q| q.ring.iter().collect()).unwrap_or_default();
        json!({
            "name": String::from_utf8_lossy(name),
            "tracked": q.is_some(),
            "interval_ms": INTERVAL.as_millis() as u64,
            "capacity": self.points,
            "samples": pts.len(),
            "t": pts.iter().map(|p| p.t).collect::<Vec<_>>(),
            "in_per_s": pts.iter().map(|p| rate_json(p.jobs_in)).collect::<Vec<_>>(),
            "out_per_s": pts.iter().map(|p| rate_json(p.jobs_out)).collect::<Vec<_>>(),
            "len": pts.iter().map(|p| p.len).collect::<Vec<_>>(),
        })
    }
}

/// The history shared by the sampler and the API handlers.
#[derive(Clone, Default)]
pub(crate) struct Shelf(Arc<Mutex<History>>);

impl Shelf {
    pub fn lock(&self) -> MutexGuard<'_, History> {
        // A panic while holding it cannot leave a ring half-pushed in a
        // way that matters to a chart: keep serving.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sampler task: one sample now, then one per `INTERVAL`, until
/// shutdown.
pub(super) async fn sampler(shared: Arc<Shared>, shelf: Shelf) {
    let mut shutdown = shared.shutdown_rx();
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let tracked = shelf.lock().tracked();
        let raw = shared
            .call(move |node, now| Raw::take(node, now, &tracked))
            .await;
        let rss = crate::os::sys::rss_bytes();
        shelf.lock().record(raw, rss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_points_in_order() {
        let mut r = Ring::new(3);
        assert_eq!(r.iter().count(), 0);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.iter().count(), 3);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
        let mut one = Ring::new(0);
        one.push(1);
        one.push(2);
        assert_eq!(one.iter().copied().collect::<Vec<_>>(), vec![2]);
    }

    fn raw(t: u64, added: u64, queues: &[(&str, u64, u64, u64)]) -> Raw {
        Raw {
            t,
            added,
            delivered: added / 2,
            acked: 0,
            queued: 0,
            used_memory: 1000,
            spilled: None,
            queues: queues
                .iter()
                .map(|(n, i, o, l)| RawQueue {
                    name: n.as_bytes().to_vec(),
                    jobs_in: *i,
                    jobs_out: *o,
                    len: *l,
                })
                .collect(),
        }
    }

    #[test]
    fn points_are_small_and_rings_grow_to_exactly_their_capacity() {
        assert!(std::mem::size_of::<NodePoint>() <= 64);
        assert!(std::mem::size_of::<QueuePoint>() <= 24);
        let mut r = Ring::new(POINTS);
        for i in 0..POINTS * 2 {
            r.push(i);
        }
        assert_eq!(r.iter().count(), POINTS);
        assert!(r.buf.capacity() < POINTS + 64, "{}", r.buf.capacity());
    }

    #[test]
    fn rates_come_from_the_previous_sample_and_the_ring_is_bounded() {
        let mut h = History::new(4, 2);
        h.record(raw(1000, 0, &[]), 5);
        h.record(raw(6000, 50, &[]), 5);
        h.record(raw(11000, 60, &[]), 5);
        let v = h.node_json();
        assert_eq!(v["samples"], 3);
        assert_eq!(v["added_per_s"], json!([0.0, 10.0, 2.0]));
        assert_eq!(v["delivered_per_s"], json!([0.0, 5.0, 1.0]));
        assert_eq!(v["spilled"], Value::Null);
        for i in 0..10 {
            h.record(raw(16000 + i * 5000, 60, &[]), 5);
        }
        let v = h.node_json();
        assert_eq!(v["samples"], 4);
        assert_eq!(v["taken"], 13);
        assert_eq!(v["t"][3], 16000 + 9 * 5000);
    }

    #[test]
    fn queues_tracked_are_bounded_busy_or_viewed() {
        let mut h = History::new(10, 2);
        h.viewed(b"viewed", 500);
        assert_eq!(h.queue_json(b"viewed")["tracked"], true);
        assert_eq!(h.queue_json(b"viewed")["samples"], 0);
        // Busy queues take the free slot; the viewed one stays (seen now).
        h.record(
            raw(
                1000,
                0,
                &[("a", 10, 0, 10), ("b", 5, 0, 5), ("viewed", 1, 1, 0)],
            ),
            0,
        );
        assert_eq!(h.tracked().len(), 2);
        let v = h.queue_json(b"viewed");
        assert_eq!(v["samples"], 1);
        // a is busiest, so it took the second slot
        assert_eq!(h.queue_json(b"a")["tracked"], true);
        h.record(
            raw(
                3000,
                0,
                &[("a", 30, 10, 20), ("b", 5, 0, 5), ("viewed", 1, 1, 0)],
            ),
            0,
        );
        let a = h.queue_json(b"a");
        assert_eq!(a["in_per_s"], json!([0.0, 10.0]));
        assert_eq!(a["out_per_s"], json!([0.0, 5.0]));
        assert_eq!(a["len"], json!([10, 20]));
        // A gone queue reads as empty and idle.
        h.record(raw(5000, 0, &[("viewed", 1, 1, 0)]), 0);
        assert_eq!(h.queue_json(b"a")["len"], json!([10, 20, 0]));
        // Viewing another queue evicts the least recently interesting one.
        h.viewed(b"other", 6000);
        assert_eq!(h.tracked().len(), 2);
        assert_eq!(h.queue_json(b"other")["tracked"], true);
        // Forgotten after FORGET_MS without interest.
        h.record(raw(6000 + FORGET_MS, 0, &[]), 0);
        assert!(h.tracked().is_empty());
        assert_eq!(h.queue_json(b"unknown")["tracked"], false);
    }
}
