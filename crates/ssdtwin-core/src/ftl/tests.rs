use super::gc::GC_START;
use super::state::SetCounters;
use super::*;
use crate::nand::{NandOp, NoTiming, Recorder};
use crate::spec::DriveSpec;
use crate::units::LogicalIu;
use crate::util::FastDiv;
use proptest::prelude::*;
use std::collections::HashSet;

/// A tiny drive: 2 channels x 1 die, `blocks` superblocks of 4 wordlines.
pub(crate) fn tiny_spec(iu: u32, blocks: u32, tnvmcap: u64, buffer_ius: u64) -> DriveSpec {
    let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
    s.nand.channels.value = 2;
    s.nand.dies_per_channel.value = 1;
    // TLC dual-plane (96 KiB program unit) for 4 KiB IUs, QLC quad-plane (256 KiB) for larger.
    let qlc = iu > 16384;
    s.nand.planes_per_die.value = if qlc { 4 } else { 2 };
    s.nand.bits_per_cell.value = if qlc { 4 } else { 3 };
    s.nand.pages_per_block.value = if qlc { 16 } else { 12 };
    s.nand.page_bytes.value = 16384;
    s.nand.blocks_per_plane.value = blocks;
    s.ftl.iu_bytes.value = iu;
    s.ftl.write_buffer_bytes.value = buffer_ius * iu as u64;
    s.capacity.tnvmcap_bytes.value = tnvmcap;
    s.capacity.max_namespaces.value = 4;
    s.validate("tiny").unwrap();
    s
}

fn waf(f: &Ftl) -> f64 {
    let c = f.counters();
    (c.host_programmed_ius + c.gc_programmed_ius) as f64 * f.cfg.iu_bytes as f64 / c.host_write_bytes as f64
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u32) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (((self.0 >> 32) * n as u64) >> 32) as u32
    }
}

#[test]
fn sequential_overwrite_has_waf_one() {
    // 64 superblocks of 2 dies x 2 planes x 12 pages x 16 KiB = 768 KiB each.
    let spec = tiny_spec(4096, 64, 40 << 20, 24);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (40u32 << 20) / 4096;
    for _pass in 0..3 {
        for iu in 0..n {
            f.write(LogicalIu(iu), f.cfg.full_mask, &mut NoTiming);
        }
    }
    f.check_invariants().unwrap();
    let w = waf(&f);
    assert!(w <= 1.0, "sequential WAF {w}");
    assert!(f.counters().erases > 0, "GC must have reclaimed the overwritten superblocks");
}

#[test]
fn full_check_asks_its_stop_as_it_walks_and_ends_when_told() {
    let spec = tiny_spec(4096, 64, 40 << 20, 24);
    let mut f = Ftl::new(&spec).unwrap();
    for iu in 0..(40u32 << 20) / 4096 {
        f.write(LogicalIu(iu), f.cfg.full_mask, &mut NoTiming);
    }
    let mut asked = 0;
    let whole = f.check_invariants_or_stop(&mut || {
        asked += 1;
        false
    });
    assert_eq!(whole, Ok(CheckEnd::Whole));
    assert_eq!(asked, (f.cfg.logical_ius as usize).div_ceil(checks::CHECK_STOP_EVERY_IUS));
    assert_eq!(f.check_invariants_or_stop(&mut || true), Ok(CheckEnd::Stopped));
}

#[test]
fn random_overwrite_keeps_invariants_and_waf_above_one() {
    let spec = tiny_spec(4096, 64, 36 << 20, 24);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (36u32 << 20) / 4096;
    let mut r = Lcg(7);
    for i in 0..(n * 6) {
        f.write(LogicalIu(r.next(n)), f.cfg.full_mask, &mut NoTiming);
        if i % 5000 == 0 {
            f.check_invariants().unwrap();
        }
    }
    f.check_invariants().unwrap();
    let w = waf(&f);
    assert!(w > 1.5, "random WAF {w} should show GC work");
}

#[test]
fn small_sequential_writes_coalesce_into_whole_ius() {
    let spec = tiny_spec(65536, 64, 40 << 20, 8);
    let mut f = Ftl::new(&spec).unwrap();
    let ius = (40u32 << 20) / 65536;
    for _ in 0..2 {
        for iu in 0..ius {
            for s in 0..16u32 {
                f.write(LogicalIu(iu), 0xFFu128 << (s * 8), &mut NoTiming);
            }
        }
    }
    f.check_invariants().unwrap();
    assert_eq!(f.counters().rmw_ius, 0);
    assert!(waf(&f) <= 1.0, "{}", waf(&f));
}

