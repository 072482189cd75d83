//! The model's random numbers: one seeded generator per stream, never OS entropy.
//!
//! xoshiro256++ (from `rand_xoshiro`) seeded through SplitMix64; ranges use Lemire's
//! multiply-shift, which is unbiased enough for workload generation (bias < n / 2^64) and
//! branch-free in the hot path.

use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[derive(Clone, Debug)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform integer in `0..n` (`n > 0`).
    #[inline(always)]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform float in [0, 1).
    #[inline(always)]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn roughly_uniform() {
        let mut r = Rng::new(7);
        let mut h = [0u32; 8];
        for _ in 0..80_000 {
            h[r.below(8) as usize] += 1;
        }
        for c in h {
            assert!((9_000..11_000).contains(&c), "{h:?}");
        }
    }
}
