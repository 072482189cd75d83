//! Small arithmetic helpers shared by several layers (no dependencies).

/// Exact division of u32 values by a fixed divisor with one multiply (Lemire, Kaser and
/// Kurz, "Faster remainder by direct computation", 2019: for 32-bit n and d,
/// n / d = (n * ceil(2^64 / d)) >> 64). The FTL divides by the superblock size on every
/// overwrite; a hardware divide there costs more than the rest of the bookkeeping.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FastDiv {
    m: u64,
    d: u32,
}

impl FastDiv {
    pub fn new(d: u32) -> FastDiv {
        assert!(d > 0);
        FastDiv { m: if d == 1 { 0 } else { u64::MAX / d as u64 + 1 }, d }
    }

    #[inline(always)]
    pub fn quotient(self, n: u32) -> u32 {
        if self.d == 1 {
            return n;
        }
        ((n as u128 * self.m as u128) >> 64) as u32
    }
}

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// 2014): one step of a high-quality 64-bit mix, used to derive independent seeds from one.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
