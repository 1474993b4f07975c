//! Fixed-bucket latency histograms counted with plain integers or relaxed
//! atomics. Observing is a bucket search over a dozen bounds and two adds,
//! cheap enough for the command path; Prometheus encoding happens only on
//! scrape (`metrics`). Values are integers in the histogram's own unit
//! (microseconds or milliseconds); the exporter converts to seconds.

use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds in microseconds for command and fsync latency.
pub const MICROS: &[u64] = &[
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    1_000_000,
];

/// Upper bounds in milliseconds for replication latency.
pub const MILLIS: &[u64] = &[
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
];

fn bucket(bounds: &[u64], v: u64) -> usize {
    bounds.iter().position(|&b| v <= b).unwrap_or(bounds.len())
}

/// A histogram owned by one thread or read under a lock.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    /// Per-bucket (not cumulative) counts; the last one is +Inf.
    counts: Vec<u64>,
    sum: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    pub fn observe(&mut self, v: u64) {
        let i = bucket(self.bounds, v);
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.sum = self.sum.saturating_add(v);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            bounds: self.bounds,
            counts: self.counts.clone(),
            sum: self.sum,
        }
    }
}

/// A histogram shared between threads (relaxed atomics; a scrape may see
/// a count without its sum, which Prometheus tolerates).
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [u64],
    counts: Vec<AtomicU64>,
    sum: AtomicU64,
}

impl AtomicHistogram {
    pub fn new(bounds: &'static [u64]) -> AtomicHistogram {
        AtomicHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, v: u64) {
        if let Some(c) = self.counts.get(bucket(self.bounds, v)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time copy, ready for encoding.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub bounds: &'static [u64],
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl Snapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Per-bucket (upper bound, count) pairs with bounds divided by
    /// `per_second` (1e6 for microseconds), ending with +Inf. Prometheus
    /// buckets are cumulative; the encoder sums these as it writes them.
    pub fn buckets(&self, per_second: f64) -> Vec<(f64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let bound = self
                    .bounds
                    .get(i)
                    .map_or(f64::INFINITY, |&b| b as f64 / per_second);
                (bound, c)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_at_or_above_them() {
        let mut h = Histogram::new(MILLIS);
        h.observe(0);
        h.observe(1);
        h.observe(3);
        h.observe(20_000);
        let s = h.snapshot();
        let c = s.buckets(1.0);
        assert_eq!(c[0], (1.0, 2));
        assert_eq!(c[1], (2.0, 0));
        assert_eq!(c[2], (5.0, 1));
        assert_eq!(c.last().copied(), Some((f64::INFINITY, 1)));
        assert_eq!(s.buckets(1e3)[0], (0.001, 2));
        assert_eq!(s.sum, 20_004);
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn atomic_matches_plain() {
        let a = AtomicHistogram::new(MICROS);
        let mut p = Histogram::new(MICROS);
        for v in [1, 7, 99, 1_000_001, 30] {
            a.observe(v);
            p.observe(v);
        }
        assert_eq!(a.snapshot().counts, p.snapshot().counts);
        assert_eq!(a.snapshot().count(), 5);
    }
}
