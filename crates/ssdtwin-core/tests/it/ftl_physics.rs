//! Physics of the FTL, through the controller: uniform random writes against the closed-form
//! greedy model.

use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{
    Controller, Pattern, WafBasis, WafMeasurement, WafVerdict, WAF_MAX_BUFFER_SHARE, WAF_MIN_GC_CYCLES, WAF_MIN_NAMESPACE_PASSES,
};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::theory::waf_fifo;

/// Steady-state WAF of uniform 4 KiB random writes over namespace 1 of `c`, after a
/// sequential fill and `warm` x its size of random writes, measured over `measure` x.
pub fn steady_random_waf(c: &mut Controller, warm: u64, measure: u64, seed: u64) -> f64 {
    let bytes = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 4096, bytes, seed, &mut |_, _| true).unwrap();
    c.precondition(NsId(1), Pattern::Random, 4096, warm * bytes, seed + 1, &mut |_, _| true).unwrap();
    c.precondition(NsId(1), Pattern::Random, 4096, measure * bytes, seed + 2, &mut |_, _| true).unwrap().waf
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
        let mut c = Controller::new(s, 1).unwrap();
        let waf = steady_random_waf(&mut c, 3, 3, 11);
        c.check_full().unwrap();
        let model = waf_fifo(1.0 + op);
        let err = waf / model - 1.0;
        eprintln!("OP {:>4.0}%: simulated WAF {waf:.3}, Lambert-W {model:.3}, error {:+.2}%", op * 100.0, err * 100.0);
        assert!(err.abs() < 0.05, "OP {op}: WAF {waf} vs model {model}");
    }
}

#[test]
fn die_parity_takes_a_die_of_every_stripe_from_the_pool() {
    // The same 8-die geometry with die parity: one program unit in 8 holds parity, so the
    // data pool is 7/8 of the superblocks' (data_pool_bytes says so) and every stripe of 7
    // data units costs 8 programs. Random writes at a given OP over that smaller pool follow
    // the Lambert-W form, and the NAND writes carry the parity on top.
    let mut base = small_block_spec(600);
    base.ftl.die_parity = Some(ssdtwin_core::spec::Sourced::new(true, "test"));
    let g = base.geometry();
    assert!((g.data_fraction() - 7.0 / 8.0).abs() < 1e-12);
    let pool = g.data_pool_bytes(base.gc_overhead()) / 4096;
    let op = 0.20;
    let mut s = base.clone();
    s.capacity.tnvmcap_bytes.value = (pool as f64 / (1.0 + op)) as u64 * 4096;
    let mut c = Controller::new(s, 1).unwrap();
    let waf = steady_random_waf(&mut c, 3, 3, 11);
    c.check_full().unwrap();
    let model = waf_fifo(1.0 + op) * 8.0 / 7.0;
    let err = waf / model - 1.0;
    eprintln!("die parity, OP 20%: simulated WAF {waf:.3}, Lambert-W x 8/7 {model:.3}, error {:+.2}%", err * 100.0);
    assert!(err.abs() < 0.05, "WAF {waf} vs model {model}");
}

/// A drive at 20 % OP in random-write steady state (fill, then 3 namespaces of random writes).
fn steady_drive_at_20_percent_op() -> (Controller, u64) {
    let base = small_block_spec(600);
    let pool = base.geometry().data_pool_bytes(base.gc_overhead()) / 4096;
    let mut s = base.clone();
    s.capacity.tnvmcap_bytes.value = (pool as f64 / 1.2) as u64 * 4096;
    let mut c = Controller::new(s, 1).unwrap();
    let bytes = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 4096, bytes, 3, &mut |_, _| true).unwrap();
    c.precondition(NsId(1), Pattern::Random, 4096, 3 * bytes, 4, &mut |_, _| true).unwrap();
    (c, bytes)
}

