use super::super::*;
use super::*;
use crate::nand::NoTiming;

fn drive(preset: &str, scale: u32) -> Controller {
    Controller::new(DriveSpec::preset(preset).unwrap().scaled(scale).unwrap(), 7).unwrap()
}

fn status(e: Error) -> Status {
    e.status().unwrap_or_else(|| panic!("expected an NVMe status, got {e}"))
}

fn state_json(c: &Controller) -> String {
    serde_json::to_string(c.state()).unwrap()
}

#[test]
fn cm6_v_durations_follow_the_preset() {
    let spec = DriveSpec::preset("kioxia-cm6-v-3.2t").unwrap();
    let t = spec.timing.as_ref().unwrap();
    let n = &spec.nand;
    let planes = (n.channels.value * n.dies_per_channel.value * n.planes_per_die.value) as u64;
    let ps0 = sanitize_times(&spec, 0).unwrap();
    // ps0's budget covers every plane: each plane erases its blocks one after another.
    assert_eq!(ps0.parallel_planes, planes);
    assert_eq!(ps0.block_erase_ns, t.t_erase_ns.value * n.blocks_per_plane.value as u64);
    assert_eq!(ps0.crypto_erase_ns, 0);
    // Overwrite: the whole NAND programmed at the program throughput of all planes.
    let raw = spec.geometry().raw_bytes() as f64;
    let unit = (n.page_bytes.value * n.bits_per_cell.value) as f64;
    let program_s = raw / unit / planes as f64 * t.t_prog_ns.value as f64 / 1e9;
    let pass_s = (ps0.overwrite_pass_ns - ps0.block_erase_ns) as f64 / 1e9;
    assert!((pass_s - program_s).abs() < 1e-3 * program_s, "{pass_s} vs {program_s}");
    // ps5 (9.9 W): the NAND budget allows fewer operations at once, so erasing takes longer.
    let ps5 = sanitize_times(&spec, 5).unwrap();
    assert!(ps5.parallel_planes < planes);
    assert_eq!(ps5.block_erase_ns, t.t_erase_ns.value * (planes * n.blocks_per_plane.value as u64).div_ceil(ps5.parallel_planes));
}

#[test]
fn block_erase_drops_everything_refuses_io_while_running_and_counts_wear() {
    let mut c = drive("kioxia-cm6-v-3.2t", 256);
    let nsze = c.namespace(NsId(1)).unwrap().nsze;
    c.write(NsId(1), 0, nsze / 2, &mut NoTiming).unwrap();
    assert!(c.nuse(c.namespace(NsId(1)).unwrap()) > 0);
    let programmed_before = c.ftl_counters().host_programmed_ius;
    let sbs = c.ftl_state().superblocks().len() as u64;
    c.sanitize(SanitizeRequest { sanact: SANACT_BLOCK_ERASE, ..Default::default() }).unwrap();
    // At once: nothing mapped, nothing readable, no NAND program issued by the FTL.
    assert_eq!(c.nuse(c.namespace(NsId(1)).unwrap()), 0);
    assert_eq!(c.ftl_counters().host_programmed_ius, programmed_before);
    assert!(c.sanitizing());
    let log = c.sanitize_log();
    assert_eq!((log.sstat & 7, log.sprog, log.scdw10), (2, 0, 2));
    assert_eq!(status(c.read(NsId(1), 0, 8, &mut NoTiming).unwrap_err()), Status::SanitizeInProgress);
    assert_eq!(status(c.write(NsId(1), 0, 8, &mut NoTiming).unwrap_err()), Status::SanitizeInProgress);
    assert_eq!(status(c.format(NsId(1), 0, 0).unwrap_err()), Status::SanitizeInProgress);
    let e = &c.view().error_log[0];
    assert_eq!((e.error_count, e.opcode, e.status_field), (2, logs::OPC_WRITE, Status::SanitizeInProgress.field()));
    // Halfway through, progress is half of 65536.
    let dur = c.state().sanitize.end_ns - c.state().sanitize.start_ns;
    c.advance_clock(dur / 2, 0);
    assert!((c.sanitize_log().sprog as i64 - 32768).abs() <= 1);
    assert_eq!(c.wait_sanitize(), dur - dur / 2);
    let log = c.sanitize_log();
    assert_eq!((log.sstat & 7, log.sstat >> 8 & 1, log.sprog), (1, 1, 0xFFFF));
    let r = c.read(NsId(1), 0, 8, &mut NoTiming).unwrap();
    assert_eq!(r.unmapped_ius, 1);
    let v = c.vendor_log();
    assert_eq!((v.erase_count_min, v.superblock_erases), (1, sbs));
    // A write clears Global Data Erased.
    c.write(NsId(1), 0, 8, &mut NoTiming).unwrap();
    assert_eq!(c.sanitize_log().sstat >> 8 & 1, 0);
    c.check_full().unwrap();
}

