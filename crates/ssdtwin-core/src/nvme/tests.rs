use super::*;
use crate::nand::NoTiming;

fn cm6(scale: u32) -> Controller {
    let spec = DriveSpec::preset("kioxia-cm6-r-3.84t").unwrap().scaled(scale).unwrap();
    Controller::new(spec, 1).unwrap()
}

fn status(e: Error) -> Status {
    e.status().unwrap_or_else(|| panic!("expected an NVMe status, got {e}"))
}

#[test]
fn factory_drive_has_one_full_namespace() {
    let c = cm6(1);
    assert_eq!(c.unvmcap(), 0);
    let ns = c.attached(NsId(1)).unwrap();
    assert_eq!(ns.nsze, 7_501_476_528);
    assert_eq!(ns.lba_bytes, 512);
    let id = c.id_ctrl();
    assert_eq!(id.tnvmcap, 3_840_755_982_336);
    assert_eq!(id.oacs & 0x8, 0x8);
}

#[test]
fn kioxia_resize_sequence() {
    // KIOXIA CM6 namespace brief: detach, delete, create 3.20 TB, attach.
    let mut c = cm6(1);
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    assert_eq!(c.unvmcap(), c.tnvmcap());
    let id = c.create_ns(6_251_233_968, 6_251_233_968, 0, 0).unwrap();
    assert_eq!(id, NsId(1));
    c.attach_ns(NsId(1), &[1]).unwrap();
    assert_eq!(c.unvmcap(), 3_840_755_982_336 - 6_251_233_968 * 512);
    let ns = c.id_ns(NsId(1)).unwrap();
    assert_eq!((ns.nsze, ns.ncap, ns.nuse), (6_251_233_968, 6_251_233_968, 0));
    assert_eq!(ns.npwg, 7, "4 KiB IU at 512 B LBAs is 8 blocks, 0's based");
}

#[test]
fn management_errors_carry_nvme_statuses() {
    let mut c = cm6(1);
    assert_eq!(status(c.create_ns(10, 10, 0, 0).unwrap_err()), Status::NsInsufficientCapacity);
    c.detach_ns(NsId(1), &[1]).unwrap();
    assert_eq!(status(c.detach_ns(NsId(1), &[1]).unwrap_err()), Status::NsNotAttached);
    c.delete_ns(NsId(1)).unwrap();
    assert_eq!(status(c.attach_ns(NsId(1), &[1]).unwrap_err()), Status::InvalidNamespaceOrFormat);
    assert_eq!(status(c.create_ns(100, 50, 0, 0).unwrap_err()), Status::ThinProvisioningNotSupported);
    assert_eq!(status(c.create_ns(100, 100, 7, 0).unwrap_err()), Status::InvalidFormat);
    let id = c.create_ns(100, 100, 1, 0).unwrap();
    assert_eq!(status(c.attach_ns(id, &[2]).unwrap_err()), Status::ControllerListInvalid);
    c.attach_ns(id, &[1]).unwrap();
    assert_eq!(status(c.attach_ns(id, &[1]).unwrap_err()), Status::NsAlreadyAttached);
    let e = c.create_ns(u64::MAX / 2, u64::MAX / 2, 0, 0).unwrap_err();
    assert!(e.to_string().contains("NS_INSUFFICIENT_CAPACITY"), "{e}");
}

#[test]
fn namespace_ids_run_out() {
    let mut c = cm6(1);
    c.delete_ns(NsId(1)).unwrap();
    for i in 1..=64 {
        assert_eq!(c.create_ns(8, 8, 0, 0).unwrap(), NsId(i));
    }
    assert_eq!(status(c.create_ns(8, 8, 0, 0).unwrap_err()), Status::NsIdUnavailable);
    c.delete_ns(NsId(NSID_ALL)).unwrap();
    assert_eq!(c.namespaces().count(), 0);
}

