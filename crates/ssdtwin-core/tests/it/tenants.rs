//! The multi-tenant drive: DRAM namespaces.

use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{Controller, NsId, Status};
use ssdtwin_core::spec::DriveSpec;

const MIB: u64 = 1 << 20;

fn pblaze5() -> Controller {
    Controller::new(DriveSpec::preset("memblaze-pblaze5-910-3.84t").unwrap().scaled(64).unwrap(), 1).unwrap()
}

/// PBlaze5 at 1/64 with its factory namespace shrunk to half the capacity and a 32 MiB
/// DRAM namespace (NSID 2) beside it, both attached.
fn with_dram_ns() -> Controller {
    let mut c = pblaze5();
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    let half = c.tnvmcap() / 2 / 512;
    c.create_ns(half, half, 0, 0).unwrap();
    c.attach_ns(NsId(1), &[1]).unwrap();
    let d = c.create_dram_ns(32 * MIB / 512, 32 * MIB / 512, 0, 0).unwrap();
    assert_eq!(d, NsId(2));
    c.attach_ns(d, &[1]).unwrap();
    c
}

fn status(e: &ssdtwin_core::nvme::Error) -> Status {
    e.status().unwrap_or_else(|| panic!("expected an NVMe status, got {e}"))
}

#[test]
fn a_dram_namespace_takes_dram_not_nvm_capacity() {
    let c = with_dram_ns();
    let id = c.id_ctrl();
    let dram = id.vs_dram_ns.clone().expect("the PBlaze5 has a DRAM budget");
    assert_eq!(dram.budget_bytes, 64 * MIB, "the talk's 64 MB");
    assert_eq!(dram.unallocated_bytes, 32 * MIB);
    assert_eq!(id.unvmcap, c.tnvmcap() - c.tnvmcap() / 2 / 512 * 512, "the DRAM namespace takes no NVM capacity");
    let ns = c.id_ns(NsId(2)).unwrap();
    assert_eq!((ns.vs_dram, ns.nsze, ns.nuse), (1, 32 * MIB / 512, 32 * MIB / 512));
    assert_eq!(c.id_ns(NsId(1)).unwrap().vs_dram, 0);
    // UNVMCAP = TNVMCAP - the NVMCAP of every namespace: the DRAM namespace's is 0 (it
    // reported its 32 MiB, which UNVMCAP does not count).
    let nvmcaps: u64 = [1, 2].iter().map(|&n| c.id_ns(NsId(n)).unwrap().nvmcap).sum();
    assert_eq!(ns.nvmcap, 0);
    assert_eq!(id.unvmcap, c.tnvmcap() - nvmcaps);
    assert!(c.check_state().is_ok());
    // A preset without a budget has no vendor field.
    let cm6 = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap(), 1).unwrap();
    assert!(cm6.id_ctrl().vs_dram_ns.is_none());
}

#[test]
fn dram_writes_are_host_writes_never_nand_writes() {
    let mut c = with_dram_ns();
    let before = c.vendor_log();
    for i in 0..1024 {
        c.write(NsId(2), (i % 64) * 256, 256, &mut NoTiming).unwrap(); // 128 KiB each
    }
    c.read(NsId(2), 0, 256, &mut NoTiming).unwrap();
    let v = c.vendor_log();
    assert_eq!(v.host_write_bytes - before.host_write_bytes, 1024 * 128 * 1024);
    assert_eq!(v.dram_write_bytes, 1024 * 128 * 1024);
    assert_eq!((v.nand_write_bytes, c.ftl_counters().host_write_bytes), (0, 0), "nothing reached the FTL or NAND");
    assert_eq!(v.dram_read_bytes, 128 * 1024);
    let s = c.smart_log();
    assert_eq!((s.host_write_commands, s.host_read_commands), (1024, 1));
    assert_eq!(s.data_units_written, (1024 * 256u64).div_ceil(1000));
    // NAND writes on the other namespace: the WAF's denominator has both.
    c.write(NsId(1), 0, 8 * 1024, &mut NoTiming).unwrap(); // 4 MiB
    let v = c.vendor_log();
    assert_eq!(v.host_write_bytes, 128 * MIB + 4 * MIB);
    assert!((v.waf - v.nand_write_bytes as f64 / (132 * MIB) as f64).abs() < 1e-12);
    // Deallocate is accepted and touches no NAND; precondition has nothing to do.
    assert_eq!(c.deallocate(NsId(2), 0, 256).unwrap(), 0);
    let e = c.precondition(NsId(2), ssdtwin_core::nvme::Pattern::Sequential, 4096, 4096, 1, &mut |_, _| true).unwrap_err();
    assert_eq!(status(&e), Status::InvalidField);
}

