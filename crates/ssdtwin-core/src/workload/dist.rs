//! fio's random map (lib/axmap.c) and its non-uniform offset distributions (lib/zipf.c,
//! lib/gauss.c, zone-dist.c), reimplemented to give fio's block numbers exactly.

use super::fiorand::{hash_u64, FioRand};

/// fio's random map: which blocks of the file this pass has used. A hierarchical bitmap
/// (level 0 has one bit per block; a bit of a higher level is set when the 64-bit word
/// below it is full), so "the next free block" is O(levels) even when nearly full.
///
/// Semantics follow lib/axmap.c: bits past `n` in the last word start free and an I/O
/// reaching past the last block sets them (fio does the same); searches never return them.
#[derive(Clone, Debug)]
pub struct AxMap {
    n: u64,
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
        AxMap { n, levels }
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

    /// lib/axmap.c `axmap_reset`.
    pub fn clear(&mut self) {
        for l in &mut self.levels {
            l.fill(0);
        }
    }

    /// lib/axmap.c `axmap_isset` (a block past the end reads as free).
    #[inline]
    pub fn is_set(&self, b: u64) -> bool {
        let w = (b / 64) as usize;
        self.levels[0].get(w).is_some_and(|&x| x & (1 << (b % 64)) != 0)
    }

    /// First zero bit of level 0 at index ≥ `from` (may be a spare bit past `n`).
    fn first_free_from(&self, from: u64) -> Option<u64> {
        self.free_at(0, from)
    }

    fn free_at(&self, level: usize, from: u64) -> Option<u64> {
        let words = &self.levels[level];
        let w = (from / 64) as usize;
        if w >= words.len() {
            return None;
        }
        let masked = words[w] | ((1u64 << (from % 64)) - 1);
        if masked != u64::MAX {
            return Some(w as u64 * 64 + (!masked).trailing_zeros() as u64);
        }
        if level + 1 == self.levels.len() {
            return None;
        }
        // The next word of this level that is not full, from the level above.
        let nw = self.free_at(level + 1, w as u64 + 1)?;
        let word = *words.get(nw as usize)?;
        Some(nw * 64 + (!word).trailing_zeros() as u64)
    }

    /// lib/axmap.c `axmap_next_free`: the first free block after `b`, wrapping to the
    /// start of the map; None when every block is used.
    pub fn next_free(&self, b: u64) -> Option<u64> {
        if b >= self.n {
            return None;
        }
        let next = if b + 1 == self.n { 0 } else { b + 1 };
        match self.first_free_from(next).filter(|&x| x < self.n) {
            Some(x) => Some(x),
            None if next != 0 => self.first_free_from(0).filter(|&x| x < self.n),
            None => None,
        }
    }

    /// Set the bit and propagate full words upwards.
    fn set_bits_in_word(&mut self, b: u64, mask: u64) {
        let w = (b / 64) as usize;
        self.levels[0][w] |= mask;
        self.propagate_full(w);
    }

    /// If word `w` of level 0 is full, set its bit in the level above, and so on up while
    /// the words fill.
    fn propagate_full(&mut self, mut w: usize) {
        for l in 1..self.levels.len() {
            if self.levels[l - 1][w] != u64::MAX {
                break;
            }
            let (pw, bit) = (w / 64, w % 64);
            self.levels[l][pw] |= 1 << bit;
            w = pw;
        }
    }

    /// lib/axmap.c `axmap_set_nr`: mark up to `nr` blocks from `b`, stopping at the first
    /// one already used; returns how many were marked.
    #[inline]
    pub fn set_nr(&mut self, b: u64, nr: u64) -> u64 {
        if nr == 1 {
            return self.set_one(b);
        }
        self.set_run(b, nr)
    }

    /// [`AxMap::set_nr`] of one block (an I/O of the map's block size, the common case):
    /// the same checks without the loop over words and the masks of a run.
    #[inline]
    pub(crate) fn set_one(&mut self, b: u64) -> u64 {
        let w = (b / 64) as usize;
        let words = &mut self.levels[0];
        if b > self.n || w >= words.len() {
            return 0;
        }
        let bit = 1u64 << (b % 64);
        let word = words[w];
        if word & bit != 0 {
            return 0;
        }
        words[w] = word | bit;
        if word | bit == u64::MAX {
            self.propagate_full(w);
        }
        1
    }

