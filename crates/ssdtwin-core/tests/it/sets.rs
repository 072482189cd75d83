//! NVM Sets and Endurance Groups (NVMe 1.4 IO Determinism): namespaces on disjoint dies.

use ssdtwin_core::engine::DeviceTiming;
use ssdtwin_core::nand::NoTiming;
use ssdtwin_core::nvme::{Controller, NsId, Pattern, Status, CONTROLLER_ID};
use ssdtwin_core::spec::DriveSpec;

const MODEL: &str = "memblaze-pblaze5-910-3.84t";

fn pblaze5(sets: Option<u32>) -> Controller {
    let spec = DriveSpec::preset(MODEL).unwrap().scaled(64).unwrap();
    let spec = match sets {
        Some(k) => spec.with_nvm_sets(k).unwrap(),
        None => spec,
    };
    Controller::new(spec, 1).unwrap()
}

fn status(e: &ssdtwin_core::nvme::Error) -> Status {
    e.status().unwrap_or_else(|| panic!("expected an NVMe status, got {e}"))
}

#[test]
fn the_factory_state_has_one_namespace_per_set() {
    let c = pblaze5(Some(4));
    let id = c.id_ctrl();
    assert_eq!((id.ctratt & 0x14, id.nsetidmax, id.endgidmax), (0x14, 4, 4));
    let list = c.id_nvmset(0).unwrap();
    assert_eq!(list.nid, 4);
    let total: u64 = list.nvm_sets.iter().map(|e| e.total_nvmset_cap).sum();
    assert_eq!(total, c.tnvmcap(), "the sets share TNVMCAP");
    for (i, e) in list.nvm_sets.iter().enumerate() {
        let nsid = NsId(i as u32 + 1);
        let ns = c.id_ns(nsid).unwrap();
        assert_eq!((e.nvmset_id, e.endurance_group_id), (i as u16 + 1, i as u16 + 1));
        assert_eq!((ns.nvmsetid, ns.endgid), (e.nvmset_id, e.endurance_group_id));
        assert_eq!(ns.nsze * 512, e.total_nvmset_cap, "namespace {} fills set {}", nsid.0, i + 1);
        assert_eq!(e.unalloc_nvmset_cap, 0);
    }
    assert_eq!(c.id_nvmset(3).unwrap().nvm_sets.len(), 2, "the list from set 3 on");
    assert!(c.check_state().is_ok());
    // A preset without [nvm_sets]: no sets, NVMSETID 0, CNS 04h and log 09h refused.
    let cm6 = Controller::new(DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(64).unwrap(), 1).unwrap();
    assert_eq!((cm6.id_ctrl().ctratt, cm6.id_ctrl().nsetidmax), (0, 0));
    assert_eq!(cm6.id_ns(NsId(1)).unwrap().nvmsetid, 0);
    assert_eq!(status(&cm6.id_nvmset(0).unwrap_err()), Status::InvalidField);
    assert_eq!(status(&cm6.endurance_log(1).unwrap_err()), Status::InvalidLogPage);
    // The PBlaze5 built without sets, or with one: the drive without sets, identify included.
    let (plain, one) = (pblaze5(None), pblaze5(Some(1)));
    assert_eq!(plain.id_ctrl(), one.id_ctrl());
    assert_eq!((plain.id_ctrl().ctratt, plain.id_ns(NsId(1)).unwrap().nvmsetid), (0, 0));
    assert_eq!(status(&one.id_nvmset(0).unwrap_err()), Status::InvalidField);
}