#[test]
fn capacity_can_be_allocated_exactly_in_many_namespaces() {
    // Rounding each namespace up to a logical chunk must never make a fitting create fail.
    let mut c = cm6(64);
    c.delete_ns(NsId(1)).unwrap();
    let total = c.tnvmcap() / 512;
    let n = 64u64;
    let each = total / n;
    for _ in 0..n - 1 {
        c.create_ns(each, each, 0, 0).unwrap();
    }
    let rest = c.unvmcap() / 512;
    c.create_ns(rest, rest, 0, 0).unwrap();
    assert_eq!(c.unvmcap(), 0);
}

#[test]
fn io_checks_range_attachment_and_write_protect() {
    let mut c = cm6(64);
    let nsze = c.attached(NsId(1)).unwrap().nsze;
    c.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
    assert_eq!(status(c.write(NsId(1), nsze - 4, 8, &mut NoTiming).unwrap_err()), Status::LbaOutOfRange);
    assert_eq!(status(c.write(NsId(2), 0, 8, &mut NoTiming).unwrap_err()), Status::InvalidNamespaceOrFormat);
    c.set_feature(0x84, NsId(1), WP_PROTECT as u32).unwrap();
    assert_eq!(status(c.write(NsId(1), 0, 8, &mut NoTiming).unwrap_err()), Status::NamespaceWriteProtected);
    c.read(NsId(1), 0, 8, &mut NoTiming).unwrap();
    c.set_feature(0x84, NsId(1), WP_UNTIL_POWER_CYCLE as u32).unwrap();
    c.power_cycle(false);
    c.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
    c.set_feature(0x84, NsId(1), WP_PERMANENT as u32).unwrap();
    assert_eq!(status(c.set_feature(0x84, NsId(1), WP_NONE as u32).unwrap_err()), Status::FeatureNotChangeable);
    c.detach_ns(NsId(1), &[1]).unwrap();
    assert_eq!(status(c.read(NsId(1), 0, 8, &mut NoTiming).unwrap_err()), Status::InvalidNamespaceOrFormat);
}

#[test]
fn smart_counts_data_units_the_nvme_way() {
    let mut c = cm6(64);
    c.write(NsId(1), 0, 1, &mut NoTiming).unwrap();
    assert_eq!(c.smart_log().data_units_written, 1, "1 unit of 512 B rounds up to 1 thousand");
    c.write(NsId(1), 0, 1000, &mut NoTiming).unwrap();
    assert_eq!(c.smart_log().data_units_written, 2);
    assert_eq!(c.smart_log().host_write_commands, 2);
}

#[test]
fn format_purges_and_changes_lba_size() {
    let mut c = cm6(64);
    c.write(NsId(1), 0, 4096, &mut NoTiming).unwrap();
    let bytes = c.attached(NsId(1)).unwrap().bytes();
    c.ftl().unwrap().drain_buffer(&mut NoTiming);
    assert!(c.id_ns(NsId(1)).unwrap().nuse > 0);
    c.format(NsId(1), 1, 2).unwrap();
    let ns = c.attached(NsId(1)).unwrap();
    assert_eq!((ns.lba_bytes, ns.bytes()), (4096, bytes));
    assert_eq!(c.id_ns(NsId(1)).unwrap().nuse, 0);
    c.ftl().unwrap().check_invariants().unwrap();
    assert_eq!(status(c.format(NsId(1), 6, 0).unwrap_err()), Status::InvalidFormat);
}

#[test]
fn unaligned_small_writes_map_partial_ius() {
    let mut c = cm6(64);
    // 512 B write in the middle of an IU: one IU, one sector.
    c.write(NsId(1), 3, 1, &mut NoTiming).unwrap();
    c.ftl().unwrap().drain_buffer(&mut NoTiming);
    assert_eq!(c.ftl_counters().host_write_bytes, 512);
    assert_eq!(c.id_ns(NsId(1)).unwrap().nuse, 8);
    // Deallocate of a partial IU keeps it; a whole IU goes.
    assert_eq!(c.deallocate(NsId(1), 0, 4).unwrap(), 0);
    assert_eq!(c.deallocate(NsId(1), 0, 8).unwrap(), 1);
    assert_eq!(c.id_ns(NsId(1)).unwrap().nuse, 0);
}

