//! Per-queue delivery limits (QLIMIT): a rate limit (at most N deliveries
//! in any window of W ms) and a concurrency cap (at most M jobs delivered
//! and not yet acknowledged), set once for the whole cluster.
//!
//! The setting is cluster state: it carries a version (the wall-clock ms
//! of the QLIMIT call, ties broken by the origin node's ID), the newest
//! version wins everywhere, it travels in a QLIMIT bus message and is
//! re-broadcast periodically so nodes that missed it converge, and it is
//! kept in nodes.conf (`qlimit` lines) across restarts. Removing a limit
//! keeps a versioned "none" entry so an older setting cannot come back.
//!
//! Enforcement is local: each node serves a fixed share of each limit,
//! the limit divided among the cluster's known nodes (handshakes
//! excluded) by the rank of their IDs, so the shares add up to exactly
//! the limit when the nodes agree on the membership. A partition does not
//! change the membership, so each side keeps its shares and the cluster
//! total never exceeds the limit; the unreachable side's shares are
//! simply unused until it comes back or is forgotten.

use std::collections::VecDeque;

use bytes::Bytes;

use super::{BusOut, Engine, Map};
use crate::domain::job::{JobId, JobState};

/// Largest N of a rate limit: a node keeps one timestamp per delivery in
/// the window, so the bound is the bound on that memory.
pub const MAX_RATE: u32 = 1_000_000;
/// Largest concurrency cap (one job ID kept per delivered job).
pub const MAX_INFLIGHT: u32 = 1_000_000;
/// Largest window, one day.
pub const MAX_INTERVAL_MS: u64 = 86_400_000;
/// How often every limit is sent again to the linked peers.
const REBROADCAST_MS: u64 = 5_000;

/// One queue's cluster-wide limit. `rate == 0` and `inflight == 0` both:
/// no limit (a removal, kept for its version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimit {
    /// Deliveries allowed per `interval_ms` window, cluster-wide (0: none).
    pub rate: u32,
    pub interval_ms: u64,
    /// Delivered-but-unacknowledged jobs allowed, cluster-wide (0: none).
    pub inflight: u32,
    /// Wall-clock ms of the QLIMIT call that set it.
    pub version: u64,
    /// The node that took the QLIMIT call (tie break).
    pub origin: [u8; 40],
}

impl Default for QueueLimit {
    fn default() -> Self {
        QueueLimit {
            rate: 0,
            interval_ms: 0,
            inflight: 0,
            version: 0,
            origin: [b'0'; 40],
        }
    }
}

impl QueueLimit {
    /// Whether this setting supersedes `other`.
    pub fn newer_than(&self, other: &QueueLimit) -> bool {
        (self.version, self.origin) > (other.version, other.origin)
    }

    pub fn is_none(&self) -> bool {
        self.rate == 0 && self.inflight == 0
    }

    /// Bus payload: u64 version, origin[40], u32 rate, u64 interval,
    /// u32 inflight, u32 qlen, queue.
    pub fn encode(&self, queue: &[u8]) -> Bytes {
        let mut v = Vec::with_capacity(68 + queue.len());
        v.extend_from_slice(&self.version.to_be_bytes());
        v.extend_from_slice(&self.origin);
        v.extend_from_slice(&self.rate.to_be_bytes());
        v.extend_from_slice(&self.interval_ms.to_be_bytes());
        v.extend_from_slice(&self.inflight.to_be_bytes());
        v.extend_from_slice(&(queue.len() as u32).to_be_bytes());
        v.extend_from_slice(queue);
        Bytes::from(v)
    }