#[test]
fn small_random_writes_cost_a_read_modify_write() {
    let spec = tiny_spec(65536, 64, 40 << 20, 8);
    let mut f = Ftl::new(&spec).unwrap();
    let ius = (40u32 << 20) / 65536;
    for iu in 0..ius {
        f.write(LogicalIu(iu), f.cfg.full_mask, &mut NoTiming);
    }
    let mut r = Lcg(3);
    let before = f.counters().clone();
    for _ in 0..ius * 4 {
        let iu = r.next(ius);
        let s = r.next(16);
        f.write(LogicalIu(iu), 0xFFu128 << (s * 8), &mut NoTiming);
    }
    f.check_invariants().unwrap();
    let c = f.counters();
    let host = c.host_write_bytes - before.host_write_bytes;
    let nand = (c.host_programmed_ius + c.gc_programmed_ius - before.host_programmed_ius - before.gc_programmed_ius) * 65536;
    assert!(c.rmw_ius - before.rmw_ius > (ius * 3) as u64);
    // Every 4 KiB write rewrites a whole 64 KiB IU: at least 16x before GC.
    assert!(nand as f64 / host as f64 > 15.0, "{}", nand as f64 / host as f64);
}

#[test]
fn trim_unmaps_and_frees_space() {
    let spec = tiny_spec(4096, 64, 40 << 20, 0);
    let mut f = Ftl::new(&spec).unwrap();
    let mut rec = Recorder::default();
    f.write(LogicalIu(5), f.cfg.full_mask, &mut rec);
    assert!(matches!(f.read(LogicalIu(5), 1, &mut rec), ReadSource::Nand { .. }));
    f.deallocate(LogicalIu(5));
    assert_eq!(f.read(LogicalIu(5), 1, &mut rec), ReadSource::Unmapped);
    assert_eq!(f.state().superblocks().iter().map(|s| s.valid).sum::<u32>(), 0);
    f.check_invariants().unwrap();
}

#[test]
fn buffered_data_is_read_from_the_buffer() {
    let spec = tiny_spec(4096, 64, 40 << 20, 16);
    let mut f = Ftl::new(&spec).unwrap();
    let mut rec = Recorder::default();
    f.write(LogicalIu(9), 0x0F, &mut rec);
    assert!(rec.0.is_empty(), "a buffered write emits no NAND operation");
    assert_eq!(f.read(LogicalIu(9), 0x03, &mut rec), ReadSource::Buffer);
    assert_eq!(f.read(LogicalIu(9), 0xF0, &mut rec), ReadSource::Unmapped);
}

#[derive(Debug, Clone)]
enum Op {
    Write(u32, u8, u8),
    Trim(u32),
    Read(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..300, 0u8..16, 1u8..=16).prop_map(|(iu, s, n)| Op::Write(iu, s, n)),
        1 => (0u32..300).prop_map(Op::Trim),
        1 => (0u32..300).prop_map(Op::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Against a reference model: after draining the buffer, exactly the IUs written since
    /// their last deallocation are mapped; invariants hold throughout; WAF >= 1.
    #[test]
    fn matches_reference_model(ops in proptest::collection::vec(op(), 1..3000), buf in 0u64..8) {
        // 64 KiB IUs (16 x 4 KiB sectors of the mask), tiny drive, 300 logical IUs in use.
        let spec = tiny_spec(65536, 24, 300 * 65536, buf);
        let mut f = Ftl::new(&spec).unwrap();
        let mut live: HashSet<u32> = HashSet::new();
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Write(iu, s, n) => {
                    let n = n.min(16 - s) as u32;
                    let mask = if n == 16 { u128::MAX } else { ((1u128 << (8 * n)) - 1) << (8 * s as u32) };
                    f.write(LogicalIu(iu), mask, &mut NoTiming);
                    live.insert(iu);
                }
                Op::Trim(iu) => { f.deallocate(LogicalIu(iu)); live.remove(&iu); }
                Op::Read(iu) => { f.read(LogicalIu(iu), 0xFF, &mut NoTiming); }
            }
            if i % 257 == 0 { f.check_invariants().map_err(TestCaseError::fail)?; }
        }
        f.drain_buffer(&mut NoTiming);
        f.check_invariants().map_err(TestCaseError::fail)?;
        for iu in 0..300u32 {
            prop_assert_eq!(f.lookup(LogicalIu(iu)).is_some(), live.contains(&iu), "IU {}", iu);
        }
    }
}