#[test]
fn features_round_trip_and_reject_unknown() {
    let mut c = cm6(64);
    // CM6 has power states 0..=6; 6 is non-operational.
    assert_eq!(status(c.set_feature(0x02, NsId(0), 20).unwrap_err()), Status::InvalidField);
    assert_eq!(status(c.set_feature(0x02, NsId(0), 6).unwrap_err()), Status::InvalidField);
    c.set_feature(0x02, NsId(0), 5).unwrap();
    assert_eq!(c.get_feature(0x02, NsId(0)).unwrap(), 5);
    assert_eq!(status(c.get_feature(0x55, NsId(0)).unwrap_err()), Status::InvalidField);
    c.set_feature(0x04, NsId(0), 350).unwrap();
    assert_eq!(c.get_feature(0x04, NsId(0)).unwrap(), 350);
}

#[test]
fn reserved_feature_bits_read_back_as_zero() {
    // NVMe 1.4 §1.6: reserved bits return 0h. Set Features ignores them (as it does for
    // 02h and 84h); arbitration (01h) and interrupt coalescing (08h) read back the whole
    // dword that was set, 0xffffffff included.
    let mut c = cm6(64);
    c.set_feature(0x08, NsId(0), 0xffff_ffff).unwrap();
    assert_eq!(c.get_feature(0x08, NsId(0)).unwrap(), 0xffff, "THR 7:0, TIME 15:8");
    c.set_feature(0x01, NsId(0), 0x0f03_00ff).unwrap();
    assert_eq!(c.get_feature(0x01, NsId(0)).unwrap(), 0x0f03_0007, "AB 2:0, LPW 15:8, MPW 23:16, HPW 31:24");
    c.set_feature_save(0x08, NsId(0), 0x1_0005, 0, true).unwrap();
    c.power_cycle(false);
    assert_eq!(c.get_feature(0x08, NsId(0)).unwrap(), 5, "the saved value, reserved bits clear");
}

#[test]
fn write_protect_until_power_cycle_is_left_only_by_a_power_cycle() {
    // NVMe 1.4 §8.12: no Set Features leaves Write Protect Until Power Cycle.
    let mut c = cm6(64);
    c.set_feature(0x84, NsId(1), WP_UNTIL_POWER_CYCLE as u32).unwrap();
    for wp in [WP_NONE, WP_PROTECT, WP_UNTIL_POWER_CYCLE, WP_PERMANENT] {
        let e = c.set_feature(0x84, NsId(1), wp as u32).unwrap_err();
        assert_eq!(status(e), Status::FeatureNotChangeable, "to {wp}");
    }
    assert_eq!(c.get_feature(0x84, NsId(1)).unwrap(), WP_UNTIL_POWER_CYCLE as u32);
    c.power_cycle(false);
    assert_eq!(c.get_feature(0x84, NsId(1)).unwrap(), WP_NONE as u32);
    // Write Protect itself is left by Set Features.
    c.set_feature(0x84, NsId(1), WP_PROTECT as u32).unwrap();
    c.set_feature(0x84, NsId(1), WP_NONE as u32).unwrap();
}

