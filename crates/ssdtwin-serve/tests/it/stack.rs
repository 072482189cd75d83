//! A host stack's volume served (`ssdtwin_serve::StackBackend`, docs/host.md): what is written
//! reads back, every byte the drive sees is one the tier sent, and a write the tier has no
//! room for waits for a destage. The real fio against a served stack is
//! tests/test_stack_serve.py.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ssdtwin_core::engine::stack::HostStack;
use ssdtwin_core::host::media;
use ssdtwin_core::host::tier::{Policy, Tier, TierConfig};
use ssdtwin_core::image::Image;
use ssdtwin_core::nvme::NsId;
use ssdtwin_core::rng::Rng;
use ssdtwin_core::spec::DriveSpec;
use ssdtwin_nbd::Backend;
use ssdtwin_serve::{ManualClock, Pace, StackBackend, TwinBackend, TwinConfig, STACK_EXPORT};

const P5316: &str = "intel-p5316-15.36t";

fn stack(img: &Image, policy: Policy) -> HostStack {
    let drive_bytes = img.ctrl.attached(NsId(1)).unwrap().bytes();
    let cfg = TierConfig {
        policy,
        capacity_bytes: 1 << 20,
        high_watermark_pct: 80,
        low_watermark_pct: 60,
        destage_concurrency: 8,
        iu_bytes: 65536,
        drive_bytes,
        stripe_bytes: 65536,
        band_bytes: 16 << 20,
        host_op_pct: 20,
        area_bytes: 1 << 30,
    };
    assert_eq!(cfg.problems(), Vec::<String>::new());
    HostStack { media: media::preset("pmem").unwrap(), tier: Tier::new(cfg) }
}

/// A new 1/256 P5316 image (committed and closed) in a temporary folder, and a host stack of
/// `policy` on its namespace 1: (the folder, which removes the image when dropped, the
/// image's path, the stack, the bytes the host had written to the drive).
fn p5316_and_stack(policy: Policy) -> (tempfile::TempDir, PathBuf, HostStack, u64) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("img");
    let spec = DriveSpec::preset(P5316).unwrap().scaled(256).unwrap();
    let mut img = Image::create(&d, spec, P5316, 3).unwrap();
    img.commit().unwrap();
    let st = stack(&img, policy);
    let host0 = img.ctrl.vendor_log().host_write_bytes;
    (t, d, st, host0)
}

/// `st` served from the image at `d`, paced by the model on a clock the test advances.
fn served_on_manual_clock(d: &Path, st: HostStack) -> (Arc<StackBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let twin = TwinBackend::open_with_clock(d, TwinConfig { pace: Pace::Model, ..TwinConfig::default() }, clock.clone()).unwrap();
    (StackBackend::new(twin, st, 1).unwrap(), clock)
}

fn block(seed: u64) -> Vec<u8> {
    (0..4096u64).map(|i| (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 57)) as u8 ^ i as u8).collect()
}

#[test]
fn a_served_stack_reads_back_what_was_written_and_the_drive_sees_only_the_tier() {
    for policy in [Policy::IuFill, Policy::Log] {
        let (_t, d, st, host0) = p5316_and_stack(policy);
        let (b, clock) = served_on_manual_clock(&d, st);
        let ex = b.open(STACK_EXPORT).unwrap();
        let info = ex.info();
        assert_eq!(info.block_min, 4096);
        // The policy as stack.toml and the CLI name it (it read "IuFill", Rust's name).
        let name = if policy == Policy::Log { "log" } else { "iu-fill" };
        assert!(info.description.starts_with(&format!("host stack: {name} tier of 1048576 bytes on pmem")), "{}", info.description);
        // A log takes a whole write into the tier: no request larger than the room it
        // always gets back, all of it (it destages for a waiting write whatever its
        // watermarks): 1 MiB. It advertised the room above its high watermark, 128 KiB,
        // and nbdcopy's default 256 KiB requests failed with EINVAL.
        assert_eq!(info.block_max, if policy == Policy::Log { 1 << 20 } else { 32 << 20 });
        // 4 MiB of 4 KiB writes, one per microsecond, over 8 MiB of the volume (rewrites
        // included): four times the tier, so it destages (and evicts).
        let mut rng = Rng::new(7);
        let mut newest = std::collections::BTreeMap::new();
        for i in 0..1024u64 {
            let blk = rng.below(2048);
            ex.write(blk * 4096, &block(i), false).unwrap();
            newest.insert(blk, i);
            clock.advance(Duration::from_micros(1));
            if i % 64 == 0 {
                b.tick().unwrap();
            }
        }
        let mut buf = vec![0u8; 4096];
        for (&blk, &i) in &newest {
            ex.read(blk * 4096, &mut buf).unwrap();
            assert!(buf == block(i), "{policy:?}: block {blk} does not read back its newest write");
        }
        b.close().unwrap();
        let after = b.stopped_stack().expect("the tier's final state");
        after.tier.check().unwrap();
        let c = &after.tier.counters;
        assert_eq!(c.host_write_bytes, 1024 * 4096);
        assert!(c.destage_bytes + c.evict_bytes > 0, "{policy:?} {c:?}");
        // iu-fill evicts partial IUs, which the drive read-modify-writes: slower than 4 KiB
        // writes every microsecond, so writes wait for room.
        assert!(policy == Policy::Log || c.stalls > 0, "{policy:?} {c:?}");
        let mut img = Image::open(&d, false).unwrap();
        assert_eq!(img.ctrl.vendor_log().host_write_bytes - host0, c.drive_write_bytes(), "{policy:?}: the drive saw only the tier");
        img.ctrl.check_full().unwrap();
    }
}