#[test]
fn power_off_dumps_the_dram_namespaces_to_nand() {
    let mut c = with_dram_ns();
    c.power_cycle(true);
    c.power_cycle(false);
    let v = c.vendor_log();
    assert_eq!(v.dram_flush_bytes, 2 * 32 * MIB);
    assert_eq!(v.nand_write_bytes, 0, "the reserved area is not user-data NAND traffic");
}

#[test]
fn the_dram_budget_and_the_namespace_count_are_enforced() {
    let mut c = with_dram_ns();
    let e = c.create_dram_ns(64 * MIB / 512, 64 * MIB / 512, 0, 0).unwrap_err();
    assert_eq!(status(&e), Status::NsInsufficientCapacity);
    assert!(e.to_string().contains("33554432 bytes of the 67108864-byte DRAM budget free"), "{e}");
    // Exactly the rest fits, one block more does not.
    let rest = 32 * MIB / 4096;
    assert_eq!(status(&c.create_dram_ns(rest + 1, rest + 1, 1, 0).unwrap_err()), Status::NsInsufficientCapacity);
    c.create_dram_ns(rest, rest, 1, 0).unwrap();
    // The NAND namespaces fill the NSIDs up to the preset's 32.
    let mut n = 3;
    while n < 32 {
        c.create_ns(8, 8, 0, 0).unwrap();
        n += 1;
    }
    assert_eq!(status(&c.create_ns(8, 8, 0, 0).unwrap_err()), Status::NsIdUnavailable);
    assert!(c.check_state().is_ok());
    // A drive without a budget refuses DRAM namespaces.
    let mut cm6 = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap(), 1).unwrap();
    let e = cm6.create_dram_ns(8, 8, 0, 0).unwrap_err();
    assert_eq!(status(&e), Status::InvalidField);
    assert!(e.to_string().contains("no DRAM namespaces"), "{e}");
}

#[test]
fn dram_namespace_commands_are_timed_by_dram_and_the_link() {
    let mut c = with_dram_ns();
    let spec = c.spec().clone();
    let mut t = DeviceTiming::new(&spec, c.ftl_config()).unwrap();
    let dn = spec.dram_namespace.clone().unwrap();
    let link = spec.timing.as_ref().unwrap().host_link_bytes_per_s.value;
    let bytes = 4096u64;
    let xfer = |rate: u64| (bytes * 1_000_000_000).div_ceil(rate);
    // One 4 KiB read at time 0 on an idle drive: command slot, DRAM, link.
    let done = t.read(&mut c, 0, NsId(2), 0, 8).unwrap();
    let ctrl_slot = 1_000_000_000_000u64.div_ceil(spec.timing.as_ref().unwrap().ctrl_max_iops.value * 1000);
    let expect = ctrl_slot + xfer(dn.bytes_per_s.value) + dn.latency_ns.value + xfer(link);
    assert_eq!(done, expect);
    // A NAND read of mapped data takes at least a page read longer.
    c.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
    for k in 0..4096u64 {
        c.write(NsId(1), 8 + k * 8, 8, &mut NoTiming).unwrap(); // push it out of the buffer
    }
    let at = 1_000_000_000;
    let nand = t.read(&mut c, at, NsId(1), 0, 8).unwrap() - at;
    let dram = t.read(&mut c, 2 * at, NsId(2), 0, 8).unwrap() - 2 * at;
    assert!(nand >= dram + spec.timing.as_ref().unwrap().t_read_ns.value, "nand {nand} ns, dram {dram} ns");
    // Writes: acknowledged after the link and the DRAM, no buffer, no NAND program.
    let w = t.write(&mut c, 3 * at, NsId(2), 0, 256).unwrap() - 3 * at;
    let wb = 256 * 512u64;
    let expect =
        ctrl_slot + (wb * 1_000_000_000).div_ceil(link) + (wb * 1_000_000_000).div_ceil(dn.bytes_per_s.value) + dn.latency_ns.value;
    assert!(w.abs_diff(expect) <= 1, "write {w} ns, expected {expect}");
    // Sustained: DRAM-namespace bandwidth is bounded by the link, not by NAND.
    let mut last = 0;
    for i in 0..2000u64 {
        // Back to back: one every nanosecond.
        last = t.write(&mut c, 4 * at + i, NsId(2), (i % 200) * 256, 256).unwrap();
    }
    let secs = (last - 4 * at) as f64 / 1e9;
    let rate = 2000.0 * wb as f64 / secs;
    assert!(rate > 0.95 * link.min(dn.bytes_per_s.value) as f64 && rate <= link as f64 * 1.001, "{rate} B/s");
}