    /// The inverse of `encode`; None for a malformed or out-of-range payload.
    pub fn decode(p: &Bytes) -> Option<(Bytes, QueueLimit)> {
        let u64_at = |o: usize| -> Option<u64> {
            Some(u64::from_be_bytes(p.get(o..o + 8)?.try_into().ok()?))
        };
        let u32_at = |o: usize| -> Option<u32> {
            Some(u32::from_be_bytes(p.get(o..o + 4)?.try_into().ok()?))
        };
        let version = u64_at(0)?;
        let origin: [u8; 40] = p.get(8..48)?.try_into().ok()?;
        let rate = u32_at(48)?;
        let interval_ms = u64_at(52)?;
        let inflight = u32_at(60)?;
        let qlen = u32_at(64)? as usize;
        if p.len() != 68 + qlen {
            return None;
        }
        let l = QueueLimit {
            rate,
            interval_ms,
            inflight,
            version,
            origin,
        };
        l.valid().then(|| (p.slice(68..), l))
    }

    /// Within the bounds QLIMIT accepts.
    pub fn valid(&self) -> bool {
        self.rate <= MAX_RATE
            && self.inflight <= MAX_INFLIGHT
            && (self.rate == 0 || (1..=MAX_INTERVAL_MS).contains(&self.interval_ms))
    }
}

/// This node's part of a limit: `total` split over `nodes` nodes, the
/// first `total % nodes` ranks taking one more, so the parts add up to
/// `total` exactly (and a node may get 0 when the limit is below the
/// number of nodes).
pub fn share(total: u32, nodes: usize, rank: usize) -> u32 {
    let nodes = nodes.max(1) as u64;
    let total = u64::from(total);
    let base = total / nodes;
    let extra = u64::from((rank as u64) < total % nodes);
    (base + extra) as u32
}

/// The local limiter of one queue: this node's shares and what it used.
#[derive(Debug, Default)]
pub struct Limiter {
    /// Deliveries allowed here per window.
    pub rate_share: u32,
    pub interval_ms: u64,
    /// Delivered-unacknowledged jobs allowed here (0 with `capped`: none).
    pub inflight_share: u32,
    pub rate_limited: bool,
    pub capped: bool,
    /// Delivery times in the current window, oldest first.
    sent: VecDeque<u64>,
    /// Jobs delivered here that may still be unacknowledged.
    out: Vec<JobId>,
    /// `now` of the last sweep of `out` (sweeps at most once per ms).
    swept_at: u64,
}

impl Limiter {
    fn prune_window(&mut self, now: u64) {
        while let Some(&t) = self.sent.front() {
            if t.saturating_add(self.interval_ms) > now {
                break;
            }
            self.sent.pop_front();
        }
    }

    /// Whether the rate limit allows one more delivery at `now`.
    pub fn rate_allows(&mut self, now: u64) -> bool {
        if !self.rate_limited {
            return true;
        }
        self.prune_window(now);
        (self.sent.len() as u64) < u64::from(self.rate_share)
    }

    /// When the rate window next has room (None: now, or unlimited).
    pub fn rate_opens_at(&self) -> Option<u64> {
        if !self.rate_limited || (self.sent.len() as u64) < u64::from(self.rate_share) {
            return None;
        }
        if self.rate_share == 0 {
            return None;
        }
        // The oldest delivery of a full window leaves it first.
        let k = self.sent.len() - self.rate_share as usize;
        self.sent
            .get(k)
            .map(|&t| t.saturating_add(self.interval_ms))
    }

    /// Whether the cap allows one more delivery; `active` says whether a
    /// job still counts (delivered here and not acknowledged since).
    pub fn cap_allows(&mut self, now: u64, active: impl Fn(&JobId) -> bool) -> bool {
        if !self.capped {
            return true;
        }
        if self.out.len() < self.inflight_share as usize {
            return true;
        }
        if self.swept_at != now {
            self.swept_at = now;
            self.out.retain(|id| active(id));
        }
        self.out.len() < self.inflight_share as usize
    }

    /// Count a delivery.
    pub fn record(&mut self, id: JobId, now: u64) {
        if self.rate_limited {
            self.sent.push_back(now);
        }
        if self.capped {
            self.out.push(id);
        }
    }

    /// Deliveries in the current window and jobs counted as in flight.
    pub fn usage(&self) -> (usize, usize) {
        (self.sent.len(), self.out.len())
    }
}

