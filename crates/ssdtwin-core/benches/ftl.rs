//! Criterion benches of the FTL hot paths (fast-forward, no timing).
//! Whole-drive figures come from `ssdtwin bench`; see docs/performance.md.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ssdtwin_core::ftl::{Ftl, NoTiming};
use ssdtwin_core::spec::DriveSpec;

fn steady_state_random_writes(c: &mut Criterion) {
    let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap();
    let mut ftl = Ftl::new(&spec).unwrap();
    let user = (spec.capacity.tnvmcap_bytes.value / 4096) as u32;
    let full = ftl.cfg.full_mask;
    for iu in 0..user {
        ftl.write(iu, full, &mut NoTiming);
    }
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ((x >> 32) * user as u64 >> 32) as u32
    };
    for _ in 0..2 * user {
        ftl.write(next(), full, &mut NoTiming);
    }
    let mut g = c.benchmark_group("ftl");
    const N: u64 = 100_000;
    g.throughput(Throughput::Elements(N));
    g.bench_function("random_4k_write_steady_1_64", |b| {
        b.iter_batched(
            || (0..N).map(|_| next()).collect::<Vec<u32>>(),
            |ius| {
                for iu in ius {
                    ftl.write(iu, full, &mut NoTiming);
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, steady_state_random_writes);
criterion_main!(benches);
