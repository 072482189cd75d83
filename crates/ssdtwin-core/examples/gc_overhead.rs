//! How the measured GC overhead behaves with drive size (docs/models.md, "Scale"): steady
//! uniform 4 KiB random writes on small-superblock CM6 geometries of 20 to 300 superblocks at
//! three OPs, printing the WAF against the closed form, the overhead the FTL measures and the
//! effective overhead the WAF implies. The derivation of `gc_overhead_superblocks` and
//! `gc_overhead_finite_size` in the presets.
//!     cargo run --release -p ssdtwin-core --example gc_overhead
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::theory::waf_fifo;

/// The alpha (T/U) at which the closed form gives WAF `a`.
fn alpha_for_waf(a: f64) -> f64 {
    let (mut lo, mut hi) = (1.0001f64, 5.0f64);
    for _ in 0..100 {
        let m = 0.5 * (lo + hi);
        if waf_fifo(m) > a {
            lo = m
        } else {
            hi = m
        }
    }
    0.5 * (lo + hi)
}

fn main() {
    for op in [0.1429f64, 0.28, 0.07] {
        for blocks in [20u32, 32, 64, 117, 300] {
            let mut s = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap();
            s.nand.channels.value = 4;
            s.nand.dies_per_channel.value = 2;
            s.nand.pages_per_block.value = 48;
            s.nand.blocks_per_plane.value = blocks;
            s.ftl.write_buffer_bytes.value = 0;
            let g = s.geometry();
            let pool = g.data_pool_bytes(s.ftl.gc_overhead_superblocks.value) / 4096;
            let user = (pool as f64 / (1.0 + op)) as u64;
            s.capacity.tnvmcap_bytes.value = user * 4096;
            let per_sb = g.ius_per_superblock(4096) as f64;
            let mut c = Controller::new(s, 5).unwrap();
            let bytes = user * 4096;
            c.precondition(NsId(1), Pattern::Sequential, 4096, bytes, 5, &mut |_, _| true).unwrap();
            c.precondition(NsId(1), Pattern::Random, 4096, 4 * bytes, 6, &mut |_, _| true).unwrap();
            let v0 = c.vendor_log();
            let r = c.precondition(NsId(1), Pattern::Random, 4096, 6 * bytes, 7, &mut |_, _| true).unwrap();
            let v1 = c.vendor_log();
            let w =
                (v1.gc_overhead_sample_ius - v0.gc_overhead_sample_ius) / (v1.gc_overhead_samples - v0.gc_overhead_samples) as f64 / per_sb;
            let model = waf_fifo(1.0 + op);
            // T_eff = alpha_eff * U, so the effective overhead = total - alpha_eff * U / S.
            let w_eff = blocks as f64 - alpha_for_waf(r.waf) * user as f64 / per_sb;
            println!(
                "OP {op:.3} blocks {blocks:4}: WAF {:.4} model {model:.4} ({:+.2}%) measured overhead {w:.3} effective {w_eff:.3}",
                r.waf,
                (r.waf / model - 1.0) * 100.0
            );
        }
    }
}