#[test]
fn endurance_group_logs_count_only_their_sets_traffic() {
    let mut c = pblaze5(Some(2));
    for i in 0..4096u64 {
        c.write(NsId(2), i * 256, 256, &mut NoTiming).unwrap(); // 512 MiB, sequential
    }
    c.read(NsId(2), 0, 8, &mut NoTiming).unwrap();
    let (g1, g2) = (c.endurance_log(1).unwrap(), c.endurance_log(2).unwrap());
    assert_eq!((g1.data_units_written, g1.host_write_cmds, g1.media_units_written), (0, 0, 0));
    assert_eq!((g2.host_write_cmds, g2.host_read_cmds), (4096, 1));
    assert_eq!(g2.data_units_written, (4096u64 * 256).div_ceil(1000));
    let media = c.vendor_log().nand_write_bytes;
    assert_eq!(g2.media_units_written, media.div_ceil(1_000_000_000), "every NAND byte is set 2's");
    assert!(media > 0);
    assert_eq!(status(&c.endurance_log(3).unwrap_err()), Status::InvalidField);
    assert_eq!(status(&c.endurance_log(0).unwrap_err()), Status::InvalidField);
}

#[test]
fn endurance_group_logs_count_their_sets_errors() {
    // Log 09h's Media and Data Integrity Errors and Error Information Log Entries are the
    // group's (NVMe 1.4 Figure 208): they read 0 whatever failed on the group's namespaces.
    let mut c = pblaze5(Some(2));
    c.write(NsId(2), 0, 8, &mut NoTiming).unwrap();
    c.inject_media_error(NsId(2), 0, 8).unwrap();
    assert_eq!(status(&c.read(NsId(2), 0, 8, &mut NoTiming).unwrap_err()), Status::UnrecoveredReadError);
    let nsze = c.id_ns(NsId(2)).unwrap().nsze;
    assert_eq!(status(&c.read(NsId(2), nsze, 1, &mut NoTiming).unwrap_err()), Status::LbaOutOfRange);
    let (g1, g2) = (c.endurance_log(1).unwrap(), c.endurance_log(2).unwrap());
    assert_eq!((g1.media_data_integrity_err, g1.num_err_info_log_entries), (0, 0));
    assert_eq!((g2.media_data_integrity_err, g2.num_err_info_log_entries), (1, 2));
    let smart = c.smart_log();
    assert_eq!((smart.media_errors, smart.num_err_log_entries), (1, 2));
    // An error of a namespace that does not exist is the drive's only.
    assert_eq!(status(&c.read(NsId(9), 0, 1, &mut NoTiming).unwrap_err()), Status::InvalidNamespaceOrFormat);
    assert_eq!(c.smart_log().num_err_log_entries, 3);
    assert_eq!(c.endurance_log(2).unwrap().num_err_info_log_entries + c.endurance_log(1).unwrap().num_err_info_log_entries, 2);
    assert!(c.check_state().is_ok());
}

