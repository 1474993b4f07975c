//! Latency histogram (HDR-like, log-bucketed) and summary helpers.
//!
//! Values are nanoseconds.  Values below 32 are stored exactly; above that,
//! each power of two is split into 16 linear sub-buckets, so a recorded
//! value is known to within 1/16 (6.25%) of itself at worst, and about 3%
//! on average.  The layout covers the whole `u64` range in 976 counters
//! (61 exponent buckets x 16 sub-buckets), which makes per-client
//! histograms cheap to keep and to merge.

/// log2 of the number of linear sub-buckets per power of two.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are stored exactly.
const EXACT: u64 = SUB * 2;
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * SUB as usize;

/// A log-bucketed latency histogram.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn index_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    (((shift + 1) as usize) << SUB_BITS) + ((v >> shift) - SUB) as usize
}

/// Largest value that maps to bucket `idx`.
fn highest_in(idx: usize) -> u64 {
    if (idx as u64) < EXACT {
        return idx as u64;
    }
    let shift = (idx >> SUB_BITS) as u32 - 1;
    let sub = (idx as u64 & (SUB - 1)) + SUB;
    // (sub + 1) << shift may overflow for the very last bucket.
    ((sub + 1) << shift).wrapping_sub(1).max(sub << shift)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        self.counts[index_of(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Adds every value recorded in `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Number of recorded values.
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Largest recorded value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Smallest recorded value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    /// Mean of the recorded values (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// Value at percentile `p` (0..=100): the highest value equivalent to the
    /// bucket holding the `ceil(p% * count)`-th smallest sample, clamped to
    /// the recorded min/max.  Returns 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let p = p.clamp(0.0, 100.0);
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (idx, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest_in(idx).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// Formats nanoseconds as microseconds with one decimal.
pub fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_layout_is_monotonic_and_covering() {
        let mut prev = 0usize;
        for v in (0..100_000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
            let idx = index_of(v);
            assert!(idx < BUCKETS, "index {idx} for {v}");
            assert!(idx >= prev || v > 100_000, "non monotonic at {v}");
            prev = idx;
            assert!(highest_in(idx) >= v, "bucket {idx} upper bound below {v}");
        }
        assert_eq!(index_of(u64::MAX), BUCKETS - 1);
        assert_eq!(highest_in(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn relative_error_is_bounded() {
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            let hi = highest_in(index_of(v));
            assert!(hi >= v);
            assert!((hi - v) as f64 <= v as f64 / 16.0 + 1.0, "v={v} hi={hi}");
            v = v * 3 + 7;
        }
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=20 {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 10);
        assert_eq!(h.percentile(100.0), 20);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 20);
        assert!((h.mean() - 10.5).abs() < 1e-9);
    }

    #[test]
    fn percentiles_of_uniform_distribution() {
        let mut h = Histogram::new();
        for v in 1..=1_000_000u64 {
            h.record(v * 1000); // 1 µs .. 1 s
        }
        for (p, expect) in [(50.0, 500e6), (99.0, 990e6), (99.9, 999e6)] {
            let got = h.percentile(p) as f64;
            let err = (got - expect).abs() / expect;
            assert!(err <= 1.0 / 16.0, "p{p}: got {got}, want ~{expect}");
            assert!(got >= expect, "p{p} should not under-report");
        }
        assert_eq!(h.percentile(100.0), 1_000_000_000);
        assert_eq!(h.count(), 1_000_000);
    }

    #[test]
    fn tail_is_seen_by_high_percentiles() {
        let mut h = Histogram::new();
        for _ in 0..990 {
            h.record(100_000);
        }
        for _ in 0..10 {
            h.record(50_000_000);
        }
        let p50 = h.percentile(50.0);
        assert!((100_000..=106_250).contains(&p50), "p50={p50}");
        assert!(h.percentile(99.0) <= 106_250);
        assert!(h.percentile(99.9) >= 50_000_000);
        assert_eq!(h.percentile(99.9), 50_000_000); // clamped to max
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        let mut all = Histogram::new();
        for v in 0..5000u64 {
            let x = v * v % 7919 + 3;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        let mut m = Histogram::new();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.count(), all.count());
        assert_eq!(m.min(), all.min());
        assert_eq!(m.max(), all.max());
        for p in [1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            assert_eq!(m.percentile(p), all.percentile(p));
        }
    }

    #[test]
    fn empty_histogram() {
        let h = Histogram::new();
        assert_eq!(h.percentile(99.0), 0);
        assert_eq!(h.min(), 0);
        assert_eq!(h.max(), 0);
        assert_eq!(h.mean(), 0.0);
        assert_eq!(us(1_500), "1.5");
    }
}
