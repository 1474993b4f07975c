//! Latency recording: an HDR histogram per client task (the `hdrhistogram`
//! crate, 3 significant digits, auto-resizing, values in nanoseconds),
//! merged at the end, and the summary the reports print.

use serde::Serialize;

/// Significant decimal digits kept: a value is known to within 0.1%.
const SIGFIG: u8 = 3;

/// Latencies of one client (or of a whole run once merged), in nanoseconds.
#[derive(Clone, Debug)]
pub struct Latency(hdrhistogram::Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty, auto-resizing histogram.
    #[allow(clippy::expect_used)] // constant arguments the crate documents as valid
    pub fn new() -> Self {
        Latency(hdrhistogram::Histogram::new(SIGFIG).expect("3 significant digits is valid"))
    }

    /// Records one value (nanoseconds).
    pub fn record(&mut self, ns: u64) {
        // Auto-resizing makes this fail only beyond the crate's own range
        // (about 2^62): clamp rather than lose the sample.
        if self.0.record(ns).is_err() {
            self.0.saturating_record(ns);
        }
    }

    /// Adds every value recorded in `other`.
    pub fn merge(&mut self, other: &Latency) {
        if self.0.add(&other.0).is_err() {
            for v in other.0.iter_recorded() {
                self.0
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// Value at percentile `p` (0..=100); 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        self.0.value_at_quantile(p.clamp(0.0, 100.0) / 100.0)
    }

    /// Largest recorded value (0 when empty).
    pub fn max(&self) -> u64 {
        self.0.max()
    }

    /// Smallest recorded value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.min()
        }
    }

    /// Mean of the recorded values (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.mean()
        }
    }

    /// The numbers a report shows, in microseconds.
    pub fn summary(&self) -> Summary {
        let us = |ns: u64| ns as f64 / 1000.0;
        Summary {
            count: self.count(),
            min_us: us(self.min()),
            mean_us: self.mean() / 1000.0,
            p50_us: us(self.percentile(50.0)),
            p90_us: us(self.percentile(90.0)),
            p99_us: us(self.percentile(99.0)),
            p999_us: us(self.percentile(99.9)),
            p9999_us: us(self.percentile(99.99)),
            max_us: us(self.max()),
        }
    }
}

/// Latency percentiles in microseconds, as `--json` writes them.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

/// Formats nanoseconds as microseconds with one decimal.
pub fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = Latency::new();
        for v in 1..=20 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 10);
        assert_eq!(h.percentile(100.0), 20);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!((h.min(), h.max(), h.count()), (1, 20, 20));
        assert!((h.mean() - 10.5).abs() < 1e-9);
    }

    #[test]
    fn percentiles_are_within_a_thousandth() {
        let mut h = Latency::new();
        for v in 1..=1_000_000u64 {
            h.record(v * 1000); // 1 µs .. 1 s
        }
        for (p, expect) in [(50.0, 500e6), (99.0, 990e6), (99.9, 999e6)] {
            let got = h.percentile(p) as f64;
            assert!(
                (got - expect).abs() / expect <= 1e-3,
                "p{p}: {got} vs {expect}"
            );
        }
        assert_eq!(h.count(), 1_000_000);
    }

    #[test]
    fn tail_is_seen_by_high_percentiles() {
        let mut h = Latency::new();
        for _ in 0..990 {
            h.record(100_000);
        }
        for _ in 0..10 {
            h.record(50_000_000);
        }
        assert!(h.percentile(99.0) <= 100_100);
        assert!(h.percentile(99.9) >= 49_950_000);
        let s = h.summary();
        assert!((s.p50_us - 100.0).abs() < 0.1, "{s:?}");
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (Latency::new(), Latency::new(), Latency::new());
        for v in 0..5000u64 {
            let x = v * v % 7919 + 3;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x * 1_000_000) // forces a resize on merge
            }
            all.record(if v % 3 == 0 { x } else { x * 1_000_000 });
        }
        let mut m = Latency::new();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(
            (m.count(), m.min(), m.max()),
            (all.count(), all.min(), all.max())
        );
        for p in [1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            assert_eq!(m.percentile(p), all.percentile(p));
        }
    }

    #[test]
    fn empty_histogram() {
        let h = Latency::new();
        assert_eq!((h.percentile(99.0), h.min(), h.max()), (0, 0, 0));
        assert_eq!(h.mean(), 0.0);
        assert_eq!(us(1_500), "1.5");
    }
}