#[test]
fn temperature_thresholds_over_and_under_are_kept_apart() {
    let mut c = cm6(64);
    let under = 1 << 20;
    c.set_feature(0x04, NsId(0), under | 273).unwrap();
    assert_eq!(c.get_feature_dw(0x04, NsId(0), 0).unwrap(), 343, "the over threshold is unchanged");
    assert_eq!(c.get_feature_dw(0x04, NsId(0), under).unwrap(), under | 273);
    assert_eq!(c.get_feature_dw(0x04, NsId(0), 0xf << 16).unwrap(), 0xf << 16 | 343, "TMPSEL Fh: all sensors");
    for bad in [1 << 16, 8 << 16, 2 << 20, 3 << 20] {
        assert_eq!(status(c.set_feature(0x04, NsId(0), bad | 300).unwrap_err()), Status::InvalidField, "{bad:#x}");
        assert_eq!(status(c.get_feature_dw(0x04, NsId(0), bad).unwrap_err()), Status::InvalidField, "{bad:#x}");
    }
    // SMART critical warning bit 1 follows the composite temperature (313 K) against both.
    assert_eq!(c.smart_log().critical_warning, 0);
    c.set_feature(0x04, NsId(0), 313).unwrap();
    assert_eq!(c.smart_log().critical_warning, 0x02, "at the over threshold");
    c.set_feature(0x04, NsId(0), 343).unwrap();
    c.set_feature(0x04, NsId(0), under | 320).unwrap();
    assert_eq!(c.smart_log().critical_warning, 0x02, "under the under threshold");
    c.set_feature(0x04, NsId(0), under).unwrap();
    assert_eq!(c.smart_log().critical_warning, 0);
}

#[test]
fn a_size_past_2_pow_64_bytes_is_named_exactly() {
    let mut c = cm6(64);
    let e = c.create_ns(u64::MAX, u64::MAX, 0, 0).unwrap_err();
    let msg = e.to_string();
    assert_eq!(status(e), Status::NsInsufficientCapacity);
    assert!(msg.contains(&format!("= {} bytes requested", u64::MAX as u128 * 512)), "{msg}");
}

#[test]
fn format_to_a_block_bigger_than_the_namespace_is_refused_unchanged() {
    // Found by the simulation (docs/simulation.md): a 1-block 512 B namespace formatted to
    // 4 KiB LBAs was left with 0 blocks, a state every later check refuses.
    let mut c = cm6(256);
    c.delete_ns(NsId(1)).unwrap();
    let id = c.create_ns(1, 1, 0, 0).unwrap();
    let before = c.namespace(id).unwrap().clone();
    assert_eq!(status(c.format(id, 1, 0).unwrap_err()), Status::InvalidFormat);
    assert_eq!(c.namespace(id).unwrap(), &before);
    c.check_state().unwrap();
    c.format(id, 0, 1).unwrap();
}

#[test]
fn sequential_precondition_stops_at_the_namespace_end() {
    // 40 blocks of 128 KiB and a 12 KiB tail: each pass writes 41 I/Os, the last one
    // shortened to the tail, and covers every LBA once (no wrap to LBA 0, nothing past
    // the end).
    let mut c = cm6(256);
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    let nsze = 256 * 40 + 24;
    let id = c.create_ns(nsze, nsze, 0, 0).unwrap();
    c.attach_ns(id, &[1]).unwrap();
    let ns_bytes = nsze * 512;
    let r = c.precondition(id, Pattern::Sequential, 131_072, ns_bytes, 1, &mut |_, _| true).unwrap();
    assert_eq!((r.ios, r.host_bytes), (41, ns_bytes));
    assert_eq!(c.id_ns(id).unwrap().nuse, nsze, "every LBA written once");
    let r = c.precondition(id, Pattern::Sequential, 131_072, 2 * ns_bytes, 1, &mut |_, _| true).unwrap();
    assert_eq!((r.ios, r.host_bytes), (82, 2 * ns_bytes));
}

// ----------------------------------------------------------------- protection information

/// The CM6's LBA formats: 512 and 4096 without metadata keep indices 0 and 1 (images
/// written before metadata formats existed keep their meaning), then each with 8 and 64 B.
#[test]
fn lba_formats_append_metadata_formats() {
    let c = cm6(64);
    assert_eq!(c.spec().lba_formats(), vec![(512, 0), (4096, 0), (512, 8), (512, 64), (4096, 8), (4096, 64)]);
    let id = c.id_ns(NsId(1)).unwrap();
    assert_eq!(id.nlbaf, 5);
    assert_eq!((id.lbafs[4].ms, id.lbafs[4].ds), (8, 12));
    assert_eq!(id.mc, 3, "extended and separate metadata");
    assert_eq!(id.dpc, 0x1f, "types 1-3, PI first or last");
    assert_eq!(id.dps, 0);
}

