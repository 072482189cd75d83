//! Die parity: every stripe across a superblock's dies gives one program unit to parity.

use super::tests::tiny_spec;
use super::*;
use crate::nand::{NandOp, NandSink, NoTiming};
use crate::spec::Sourced;
use crate::units::LogicalIu;

/// A tiny drive of 4 dies (2 channels x 2) with die parity.
fn parity_spec(blocks: u32, tnvmcap: u64) -> crate::spec::DriveSpec {
    let mut s = tiny_spec(4096, blocks, tnvmcap, 24);
    s.nand.dies_per_channel.value = 2;
    s.ftl.die_parity = Some(Sourced::new(true, "test"));
    s.validate("parity").unwrap();
    s
}

/// Counts programs per program unit, by cause.
#[derive(Default)]
struct Programs(std::collections::BTreeMap<u32, u32>);
impl NandSink for Programs {
    fn op(&mut self, op: NandOp) {
        if let NandOp::Program { ppa, .. } = op {
            *self.0.entry(ppa).or_default() += 1;
        }
    }
}

#[test]
fn a_sequential_fill_programs_one_parity_unit_per_stripe_and_keeps_the_invariants() {
    let spec = parity_spec(32, 12 << 20);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (12u32 << 20) / 4096;
    let mut sink = Programs::default();
    for _ in 0..3 {
        for iu in 0..n {
            f.write(LogicalIu(iu), f.cfg.full_mask, &mut sink);
        }
        f.check_invariants().unwrap();
    }
    let c = f.counters().clone();
    assert!(c.parity_programmed_ius > 0);
    // One parity unit per 3 data units (4 dies), up to the stripe still being filled.
    let data = c.host_programmed_ius + c.gc_programmed_ius;
    let unit = f.cfg.ius_per_pu as u64;
    assert!(c.parity_programmed_ius.abs_diff(data / 3) <= unit, "parity {} for {data} data IUs", c.parity_programmed_ius);
    // Every programmed IU was programmed once before its superblock was erased again: no
    // unit is both parity and data, and parity units hold no logical IU.
    let per = f.cfg.ius_per_sb;
    for (sb, s) in f.st.sbs.iter().enumerate() {
        for at in (0..s.written).step_by(unit as usize) {
            let ppa = sb as u32 * per + at;
            if f.cfg.is_parity_unit(sb as u32, at) {
                assert!((ppa..ppa + unit as u32).all(|p| f.p2l[p as usize] == 0), "parity unit at {ppa} holds data");
            }
        }
    }
}

#[test]
fn the_parity_die_rotates_over_stripes_and_superblocks() {
    let spec = parity_spec(32, 12 << 20);
    let cfg = FtlConfig::from_spec(&spec);
    let (unit, dies) = (cfg.ius_per_pu, cfg.group_dies);
    let stripes = cfg.ius_per_sb / unit / dies;
    for sb in 0..8 {
        let mut per_die = vec![0u32; dies as usize];
        for stripe in 0..stripes {
            let parity: Vec<u32> = (0..dies).filter(|d| cfg.is_parity_unit(sb, (stripe * dies + d) * unit)).collect();
            assert_eq!(parity.len(), 1, "superblock {sb} stripe {stripe}: {parity:?}");
            per_die[parity[0] as usize] += 1;
        }
        let (lo, hi) = (per_die.iter().min().unwrap(), per_die.iter().max().unwrap());
        assert!(hi - lo <= 1, "superblock {sb}: parity per die {per_die:?}");
    }
}

#[test]
fn random_overwrites_with_parity_keep_the_invariants_and_count_parity_as_nand_writes() {
    let spec = parity_spec(48, 14 << 20);
    let mut f = Ftl::new(&spec).unwrap();
    let n = (14u32 << 20) / 4096;
    let mut x = 7u64;
    for i in 0..n * 6 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        f.write(LogicalIu(((x >> 32) % n as u64) as u32), f.cfg.full_mask, &mut NoTiming);
        if i % 7000 == 0 {
            f.check_invariants().unwrap();
        }
    }
    f.check_invariants().unwrap();
    let c = f.counters();
    assert!(c.gc_programmed_ius > 0 && c.parity_programmed_ius > 0);
    assert_eq!(c.nand_programmed_ius(), c.host_programmed_ius + c.gc_programmed_ius + c.parity_programmed_ius);
}
