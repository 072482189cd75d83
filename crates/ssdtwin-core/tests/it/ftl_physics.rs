//! Physics of the FTL: uniform random writes against the closed-form greedy model.

use ssdtwin_core::ftl::{Ftl, NoTiming};
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::theory::waf_fifo;

/// Steady-state WAF of uniform 4 KiB random writes over `user` IUs of `ftl`, after a
/// sequential fill and `warm` x user random writes, measured over `measure` x user.
pub fn steady_random_waf(ftl: &mut Ftl, user: u32, warm: u32, measure: u32, seed: u64) -> f64 {
    let full = ftl.cfg.full_mask;
    for iu in 0..user {
        ftl.write(iu, full, &mut NoTiming);
    }
    let mut r = Rng::new(seed);
    for _ in 0..warm as u64 * user as u64 {
        ftl.write(r.below(user as u64) as u32, full, &mut NoTiming);
    }
    let c0 = ftl.counters().clone();
    for _ in 0..measure as u64 * user as u64 {
        ftl.write(r.below(user as u64) as u32, full, &mut NoTiming);
    }
    let c1 = ftl.counters();
    let nand = (c1.host_programmed_ius + c1.gc_programmed_ius - c0.host_programmed_ius - c0.gc_programmed_ius) as f64;
    let host = (c1.host_write_bytes - c0.host_write_bytes) as f64 / ftl.cfg.iu_bytes as f64;
    nand / host
}

/// A CM6 geometry with small superblocks, so the drive has enough of them at test size.
fn small_block_spec(blocks: u32) -> DriveSpec {
    let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
    s.nand.channels.value = 4;
    s.nand.dies_per_channel.value = 2;
    s.nand.pages_per_block.value = 48;
    s.nand.blocks_per_plane.value = blocks;
    s.ftl.write_buffer_bytes.value = 0;
    s
}

#[test]
fn greedy_matches_lambert_w_over_op() {
    // 8 dies x 2 planes x 48 pages x 16 KiB = 12 MiB superblocks (3072 IUs); 600 of them.
    let base = small_block_spec(600);
    let g = base.geometry();
    let pool = g.data_pool_bytes(base.gc_overhead()) / 4096;
    for op in [0.07, 0.20, 0.28, 0.50] {
        let user = (pool as f64 / (1.0 + op)) as u64;
        let mut s = base.clone();
        s.capacity.tnvmcap_bytes.value = user * 4096;
        let mut ftl = Ftl::new(&s).unwrap();
        let waf = steady_random_waf(&mut ftl, user as u32, 3, 3, 11);
        ftl.check_invariants().unwrap();
        let model = waf_fifo(1.0 + op);
        let err = waf / model - 1.0;
        eprintln!("OP {:>4.0}%: simulated WAF {waf:.3}, Lambert-W {model:.3}, error {:+.2}%", op * 100.0, err * 100.0);
        assert!(err.abs() < 0.05, "OP {op}: WAF {waf} vs model {model}");
    }
}