proptest! {
    #[test]
    fn fast_division_is_exact(n in any::<u32>(), d in 1u32..) {
        prop_assert_eq!(FastDiv::new(d).quotient(n), n / d);
    }
}

#[test]
fn deallocating_a_buffered_iu_counts_once() {
    let spec = tiny_spec(4096, 64, 40 << 20, 16);
    let mut f = Ftl::new(&spec).unwrap();
    f.write(LogicalIu(3), f.cfg.full_mask, &mut NoTiming); // only in the buffer
    f.deallocate(LogicalIu(3));
    assert_eq!(f.counters().host_trim_ius, 1);
    assert_eq!(f.state().buffered_ius(), 0);
    f.write(LogicalIu(4), f.cfg.full_mask, &mut NoTiming);
    f.drain_buffer(&mut NoTiming);
    f.write(LogicalIu(4), f.cfg.full_mask, &mut NoTiming); // mapped and buffered
    assert_eq!(f.deallocate_range(LogicalIu(0), 64), 1);
    assert_eq!(f.counters().host_trim_ius, 2);
    f.check_invariants().unwrap();
}

/// A drive filled sequentially (little OP), then updated at random until the paced GC runs:
/// every closed superblock is nearly all valid.
fn nearly_valid_full_drive() -> Ftl {
    // 64 superblocks of 768 KiB = 48 MiB raw; 45 MiB of namespace leaves ~6 % OP.
    let spec = tiny_spec(4096, 64, 45 << 20, 24);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (45u32 << 20) / 4096;
    for iu in 0..n {
        f.write(LogicalIu(iu), f.cfg.full_mask, &mut NoTiming);
    }
    let mut r = Lcg(11);
    while f.st.parts[0].free.len() > GC_START + 1 {
        f.write(LogicalIu(r.next(n)), f.cfg.full_mask, &mut NoTiming);
    }
    f
}

#[test]
fn idle_gc_leaves_nearly_valid_victims_alone() {
    let mut f = nearly_valid_full_drive();
    let per = f.cfg.ius_per_sb;
    let best = f.choose_victim(0).map(|sb| f.st.sbs[sb as usize].valid).unwrap();
    assert!(best > per - per / 8, "the best victim is {best}/{per} valid: the test needs < 1/8 invalid");
    let erases = f.counters().erases;
    // Rebuilding the idle surplus from such victims would copy ~7+ IUs per IU freed.
    assert_eq!(f.background_gc(Ftl::BACKGROUND_FREE_TARGET, u64::MAX, &mut NoTiming), 0);
    assert_eq!(f.counters().erases, erases);
    f.check_invariants().unwrap();
}

#[test]
fn idle_gc_rebuilds_the_surplus_from_worthwhile_victims() {
    // Random updates at 25 % OP: victims are a quarter or more invalid.
    let spec = tiny_spec(4096, 64, 36 << 20, 24);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (36u32 << 20) / 4096;
    let mut r = Lcg(7);
    for _ in 0..(n * 3) {
        f.write(LogicalIu(r.next(n)), f.cfg.full_mask, &mut NoTiming);
    }
    assert!(f.st.parts[0].free.len() < Ftl::BACKGROUND_FREE_TARGET);
    let moved = f.background_gc(Ftl::BACKGROUND_FREE_TARGET, u64::MAX, &mut NoTiming);
    assert!(moved > 0 && f.st.parts[0].free.len() >= Ftl::BACKGROUND_FREE_TARGET, "moved {moved}, free {}", f.st.parts[0].free.len());
    f.check_invariants().unwrap();
}

// ------------------------------------------------------------------------- NVM Sets