#[test]
fn format_with_pi_sets_dps_flbas_and_keeps_capacity() {
    let mut c = cm6(64);
    let bytes = c.attached(NsId(1)).unwrap().bytes();
    c.format_with(NsId(1), 4, 0, ProtectionRequest { pi: 1, pil: true, extended: true }).unwrap();
    let ns = c.attached(NsId(1)).unwrap();
    assert_eq!((ns.lba_bytes, ns.protection.ms, ns.protection.pi), (4096, 8, 1));
    assert_eq!(ns.bytes(), bytes, "metadata lives in the spare area: no data capacity lost");
    let id = c.id_ns(NsId(1)).unwrap();
    assert_eq!(id.dps, 0x09, "type 1, PI in the first 8 bytes");
    assert_eq!(id.flbas, 0x14, "format 4, extended LBA");
    // Back to a plain format: the protection goes with it.
    c.format(NsId(1), 1, 0).unwrap();
    assert!(c.attached(NsId(1)).unwrap().protection.is_none());
}

#[test]
fn format_refuses_unsupported_protection() {
    let mut c = cm6(64);
    let before = c.state().namespaces.clone();
    let pi_on_plain = c.format_with(NsId(1), 1, 0, ProtectionRequest { pi: 1, ..Default::default() }).unwrap_err();
    assert_eq!(status(pi_on_plain), Status::InvalidFormat);
    let bad_type = c.format_with(NsId(1), 4, 0, ProtectionRequest { pi: 5, ..Default::default() }).unwrap_err();
    assert_eq!(status(bad_type), Status::InvalidField);
    assert_eq!(c.state().namespaces, before, "a refused format changes nothing");
    // The P5316 preset offers no metadata formats and no PI.
    let spec = DriveSpec::preset("intel-p5316-15.36t").unwrap().scaled(256).unwrap();
    let mut p = Controller::new(spec, 1).unwrap();
    let no_pi = p.format_with(NsId(1), 1, 0, ProtectionRequest { pi: 1, ..Default::default() }).unwrap_err();
    assert_eq!(status(no_pi), Status::InvalidFormat);
    assert_eq!(status(p.format(NsId(1), 2, 0).unwrap_err()), Status::InvalidFormat);
}