#[test]
fn a_waf_over_a_namespace_pass_is_the_drives_and_near_the_theory() {
    let (mut c, bytes) = steady_drive_at_20_percent_op();
    let before = c.vendor_log();
    c.precondition(NsId(1), Pattern::Random, 4096, bytes, 5, &mut |_, _| true).unwrap();
    let m = WafMeasurement::between(&before, &c.vendor_log(), WafBasis::FastForward, bytes);
    assert_eq!(m.verdict, WafVerdict::Steady, "{m:?}");
    assert_eq!(m.host_bytes, bytes);
    // At WAF ~3.3, one namespace pass programs ~2.7 x the pool: GC turns it over 2-3 times.
    assert!(m.gc_cycles > 2.0, "{m:?}");
    let waf = m.waf.expect("a steady window reports its WAF");
    assert_eq!(Some(waf), m.waf_window_raw);
    let model = waf_fifo(1.2);
    assert!((waf / model - 1.0).abs() < 0.05, "WAF {waf} vs Lambert-W {model}");
}

#[test]
fn a_pass_that_fills_an_empty_write_buffer_is_no_waf_and_the_next_pass_is() {
    // A 64 MiB namespace behind a 12 MiB write buffer: the first sequential pass leaves
    // 12 MiB of it unprogrammed, so its ratio reads about 0.81 although it is one namespace
    // pass; the second pass starts and ends with the buffer full.
    let mut s = small_block_spec(600);
    s.ftl.write_buffer_bytes.value = 12 << 20;
    s.capacity.tnvmcap_bytes.value = 64 << 20;
    let mut c = Controller::new(s, 1).unwrap();
    let bytes = c.attached(NsId(1)).unwrap().bytes();
    let fresh = c.vendor_log();
    c.precondition(NsId(1), Pattern::Sequential, 131072, bytes, 1, &mut |_, _| true).unwrap();
    let filled = c.vendor_log();
    let first = WafMeasurement::between(&fresh, &filled, WafBasis::FastForward, bytes);
    assert!(first.namespace_passes >= WAF_MIN_NAMESPACE_PASSES, "{first:?}");
    assert_eq!(first.buffered_change_bytes, 12 << 20, "{first:?}");
    assert_eq!((first.verdict, first.waf), (WafVerdict::Insufficient, None), "{first:?}");
    assert!(first.waf_window_raw.unwrap() < 0.85, "{first:?}");
    c.precondition(NsId(1), Pattern::Sequential, 131072, bytes, 2, &mut |_, _| true).unwrap();
    let second = WafMeasurement::between(&filled, &c.vendor_log(), WafBasis::FastForward, bytes);
    assert!(second.buffered_change_bytes.unsigned_abs() as f64 <= WAF_MAX_BUFFER_SHARE * bytes as f64, "{second:?}");
    assert_eq!(second.verdict, WafVerdict::Steady, "{second:?}");
    assert!((second.waf.unwrap() - 1.0).abs() < 0.01, "{second:?}");
    c.check_full().unwrap();
}

#[test]
fn a_waf_over_a_few_mib_is_insufficient_and_no_figure() {
    let (mut c, bytes) = steady_drive_at_20_percent_op();
    let before = c.vendor_log();
    // 32 MiB of a 6 GiB namespace: ~8 of 600 superblocks reclaimed.
    c.precondition(NsId(1), Pattern::Random, 4096, 32 << 20, 5, &mut |_, _| true).unwrap();
    let after = c.vendor_log();
    let m = WafMeasurement::between(&before, &after, WafBasis::Timed, bytes);
    assert_eq!(m.verdict, WafVerdict::Insufficient, "{m:?}");
    // Writes of unknown kind (basis Window) follow the same rule: the basis is only a label.
    let w = WafMeasurement::between(&before, &after, WafBasis::Window, bytes);
    assert_eq!(w, WafMeasurement { basis: WafBasis::Window, ..m.clone() });
    assert_eq!(m.waf, None, "an insufficient window reports no WAF as the drive's");
    let raw = m.waf_window_raw.expect("the raw ratio is kept");
    assert!(raw > 1.0, "{raw}");
    assert!(m.gc_cycles > 0.0 && m.gc_cycles < WAF_MIN_GC_CYCLES, "{m:?}");
    assert!(m.namespace_passes < 0.01, "{m:?}");
    // Nothing written: no ratio at all.
    let v = c.vendor_log();
    let none = WafMeasurement::between(&v, &v, WafBasis::Timed, bytes);
    assert_eq!((none.verdict, none.waf, none.waf_window_raw), (WafVerdict::NoWrites, None, None));
}