#[test]
fn overwrite_programs_the_whole_nand_per_pass() {
    let mut c = drive("kioxia-cm6-v-3.2t", 256);
    let raw = c.spec().geometry().raw_bytes();
    let pass = sanitize_times(c.spec(), 0).unwrap().overwrite_pass_ns;
    c.sanitize(SanitizeRequest { sanact: SANACT_OVERWRITE, owpass: 3, ovrpat: 0xdead_beef, ..Default::default() }).unwrap();
    let s = &c.state().sanitize;
    assert_eq!(s.end_ns - s.start_ns, 3 * pass);
    let v = c.vendor_log();
    assert_eq!((v.nand_write_sanitize_bytes, v.nand_write_bytes, v.erase_count_max), (3 * raw, 3 * raw, 3));
    assert_eq!(v.waf, 0.0, "no host data, no write amplification");
    c.wait_sanitize();
    assert_eq!(c.sanitize_log().sstat >> 3 & 0x1f, 3, "three passes completed");
}

#[test]
fn crypto_erase_of_one_namespace_changes_only_its_key_without_nand_operations() {
    let mut c = drive("kioxia-cm6-v-3.2t", 256);
    c.detach_ns(NsId(1), &[1]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
    let half = c.tnvmcap() / 2 / 4096;
    for _ in 0..2 {
        let id = c.create_ns(half, half, 1, 0).unwrap();
        c.attach_ns(id, &[1]).unwrap();
        c.write(id, 0, 1024, &mut NoTiming).unwrap();
    }
    let keys = (c.media_key_id(1), c.media_key_id(2));
    let before = c.ftl_counters().clone();
    c.format(NsId(2), 1, 2).unwrap();
    assert_eq!(c.media_key_id(1), keys.0);
    assert_ne!(c.media_key_id(2), keys.1);
    assert_eq!(c.nuse(c.namespace(NsId(2)).unwrap()), 0);
    assert_eq!(c.nuse(c.namespace(NsId(1)).unwrap()), 1024);
    let after = c.ftl_counters();
    let nand = |k: &FtlCounters| (k.host_programmed_ius, k.gc_programmed_ius, k.erases, k.nand_read_gc_bytes);
    assert_eq!(nand(after), nand(&before), "a key change moves nothing on the NAND");
    // A namespace created after a delete never gets an earlier key back.
    c.detach_ns(NsId(2), &[1]).unwrap();
    c.delete_ns(NsId(2)).unwrap();
    let k2 = c.media_key_id(2);
    c.create_ns(half, half, 1, 0).unwrap();
    assert_eq!(c.id_ns(NsId(2)).unwrap().vs_mek_id, format!("{k2:016x}"));
    assert!(k2 != keys.1 && k2 != c.media_key_id(1));
    // Crypto erase by sanitize: every namespace's key changes, at once (no wait).
    c.sanitize(SanitizeRequest { sanact: SANACT_CRYPTO_ERASE, ..Default::default() }).unwrap();
    assert!(!c.sanitizing());
    assert_ne!(c.media_key_id(1), keys.0);
    c.check_full().unwrap();
}

#[test]
fn refused_sanitize_leaves_the_state_unchanged() {
    let mut c = drive("kioxia-cm6-v-3.2t", 256);
    c.write(NsId(1), 0, 64, &mut NoTiming).unwrap();
    let before = state_json(&c);
    for (req, want) in [
        (SanitizeRequest { sanact: 5, ..Default::default() }, Status::InvalidField),
        (SanitizeRequest { sanact: 0, ..Default::default() }, Status::InvalidField),
        (SanitizeRequest { sanact: SANACT_BLOCK_ERASE, no_dealloc: true, ..Default::default() }, Status::InvalidField),
        (SanitizeRequest { sanact: SANACT_CRYPTO_ERASE, owpass: 2, ..Default::default() }, Status::InvalidField),
    ] {
        assert_eq!(status(c.sanitize(req).unwrap_err()), want, "{req:?}");
        assert_eq!(state_json(&c), before);
    }
    let mut p = drive("intel-p5316-15.36t", 64);
    assert_eq!(p.id_ctrl().sanicap, 0);
    let e = p.sanitize(SanitizeRequest { sanact: SANACT_BLOCK_ERASE, ..Default::default() }).unwrap_err();
    assert_eq!(status(e), Status::InvalidOpcode);
    assert_eq!(c.id_ctrl().sanicap, 0x2000_0007);
}

#[test]
fn error_log_records_failed_io_and_raw_pages_have_their_layout() {
    let mut c = drive("kioxia-cm6-v-3.2t", 256);
    assert!(c.view().error_log.is_empty(), "a drive that failed nothing has an empty log");
    let nsze = c.namespace(NsId(1)).unwrap().nsze;
    assert_eq!(status(c.read(NsId(1), nsze, 1, &mut NoTiming).unwrap_err()), Status::LbaOutOfRange);
    let v = c.view();
    let e = &v.error_log[0];
    assert_eq!((e.error_count, e.lba, e.nsid, e.opcode), (1, nsze, 1, logs::OPC_READ));
    assert_eq!(c.smart_log().num_err_log_entries, 1);
    let page = v.log_page(0x01, 64).unwrap();
    assert_eq!(u64::from_le_bytes(page[0..8].try_into().unwrap()), 1);
    assert_eq!(u16::from_le_bytes(page[12..14].try_into().unwrap()) >> 1, Status::LbaOutOfRange.field());
    assert_eq!(page[31], logs::OPC_READ);
    let smart = v.log_page(0x02, 512).unwrap();
    assert_eq!(u128::from_le_bytes(smart[176..192].try_into().unwrap()), 1, "Number of Error Information Log Entries");
    assert_eq!(&v.log_page(0x03, 16).unwrap()[8..12], b"0106");
    let san = v.log_page(0x81, 40).unwrap();
    assert_eq!(u16::from_le_bytes([san[0], san[1]]), 0xFFFF);
    assert_eq!(status(v.log_page(0x42, 16).unwrap_err()), Status::InvalidLogPage);
    // A length beyond 1 MiB is refused, not a zero-filled allocation of up to 4 GiB.
    assert_eq!(v.log_page(0x02, logs::MAX_LOG_PAGE_BYTES).unwrap().len(), 1 << 20);
    assert_eq!(status(v.log_page(0x02, logs::MAX_LOG_PAGE_BYTES + 1).unwrap_err()), Status::InvalidField);
    assert_eq!(status(v.log_page(0x02, u32::MAX).unwrap_err()), Status::InvalidField);
    for _ in 0..100 {
        let _ = c.read(NsId(1), nsze, 1, &mut NoTiming);
    }
    assert_eq!(c.view().error_log.len(), ERROR_LOG_ENTRIES);
    assert_eq!(c.view().error_log[0].error_count, 101);
}

#[test]
fn a_write_protected_namespace_blocks_sanitize_and_delete() {
    let written = || {
        let mut c = drive("kioxia-cm6-v-3.2t", 256);
        let nsze = c.namespace(NsId(1)).unwrap().nsze;
        c.write(NsId(1), 0, nsze / 4, &mut NoTiming).unwrap();
        c
    };
    for wp in [WP_PROTECT, WP_UNTIL_POWER_CYCLE, WP_PERMANENT] {
        let mut c = written();
        let nuse = c.nuse(c.namespace(NsId(1)).unwrap());
        c.set_feature(0x84, NsId(1), wp as u32).unwrap();
        // Detached, the namespace is still protected: its data is what §8.12 keeps.
        c.detach_ns(NsId(1), &[CONTROLLER_ID]).unwrap();
        let before = state_json(&c);
        for sanact in [SANACT_BLOCK_ERASE, SANACT_OVERWRITE, SANACT_CRYPTO_ERASE] {
            let e = c.sanitize(SanitizeRequest { sanact, ..Default::default() }).unwrap_err();
            assert_eq!(status(e), Status::NamespaceWriteProtected, "wp {wp}, sanact {sanact}");
        }
        for nsid in [1, NSID_ALL] {
            let e = c.delete_ns(NsId(nsid)).unwrap_err();
            assert!(e.to_string().contains("namespace 1 is write protected"), "{e}");
            assert_eq!(status(e), Status::NamespaceWriteProtected, "wp {wp}, delete {nsid:#x}");
        }
        assert_eq!(state_json(&c), before, "a refused command changes nothing");
        assert_eq!(c.nuse(c.namespace(NsId(1)).unwrap()), nuse);
        // Exit Failure Mode alters no data.
        c.sanitize(SanitizeRequest { sanact: SANACT_EXIT_FAILURE, ..Default::default() }).unwrap();
        c.check_full().unwrap();
    }
    // Unprotected, both go ahead.
    written().sanitize(SanitizeRequest { sanact: SANACT_BLOCK_ERASE, ..Default::default() }).unwrap();
    let mut c = written();
    c.detach_ns(NsId(1), &[CONTROLLER_ID]).unwrap();
    c.delete_ns(NsId(1)).unwrap();
}
