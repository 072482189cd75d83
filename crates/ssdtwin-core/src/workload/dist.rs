//! Random offset distributions (fio's `random_distribution`) and fio's random map.

use super::RandomDistribution;
use crate::rng::Rng;

/// A bijection of [0, n) (4-round Feistel on the next power of two, cycle walking), used
/// to scatter hot ranks over the region as fio's hashing does.
#[derive(Clone, Debug)]
struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    fn new(n: u64, seed: u64) -> Permutation {
        let bits = (64 - n.max(2).saturating_sub(1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut r = Rng::new(seed ^ 0x5a5a_5a5a_dead_beef);
        Permutation { n, half_bits, keys: [r.next_u64(), r.next_u64(), r.next_u64(), r.next_u64()] }
    }

    fn round(x: u64, k: u64) -> u64 {
        let mut h = x.wrapping_add(k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 32)
    }

    fn apply(&self, mut x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        loop {
            let (mut l, mut r) = (x >> self.half_bits, x & mask);
            for &k in &self.keys {
                let nl = r;
                r = l ^ (Self::round(r, k) & mask);
                l = nl;
            }
            x = (l << self.half_bits) | r;
            if x < self.n {
                return x;
            }
        }
    }
}

/// Zipf over ranks 1..=n by rejection-inversion (Hörmann & Derflinger 1996): O(1) per draw.
#[derive(Clone, Debug)]
struct Zipf {
    n: f64,
    theta: f64,
    h_x1: f64,
    h_n: f64,
    s: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let mut z = Zipf { n: n as f64, theta, h_x1: 0.0, h_n: 0.0, s: 0.0 };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }
    /// ∫ x^-θ, written with helpers that stay accurate near θ = 1.
    fn h_integral(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.theta) * lx) * lx
    }
    fn h_integral_inv(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.theta);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
    fn sample(&self, r: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + r.unit() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            let k = x.round().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// log(1+x)/x, continuous at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (exp(x)-1)/x, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Uniform,
    Zipf(Zipf),
    Pareto(f64),
    Normal(f64),
    /// (cumulative access %, first block, blocks)
    Zoned(Vec<(f64, u64, u64)>),
}

/// Where random I/O lands in the region, in units of the caller's aligned blocks.
#[derive(Clone, Debug)]
pub struct Distribution {
    kind: Kind,
    nblocks: u64,
    center: f64,
    perm: Option<Permutation>,
}