#[test]
fn injected_pi_error_fails_only_the_checked_tags_until_rewritten() {
    let mut c = cm6(64);
    assert_eq!(status(c.inject_pi_error(NsId(1), 10, PRCHK_GUARD).unwrap_err()), Status::InvalidField, "no PI yet");
    c.format_with(NsId(1), 4, 0, ProtectionRequest { pi: 1, ..Default::default() }).unwrap();
    c.inject_pi_error(NsId(1), 10, PRCHK_GUARD).unwrap();
    c.inject_pi_error(NsId(1), 20, PRCHK_REFTAG).unwrap();
    assert_eq!(status(c.check_pi(NsId(1), 0, 16, 7).unwrap_err()), Status::GuardCheck);
    assert!(c.check_pi(NsId(1), 0, 16, PRCHK_REFTAG | PRCHK_APPTAG).is_ok(), "guard not checked");
    assert!(c.check_pi(NsId(1), 11, 9, 7).is_ok(), "range excludes both");
    assert_eq!(status(c.check_pi(NsId(1), 11, 10, 7).unwrap_err()), Status::RefTagCheck);
    // As a command of its own it checks what a read checks first.
    assert_eq!(status(c.check_pi_command(NsId(1), 0, 16, 7).unwrap_err()), Status::GuardCheck);
    assert_eq!(status(c.check_pi_command(NsId(9), 0, 16, 7).unwrap_err()), Status::InvalidNamespaceOrFormat);
    let nsze = c.state().namespaces[&1].nsze;
    assert_eq!(status(c.check_pi_command(NsId(1), nsze, 1, 7).unwrap_err()), Status::LbaOutOfRange);
    assert_eq!(status(c.check_pi_command(NsId(1), 0, 0, 7).unwrap_err()), Status::LbaOutOfRange);
    assert_eq!(status(c.check_pi_command(NsId(1), 0, 16, 8).unwrap_err()), Status::InvalidField);
    // A write stores fresh PI.
    c.write(NsId(1), 8, 4, &mut crate::nand::NoTiming).unwrap();
    assert!(c.check_pi(NsId(1), 0, 16, 7).is_ok());
    assert_eq!(status(c.check_pi(NsId(1), 0, 21, 7).unwrap_err()), Status::RefTagCheck);
    // Type 3 has no reference tag to check; a format clears everything.
    c.format_with(NsId(1), 4, 0, ProtectionRequest { pi: 3, ..Default::default() }).unwrap();
    assert!(c.state().pi_errors.is_empty());
    c.inject_pi_error(NsId(1), 20, PRCHK_REFTAG).unwrap();
    assert!(c.check_pi(NsId(1), 0, 32, 7).is_ok());
    // A deleted namespace takes its corrupted PI with it: a new one with its NSID starts clean.
    c.inject_pi_error(NsId(1), 21, PRCHK_GUARD).unwrap();
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    assert!(c.state().pi_errors.is_empty());
}

