//! Statistics the way fio keeps them: running min/max/mean/variance (Welford) and fio's
//! log-linear latency histogram (1856 buckets, 64 per power of two, docs/fio.md §5), so
//! percentiles compare bucket for bucket with fio's.

use serde::{Deserialize, Serialize};

pub mod batch;

pub const PLAT_BITS: u32 = 6;
pub const PLAT_VAL: u64 = 1 << PLAT_BITS;
pub const PLAT_GROUP_NR: u32 = 29;
pub const PLAT_NR: usize = (PLAT_GROUP_NR as usize) * (PLAT_VAL as usize);

/// fio's bucket for a latency in ns.
#[inline]
pub fn plat_index(v: u64) -> usize {
    if v == 0 {
        return 0;
    }
    let msb = 63 - v.leading_zeros();
    if msb <= PLAT_BITS {
        return v as usize;
    }
    let e = msb - PLAT_BITS;
    let idx = (e as u64 + 1) * PLAT_VAL + ((v >> e) & (PLAT_VAL - 1));
    (idx as usize).min(PLAT_NR - 1)
}

/// The midpoint fio reports for a bucket.
pub fn plat_value(i: usize) -> u64 {
    if i < 2 * PLAT_VAL as usize {
        return i as u64;
    }
    let e = (i / PLAT_VAL as usize - 1) as u32;
    (1u64 << (e + PLAT_BITS)) + ((i as u64 % PLAT_VAL) << e) + (1u64 << e) / 2
}

/// The smallest and largest latency (ns) fio counts in bucket `i`. The last bucket also
/// takes every larger value; its upper bound here is its nominal range.
pub fn plat_bounds(i: usize) -> (u64, u64) {
    if i < 2 * PLAT_VAL as usize {
        return (i as u64, i as u64);
    }
    let e = (i / PLAT_VAL as usize - 1) as u32;
    let lo = (1u64 << (e + PLAT_BITS)) + ((i as u64 % PLAT_VAL) << e);
    (lo, lo + (1u64 << e) - 1)
}

/// Running statistics of one latency kind (clat, slat or lat) of one direction.
///
/// Sums are exact integers (u128), so the variance needs no division per sample and loses
/// nothing at nanosecond scale; `m2` is derived once at the end.
#[derive(Clone, Debug)]
pub struct LatStat {
    pub n: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u128,
    sum_sq: u128,
    /// A fixed array: [`plat_index`] is below `PLAT_NR`, so counting needs no bounds check.
    hist: Box<[u64; PLAT_NR]>,
}

impl Default for LatStat {
    fn default() -> Self {
        LatStat { n: 0, min_ns: u64::MAX, max_ns: 0, sum_ns: 0, sum_sq: 0, hist: Box::new([0; PLAT_NR]) }
    }
}

/// The engine-output form of a [`LatStat`] (docs/fio.md §4 `STAT`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StatOut {
    pub n: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u64,
    pub m2: f64,
    pub hist: Vec<[u64; 2]>,
}

impl LatStat {
    #[inline]
    pub fn add(&mut self, v: u64) {
        self.n += 1;
        self.min_ns = self.min_ns.min(v);
        self.max_ns = self.max_ns.max(v);
        self.sum_ns += v as u128;
        self.sum_sq += v as u128 * v as u128;
        self.hist[plat_index(v)] += 1;
    }

    /// Add what `o` counted.
    pub fn merge(&mut self, o: &LatStat) {
        self.n += o.n;
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
        self.sum_ns += o.sum_ns;
        self.sum_sq += o.sum_sq;
        self.hist.iter_mut().zip(o.hist.iter()).for_each(|(a, b)| *a += b);
    }

    /// fio's latency histogram (counts per [`plat_index`] bucket).
    pub fn hist(&self) -> &[u64] {
        &self.hist[..]
    }