impl Distribution {
    /// `nblocks` blocks of `block` bytes in a region of `region_bytes`.
    pub fn new(d: &RandomDistribution, nblocks: u64, region_bytes: u64, block: u64) -> Result<Distribution, String> {
        let n = nblocks.max(1);
        let center = d.center.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&center) {
            return Err(format!("random_distribution center {center}: must be in 0..1"));
        }
        let kind = match d.kind.as_str() {
            "random" => Kind::Uniform,
            "zipf" => {
                let t = d.param.unwrap_or(1.1);
                if t.is_nan() || t <= 0.0 || t == 1.0 {
                    return Err(format!("zipf theta {t}: must be positive and not 1"));
                }
                Kind::Zipf(Zipf::new(n, t))
            }
            "pareto" => {
                let h = d.param.unwrap_or(0.2);
                if !(h > 0.0 && h < 1.0) {
                    return Err(format!("pareto h {h}: must be in (0, 1)"));
                }
                Kind::Pareto(h.ln() / (1.0 - h).ln())
            }
            "normal" => {
                let s = d.param.unwrap_or(0.0);
                if !(0.0..100.0).contains(&s) {
                    return Err(format!("normal sigma {s}%: must be in [0, 100)"));
                }
                Kind::Normal(s / 100.0)
            }
            "zoned" | "zoned_abs" => {
                // Zones apply per direction in fio; the engine uses the write zones if
                // present, else read, else trim (directions rarely differ in practice).
                let zones = d
                    .zones
                    .as_ref()
                    .and_then(|z| ["write", "read", "trim"].iter().find_map(|k| z.get(*k).cloned().flatten()))
                    .ok_or("zoned distribution without zones")?;
                let mut out = Vec::new();
                let (mut acc, mut start) = (0.0, 0u64);
                for z in &zones {
                    let bytes = match (z.range_pct, z.range_bytes) {
                        (Some(p), _) => (region_bytes as f64 * p / 100.0) as u64,
                        (None, Some(b)) => b,
                        _ => return Err("zone without a range".into()),
                    };
                    let blocks = (bytes / block).max(1).min(n.saturating_sub(start).max(1));
                    acc += z.access_pct;
                    out.push((acc, start.min(n - 1), blocks));
                    start += blocks;
                }
                Kind::Zoned(out)
            }
            other => return Err(format!("random_distribution '{other}' is not supported")),
        };
        let perm = matches!(kind, Kind::Zipf(_) | Kind::Pareto(_)).then(|| Permutation::new(n, nblocks ^ region_bytes));
        Ok(Distribution { kind, nblocks: n, center, perm })
    }

    pub fn is_uniform(&self) -> bool {
        matches!(self.kind, Kind::Uniform)
    }

    /// A block index in [0, limit) (limit ≤ nblocks: the last blocks may not fit an I/O).
    pub fn sample(&self, r: &mut Rng, limit: u64) -> u64 {
        let limit = limit.max(1);
        let n = self.nblocks;
        let shift = (self.center * n as f64) as u64;
        let b = match &self.kind {
            Kind::Uniform => return r.below(limit),
            Kind::Zipf(z) => self.scatter(z.sample(r) - 1, shift),
            Kind::Pareto(pow) => {
                let rank = ((n - 1) as f64 * r.unit().powf(*pow)) as u64;
                self.scatter(rank, shift)
            }
            Kind::Normal(sigma) => {
                // Box-Muller, centred on `center` (0.5 when not given), redrawn outside.
                let mid = if self.center == 0.0 { 0.5 } else { self.center };
                loop {
                    let u1 = r.unit().max(f64::MIN_POSITIVE);
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * r.unit()).cos();
                    let x = mid + z * sigma;
                    if (0.0..1.0).contains(&x) {
                        break (x * n as f64) as u64;
                    }
                }
            }
            Kind::Zoned(zones) => {
                let v = r.unit() * zones.last().map_or(100.0, |z| z.0);
                let z = zones.iter().find(|z| v < z.0).unwrap_or(zones.last().expect("zones"));
                z.1 + r.below(z.2)
            }
        };
        b.min(limit - 1)
    }

    fn scatter(&self, rank: u64, shift: u64) -> u64 {
        let p = self.perm.as_ref().expect("permutation for ranked distributions").apply(rank.min(self.nblocks - 1));
        (p + shift) % self.nblocks
    }
}

/// fio's random map: which blocks of the region this pass has used. Hierarchical bitmap so
/// "the next free block at or after b" is O(levels) even when nearly full.
#[derive(Clone, Debug)]
pub struct AxMap {
    n: u64,
    used: u64,
    levels: Vec<Vec<u64>>,
}

impl AxMap {
    pub fn new(n: u64) -> AxMap {
        let mut levels = Vec::new();
        let mut bits = n;
        loop {
            let words = bits.div_ceil(64).max(1);
            levels.push(vec![0u64; words as usize]);
            if words == 1 {
                break;
            }
            bits = words;
        }
        let mut m = AxMap { n, used: 0, levels };
        m.mark_tail();
        m
    }

