//! `ssdtwin bench ftl`'s phases without Python, for A/B runs of two builds of the FTL and
//! for perf: an in-memory drive preconditioned sequentially (128 KiB, 2x) and randomly
//! (4 KiB, 2x), then random 4 KiB writes at steady state (0.5x), with the bench's seeds.
//! Prints each phase's wall time, rate and WAF, then the FTL fingerprint (map checksums and
//! counters): two builds that leave the FTL bit-identical print the same fingerprint.
//! PARTS sets the FTL partitions per NVM Set (default: the preset's), THREADS the
//! fast-forward threads (default 0: one per core); the fingerprint does not depend on THREADS.
//! RAND_X and STEADY_X set the random phases' lengths in capacities (default 2 and 0.5).
//!     MODEL=kioxia-cm6-r-3.84t SCALE=8 PARTS=2 THREADS=2 target/release/examples/ff_run
use ssdtwin_core::nvme::{Controller, NsId, Pattern};
use ssdtwin_core::spec::DriveSpec;
use std::time::Instant;

fn main() {
    let model = std::env::var("MODEL").unwrap_or_else(|_| "kioxia-cm6-r-3.84t".into());
    let scale: u32 = std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let mut spec = DriveSpec::preset(&model).expect("preset").scaled(scale).expect("scale");
    if let Some(k) = std::env::var("PARTS").ok().and_then(|s| s.parse().ok()) {
        spec = spec.with_partitions(k).expect("partitions");
    }
    let mut c = Controller::new(spec, 1).expect("drive");
    c.set_fast_forward_threads(std::env::var("THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(0));
    let cap = c.attached(NsId(1)).expect("namespace 1").bytes();
    let mut go = |_: u64, _: u64| true;
    // RAND_X and STEADY_X shorten the random phases for quick A/B runs (default 2 and 0.5).
    let times = |var: &str, default: f64| std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let rand_bytes = ((times("RAND_X", 2.0) * cap as f64) as u64) / 4096 * 4096;
    let steady_bytes = ((times("STEADY_X", 0.5) * cap as f64) as u64) / 4096 * 4096;
    let phases = [
        ("seq_128k_2x", Pattern::Sequential, 131072, 2 * cap, 3),
        ("rand_4k", Pattern::Random, 4096, rand_bytes, 4),
        ("steady_rand_4k", Pattern::Random, 4096, steady_bytes, 5),
    ];
    for (name, pattern, bs, amount, seed) in phases {
        let t = Instant::now();
        let r = c.precondition(NsId(1), pattern, bs, amount, seed, &mut go).expect("precondition");
        let s = t.elapsed().as_secs_f64();
        println!("{name:<16} {s:8.2} s {:8.2} M IOs/s WAF {:.6}", r.ios as f64 / s / 1e6, r.waf);
    }
    let f = c.ftl_fingerprint().expect("fingerprint");
    println!("fingerprint {} {} {:?}", f.l2p_xxh3, f.p2l_xxh3, f.counters);
}
