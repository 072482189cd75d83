//! What one step of each kind costs on the tiny drive (docs/simulation.md, "The drive"):
//! `cargo run -p ssdtwin-sim --release --example step_costs`.

use ssdtwin_sim::*;
use std::time::Instant;
fn main() {
    let s = tiny_spec();
    let c = ssdtwin_core::nvme::FtlConfig::from_spec(&s);
    eprintln!(
        "superblocks {} ius/sb {} logical {} tnvmcap {} buffer {}",
        c.superblocks, c.ius_per_sb, c.logical_ius, s.capacity.tnvmcap_bytes.value, c.buffer_slots
    );
    let mut sim = ImageUnderTest::new(1).unwrap();
    let steps = vec![
        Step::Commit { fault: None },
        Step::Precondition { ns: 0, random: false, pct: 100 },
        Step::Precondition { ns: 0, random: true, pct: 100 },
        Step::IdleGc { moves: 1000 },
        Step::Commit { fault: None },
        Step::Fio { ns: 0, kind: FioKind::RandWrite, pct: 30, seed: 1 },
        Step::Fio { ns: 0, kind: FioKind::ThinkTime, pct: 30, seed: 1 },
        Step::Fio { ns: 0, kind: FioKind::RateLimited, pct: 30, seed: 1 },
        Step::Reopen,
        Step::Crash,
        Step::Serve {
            ops: vec![
                NbdOp::Write { ns: 0, block: 3, blocks: 4, fua: false },
                NbdOp::Flush,
                NbdOp::Idle { ms: 2000 },
                NbdOp::Read { ns: 0, block: 3, blocks: 4 },
            ],
            end: End::Clean,
            fault: None,
        },
        Step::Serve {
            ops: vec![NbdOp::Write { ns: 0, block: 3, blocks: 4, fua: false }, NbdOp::Flush],
            end: End::Crash { tear_per_mille: Some(500) },
            fault: None,
        },
    ];
    for st in steps {
        let t = Instant::now();
        let r = sim.step(&st);
        eprintln!("{:8.1} ms {:?} -> {:?}", t.elapsed().as_secs_f64() * 1e3, st, r);
    }
    for l in &sim.log {
        if l.starts_with("  ") {
            eprintln!("{l}");
        }
    }
}
