//! fio 3.33's random number generators, reimplemented so a job's I/O sequence is fio's
//! bit for bit: the combined Tausworthe generators (lib/rand.[ch]: taus88 for
//! `random_generator=tausworthe`, taus258 for `tausworthe64`), the scaled draws built on
//! them (`rand_between`, the `r / (rand_max + 1.0)` scaling), the maximal-length LFSR of
//! `random_generator=lfsr` (lib/lfsr.c) and the two hashes fio uses on the way
//! (hash.h `__hash_u64` and Bob Jenkins' `jhash`). Written from the published algorithms
//! and fio's behaviour; the constants are the algorithms' own.

/// 2^32 as fio's `FRAND32_MAX_PLUS_ONE`.
const TWO_POW_32: f64 = 4_294_967_296.0;
/// 2^64 as fio's `FRAND64_MAX_PLUS_ONE`.
const TWO_POW_64: f64 = TWO_POW_32 * TWO_POW_32;
/// [`FioRand::scale`] of a 32-bit draw: below this fraction (of 2^32) the integer part of
/// value × r / 2^32 is fio's truncated double (2^32 − 2^12, a margin over the 2^11 needed).
const SCALE_EXACT_FRACTION: u32 = u32::MAX - (1 << 12) + 1;

/// fio's seed fix-up (lib/rand.c `__seed`): each component must exceed its lower limit.
#[inline]
fn fix_seed(x: u64, m: u64) -> u64 {
    if x < m {
        x + m
    } else {
        x
    }
}

/// fio's start value for the LCG that spreads a seed over the components: the C source
/// writes `(2^31) + (2^17) + (2^7)`, which is XOR in C: 29 + 19 + 5.
const LCG_START: u64 = 53;

/// L'Ecuyer's taus88 (period ~2^88), fio's default `tausworthe` generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taus88 {
    s: [u32; 3],
}

impl Taus88 {
    /// fio's `__init_rand32`: LCG-spread seed, fixed-up components, six warm-up draws.
    pub fn new(seed: u32) -> Taus88 {
        let lcg = |x: u32| x.wrapping_mul(69069) ^ seed;
        let s1 = fix_seed(lcg(LCG_START as u32) as u64, 1) as u32;
        let s2 = fix_seed(lcg(s1) as u64, 7) as u32;
        let s3 = fix_seed(lcg(s2) as u64, 15) as u32;
        let mut t = Taus88 { s: [s1, s2, s3] };
        for _ in 0..6 {
            t.next_u32();
        }
        t
    }

    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        #[inline(always)]
        fn step(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
            ((s & c) << d) ^ (((s << a) ^ s) >> b)
        }
        let [s1, s2, s3] = &mut self.s;
        *s1 = step(*s1, 13, 19, 0xFFFF_FFFE, 12);
        *s2 = step(*s2, 2, 25, 0xFFFF_FFF8, 4);
        *s3 = step(*s3, 3, 11, 0xFFFF_FFF0, 17);
        *s1 ^ *s2 ^ *s3
    }
}

/// L'Ecuyer's taus258 (five 64-bit components), fio's `tausworthe64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taus258 {
    s: [u64; 5],
}

impl Taus258 {
    /// fio's `__init_rand64`.
    pub fn new(seed: u64) -> Taus258 {
        let lcg = |x: u64| x.wrapping_mul(6_906_969_069) ^ seed;
        let mut s = [0u64; 5];
        let mut prev = LCG_START;
        for (i, m) in [1u64, 7, 15, 33, 49].into_iter().enumerate() {
            s[i] = fix_seed(lcg(prev), m);
            prev = s[i];
        }
        let mut t = Taus258 { s };
        for _ in 0..6 {
            t.next_u64();
        }
        t
    }

    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        #[inline(always)]
        fn step(s: u64, a: u32, b: u32, c: u64, d: u32) -> u64 {
            ((s & c) << d) ^ (((s << a) ^ s) >> b)
        }
        let s = &mut self.s;
        s[0] = step(s[0], 1, 53, 0xFFFF_FFFF_FFFF_FFFE, 10);
        s[1] = step(s[1], 24, 50, 0xFFFF_FFFF_FFFF_FE00, 5);
        s[2] = step(s[2], 3, 23, 0xFFFF_FFFF_FFFF_F000, 29);
        s[3] = step(s[3], 5, 24, 0xFFFF_FFFF_FFFE_0000, 23);
        s[4] = step(s[4], 3, 33, 0xFFFF_FFFF_FF80_0000, 8);
        s[0] ^ s[1] ^ s[2] ^ s[3] ^ s[4]
    }
}