/// A queue's limit as seen here: the cluster setting and the local limiter.
#[derive(Debug, Default)]
pub struct LimitEntry {
    pub limit: QueueLimit,
    pub local: Limiter,
}

/// Every queue limit known here.
#[derive(Debug, Default)]
pub struct Limits {
    pub table: Map<Bytes, LimitEntry>,
    /// Known-node count and rank the shares were computed for.
    shares_for: (usize, usize),
    last_bcast: u64,
}

/// What QSTAT shows of a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitView {
    pub limit: QueueLimit,
    pub rate_share: u32,
    pub inflight_share: u32,
    /// Deliveries here in the current window.
    pub window_used: u64,
    /// Jobs delivered here and counted as unacknowledged.
    pub inflight_used: u64,
}

impl Limits {
    /// Whether any queue has an active limit (the delivery paths' fast check).
    #[inline]
    pub fn any(&self) -> bool {
        !self.table.is_empty()
    }
}

impl Engine {
    /// (known nodes, this node's rank among their IDs).
    fn share_basis(&self) -> (usize, usize) {
        let me = self.cluster.my_id();
        let mut n = 0;
        let mut rank = 0;
        for (_, node) in self.cluster.live() {
            if node.has(super::cluster::FLAG_HANDSHAKE) {
                continue;
            }
            n += 1;
            if node.id < me {
                rank += 1;
            }
        }
        (n.max(1), rank)
    }

    fn apply_shares(entry: &mut LimitEntry, basis: (usize, usize)) {
        let l = entry.limit;
        let loc = &mut entry.local;
        loc.rate_limited = l.rate > 0;
        loc.interval_ms = l.interval_ms;
        loc.rate_share = share(l.rate, basis.0, basis.1);
        loc.capped = l.inflight > 0;
        loc.inflight_share = share(l.inflight, basis.0, basis.1);
    }

    /// Recompute every share when the membership changed.
    fn refresh_shares(&mut self) {
        let basis = self.share_basis();
        if basis == self.limits.shares_for {
            return;
        }
        self.limits.shares_for = basis;
        for e in self.limits.table.values_mut() {
            Self::apply_shares(e, basis);
        }
    }

    /// Adopt `limit` for `queue` if it is newer than what is known here.
    /// Returns whether it was adopted.
    pub fn adopt_limit(&mut self, queue: Bytes, limit: QueueLimit) -> bool {
        if !limit.valid() {
            return false;
        }
        if let Some(cur) = self.limits.table.get(&queue) {
            if !limit.newer_than(&cur.limit) {
                return false;
            }
        }
        let basis = self.share_basis();
        self.limits.shares_for = basis;
        let e = self.limits.table.entry(queue.clone()).or_default();
        e.limit = limit;
        Self::apply_shares(e, basis);
        // nodes.conf keeps the table.
        self.cluster.dirty = true;
        // A raised or removed limit may let blocked consumers in.
        if let Some(q) = self.queue_handle(&queue).and_then(|h| self.queues.get(h)) {
            if !q.blocked.is_empty() && !q.is_empty() {
                self.ready.push(queue);
            }
        }
        true
    }

    /// QLIMIT: set (or, with an all-zero limit, remove) a queue's limit for
    /// the whole cluster. `wall_ms` is the wall clock, the version.
    pub fn set_limit(
        &mut self,
        queue: Bytes,
        rate: u32,
        interval_ms: u64,
        inflight: u32,
        wall_ms: u64,
    ) {
        let prev = self.limits.table.get(&queue).map_or(0, |e| e.limit.version);
        let limit = QueueLimit {
            rate,
            interval_ms: if rate == 0 { 0 } else { interval_ms },
            inflight,
            // Later than the setting it replaces even if clocks disagree.
            version: wall_ms.max(prev.saturating_add(1)),
            origin: self.cluster.my_id(),
        };
        if self.adopt_limit(queue.clone(), limit) {
            let data = limit.encode(&queue);
            for p in self.cluster.linked_peers() {
                self.out
                    .bus
                    .push((p, BusOut::QLimit { data: data.clone() }));
            }
        }
    }