#[test]
fn namespaces_are_placed_in_their_set_within_its_capacity() {
    let mut c = pblaze5(Some(2));
    let half = c.id_nvmset(2).unwrap().nvm_sets[0].total_nvmset_cap / 512;
    c.detach_ns(NsId(2), &[CONTROLLER_ID]).unwrap();
    c.delete_ns(NsId(2)).unwrap();
    let before = c.id_nvmset(0).unwrap();
    // Unknown set, a namespace larger than its set, a full set, a DRAM namespace in a set.
    assert_eq!(status(&c.create_ns_in_set(8, 8, 0, 0, 3).unwrap_err()), Status::InvalidField);
    assert_eq!(status(&c.create_ns_in_set(half + 1, half + 1, 0, 0, 2).unwrap_err()), Status::NsInsufficientCapacity);
    assert_eq!(status(&c.create_ns_in_set(8, 8, 0, 0, 1).unwrap_err()), Status::NsInsufficientCapacity);
    assert_eq!(status(&c.create_ns_in(8, 8, 0, 0, true, 2).unwrap_err()), Status::InvalidField);
    assert_eq!(c.id_nvmset(0).unwrap(), before, "refused commands change nothing");
    // Two namespaces share set 2; NVMSETID 0 lets the controller pick the set with room.
    let a = c.create_ns_in_set(half / 2, half / 2, 0, 0, 2).unwrap();
    let b = c.create_ns(half / 4, half / 4, 0, 0).unwrap();
    assert_eq!((c.id_ns(a).unwrap().nvmsetid, c.id_ns(b).unwrap().nvmsetid), (2, 2));
    let s2 = &c.id_nvmset(2).unwrap().nvm_sets[0];
    assert_eq!(s2.unalloc_nvmset_cap, s2.total_nvmset_cap - (half / 2 + half / 4) * 512);
    for n in [a, b] {
        c.attach_ns(n, &[CONTROLLER_ID]).unwrap();
        let bytes = c.attached(n).unwrap().bytes();
        c.precondition(n, Pattern::Random, 4096, bytes, 1, &mut |_, _| true).unwrap();
    }
    assert!(c.check_state().is_ok());
    c.check_full().unwrap();
    // Chunks freed in set 2 can serve set 1 later.
    c.detach_ns(NsId(1), &[CONTROLLER_ID]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    c.detach_ns(b, &[CONTROLLER_ID]).unwrap();
    c.delete_ns(b).unwrap();
    let n = c.create_ns_in_set(half, half, 0, 0, 1).unwrap();
    c.attach_ns(n, &[CONTROLLER_ID]).unwrap();
    c.write(n, 0, 4096, &mut NoTiming).unwrap();
    assert!(c.check_state().is_ok());
    c.check_full().unwrap();
}

/// NS1's 4 KiB reads (one every 20 us) beside a writer on NS2 offering 128 KiB writes at
/// 2 GB/s for 40 ms of simulated time; returns NS1's mean read latency in ns.
fn read_latency_beside_a_writer(c: &mut Controller, writer: bool) -> f64 {
    let spec = c.spec().clone();
    let mut t = DeviceTiming::new(&spec, c.ftl_config()).unwrap();
    let (ns1, ns2) = (NsId(1), NsId(2));
    let (mut sum, mut n) = (0u64, 0u64);
    let (end, read_every, write_every) = (40_000_000u64, 20_000u64, 65_536u64);
    let (mut next_read, mut next_write, mut lba) = (1_000_000u64, 0u64, 0u64);
    while next_read < end {
        if writer && next_write <= next_read {
            t.write(c, next_write, ns2, lba % (1 << 24), 256).unwrap();
            (next_write, lba) = (next_write + write_every, lba + 256);
        } else {
            let slba = (n * 7919) % ((32 << 20) / 4096) * 8; // within NS1's 32 MiB of data
            sum += t.read(c, next_read, ns1, slba, 8).unwrap() - next_read;
            (next_read, n) = (next_read + read_every, n + 1);
        }
    }
    sum as f64 / n as f64
}

#[test]
fn a_writer_in_another_set_leaves_the_readers_dies_alone() {
    // NS1 holds 32 MiB of data at its start; NS2 receives the writes.
    let setup = |sets: Option<u32>| {
        let mut c = pblaze5(sets);
        if sets.is_none() {
            let half = c.tnvmcap() / 2 / 512 / 4096 * 4096;
            c.detach_ns(NsId(1), &[CONTROLLER_ID]).unwrap();
            c.delete_ns(NsId(1)).unwrap();
            for _ in 0..2 {
                let n = c.create_ns(half, half, 0, 0).unwrap();
                c.attach_ns(n, &[CONTROLLER_ID]).unwrap();
            }
        }
        c.precondition(NsId(1), Pattern::Sequential, 131072, 32 << 20, 1, &mut |_, _| true).unwrap();
        c.idle_gc(u64::MAX, &mut NoTiming).unwrap();
        c
    };
    let alone = read_latency_beside_a_writer(&mut setup(Some(2)), false);
    let sets = read_latency_beside_a_writer(&mut setup(Some(2)), true);
    let shared = read_latency_beside_a_writer(&mut setup(None), true);
    // Sharing dies, reads wait behind programs; in separate sets they see almost nothing of
    // the writer (the controller and the link are still shared).
    assert!(sets < alone * 1.2, "alone {alone:.0} ns, writer in the other set {sets:.0} ns");
    assert!(shared > sets * 1.5, "writer on the same dies {shared:.0} ns, in the other set {sets:.0} ns");
}