/// fio's `struct frand_state`: one stream, 32- or 64-bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FioRand {
    T32(Taus88),
    T64(Taus258),
}

impl FioRand {
    /// fio's `init_rand_seed(state, seed, use64)`; the 32-bit generator takes the low 32
    /// bits of the seed.
    pub fn new(seed: u64, use64: bool) -> FioRand {
        if use64 {
            FioRand::T64(Taus258::new(seed))
        } else {
            FioRand::T32(Taus88::new(seed as u32))
        }
    }

    /// fio's `__rand`.
    #[inline(always)]
    pub fn draw(&mut self) -> u64 {
        match self {
            FioRand::T32(t) => t.next_u32() as u64,
            FioRand::T64(t) => t.next_u64(),
        }
    }

    /// fio's `rand_max`.
    #[inline(always)]
    pub fn rand_max(&self) -> u64 {
        match self {
            FioRand::T32(_) => u32::MAX as u64,
            FioRand::T64(_) => u64::MAX,
        }
    }

    /// `value * (r / (rand_max + 1.0))` in fio's floating point, truncated: how fio scales
    /// a draw onto `[0, value)` (io_u.c `__get_next_rand_offset`, `get_next_buflen`).
    #[inline(always)]
    pub fn scale(&self, value: u64, r: u64) -> u64 {
        match self {
            // A 32-bit draw converts exactly through i64, and dividing by 2^32 is exact:
            // the same double as fio's, without the unsigned-conversion branches.
            FioRand::T32(_) => {
                // In integers when that is exact: fio's double is value × r / 2^32 rounded
                // once (both factors are exact), off by under 2^-21 for a value below 2^32,
                // so it truncates to the integer part unless the fraction is within 2^-21
                // of 1. About 14 instructions fewer per random I/O.
                if value <= u32::MAX as u64 {
                    let n = value * (r as u32 as u64);
                    if (n as u32) < SCALE_EXACT_FRACTION {
                        return n >> 32;
                    }
                }
                let p = value as f64 * ((r as u32 as i64 as f64) * (1.0 / TWO_POW_32));
                if p < TWO_POW_32 * TWO_POW_32 / 2.0 {
                    p as i64 as u64
                } else {
                    p as u64
                }
            }
            FioRand::T64(_) => (value as f64 * (r as f64 / TWO_POW_64)) as u64,
        }
    }

    /// fio's `rand_between(state, start, end)`, both inclusive (`rand32_upto` /
    /// `rand64_upto` with their double arithmetic).
    pub fn between(&mut self, start: u64, end: u64) -> u64 {
        match self {
            FioRand::T32(t) => {
                let r = t.next_u32();
                let span = ((end - start) as u32).wrapping_add(1);
                let v = span as f64 * (r as f64 / TWO_POW_32);
                // C converts through `int`; every value fio asks for fits in it.
                start + (v as i32) as u32 as u64
            }
            FioRand::T64(t) => {
                let r = t.next_u64();
                let span = (end - start).wrapping_add(1);
                start + (span as f64 * (r as f64 / TWO_POW_64)) as u64
            }
        }
    }
}