#[test]
fn qos_caps_hold_a_namespace_to_its_rate() {
    let mut c = with_dram_ns();
    let cap = 391_000_000u64;
    c.set_qos(NsId(1), ssdtwin_core::nvme::QosLimits { read_bytes_per_s: cap, write_bytes_per_s: 0, iops: 0 }).unwrap();
    let mut t = DeviceTiming::new(&c.spec().clone(), c.ftl_config()).unwrap();
    // 128 KiB reads offered as fast as the gate admits them: 2,000 of them span
    // 2,000 x 131,072 B / 391 MB/s, less the 1 ms burst the bucket allows at the start.
    let bytes = 131_072u64;
    let mut now = 0;
    for i in 0..2000u64 {
        now = t.qos_ready(&c, NsId(1), false, bytes, now);
        t.read(&mut c, now, NsId(1), (i % 1000) * 256, 256).unwrap();
    }
    let span = now as f64 / 1e9;
    let rate = 1999.0 * bytes as f64 / span;
    let expect = cap as f64 * (1999.0 * bytes as f64) / (1999.0 * bytes as f64 - cap as f64 * 1e-3);
    assert!((rate / expect - 1.0).abs() < 0.001, "{rate} B/s, expected {expect}");
    // The DRAM namespace is not capped; writes on ns1 are not either.
    assert_eq!(t.qos_ready(&c, NsId(2), false, bytes, now), now);
    assert_eq!(t.qos_ready(&c, NsId(1), true, bytes, now), now);
    // An IOPS cap spaces commands of any size.
    c.set_qos(NsId(2), ssdtwin_core::nvme::QosLimits { read_bytes_per_s: 0, write_bytes_per_s: 0, iops: 50_000 }).unwrap();
    let mut at = 10_000_000_000u64;
    let first = at;
    for i in 0..1000u64 {
        at = t.qos_ready(&c, NsId(2), true, 4096, at);
        t.write(&mut c, at, NsId(2), i * 8, 8).unwrap();
    }
    assert_eq!(at - first, 999 * 20_000 - 1_000_000, "50,000 IOPS = 20 us apart after a 1 ms burst");
}

