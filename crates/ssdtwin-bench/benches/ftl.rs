//! Criterion benches of the FTL hot path through the controller's door (fast-forward, no
//! timing): what `ssdtwin precondition` and the NBD server's `--pace off` run per write.
//! Whole-drive figures come from `ssdtwin bench`; see docs/performance.md.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;

fn steady_state_random_writes(c: &mut Criterion) {
    let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap();
    let mut ctrl = Controller::new(spec, 1).unwrap();
    let bytes = ctrl.attached(NsId(1)).unwrap().bytes();
    ctrl.precondition(NsId(1), Pattern::Sequential, 131072, bytes, 1, &mut |_, _| true).unwrap();
    ctrl.precondition(NsId(1), Pattern::Random, 4096, 2 * bytes, 2, &mut |_, _| true).unwrap();
    let slots = bytes / 4096;
    let mut rng = Rng::new(3);
    let mut g = c.benchmark_group("ftl");
    const N: u64 = 100_000;
    g.throughput(Throughput::Elements(N));
    g.bench_function("random_4k_write_steady_1_64", |b| {
        b.iter_batched(
            || (0..N).map(|_| rng.below(slots) * 8).collect::<Vec<u64>>(),
            |lbas| {
                for slba in lbas {
                    ctrl.write(NsId(1), slba, 8, &mut NoTiming).unwrap();
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, steady_state_random_writes);
criterion_main!(benches);
