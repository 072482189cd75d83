//! The timed engine drives the same FTL as fast-forward ("one state, two drivers"), and its
//! timing obeys the basic physics of the preset.

use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::nvme::{Controller, Pattern};
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;

fn cm6(scale: u32) -> Controller {
    Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(scale).unwrap(), 1).unwrap()
}

#[derive(Clone, Copy)]
enum Op {
    W(u64, u64),
    R(u64, u64),
    T(u64, u64),
}

fn workload(nsze: u64, n: usize, seed: u64) -> Vec<Op> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let nlb = 8 * (1 + r.below(8)); // 4-32 KiB at 512 B LBAs
            let slba = r.below((nsze - nlb) / 8) * 8;
            match r.below(10) {
                0..=5 => Op::W(slba, nlb),
                6..=8 => Op::R(slba, nlb),
                _ => Op::T(slba, nlb),
            }
        })
        .collect()
}

#[test]
fn timed_and_fast_forward_leave_identical_state() {
    let mut a = cm6(256);
    let mut b = cm6(256);
    let nsze = a.attached(NsId(1)).unwrap().nsze;
    let cap = a.attached(NsId(1)).unwrap().bytes();
    for c in [&mut a, &mut b] {
        c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 7, &mut |_, _| true).unwrap();
        c.precondition(NsId(1), Pattern::Random, 4096, cap, 8, &mut |_, _| true).unwrap();
    }
    let ops = workload(nsze, 400_000, 3);
    let mut timing = DeviceTiming::new(a.spec(), a.ftl_config()).unwrap();
    let mut now = 0;
    let mut last_done = 0;
    for op in &ops {
        now += 700; // faster than the drive: queues build up, back-pressure kicks in
        last_done = last_done.max(match *op {
            Op::W(s, n) => timing.write(&mut a, now, NsId(1), s, n).unwrap(),
            Op::R(s, n) => timing.read(&mut a, now, NsId(1), s, n).unwrap(),
            Op::T(s, n) => timing.deallocate(&mut a, now, NsId(1), s, n).unwrap(),
        });
        match *op {
            Op::W(s, n) => b.write(NsId(1), s, n, &mut NoTiming).unwrap(),
            Op::R(s, n) => {
                b.read(NsId(1), s, n, &mut NoTiming).unwrap();
            }
            Op::T(s, n) => {
                b.deallocate(NsId(1), s, n).unwrap();
            }
        }
    }
    assert!(last_done > now, "the drive must have fallen behind a 700 ns arrival rate");
    let fa = a.ftl_fingerprint().unwrap();
    let fb = b.ftl_fingerprint().unwrap();
    assert_eq!(fa, fb, "timed and fast-forward FTL state differ");
    assert_eq!(a.vendor_log(), b.vendor_log());
    a.check_full().unwrap();
}

#[test]
fn qd1_read_latency_is_the_sum_of_its_stages() {
    let mut c = cm6(256);
    let cap = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 1, &mut |_, _| true).unwrap();
    let t = c.spec().timing.clone().unwrap();
    let mut timing = DeviceTiming::new(c.spec(), c.ftl_config()).unwrap();
    let mut now = 10_000_000;
    let mut r = Rng::new(4);
    let nsze = c.attached(NsId(1)).unwrap().nsze;
    let mut worst = 0;
    let mut best = u64::MAX;
    for _ in 0..1000 {
        let slba = r.below(nsze / 8) * 8;
        let done = timing.read(&mut c, now, NsId(1), slba, 8).unwrap();
        worst = worst.max(done - now);
        best = best.min(done - now);
        now = done + 1_000_000; // idle between reads: nothing queues
    }
    let ch = 4096 * 1_000_000_000 / t.channel_bytes_per_s.value;
    let link = 4096 * 1_000_000_000 / t.host_link_bytes_per_s.value;
    let ideal = t.t_read_ns.value + ch + link + t.ctrl_read_ns.value;
    assert!(best + 5 >= ideal && worst <= ideal + 1_000, "QD1 read latency {best}..{worst} ns, stages sum to {ideal} ns");
}

#[test]
fn sequential_write_throughput_is_the_program_bandwidth() {
    let mut c = cm6(256);
    let spec = c.spec().clone();
    let t = spec.timing.clone().unwrap();
    let g = spec.geometry();
    let nsze = c.attached(NsId(1)).unwrap().nsze;
    let mut timing = DeviceTiming::new(&spec, c.ftl_config()).unwrap();
    // 128 KiB writes at QD16: each new write is issued when the oldest completes.
    let mut q = std::collections::VecDeque::new();
    let mut now = 0u64;
    let mut slba = 0u64;
    let n = 40_000u64;
    for i in 0..n {
        if q.len() == 16 {
            now = now.max(q.pop_front().unwrap());
        }
        q.push_back(timing.write(&mut c, now, NsId(1), slba, 256).unwrap());
        slba = (slba + 256) % (nsze - 256);
        if i == n / 2 {
            now = now.max(*q.back().unwrap());
        }
    }
    let end = q.into_iter().max().unwrap();
    let bytes = n * 131072;
    let rate = bytes as f64 / (end as f64 / 1e9);
    let nand = g.dies() as f64 * g.program_unit_bytes as f64 / (t.t_prog_ns.value as f64 / 1e9);
    assert!(
        rate < nand * 1.02 && rate > nand * 0.85,
        "sequential write {:.0} MB/s vs program bandwidth {:.0} MB/s",
        rate / 1e6,
        nand / 1e6
    );
}