/// The first draw of a freshly seeded stream and the stream's maximum (`init_rand_seed`
/// then `__rand`): what fio's one-off draws use, e.g. the size of a `filesize=` range
/// (filesetup.c `get_rand_file_size`).
pub fn first_draw(seed: u64, use64: bool) -> (u64, u64) {
    let mut r = FioRand::new(seed, use64);
    (r.draw(), r.rand_max())
}

/// hash.h `__hash_u64`: multiplication by the 64-bit golden ratio.
#[inline(always)]
pub fn hash_u64(v: u64) -> u64 {
    v.wrapping_mul(0x61C8_8646_80B5_83EB)
}

/// hash.h `jhash` (Bob Jenkins' lookup2-style hash as fio has it, including its habit of
/// adding only the first byte of each full 12-byte block).
pub fn jhash(key: &[u8], initval: u32) -> u32 {
    let len = key.len() as u32;
    let mut a = 0x61C8_8647u32.wrapping_add(len).wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(k[0] as u32);
        b = b.wrapping_add(k[4] as u32);
        c = c.wrapping_add(k[8] as u32);
        // __jhash_mix
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(4);
        b = b.wrapping_add(a);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    let byte = |i: usize, shift: u32| -> u32 { k.get(i).map_or(0, |&x| (x as u32) << shift) };
    c = c.wrapping_add(byte(11, 24)).wrapping_add(byte(10, 16)).wrapping_add(byte(9, 8)).wrapping_add(byte(8, 0));
    b = b.wrapping_add(byte(7, 24)).wrapping_add(byte(6, 16)).wrapping_add(byte(5, 8)).wrapping_add(byte(4, 0));
    a = a.wrapping_add(byte(3, 24)).wrapping_add(byte(2, 16)).wrapping_add(byte(1, 8)).wrapping_add(byte(0, 0));
    // __jhash_final
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c
}

/// Tap positions of maximal-length XNOR LFSRs by register width (the standard table,
/// Xilinx XAPP 052, which fio's lib/lfsr.c uses); index = width in bits.
const LFSR_TAPS: [&[u8]; 64] = [
    &[],
    &[],
    &[],
    &[3, 2],
    &[4, 3],
    &[5, 3],
    &[6, 5],
    &[7, 6],
    &[8, 6, 5, 4],
    &[9, 5],
    &[10, 7],
    &[11, 9],
    &[12, 6, 4, 1],
    &[13, 4, 3, 1],
    &[14, 5, 3, 1],
    &[15, 14],
    &[16, 15, 13, 4],
    &[17, 14],
    &[18, 11],
    &[19, 6, 2, 1],
    &[20, 17],
    &[21, 19],
    &[22, 21],
    &[23, 18],
    &[24, 23, 22, 17],
    &[25, 22],
    &[26, 6, 2, 1],
    &[27, 5, 2, 1],
    &[28, 25],
    &[29, 27],
    &[30, 6, 4, 1],
    &[31, 28],
    &[32, 31, 29, 1],
    &[33, 20],
    &[34, 27, 2, 1],
    &[35, 33],
    &[36, 25],
    &[37, 5, 4, 3, 2, 1],
    &[38, 6, 5, 1],
    &[39, 35],
    &[40, 38, 21, 19],
    &[41, 38],
    &[42, 41, 20, 19],
    &[43, 42, 38, 37],
    &[44, 43, 18, 17],
    &[45, 44, 42, 41],
    &[46, 45, 26, 25],
    &[47, 42],
    &[48, 47, 21, 20],
    &[49, 40],
    &[50, 49, 24, 23],
    &[51, 50, 36, 35],
    &[52, 49],
    &[53, 52, 38, 37],
    &[54, 53, 18, 17],
    &[55, 31],
    &[56, 55, 35, 34],
    &[57, 50],
    &[58, 39],
    &[59, 58, 38, 37],
    &[60, 59],
    &[61, 60, 46, 45],
    &[62, 61, 6, 5],
    &[63, 62],
];