#[test]
fn a_log_takes_a_write_of_its_largest_block_whatever_it_holds() {
    // The log advertised its whole capacity (1 MiB) as the largest request, but it keeps
    // what it holds below its low watermark (and up to its high one when that is stale)
    // without destaging: a 1 MiB write then found no room and nothing to wait for, and
    // `qemu-img convert` into a served log stack failed at its first write with ENOSPC.
    // Since a write waiting for room makes the log destage whatever its watermarks, its
    // whole capacity is advertised again, and a write of it gets in however full the log.
    let (_t, d, st, _) = p5316_and_stack(Policy::Log);
    let (b, clock) = served_on_manual_clock(&d, st);
    let ex = b.open(STACK_EXPORT).unwrap();
    let max = ex.info().block_max as usize;
    let big = vec![0xA5u8; max];
    // 700 KiB of 4 KiB writes, then the log settles (destages down to its low watermark).
    for i in 0..175u64 {
        ex.write(i * 4096, &block(i), false).unwrap();
    }
    for _ in 0..100 {
        clock.advance(Duration::from_millis(1));
        b.tick().unwrap();
    }
    assert_eq!(max, 1 << 20, "the log's whole capacity");
    for k in 0..8u64 {
        let at = (64 << 20) + k * max as u64;
        assert!(ex.write(at, &big, false).is_ok(), "a {max} byte write (the advertised maximum) was refused");
        // And 4 KiB writes between them, so the next finds the log partly full.
        ex.write(at + (32 << 20), &block(k), false).unwrap();
        clock.advance(Duration::from_millis(1));
        b.tick().unwrap();
    }
    b.close().unwrap();
}

#[test]
fn a_stack_is_served_with_the_model_pace_only() {
    let (_t, d, st, _) = p5316_and_stack(Policy::IuFill);
    let twin = TwinBackend::open(&d, TwinConfig { pace: Pace::Off, ..TwinConfig::default() }).unwrap();
    let e = StackBackend::new(twin.clone(), st, 1).err().expect("refused");
    assert!(e.to_string().contains("--pace model"), "{e}");
    twin.close().unwrap();
}

#[test]
fn an_iu_fill_trim_loses_the_data_of_whole_ius_only_as_the_drive_does() {
    // The drive deallocates only the whole IUs of a trimmed range (partial IUs keep their
    // data and mapping, as on a served drive), but the stack punched the whole range out
    // of the data file: a 4 KiB trim inside an IU read back zeroes where the drive still
    // maps the block, and the namespace served alone then reported a mapped block a hole.
    let (_t, d, st, _) = p5316_and_stack(Policy::IuFill);
    let (b, clock) = served_on_manual_clock(&d, st);
    let ex = b.open(STACK_EXPORT).unwrap();
    // Two 64 KiB IUs of distinct 4 KiB blocks.
    for i in 0..32u64 {
        ex.write(i * 4096, &block(i), false).unwrap();
        clock.advance(Duration::from_micros(10));
    }
    ex.trim(8192, 4096, false).unwrap(); // one block of IU 0
    ex.trim(65536, 65536, false).unwrap(); // all of IU 1
    let mut buf = vec![0u8; 4096];
    for i in 0..32u64 {
        ex.read(i * 4096, &mut buf).unwrap();
        if i < 16 {
            assert!(buf == block(i), "block {i} of a partly trimmed IU lost its data");
        } else {
            assert!(buf.iter().all(|&x| x == 0), "block {i} of a trimmed IU still reads data");
        }
    }
    b.close().unwrap();
}

#[test]
fn a_read_failed_by_a_sticky_error_is_not_counted_as_read() {
    // A read the drive answers with an error was taken out of the stack's read counters,
    // but one failed by a sticky error (the journal, a destage) was still counted as
    // served: host_read_bytes 8192 for one 4 KiB read served and one refused.
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("img");
    let spec = DriveSpec::preset(P5316).unwrap().scaled(256).unwrap();
    let mut img = Image::create(&d, spec, P5316, 3).unwrap();
    img.commit().unwrap();
    let st = stack(&img, Policy::IuFill);
    drop(img);
    let clock = Arc::new(ManualClock::new());
    let twin = TwinBackend::open_with_clock(&d, TwinConfig { pace: Pace::Model, ..TwinConfig::default() }, clock.clone()).unwrap();
    let b = StackBackend::new(twin.clone(), st, 1).unwrap();
    let ex = b.open(STACK_EXPORT).unwrap();
    let mut buf = vec![0u8; 4096];
    ex.write(0, &block(1), false).unwrap();
    ex.read(0, &mut buf).unwrap(); // a tier hit
    clock.advance(Duration::from_micros(100));
    twin.fail_journal_for_tests();
    // Not in the tier: read from the drive, whose command the journal fails to record.
    assert!(ex.read(1 << 20, &mut buf).is_err(), "the journal failed under the read");
    assert!(twin.failure().is_some(), "sticky");
    let _ = b.close(); // the journal fails the commit too
    let c = b.stopped_stack().expect("the tier's final state").tier.counters;
    assert_eq!((c.host_read_bytes, c.read_hit_bytes), (4096, 4096), "only the read served counts: {c:?}");
}
