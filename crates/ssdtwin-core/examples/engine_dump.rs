//! Run an engine-contract job file (JSON, docs/fio.md §3) on an in-memory CM6-R 3.84 TB at
//! 1/256 (or the preset $MODEL at 1/$SCALE) after sequential preconditioning (idle GC on),
//! and print the per-clone results as JSON and the FTL fingerprint. Built from two commits, it checks that an optimisation leaves
//! every output bit-identical (docs/performance.md).
//!     cargo run --release -p ssdtwin-core --example engine_dump -- specs.json
use ssdtwin_core::engine::fio::{run, RunOptions};
use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_core::workload::JobSpec;

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let specs: Vec<JobSpec> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let spec = DriveSpec::preset(&std::env::var("MODEL").unwrap_or_else(|_| "kioxia-cm6-r-3.84t".into()))
        .unwrap()
        .scaled(std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(256))
        .unwrap();
    let mut c = Controller::new(spec, 1).unwrap();
    let cap = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
    // RAND=2: then random 4 KiB writes over 2x the namespace (a drive in GC steady state).
    if let Some(loops) = std::env::var("RAND").ok().and_then(|s| s.parse::<f64>().ok()) {
        c.precondition(NsId(1), Pattern::Random, 4096, (cap as f64 * loops) as u64, 1, &mut |_, _| true).unwrap();
    }
    let mut timing = DeviceTiming::new(c.spec(), c.ftl_config()).unwrap();
    let out = run(&mut c, &mut timing, specs, &RunOptions { default_nsid: 1, idle_gc: true }, 0, &mut |_| true).unwrap();
    println!("{}", serde_json::to_string(&out).unwrap());
    // The fingerprint printed as before this became a controller method (A/B comparable).
    let f = c.ftl_fingerprint().unwrap();
    let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
    println!("{:x} {:x} {:?}", hex(&f.l2p_xxh3), hex(&f.p2l_xxh3), f.counters);
}
