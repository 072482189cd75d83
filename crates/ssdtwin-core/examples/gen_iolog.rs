//! Print the I/O sequence the workload generator issues for engine-contract jobs (JSON
//! list, docs/fio.md §3), one line per I/O as in fio's iolog v2: `file action offset
//! length`. Compares against `fio --ioengine=null --write_iolog=...` (tests/fio/gen_compare.py).
//!     cargo run --release -p ssdtwin-core --example gen_iolog -- specs.json [max_ios]
use ssdtwin_core::workload::{Ddir, Generator, JobSpec};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: gen_iolog specs.json [max_ios]");
    let max_ios: u64 = args.next().map_or(u64::MAX, |s| s.parse().expect("max_ios: a number"));
    let specs: Vec<JobSpec> = serde_json::from_str(&std::fs::read_to_string(path).expect("read specs")).expect("parse specs");
    for spec in specs {
        let file = spec.filename.clone().unwrap_or_else(|| format!("{}.{}.0", spec.name, spec.subjob));
        let target = spec.target_size_bytes;
        let mut g = match Generator::new(spec, target) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let mut n = 0;
        while n < max_ios {
            let Some(io) = g.next_io() else { break };
            let action = match io.ddir {
                Ddir::Read => "read",
                Ddir::Write => "write",
                Ddir::Trim => "trim",
            };
            println!("{file} {action} {} {}", io.offset, io.len);
            n += 1;
        }
    }
}