/// A tiny drive of 4 channels x 2 dies in `sets` NVM Sets, `blocks` superblocks per set.
fn tiny_sets_spec(sets: u32, blocks: u32, tnvmcap: u64) -> DriveSpec {
    let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
    s.nand.channels.value = 4;
    s.nand.dies_per_channel.value = 2;
    s.nand.planes_per_die.value = 2;
    s.nand.bits_per_cell.value = 3;
    s.nand.pages_per_block.value = 12;
    s.nand.page_bytes.value = 16384;
    s.nand.blocks_per_plane.value = blocks;
    s.ftl.iu_bytes.value = 4096;
    s.ftl.write_buffer_bytes.value = 192 * 4096;
    s.capacity.tnvmcap_bytes.value = tnvmcap;
    s.capacity.max_namespaces.value = 4;
    s.nvm_sets = Some(crate::spec::NvmSetSpec {
        max_sets: crate::spec::Sourced::new(8, "test"),
        sets: crate::spec::Sourced::new(sets, "test"),
        plm: None,
    });
    s.validate("tiny with sets").unwrap();
    s
}

/// The set of every die a NAND operation touches (an erase: every die of its superblock).
fn op_sets(f: &Ftl, a: &crate::nand::Addressing, g: &crate::spec::Geometry, op: &NandOp) -> Vec<u32> {
    match *op {
        NandOp::Read { ppa, .. } | NandOp::Program { ppa, .. } => vec![g.set_of_die(a.die_channel_plane(ppa).0)],
        NandOp::Erase { sb } => {
            debug_assert_eq!(a.group_of_superblock(sb) / f.cfg.parts_per_set, sb / f.cfg.sbs_per_set);
            a.dies_of_group(a.group_of_superblock(sb)).iter().map(|&d| g.set_of_die(d)).collect()
        }
    }
}

#[test]
fn a_sets_writes_and_gc_stay_on_its_dies() {
    // 2 sets of 4 dies, 32 superblocks of 1.5 MiB each; 36 MiB of user space over both.
    let spec = tiny_sets_spec(2, 32, 72 << 20);
    let (g, mut f) = (spec.geometry(), Ftl::new(&spec).unwrap());
    let a = crate::nand::Addressing::new(&g, 4096);
    let chunks: Vec<u32> = (0..f.cfg.chunks()).collect();
    let (first, second) = chunks.split_at(chunks.len() / 2);
    f.st.assign_chunks(second, 1);
    let ius: Vec<u32> = first.iter().flat_map(|&c| (c << f.cfg.chunk_shift)..((c + 1) << f.cfg.chunk_shift)).collect();
    let n = (ius.len() as u32).min((36 << 20) / 4096);
    let mut rec = Recorder(Vec::new());
    let mut r = Lcg(3);
    for _ in 0..n * 4 {
        f.write(LogicalIu(ius[r.next(n) as usize]), f.cfg.full_mask, &mut rec);
        f.read(LogicalIu(ius[r.next(n) as usize]), f.cfg.full_mask, &mut rec);
    }
    f.background_gc(Ftl::BACKGROUND_FREE_TARGET, u64::MAX, &mut rec);
    f.check_invariants().unwrap();
    assert!(f.counters().erases > 0 && f.counters().gc_programmed_ius > 0, "the test needs GC in set 1");
    for op in &rec.0 {
        assert!(op_sets(&f, &a, &g, op).iter().all(|&s| s == 0), "{op:?} touches a die of set 2");
    }
    // Set 2 is untouched: every superblock free, nothing counted.
    assert_eq!(f.st.set_free_superblocks(1), f.cfg.sbs_per_set as usize);
    assert_eq!(f.st.set_counters(1), SetCounters::default());
    assert_eq!(f.st.set_counters(0).host_write_bytes, f.counters().host_write_bytes);
    assert!(f.st.set_free_superblocks(0) < f.cfg.sbs_per_set as usize / 2);
}

