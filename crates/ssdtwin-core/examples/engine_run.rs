//! Run an engine-contract job file (JSON, docs/fio.md §3) on an in-memory CM6-R 3.84 TB at
//! 1/256 (or the preset $MODEL at 1/$SCALE, with $PARTS FTL partitions per set) after
//! sequential preconditioning (then $RAND capacities of random $RAND_BS-byte writes, 4 KiB
//! unless set), and print
//! simulated I/Os per wall second. For profiling the engine without Python in the way (perf, valgrind --tool=callgrind) and
//! for A/B runs of two builds.
//!     MODEL=kioxia-cm6-v-3.2t SCALE=64 cargo run --release -p ssdtwin-core --example engine_run -- specs.json
use ssdtwin_core::engine::fio::{run, RunOptions};
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::workload::JobSpec;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: engine_run SPECS.json");
    let specs: Vec<JobSpec> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut spec = DriveSpec::preset(&std::env::var("MODEL").unwrap_or_else(|_| "kioxia-cm6-r-3.84t".into()))
        .unwrap()
        .scaled(std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(256))
        .unwrap();
    if let Some(k) = std::env::var("PARTS").ok().and_then(|s| s.parse().ok()) {
        spec = spec.with_partitions(k).unwrap();
    }
    let mut c = Controller::new(spec, 1).unwrap();
    let cap = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
    // RAND=2: then random 4 KiB writes over 2x the namespace (a drive in GC steady state);
    // RAND_BS sets their block size (1048576: the Intel P5316 white paper's 1 MiB writes).
    if let Some(loops) = std::env::var("RAND").ok().and_then(|s| s.parse::<f64>().ok()) {
        let bs = std::env::var("RAND_BS").ok().and_then(|s| s.parse().ok()).unwrap_or(4096);
        c.precondition(NsId(1), Pattern::Random, bs, (cap as f64 * loops) as u64, 1, &mut |_, _| true).unwrap();
    }
    let mut timing = DeviceTiming::new(c.spec(), c.ftl_config()).unwrap();
    let (t, cpu) = (Instant::now(), cpu_s());
    let out = run(&mut c, &mut timing, specs, &RunOptions { default_nsid: 1, idle_gc: false }, 0, &mut |_| true).unwrap();
    let ios: u64 = out.iter().map(|o| o.read.total_ios + o.write.total_ios).sum();
    let (s, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu);
    // CPU time too: on a shared machine it moves less than wall time.
    println!("{ios} I/Os in {s:.3} s: {:.2} M/s (CPU {cpu:.3} s: {:.2} M/s)", ios as f64 / s / 1e6, ios as f64 / cpu / 1e6);
}

/// CPU time of this process, seconds.
fn cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