type TimedCase = (&'static str, u32, u64, fn(&mut Controller));

/// The cases a timed command is compared in: a plain command at `slba`, one out of range,
/// an absent, a write-protected, a detached and an ANA-inaccessible namespace.
fn timed_cases(slba: u64) -> [TimedCase; 6] {
    [
        ("plain", 1, slba, |_| {}),
        ("out of range", 1, u64::MAX / 2, |_| {}),
        ("absent", 2, 0, |_| {}),
        ("write protected", 1, slba, |c| c.set_feature(0x84, NsId(1), WP_PROTECT as u32).map(|_| ()).unwrap()),
        ("detached", 1, 0, |c| c.detach_ns(NsId(1), &[1]).unwrap()),
        ("ANA inaccessible", 1, 0, |c| c.set_ana_state(1, ana::ANA_INACCESSIBLE).unwrap()),
    ]
}

/// Two like drives with 8 blocks written at LBA 64, then `setup` on each.
fn timed_pair(setup: fn(&mut Controller)) -> (Controller, Controller) {
    let (mut a, mut b) = (cm6(256), cm6(256));
    for c in [&mut a, &mut b] {
        c.write(NsId(1), 64, 8, &mut NoTiming).unwrap();
        setup(c);
    }
    (a, b)
}

/// The same error log, SMART counters and FTL state on both drives.
fn assert_same_drive(a: &mut Controller, b: &mut Controller, what: &str) {
    assert_eq!(format!("{:?}", b.st.error_log), format!("{:?}", a.st.error_log), "{what}: error log");
    assert_eq!(format!("{:?}", b.smart_log()), format!("{:?}", a.smart_log()), "{what}: SMART");
    assert_eq!(b.ftl_fingerprint().unwrap(), a.ftl_fingerprint().unwrap(), "{what}: FTL");
}

/// `write_timed` (one namespace look-up, the timing's `place` in between) does what
/// `attached` then `write` do: the same result, the same error log and SMART counters, the
/// same FTL state, and `place` called exactly when `attached` succeeds ([`timed_cases`]).
#[test]
fn write_timed_is_attached_then_write() {
    for (what, nsid, slba, setup) in timed_cases(0) {
        let (mut a, mut b) = timed_pair(setup);
        let want = a.attached(NsId(nsid)).map(|ns| ns.lba_bytes).and_then(|_| a.write(NsId(nsid), slba, 8, &mut NoTiming));
        let mut placed = false;
        let got = b.write_timed(NsId(nsid), slba, 8, |ns| {
            assert_eq!(ns.lba_bytes, 512, "{what}");
            placed = true;
            NoTiming
        });
        assert_eq!(format!("{:?}", got.map(|_| ())), format!("{want:?}"), "{what}");
        assert_eq!(placed, a.attached(NsId(nsid)).is_ok(), "{what}: place called");
        assert_same_drive(&mut a, &mut b, what);
    }
}

/// `read_timed` does what `attached` then `read` do (see `write_timed_is_attached_then_write`).
#[test]
fn read_timed_is_attached_then_read() {
    for (what, nsid, slba, setup) in timed_cases(60) {
        let (mut a, mut b) = timed_pair(setup);
        let want = a.attached(NsId(nsid)).map(|ns| ns.lba_bytes).and_then(|_| a.read(NsId(nsid), slba, 16, &mut NoTiming));
        let mut placed = false;
        let got = b.read_timed(NsId(nsid), slba, 16, |ns| {
            assert_eq!(ns.lba_bytes, 512, "{what}");
            placed = true;
            NoTiming
        });
        assert_eq!(format!("{:?}", got.map(|(_, sum)| sum)), format!("{want:?}"), "{what}");
        assert_eq!(placed, a.attached(NsId(nsid)).is_ok(), "{what}: place called");
        assert_same_drive(&mut a, &mut b, what);
    }
}

/// A prefetch handle finds the IU the namespace's own look-up finds, on namespaces whose
/// chunks are not in order (created, one deleted, another created in its place) and of both
/// LBA sizes; an absent namespace's handle finds none.
#[test]
fn a_prefetch_handle_finds_the_namespaces_ius() {
    let mut c = cm6(64);
    c.delete_ns(NsId(1)).unwrap();
    let chunk_lbas = ((c.cfg.iu_bytes as u64) << c.cfg.chunk_shift) / 512;
    let a = c.create_ns(3 * chunk_lbas, 3 * chunk_lbas, 0, 0).unwrap();
    let b = c.create_ns(2 * chunk_lbas, 2 * chunk_lbas, 0, 0).unwrap();
    let d = c.create_ns(2 * chunk_lbas / 8, 2 * chunk_lbas / 8, 1, 0).unwrap();
    c.delete_ns(b).unwrap();
    let e = c.create_ns(5 * chunk_lbas, 5 * chunk_lbas, 0, 0).unwrap();
    assert!(c.st.namespaces[&e.0].chunks.windows(2).any(|w| w[1] != w[0] + 1), "chunks in order: the test needs a gap");
    let iu_shift = c.cfg.iu_bytes.trailing_zeros();
    for nsid in [a, d, e] {
        let h = c.prefetch_handle(nsid);
        let ns = &c.st.namespaces[&nsid.0];
        let mut checked = 0;
        for offset in (0..ns.bytes() + (8 << 20)).step_by(1 << 20).chain([1, 4095, 4096, ns.bytes() - 1, ns.bytes()]) {
            let want = ns.global_iu(offset >> iu_shift, c.cfg.chunk_shift);
            assert_eq!(h.iu(offset), want, "namespace {} byte {offset}", nsid.0);
            checked += want.is_some() as u32;
        }
        assert!(checked > 8, "{checked}");
    }
    assert_eq!(c.prefetch_handle(NsId(9)).iu(0), None);
}

#[test]
fn saved_features_survive_a_power_cycle_and_unsaved_ones_revert() {
    let mut c = cm6(256);
    assert_eq!(c.id_ctrl().oncs & 0x10, 0x10, "ONCS bit 4: Save and Select supported");
    // Saved: interrupt coalescing 5 and the under temperature threshold 250 K; then the
    // current values move on without SV.
    c.set_feature_save(0x08, NsId(0), 5, 0, true).unwrap();
    c.set_feature_save(0x04, NsId(0), 1 << 20 | 250, 0, true).unwrap();
    c.set_feature_save(0x08, NsId(0), 7, 0, false).unwrap();
    c.set_feature_save(0x01, NsId(0), 0x0f03_0000, 0, false).unwrap();
    assert_eq!(c.get_feature_sel(0x08, NsId(0), 0, SEL_CURRENT).unwrap(), 7);
    assert_eq!(c.get_feature_sel(0x08, NsId(0), 0, SEL_SAVED).unwrap(), 5);
    assert_eq!(c.get_feature_sel(0x08, NsId(0), 0, SEL_DEFAULT).unwrap(), 0);
    assert_eq!(c.get_feature_sel(0x04, NsId(0), 1 << 20, SEL_SAVED).unwrap(), 1 << 20 | 250);
    assert_eq!(c.get_feature_sel(0x04, NsId(0), 0, SEL_SAVED).unwrap(), 343, "the over threshold was not saved");
    // Saved and current survive serialization (the image) unchanged.
    let st: ControllerState = serde_json::from_str(&serde_json::to_string(c.state()).unwrap()).unwrap();
    assert_eq!(st.saved_features, c.state().saved_features);
    c.power_cycle(false);
    assert_eq!(c.get_feature(0x08, NsId(0)).unwrap(), 5, "the saved value");
    assert_eq!(c.get_feature_dw(0x04, NsId(0), 1 << 20).unwrap(), 1 << 20 | 250);
    assert_eq!(c.get_feature(0x01, NsId(0)).unwrap(), 0, "arbitration was never saved: its default");
}

#[test]
fn a_feature_that_is_not_saveable_says_so_and_refuses_sv() {
    let mut c = cm6(256);
    for (fid, caps) in [
        (0x01, FEATURE_SAVEABLE | FEATURE_CHANGEABLE),
        (0x02, FEATURE_SAVEABLE | FEATURE_CHANGEABLE),
        (0x04, FEATURE_SAVEABLE | FEATURE_CHANGEABLE),
        (0x06, 0),
        (0x07, 0),
        (0x08, FEATURE_SAVEABLE | FEATURE_CHANGEABLE),
        (0x84, FEATURE_NAMESPACE_SPECIFIC | FEATURE_CHANGEABLE),
    ] {
        assert_eq!(c.get_feature_sel(fid, NsId(1), 0, SEL_SUPPORTED_CAPABILITIES).unwrap(), caps, "feature {fid:#x}");
    }
    let e = c.set_feature_save(0x84, NsId(1), WP_PROTECT as u32, 0, true).unwrap_err();
    assert_eq!(status(e), Status::FeatureNotSaveable);
    assert_eq!(c.get_feature(0x84, NsId(1)).unwrap(), WP_NONE as u32, "a refused Set changes nothing");
    assert_eq!(status(c.set_feature_save(0x06, NsId(0), 0, 0, true).unwrap_err()), Status::FeatureNotSaveable);
    // Saved of a feature that is not saveable reads as its default (NVMe 1.4: SEL 010b
    // acts as 001b).
    c.set_feature(0x84, NsId(1), WP_PROTECT as u32).unwrap();
    assert_eq!(c.get_feature_sel(0x84, NsId(1), 0, SEL_SAVED).unwrap(), 0);
    assert_eq!(status(c.get_feature_sel(0x08, NsId(0), 0, 4).unwrap_err()), Status::InvalidField);
    assert_eq!(status(c.get_feature_sel(0x99, NsId(0), 0, SEL_SUPPORTED_CAPABILITIES).unwrap_err()), Status::InvalidField);
    // Write Protect (not Until Power Cycle) persists by §8.12, with no saved value.
    c.power_cycle(false);
    assert_eq!(c.get_feature(0x84, NsId(1)).unwrap(), WP_PROTECT as u32);
}