#[test]
fn one_set_is_the_ftl_without_sets() {
    // The same workload on a drive without [nvm_sets] and on one built with one set.
    let plain = tiny_spec(4096, 32, 20 << 20, 24);
    let mut one = plain.clone();
    one.nvm_sets = Some(crate::spec::NvmSetSpec {
        max_sets: crate::spec::Sourced::new(2, "test"),
        sets: crate::spec::Sourced::new(1, "test"),
        plm: None,
    });
    let run = |spec: &DriveSpec| {
        let mut f = Ftl::new(spec).unwrap();
        let mut rec = Recorder(Vec::new());
        let mut r = Lcg(5);
        let n = (20u32 << 20) / 4096;
        for _ in 0..n * 3 {
            f.write(LogicalIu(r.next(n)), f.cfg.full_mask, &mut rec);
        }
        f.background_gc(Ftl::BACKGROUND_FREE_TARGET, u64::MAX, &mut rec);
        (rec.0, f.counters().clone())
    };
    assert_eq!(run(&plain), run(&one));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Chunks dealt to the sets in a random order, then random runs of writes, trims and
    /// reads: every NAND operation an IU causes lies on its set's dies (GC included), the
    /// sets' free pools and counters add up to the drive's, and the full invariants hold.
    #[test]
    fn every_operation_stays_in_its_set(
        sets in prop_oneof![Just(2u32), Just(4), Just(8)],
        keys in proptest::collection::vec(any::<u32>(), 64),
        ops in proptest::collection::vec(op(), 1..2500),
    ) {
        // 8 MiB of user space in 36 chunks; 12 superblocks per set.
        let spec = tiny_sets_spec(sets, 12, 8 << 20);
        let (g, mut f) = (spec.geometry(), Ftl::new(&spec).unwrap());
        let a = crate::nand::Addressing::new(&g, 4096);
        let mut order: Vec<u32> = (0..f.cfg.chunks()).collect();
        order.sort_by_key(|&c| keys[c as usize % keys.len()] ^ c);
        for (i, &c) in order.iter().enumerate() {
            f.st.assign_chunks(&[c], i as u32 % sets);
        }
        let stride = f.cfg.logical_ius / 300;
        for (i, o) in ops.iter().enumerate() {
            // A write covers `n` IUs from its base, the others one.
            let (base, run) = match *o { Op::Write(iu, _, n) => (iu * stride, n as u32), Op::Trim(iu) | Op::Read(iu) => (iu * stride, 1) };
            for iu in base..(base + run).min(f.cfg.logical_ius) {
                let mut rec = Recorder(Vec::new());
                match *o {
                    Op::Write(..) => f.write(LogicalIu(iu), f.cfg.full_mask, &mut rec),
                    Op::Trim(_) => f.deallocate(LogicalIu(iu)),
                    Op::Read(_) => { f.read(LogicalIu(iu), f.cfg.full_mask, &mut rec); }
                }
                let set = f.st.chunk_set(iu >> f.cfg.chunk_shift);
                for op in &rec.0 {
                    prop_assert!(op_sets(&f, &a, &g, op).iter().all(|&s| s == set), "{:?} of IU {} (set {}) leaves its set", op, iu, set + 1);
                }
            }
            if i % 311 == 0 { f.check_invariants().map_err(TestCaseError::fail)?; }
        }
        f.drain_buffer(&mut NoTiming);
        f.check_invariants().map_err(TestCaseError::fail)?;
        let free: usize = (0..sets).map(|s| f.st.set_free_superblocks(s)).sum();
        prop_assert_eq!(free, f.st.free_superblocks());
        let programmed: u64 = (0..sets).map(|s| { let c = f.st.set_counters(s); c.host_programmed_ius + c.gc_programmed_ius }).sum();
        prop_assert_eq!(programmed, f.counters().host_programmed_ius + f.counters().gc_programmed_ius);
    }
}

#[test]
fn the_property_test_reaches_gc_in_every_set() {
    // The shape of `every_operation_stays_in_its_set` with its longest run of writes: GC
    // must run in every set, or the property says nothing about GC.
    for sets in [2u32, 4, 8] {
        let spec = tiny_sets_spec(sets, 12, 8 << 20);
        let mut f = Ftl::new(&spec).unwrap();
        for c in 0..f.cfg.chunks() {
            f.st.assign_chunks(&[c], c % sets);
        }
        let (stride, mut r) = (f.cfg.logical_ius / 300, Lcg(9));
        for _ in 0..2500 * 6 / 8 {
            let (base, run) = (r.next(300) * stride, 1 + r.next(16));
            for iu in base..(base + run).min(f.cfg.logical_ius) {
                f.write(LogicalIu(iu), f.cfg.full_mask, &mut NoTiming);
            }
        }
        f.check_invariants().unwrap();
        for s in 0..sets {
            assert!(f.st.set_counters(s).gc_programmed_ius > 0, "{sets} sets: no GC in set {}", s + 1);
        }
    }
}