#[test]
fn a_held_command_holds_back_no_other_namespace() {
    // What `ssdtwin serve` does: every command submitted as it arrives, the QoS gate holding
    // the capped ones. 100 reads on ns1 (20K IOPS: 20 in the 1 ms burst, then one per 50 us)
    // arrive at once, then one read on the uncapped DRAM namespace. Timed at their token
    // times, the held reads took the command processor up to 4 ms ahead and the DRAM read
    // waited for all of them.
    let mut c = with_dram_ns();
    c.set_qos(NsId(1), ssdtwin_core::nvme::QosLimits { read_bytes_per_s: 0, write_bytes_per_s: 0, iops: 20_000 }).unwrap();
    let spec = c.spec().clone();
    let alone = DeviceTiming::new(&spec, c.ftl_config()).unwrap().read(&mut c, 0, NsId(2), 0, 8).unwrap();
    let mut t = DeviceTiming::new(&spec, c.ftl_config()).unwrap();
    let done: Vec<u64> = (0..100u64).map(|i| t.read(&mut c, 0, NsId(1), i * 8, 8).unwrap()).collect();
    assert!(done[99] >= 80 * 50_000, "the cap holds: the last read completes at {} ns", done[99]);
    let other = t.read(&mut c, 0, NsId(2), 0, 8).unwrap();
    let slots = 101 * 1_000_000_000u64.div_ceil(spec.timing.as_ref().unwrap().ctrl_max_iops.value);
    assert!(other <= alone + slots, "the DRAM read completes at {other} ns (alone {alone} ns)");
}

#[test]
fn a_write_held_by_its_bandwidth_cap_holds_back_no_read() {
    // What `ssdtwin serve` does with a writer at its write cap beside a reader on the same
    // namespace, both under its IOPS cap: 32 writes of 128 KiB (100 MB/s: 1.31 ms apart)
    // arrive at once, then 32 reads of 4 KiB. Each write takes one command token as it
    // arrives (20K IOPS: 21 in the 1 ms burst, then one per 50 us), and the reads the next
    // ones, done within 3 ms. Timed from the writes' own starts, the command tokens moved
    // past the last write's, 40 ms ahead, and every read waited for that.
    let mut c = with_dram_ns();
    let caps = ssdtwin_core::nvme::QosLimits { read_bytes_per_s: 0, write_bytes_per_s: 100_000_000, iops: 20_000 };
    c.set_qos(NsId(1), caps).unwrap();
    let mut t = DeviceTiming::new(&c.spec().clone(), c.ftl_config()).unwrap();
    let writes: Vec<u64> = (0..32u64).map(|i| t.write(&mut c, 0, NsId(1), i * 256, 256).unwrap()).collect();
    assert!(writes[31] >= 21 * 1_310_720, "the write cap holds: the last write completes at {} ns", writes[31]);
    let reads: Vec<u64> = (0..32u64).map(|i| t.read(&mut c, 0, NsId(1), (1000 + i) * 8, 8).unwrap()).collect();
    assert!(reads[31] >= (32 + 31 - 20) * 50_000, "the IOPS cap holds: the last read completes at {} ns", reads[31]);
    assert!(reads.iter().all(|&r| r < 3_000_000), "reads complete at {reads:?} ns");
}

#[test]
fn qos_caps_are_checked_persisted_and_dropped_with_the_namespace() {
    let mut c = with_dram_ns();
    let link = c.spec().timing.as_ref().unwrap().host_link_bytes_per_s.value;
    let ok = ssdtwin_core::nvme::QosLimits { read_bytes_per_s: 391_000_000, write_bytes_per_s: 100_000_000, iops: 50_000 };
    let e = c.set_qos(NsId(9), ok).unwrap_err();
    assert_eq!(status(&e), Status::InvalidNamespaceOrFormat);
    let e = c.set_qos(NsId(1), ssdtwin_core::nvme::QosLimits { read_bytes_per_s: link + 1, ..ok }).unwrap_err();
    assert!(status(&e) == Status::InvalidField && e.to_string().contains("the host link's rate"), "{e}");
    let e = c.set_qos(NsId(1), ssdtwin_core::nvme::QosLimits { iops: 10_000_000, ..ok }).unwrap_err();
    assert!(e.to_string().contains("command ceiling"), "{e}");
    assert!(c.state().qos.is_empty(), "refused commands change nothing");
    c.set_qos(NsId(1), ok).unwrap();
    assert_eq!(c.qos(NsId(1)).unwrap(), ok);
    let json = serde_json::to_string(c.state()).unwrap();
    let back: ssdtwin_core::nvme::ControllerState = serde_json::from_str(&json).unwrap();
    assert_eq!(back.qos[&1], ok);
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    assert!(c.state().qos.is_empty());
    assert!(c.check_state().is_ok());
}