    /// Bits past `n` (and past each level's width) count as used, so they are never free.
    fn mark_tail(&mut self) {
        let mut width = self.n;
        for l in 0..self.levels.len() {
            let words = self.levels[l].len() as u64;
            for bit in width..words * 64 {
                self.levels[l][(bit / 64) as usize] |= 1 << (bit % 64);
            }
            width = words;
        }
        // Propagate words that the tail made full.
        for l in 0..self.levels.len().saturating_sub(1) {
            for w in 0..self.levels[l].len() {
                if self.levels[l][w] == u64::MAX {
                    self.levels[l + 1][w / 64] |= 1 << (w % 64);
                }
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Hint that block `b` will be looked up soon.
    #[inline]
    pub fn prefetch(&self, b: u64) {
        let words = &self.levels[0];
        let w = (b / 64) as usize;
        if w < words.len() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: in bounds; prefetch never faults.
            unsafe {
                core::arch::x86_64::_mm_prefetch(words.as_ptr().add(w) as *const i8, core::arch::x86_64::_MM_HINT_T0)
            };
        }
    }

    pub fn clear(&mut self) {
        for l in &mut self.levels {
            l.fill(0);
        }
        self.used = 0;
        self.mark_tail();
    }

    fn set(&mut self, b: u64) {
        let mut idx = b;
        for l in 0..self.levels.len() {
            let w = (idx / 64) as usize;
            self.levels[l][w] |= 1 << (idx % 64);
            if self.levels[l][w] != u64::MAX {
                break;
            }
            idx = w as u64;
        }
        self.used += 1;
    }

    /// First zero bit at `level` with index ≥ `from`, if any.
    fn next_free(&self, level: usize, from: u64) -> Option<u64> {
        let words = &self.levels[level];
        let w = (from / 64) as usize;
        if w >= words.len() {
            return None;
        }
        let masked = words[w] | ((1u64 << (from % 64)) - 1);
        if masked != u64::MAX {
            return Some(w as u64 * 64 + (!masked).trailing_zeros() as u64);
        }
        let nw = if level + 1 < self.levels.len() {
            self.next_free(level + 1, w as u64 + 1)?
        } else {
            // Top level is a single word: nothing after it.
            return None;
        };
        let word = words[nw as usize];
        debug_assert_ne!(word, u64::MAX);
        Some(nw * 64 + (!word).trailing_zeros() as u64)
    }

    /// Take block `b`, or the next free one after it (wrapping). None when all are used.
    pub fn take_near(&mut self, b: u64) -> Option<u64> {
        if self.used >= self.n {
            return None;
        }
        let got = self.next_free(0, b.min(self.n - 1)).or_else(|| self.next_free(0, 0))?;
        debug_assert!(got < self.n);
        self.set(got);
        Some(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axmap_hands_out_every_block_once() {
        for n in [1u64, 63, 64, 65, 4097, 300_000] {
            let mut m = AxMap::new(n);
            let mut r = Rng::new(n);
            let mut seen = vec![false; n as usize];
            for _ in 0..n {
                let b = m.take_near(r.below(n)).unwrap();
                assert!(!seen[b as usize], "block {b} twice (n={n})");
                seen[b as usize] = true;
            }
            assert_eq!(m.take_near(0), None);
            m.clear();
            assert!(m.take_near(0).is_some());
        }
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 1000, 4096, 5000] {
            let p = Permutation::new(n, 9);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n && !seen[y as usize]);
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let d = RandomDistribution { kind: "zipf".into(), param: Some(1.2), center: None, zones: None };
        let dist = Distribution::new(&d, 10_000, 10_000 * 4096, 4096).unwrap();
        let mut r = Rng::new(3);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let b = dist.sample(&mut r, 10_000);
            assert!(b < 10_000);
            *counts.entry(b).or_insert(0u32) += 1;
        }
        let mut v: Vec<u32> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let top1pct: u32 = v.iter().take(100).sum();
        // Zipf(1.2) over 10^4 ranks: the top 1 % of blocks take well over half the accesses.
        assert!(top1pct > 55_000, "top 1% got {top1pct}");
    }

    #[test]
    fn zoned_respects_access_shares() {
        use super::super::Zone;
        let mut zones = std::collections::BTreeMap::new();
        zones.insert(
            "write".to_string(),
            Some(vec![
                Zone { access_pct: 50.0, range_pct: Some(5.0), range_bytes: None },
                Zone { access_pct: 50.0, range_pct: Some(95.0), range_bytes: None },
            ]),
        );
        let d = RandomDistribution { kind: "zoned".into(), param: None, center: None, zones: Some(zones) };
        let dist = Distribution::new(&d, 1000, 1000 * 4096, 4096).unwrap();
        let mut r = Rng::new(1);
        let hot = (0..20_000).filter(|_| dist.sample(&mut r, 1000) < 50).count();
        assert!((9_000..11_000).contains(&hot), "{hot}");
    }
}