/// A tiny drive of `sets` NVM Sets x `parts` FTL partitions (4 channels x 2 dies).
fn tiny_parts_spec(sets: u32, parts: u32, blocks: u32, tnvmcap: u64) -> DriveSpec {
    let mut s = tiny_sets_spec(sets, blocks, tnvmcap);
    s.ftl.partitions = Some(crate::spec::Sourced::new(parts, "test"));
    s.validate("tiny with partitions").unwrap();
    s
}

/// The whole FTL state: the small state as serialised, and both maps.
fn fingerprint(f: &Ftl) -> (String, u64, u64) {
    (serde_json::to_string(&f.st).unwrap(), f.l2p.checksum(), f.p2l.checksum())
}

/// `n` writes drawn from `seed` over the first `ius` logical IUs: mostly whole IUs, some
/// partial (read-modify-writes), as (IU, sector mask).
fn write_stream(seed: u64, n: u32, ius: u32, full: u128) -> Vec<(u32, u128)> {
    let mut r = Lcg(seed);
    (0..n).map(|_| (r.next(ius), if r.next(8) == 0 { 0b11 } else { full })).collect()
}

#[test]
fn partitioned_fast_forward_is_the_serial_run() {
    // The same writes one at a time on one thread, and partition by partition on 1-3
    // threads: the same state, bit for bit, with GC and read-modify-writes in every partition.
    for (sets, parts) in [(1, 2), (1, 4), (2, 2)] {
        let spec = tiny_parts_spec(sets, parts, 32, 72 << 20);
        let mut serial = Ftl::new(&spec).unwrap();
        let chunks: Vec<u32> = (0..serial.cfg.chunks()).collect();
        if sets == 2 {
            serial.st.assign_chunks(&chunks[chunks.len() / 2..], 1);
        }
        let user = (72u32 << 20) / 4096;
        let writes = write_stream(7, user * 4, user, serial.cfg.full_mask);
        let fresh = Ftl::from_parts(serial.cfg.clone(), serial.st.clone(), serial.l2p.clone(), serial.p2l.clone());
        for &(iu, mask) in &writes {
            serial.write(LogicalIu(iu), mask, &mut NoTiming);
        }
        serial.check_invariants().unwrap();
        assert!(serial.counters().erases > 0 && serial.counters().rmw_ius > 0, "the test needs GC and RMW");
        for p in 0..serial.st.partitions() as usize {
            assert!(serial.st.parts[p].counters.gc_programmed_ius > 0, "partition {p} ran no GC");
        }
        for threads in 1..=3 {
            let mut f = Ftl::from_parts(fresh.cfg.clone(), fresh.st.clone(), fresh.l2p.clone(), fresh.p2l.clone());
            // Two steps, as fast-forward forks and joins the threads once per step.
            let (a, b) = writes.split_at(writes.len() / 3);
            for step in [a, b] {
                f.write_partitioned(threads, &mut NoTiming, |w| {
                    for &(iu, mask) in step {
                        w.write(LogicalIu(iu), mask);
                    }
                });
            }
            f.check_invariants().unwrap();
            assert!(fingerprint(&f) == fingerprint(&serial), "{sets} sets x {parts} partitions, {threads} threads");
        }
    }
}

#[test]
fn a_partitions_writes_and_gc_stay_on_its_dies() {
    // Every NAND operation a host write causes (its program, GC reads, programs and erases)
    // lies on the dies of the written IU's partition.
    let spec = tiny_parts_spec(1, 4, 32, 72 << 20);
    let (g, mut f) = (spec.geometry(), Ftl::new(&spec).unwrap());
    let a = crate::nand::Addressing::new(&g, 4096);
    let user = (72u32 << 20) / 4096;
    let mut rec = Recorder(Vec::new());
    for (iu, mask) in write_stream(11, user * 3, user, f.cfg.full_mask) {
        f.write(LogicalIu(iu), mask, &mut rec);
        let part = f.part_of(iu) as u32;
        for op in rec.0.drain(..) {
            let groups: Vec<u32> = match op {
                NandOp::Read { ppa, .. } | NandOp::Program { ppa, .. } => vec![g.group_of_die(a.die_channel_plane(ppa).0)],
                NandOp::Erase { sb } => a.dies_of_group(a.group_of_superblock(sb)).iter().map(|&d| g.group_of_die(d)).collect(),
            };
            assert!(groups.iter().all(|&p| p == part), "{op:?} of a write to IU {iu} (partition {part}) left its dies");
        }
    }
    assert!(f.counters().erases > 0);
    f.check_invariants().unwrap();
}

