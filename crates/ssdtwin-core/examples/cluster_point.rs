//! Run one cluster point without Python: a `cluster.toml` and an engine-contract job list
//! (JSON, one section per client volume, e.g. from `ssdtwin cluster fio --dump-jobs`), and
//! print the figures, the events handled and the wall time (docs/performance.md).
//!     cargo run --release -p ssdtwin-core --example cluster_point -- cluster.toml jobs.json
use ssdtwin_core::cluster::{run, ClusterSpec};
use ssdtwin_core::workload::JobSpec;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spec = ClusterSpec::from_toml(&std::fs::read_to_string(&args[1]).unwrap(), &args[1]).unwrap();
    let jobs: Vec<JobSpec> = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let t = std::time::Instant::now();
    let r = run(&spec, jobs, &mut |_| true).unwrap();
    let wall = t.elapsed().as_secs_f64();
    for (d, x) in [("read", &r.read), ("write", &r.write)] {
        if x.ios > 0 {
            println!("{d}: {:.0} IOPS, mean {:.1} us, p99 {:.1} us", x.iops, x.lat_mean_ns / 1e3, x.lat_p99_ns as f64 / 1e3);
        }
    }
    let top: Vec<String> = r.resources.iter().take(3).map(|u| format!("{} {:.0} %", u.name, u.utilisation * 100.0)).collect();
    println!("busiest: {}", top.join(", "));
    println!(
        "{} events in {wall:.2} s wall ({:.2} M events/s), {:.1} ms simulated",
        r.events,
        r.events as f64 / wall / 1e6,
        r.simulated_ns as f64 / 1e6
    );
}
