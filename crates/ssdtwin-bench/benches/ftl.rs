//! Benches of the FTL hot path through the controller's door (fast-forward, no timing): what
//! `ssdtwin precondition` and the NBD server's `--pace off` run per write. Whole-drive figures
//! come from `ssdtwin bench`; see docs/performance.md.
//!
//! A plain `harness = false` main, timed with `Instant` (criterion and the 23 crates only it
//! used cost `make lint`'s clippy about a sixth of its CPU: docs/performance.md, "CI time").
//! `cargo bench -p ssdtwin-bench` runs SAMPLES batches of N writes each and prints the
//! fastest, median and slowest batch; `cargo test --benches` (no `--bench` argument) runs one
//! small batch, as a check that the bench still works.

use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;
use std::hint::black_box;
use std::time::Instant;

const N: u64 = 100_000;
const SAMPLES: usize = 30;

/// `ftl/random_4k_write_steady_1_64`: 4 KiB random writes into a CM6 at 1/64 after a
/// sequential fill and two drive writes of random 4 KiB (GC in steady state).
fn steady_state_random_writes(samples: usize, n: u64) -> Vec<f64> {
    let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap();
    let mut ctrl = Controller::new(spec, 1).unwrap();
    let bytes = ctrl.attached(NsId(1)).unwrap().bytes();
    ctrl.precondition(NsId(1), Pattern::Sequential, 131072, bytes, 1, &mut |_, _| true).unwrap();
    ctrl.precondition(NsId(1), Pattern::Random, 4096, 2 * bytes, 2, &mut |_, _| true).unwrap();
    let slots = bytes / 4096;
    let mut rng = Rng::new(3);
    (0..samples)
        .map(|_| {
            // The addresses are drawn before the clock starts, as criterion's iter_batched did.
            let lbas: Vec<u64> = (0..n).map(|_| rng.below(slots) * 8).collect();
            let t = Instant::now();
            for slba in lbas {
                black_box(ctrl.write(NsId(1), black_box(slba), 8, &mut NoTiming)).unwrap();
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .collect()
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (samples, n) = if bench { (SAMPLES, N) } else { (1, 1_000) };
    let mut ns = steady_state_random_writes(samples, n);
    ns.sort_by(f64::total_cmp);
    let (lo, med, hi) = (ns[0], ns[ns.len() / 2], ns[ns.len() - 1]);
    println!(
        "ftl/random_4k_write_steady_1_64: {samples} x {n} writes, ns per write {lo:.1} / {med:.1} / {hi:.1} \
         (fastest / median / slowest), {:.2} M writes/s at the median",
        1e3 / med
    );
}
