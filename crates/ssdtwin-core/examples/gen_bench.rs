//! Time the workload generator alone: draw every I/O of each engine-contract job (JSON
//! list, docs/fio.md §3; at most MAX_IOS) and print nanoseconds per I/O. For A/B runs of
//! the generator (docs/performance.md).
//!     cargo run --release -p ssdtwin-core --example gen_bench -- specs.json
use ssdtwin_core::workload::{Generator, JobSpec};
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: gen_bench specs.json");
    let max_ios: u64 = std::env::var("MAX_IOS").ok().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
    let specs: Vec<JobSpec> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for spec in specs {
        let target = spec.target_size_bytes;
        let name = spec.name.clone();
        let t = Instant::now();
        let mut g = Generator::new(spec, target).unwrap();
        let setup = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (mut n, mut sum) = (0u64, 0u64);
        while n < max_ios {
            let Some(io) = g.next_io() else { break };
            sum = sum.wrapping_add(io.offset ^ io.len);
            n += 1;
        }
        let s = t.elapsed().as_secs_f64();
        println!("{name}: {n} I/Os in {s:.3} s ({:.1} ns/I/O, setup {setup:.3} s) checksum {sum:x}", s * 1e9 / n as f64);
    }
}