/// fio's per-file LFSR (lib/lfsr.c): visits every block number below `nums` once per
/// pass, skipping the register values beyond it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lfsr {
    xormask: u64,
    last_val: u64,
    cached_bit: u64,
    max_val: u64,
    num_vals: u64,
    cycle_length: u64,
    cached_cycle_length: u64,
    spin: u32,
}

impl Lfsr {
    /// fio's `lfsr_init(fl, nums, seed, spin)`; None where fio fails (no register wide
    /// enough, a spin above 15, or a seed that is the illegal all-ones state).
    pub fn new(nums: u64, seed: u64, spin: u32) -> Option<Lfsr> {
        let width = (3..64).find(|&i| (1u64 << i) > nums)?;
        let taps = LFSR_TAPS[width];
        let xormask = taps.iter().fold(0u64, |m, &t| m | 1u64 << (t - 1));
        let mut l = Lfsr {
            xormask,
            last_val: 0,
            cached_bit: 1u64 << (taps[0] - 1),
            max_val: nums.wrapping_sub(1),
            num_vals: 0,
            cycle_length: 0,
            cached_cycle_length: 0,
            spin: 0,
        };
        l.prepare_spin(spin)?;
        l.reset(seed).then_some(l)
    }

    /// lib/lfsr.c `prepare_spin`: where spinning would repeat a sub-sequence early, the
    /// cycle length after which one extra step breaks it.
    fn prepare_spin(&mut self, spin: u32) -> Option<()> {
        if spin > 15 {
            return None;
        }
        let max = (self.cached_bit << 1) - 1;
        let (x, y) = (max / (spin as u64 + 1), max % (spin as u64 + 1));
        self.cycle_length = 0;
        self.spin = spin;
        for i in 1..=spin as u64 {
            if (y * i) % (spin as u64 + 1) == 0 {
                self.cycle_length = x * i + (y * i) / (spin as u64 + 1);
                break;
            }
        }
        self.cached_cycle_length = self.cycle_length;
        // fio counts the first cycle one longer.
        self.cycle_length += 1;
        Some(())
    }

    /// fio's `lfsr_reset`: a new pass from `seed`; false for the illegal all-ones state.
    pub fn reset(&mut self, seed: u64) -> bool {
        let mask = (self.cached_bit << 1) - 1;
        self.num_vals = 0;
        self.last_val = seed & mask;
        self.last_val != mask
    }

    #[inline(always)]
    fn steps(&mut self, n: u32) {
        for _ in 0..n {
            let v = self.last_val;
            self.last_val = ((v >> 1) | self.cached_bit) ^ ((v & 1).wrapping_sub(1) & self.xormask);
        }
    }