#[test]
fn partitions_split_the_logical_space_evenly() {
    // A set's partitions take its IUs in stripes of 16 (one cache line of the L2P map):
    // IU i of set s lies in partition s x k + (i / 16) mod k, and a sequential range spreads
    // evenly.
    let spec = tiny_parts_spec(2, 2, 32, 72 << 20);
    let mut f = Ftl::new(&spec).unwrap();
    let chunks: Vec<u32> = (0..f.cfg.chunks()).collect();
    f.st.assign_chunks(&chunks[1..2], 1);
    let (shift, stripe) = (f.cfg.chunk_shift, super::PART_STRIPE_IUS);
    let parts_of = |f: &Ftl, base: u32| [0, 1, stripe - 1, stripe, 2 * stripe, 3 * stripe].map(|i| f.part_of(base + i));
    assert_eq!(parts_of(&f, 0), [0, 0, 0, 1, 0, 1]);
    assert_eq!(parts_of(&f, 1 << shift), [2, 2, 2, 3, 2, 3]);
    let per_part = (0..1u32 << shift).fold([0; 2], |mut n, i| {
        n[f.part_of(i)] += 1;
        n
    });
    assert_eq!(per_part, [1 << (shift - 1); 2]);
    assert_eq!((f.st.sets(), f.st.partitions()), (2, 4));
}

#[test]
fn a_partitioned_image_saved_before_the_stripe_keeps_its_layout() {
    // Images partitioned before the stripe was widened interleaved single IUs; their saved
    // state has no `part_stripe_shift` and must keep that layout, or their maps would be read
    // as belonging to the wrong partitions.
    let spec = tiny_parts_spec(1, 2, 32, 72 << 20);
    let f = Ftl::new(&spec).unwrap();
    let mut saved = serde_json::to_value(&f.st).unwrap();
    assert_eq!(saved["part_stripe_shift"], 4);
    saved.as_object_mut().unwrap().remove("part_stripe_shift");
    let mut old = Ftl::new(&spec).unwrap();
    old.st = serde_json::from_value(saved).unwrap();
    assert_eq!((0..4).map(|i| old.part_of(i)).collect::<Vec<_>>(), [0, 1, 0, 1]);
    let one = Ftl::new(&tiny_parts_spec(1, 1, 32, 72 << 20)).unwrap();
    let one_saved = serde_json::to_value(&one.st).unwrap();
    assert!(one_saved.get("part_stripe_shift").is_none(), "one partition saves as before");
}

#[test]
fn pipelined_fast_forward_is_the_serial_run() {
    // The write buffer a step ahead on its own thread leaves the state the same writes give
    // one at a time: with GC and read-modify-writes (4 KiB IUs, some partial writes), with
    // merges (64 KiB IUs written in 4 KiB pieces) and with no buffer at all.
    for (iu, buffer_ius) in [(4096, 24), (65536, 8), (4096, 0)] {
        let spec = tiny_spec(iu, 64, 40 << 20, buffer_ius);
        let mut serial = Ftl::new(&spec).unwrap();
        let user = (40u32 << 20) / iu;
        let writes: Vec<(u32, u128)> = if iu == 4096 {
            write_stream(5, user * 4, user, serial.cfg.full_mask)
        } else {
            // 4 KiB pieces of 64 KiB IUs, in runs of one to sixteen pieces.
            let mut r = Lcg(9);
            let mut w = Vec::new();
            while w.len() < (user * 40) as usize {
                let (at, first, n) = (r.next(user), r.next(16), 1 + r.next(16));
                w.extend((first..(first + n).min(16)).map(|k| (at, 0xffu128 << (8 * k))));
            }
            w
        };
        let fresh = Ftl::from_parts(serial.cfg.clone(), serial.st.clone(), serial.l2p.clone(), serial.p2l.clone());
        for &(iu, mask) in &writes {
            serial.write(LogicalIu(iu), mask, &mut NoTiming);
        }
        serial.check_invariants().unwrap();
        let c = serial.counters();
        assert!(c.erases > 0 && c.gc_programmed_ius > 0, "the test needs GC");
        assert!(if iu == 4096 { c.rmw_ius > 0 } else { c.buffer_merges > 0 }, "the test needs RMW or merges");
        // Steps of 1,000 writes; stop after `stop_after` steps consumed (none: run to the end).
        for stop_after in [None, Some(1), Some(5)] {
            let mut f = Ftl::from_parts(fresh.cfg.clone(), fresh.st.clone(), fresh.l2p.clone(), fresh.p2l.clone());
            let (mut next, mut consumed, mut done) = (0, 0, 0);
            f.write_pipelined(
                &mut NoTiming,
                |stage| {
                    let step = writes.get(next..(next + 1000).min(writes.len())).filter(|s| !s.is_empty())?;
                    for &(iu, mask) in step {
                        stage.write(LogicalIu(iu), mask);
                    }
                    next += step.len();
                    Some(next)
                },
                |&end| {
                    consumed += 1;
                    done = end;
                    stop_after.is_none_or(|k| consumed < k)
                },
            );
            f.check_invariants().unwrap();
            let mut want = Ftl::from_parts(fresh.cfg.clone(), fresh.st.clone(), fresh.l2p.clone(), fresh.p2l.clone());
            for &(iu, mask) in &writes[..done] {
                want.write(LogicalIu(iu), mask, &mut NoTiming);
            }
            match stop_after {
                None => assert_eq!(done, writes.len()),
                // Stopped: every step produced was programmed, at most two past the stop.
                Some(k) => assert!(done >= k * 1000 && done <= (k + 2) * 1000, "stopped after {k} steps at {done} writes"),
            }
            assert!(fingerprint(&f) == fingerprint(&want), "{iu}-byte IUs, buffer of {buffer_ius}, stop after {stop_after:?}");
        }
    }
}