    /// A QLIMIT bus message.
    pub(crate) fn on_qlimit(&mut self, data: &Bytes) {
        if let Some((queue, limit)) = QueueLimit::decode(data) {
            self.adopt_limit(queue, limit);
        }
    }

    /// The limit of a queue, if one is set.
    pub fn limit_of(&self, queue: &[u8]) -> Option<LimitView> {
        let e = self.limits.table.get(queue)?;
        if e.limit.is_none() {
            return None;
        }
        let (w, o) = e.local.usage();
        Some(LimitView {
            limit: e.limit,
            rate_share: e.local.rate_share,
            inflight_share: e.local.inflight_share,
            window_used: w as u64,
            inflight_used: o as u64,
        })
    }

    /// Whether the queue's limit lets one more job be delivered here now.
    #[inline]
    pub(crate) fn limit_allows(&mut self, queue: &[u8], now: u64) -> bool {
        if !self.limits.any() {
            return true;
        }
        self.limit_allows_slow(queue, now)
    }

    fn limit_allows_slow(&mut self, queue: &[u8], now: u64) -> bool {
        self.refresh_shares();
        let Some(e) = self.limits.table.get_mut(queue) else {
            return true;
        };
        if !e.local.rate_allows(now) {
            return false;
        }
        let store = &self.store;
        e.local.cap_allows(now, |id| {
            store
                .lookup(id)
                .and_then(|h| store.get(h))
                .is_some_and(|j| j.state == JobState::Active)
        })
    }

    /// Count a delivery of `id` from `queue`.
    #[inline]
    pub(crate) fn limit_record(&mut self, queue: &[u8], id: JobId, now: u64) {
        if !self.limits.any() {
            return;
        }
        if let Some(e) = self.limits.table.get_mut(queue) {
            e.local.record(id, now);
        }
    }

    /// Called before serving blocked clients: limited queues whose limit
    /// allows a delivery again, with jobs and blocked consumers, are
    /// marked ready. Every `REBROADCAST_MS` the table is sent again.
    pub(crate) fn limits_poll(&mut self, now: u64) {
        if !self.limits.any() {
            return;
        }
        let names: Vec<Bytes> = self
            .limits
            .table
            .keys()
            .filter(|n| {
                self.queue_handle(n)
                    .and_then(|h| self.queues.get(h))
                    .is_some_and(|q| !q.blocked.is_empty() && !q.is_empty())
            })
            .cloned()
            .collect();
        for n in names {
            if !self.ready.contains(&n) && self.limit_allows(&n, now) {
                self.ready.push(n);
            }
        }
        if now.saturating_sub(self.limits.last_bcast) >= REBROADCAST_MS {
            self.limits.last_bcast = now;
            let peers = self.cluster.linked_peers();
            if !peers.is_empty() {
                let msgs: Vec<Bytes> = self
                    .limits
                    .table
                    .iter()
                    .map(|(q, e)| e.limit.encode(q))
                    .collect();
                for p in peers {
                    for m in &msgs {
                        self.out.bus.push((p, BusOut::QLimit { data: m.clone() }));
                    }
                }
            }
        }
    }

    /// The earliest time a rate-limited queue with blocked consumers can
    /// deliver again (the tick is scheduled for it).
    pub(crate) fn limits_deadline(&self) -> Option<u64> {
        if !self.limits.any() {
            return None;
        }
        let mut t = Some(self.limits.last_bcast.saturating_add(REBROADCAST_MS));
        for (n, e) in &self.limits.table {
            let waiting = self
                .queue_handle(n)
                .and_then(|h| self.queues.get(h))
                .is_some_and(|q| !q.blocked.is_empty() && !q.is_empty());
            if !waiting {
                continue;
            }
            if let Some(c) = e.local.rate_opens_at() {
                t = Some(t.map_or(c, |x: u64| x.min(c)));
            }
        }
        t
    }