    /// [`AxMap::set_nr`] of any run of blocks.
    fn set_run(&mut self, mut b: u64, mut nr: u64) -> u64 {
        let mut done = 0;
        while nr > 0 {
            // fio ignores a start past the end (and has no word past the last one).
            if b > self.n || (b / 64) as usize >= self.levels[0].len() {
                break;
            }
            let bit = b % 64;
            let this = nr.min(64 - bit);
            let mask = if this == 64 { u64::MAX } else { ((1u64 << this) - 1) << bit };
            let overlap = self.levels[0][(b / 64) as usize] & mask;
            let set = if overlap == 0 {
                this
            } else {
                // The free blocks before the first used one.
                overlap.trailing_zeros() as u64 - bit
            };
            if set == 0 {
                break;
            }
            let mask = if set == 64 { u64::MAX } else { ((1u64 << set) - 1) << bit };
            self.set_bits_in_word(b, mask);
            done += set;
            if set != this {
                break;
            }
            nr -= set;
            b += set;
        }
        done
    }
}

/// fio's zipf / pareto state (lib/zipf.c `struct zipf_state`).
#[derive(Clone, Debug)]
pub struct ZipfState {
    nranges: u64,
    theta: f64,
    zeta2: f64,
    zetan: f64,
    pareto_pow: f64,
    rand: FioRand,
    rand_off: u64,
}

/// fio computes zeta(n) over at most this many terms (lib/zipf.c `ZIPF_MAX_GEN`).
const ZIPF_MAX_GEN: u64 = 10_000_000;

impl ZipfState {
    /// lib/zipf.c `shared_rand_init`: a 32-bit stream and a random (or centred) offset.
    fn shared(nranges: u64, center: f64, seed: u32) -> ZipfState {
        let mut rand = FioRand::new(seed as u64, false);
        let mut rand_off = rand.draw();
        if center != -1.0 {
            rand_off = (nranges as f64 * center) as u64;
        }
        ZipfState { nranges, theta: 0.0, zeta2: 0.0, zetan: 0.0, pareto_pow: 0.0, rand, rand_off }
    }

    /// lib/zipf.c `zipf_init`.
    pub fn zipf(nranges: u64, theta: f64, center: f64, seed: u32) -> ZipfState {
        let mut z = ZipfState::shared(nranges, center, seed);
        z.theta = theta;
        z.zeta2 = 1.0f64.powf(theta) + 0.5f64.powf(theta);
        for i in 0..nranges.min(ZIPF_MAX_GEN) {
            z.zetan += (1.0 / (i + 1) as f64).powf(theta);
        }
        z
    }

    /// lib/zipf.c `pareto_init`.
    pub fn pareto(nranges: u64, h: f64, center: f64, seed: u32) -> ZipfState {
        let mut z = ZipfState::shared(nranges, center, seed);
        z.pareto_pow = h.ln() / (1.0 - h).ln();
        z
    }

    /// lib/zipf.c `zipf_next`: a rank drawn by Gray et al.'s method, hashed over the
    /// ranges (so ranks collide where `nranges` is not a power of two, as in fio).
    pub fn zipf_next(&mut self) -> u64 {
        let n = self.nranges;
        let alpha = 1.0 / (1.0 - self.theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan);
        let rand_uni = self.rand.draw() as f64 / u32::MAX as f64;
        let rand_z = rand_uni * self.zetan;
        let val = if rand_z < 1.0 {
            1
        } else if rand_z < 1.0 + 0.5f64.powf(self.theta) {
            2
        } else {
            1 + (n as f64 * (eta * rand_uni - eta + 1.0).powf(alpha)) as u64
        };
        hash_u64(val - 1).wrapping_add(self.rand_off) % n
    }

    /// lib/zipf.c `pareto_next`.
    pub fn pareto_next(&mut self) -> u64 {
        let r = self.rand.draw() as f64 / u32::MAX as f64;
        let v = ((self.nranges - 1) as f64 * r.powf(self.pareto_pow)) as u64;
        hash_u64(v).wrapping_add(self.rand_off) % self.nranges
    }
}

/// fio's normal distribution (lib/gauss.c: the mean of 12 uniform draws, widened by a
/// uniform deviation when a sigma is given).
#[derive(Clone, Debug)]
pub struct GaussState {
    rand: FioRand,
    nranges: u64,
    stddev: u32,
    rand_off: u32,
}

impl GaussState {
    /// lib/gauss.c `gauss_init`.
    pub fn new(nranges: u64, dev: f64, center: f64, seed: u32) -> GaussState {
        let mut stddev = 0u32;
        if dev != 0.0 {
            stddev = ((nranges as f64 * dev) / 100.0).ceil() as u32;
            if stddev as u64 > nranges / 2 {
                stddev = (nranges / 2) as u32;
            }
        }
        // C converts the (possibly negative) product into an unsigned int.
        let rand_off = if center == -1.0 { 0 } else { (nranges as f64 * (center - 0.5)) as i64 as u32 };
        GaussState { rand: FioRand::new(seed as u64, false), nranges, stddev, rand_off }
    }

