use ssdtwin_core::ftl::{Ftl, NoTiming};
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::theory::waf_fifo;
fn inv(a: f64) -> f64 { // alpha with waf_fifo(alpha) = a
    let (mut lo, mut hi) = (1.0001f64, 5.0f64);
    for _ in 0..100 { let m = 0.5 * (lo + hi); if waf_fifo(m) > a { lo = m } else { hi = m } }
    0.5 * (lo + hi)
}
fn main() {
  for op in [0.1429f64, 0.28, 0.07] {
    for blocks in [20u32, 32, 64, 117, 300] {
        let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
        s.nand.channels.value = 4; s.nand.dies_per_channel.value = 2; s.nand.pages_per_block.value = 48;
        s.nand.blocks_per_plane.value = blocks; s.ftl.write_buffer_bytes.value = 0;
        let g = s.geometry();
        let pool = g.data_pool_bytes(s.ftl.gc_overhead_superblocks.value) / 4096;
        let user = (pool as f64 / (1.0 + op)) as u64;
        s.capacity.tnvmcap_bytes.value = user * 4096;
        let mut f = Ftl::new(&s).unwrap();
        let full = f.cfg.full_mask;
        for iu in 0..user as u32 { f.write(iu, full, &mut NoTiming); }
        let mut r = Rng::new(5);
        for _ in 0..4 * user { f.write(r.below(user) as u32, full, &mut NoTiming); }
        let c0 = f.counters().clone();
        for _ in 0..6 * user { f.write(r.below(user) as u32, full, &mut NoTiming); }
        let c1 = f.counters();
        let waf = (c1.host_programmed_ius + c1.gc_programmed_ius - c0.host_programmed_ius - c0.gc_programmed_ius) as f64 / (6 * user) as f64;
        let w = (c1.overhead_sample_ius - c0.overhead_sample_ius) as f64 / (c1.overhead_samples - c0.overhead_samples) as f64 / f.cfg.ius_per_sb as f64;
        let a_eff = inv(waf);
        let total = blocks as f64;
        // T_eff = a_eff * U => overhead_eff = total - a_eff*U/S
        let w_eff = total - a_eff * user as f64 / f.cfg.ius_per_sb as f64;
        println!("OP {op:.3} blocks {blocks:4}: WAF {waf:.4} model {:.4} ({:+.2}%) measured overhead {w:.3} effective {w_eff:.3}", waf_fifo(1.0 + op), (waf / waf_fifo(1.0 + op) - 1.0) * 100.0);
    }
  }
}