/// Mean and worst read latency (ns) of a QD1 random 4 KiB mix with `read_pct` % reads.
fn qd1_mix_read_latency(read_pct: u64) -> (f64, u64) {
    let mut c = cm6(256);
    let cap = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 2, &mut |_, _| true).unwrap();
    let nsze = c.attached(NsId(1)).unwrap().nsze;
    let mut timing = DeviceTiming::new(c.spec(), c.ftl_config()).unwrap();
    let mut r = Rng::new(9);
    let mut now = 0;
    let (mut sum, mut n, mut worst) = (0u64, 0u64, 0u64);
    for _ in 0..60_000 {
        let slba = r.below(nsze / 8) * 8;
        if r.below(100) < read_pct {
            let done = timing.read(&mut c, now, NsId(1), slba, 8).unwrap();
            sum += done - now;
            n += 1;
            worst = worst.max(done - now);
            now = done;
        } else {
            now = timing.write(&mut c, now, NsId(1), slba, 8).unwrap();
        }
    }
    (sum as f64 / n as f64, worst)
}

#[test]
fn mixed_reads_pay_program_suspends_more_at_a_higher_write_share() {
    let t = cm6(256).spec().timing.clone().unwrap();
    let (pure, pure_worst) = qd1_mix_read_latency(100);
    let (m65, m65_worst) = qd1_mix_read_latency(65);
    let (m35, _) = qd1_mix_read_latency(35);
    assert!(pure < m65 && m65 < m35, "read mean {pure:.0} / {m65:.0} / {m35:.0} ns at 100/65/35 % reads");
    // A read that meets a program waits at least the suspend latency.
    assert!(m65_worst >= pure_worst + t.t_prog_suspend_ns.value, "worst read {pure_worst} vs {m65_worst} ns");
}

/// A QD1 random 4 KiB mix with `read_pct` % reads on a drive randomly written once after
/// WIPC (GC running), with `max_suspends` per program/erase: (mean read latency ns, mean
/// latency of all commands ns, the share of the time an average die spends programming).
fn qd1_mix_with_suspends(read_pct: u64, max_suspends: u32) -> (f64, f64, f64) {
    let mut c = cm6(256);
    let cap = c.attached(NsId(1)).unwrap().bytes();
    c.precondition(NsId(1), Pattern::Sequential, 131072, cap, 2, &mut |_, _| true).unwrap();
    c.precondition(NsId(1), Pattern::Random, 4096, cap, 3, &mut |_, _| true).unwrap();
    let spec = c.spec().clone();
    let mut t = spec.timing.clone().unwrap();
    t.max_suspends_per_op.value = max_suspends;
    let mut timing = DeviceTiming::with_timing(&spec, c.ftl_config(), t.clone()).unwrap();
    let nsze = c.attached(NsId(1)).unwrap().nsze;
    let nand0 = c.vendor_log().nand_write_bytes;
    let mut r = Rng::new(11);
    let mut now = 0;
    let (mut reads, mut n_reads, mut all) = (0u64, 0u64, 0u64);
    let n = 200_000u64;
    for _ in 0..n {
        let slba = r.below(nsze / 8) * 8;
        let done = if r.below(100) < read_pct {
            let done = timing.read(&mut c, now, NsId(1), slba, 8).unwrap();
            reads += done - now;
            n_reads += 1;
            done
        } else {
            timing.write(&mut c, now, NsId(1), slba, 8).unwrap()
        };
        all += done - now;
        now = done;
    }
    let g = spec.geometry();
    let programs = (c.vendor_log().nand_write_bytes - nand0) as f64 / g.program_unit_bytes as f64;
    let busy = programs * t.t_prog_ns.value as f64 / (g.dies() as f64 * now as f64);
    (reads as f64 / n_reads.max(1) as f64, all as f64 / n as f64, busy)
}

/// Why a QD1 mix is not slower than pure reads (docs/models.md §8, "Why the QD1 mix is not
/// slower than both"): a read meets a program with the probability that its die is
/// programming, f; with suspend it pays about the suspend latency, without it waits for the
/// rest of the program, tPROG / 2 on average. So the mixed reads' excess is about f x tPROG / 2
/// without suspend and a small fraction of it with, and the mix's mean exceeds the pure reads'
/// only when that excess passes (writes / reads) x (pure read - write).
#[test]
fn qd1_mixed_reads_wait_for_the_rest_of_a_program_only_without_suspend() {
    let t = cm6(256).spec().timing.clone().unwrap();
    let (pure, _, _) = qd1_mix_with_suspends(100, 4);
    let (with_suspend, all_with, _) = qd1_mix_with_suspends(65, 4);
    let (without, all_without, f) = qd1_mix_with_suspends(65, 0);
    let residual = f * t.t_prog_ns.value as f64 / 2.0;
    let excess = without - pure;
    assert!(f > 0.005 && f < 0.1, "die programming share {f:.4} at QD1");
    assert!(
        (excess - residual).abs() < 0.25 * residual,
        "without suspend: read excess {excess:.0} ns, f x tPROG/2 = {residual:.0} ns (f = {f:.4})"
    );
    // With suspend a read that meets a program pays tens of microseconds, not a program.
    let excess_with = with_suspend - pure;
    assert!(excess_with > 0.0 && excess_with < 0.2 * excess, "read excess {excess_with:.0} ns with, {excess:.0} ns without suspend");
    // Either way this mix stays below the pure reads: its reads would need an excess of
    // 35/65 x (pure read - write mean) for that, and f x tPROG / 2 is short of it here.
    assert!(all_with < pure && all_without < pure, "mix means {all_with:.0} / {all_without:.0} ns vs pure reads {pure:.0} ns");
    eprintln!("pure {pure:.0} ns; 65/35 reads {with_suspend:.0} ns with suspend, {without:.0} without; f {f:.4}, f x tPROG/2 {residual:.0} ns; mix {all_with:.0} / {all_without:.0} ns");
}