    /// fio's `lfsr_next`: the next block number, None once the pass has used them all.
    #[inline]
    pub fn next_block(&mut self) -> Option<u64> {
        let n = self.num_vals;
        self.num_vals += 1;
        if n > self.max_val {
            return None;
        }
        loop {
            if self.cycle_length != 0 && {
                self.cycle_length -= 1;
                self.cycle_length == 0
            } {
                self.steps(self.spin + 2);
                self.cycle_length = self.cached_cycle_length;
            } else {
                self.steps(self.spin + 1);
            }
            if self.last_val <= self.max_val {
                return Some(self.last_val);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First `--debug=random` "off rand" values of fio 3.33 for thread 1 with the default
    /// seeds (randrepeat=1: offset seed 0xb1899bed), e.g.
    /// `fio --name=j --ioengine=null --rw=randread --bs=4k --size=1m --debug=random
    ///  --random_generator=tausworthe --number_ios=3`.
    #[test]
    fn taus_first_draws_match_fio() {
        let mut t = FioRand::new(0xB189_9BED, false);
        let got: Vec<u64> = (0..3).map(|_| t.draw()).collect();
        assert_eq!(got, GOLDEN_TAUS32);
        let mut t = FioRand::new(0xB189_9BED, true);
        let got: Vec<u64> = (0..3).map(|_| t.draw()).collect();
        assert_eq!(got, GOLDEN_TAUS64);
    }

    const GOLDEN_TAUS32: [u64; 3] = [259_043_585, 3_179_521_932, 3_621_444_214];
    const GOLDEN_TAUS64: [u64; 3] = [17_311_067_694_306_724_737, 485_009_114_434_689_783, 1_488_059_811_897_507_987];

    /// `fio --name=j --ioengine=null --rw=randread --bs=4k --size=1m --number_ios=8
    ///  --random_generator=lfsr --write_iolog=l.log`: offsets / 4096 (256 blocks).
    #[test]
    fn lfsr_first_blocks_match_fio() {
        let mut l = Lfsr::new(256, 0xB189_9BED, 0).unwrap();
        let got: Vec<u64> = (0..8).map(|_| l.next_block().unwrap()).collect();
        assert_eq!(got, [235, 205, 163, 196, 114, 41, 154, 93]);
    }

    #[test]
    fn lfsr_visits_every_block_once() {
        for n in [1u64, 7, 8, 9, 100, 4096, 5000] {
            let mut l = Lfsr::new(n, 0xB189_9BED, 0).unwrap();
            let mut seen = vec![false; n as usize];
            for _ in 0..n {
                let v = l.next_block().unwrap();
                assert!(!seen[v as usize], "{v} twice of {n}");
                seen[v as usize] = true;
            }
            assert_eq!(l.next_block(), None);
        }
    }

    #[test]
    fn scale_is_fios_formula() {
        // `value * (r / (rand_max + 1.0))` in doubles, as io_u.c writes it.
        let t = FioRand::new(1, false);
        for (value, r) in
            [(256u64, 0u64), (256, u32::MAX as u64), (1 << 40, 123_456_789), (u64::MAX, u32::MAX as u64), (1000, 2_147_483_648)]
        {
            assert_eq!(t.scale(value, r), (value as f64 * (r as f64 / (u32::MAX as f64 + 1.0))) as u64, "{value} {r}");
        }
        let t = FioRand::new(1, true);
        for (value, r) in [(256u64, u64::MAX), (1 << 40, 1 << 63), (7, 0)] {
            assert_eq!(t.scale(value, r), (value as f64 * (r as f64 / (u64::MAX as f64 + 1.0))) as u64);
        }
    }

    /// The integer path of a 32-bit scale against fio's double, where they could part: a
    /// product whose fraction is within a hair of 1 (the double rounds up to the next
    /// integer there for large values), and random values and draws.
    #[test]
    fn scale_in_integers_is_fios_double() {
        let t = FioRand::new(1, false);
        let fio = |value: u64, r: u64| (value as f64 * (r as f64 / (u32::MAX as f64 + 1.0))) as u64;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let value = match i % 3 {
                0 => (x >> 32) | 1,
                1 => ((x >> 40) | 1).max(3),
                _ => (x >> 33) | (1 << 31) | 1,
            };
            // r with value × r ≡ -k (mod 2^32), k small: the fraction just under 1.
            let mut inv = value as u32;
            for _ in 0..5 {
                inv = inv.wrapping_mul(2u32.wrapping_sub((value as u32).wrapping_mul(inv)));
            }
            let k = (x & 0x1fff) as u32 + 1;
            for r in [(k.wrapping_neg()).wrapping_mul(inv) as u64, x as u32 as u64] {
                assert_eq!(t.scale(value, r), fio(value, r), "{value} {r}");
            }
        }
    }

    #[test]
    fn between_stays_in_range() {
        let mut t = FioRand::new(5, false);
        for _ in 0..10_000 {
            assert!((1..=100).contains(&t.between(1, 100)));
        }
        let mut t = FioRand::new(5, true);
        for _ in 0..10_000 {
            assert!((1..=100).contains(&t.between(1, 100)));
        }
    }
}