#[test]
fn prefaulted_fast_forward_is_the_plain_run() {
    // The helper that faults in the maps changes no entry: writes run beside it leave the
    // state the same writes leave without it, on one partition and on four.
    for parts in [1, 4] {
        let spec = tiny_parts_spec(1, parts, 32, 72 << 20);
        let mut plain = Ftl::new(&spec).unwrap();
        let user = (72u32 << 20) / 4096;
        let writes = write_stream(11, user * 3, user, plain.cfg.full_mask);
        let mut f = Ftl::from_parts(plain.cfg.clone(), plain.st.clone(), plain.l2p.clone(), plain.p2l.clone());
        for &(iu, mask) in &writes {
            plain.write(LogicalIu(iu), mask, &mut NoTiming);
        }
        let chunks: Vec<u32> = (0..f.cfg.chunks()).collect();
        let n = f.with_maps_prefaulted(&chunks, writes.len() as u64, |f| {
            for &(iu, mask) in &writes {
                f.write(LogicalIu(iu), mask, &mut NoTiming);
            }
            writes.len()
        });
        assert_eq!(n, writes.len());
        assert!(plain.counters().erases > 0, "the test needs GC");
        f.check_invariants().unwrap();
        assert!(fingerprint(&f) == fingerprint(&plain), "{parts} partitions");
    }
}

#[test]
fn prefault_plans_the_namespace_chunks_and_the_first_free_superblocks() {
    let spec = tiny_parts_spec(1, 2, 32, 72 << 20);
    let f = Ftl::new(&spec).unwrap();
    let (chunk, per) = (1usize << f.cfg.chunk_shift, f.cfg.ius_per_sb as usize);
    // Adjacent chunks merge; a gap starts a new range.
    assert_eq!(f.chunk_ranges(&[0, 1, 2, 5]), vec![0..3 * chunk, 5 * chunk..6 * chunk]);
    // A fresh drive opens each partition's lowest superblocks first, the partitions in turn.
    let sbs = f.cfg.sbs_per_part as usize;
    let want: Vec<_> = [0, sbs, 1].iter().map(|&sb| sb * per..(sb + 1) * per).collect();
    assert_eq!(f.first_free_ranges(2 * per as u64 + 1), want);
    // Never more than the free superblocks.
    assert_eq!(f.first_free_ranges(u64::MAX / 2).len(), f.cfg.superblocks as usize);
}

#[test]
fn a_panic_beside_the_prefault_helper_unwinds() {
    let mut f = Ftl::new(&tiny_spec(4096, 64, 40 << 20, 8)).unwrap();
    let chunks: Vec<u32> = (0..f.cfg.chunks()).collect();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f.with_maps_prefaulted(&chunks, u64::MAX / 2, |_| panic!("stop"));
    }));
    assert!(r.is_err());
}