    /// lib/gauss.c `gauss_next`.
    pub fn next_block(&mut self) -> u64 {
        let mut sum = 0u64;
        for _ in 0..12 {
            sum = sum.wrapping_add(self.rand.draw() % (self.nranges + 1));
        }
        sum = sum.div_ceil(12);
        if self.stddev != 0 {
            let r = self.rand.draw();
            let vr = (self.stddev as f64 * (r as f64 / 4_294_967_296.0)) as i32;
            let mut dev = vr.wrapping_sub((self.stddev / 2) as i32);
            while sum.wrapping_add(dev as i64 as u64) >= self.nranges {
                dev /= 2;
            }
            sum = sum.wrapping_add(dev as i64 as u64);
        }
        hash_u64(sum).wrapping_add(self.rand_off as u64) % self.nranges
    }
}

/// One entry of fio's zone index (zone-dist.c `struct zone_split_index`): for each of the
/// 100 access percentiles, the zone's range in percent and in bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneIndex {
    pub size_perc: u32,
    pub size_perc_prev: u32,
    pub size: u64,
    pub size_prev: u64,
}

/// zone-dist.c `__td_zone_gen_index` for one direction: `(access %, range %, range bytes)`
/// per zone. Percentiles no zone covers keep fio's zeroed entries.
pub fn zone_index(zones: &[(u32, u32, u64)]) -> Vec<ZoneIndex> {
    let mut out = vec![ZoneIndex::default(); 100];
    let (mut aprev, mut sprev, mut sprev_sz) = (0u32, 0u32, 0u64);
    for &(access, size_perc, size) in zones {
        for j in aprev..aprev + access {
            if let Some(z) = out.get_mut(j as usize) {
                *z = ZoneIndex { size_perc: sprev + size_perc, size_perc_prev: sprev, size: sprev_sz + size, size_prev: sprev_sz };
            }
        }
        aprev += access;
        sprev += size_perc;
        sprev_sz += size;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axmap_next_free_wraps_and_ends() {
        for n in [1u64, 63, 64, 65, 4097, 300_000] {
            let mut m = AxMap::new(n);
            let mut seen = vec![false; n as usize];
            let mut r = FioRand::new(n, false);
            for _ in 0..n {
                let b = r.draw() % n;
                let b = if m.is_set(b) { m.next_free(b).unwrap() } else { b };
                assert!(!seen[b as usize], "block {b} twice (n={n})");
                seen[b as usize] = true;
                assert_eq!(m.set_nr(b, 1), 1);
            }
            assert_eq!(m.next_free(0), None);
            m.clear();
            assert!(!m.is_set(0));
        }
    }

    #[test]
    fn axmap_set_nr_stops_at_a_used_block() {
        let mut m = AxMap::new(1000);
        assert_eq!(m.set_nr(70, 1), 1);
        assert_eq!(m.set_nr(60, 16), 10);
        assert_eq!(m.set_nr(71, 100), 100);
        assert_eq!(m.set_nr(70, 4), 0);
        assert_eq!(m.next_free(60), Some(171));
        assert_eq!(m.next_free(999), Some(0));
    }

    /// The one-block path of `set_nr` against the general run (which it replaced for
    /// `nr == 1`): same count, same words at every level, over random maps filled until
    /// full, including blocks past `n` in the last word and starts past the end.
    #[test]
    fn set_one_is_the_run_of_one_block() {
        for n in [1u64, 63, 64, 65, 130, 4097, 70_000] {
            let (mut fast, mut run) = (AxMap::new(n), AxMap::new(n));
            let mut r = FioRand::new(n ^ 0x5eed, false);
            for i in 0..4 * n + 200 {
                // Mostly inside the map, some in the last word's spare bits and past it.
                let b = if i % 17 == 0 { n + r.draw() % 130 } else { r.draw() % n };
                assert_eq!(fast.set_nr(b, 1), run.set_run(b, 1), "n={n} block {b}");
                assert_eq!(fast.levels, run.levels, "n={n} block {b}");
            }
            // Then every block in order, up to the last word's spare bits: the map fills.
            for b in 0..n.div_ceil(64) * 64 + 1 {
                assert_eq!(fast.set_nr(b, 1), run.set_run(b, 1), "n={n} block {b}");
                assert_eq!(fast.levels, run.levels, "n={n} block {b}");
            }
            assert_eq!(fast.next_free(0), None, "n={n}: the map fills");
        }
    }

    #[test]
    fn zone_index_covers_percentiles() {
        let idx = zone_index(&[(60, 10, 100), (40, 90, 900)]);
        assert_eq!(idx[0], ZoneIndex { size_perc: 10, size_perc_prev: 0, size: 100, size_prev: 0 });
        assert_eq!(idx[59].size_perc, 10);
        assert_eq!(idx[60], ZoneIndex { size_perc: 100, size_perc_prev: 10, size: 1000, size_prev: 100 });
    }
}