    /// nodes.conf lines for the limit table:
    /// `qlimit <version> <origin> <rate> <interval> <inflight> <queue hex>`.
    pub(crate) fn limits_conf_text(&self) -> String {
        let mut s = String::new();
        for (q, e) in &self.limits.table {
            let l = &e.limit;
            let hex: String = q.iter().map(|b| format!("{b:02x}")).collect();
            s.push_str(&format!(
                "qlimit {} {} {} {} {} {}\n",
                l.version,
                String::from_utf8_lossy(&l.origin),
                l.rate,
                l.interval_ms,
                l.inflight,
                hex
            ));
        }
        s
    }

    /// Startup: the `qlimit` lines of nodes.conf.
    pub fn restore_limits(&mut self, limits: Vec<(Bytes, QueueLimit)>) {
        for (q, l) in limits {
            self.adopt_limit(q, l);
        }
    }
}

/// Parse one `qlimit` line of nodes.conf (None: malformed).
pub fn parse_conf_line(line: &str) -> Option<(Bytes, QueueLimit)> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() != 7 || f[0] != "qlimit" || f[2].len() != 40 || !f[6].len().is_multiple_of(2) {
        return None;
    }
    let origin: [u8; 40] = f[2].as_bytes().try_into().ok()?;
    let mut q = Vec::with_capacity(f[6].len() / 2);
    for i in (0..f[6].len()).step_by(2) {
        q.push(u8::from_str_radix(f[6].get(i..i + 2)?, 16).ok()?);
    }
    let l = QueueLimit {
        version: f[1].parse().ok()?,
        origin,
        rate: f[3].parse().ok()?,
        interval_ms: f[4].parse().ok()?,
        inflight: f[5].parse().ok()?,
    };
    l.valid().then(|| (Bytes::from(q), l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_limit() {
        for total in [0u32, 1, 2, 99, 100, 101, 1000] {
            for nodes in 1..=7usize {
                let sum: u32 = (0..nodes).map(|r| share(total, nodes, r)).sum();
                assert_eq!(sum, total, "total {total} nodes {nodes}");
            }
        }
        assert_eq!(share(100, 3, 0), 34);
        assert_eq!(share(100, 3, 2), 33);
        assert_eq!(share(1, 3, 1), 0);
    }

    fn limiter(n: u32, ms: u64) -> Limiter {
        Limiter {
            rate_share: n,
            interval_ms: ms,
            rate_limited: true,
            ..Limiter::default()
        }
    }

    #[test]
    fn sliding_window_never_exceeds_in_any_window() {
        let mut l = limiter(3, 100);
        let mut sent = Vec::new();
        for now in 0..1000u64 {
            // Try several deliveries per ms.
            for _ in 0..4 {
                if l.rate_allows(now) {
                    l.record(JobId([b'x'; 40]), now);
                    sent.push(now);
                }
            }
        }
        for (i, &t) in sent.iter().enumerate() {
            let in_window = sent[i..].iter().take_while(|&&u| u < t + 100).count();
            assert!(in_window <= 3, "window at {t}: {in_window}");
        }
        // Fully used: 3 per 100 ms over 1000 ms.
        assert_eq!(sent.len(), 30);
    }

    #[test]
    fn rate_opens_when_the_oldest_leaves() {
        let mut l = limiter(2, 50);
        l.record(JobId([b'x'; 40]), 10);
        l.record(JobId([b'x'; 40]), 20);
        assert!(!l.rate_allows(59));
        assert_eq!(l.rate_opens_at(), Some(60));
        assert!(l.rate_allows(60));
        assert_eq!(l.rate_opens_at(), None);
    }

    #[test]
    fn zero_share_never_delivers() {
        let mut l = limiter(0, 50);
        assert!(!l.rate_allows(0));
        assert!(!l.rate_allows(1_000_000));
    }

    #[test]
    fn cap_counts_until_the_job_is_no_longer_active() {
        let mut l = Limiter {
            capped: true,
            inflight_share: 2,
            ..Limiter::default()
        };
        let a = JobId([b'a'; 40]);
        let b = JobId([b'b'; 40]);
        l.record(a, 1);
        l.record(b, 1);
        assert!(!l.cap_allows(1, |_| true));
        // Swept once per ms: a later call in the same ms sees the same count.
        assert!(!l.cap_allows(1, |id| *id != a));
        assert!(l.cap_allows(2, |id| *id != a));
    }

    #[test]
    fn encoding_round_trips_and_rejects_bad_input() {
        let l = QueueLimit {
            rate: 100,
            interval_ms: 1000,
            inflight: 7,
            version: 42,
            origin: [b'o'; 40],
        };
        let p = l.encode(b"q1");
        assert_eq!(QueueLimit::decode(&p), Some((Bytes::from_static(b"q1"), l)));
        assert_eq!(QueueLimit::decode(&p.slice(..p.len() - 1)), None);
        let bad = QueueLimit {
            interval_ms: 0,
            ..l
        };
        assert_eq!(QueueLimit::decode(&bad.encode(b"q")), None);
        let line = {
            let hex: String = b"q 1".iter().map(|b| format!("{b:02x}")).collect();
            format!("qlimit 42 {} 100 1000 7 {hex}", "o".repeat(40))
        };
        assert_eq!(
            parse_conf_line(&line),
            Some((Bytes::from_static(b"q 1"), l))
        );
        assert_eq!(parse_conf_line("qlimit 1 2"), None);
    }

    #[test]
    fn newest_version_wins() {
        let mut e = super::super::Engine::new([b'a'; 40], 7711, 1, 0);
        let q = Bytes::from_static(b"q");
        e.set_limit(q.clone(), 10, 1000, 0, 500);
        let newer = QueueLimit {
            rate: 20,
            interval_ms: 1000,
            inflight: 0,
            version: 600,
            origin: [b'b'; 40],
        };
        let older = QueueLimit {
            rate: 5,
            version: 400,
            ..newer
        };
        assert!(!e.adopt_limit(q.clone(), older));
        assert!(e.adopt_limit(q.clone(), newer));
        assert_eq!(e.limit_of(b"q").map(|v| v.limit.rate), Some(20));
        // Removal at a later version hides the limit.
        e.set_limit(q.clone(), 0, 0, 0, 100);
        assert!(e.limit_of(b"q").is_none());
        assert!(!e.adopt_limit(q, newer));
    }

    #[test]
    fn a_blocked_consumer_is_woken_by_the_tick_when_the_window_opens() {
        use crate::engine::addjob::{AddJobOutcome, AddJobRequest};
        use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
        use crate::engine::Wake;
        let mut e = super::super::Engine::new([b'a'; 40], 7711, 1, 1000);
        let q = Bytes::from_static(b"q");
        e.set_limit(q.clone(), 1, 100, 0, 1000);
        for _ in 0..2 {
            let req = AddJobRequest::new(q.clone(), Bytes::from_static(b"b"));
            assert!(matches!(e.addjob(99, req, 1000), AddJobOutcome::Added(_)));
        }
        let req = |nohang| GetJobRequest {
            nohang,
            timeout: 0,
            count: 10,
            withcounters: false,
            queues: vec![q.clone()],
        };
        let GetJobOutcome::Jobs(j) = e.getjob(7, req(true), 1000) else {
            panic!("the first job is allowed");
        };
        assert_eq!(j.len(), 1);
        assert!(matches!(
            e.getjob(8, req(true), 1050),
            GetJobOutcome::NoJobs
        ));
        assert!(matches!(
            e.getjob(8, req(false), 1050),
            GetJobOutcome::Blocked
        ));
        // The engine asks for a tick exactly when the window has room.
        assert_eq!(e.next_deadline(), Some(1100));
        e.tick(1099);
        assert!(e.take_wakes().is_empty());
        e.tick(1100);
        let w = e.take_wakes();
        assert!(
            matches!(&w[..], [(8, Wake::Jobs(j))] if j.len() == 1),
            "{w:?}"
        );
        // Nobody waits any more: no limiter deadline before the re-send.
        assert_eq!(e.next_deadline(), Some(REBROADCAST_MS));
    }
}