    /// Count `ios` more latencies distributed as `like`'s: its sums and histogram scaled by
    /// `ios / like.n` (the histogram by cumulative rounding, so its counts add up to `ios`);
    /// min and max stay. The I/Os a converging run carries in fast-forward take the
    /// distribution its converged sample measured (engine/fio/converge.rs). Returns the
    /// counts added per histogram bucket (bucket, count), for tables kept beside this one.
    pub fn add_like(&mut self, like: &LatStat, ios: u64) -> Vec<(usize, u64)> {
        let mut added = Vec::new();
        if ios == 0 || like.n == 0 {
            return added;
        }
        let (k, n) = (ios as u128, like.n as u128);
        self.n += ios;
        self.sum_ns += like.sum_ns * k / n;
        self.sum_sq += like.sum_sq / n * k + like.sum_sq % n * k / n;
        let (mut cum, mut given) = (0u128, 0u64);
        for (i, &c) in like.hist.iter().enumerate() {
            if c == 0 {
                continue;
            }
            cum += c as u128;
            let upto = (cum * k / n) as u64;
            if upto > given {
                self.hist[i] += upto - given;
                added.push((i, upto - given));
                given = upto;
            }
        }
        added
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.n as f64
        }
    }

    /// Σ(x - mean)² = (n·Σx² - (Σx)²) / n, exactly in integers when it fits.
    pub fn m2(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let n = self.n as u128;
        match (n.checked_mul(self.sum_sq), self.sum_ns.checked_mul(self.sum_ns)) {
            (Some(a), Some(b)) => (a - b) as f64 / n as f64,
            _ => {
                let mean = self.sum_ns as f64 / self.n as f64;
                (self.sum_sq as f64 - self.n as f64 * mean * mean).max(0.0)
            }
        }
    }

    /// fio-style percentile (value of the first bucket whose running count reaches p%).
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = (p / 100.0 * self.n as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, &c) in self.hist.iter().enumerate() {
            acc += c;
            if acc >= target {
                return plat_value(i);
            }
        }
        plat_value(PLAT_NR - 1)
    }

    pub fn out(&self) -> StatOut {
        StatOut {
            n: self.n,
            min_ns: if self.n == 0 { 0 } else { self.min_ns },
            max_ns: self.max_ns,
            sum_ns: self.sum_ns.min(u64::MAX as u128) as u64,
            m2: self.m2(),
            hist: self.hist.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| [i as u64, c]).collect(),
        }
    }

    /// Sparse histogram (for histogram-log rows) and reset of the sparse state.
    pub fn hist_dense(&self) -> &[u64] {
        &self.hist[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_fio_examples() {
        // docs/fio.md §5.
        assert_eq!(plat_index(127), 127);
        assert_eq!(plat_index(128), 128);
        assert_eq!(plat_value(128), 129);
        assert_eq!(plat_index(255), 191);
        assert_eq!(plat_value(191), 255);
        assert_eq!(plat_index(256), 192);
        assert_eq!(plat_value(192), 258);
        assert_eq!(plat_index(88064), 726);
        assert_eq!(plat_value(726), 88576);
        assert_eq!(plat_index(u64::MAX), PLAT_NR - 1);
    }

    #[test]
    fn bounds_hold_exactly_the_values_of_their_bucket() {
        for i in 0..PLAT_NR {
            let (lo, hi) = plat_bounds(i);
            assert_eq!(plat_index(lo), i);
            assert_eq!(plat_index(hi), i);
            assert!(lo <= plat_value(i) && plat_value(i) <= hi);
            if i + 1 < PLAT_NR {
                assert_eq!(plat_bounds(i + 1).0, hi + 1, "buckets {i} and {} leave no gap", i + 1);
            }
        }
    }

    #[test]
    fn midpoint_within_one_128th() {
        for v in [200u64, 1000, 12345, 999_999, 123_456_789] {
            let m = plat_value(plat_index(v)) as f64;
            assert!((m - v as f64).abs() / (v as f64) <= 1.0 / 128.0, "{v} -> {m}");
        }
    }

    #[test]
    fn welford_matches_two_pass() {
        let mut s = LatStat::default();
        let xs = [100u64, 200, 300, 400, 1000];
        for &x in &xs {
            s.add(x);
        }
        let mean = xs.iter().sum::<u64>() as f64 / 5.0;
        let m2: f64 = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum();
        assert!((s.mean() - mean).abs() < 1e-9);
        assert!((s.out().m2 - m2).abs() < 1e-6);
        assert_eq!(s.percentile(50.0), plat_value(plat_index(300)), "fio reports the bucket midpoint");
    }
}
